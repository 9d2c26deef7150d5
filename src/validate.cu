/*
 * validate.cu: the argument checks every entry point runs before it launches
 * anything, so that a rejected call leaves its output untouched and says
 * exactly what was wrong ("mt_zip: a has shape (2, 3) which does not
 * broadcast to out's shape (4, 3)").
 *
 * A bad descriptor reaching a kernel would not fail cleanly: it would read or
 * write wild addresses, and the fault would surface later as an unusable CUDA
 * context. Checking on the host is cheap and turns it into a message.
 */
#include <stdio.h>

#include "check.h"
#include "descriptor.h"
#include "indexing.h"

const char *mt_shape_str(const mt_tensor *t, char *buf, size_t bufsize)
{
    if (buf == nullptr || bufsize == 0)
        return "";
    buf[0] = '\0';
    if (t == nullptr) {
        snprintf(buf, bufsize, "(null)");
        return buf;
    }
    /* Written like a Python tuple, the form students see on the Python side:
     * (), (3,), (2, 3). */
    int ndim = t->ndim;
    if (ndim < 0 || ndim > MT_MAX_DIMS) {
        snprintf(buf, bufsize, "(invalid rank %d)", ndim);
        return buf;
    }
    size_t used = 0;
    used += (size_t)snprintf(buf + used, bufsize - used, "(");
    for (int d = 0; d < ndim && used < bufsize; ++d) {
        const char *sep = d + 1 < ndim ? ", " : (ndim == 1 ? "," : "");
        used += (size_t)snprintf(buf + used, bufsize - used, "%lld%s", (long long)t->shape[d], sep);
    }
    if (used < bufsize)
        snprintf(buf + used, bufsize - used, ")");
    return buf;
}

/* Room for "(" + 8 dims of up to 20 characters + separators + ")". */
constexpr size_t kShapeBuf = 256;

mt_status mt_check_tensor(const char *func, const char *name, const mt_tensor *t)
{
    if (t == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s is a null descriptor", name);
    if (t->ndim < 0 || t->ndim > MT_MAX_DIMS)
        return mt_fail(MT_ERR_SHAPE, func, "%s has rank %d; the rank must be 0..%d", name,
                       (int)t->ndim, MT_MAX_DIMS);
    if (t->dtype < 0 || t->dtype >= MT_DTYPE_COUNT)
        return mt_fail(MT_ERR_DTYPE, func, "%s has unknown dtype id %d", name, (int)t->dtype);

    char shape[kShapeBuf];
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; ++d) {
        if (t->shape[d] < 0)
            return mt_fail(MT_ERR_SHAPE, func, "%s has shape %s with a negative size in dim %d",
                           name, mt_shape_str(t, shape, sizeof shape), d);
        if (t->strides[d] < 0)
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                           "%s has stride %lld in dim %d; negative strides are not supported",
                           name, (long long)t->strides[d], d);
    }
    for (int d = 0; d < t->ndim; ++d) {
        /* A shape whose element count overflows 64 bits cannot describe real
         * memory, and would make every index computation wrong. */
        if (__builtin_mul_overflow(numel, t->shape[d], &numel))
            return mt_fail(MT_ERR_SHAPE, func, "%s has shape %s, too many elements", name,
                           mt_shape_str(t, shape, sizeof shape));
    }
    if (t->offset < 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s has negative offset %lld", name,
                       (long long)t->offset);
    /* An empty tensor is never read, so it may come without storage. */
    if (t->data == nullptr && numel > 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s has shape %s but a null data pointer",
                       name, mt_shape_str(t, shape, sizeof shape));
    return MT_OK;
}

