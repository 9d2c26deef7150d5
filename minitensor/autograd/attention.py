"""attention: the gradient rules of the masked softmax and of fused attention."""

from __future__ import annotations

from .. import ops
from .engine import Function
from .helpers import unbroadcast


class MaskedSoftmax(Function):
    """softmax(x * scale + mask) over the last dim, keys after their query hidden
    when causal: the attention ladder's fused rung (ops.masked_softmax). With
    y the weights and d = y * (grad - sum(grad * y)) the softmax's gradient,
    dx = scale * d and dmask = d summed over the dims the mask was broadcast in."""

    @staticmethod
    def forward(ctx, x, mask, scale, causal):
        out = ops.masked_softmax(x, mask, scale, causal)
        ctx.scale = scale
        ctx.mask_shape = None if mask is None else mask.shape
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        if ctx.mask_shape is None or not ctx.needs_input_grad[1]:
            return ops.softmax_backward(grad, y, -1, scale=ctx.scale), None, None, None
        d = ops.softmax_backward(grad, y, -1)
        gx = ops.mul(d, ctx.scale) if ctx.needs_input_grad[0] else None
        return gx, unbroadcast(d, ctx.mask_shape), None, None


class Attention(Function):
    """softmax(q @ k^T * scale [causal]) @ v over (..., L, D), (..., S, D), (..., S, Dv)
    with the same leading dims: one fused kernel forward (ops.attention), which
    stores no score, only each row's log-sum-exp. The backward
    (ops.attention_backward, two kernels) recomputes each weight
    P_ij = exp(q_i . k_j * scale - lse_i) rather than keep the L x S matrix, as
    flash attention does, and applies the chain rule:
    dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K * scale,
    dK = dS^T Q * scale. rung "warp" runs the warp rung's kernels instead
    (src/attention_warp.cu: register tiles, one fused backward kernel), rung
    "tiled" the tiled rung's (src/attention_tiled.cu: block_queries queries a
    block, thread_rows rows a thread in the forward; a dQ kernel, then a dK/dV
    kernel, no atomics), rung "mma" the tensor-core forward
    (src/attention_mma.cu: 3xTF32 mma.sync, block_keys keys a tile) and its
    backward (src/attention_mma_backward.cu: a dQ kernel, then a dK/dV kernel
    in the key-major frame, no atomics). The leading dims are merged inside ops.attention by
    views: one node of the graph, not one a reshape."""

    @staticmethod
    def forward(ctx, q, k, v, scale, causal, rung="flash", block_queries=0, thread_rows=0, block_keys=0):
        ctx.scale, ctx.causal, ctx.rung, ctx.block_queries = scale, causal, rung, block_queries
        out, lse = ops.attention(q, k, v, scale, causal, rung, block_queries, thread_rows, block_keys)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = ops.attention_backward(grad, q, k, v, out, lse, ctx.scale, ctx.causal, ctx.rung,
                                            ctx.block_queries)
        return dq, dk, dv, None, None, None, None, None, None
