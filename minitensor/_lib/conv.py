"""The tiled convolution (src/conv.cu)."""

from __future__ import annotations

from ctypes import c_int
from typing import Any

from .loader import MtTensor, declare, lib, check, _desc

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_conv2d": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, c_int, c_int, c_int, c_int, c_int, c_int, c_int,
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
