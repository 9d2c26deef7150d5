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
 * (64 or 128: 4 or 8 warps of 16 rows; 0 for 64), tiles of block_keys keys
 * (32 or 64; 0 for the default: 64 at head dim 64, 32 at 128). D = Dv, and
 * D 64 or 128; float32 only. Saves the same lse as the other one-kernel
 * rungs, so their backward rungs (mt_attention_warp_backward,
 * mt_attention_tiled_backward) take it. */
mt_status mt_attention_mma(mt_tensor out, mt_tensor lse, mt_tensor q, mt_tensor k, mt_tensor v, double scale,
                           int causal, int block_queries, int block_keys);

#ifdef __cplusplus
}
#endif

#endif /* MT_ATTENTION_MMA_H */
