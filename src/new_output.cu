/*
 * new_output.cu: an elementwise op and its output's allocation, in one call.
 *
 * On a GPU the kernel of a small op (16 elements) runs for a few hundred
 * nanoseconds; what costs is the host's road to its launch, and on that road
 * each call from Python into the library costs about a microsecond of
 * ctypes and checks. A new result needs two: mt_malloc for its memory, then
 * mt_map or mt_zip to fill it. mt_map_new and mt_zip_new do both in one:
 * they take the memory from the same stream-ordered pool (mt_malloc, so a
 * capture into a CUDA graph treats it as any other allocation) and run the
 * op into it through mt_map or mt_zip, with all their checks.
 * minitensor/ops/elementwise.py makes its new results with them.
 *
 *   out    the result to make: its dtype, shape and strides, which must be
 *          row-major (contiguous); its data and offset are ignored
 *   *data  on success the new buffer (out's data, offset 0), which the
 *          caller owns and frees with mt_free; NULL for a result with no
 *          element. On any failure nothing stays allocated and *data is NULL.
 */
#include "check.h"
#include "descriptor.h"

/* Checks what out's size depends on and allocates its bytes; out->data is
 * the new buffer (NULL for no element). The rest of out's checks are
 * mt_map's and mt_zip's, run on it with its memory. */
static mt_status allocate_output(const char *func, mt_tensor *out, void **data)
{
    if (data == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "data is null");
    *data = nullptr;
    out->data = nullptr;
    out->offset = 0;
    if (out->ndim < 0 || out->ndim > MT_MAX_DIMS)
        return mt_fail(MT_ERR_SHAPE, func, "out has rank %d; the rank must be 0..%d", (int)out->ndim, MT_MAX_DIMS);
    if (out->dtype < 0 || out->dtype >= MT_DTYPE_COUNT)
        return mt_fail(MT_ERR_DTYPE, func, "out has unknown dtype id %d", (int)out->dtype);
    int64_t n = 1;
    for (int d = 0; d < out->ndim; ++d) {
        if (out->shape[d] < 0)
            return mt_fail(MT_ERR_SHAPE, func, "out has a negative size in dim %d", d);
        if (__builtin_mul_overflow(n, out->shape[d], &n))
            return mt_fail(MT_ERR_SHAPE, func, "out has too many elements");
    }
    if (n == 0)
        return MT_OK; /* nothing to allocate; mt_map and mt_zip check the rest */
    if (!is_contiguous(*out))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "out must have row-major strides: a new result is one dense buffer");
    int64_t bytes = 0;
    if (__builtin_mul_overflow(n, (int64_t)dtype_size(out->dtype), &bytes))
        return mt_fail(MT_ERR_SHAPE, func, "out has more bytes than an int64 counts");
    void *p = nullptr;
    MT_TRY(mt_malloc(&p, (size_t)bytes));
    out->data = p;
    return MT_OK;
}

/* Hands the buffer to the caller when the op succeeded, else frees it (its
 * error is the one reported: a free of a buffer nothing used cannot fail). */
static mt_status finish(mt_status status, const mt_tensor &out, void **data)
{
    if (status != MT_OK) {
        if (out.data != nullptr)
            (void)mt_free(out.data);
        return status;
    }
    *data = out.data;
    return MT_OK;
}

mt_status mt_map_new(int op, mt_tensor out, mt_tensor in, double scalar, void **data)
{
    MT_TRY(allocate_output("mt_map_new", &out, data));
    return finish(mt_map(op, out, in, scalar), out, data);
}

mt_status mt_zip_new(int op, mt_tensor out, mt_tensor a, mt_tensor b, void **data)
{
    MT_TRY(allocate_output("mt_zip_new", &out, data));
    return finish(mt_zip(op, out, a, b), out, data);
}
