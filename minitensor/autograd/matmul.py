"""matmul: the gradient rule of matmul."""

from __future__ import annotations

import math

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


# ---- linear with a fused epilogue ----------------------------------------------------------


class LinearFused(Function):
    """act(x @ weight.T + bias) + residual in one kernel (ops.linear_fused).

    The activation's gradient needs z = x @ weight.T + bias: the forward writes it
    beside the output when save_pre is set (one extra write of the output's size,
    cheaper than a second product to recompute it). relu without a residual needs
    no z: out > 0 exactly where z > 0, so out itself is saved. The products of the
    backward are the plain matmuls: dZ = grad * act'(z), dx = dZ @ weight,
    dweight = dZ^T @ x over every leading row, dbias = dZ summed over those rows,
    dresidual = grad (summed down to the residual's shape).
    """

    @staticmethod
    def forward(ctx, x, weight, bias, residual, act, save_pre):
        relu_from_out = act == "relu" and residual is None
        out, pre = ops.linear_fused(x, weight, bias, residual, act, save_pre and not relu_from_out)
        ctx.act = act
        ctx.residual_shape = None if residual is None else residual.shape
        if act == "none":
            ctx.save_for_backward(x, weight)
        else:
            ctx.save_for_backward(x, weight, out if relu_from_out else pre)
        return out

    @staticmethod
    def backward(ctx, grad):
        saved = ctx.saved_tensors
        x, weight = saved[0], saved[1]
        needs = ctx.needs_input_grad
        n, k = weight.shape
        rows = math.prod(x.shape[:-1])
        dx = dw = db = dres = None
        if needs[3]:
            dres = unbroadcast(grad, ctx.residual_shape)
        if not (needs[0] or needs[1] or needs[2]):  # only the residual: z was not saved
            return dx, dw, db, dres, None, None
        dz = grad if ctx.act == "none" else ops.epilogue_activation_backward(grad, saved[2], ctx.act)  # ..., N
        if needs[0]:  # ..., K
            dx = ops.matmul(dz, weight)
        if needs[1] or needs[2]:
            dz2 = ops.reshape(dz, (rows, n))  # R, N
            if needs[1]:  # N, K
                dw = ops.matmul(ops.transpose(dz2, 0, 1), ops.reshape(x, (rows, k)))
            if needs[2]:  # N
                db = ops.reduce_("sum", dz2, 0)
        return dx, dw, db, dres, None, None
