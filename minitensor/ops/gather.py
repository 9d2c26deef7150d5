"""gather and scatter_add along a dim (src/gather.cu)."""

from __future__ import annotations

from typing import Any

from .. import _lib
from .._array import Array, bump_version, empty, shares_storage
from .._views import index
from .._dtype import DType, bool_
from .._errors import DimError, DTypeError, ShapeError
from .._shape import normalize_dim
from .core import is_array, check_writable, _require_array, cast, clone


# ---- gather / scatter ----------------------------------------------------------------------


def _index_tensor(index: Any, dtype: DType, func: str) -> Array:
    """index as a tensor the kernels take: int64, as torch's; or, a documented
    difference, whole numbers in a float tensor (the kernels read int64,
    float32 and float64 indices, whatever the data's dtype)."""
    if not is_array(index):
        raise TypeError(f"{func}: index must be a Tensor, got {type(index).__name__}")
    if index.dtype is bool_:
        raise DTypeError(f"{func}: index must be an int64 tensor, got a bool tensor (a mask selects with x[mask])")
    return index


def gather(x: Array, dim: int, index: Array) -> Array:
    """out[i][j] = x[i][index[i][j]] along dim (torch.gather); index holds whole numbers."""
    _require_array(x, "gather()")
    index = _index_tensor(index, x.dtype, "gather()")
    d = normalize_dim(dim, x.ndim, "gather()")
    if index.ndim != x.ndim:
        raise ShapeError(
            f"gather(): index of shape {index.shape} must have as many dims as the input of shape {x.shape}"
        )
    for k in range(x.ndim):
        if k != d and index.shape[k] > x.shape[k]:
            raise ShapeError(
                f"gather(): index of shape {index.shape} is larger than the input of shape {x.shape} "
                f"in dim {k}"
            )
    out = empty(index.shape, x.dtype)
    if out.numel() > 0:
        if x.shape[d] == 0:
            raise DimError(f"gather(): dim {d} of the input of shape {x.shape} is empty")
        _lib.gather(out, x, index, d)
    return out


def scatter_add_(out: Array, dim: int, index: Array, src: Array) -> Array:
    """out[i][index[i][j]] += src[i][j] along dim, in place (torch's scatter_add_)."""
    _require_array(out, "scatter_add_()")
    _require_array(src, "scatter_add_()", "src")
    index = _index_tensor(index, out.dtype, "scatter_add_()")
    src = cast(src, out.dtype)
    d = normalize_dim(dim, out.ndim, "scatter_add_()")
    check_writable(out, "scatter_add_()")
    if index.shape != src.shape:
        raise ShapeError(
            f"scatter_add_(): index of shape {index.shape} must have the shape of src {src.shape}"
        )
    if index.ndim != out.ndim:
        raise ShapeError(
            f"scatter_add_(): index of shape {index.shape} must have as many dims as the "
            f"output of shape {out.shape}"
        )
    for k in range(out.ndim):
        if k != d and index.shape[k] > out.shape[k]:
            raise ShapeError(
                f"scatter_add_(): index of shape {index.shape} is larger than the output of "
                f"shape {out.shape} in dim {k}"
            )
    bump_version(out)
    if index.numel() > 0:
        if shares_storage(src, out):
            src = clone(src)
        _lib.scatter_add(out, index, src, d)
    return out


def scatter_add(x: Array, dim: int, index: Array, src: Array) -> Array:
    """A copy of x with src added at index along dim (out-of-place scatter_add_)."""
    _require_array(x, "scatter_add()")
    return scatter_add_(clone(x), dim, index, src)
