/*
 * pool_new.cu: a pooling forward and its outputs' allocation, in one call
 * (mt_max_pool2d_new, mt_avg_pool2d_new; src/pool.h).
 *
 * A pooling layer called once (not in a loop of kernels) waits for its host
 * road: Python, then a call into the library for each output's memory and
 * one for the kernel, each call about a microsecond of ctypes and checks,
 * and the three descriptors copied by value into the kernel's call. As
 * mt_map_new does for the elementwise ops (src/new_output.cu), these take
 * the outputs' descriptors by pointer, allocate their memory from the same
 * stream-ordered pool (mt_malloc), and run mt_max_pool2d / mt_avg_pool2d,
 * with all their checks, into it. minitensor/ops/pool.py makes its forward
 * results with them.
 */
#include "check.h"
#include "descriptor.h"
#include "pool.h"

/* Allocates out's bytes (out->data; NULL for no element): out must be a
 * row-major (contiguous) description of a size an int64 counts in bytes. */
static mt_status allocate(const char *func, const char *name, mt_tensor *out)
{
    out->data = nullptr;
    out->offset = 0;
    if (out->ndim != 4)
        return mt_fail(MT_ERR_SHAPE, func, "%s has rank %d; a pooling output is (N, C, OH, OW)", name,
                       (int)out->ndim);
    if (out->dtype < 0 || out->dtype >= MT_DTYPE_COUNT)
        return mt_fail(MT_ERR_DTYPE, func, "%s has unknown dtype id %d", name, (int)out->dtype);
    int64_t n = 1;
    for (int d = 0; d < 4; ++d) {
        if (out->shape[d] < 0)
            return mt_fail(MT_ERR_SHAPE, func, "%s has a negative size in dim %d", name, d);
        if (__builtin_mul_overflow(n, out->shape[d], &n))
            return mt_fail(MT_ERR_SHAPE, func, "%s has too many elements", name);
    }
    if (n == 0)
        return MT_OK; /* nothing to allocate; the pool's checks see the rest */
    if (!is_contiguous(*out))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s must have row-major strides: a new result is one "
                       "dense buffer", name);
    int64_t bytes = 0;
    if (__builtin_mul_overflow(n, (int64_t)dtype_size(out->dtype), &bytes))
        return mt_fail(MT_ERR_SHAPE, func, "%s has more bytes than an int64 counts", name);
    void *p = nullptr;
    MT_TRY(mt_malloc(&p, (size_t)bytes));
    out->data = p;
    return MT_OK;
}

/* Keeps the buffers when the pool succeeded, else frees them (the pool's
 * error is the one reported: a free of a buffer nothing used cannot fail). */
static mt_status finish(mt_status status, mt_tensor *out, mt_tensor *indices)
{
    if (status != MT_OK) {
        for (mt_tensor *t : {out, indices})
            if (t != nullptr && t->data != nullptr) {
                (void)mt_free(t->data);
                t->data = nullptr;
            }
    }
    return status;
}

mt_status mt_max_pool2d_new(mt_tensor *out, mt_tensor *indices, const mt_tensor *in, int kernel_h, int kernel_w,
                            int stride_h, int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w)
{
    const char *func = "mt_max_pool2d_new";
    if (out == nullptr || in == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s is null", out == nullptr ? "out" : "in");
    if (indices != nullptr)
        indices->data = nullptr;
    MT_TRY(allocate(func, "out", out));
    if (indices != nullptr)
        MT_TRY(finish(allocate(func, "indices", indices), out, indices));
    mt_tensor none;
    memset(&none, 0, sizeof none); /* mt_max_pool2d's "no indices" */
    return finish(mt_max_pool2d(*out, indices != nullptr ? *indices : none, *in, kernel_h, kernel_w, stride_h,
                                stride_w, pad_h, pad_w, dilation_h, dilation_w),
                  out, indices);
}

mt_status mt_avg_pool2d_new(mt_tensor *out, const mt_tensor *in, int kernel_h, int kernel_w, int stride_h,
                            int stride_w, int pad_h, int pad_w, int count_include_pad, int64_t divisor)
{
    const char *func = "mt_avg_pool2d_new";
    if (out == nullptr || in == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s is null", out == nullptr ? "out" : "in");
    MT_TRY(allocate(func, "out", out));
    return finish(mt_avg_pool2d(*out, *in, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, count_include_pad,
                                divisor),
                  out, nullptr);
}
