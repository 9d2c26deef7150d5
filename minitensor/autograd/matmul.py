"""matmul: the gradient rule of matmul."""

from __future__ import annotations

from .. import ops
from .._shape import broadcast_shapes
from .engine import Function
from .helpers import unbroadcast


# ---- matmul --------------------------------------------------------------------------------


class MatMul(Function):
    """a @ b: 2-D, batched with broadcast batch dims, and 1-D operands (as torch.matmul)."""

    @staticmethod
    def forward(ctx, a, b):
        out = ops.matmul(a, b)
        ctx.save_for_backward(a, b)
        return out

    @staticmethod
    def backward(ctx, grad):
        # TASK(autograd_rules) BEGIN
        a, b = ctx.saved_tensors
        a2 = ops.unsqueeze(a, 0) if a.ndim == 1 else a  # 1, K
        b2 = ops.unsqueeze(b, 1) if b.ndim == 1 else b  # K, 1
        batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2], "matmul()")
        g2 = ops.reshape(grad, batch + (a2.shape[-2], b2.shape[-1]))  # ..., M, N
        ga = gb = None
        if ctx.needs_input_grad[0]:  # ..., M, K
            ga = ops.reshape(unbroadcast(ops.matmul(g2, ops.transpose(b2, -2, -1)), a2.shape), a.shape)
        if ctx.needs_input_grad[1]:  # ..., K, N
            gb = ops.reshape(unbroadcast(ops.matmul(ops.transpose(a2, -2, -1), g2), b2.shape), b.shape)
        return ga, gb
        # TASK(autograd_rules) STUB
        #| # TODO (task autograd_rules): for out = a @ b and out's gradient g,
        #| # a's gradient is g @ b^T and b's is a^T @ g. Mind 1-D operands (torch
        #| # treats a as 1 x K and b as K x 1) and batch dims that broadcast
        #| # (unbroadcast them away); return None where ctx.needs_input_grad is False.
        #| raise NotImplementedError("task autograd_rules is not done: MatMul.backward in minitensor/autograd/matmul.py")
        # TASK(autograd_rules) END
