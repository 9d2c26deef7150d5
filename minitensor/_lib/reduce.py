"""The reductions and the reduction ladder (src/reduce.cu, src/reduce_ladder.cu)."""

from __future__ import annotations

from ctypes import c_int
from typing import Any

from .loader import MT_OK, C, MtTensor, declare, lib, check, _op_id, _OP_IDS

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_reduce": (c_int, [c_int, MtTensor, MtTensor, c_int]),
    "mt_reduce_all": (c_int, [c_int, MtTensor, MtTensor]),
    "mt_reduce_variant": (c_int, [c_int, MtTensor, MtTensor, c_int, c_int]),
    "mt_reduce_with_indices": (c_int, [c_int, MtTensor, MtTensor, MtTensor, c_int]),
    "mt_reduce_index_rows": (c_int, [c_int, MtTensor, MtTensor, MtTensor, c_int, c_int]),
}
declare(SIGNATURES)


def reduce_(op: str, out: Any, inp: Any, dim: int) -> None:
    """Reduces inp along dim into out (keepdim shape) (mt_reduce)."""
    function = C.mt_reduce  # first: it loads the library, which fills the op tables
    op_id = _OP_IDS["reduce"].get(op)
    status = function(_op_id("reduce", op) if op_id is None else op_id, out.descriptor(), inp.descriptor(), dim)
    if status != MT_OK:
        check(status, f"mt_reduce({op})")


def reduce_all(op: str, out: Any, inp: Any) -> None:
    """Reduces every element of inp into the one element of out (mt_reduce_all)."""
    function = C.mt_reduce_all  # first: it loads the library, which fills the op tables
    op_id = _OP_IDS["reduce"].get(op)
    status = function(_op_id("reduce", op) if op_id is None else op_id, out._desc or out.descriptor(),
                      inp._desc or inp.descriptor())
    if status != MT_OK:
        check(status, f"mt_reduce_all({op})")


def reduce_with_indices(op: str, values: Any, indices: Any, inp: Any, dim: int) -> None:
    """max or min of inp along dim into values and their int64 indices into indices (both
    of the keepdim shape), in one pass (mt_reduce_with_indices)."""
    function = C.mt_reduce_with_indices  # first: it loads the library, which fills the op tables
    op_id = _OP_IDS["reduce"].get(op)
    status = function(_op_id("reduce", op) if op_id is None else op_id, values.descriptor(), indices.descriptor(),
                      inp._desc or inp.descriptor(), dim)
    if status != MT_OK:
        check(status, f"mt_reduce_with_indices({op})")


def reduce_variant(op: str, out: Any, inp: Any, dim: int, algo: str) -> None:
    """mt_reduce with a chosen rung of the reduction ladder (mt_reduce_variant)."""
    check(
        lib().mt_reduce_variant(_op_id("reduce", op), out.descriptor(), inp.descriptor(), dim, _op_id("reduce_algo", algo)),
        f"mt_reduce_variant({op}, {algo})",
    )


def reduce_index_rows(op: str, values: Any, indices: Any, inp: Any, dim: int, warps: int) -> None:
    """max / min / argmax / argmin of inp's contiguous rows (dim its last) into values and
    indices (either None: not written) on src/reduce_index_rows.cu with `warps` warps a
    row (0: the library's choice) (mt_reduce_index_rows)."""
    check(lib().mt_reduce_index_rows(_op_id("reduce", op), MtTensor() if values is None else values.descriptor(),
                                     MtTensor() if indices is None else indices.descriptor(), inp.descriptor(),
                                     dim, warps), f"mt_reduce_index_rows({op}, warps={warps})")
