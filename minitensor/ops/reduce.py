"""The reductions (src/reduce.cu, src/reduce_ladder.cu): sum, prod, max, min,
argmax, argmin over dims or every element, and mean."""

from __future__ import annotations

import math
from typing import Any

from .. import _lib
from .._array import Array, empty, empty_like, same_elements
from .._dtype import int64
from .._errors import DimError
from .._shape import contiguous_strides, keepdim_shape, numel, reduce_dims
from .core import _require_array, require_float, fill_, cast, clone, op_takes, op_result_dtype


# ---- reductions ------------------------------------------------------------------

_IDENTITY = {"sum": 0.0, "prod": 1.0}
_IDENTITY_OR_EXTREME = ("sum", "prod", "max", "min")  # the reductions whose float result keeps the dtype


def reduce_(op: str, x: Array, dim: Any = None, keepdim: bool = False) -> Array:
    """Reduces x with op ("sum", "prod", "max", "min", "argmax", "argmin").

    dim: None (every element), an int, or for sum/prod/max/min a tuple of ints.
    keepdim keeps the reduced dims with size 1. argmax/argmin give int64
    indices; with dim=None, the index into the flattened tensor. sum and prod
    of bool tensors count in int64, as torch's.
    """
    if dim is None and not keepdim and op in _IDENTITY_OR_EXTREME and isinstance(x, Array) and x._ndim \
            and x._dtype.is_floating_point:
        # The common full reduction (a loss's sum, a norm): a float result of
        # x's dtype and shape (), reduced straight into it.
        n = x.numel()
        if n:
            out = empty((), x._dtype)
            _lib.reduce_all(op, out, x)
            return out
    func = f"{op}()"
    _require_array(x, func)
    arg = op in ("argmax", "argmin")
    shape = x._shape
    if type(dim) is int and -len(shape) <= dim < len(shape):
        dims = (dim + len(shape) if dim < 0 else dim,)  # one dim, without reduce_dims' calls
    else:
        dims = reduce_dims(dim, x.ndim, func, not arg)
    if x._dtype.is_floating_point and op in _IDENTITY_OR_EXTREME:
        out_dtype = x._dtype  # their dtype rules, for a float x, without the two lookups
    elif x._dtype.is_floating_point and arg:
        out_dtype = int64
    else:
        if not op_takes("reduce", op, x.dtype):
            x = cast(x, int64)  # sum and prod of bools count in int64, as torch's
        out_dtype = op_result_dtype("reduce", op, x.dtype)
    if x.ndim == 0:
        if arg:
            return fill_(empty((), int64), 0)
        return clone(x)
    if len(dims) == 1:
        (d,) = dims
        kept, reduced = shape[:d] + (1,) + shape[d + 1:], shape[d]
        final = kept if keepdim else shape[:d] + shape[d + 1:]
    else:
        kept = keepdim_shape(shape, dims)
        # (lists, not generators: a generator is a Python call per element)
        final = kept if keepdim else tuple([n for d, n in enumerate(shape) if d not in dims])
        reduced = numel([shape[d] for d in dims])
    if reduced == 0 and op not in _IDENTITY:
        raise DimError(
            f"{func}: cannot reduce over zero elements (dims {dims} of a tensor of shape {x.shape}); "
            f"{op} has no identity"
        )
    out = empty(kept, out_dtype)
    if 0 in kept:
        pass
    elif 0 in shape:
        fill_(out, _IDENTITY[op])
    elif len(dims) == x.ndim and (len(dims) > 1 or dim is None):
        _lib.reduce_all(op, out, x)
    else:
        src = x
        for i, d in enumerate(dims):
            target = out if i == len(dims) - 1 else empty(src.shape[:d] + (1,) + src.shape[d + 1 :], x.dtype)
            _lib.reduce_(op, target, src, d)
            src = target
    if keepdim:
        return out
    return same_elements(out, final, contiguous_strides(final), 0)  # out's elements in the final shape


