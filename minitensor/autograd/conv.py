"""conv: the gradient rules of the sliding windows (im2col), of the tiled
convolution kernel and of the implicit-GEMM convolution."""

from __future__ import annotations

from .. import ops
from .engine import Function


class Im2Col(Function):
    """The sliding windows of x (N, C, H, W) as (N, C, KH, KW, OH, OW) (ops.im2col);
    backward adds each window's gradient back where it was read (ops.col2im).
    Convolution and pooling are this rule followed by a matmul or a reduction."""

    @staticmethod
    def forward(ctx, x, kernel, stride, padding, dilation, pad_value=0.0):
        ctx.args = (x.shape, stride, padding, dilation)
        return ops.im2col(x, kernel, stride, padding, dilation, pad_value)

    @staticmethod
    def backward(ctx, grad):
        return ops.col2im(grad, *ctx.args), None, None, None, None, None


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


class Conv2dImplicitGemm(Function):
    """The convolution of x (N, C, H, W) by weight (C_out, C / groups, KH, KW), plus
    bias (C_out,) or None, as an implicit GEMM (ops.conv2d_igemm). Its backward is two
    more implicit GEMMs, with no window written and no col2im: the input's gradient
    (the weights times the output gradient's elements that each input pixel fed)
    and the weight's (the output gradient times the input's windows, summed over
    the batch); the bias's is the sum of grad over (N, OH, OW)."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, groups):
        ctx.args = (stride, padding, dilation, groups)
        ctx.save_for_backward(x, weight)
        return ops.conv2d_igemm(x, weight, bias, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        dx = ops.conv2d_igemm_input_grad(grad, weight, x.shape, *ctx.args) if needs[0] else None
        dw = ops.conv2d_igemm_weight_grad(grad, x, weight.shape, *ctx.args) if needs[1] else None
        db = ops.reduce_("sum", grad, (0, 2, 3)) if needs[2] else None
        return dx, dw, db, None, None, None, None
