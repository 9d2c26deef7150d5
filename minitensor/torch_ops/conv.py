"""conv2d as a torch custom op, forward and backward.

The rungs are the ones minitensor's own ``F.conv2d`` picks for the shapes
(nn/functional_conv.py): under the fast kernel policy the implicit GEMM
(src/conv_implicit_gemm.cu, no window written), the depthwise kernel for a
depthwise convolution (src/conv_depthwise.cu), the direct one for few input
channels (src/conv_direct.cu), im2col where none takes the sizes; under the
teaching policy im2col. The gradients run the rungs
``ops.conv2d_grad_rungs`` picks, computed by the same functions as
minitensor's own gradient rules (autograd/conv.py). dense.py's docstring
says how an op is registered (custom op, fake, autograd).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from .. import ops
from ..autograd.conv import _input_grad, _weight_grad
from ..nn.functional_conv import _default_conv2d_rung
from ._bridge import check_float, empty_like_none, maybe_array, on_torch_stream, to_array, to_torch


def _pair(value: Any, name: str, least: int) -> list[int]:
    """An int or a pair of ints, as torch's conv2d takes stride, padding and dilation."""
    pair = [value, value] if isinstance(value, int) else list(value)
    if len(pair) != 2 or any(not isinstance(v, int) or v < least for v in pair):
        raise ValueError(f"minitensor::conv2d: {name} must be an int or a pair of ints >= {least}, got {value!r}")
    return pair


def _output_shape(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor], stride: Sequence[int],
                  padding: Sequence[int], dilation: Sequence[int], groups: int) -> tuple[int, int, int, int]:
    """(N, C_out, OH, OW), after refusing arguments that do not agree."""
    check_float("minitensor::conv2d", input=x, weight=w, bias=b)
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"minitensor::conv2d: input (N, C, H, W) and weight (C_out, C / groups, KH, KW) must be "
                         f"4-D, got shapes {tuple(x.shape)} and {tuple(w.shape)}")
    n, c, h, wd = x.shape
    c_out, c_group, kh, kw = w.shape
    if groups < 1 or c % groups or c_out % groups or c_group != c // groups:
        raise ValueError(f"minitensor::conv2d: input of shape {tuple(x.shape)}, weight of shape {tuple(w.shape)} "
                         f"and groups = {groups} do not agree: C and C_out must divide by groups, and the "
                         f"weight's dim 1 must be C / groups")
    if b is not None and tuple(b.shape) != (c_out,):
        raise ValueError(f"minitensor::conv2d: bias must have shape ({c_out},), got {tuple(b.shape)}")
    for name, value, least in (("stride", stride, 1), ("padding", padding, 0), ("dilation", dilation, 1)):
        _pair(list(value), name, least)
    oh = ops.window_shape(h, kh, stride[0], padding[0], dilation[0])
    ow = ops.window_shape(wd, kw, stride[1], padding[1], dilation[1])
    if oh < 1 or ow < 1:
        raise ValueError(f"minitensor::conv2d: the input of shape {tuple(x.shape)} padded by {tuple(padding)} is "
                         f"smaller than the kernel ({kh}, {kw}) with dilation {tuple(dilation)}")
    return n, c_out, oh, ow


def _forward_rung(x: Any, w: Any, stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int],
                  groups: int, out_hw: tuple[int, int]) -> str:
    """The rung F.conv2d runs for these Arrays (its own choice, shared)."""
    return _default_conv2d_rung(x, w, tuple(w.shape[2:]), stride, padding, dilation, groups, out_hw)


