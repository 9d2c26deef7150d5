/*
 * conv_igemm_tf32_nhwc.h: the TF32 convolution's forward with 16-byte
 * gathers (src/conv_igemm_tf32_nhwc.cu), called by mt_conv2d_tf32
 * (src/conv_igemm_tf32.cu) once it has checked the operands.
 */
#ifndef MT_CONV_IGEMM_TF32_NHWC_H
#define MT_CONV_IGEMM_TF32_NHWC_H

#include "conv_implicit_gemm.h"

/* Whether the rung can run d: C / groups a multiple of 4 (whole 16-byte
 * chunks of channels), N OH OW pixels in an int. */
bool conv_tf32_nhwc_applies(const ConvDims &d);

/* out (contiguous NCHW) = in (contiguous NCHW) convolved by weight
 * (contiguous), plus bias (or nullptr), on tensor cores, operands rounded to
 * TF32; copies in to NHWC and weight to [c_out][kh][kw][c] in scratch. */
mt_status conv_tf32_nhwc_forward(float *out, const float *in, const float *weight, const float *bias,
                                 const ConvDims &d);

#endif /* MT_CONV_IGEMM_TF32_NHWC_H */
