"""The convolution kernels: the tiled rung (src/conv.cu), the implicit-GEMM rung
with its two gradients (src/conv_implicit_gemm.cu) and the depthwise gradients
(src/conv_depthwise_backward.cu)."""

from __future__ import annotations

from ctypes import c_char_p, c_int
from typing import Any

from .loader import MtTensor, declare, lib, check, _desc

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_conv2d": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, c_int, c_int, c_int, c_int, c_int, c_int, c_int,
                          c_int]),
    "mt_conv2d_igemm_config_count": (c_int, []),
    "mt_conv2d_igemm_config_name": (c_char_p, [c_int]),
    "mt_conv2d_igemm": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, c_int, c_int, c_int, c_int, c_int, c_int,
                                c_int, c_int, c_int]),
    "mt_conv2d_igemm_input_grad": (c_int, [MtTensor, MtTensor, MtTensor, c_int, c_int, c_int, c_int, c_int, c_int,
                                           c_int, c_int]),
    "mt_conv2d_igemm_weight_grad": (c_int, [MtTensor, MtTensor, MtTensor, c_int, c_int, c_int, c_int, c_int, c_int,
                                            c_int, c_int]),
    "mt_conv2d_depthwise_input_grad": (c_int, [MtTensor, MtTensor, MtTensor, c_int, c_int, c_int, c_int, c_int,
                                               c_int]),
    "mt_conv2d_depthwise_weight_grad": (c_int, [MtTensor, MtTensor, MtTensor, c_int, c_int, c_int, c_int, c_int,
                                                c_int]),
}
declare(SIGNATURES)


def conv2d(out: Any, inp: Any, weight: Any, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
           dilation: tuple[int, int], groups: int) -> None:
    """out = the convolution of inp by weight (+ bias, which may be None) in one kernel
    (mt_conv2d, the tiled rung); contiguous (N, C, H, W), (C_out, C / groups, KH, KW), (C_out,)."""
    check(lib().mt_conv2d(out.descriptor(), inp.descriptor(), weight.descriptor(), _desc(bias),
                          0 if bias is None else 1, *(int(v) for v in stride), *(int(v) for v in padding),
                          *(int(v) for v in dilation), int(groups)), "mt_conv2d")


def _conv_args(stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int],
               groups: int) -> tuple[int, ...]:
    """stride, padding, dilation (each (h, w)) and groups as the C functions take them."""
    return (*(int(v) for v in stride), *(int(v) for v in padding), *(int(v) for v in dilation), int(groups))


def conv2d_igemm_config_count() -> int:
    """How many tile configurations the implicit-GEMM rung has (mt_conv2d_igemm_config_count)."""
    return int(lib().mt_conv2d_igemm_config_count())


def conv2d_igemm_config_name(config: int) -> str:
    """The name of implicit-GEMM tile configuration `config` (block tile, warp tile, threads)."""
    raw = lib().mt_conv2d_igemm_config_name(int(config))
    if raw is None:
        raise ValueError(f"no implicit-GEMM config {config} (there are {conv2d_igemm_config_count()})")
    return raw.decode()


def conv2d_igemm(out: Any, inp: Any, weight: Any, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
                 dilation: tuple[int, int], groups: int, config: int = -1) -> None:
    """out = the convolution of inp by weight (+ bias, which may be None) as an implicit
    GEMM (mt_conv2d_igemm); the operands as for conv2d. config: a tile
    configuration (below conv2d_igemm_config_count()), or -1 for the library's."""
    check(lib().mt_conv2d_igemm(out.descriptor(), inp.descriptor(), weight.descriptor(), _desc(bias),
                                0 if bias is None else 1, *_conv_args(stride, padding, dilation, groups),
                                int(config)),
          "mt_conv2d_igemm")


def conv2d_igemm_input_grad(grad_in: Any, grad_out: Any, weight: Any, stride: tuple[int, int],
                            padding: tuple[int, int], dilation: tuple[int, int], groups: int,
                            config: int = -1) -> None:
    """grad_in (N, C, H, W) = the input's gradient of the convolution for grad_out
    (N, C_out, OH, OW) and weight (mt_conv2d_igemm_input_grad); contiguous. config as
    for conv2d_igemm."""
    check(lib().mt_conv2d_igemm_input_grad(grad_in.descriptor(), grad_out.descriptor(), weight.descriptor(),
                                           *_conv_args(stride, padding, dilation, groups), int(config)),
          "mt_conv2d_igemm_input_grad")


