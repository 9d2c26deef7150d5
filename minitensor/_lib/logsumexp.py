"""logsumexp along a dim (src/logsumexp.cu)."""

from __future__ import annotations

from ctypes import c_int
from typing import Any

from .loader import MtTensor, declare, lib, check

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_logsumexp": (c_int, [MtTensor, MtTensor, c_int]),
}
declare(SIGNATURES)


def logsumexp(out: Any, inp: Any, dim: int) -> None:
    """out (inp's shape, dim kept as 1) = log(sum(exp(inp))) along dim (mt_logsumexp)."""
    check(lib().mt_logsumexp(out.descriptor(), inp.descriptor(), dim), "mt_logsumexp")