def reduce_with_indices(op: str, x: Array, dim: int, keepdim: bool = False) -> tuple[Array, Array]:
    """torch's max(dim) (op "max") or min(dim) ("min"): (values, indices) along one int
    dim, the indices int64, found in one pass over x (mt_reduce_with_indices): the
    first index of the maximum (minimum); a NaN beats every number, as in torch."""
    func = f"{op}()"
    _require_array(x, func)
    if op not in ("max", "min"):
        raise ValueError(f"reduce_with_indices(): op must be 'max' or 'min', got {op!r}")
    if dim is None or isinstance(dim, (tuple, list)):
        raise TypeError(f"{func}: the indices need one int dim, got {dim!r}")
    shape = x._shape
    if type(dim) is int and -len(shape) <= dim < len(shape):
        d = dim + len(shape) if dim < 0 else dim  # the common case, without reduce_dims' calls
    else:
        dims = reduce_dims(dim, x.ndim, func, False)
        if x.ndim == 0:
            return clone(x), fill_(empty((), int64), 0)
        (d,) = dims
    if shape[d] == 0:
        raise DimError(f"{func}: cannot reduce over zero elements (dim {d} of a tensor of shape {x.shape}); "
                       f"{op} has no identity")
    kept = shape[:d] + (1,) + shape[d + 1:]
    values, indices = empty(kept, x._dtype), empty(kept, int64)
    if 0 not in shape:
        _lib.reduce_with_indices(op, values, indices, x, d)
    if keepdim:
        return values, indices
    # The same elements in the shape without dim d: views that need no check.
    final = shape[:d] + shape[d + 1:]
    strides = contiguous_strides(final)
    return (same_elements(values, final, strides, 0), same_elements(indices, final, strides, 0))


def reduce_all(op: str, x: Array, keepdim: bool = False) -> Array:
    """Reduces every element of x with op (reduce_ with dim=None)."""
    return reduce_(op, x, None, keepdim)


def mean(x: Array, dim: Any = None, keepdim: bool = False) -> Array:
    """The mean over dim (None: every element; an int or a tuple); nan when empty.
    Float tensors only, as in torch (the mean of integers is not an integer)."""
    _require_array(x, "mean()")
    require_float(x, "mean()")
    dims = reduce_dims(dim, x.ndim, "mean()")
    count = numel(x.shape[d] for d in dims)
    total = reduce_("sum", x, dim, keepdim)
    # total * (1 / count) by the map kernel's mul_scalar, called directly: the
    # elementwise family (map_) comes after this one in the ops layer's order.
    out = empty_like(total)
    if out.numel() > 0:
        _lib.map_("mul_scalar", out, total, 1.0 / count if count else math.nan)
    return out


def reduce_rung_(op: str, out: Array, x: Array, dim: int, algo: str) -> None:
    """Reduces x along dim into out (keepdim shape) with rung algo of the reduction
    ladder (mt_reduce_variant); the caller checked the arguments (minitensor.kernels.reduce)."""
    _lib.reduce_variant(op, out, x, dim, algo)


def reduce_index_rows(op: str, x: Array, warps: int = 0) -> Any:
    """max / min / argmax / argmin of x along its last dim on the one-pass row kernel
    (src/reduce_index_rows.cu) with `warps` warps a row (1, 2, 4 or 8; 0: the library's
    choice), for the benchmarks and the tests: op "max" or "min" gives (values,
    indices), "amax" / "amin" the values, "argmax" / "argmin" the int64 indices, each of
    x's shape without its last dim. x must be float32 or float64 rows of stride 1, a
    whole number of 16-byte Packs each, every row 16-byte aligned (else a ValueError
    from the library)."""
    func = "reduce_index_rows()"
    _require_array(x, func)
    kinds = {"max": ("max", True, True), "min": ("min", True, True), "amax": ("max", True, False),
             "amin": ("min", True, False), "argmax": ("argmax", False, True), "argmin": ("argmin", False, True)}
    if op not in kinds:
        raise ValueError(f"{func}: op must be one of {sorted(kinds)}, got {op!r}")
    if x.ndim == 0:
        raise DimError(f"{func}: x must have at least one dim (it reduces the last), got shape ()")
    c_op, with_values, with_indices = kinds[op]
    final = x.shape[:-1]
    kept = final + (1,)
    values = empty(kept, x.dtype) if with_values else None
    indices = empty(kept, int64) if with_indices else None
    _lib.reduce_index_rows(c_op, values, indices, x, x.ndim - 1, warps)
    strides = contiguous_strides(final)
    values = None if values is None else same_elements(values, final, strides, 0)
    indices = None if indices is None else same_elements(indices, final, strides, 0)
    if with_values and with_indices:
        return values, indices
    return values if with_values else indices