def conv2d_igemm_weight_grad(grad_weight: Any, grad_out: Any, inp: Any, stride: tuple[int, int],
                             padding: tuple[int, int], dilation: tuple[int, int], groups: int,
                             config: int = -1) -> None:
    """grad_weight (C_out, C / groups, KH, KW) = the weight's gradient of the convolution
    for grad_out (N, C_out, OH, OW) and the input inp (mt_conv2d_igemm_weight_grad); contiguous.
    config as for conv2d_igemm."""
    check(lib().mt_conv2d_igemm_weight_grad(grad_weight.descriptor(), grad_out.descriptor(), inp.descriptor(),
                                            *_conv_args(stride, padding, dilation, groups), int(config)),
          "mt_conv2d_igemm_weight_grad")


def conv2d_depthwise_input_grad(grad_in: Any, grad_out: Any, weight: Any, stride: tuple[int, int],
                                padding: tuple[int, int], dilation: tuple[int, int]) -> None:
    """grad_in (N, C, H, W) = the input's gradient of a depthwise convolution (weight
    (C, 1, KH, KW), groups = C = C_out) for grad_out (N, C, OH, OW)
    (mt_conv2d_depthwise_input_grad); contiguous."""
    check(lib().mt_conv2d_depthwise_input_grad(grad_in.descriptor(), grad_out.descriptor(), weight.descriptor(),
                                               *_conv_args(stride, padding, dilation, 1)[:6]),
          "mt_conv2d_depthwise_input_grad")


def conv2d_depthwise_weight_grad(grad_weight: Any, grad_out: Any, inp: Any, stride: tuple[int, int],
                                 padding: tuple[int, int], dilation: tuple[int, int]) -> None:
    """grad_weight (C, 1, KH, KW) = the weight's gradient of a depthwise convolution for
    grad_out (N, C, OH, OW) and the input inp (N, C, H, W), summed over the batch
    (mt_conv2d_depthwise_weight_grad); contiguous."""
    check(lib().mt_conv2d_depthwise_weight_grad(grad_weight.descriptor(), grad_out.descriptor(), inp.descriptor(),
                                                *_conv_args(stride, padding, dilation, 1)[:6]),
          "mt_conv2d_depthwise_weight_grad")


# ---- the depthwise rung's forward (src/conv_depthwise.cu) and the direct rung (src/conv_direct.cu) ----

SMALL_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_conv2d_depthwise": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, c_int, c_int, c_int, c_int, c_int, c_int,
                                    c_int]),
    "mt_conv2d_direct": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, c_int, c_int, c_int, c_int, c_int, c_int,
                                 c_int, c_int]),
    "mt_conv2d_direct_input_grad": (c_int, [MtTensor, MtTensor, MtTensor, c_int, c_int, c_int, c_int, c_int, c_int,
                                            c_int]),
    "mt_conv2d_direct_weight_grad": (c_int, [MtTensor, MtTensor, MtTensor, c_int, c_int, c_int, c_int, c_int, c_int,
                                             c_int]),
}
declare(SMALL_SIGNATURES)


def conv2d_depthwise(out: Any, inp: Any, weight: Any, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
                     dilation: tuple[int, int]) -> None:
    """out = the depthwise convolution of inp (N, C, H, W) by weight (C, 1, KH, KW), plus
    bias (C,) or None (mt_conv2d_depthwise); contiguous."""
    check(lib().mt_conv2d_depthwise(out.descriptor(), inp.descriptor(), weight.descriptor(), _desc(bias),
                                    0 if bias is None else 1, *_conv_args(stride, padding, dilation, 1)[:-1]),
          "mt_conv2d_depthwise")


def conv2d_direct(out: Any, inp: Any, weight: Any, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
                  dilation: tuple[int, int], groups: int) -> None:
    """out = the convolution of inp by weight (+ bias, which may be None) by the direct
    kernel (mt_conv2d_direct: a thread per output pixel); contiguous."""
    check(lib().mt_conv2d_direct(out.descriptor(), inp.descriptor(), weight.descriptor(), _desc(bias),
                                 0 if bias is None else 1, *_conv_args(stride, padding, dilation, groups)),
          "mt_conv2d_direct")


