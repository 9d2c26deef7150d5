/*
 * pool.h: the pooling forwards that allocate their own outputs
 * (src/pool_new.cu), the public entry points. A C header, as minitensor.h.
 */
#ifndef MT_POOL_H
#define MT_POOL_H

#include "minitensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mt_max_pool2d and mt_avg_pool2d with their outputs allocated here, as
 * mt_map_new does (src/new_output.cu): out (and indices, int64; NULL for
 * the values only) describe them, dtype, shape and row-major strides; on
 * success their data are new buffers the caller owns and frees with mt_free
 * (NULL for no element), on any failure nothing stays allocated and the
 * data are NULL. One call from Python instead of three (two allocations and
 * the pool), the descriptors by pointer. */
mt_status mt_max_pool2d_new(mt_tensor *out, mt_tensor *indices, const mt_tensor *in, int kernel_h, int kernel_w,
                            int stride_h, int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w);
mt_status mt_avg_pool2d_new(mt_tensor *out, const mt_tensor *in, int kernel_h, int kernel_w, int stride_h,
                            int stride_w, int pad_h, int pad_w, int count_include_pad, int64_t divisor);

#ifdef __cplusplus
}
#endif

#endif /* MT_POOL_H */
