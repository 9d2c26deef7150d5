"""cross_entropy: the gradient rule of the fused cross-entropy."""

from __future__ import annotations

import math

from .. import ops
from .engine import Function


class CrossEntropy(Function):
    """The cross-entropy of logits (N, C) against class indices (N,), reduced as
    torch's reduction says: one kernel forward (saving each row's logsumexp)
    and one backward (ops.cross_entropy_rows, ops.cross_entropy_backward)."""

    @staticmethod
    def forward(ctx, logits, targets, reduction, checked=False):
        rows, lse = ops.cross_entropy_rows(logits, targets, checked)
        ctx.reduction = reduction
        ctx.save_for_backward(logits, targets, lse)
        if reduction == "none":
            return rows
        total = ops.reduce_("sum", rows, None)
        return ops.map_("mul_scalar", total, 1.0 / rows.numel() if rows.numel() else math.nan) \
            if reduction == "mean" else total

    @staticmethod
    def backward(ctx, grad):
        logits, targets, lse = ctx.saved_tensors
        n = logits.shape[0]
        if ctx.reduction == "none":
            return ops.cross_entropy_backward(grad, logits, targets, lse, 1.0), None, None, None
        # One loss gradient for every row: a broadcast view, no copy.
        per_row = ops.expand(ops.reshape(grad, (1,)), (n,))
        scale = 1.0 / n if ctx.reduction == "mean" and n else 1.0
        return ops.cross_entropy_backward(per_row, logits, targets, lse, scale), None, None, None