mt_status mt_check_output(const char *func, const char *name, const mt_tensor *t)
{
    /* Every op that writes an output runs kernels built on the index helpers
     * (the indexing task), so a handout with them stubbed stops here, before
     * any launch. */
    MT_TRY(MT_TASK_CHECK(indexing));
    MT_TRY(mt_check_tensor(func, name, t));
    /* A stride of 0 makes every index along that dim the same element: the
     * threads that compute different outputs would all write it, and the
     * result would depend on which thread wrote last. */
    for (int d = 0; d < t->ndim; ++d) {
        if (t->strides[d] == 0 && t->shape[d] > 1) {
            char shape[kShapeBuf];
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                           "%s has shape %s with stride 0 in dim %d (a broadcast view); an "
                           "output must not repeat elements",
                           name, mt_shape_str(t, shape, sizeof shape), d);
        }
    }
    return MT_OK;
}

mt_status mt_check_same_dtype(const char *func, const mt_tensor *a, const char *aname,
                              const mt_tensor *b, const char *bname)
{
    if (a->dtype != b->dtype)
        return mt_fail(MT_ERR_DTYPE, func, "%s is %s but %s is %s", aname, dtype_name(a->dtype),
                       bname, dtype_name(b->dtype));
    return MT_OK;
}

mt_status mt_check_float(const char *func, const char *name, const mt_tensor *t)
{
    if (t->dtype == MT_FLOAT32 || t->dtype == MT_FLOAT64)
        return MT_OK;
    return mt_fail(MT_ERR_DTYPE, func, "%s has dtype %s; this op takes float32 or float64", name,
                   dtype_name(t->dtype));
}

mt_status mt_check_same_shape(const char *func, const mt_tensor *a, const char *aname,
                              const mt_tensor *b, const char *bname)
{
    bool same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; ++d)
        same = a->shape[d] == b->shape[d];
    if (!same) {
        char ashape[kShapeBuf];
        char bshape[kShapeBuf];
        return mt_fail(MT_ERR_SHAPE, func, "%s has shape %s but %s has shape %s", aname,
                       mt_shape_str(a, ashape, sizeof ashape), bname,
                       mt_shape_str(b, bshape, sizeof bshape));
    }
    return MT_OK;
}

mt_status mt_check_broadcast(const char *func, const mt_tensor *small, const char *sname,
                             const mt_tensor *big, const char *bname)
{
    /* NumPy rules, with the result fixed in advance: align the shapes on the
     * right; each dim of `small` must be 1 (repeated) or equal to big's.
     * `small` may not have more dims than `big`. */
    bool ok = small->ndim <= big->ndim;
    int lead = big->ndim - small->ndim;
    for (int d = 0; ok && d < small->ndim; ++d)
        ok = small->shape[d] == 1 || small->shape[d] == big->shape[d + lead];
    if (!ok) {
        char sshape[kShapeBuf];
        char bshape[kShapeBuf];
        return mt_fail(MT_ERR_SHAPE, func, "%s has shape %s which does not broadcast to %s's shape %s",
                       sname, mt_shape_str(small, sshape, sizeof sshape), bname,
                       mt_shape_str(big, bshape, sizeof bshape));
    }
    return MT_OK;
}

mt_status mt_check_id(const char *func, const char *what, int id, int count)
{
    if (id >= 0 && id < count)
        return MT_OK;
    return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "unknown %s id %d (valid ids are 0..%d)", what, id,
                   count - 1);
}

mt_status mt_check_dim(const char *func, const mt_tensor *t, const char *name, int dim)
{
    if (dim >= 0 && dim < t->ndim)
        return MT_OK;
    if (t->ndim == 0)
        return mt_fail(MT_ERR_DIM, func, "dim %d is out of range: %s has shape () and no dims", dim,
                       name);
    char shape[kShapeBuf];
    return mt_fail(MT_ERR_DIM, func, "dim %d is out of range for %s of shape %s (valid dims are 0..%d)",
                   dim, name, mt_shape_str(t, shape, sizeof shape), t->ndim - 1);
}

mt_status mt_check_binary(const char *func, const mt_tensor *out, const mt_tensor *a, const char *aname,
                          const mt_tensor *b, const char *bname)
{
    MT_TRY(mt_check_output(func, "out", out));
    MT_TRY(mt_check_tensor(func, aname, a));
    MT_TRY(mt_check_tensor(func, bname, b));
    MT_TRY(mt_check_same_dtype(func, a, aname, out, "out"));
    return mt_check_same_dtype(func, b, bname, out, "out");
}

