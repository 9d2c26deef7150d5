"""gather: the gradient rules of gather and scatter_add."""

from __future__ import annotations

from .. import ops
from .engine import Function
from .helpers import zeros


class Gather(Function):
    """out[i][j] = x[i][index[i][j]] along dim; backward scatter-adds into zeros."""

    @staticmethod
    def forward(ctx, x, dim, index):
        out = ops.gather(x, dim, index)
        ctx.dim = dim
        # Only x's shape: as torch, a later write into x does not spoil this
        # backward (x[index array], masks and negative steps are gathers).
        ctx.x_shape = x.shape
        ctx.save_for_backward(index)
        return out

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        return ops.scatter_add_(zeros(ctx.x_shape, grad), ctx.dim, index, grad), None, None


class ScatterAdd(Function):
    """A copy of x with src added at index along dim."""

    @staticmethod
    def forward(ctx, x, dim, index, src):
        out = ops.scatter_add(x, dim, index, src)
        ctx.dim = dim
        ctx.save_for_backward(index)
        return out

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        gsrc = ops.gather(grad, ctx.dim, index) if ctx.needs_input_grad[3] else None
        return grad, None, None, gsrc