def _im2col_conv(x: Any, w: Any, b: Any, stride: tuple[int, int], padding: tuple[int, int],
                 dilation: tuple[int, int], groups: int, out_shape: tuple[int, ...]) -> Any:
    """The im2col rung on Arrays: the windows (N, C, KH, KW, OH, OW) by one strided
    copy, then one batched matmul per group, then the bias."""
    n, c_out, oh, ow = out_shape
    _, c_group, kh, kw = w.shape
    cols = ops.im2col(x, (kh, kw), stride, padding, dilation)
    cols = ops.reshape(cols, (n, groups, c_group * kh * kw, oh * ow))  # N, G, K, L
    wg = ops.reshape(w, (groups, c_out // groups, c_group * kh * kw))  # G, Co/G, K
    out = ops.reshape(ops.matmul(wg, cols), out_shape)  # N, Co, OH, OW
    return out if b is None else ops.add(out, ops.reshape(b, (1, c_out, 1, 1)))


@torch.library.custom_op(
    "minitensor::conv2d", mutates_args=(),
    schema="(Tensor x, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, int groups) -> Tensor")
def _conv2d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: Sequence[int],
            padding: Sequence[int], dilation: Sequence[int], groups: int) -> torch.Tensor:
    out_shape = _output_shape(x, weight, bias, stride, padding, dilation, groups)
    stride, padding, dilation = tuple(stride), tuple(padding), tuple(dilation)
    with on_torch_stream(x):
        xa, wa, ba = to_array(x), to_array(weight), maybe_array(bias)
        rung = _forward_rung(xa, wa, stride, padding, dilation, groups, out_shape[2:])
        if rung == "implicit_gemm":
            out = ops.conv2d_igemm(xa, wa, ba, stride, padding, dilation, groups)
        elif rung == "tiled":
            out = ops.conv2d_tiled(xa, wa, ba, stride, padding, dilation, groups)
        elif rung == "depthwise":
            out = ops.conv2d_depthwise(xa, wa, ba, stride, padding, dilation)
        elif rung == "direct":
            out = ops.conv2d_direct(xa, wa, ba, stride, padding, dilation, groups)
        else:
            out = _im2col_conv(xa, wa, ba, stride, padding, dilation, groups, out_shape)
        return to_torch(out)


@_conv2d.register_fake
def _conv2d_fake(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: Sequence[int],
                 padding: Sequence[int], dilation: Sequence[int], groups: int) -> torch.Tensor:
    return x.new_empty(_output_shape(x, weight, bias, stride, padding, dilation, groups))


@torch.library.custom_op(
    "minitensor::conv2d_backward", mutates_args=(),
    schema="(Tensor grad, Tensor x, Tensor weight, int[] stride, int[] padding, int[] dilation, int groups, "
           "bool need_input, bool need_weight, bool need_bias) -> (Tensor, Tensor, Tensor)")
def _conv2d_backward(grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, stride: Sequence[int],
                     padding: Sequence[int], dilation: Sequence[int], groups: int, need_input: bool,
                     need_weight: bool, need_bias: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    stride, padding, dilation = tuple(stride), tuple(padding), tuple(dilation)
    with on_torch_stream(x):
        ga, xa, wa = to_array(grad), to_array(x), to_array(weight)
        forward = _forward_rung(xa, wa, stride, padding, dilation, groups, tuple(grad.shape[2:]))
        # The im2col forward's gradients are im2col's; the others', ops.conv2d_grad_rungs's.
        rungs = ("im2col", "im2col") if forward == "im2col" else ops.conv2d_grad_rungs(
            xa.shape, wa.shape, groups, forward)
        dx = _input_grad(rungs[0], ga, xa.shape, wa, stride, padding, dilation, groups) if need_input else None
        dw = _weight_grad(rungs[1], ga, xa, wa.shape, stride, padding, dilation, groups) if need_weight else None
        db = ops.reduce_("sum", ga, (0, 2, 3)) if need_bias else None
        return tuple(empty_like_none(x) if g is None else to_torch(g) for g in (dx, dw, db))


@_conv2d_backward.register_fake
def _conv2d_backward_fake(grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, stride: Sequence[int],
                          padding: Sequence[int], dilation: Sequence[int], groups: int, need_input: bool,
                          need_weight: bool, need_bias: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (x.new_empty(x.shape) if need_input else empty_like_none(x),
            x.new_empty(weight.shape) if need_weight else empty_like_none(x),
            x.new_empty((weight.shape[0],)) if need_bias else empty_like_none(x))


def _conv2d_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, weight, bias, stride, padding, dilation, groups = inputs
    ctx.args = (stride, padding, dilation, groups)
    ctx.has_bias = bias is not None
    ctx.save_for_backward(x, weight)


def _conv2d_grad(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    """dx, dweight, dbias, each on the rung minitensor's own gradient rule runs."""
    x, weight = ctx.saved_tensors
    needs = ctx.needs_input_grad
    need_bias = ctx.has_bias and needs[2]
    dx, dw, db = _conv2d_backward(grad, x, weight, *ctx.args, needs[0], needs[1], need_bias)
    return dx if needs[0] else None, dw if needs[1] else None, db if need_bias else None, None, None, None, None


_conv2d.register_autograd(_conv2d_grad, setup_context=_conv2d_setup)


def conv2d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,  # noqa: A002
           stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1) -> torch.Tensor:
    """``torch.nn.functional.conv2d`` (cross-correlation) on minitensor's convolution
    rungs: input (N, C, H, W), weight (C_out, C / groups, KH, KW), bias (C_out,);
    stride, padding and dilation an int or a pair (padding as numbers: write
    'same' as (KH // 2, KW // 2) for an odd kernel)."""
    return _conv2d(input, weight, bias, _pair(stride, "stride", 1), _pair(padding, "padding", 0),
                   _pair(dilation, "dilation", 1), int(groups))
