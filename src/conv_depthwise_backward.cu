/*
 * conv_depthwise_backward.cu: the gradients of a depthwise convolution, the
 * depthwise rung's backward.
 *
 * Depthwise: groups = C = C_out, so output channel c reads input channel c
 * alone, through its own KH x KW weights (weight (C, 1, KH, KW)):
 *
 *     out[n, c, oy, ox] = sum_{i, j} weight[c, i, j] * in[n, c, oy*sh - ph + i*dh, ox*sw - pw + j*dw]
 *
 * A group's matrix product has a single row (M = 1) and K = KH * KW: as a
 * GEMM, 127 of the 128 rows of a tile multiply zeros. Both gradients are
 * short sums instead:
 *
 *   input gradient   grad_in[n, c, y, x] = sum over the taps (i, j) whose
 *                    window read (y, x) of weight[c, i, j] * grad_out[n, c,
 *                    oy, ox]: grad_out convolved with the flipped kernel.
 *                    At stride 1 that is the forward's tiled kernel
 *                    (src/conv_depthwise.cu) with the taps turned round;
 *                    at other strides one thread per input element gathers
 *                    its output neighbours (src/conv_direct.cu, groups = C).
 *   weight gradient  grad_weight[c, i, j] = sum over (n, oy, ox) of
 *                    grad_out[n, c, oy, ox] * in[n, c, oy*sh - ph + i*dh,
 *                    ox*sw - pw + j*dw]: the direct rung's reduction
 *                    (src/conv_direct.cu): blocks of partial sums over
 *                    slices of the pixels, every tap in a register, then
 *                    one pass adding the slices in order. No atomics, the
 *                    same order every run (deterministic, as torch's is not).
 *
 * grad_out is read by its strides: the gradient of a .sum() is an expanded
 * tensor, read in place instead of copied.
 */
#include "conv_depthwise.h"
#include "conv_implicit_gemm.h" /* first, first_out */

mt_status depthwise_check(const char *func, const mt_tensor &written, const mt_tensor &in_shaped,
                          const char *in_name, const mt_tensor &w_shaped, const char *w_name,
                          const mt_tensor &out_shaped, const char *out_name, int sh, int sw, int ph, int pw, int dh,
                          int dw, DirectDims *d)
{
    char i_buf[96], w_buf[96];
    if (in_shaped.ndim == 4 && w_shaped.ndim == 4 &&
        (w_shaped.shape[0] != in_shaped.shape[1] || w_shaped.shape[1] != 1 || in_shaped.shape[1] < 1))
        return mt_fail(MT_ERR_SHAPE, func, "%s %s must be (C, 1, KH, KW) for %s %s: a depthwise convolution "
                       "(groups = C = C_out, C >= 1; a channel multiplier, C_out = m C, is not taken here)", w_name,
                       mt_shape_str(&w_shaped, w_buf, 96), in_name, mt_shape_str(&in_shaped, i_buf, 96));
    const int groups = in_shaped.ndim == 4 && in_shaped.shape[1] <= INT32_MAX ? (int)in_shaped.shape[1] : 1;
    return conv_direct_check(func, written, in_shaped, in_name, w_shaped, w_name, out_shaped, out_name, sh, sw, ph,
                             pw, dh, dw, groups, d);
}

mt_status mt_conv2d_depthwise_input_grad(mt_tensor grad_in, mt_tensor grad_out, mt_tensor weight, int stride_h,
                                         int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w)
{
    const char *func = "mt_conv2d_depthwise_input_grad";
    DirectDims d;
    MT_TRY(depthwise_check(func, grad_in, grad_in, "grad_in", weight, "weight", grad_out, "grad_out", stride_h,
                           stride_w, pad_h, pad_w, dilation_h, dilation_w, &d));
    if (tensor_numel(grad_in) == 0)
        return MT_OK;
    const size_t item = grad_in.dtype == MT_FLOAT32 ? sizeof(float) : sizeof(double);
    if (mt_fast_kernels() && depthwise_input_grad_tiled_takes(d, item)) /* the teaching policy: the gather */
        return depthwise_input_grad_tiled(grad_in, grad_out, weight, d);
    if (grad_in.dtype == MT_FLOAT32)
        return conv_input_grad_by_gather<float>(first_out<float>(grad_in), first<float>(grad_out),
                                                first<float>(weight), d);
    return conv_input_grad_by_gather<double>(first_out<double>(grad_in), first<double>(grad_out),
                                             first<double>(weight), d);
}

mt_status mt_conv2d_depthwise_weight_grad(mt_tensor grad_weight, mt_tensor grad_out, mt_tensor in, int stride_h,
                                          int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w)
{
    const char *func = "mt_conv2d_depthwise_weight_grad";
    DirectDims d;
    MT_TRY(depthwise_check(func, grad_weight, in, "in", grad_weight, "grad_weight", grad_out, "grad_out", stride_h,
                           stride_w, pad_h, pad_w, dilation_h, dilation_w, &d));
    if (tensor_numel(grad_weight) == 0)
        return MT_OK;
    if (grad_weight.dtype == MT_FLOAT32)
        return conv_weight_grad_by_reduction<float>(first_out<float>(grad_weight), first<float>(grad_out),
                                                    first<float>(in), d);
    return conv_weight_grad_by_reduction<double>(first_out<double>(grad_weight), first<double>(grad_out),
                                                 first<double>(in), d);
}
