"""where: the gradient rule of where (cond gets no gradient)."""

from __future__ import annotations

from .. import ops
from .engine import Function
from .helpers import unbroadcast


class Where(Function):
    """a where cond is non-zero, else b; cond gets no gradient."""

    @staticmethod
    def forward(ctx, cond, a, b):
        out = ops.where(cond, a, b)
        ctx.save_for_backward(cond)
        ctx.shapes = (getattr(a, "shape", ()), getattr(b, "shape", ()))
        return out

    @staticmethod
    def backward(ctx, grad):
        (cond,) = ctx.saved_tensors
        ga = unbroadcast(ops.where(cond, grad, 0.0), ctx.shapes[0]) if ctx.needs_input_grad[1] else None
        gb = unbroadcast(ops.where(cond, 0.0, grad), ctx.shapes[1]) if ctx.needs_input_grad[2] else None
        return None, ga, gb
