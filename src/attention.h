/*
 * attention.h: the argument checks the attention rungs share (src/attention.cu
 * defines them; src/attention_warp.cu uses them too), so that every rung
 * refuses the same misshapen input with the same message.
 */
#ifndef MT_ATTENTION_H
#define MT_ATTENTION_H

#include "minitensor.h"

/* mt_attention's operands: q (B, L, D), k (B, S, D), v (B, S, Dv), out
 * (B, L, Dv) and lse (B, L), contiguous, one float dtype, D and Dv at most
 * max_dim, out and lse overlapping no input. Initialises the library first. */
mt_status check_attention_forward(const char *func, const mt_tensor &out, const mt_tensor &lse, const mt_tensor &q,
                                  const mt_tensor &k, const mt_tensor &v, int max_dim);

/* mt_attention_backward's: the forward's operands, dout and out (B, L, Dv),
 * and dq, dk, dv of q's, k's and v's shapes, overlapping no input nor each
 * other. */
mt_status check_attention_backward(const char *func, const mt_tensor &dq, const mt_tensor &dk, const mt_tensor &dv,
                                   const mt_tensor &dout, const mt_tensor &q, const mt_tensor &k, const mt_tensor &v,
                                   const mt_tensor &out, const mt_tensor &lse, int max_dim);

#endif /* MT_ATTENTION_H */
