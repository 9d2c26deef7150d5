"""where (src/where.cu)."""

from __future__ import annotations

from ctypes import c_int
from typing import Any

from .loader import MtTensor, declare, C, check

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_where": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor]),
}
declare(SIGNATURES)


def where(out: Any, cond: Any, a: Any, b: Any) -> None:
    """out = a where cond is non-zero, else b, broadcast (mt_where)."""
    check(C.mt_where(out.descriptor(), cond.descriptor(), a.descriptor(), b.descriptor()), "mt_where")
