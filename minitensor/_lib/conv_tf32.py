"""The TF32 tensor-core convolution rung (src/conv_igemm_tf32.cu): the implicit
GEMM and its two gradients with the tile products on mma.sync, operands rounded
to TF32."""

from __future__ import annotations

from ctypes import c_char_p, c_int
from typing import Any

from .loader import MtTensor, declare, lib, check, _desc

# The functions of src/conv_igemm_tf32.h that these wrappers call: name -> (restype, argtypes).
_CONV_ARGS = [c_int] * 7 + [c_int]  # stride, padding, dilation (h, w each), groups; config
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_conv2d_tf32_config_count": (c_int, []),
    "mt_conv2d_tf32_config_name": (c_char_p, [c_int]),
    "mt_conv2d_tf32": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, c_int] + _CONV_ARGS),
    "mt_conv2d_tf32_input_grad": (c_int, [MtTensor, MtTensor, MtTensor] + _CONV_ARGS),
    "mt_conv2d_tf32_weight_grad": (c_int, [MtTensor, MtTensor, MtTensor] + _CONV_ARGS),
}
declare(SIGNATURES)


def _args(stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], groups: int,
          config: int) -> tuple[int, ...]:
    """stride, padding, dilation (each (h, w)), groups and config as the C functions take them."""
    return (*(int(v) for v in stride), *(int(v) for v in padding), *(int(v) for v in dilation), int(groups),
            int(config))


def conv2d_tf32_config_count() -> int:
    """How many tile configurations the TF32 convolution rung has (mt_conv2d_tf32_config_count)."""
    return int(lib().mt_conv2d_tf32_config_count())


def conv2d_tf32_config_name(config: int) -> str:
    """The name of TF32 convolution tile configuration `config` (block tile, warp tile, stages)."""
    raw = lib().mt_conv2d_tf32_config_name(int(config))
    if raw is None:
        raise ValueError(f"no TF32 convolution config {config} (there are {conv2d_tf32_config_count()})")
    return raw.decode()


def conv2d_tf32(out: Any, inp: Any, weight: Any, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
                dilation: tuple[int, int], groups: int, config: int = -1) -> None:
    """out = the convolution of inp by weight (+ bias, which may be None) on tensor
    cores, operands rounded to TF32 (mt_conv2d_tf32); contiguous float32 (N, C, H, W),
    (C_out, C / groups, KH, KW), (C_out,). config: a tile configuration (below
    conv2d_tf32_config_count()), or -1 for the library's."""
    check(lib().mt_conv2d_tf32(out.descriptor(), inp.descriptor(), weight.descriptor(), _desc(bias),
                               0 if bias is None else 1, *_args(stride, padding, dilation, groups, config)),
          "mt_conv2d_tf32")


def conv2d_tf32_input_grad(grad_in: Any, grad_out: Any, weight: Any, stride: tuple[int, int],
                           padding: tuple[int, int], dilation: tuple[int, int], groups: int,
                           config: int = -1) -> None:
    """grad_in (N, C, H, W) = the input's gradient of the convolution for grad_out
    (N, C_out, OH, OW) and weight, on tensor cores (mt_conv2d_tf32_input_grad)."""
    check(lib().mt_conv2d_tf32_input_grad(grad_in.descriptor(), grad_out.descriptor(), weight.descriptor(),
                                          *_args(stride, padding, dilation, groups, config)),
          "mt_conv2d_tf32_input_grad")


def conv2d_tf32_weight_grad(grad_weight: Any, grad_out: Any, inp: Any, stride: tuple[int, int],
                            padding: tuple[int, int], dilation: tuple[int, int], groups: int,
                            config: int = -1) -> None:
    """grad_weight (C_out, C / groups, KH, KW) = the weight's gradient of the
    convolution for grad_out and the input inp, on tensor cores
    (mt_conv2d_tf32_weight_grad)."""
    check(lib().mt_conv2d_tf32_weight_grad(grad_weight.descriptor(), grad_out.descriptor(), inp.descriptor(),
                                           *_args(stride, padding, dilation, groups, config)),
          "mt_conv2d_tf32_weight_grad")
