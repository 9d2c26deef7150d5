"""logsumexp: the gradient rule of logsumexp (the softmax of x)."""

from __future__ import annotations

from .. import ops
from .._shape import keepdim_shape, reduce_dims
from .engine import Function


class LogSumExp(Function):
    @staticmethod
    def forward(ctx, x, dim, keepdim=False):
        out = ops.logsumexp(x, dim, keepdim)
        ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        keep = keepdim_shape(x.shape, ctx.dims)
        softmax = ops.map_("exp", ops.sub(x, ops.reshape(out, keep)))  # stable: x - out <= 0
        return ops.mul(ops.reshape(grad, keep), softmax), None, None
