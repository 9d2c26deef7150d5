"""logsumexp along a dim (src/logsumexp.cu)."""

from __future__ import annotations

from ctypes import c_int
from typing import Any

from .loader import MtTensor, declare, lib, check

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_logsumexp": (c_int, [MtTensor, MtTensor, c_int]),
    "mt_logsumexp_backward": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor]),
}
declare(SIGNATURES)


def logsumexp(out: Any, inp: Any, dim: int) -> None:
    """out (inp's shape, dim kept as 1) = log(sum(exp(inp))) along dim (mt_logsumexp)."""
    check(lib().mt_logsumexp(out.descriptor(), inp.descriptor(), dim), "mt_logsumexp")


def logsumexp_backward(grad_in: Any, grad_out: Any, inp: Any, lse: Any) -> None:
    """grad_in = grad_out * exp(inp - lse), grad_out and lse of inp's rank with the
    reduced dims kept as 1 (mt_logsumexp_backward)."""
    check(lib().mt_logsumexp_backward(grad_in.descriptor(), grad_out.descriptor(), inp.descriptor(),
                                      lse.descriptor()), "mt_logsumexp_backward")
