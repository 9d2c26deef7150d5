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
 * Their descriptors come by pointer, not by value as mt_map's and mt_zip's:
 * ctypes passes a pointer to a descriptor it already holds in about half the
 * time it takes to copy three 152-byte structs into the call, and the
 * result's address goes back in out->data, with no pointer object to make.
 *
 *   out    the result to make: its dtype, shape and strides, which must be
 *          row-major (contiguous); its data and offset are overwritten. On
 *          success out->data is the new buffer (offset 0), which the caller
 *          owns and frees with mt_free; NULL for a result with no element.
 *          On any failure nothing stays allocated and out->data is NULL.
 */
#include "check.h"
#include "descriptor.h"

/* Checks what out's size depends on and allocates its bytes; out->data is
 * the new buffer (NULL for no element). The rest of out's checks are
 * mt_map's and mt_zip's, run on it with its memory. */
static mt_status allocate_output(const char *func, mt_tensor *out)
{
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

/* Keeps the buffer when the op succeeded, else frees it (its error is the
 * one reported: a free of a buffer nothing used cannot fail). */
static mt_status finish(mt_status status, mt_tensor *out)
{
    if (status != MT_OK && out->data != nullptr) {
        (void)mt_free(out->data);
        out->data = nullptr;
    }
    return status;
}

/* Null pointers are refused before anything is read or allocated. */
static mt_status check_pointers(const char *func, const mt_tensor *out, const mt_tensor *a, const mt_tensor *b)
{
    if (out == nullptr || a == nullptr || b == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s is null", out == nullptr ? "out" : "an input");
    return MT_OK;
}

mt_status mt_map_new(int op, mt_tensor *out, const mt_tensor *in, double scalar)
{
    MT_TRY(check_pointers("mt_map_new", out, in, in));
    MT_TRY(allocate_output("mt_map_new", out));
    return finish(mt_map(op, *out, *in, scalar), out);
}

mt_status mt_zip_new(int op, mt_tensor *out, const mt_tensor *a, const mt_tensor *b)
{
    MT_TRY(check_pointers("mt_zip_new", out, a, b));
    MT_TRY(allocate_output("mt_zip_new", out));
    return finish(mt_zip(op, *out, *a, *b), out);
}