def conv2d_direct_input_grad(grad_in: Any, grad_out: Any, weight: Any, stride: tuple[int, int],
                             padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> None:
    """grad_in (N, C, H, W) = the input's gradient of a convolution for grad_out (any
    strides) and weight, one thread per input element (mt_conv2d_direct_input_grad)."""
    check(lib().mt_conv2d_direct_input_grad(grad_in.descriptor(), grad_out.descriptor(), weight.descriptor(),
                                            *_conv_args(stride, padding, dilation, groups)),
          "mt_conv2d_direct_input_grad")


def conv2d_direct_weight_grad(grad_weight: Any, grad_out: Any, inp: Any, stride: tuple[int, int],
                              padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> None:
    """grad_weight (C_out, C / groups, KH, KW) = the weight's gradient of a convolution for
    grad_out (any strides) and inp, a deterministic reduction (mt_conv2d_direct_weight_grad)."""
    check(lib().mt_conv2d_direct_weight_grad(grad_weight.descriptor(), grad_out.descriptor(), inp.descriptor(),
                                             *_conv_args(stride, padding, dilation, groups)),
          "mt_conv2d_direct_weight_grad")


# ---- the Winograd rung's steps (src/conv_winograd.cu) ----------------------------------------

WINOGRAD_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_conv2d_winograd_filter": (c_int, [MtTensor, MtTensor, c_int]),
    "mt_conv2d_winograd_input": (c_int, [MtTensor, MtTensor, c_int, c_int]),
    "mt_conv2d_winograd_output": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
    "mt_conv2d_winograd_output_grad": (c_int, [MtTensor, MtTensor]),
    "mt_conv2d_winograd_filter_grad": (c_int, [MtTensor, MtTensor]),
}
declare(WINOGRAD_SIGNATURES)


def conv2d_winograd_filter(u: Any, weight: Any, flip: bool) -> None:
    """u (16, K, C) = G g G^T of each 3x3 filter of weight (K, C, 3, 3); flip: u (16, C, K)
    of the input gradient's filters, turned by 180 degrees (mt_conv2d_winograd_filter)."""
    check(lib().mt_conv2d_winograd_filter(u.descriptor(), weight.descriptor(), int(flip)),
          "mt_conv2d_winograd_filter")


def conv2d_winograd_input(v: Any, inp: Any, padding: tuple[int, int]) -> None:
    """v (16, C, P) = B^T d B of each 4x4 tile d of inp (N, C, H, W) padded by `padding`, P the
    2x2 output tiles (mt_conv2d_winograd_input)."""
    check(lib().mt_conv2d_winograd_input(v.descriptor(), inp.descriptor(), int(padding[0]), int(padding[1])),
          "mt_conv2d_winograd_input")


def conv2d_winograd_output(out: Any, m: Any, bias: Any) -> None:
    """out (N, K, OH, OW) = A^T m A of each tile of m (16, K, P), plus bias (K,) or None
    (mt_conv2d_winograd_output)."""
    check(lib().mt_conv2d_winograd_output(out.descriptor(), m.descriptor(), _desc(bias),
                                          0 if bias is None else 1), "mt_conv2d_winograd_output")


def conv2d_winograd_output_grad(dm: Any, grad: Any) -> None:
    """dm (16, K, P) = A e A^T of each 2x2 block e of grad (N, K, OH, OW), zeros past an odd
    side: the output step run backwards (mt_conv2d_winograd_output_grad)."""
    check(lib().mt_conv2d_winograd_output_grad(dm.descriptor(), grad.descriptor()), "mt_conv2d_winograd_output_grad")


def conv2d_winograd_filter_grad(weight_grad: Any, du: Any) -> None:
    """weight_grad (K, C, 3, 3) = G^T d G of the sum d over the slices of du (16, S, K, C),
    added in order: the filter step run backwards (mt_conv2d_winograd_filter_grad)."""
    check(lib().mt_conv2d_winograd_filter_grad(weight_grad.descriptor(), du.descriptor()),
          "mt_conv2d_winograd_filter_grad")
