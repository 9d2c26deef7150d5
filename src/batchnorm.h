/*
 * batchnorm.h: batch normalization in training mode (src/batchnorm.cu), the
 * public entry points. A C header, as minitensor.h: the C tests include it.
 *
 * in is a contiguous (N, C, S) tensor (an (N, C, H, W) image batch seen with
 * S = H * W; (N, C) as S = 1); each channel c is normalized over its N * S
 * values, count = N * S >= 2.
 */
#ifndef MT_BATCHNORM_H
#define MT_BATCHNORM_H

#include "minitensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What is there: weight and bias (C,) (the affine part), running_mean and
 * running_var (C,) (updated in place); for the backward, MT_BATCH_NORM_GRAD_IN
 * asks for grad_in, MT_BATCH_NORM_WEIGHT / _BIAS for grad_weight / grad_bias. */
enum { MT_BATCH_NORM_WEIGHT = 1, MT_BATCH_NORM_BIAS = 2, MT_BATCH_NORM_RUNNING = 4, MT_BATCH_NORM_GRAD_IN = 8 };

/* out = (in - mean_c) * rstd_c * weight_c + bias_c, with mean_c and the biased
 * variance var_c of channel c's values, rstd_c = 1 / sqrt(var_c + eps), saved
 * into mean and rstd (C,). With MT_BATCH_NORM_RUNNING, torch's update:
 * running_mean = (1 - momentum) * running_mean + momentum * mean_c and
 * running_var = (1 - momentum) * running_var + momentum * var_c * count / (count - 1)
 * (the unbiased variance). out may be in. */
mt_status mt_batch_norm(mt_tensor out, mt_tensor mean, mt_tensor rstd, mt_tensor in, mt_tensor weight,
                        mt_tensor bias, mt_tensor running_mean, mt_tensor running_var, int flags,
                        double momentum, double eps);

/* The gradients of mt_batch_norm from grad_out (N, C, S) and the forward's in,
 * mean, rstd and weight (flags & MT_BATCH_NORM_WEIGHT: weight is there): those
 * `want` names; grad_weight_c = sum(g * xhat), grad_bias_c = sum(g), and
 * grad_in = weight_c * rstd_c * (g - sum(g) / count - xhat * sum(g * xhat) / count). */
mt_status mt_batch_norm_backward(mt_tensor grad_in, mt_tensor grad_weight, mt_tensor grad_bias, mt_tensor grad_out,
                                 mt_tensor in, mt_tensor mean, mt_tensor rstd, mt_tensor weight, int want,
                                 int flags);

#ifdef __cplusplus
}
#endif

#endif /* MT_BATCHNORM_H */
