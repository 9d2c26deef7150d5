"""softmax: the gradient rules of softmax and log_softmax."""

from __future__ import annotations

from .. import ops
from .._shape import normalize_dim
from .engine import Function


class Softmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        out = ops.softmax(x, dim, log=False)
        ctx.dim = normalize_dim(dim, x.ndim, "softmax()") if x.ndim else None
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors  # dx = y * (grad - sum(grad * y))
        return ops.softmax_backward(grad, y, ctx.dim or 0), None


class LogSoftmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        out = ops.softmax(x, dim, log=True)
        ctx.dim = normalize_dim(dim, x.ndim, "log_softmax()") if x.ndim else None
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors  # dx = grad - softmax * sum(grad)
        return ops.softmax_backward(grad, out, ctx.dim or 0, log=True), None
