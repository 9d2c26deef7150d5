"""softmax and its gradient (src/softmax.cu)."""

from __future__ import annotations

from ctypes import c_double, c_int
from typing import Any

from .loader import MtTensor, declare, C, check

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_softmax": (c_int, [MtTensor, MtTensor, c_int, c_int]),
    "mt_softmax_backward": (c_int, [MtTensor, MtTensor, MtTensor, c_int, c_int, c_double]),
}
declare(SIGNATURES)


def softmax(out: Any, inp: Any, dim: int, log: bool) -> None:
    """out = (log_)softmax(inp) along dim (mt_softmax)."""
    check(C.mt_softmax(out.descriptor(), inp.descriptor(), dim, 1 if log else 0), "mt_softmax")


def softmax_backward(grad_in: Any, grad_out: Any, out: Any, dim: int, log: bool, scale: float) -> None:
    """grad_in = the gradient of (log_)softmax from its output and grad_out, times
    scale (mt_softmax_backward)."""
    check(C.mt_softmax_backward(grad_in.descriptor(), grad_out.descriptor(), out.descriptor(), dim,
                                    1 if log else 0, float(scale)), "mt_softmax_backward")
