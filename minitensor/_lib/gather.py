"""gather and scatter_add (src/gather.cu)."""

from __future__ import annotations

from ctypes import c_int
from typing import Any

from .loader import MtTensor, declare, C, check

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_gather": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
    "mt_scatter_add": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
    "mt_gather_unchecked": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
    "mt_scatter_add_unchecked": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
}
declare(SIGNATURES)


def gather(out: Any, inp: Any, index: Any, dim: int, checked: bool = False) -> None:
    """out = inp gathered along dim at index (mt_gather); checked: the caller has
    checked the indices, so the device does not (mt_gather_unchecked)."""
    if checked:
        check(C.mt_gather_unchecked(out.descriptor(), inp.descriptor(), index.descriptor(), dim),
              "mt_gather_unchecked")
    else:
        check(C.mt_gather(out.descriptor(), inp.descriptor(), index.descriptor(), dim), "mt_gather")


def scatter_add(out: Any, index: Any, src: Any, dim: int, checked: bool = False) -> None:
    """out[..index..] += src along dim, in place (mt_scatter_add); checked as in gather."""
    if checked:
        check(C.mt_scatter_add_unchecked(out.descriptor(), index.descriptor(), src.descriptor(), dim),
              "mt_scatter_add_unchecked")
    else:
        check(C.mt_scatter_add(out.descriptor(), index.descriptor(), src.descriptor(), dim), "mt_scatter_add")
