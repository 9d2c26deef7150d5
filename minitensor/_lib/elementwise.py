"""The map and zip kernels, fill, and the transpose ladder's copies (src/map.cu, src/zip.cu)."""

from __future__ import annotations

from ctypes import POINTER, c_double, c_int
from typing import Any

from .loader import MT_OK, C, MtTensor, declare, check, _op_id, _OP_IDS

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_map": (c_int, [c_int, MtTensor, MtTensor, c_double]),
    "mt_fill": (c_int, [MtTensor, c_double]),
    "mt_zip": (c_int, [c_int, MtTensor, MtTensor, MtTensor]),
    "mt_copy_variant": (c_int, [MtTensor, MtTensor, c_int]),
    # By pointer: ctypes passes a descriptor it holds faster than it copies one (src/new_output.cu).
    "mt_map_new": (c_int, [c_int, POINTER(MtTensor), POINTER(MtTensor), c_double]),
    "mt_zip_new": (c_int, [c_int, POINTER(MtTensor), POINTER(MtTensor), POINTER(MtTensor)]),
    "mt_map_scalars": (c_int, [c_int, MtTensor, MtTensor, c_double, c_double]),
    "mt_zip_scalars": (c_int, [c_int, MtTensor, MtTensor, MtTensor, c_double, c_double]),
}
declare(SIGNATURES)


def map_(op: str, out: Any, inp: Any, scalar: float = 0.0) -> None:
    """out = op(inp, scalar), elementwise (mt_map)."""
    function = C.mt_map  # first: it loads the library, which fills the op tables
    op_id = _OP_IDS["map"].get(op)
    status = function(_op_id("map", op) if op_id is None else op_id, out.descriptor(), inp.descriptor(),
                      float(scalar))
    if status != MT_OK:
        check(status, f"mt_map({op})")


def fill(out: Any, value: float) -> None:
    """out = value everywhere (mt_fill)."""
    status = C.mt_fill(out.descriptor(), float(value))
    if status != MT_OK:
        check(status, "mt_fill")


def zip_(op: str, out: Any, a: Any, b: Any) -> None:
    """out = op(a, b) with broadcasting (mt_zip)."""
    function = C.mt_zip
    op_id = _OP_IDS["zip"].get(op)
    status = function(_op_id("zip", op) if op_id is None else op_id, out.descriptor(), a.descriptor(),
                      b.descriptor())
    if status != MT_OK:
        check(status, f"mt_zip({op})")


def map_new(op: str, out: MtTensor, inp: Any, scalar: float) -> int:
    """A new result op(inp, scalar), allocated and computed in one call
    (mt_map_new): out describes it (dtype, shape, row-major strides) and gets
    its address; the address is returned, for the caller to own (0 when out
    has no element)."""
    function = C.mt_map_new  # first: it loads the library, which fills the op tables
    op_id = _OP_IDS["map"].get(op)
    # inp._desc: the descriptor an Array keeps once built (descriptor() builds it).
    status = function(_op_id("map", op) if op_id is None else op_id, out, inp._desc or inp.descriptor(), scalar)
    if status != MT_OK:
        check(status, f"mt_map_new({op})")
    return out.data or 0


def zip_new(op: str, out: MtTensor, a: Any, b: Any) -> int:
    """A new result op(a, b), allocated and computed in one call (mt_zip_new);
    out and the address returned as map_new's."""
    function = C.mt_zip_new
    op_id = _OP_IDS["zip"].get(op)
    status = function(_op_id("zip", op) if op_id is None else op_id, out, a._desc or a.descriptor(),
                      b._desc or b.descriptor())
    if status != MT_OK:
        check(status, f"mt_zip_new({op})")
    return out.data or 0


def copy_variant(out: Any, inp: Any, algo: str) -> None:
    """out = inp with a chosen rung of the transpose ladder (mt_copy_variant)."""
    check(C.mt_copy_variant(out.descriptor(), inp.descriptor(), _op_id("copy_algo", algo)), f"mt_copy_variant({algo})")


def map_scalars(op: str, out: Any, inp: Any, s: float, t: float) -> None:
    """out = op(inp) with the op's two scalars (mt_map_scalars: hardtanh's min and max, ...)."""
    status = C.mt_map_scalars(_op_id("map", op), out.descriptor(), inp.descriptor(), float(s), float(t))
    if status != MT_OK:
        check(status, f"mt_map_scalars({op})")


def zip_scalars(op: str, out: Any, a: Any, b: Any, s: float, t: float) -> None:
    """out = op(a, b) with the op's two scalars (mt_zip_scalars: elu_backward's alpha, ...)."""
    status = C.mt_zip_scalars(_op_id("zip", op), out.descriptor(), a.descriptor(), b.descriptor(), float(s), float(t))
    if status != MT_OK:
        check(status, f"mt_zip_scalars({op})")