/* ---- extents: the memory a descriptor may touch ----------------------------- */

/* "(12, 4, 1)", like mt_shape_str, for the strides in messages. */
static const char *strides_str(const mt_tensor *t, char *buf, size_t bufsize)
{
    mt_tensor as_shape = *t;
    for (int d = 0; d < t->ndim && d < MT_MAX_DIMS; ++d)
        as_shape.shape[d] = t->strides[d];
    return mt_shape_str(&as_shape, buf, bufsize);
}

mt_status mt_check_range(const char *func, const char *name, const void *p, size_t bytes)
{
    mt_buffer buf;
    if (!mt_find_buffer(p, &buf))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "%s %p is in no live mt_malloc allocation or registered buffer (a freed "
                       "buffer, or memory the library does not know)",
                       name, p);
    const size_t into = (size_t)((uintptr_t)p - buf.base);
    if (bytes > buf.bytes - into)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "%s %p + %zu bytes runs past the end of its %s (%zu bytes at %p; %s is %zu "
                       "bytes into it, so %zu bytes are left)",
                       name, p, bytes, buf.foreign ? "registered buffer" : "allocation", buf.bytes,
                       (void *)buf.base, name, into, buf.bytes - into);
    return MT_OK;
}

mt_status mt_check_extent(const char *func, const char *name, const mt_tensor *t)
{
    uint64_t lo, hi;
    char shape[kShapeBuf];
    char strides[kShapeBuf];
    if (!tensor_byte_extent(*t, &lo, &hi))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "%s has offset %lld, shape %s and strides %s: the byte position of its last "
                       "element overflows 64 bits, so no allocation can hold it",
                       name, (long long)t->offset, mt_shape_str(t, shape, sizeof shape),
                       strides_str(t, strides, sizeof strides));
    if (hi == 0)
        return MT_OK; /* empty: addresses nothing, may even have no storage */
    mt_buffer buf;
    if (!mt_find_buffer(t->data, &buf))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "%s has data pointer %p, which is in no live mt_malloc allocation or "
                       "registered buffer (a freed buffer, or memory the library does not know)",
                       name, t->data);
    const uint64_t into = (uint64_t)((uintptr_t)t->data - buf.base);
    const uint64_t left = buf.bytes - into;
    if (hi > left)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "%s (offset %lld, shape %s, strides %s, %s) addresses bytes %llu..%llu from "
                       "its data pointer, but its %s holds %llu bytes from there (%zu bytes at %p, "
                       "data %llu bytes into it)",
                       name, (long long)t->offset, mt_shape_str(t, shape, sizeof shape),
                       strides_str(t, strides, sizeof strides), dtype_name(t->dtype),
                       (unsigned long long)lo, (unsigned long long)hi - 1,
                       buf.foreign ? "registered buffer" : "allocation", (unsigned long long)left,
                       buf.bytes, (void *)buf.base, (unsigned long long)into);
    return MT_OK;
}

mt_status mt_check_alias(const char *func, const mt_tensor *out, const mt_tensor *in, const char *name)
{
    if (!tensors_overlap(*out, *in) || same_view(*out, *in))
        return MT_OK;
    char out_shape[kShapeBuf], out_strides[kShapeBuf], in_shape[kShapeBuf], in_strides[kShapeBuf];
    return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                   "out (offset %lld, shape %s, strides %s, %s) partially overlaps %s (offset %lld, "
                   "shape %s, strides %s, %s): the result would depend on the order of the threads. "
                   "out may only be exactly %s (same data, offset, dtype, shape and strides) or "
                   "share no memory with it; copy %s first",
                   (long long)out->offset, mt_shape_str(out, out_shape, sizeof out_shape),
                   strides_str(out, out_strides, sizeof out_strides), dtype_name(out->dtype), name,
                   (long long)in->offset, mt_shape_str(in, in_shape, sizeof in_shape),
                   strides_str(in, in_strides, sizeof in_strides), dtype_name(in->dtype), name, name);
}
