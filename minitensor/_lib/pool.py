"""2-D pooling, forward and backward (src/pool.cu)."""

from __future__ import annotations

from ctypes import POINTER, c_int, c_int64
from typing import Any, Optional

from .loader import MT_OK, C, MtTensor, declare, lib, check

_WINDOW = [c_int] * 8  # kernel, stride, padding, dilation: (h, w) each

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_max_pool2d": (c_int, [MtTensor, MtTensor, MtTensor] + _WINDOW),
    "mt_max_pool2d_backward": (c_int, [MtTensor, MtTensor, MtTensor] + _WINDOW),
    "mt_avg_pool2d": (c_int, [MtTensor, MtTensor] + [c_int] * 6 + [c_int, c_int64]),
    "mt_avg_pool2d_backward": (c_int, [MtTensor, MtTensor] + [c_int] * 6 + [c_int, c_int64]),
    "mt_adaptive_avg_pool2d": (c_int, [MtTensor, MtTensor]),
    "mt_adaptive_avg_pool2d_backward": (c_int, [MtTensor, MtTensor]),
    "mt_max_pool2d_new": (c_int, [POINTER(MtTensor), POINTER(MtTensor), POINTER(MtTensor)] + _WINDOW),
    "mt_avg_pool2d_new": (c_int, [POINTER(MtTensor), POINTER(MtTensor)] + [c_int] * 6 + [c_int, c_int64]),
}
declare(SIGNATURES)

Pair = tuple[int, int]


def max_pool2d(out: Any, indices: Any, inp: Any, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair) -> None:
    """out, indices = each window's maximum of inp and its position in its plane (mt_max_pool2d);
    indices None: the values only (a zeroed descriptor, the C API's none)."""
    # check() only on failure, C's function looked up once: this runs on every forward call.
    status = C.mt_max_pool2d(out.descriptor(), MtTensor() if indices is None else indices.descriptor(),
                             inp._desc or inp.descriptor(), *kernel, *stride, *padding, *dilation)
    if status != MT_OK:
        check(status, "mt_max_pool2d")


def max_pool2d_backward(grad_in: Any, grad_out: Any, indices: Any, kernel: Pair, stride: Pair, padding: Pair,
                        dilation: Pair) -> None:
    """grad_in = grad_out added at the positions of the maxima (mt_max_pool2d_backward)."""
    check(lib().mt_max_pool2d_backward(grad_in.descriptor(), grad_out.descriptor(), indices.descriptor(), *kernel,
                                       *stride, *padding, *dilation), "mt_max_pool2d_backward")


def avg_pool2d(out: Any, inp: Any, kernel: Pair, stride: Pair, padding: Pair, count_include_pad: bool,
               divisor: int) -> None:
    """out = each window's mean of inp (mt_avg_pool2d; divisor 0: none)."""
    status = C.mt_avg_pool2d(out.descriptor(), inp._desc or inp.descriptor(), *kernel, *stride, *padding,
                             int(bool(count_include_pad)), int(divisor))
    if status != MT_OK:
        check(status, "mt_avg_pool2d")


def avg_pool2d_backward(grad_in: Any, grad_out: Any, kernel: Pair, stride: Pair, padding: Pair,
                        count_include_pad: bool, divisor: int) -> None:
    """grad_in = each window's gradient spread evenly over it (mt_avg_pool2d_backward)."""
    check(lib().mt_avg_pool2d_backward(grad_in.descriptor(), grad_out.descriptor(), *kernel, *stride, *padding,
                                       int(bool(count_include_pad)), int(divisor)), "mt_avg_pool2d_backward")


def adaptive_avg_pool2d(out: Any, inp: Any) -> None:
    """out (N, C, OH, OW) = the means of inp's adaptive windows (mt_adaptive_avg_pool2d)."""
    check(lib().mt_adaptive_avg_pool2d(out.descriptor(), inp.descriptor()), "mt_adaptive_avg_pool2d")


def adaptive_avg_pool2d_backward(grad_in: Any, grad_out: Any) -> None:
    """grad_in = each adaptive window's gradient spread over it (mt_adaptive_avg_pool2d_backward)."""
    check(lib().mt_adaptive_avg_pool2d_backward(grad_in.descriptor(), grad_out.descriptor()),
          "mt_adaptive_avg_pool2d_backward")


def max_pool2d_new(out: MtTensor, indices: Optional[MtTensor], inp: Any, kernel: Pair, stride: Pair, padding: Pair,
                   dilation: Pair) -> None:
    """mt_max_pool2d into outputs allocated by the library in the same call
    (mt_max_pool2d_new): out and indices (None: the values only) describe them
    and get their addresses, which the caller then owns."""
    status = C.mt_max_pool2d_new(out, indices, inp._desc or inp.descriptor(), *kernel, *stride, *padding, *dilation)
    if status != MT_OK:
        check(status, "mt_max_pool2d_new")


def avg_pool2d_new(out: MtTensor, inp: Any, kernel: Pair, stride: Pair, padding: Pair, count_include_pad: bool,
                   divisor: int) -> None:
    """mt_avg_pool2d into an output allocated by the library in the same call
    (mt_avg_pool2d_new); out gets its address, which the caller then owns."""
    status = C.mt_avg_pool2d_new(out, inp._desc or inp.descriptor(), *kernel, *stride, *padding,
                                 int(bool(count_include_pad)), int(divisor))
    if status != MT_OK:
        check(status, "mt_avg_pool2d_new")
