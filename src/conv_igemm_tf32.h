/*
 * conv_igemm_tf32.h: the TF32 tensor-core convolution rung's C API
 * (src/conv_igemm_tf32.cu), plain C like minitensor.h, which it extends.
 */
#ifndef MT_CONV_IGEMM_TF32_H
#define MT_CONV_IGEMM_TF32_H

#include "minitensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mt_conv2d_igemm and its two gradients again, the tile products on tensor
 * cores: every operand rounded to TF32 (10 bits of mantissa, nearest, ties
 * away from zero), the sums in float, so results differ from float32's by
 * about 1e-3 relative (minitensor/ops/conv_tf32.py runs these while
 * mt.backends.cuda.conv.allow_tf32 is set). The same operands, checks and
 * errors as mt_conv2d_igemm*, float32 only (float64 is MT_ERR_DTYPE).
 * config: -1 (the library's tile for the shape) or 0 ..
 * mt_conv2d_tf32_config_count() - 1, each named by
 * mt_conv2d_tf32_config_name. */
int mt_conv2d_tf32_config_count(void);
const char *mt_conv2d_tf32_config_name(int config);
mt_status mt_conv2d_tf32(mt_tensor out, mt_tensor in, mt_tensor weight, mt_tensor bias, int has_bias, int stride_h,
                         int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups, int config);
mt_status mt_conv2d_tf32_input_grad(mt_tensor grad_in, mt_tensor grad_out, mt_tensor weight, int stride_h,
                                    int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups,
                                    int config);
mt_status mt_conv2d_tf32_weight_grad(mt_tensor grad_weight, mt_tensor grad_out, mt_tensor in, int stride_h,
                                     int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups,
                                     int config);

#ifdef __cplusplus
}
#endif

#endif /* MT_CONV_IGEMM_TF32_H */
