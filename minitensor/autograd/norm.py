"""norm: the gradient rule of layer_norm."""

from __future__ import annotations

from .. import ops
from .engine import Function


class LayerNorm(Function):
    """Layer normalization over the trailing dims of normalized_shape, with optional
    weight and bias: one kernel forward, which saves each row's mean and rstd, and one
    backward that uses them (ops.layer_norm, ops.layer_norm_backward)."""

    @staticmethod
    def forward(ctx, x, normalized_shape, weight, bias, eps):
        out, mean, rstd = ops.layer_norm(x, normalized_shape, weight, bias, eps)
        ctx.has_bias = bias is not None
        ctx.save_for_backward(x, mean, rstd, weight)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, mean, rstd, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        dx, dw, db = ops.layer_norm_backward(grad, x, mean, rstd, weight, ctx.has_bias,
                                             (needs[0], needs[2], needs[3]))
        return dx, None, dw, db, None
