/*
 * attention_mma.h: the tensor-core attention rung's C API
 * (src/attention_mma.cu), plain C like minitensor.h, which it extends.
 */
#ifndef MT_ATTENTION_MMA_H
#define MT_ATTENTION_MMA_H

#include "minitensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mt_attention again, as the mma rung: float32 on the tensor cores at
 * float32's accuracy (3xTF32: each operand split into a TF32 value and a
 * TF32 remainder, three mma.sync products), block_queries queries a block
 * (64 or 128: 4 or 8 warps of 16 rows), tiles of block_keys keys (16, 32
 * or 64); 0 for the default by shape: 128 x 64 at head dim 64, 64 x 32 at
 * 128; up to 256 queries 64 x 32 causal, and 128 x 64 unmasked at head dim
 * 128 where a block may have 203 KiB of shared memory. D = Dv, and
 * D 64 or 128; float32 only. Saves the same lse as the other one-kernel
 * rungs, so their backward rungs (mt_attention_warp_backward,
 * mt_attention_tiled_backward) take it. */
mt_status mt_attention_mma(mt_tensor out, mt_tensor lse, mt_tensor q, mt_tensor k, mt_tensor v, double scale,
                           int causal, int block_queries, int block_keys);
/* Its gradients on the tensor cores (src/attention_mma_backward.cu), 3xTF32
 * and deterministic: a kernel per 64 queries writes dQ (and each row's
 * rowsum(dO * O)), then a kernel per 64 keys writes dK and dV. The forward's
 * operands and lse (any rung's: they save the same); float32, D = Dv 64 or
 * 128; block_cols the rows of the tiles each kernel walks (keys for dQ,
 * queries for dK and dV): 32 or 64, 0 for the default (32). */
mt_status mt_attention_mma_backward(mt_tensor dq, mt_tensor dk, mt_tensor dv, mt_tensor dout, mt_tensor q,
                                    mt_tensor k, mt_tensor v, mt_tensor out, mt_tensor lse, double scale,
                                    int causal, int block_cols);

/* Whether this GPU runs the mma rung at head dim head_dim with its default
 * tiles: *forward for mt_attention_mma, *backward for
 * mt_attention_mma_backward, each 1 or 0. Both need compute capability 8.0
 * (mma.sync, cp.async) and their shared memory within what a block may opt
 * in to (at head dim 128 the backward's 141 KiB is more than sm_86 and
 * sm_89 allow). Both 0 for head dims other than 64 and 128; both 1 on the
 * emulator. F.scaled_dot_product_attention asks before it takes the rung. */
mt_status mt_attention_mma_supported(int head_dim, int *forward, int *backward);

#ifdef __cplusplus
}
#endif

#endif /* MT_ATTENTION_MMA_H */
