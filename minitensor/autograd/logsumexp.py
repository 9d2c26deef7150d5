"""logsumexp: the gradient rule of logsumexp (the softmax of x)."""

from __future__ import annotations

from .. import ops
from .engine import Function
from .helpers import save_reduction, saved_reduction


class LogSumExp(Function):
    @staticmethod
    def forward(ctx, x, dim, keepdim=False):
        return save_reduction(ctx, x, ops.logsumexp(x, dim, keepdim), dim)

    @staticmethod
    def backward(ctx, grad):
        x, out, _ = saved_reduction(ctx)
        return ops.logsumexp_backward(grad, x, out, ctx.dims), None, None  # grad * softmax(x)
