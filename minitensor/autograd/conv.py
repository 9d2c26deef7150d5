"""conv: the gradient rules of the sliding windows (im2col), of the tiled
convolution kernel and of the implicit-GEMM convolution, each gradient on the
rung ops.conv2d_grad_rungs picks (implicit GEMM, im2col or depthwise)."""

from __future__ import annotations

from typing import Any

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


def _input_grad(rung: str, grad: Any, x_shape: tuple[int, ...], weight: Any, stride: tuple[int, int],
                padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> Any:
    """The input's gradient by one rung (ops.conv2d_grad_rungs names it)."""
    if rung == "depthwise":
        return ops.conv2d_depthwise_input_grad(grad, weight, x_shape, stride, padding, dilation)
    if rung == "direct":
        return ops.conv2d_direct_input_grad(grad, weight, x_shape, stride, padding, dilation, groups)
    if rung == "implicit_gemm":
        return ops.conv2d_igemm_input_grad(grad, weight, x_shape, stride, padding, dilation, groups)
    # im2col: each window's gradient W^T G (a batched matmul over C_out), then col2im.
    n, c = x_shape[:2]
    c_out, c_group, kh, kw = weight.shape
    oh, ow = grad.shape[2:]
    g = ops.reshape(grad, (n, groups, c_out // groups, oh * ow))  # N, G, Co/G, L
    w = ops.reshape(weight, (groups, c_out // groups, c_group * kh * kw))  # G, Co/G, K
    cols = ops.matmul(ops.transpose(w, -2, -1), g)  # N, G, K, L
    return ops.col2im(ops.reshape(cols, (n, c, kh, kw, oh, ow)), x_shape, stride, padding, dilation)


def _weight_grad(rung: str, grad: Any, x: Any, weight_shape: tuple[int, ...], stride: tuple[int, int],
                 padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> Any:
    """The weight's gradient by one rung (ops.conv2d_grad_rungs names it)."""
    if rung == "depthwise":
        return ops.conv2d_depthwise_weight_grad(grad, x, weight_shape, stride, padding, dilation)
    if rung == "direct":
        return ops.conv2d_direct_weight_grad(grad, x, weight_shape, stride, padding, dilation, groups)
    if rung == "implicit_gemm":
        return ops.conv2d_igemm_weight_grad(grad, x, weight_shape, stride, padding, dilation, groups)
    # im2col: sum over N of G im2col(x)^T.
    n = x.shape[0]
    c_out, c_group, kh, kw = weight_shape
    oh, ow = grad.shape[2:]
    taps = c_group * kh * kw
    g = ops.reshape(grad, (n, groups, c_out // groups, oh * ow))
    cols = ops.reshape(ops.im2col(x, (kh, kw), stride, padding, dilation), (n, groups, taps, oh * ow))
    return ops.reshape(ops.reduce_("sum", ops.matmul(g, ops.transpose(cols, -2, -1)), 0), tuple(weight_shape))


def _conv2d_backward(ctx: Any, grad: Any, forward: str) -> tuple[Any, ...]:
    """dx, dweight, dbias of a convolution whose forward ran on `forward`: each
    gradient on the rung ops.conv2d_grad_rungs picks for the shapes."""
    x, weight = ctx.saved_tensors
    stride, padding, dilation, groups = ctx.args
    needs = ctx.needs_input_grad
    dx_rung, dw_rung = ops.conv2d_grad_rungs(x.shape, weight.shape, groups, forward)
    # One dense copy of the incoming gradient (an expanded or transposed view
    # from the layer above), not one inside each gradient product: on the H100
    # that copy took 0.34 ms for a 64-channel 32 x 32 batch of 256, twice.
    grad = ops.contiguous(grad)
    dx = _input_grad(dx_rung, grad, x.shape, weight, stride, padding, dilation, groups) if needs[0] else None
    dw = _weight_grad(dw_rung, grad, x, weight.shape, stride, padding, dilation, groups) if needs[1] else None
    db = ops.reduce_("sum", grad, (0, 2, 3)) if needs[2] else None
    return dx, dw, db, None, None, None, None


class Conv2dTiled(Function):
    """The convolution of x (N, C, H, W) by weight (C_out, C / groups, KH, KW), plus
    bias (C_out,) or None: one kernel forward (ops.conv2d_tiled, the tiled rung),
    which copies no window to memory. The backward (ops.conv2d_grad_rungs): for a
    depthwise convolution (groups = C = C_out) the depthwise gradient kernels,
    else the im2col rung's pieces, since a gradient of a convolution is itself a
    matmul with windows: with G = grad as (N, groups, C_out / groups, OH * OW)
    and W = weight as (groups, C_out / groups, C / groups * KH * KW),
    dx = col2im(W^T G), dweight = sum over N of G im2col(x)^T, dbias = sum of G."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, groups):
        ctx.args = (stride, padding, dilation, groups)
        ctx.save_for_backward(x, weight)
        return ops.conv2d_tiled(x, weight, bias, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad):
        return _conv2d_backward(ctx, grad, "tiled")


class Conv2dImplicitGemm(Function):
    """The convolution of x (N, C, H, W) by weight (C_out, C / groups, KH, KW), plus
    bias (C_out,) or None, as an implicit GEMM (ops.conv2d_igemm). Its backward is,
    as a rule, two more implicit GEMMs, with no window written and no col2im: the
    input's gradient (the weights times the output gradient's elements that each
    input pixel fed) and the weight's (the output gradient times the input's
    windows, summed over the batch); the bias's is the sum of grad over (N, OH,
    OW). ops.conv2d_grad_rungs makes two exceptions: a depthwise convolution's
    gradients run the depthwise kernels, and with fewer than 16 input channels a
    group (the 7 x 7 stem) the input's gradient runs the im2col rung."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, groups):
        ctx.args = (stride, padding, dilation, groups)
        ctx.save_for_backward(x, weight)
        return ops.conv2d_igemm(x, weight, bias, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad):
        return _conv2d_backward(ctx, grad, "implicit_gemm")



class Conv2dDepthwise(Function):
    """The depthwise convolution of x (N, C, H, W) by weight (C, 1, KH, KW), plus bias
    (C,) or None (ops.conv2d_depthwise, the depthwise rung); its backward the
    depthwise gradient kernels (a flipped-tap convolution of grad for the input,
    a per-channel reduction for the weight) and the sum of grad for the bias."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, groups):
        ctx.args = (stride, padding, dilation, groups)
        ctx.save_for_backward(x, weight)
        return ops.conv2d_depthwise(x, weight, bias, stride, padding, dilation)

    @staticmethod
    def backward(ctx, grad):
        return _conv2d_backward(ctx, grad, "depthwise")


class Conv2dDirect(Function):
    """The convolution of x (N, C, H, W) by weight (C_out, C / groups, KH, KW), plus
    bias or None, by the direct kernel (ops.conv2d_direct: few products per output,
    the digits CNN's first layer); backward a gather for the input's gradient and a
    reduction for the weight's (ops.conv2d_grad_rungs: "direct"), no window tensor."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, groups):
        ctx.args = (stride, padding, dilation, groups)
        ctx.save_for_backward(x, weight)
        return ops.conv2d_direct(x, weight, bias, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad):
        return _conv2d_backward(ctx, grad, "direct")
