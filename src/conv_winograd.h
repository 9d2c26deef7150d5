/*
 * conv_winograd.h: the Winograd rung's C API (src/conv_winograd.cu), plain C
 * like minitensor.h, which it extends. The steps of a dense 3x3, stride-1
 * convolution F(2x2, 3x3), with the 16 matrix products between them left to
 * the caller (minitensor/ops/conv.py runs them as one batched matmul):
 *
 *     u = filter(weight)              (16, K, C), or (16, C, K) flipped
 *     v = input(in, padding)          (16, C, P), P = N ceil(OH/2) ceil(OW/2)
 *     m = u @ v                       (16, K, P)     (the caller)
 *     out = output(m) + bias          (N, K, OH, OW)
 *
 * and the weight gradient, the filter and output steps run backwards:
 *
 *     v = input(in, padding)          (16, C, P), as above
 *     dm = output_grad(grad)          (16, K, P)
 *     du = dm @ v^T, P in S slices    (16, S, K, C)  (the caller)
 *     weight_grad = filter_grad(du)   (K, C, 3, 3)
 *
 * float32 and float64; every operand contiguous; a shape that does not fit
 * the others is MT_ERR_SHAPE, naming both.
 */
#ifndef MT_CONV_WINOGRAD_H
#define MT_CONV_WINOGRAD_H

#include "minitensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* u (16, K, C) = G g G^T of each filter g = weight[k][c] of weight (K, C, 3,
 * 3); flip != 0: u (16, C, K) of the input gradient's filters, each turned by
 * 180 degrees, the channels swapped. */
mt_status mt_conv2d_winograd_filter(mt_tensor u, mt_tensor weight, int flip);
/* v (16, C, P) = B^T d B of each 4x4 tile d of in (N, C, H, W) zero-padded by
 * (pad_h, pad_w): tile p = (n ceil(OH/2) + ty) ceil(OW/2) + tx starts at row
 * 2 ty - pad_h, column 2 tx - pad_w; OH = H + 2 pad_h - 2 (>= 1), OW alike. */
mt_status mt_conv2d_winograd_input(mt_tensor v, mt_tensor in, int pad_h, int pad_w);
/* out (N, K, OH, OW) = A^T m A of each tile of m (16, K, P), plus bias (K,)
 * when has_bias. */
mt_status mt_conv2d_winograd_output(mt_tensor out, mt_tensor m, mt_tensor bias, int has_bias);

/* dm (16, K, P) = A e A^T of each 2x2 block e of grad (N, K, OH, OW), tiles
 * numbered as above, zeros past an odd side. */
mt_status mt_conv2d_winograd_output_grad(mt_tensor dm, mt_tensor grad);
/* weight_grad (K, C, 3, 3) = G^T d G of each d = the sum over s, in order, of
 * du[.][s][k][c] (du (16, S, K, C): S partial products). */
mt_status mt_conv2d_winograd_filter_grad(mt_tensor weight_grad, mt_tensor du);

#ifdef __cplusplus
}
#endif

#endif /* MT_CONV_WINOGRAD_H */
