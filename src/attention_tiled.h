/*
 * attention_tiled.h: the tiled attention rung's C API (src/attention_tiled.cu),
 * plain C like minitensor.h, which it extends.
 */
#ifndef MT_ATTENTION_TILED_H
#define MT_ATTENTION_TILED_H

#include "minitensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mt_attention again, as the tiled rung: a block of block_queries queries
 * (64 or 128, float32 only; 0 for the default: float32 128 without the
 * causal mask, else 64) walks tiles of keys
 * staged in shared memory, each thread a register tile of the scores and of
 * the output: thread_rows rows of it (4, or 2 for twice the threads a block,
 * float32 only; 0 for 4). D = Dv, and D 32, 64 or 128. */
mt_status mt_attention_tiled(mt_tensor out, mt_tensor lse, mt_tensor q, mt_tensor k, mt_tensor v, double scale,
                             int causal, int block_queries, int thread_rows);
/* Its gradients, deterministic: a kernel per query tile writes dQ (and each
 * row's rowsum(dO * O)), then a kernel per key tile writes dK and dV. The
 * forward's operands and block_queries (the dQ kernel's query block). */
mt_status mt_attention_tiled_backward(mt_tensor dq, mt_tensor dk, mt_tensor dv, mt_tensor dout, mt_tensor q,
                                      mt_tensor k, mt_tensor v, mt_tensor out, mt_tensor lse, double scale,
                                      int causal, int block_queries);

#ifdef __cplusplus
}
#endif

#endif /* MT_ATTENTION_TILED_H */
