"""The map and zip kernels, fill, and the transpose ladder's copies (src/map.cu, src/zip.cu)."""

from __future__ import annotations

from ctypes import c_double, c_int
from typing import Any

from .loader import MT_OK, MtTensor, declare, lib, check, _op_id

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_map": (c_int, [c_int, MtTensor, MtTensor, c_double]),
    "mt_fill": (c_int, [MtTensor, c_double]),
    "mt_zip": (c_int, [c_int, MtTensor, MtTensor, MtTensor]),
    "mt_copy_variant": (c_int, [MtTensor, MtTensor, c_int]),
    "mt_map_scalars": (c_int, [c_int, MtTensor, MtTensor, c_double, c_double]),
    "mt_zip_scalars": (c_int, [c_int, MtTensor, MtTensor, MtTensor, c_double, c_double]),
}
declare(SIGNATURES)


def map_(op: str, out: Any, inp: Any, scalar: float = 0.0) -> None:
    """out = op(inp, scalar), elementwise (mt_map)."""
    status = lib().mt_map(_op_id("map", op), out.descriptor(), inp.descriptor(), float(scalar))
    if status != MT_OK:
        check(status, f"mt_map({op})")


def fill(out: Any, value: float) -> None:
    """out = value everywhere (mt_fill)."""
    check(lib().mt_fill(out.descriptor(), float(value)), "mt_fill")


def zip_(op: str, out: Any, a: Any, b: Any) -> None:
    """out = op(a, b) with broadcasting (mt_zip)."""
    status = lib().mt_zip(_op_id("zip", op), out.descriptor(), a.descriptor(), b.descriptor())
    if status != MT_OK:
        check(status, f"mt_zip({op})")



def copy_variant(out: Any, inp: Any, algo: str) -> None:
    """out = inp with a chosen rung of the transpose ladder (mt_copy_variant)."""
    check(lib().mt_copy_variant(out.descriptor(), inp.descriptor(), _op_id("copy_algo", algo)), f"mt_copy_variant({algo})")


def map_scalars(op: str, out: Any, inp: Any, s: float, t: float) -> None:
    """out = op(inp) with the op's two scalars (mt_map_scalars: hardtanh's min and max, ...)."""
    status = lib().mt_map_scalars(_op_id("map", op), out.descriptor(), inp.descriptor(), float(s), float(t))
    if status != MT_OK:
        check(status, f"mt_map_scalars({op})")


def zip_scalars(op: str, out: Any, a: Any, b: Any, s: float, t: float) -> None:
    """out = op(a, b) with the op's two scalars (mt_zip_scalars: elu_backward's alpha, ...)."""
    status = lib().mt_zip_scalars(_op_id("zip", op), out.descriptor(), a.descriptor(), b.descriptor(), float(s), float(t))
    if status != MT_OK:
        check(status, f"mt_zip_scalars({op})")
