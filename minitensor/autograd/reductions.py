"""reductions: the gradient rules of sum, mean, prod, max/min, logsumexp,
softmax and matmul.

max/min over one dim send the gradient to the index the forward picked
(the first maximum/minimum, as torch's ``max(dim)`` does); max/min over
every element, or a tuple of dims, split it evenly among the tied elements
(as torch's ``max()`` and ``amax`` do).
"""

from __future__ import annotations

import math

from .. import ops
from .._shape import broadcast_shapes, keepdim_shape, normalize_dim, numel, reduce_dims
from .engine import Function
from .helpers import expand_reduced, unbroadcast, zeros


# ---- reductions ----------------------------------------------------------------------------


class Sum(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        out = ops.reduce_("sum", x, dim, keepdim)
        ctx.in_shape = x.shape
        ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        return out

    @staticmethod
    def backward(ctx, grad):
        # TASK(autograd_rules) BEGIN
        return expand_reduced(grad, ctx.in_shape, ctx.dims), None, None
        # TASK(autograd_rules) STUB
        #| # TODO (task autograd_rules): every input element of the reduced dims
        #| # (ctx.dims) added into one output element, so each gets that element's
        #| # gradient: spread grad back over ctx.in_shape (helpers.py). One gradient
        #| # per argument of forward: None for dim and keepdim.
        #| raise NotImplementedError("task autograd_rules is not done: Sum.backward in minitensor/autograd/reductions.py")
        # TASK(autograd_rules) END


class Mean(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        out = ops.mean(x, dim, keepdim)
        ctx.in_shape = x.shape
        ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        return out

    @staticmethod
    def backward(ctx, grad):
        count = numel(ctx.in_shape[d] for d in ctx.dims)
        scale = 1.0 / count if count else math.nan
        return ops.mul(expand_reduced(grad, ctx.in_shape, ctx.dims), scale), None, None


class Prod(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        out = ops.reduce_("prod", x, dim, keepdim)
        ctx.save_for_backward(x)
        ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        return out

    @staticmethod
    def backward(ctx, grad):
        # d prod / d x_i = the product of the other elements: prod/x_i without
        # zeros; with one zero, the product of the non-zeros at the zero and 0
        # elsewhere; with two or more zeros, 0 everywhere.
        (x,) = ctx.saved_tensors
        dims = ctx.dims
        is_zero = ops.zip_("eq", x, 0.0)
        zeros_in_row = ops.reduce_("sum", is_zero, dims, keepdim=True)
        safe = ops.where(is_zero, 1.0, x)
        prod_nonzero = ops.reduce_("prod", safe, dims, keepdim=True)
        no_zero = ops.mul(ops.div(prod_nonzero, safe), ops.zip_("eq", zeros_in_row, 0.0))
        one_zero = ops.mul(ops.mul(prod_nonzero, is_zero), ops.zip_("eq", zeros_in_row, 1.0))
        return ops.mul(expand_reduced(grad, x.shape, dims), ops.add(no_zero, one_zero)), None, None


class Max(Function):
    """max over one dim (gradient to the first maximum, as torch's max(dim)) or over
    every element / a tuple of dims (split evenly among ties, as torch's max() and amax)."""

    op, arg_op = "max", "argmax"  # Min below changes only these

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        out = ops.reduce_(ctx.op, x, dim, keepdim)
        ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        ctx.by_index = dim is not None and not isinstance(dim, (tuple, list)) and x.ndim > 0
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        keep = keepdim_shape(x.shape, ctx.dims)
        if ctx.by_index:
            (d,) = ctx.dims
            index = ops.reduce_(ctx.arg_op, x, d, keepdim=True)
            return ops.scatter_add_(zeros(x.shape, x), d, index, ops.reshape(grad, keep)), None, None
        is_selected = ops.zip_("eq", x, ops.reshape(out, keep))
        count = ops.reduce_("sum", is_selected, ctx.dims, keepdim=True)
        share = ops.div(ops.reshape(grad, keep), count)
        return ops.mul(is_selected, share), None, None


class Min(Max):
    op, arg_op = "min", "argmin"


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
        #| raise NotImplementedError("task autograd_rules is not done: MatMul.backward in minitensor/autograd/reductions.py")
        # TASK(autograd_rules) END


class Attention(Function):
    """softmax(q @ k^T * scale [causal]) @ v over (B, L, D), (B, S, D), (B, S, Dv):
    one fused kernel forward (ops.attention), which stores no score, only each
    row's log-sum-exp. The backward (ops.attention_backward, two kernels)
    recomputes each weight P_ij = exp(q_i . k_j * scale - lse_i) rather than
    keep the L x S matrix, as flash attention does, and applies the chain rule:
    dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K * scale,
    dK = dS^T Q * scale."""

    @staticmethod
    def forward(ctx, q, k, v, scale, causal):
        ctx.scale, ctx.causal = scale, causal
        out, lse = ops.attention(q, k, v, scale, causal)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = ops.attention_backward(grad, ops.contiguous(q), ops.contiguous(k), ops.contiguous(v), out,
                                            lse, ctx.scale, ctx.causal)
        return dq, dk, dv, None, None


class Conv2dTiled(Function):
    """The convolution of x (N, C, H, W) by weight (C_out, C / groups, KH, KW), plus
    bias (C_out,) or None: one kernel forward (ops.conv2d_tiled, the tiled rung),
    which copies no window to memory. The backward reuses the im2col rung's
    pieces, since a gradient of a convolution is itself a matmul with windows:
    with G = grad as (N, groups, C_out / groups, OH * OW) and W = weight as
    (groups, C_out / groups, C / groups * KH * KW),
    dx = col2im(W^T G), dweight = sum over N of G im2col(x)^T, dbias = sum of G."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, groups):
        ctx.args = (stride, padding, dilation, groups)
        ctx.save_for_backward(x, weight)
        return ops.conv2d_tiled(x, weight, bias, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.args
        needs = ctx.needs_input_grad
        n, c = x.shape[:2]
        c_out, c_group, kh, kw = weight.shape
        oh, ow = grad.shape[2:]
        taps = c_group * kh * kw
        g = ops.reshape(grad, (n, groups, c_out // groups, oh * ow))  # N, G, Co/G, L
        dx = dw = db = None
        if needs[0]:
            w = ops.reshape(weight, (groups, c_out // groups, taps))  # G, Co/G, K
            cols = ops.matmul(ops.transpose(w, -2, -1), g)  # N, G, K, L: each window's gradient
            dx = ops.col2im(ops.reshape(cols, (n, c, kh, kw, oh, ow)), x.shape, stride, padding, dilation)
        if needs[1]:
            cols = ops.reshape(ops.im2col(x, (kh, kw), stride, padding, dilation), (n, groups, taps, oh * ow))
            dw = ops.reshape(ops.reduce_("sum", ops.matmul(g, ops.transpose(cols, -2, -1)), 0), weight.shape)
        if needs[2]:
            db = ops.reduce_("sum", grad, (0, 2, 3))
        return dx, dw, db, None, None, None, None
