/*
 * conv_direct.h: the sizes the direct convolution kernels (src/conv_direct.cu)
 * and the depthwise ones (src/conv_depthwise.cu, conv_depthwise_backward.cu)
 * share, and the launchers the depthwise gradients borrow from the direct
 * rung (its weight gradient as a reduction, its input gradient as a gather).
 */
#ifndef MT_CONV_DIRECT_H
#define MT_CONV_DIRECT_H

#include "ops_common.h"

/* A convolution's sizes, every count below 2^31 (the entry points check):
 * in (N, C, H, W) and out (N, C_out, OH, OW) contiguous; grad_out read by
 * its own strides go_stride (elements; an expanded gradient, the gradient
 * of a .sum(), has zeros there and is read without a copy). */
struct DirectDims {
    int n, c, h, w;             /* the input */
    int c_out, oh, ow;          /* the output */
    int c_group, c_out_group;   /* C / groups, C_out / groups */
    int kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t go_stride[4];       /* grad_out's strides (N, C_out, OH, OW) */
};

/* The checks of the direct entry points (and, with groups = C, the
 * depthwise ones). `written` is the tensor the call writes (out, grad_in or
 * grad_weight); in_shaped (N, C, H, W), w_shaped (C_out, C / groups, KH, KW)
 * and out_shaped (N, C_out, OH, OW) name the three roles, one of them
 * `written`; out_shaped may have any strides unless it is written, the
 * others must be contiguous. Fills d. */
mt_status conv_direct_check(const char *func, const mt_tensor &written, const mt_tensor &in_shaped,
                            const char *in_name, const mt_tensor &w_shaped, const char *w_name,
                            const mt_tensor &out_shaped, const char *out_name, int sh, int sw, int ph, int pw, int dh,
                            int dw, int groups, DirectDims *d);

/* has_bias's checks: bias a contiguous (C_out,) tensor of out's dtype, apart from out. */
mt_status conv_check_bias(const char *func, const mt_tensor &out, const mt_tensor &bias, int c_out);

/* The output size along one dim: torch's floor formula, or 0 when no window fits. */
int64_t conv_window_count(int64_t size, int64_t kernel, int stride, int pad, int dilation);

/* grad_weight (C_out, C / groups, KH, KW) = the sum over (N, OH, OW) of
 * grad_out times the input each tap read: per (output channel, input
 * channel) pair, blocks of partial sums over slices of the N OH OW pixels,
 * then one pass adding each tap's slices in order (deterministic). */
template <typename T>
mt_status conv_weight_grad_by_reduction(T *grad_weight, const T *grad_out, const T *in, const DirectDims &d);

/* grad_in (N, C, H, W) = each input element's gather of the grad_out
 * elements its value fed, times their taps (one thread per element). */
template <typename T>
mt_status conv_input_grad_by_gather(T *grad_in, const T *grad_out, const T *weight, const DirectDims &d);

#endif /* MT_CONV_DIRECT_H */
