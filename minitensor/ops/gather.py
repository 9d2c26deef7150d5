"""gather and scatter_add along a dim (src/gather.cu)."""

from __future__ import annotations

from typing import Any

from .. import _lib
from .._array import Array, bump_version, empty, shares_storage
from .._views import index
from .._dtype import DType, bool_
from .._errors import DimError, DTypeError, InvalidArgumentError, ShapeError
from .._storage import Storage
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


def _indices_checked(index: Array, limit: int, func: str) -> bool:
    """Whether index's values were checked already against [0, limit), so that
    the device need not check them again (its check waits for the answer).

    As cross_entropy's targets: an index view checked once and not written
    since (the same view, the same storage version) is not checked again;
    memory that another library owns always is. Inside a CUDA graph capture,
    where the check cannot wait, an index not checked before is refused here
    with the way out: run the step once before capturing it. The documented
    exception: ids written into a captured index tensor between replays are
    not checked (the replay runs no Python); a bad one gathers 0 and adds
    nothing, the kernels never address outside the tensors.
    """
    storage = index._storage
    if type(storage) is not Storage:
        return False
    seal = (index._offset, index._shape, index._strides, limit, storage.version)
    if getattr(storage, "gather_indices_checked", None) == seal:
        return True
    if _lib.capturing():
        raise InvalidArgumentError(
            f"{func}: the indices (shape {index.shape}) are checked on the device before their first use, which "
            f"waits for the answer, and a CUDA graph capture cannot wait; run the step once before capturing it "
            f"(an index tensor checked then, and not written since, is not checked again)")
    return False


def _mark_checked(index: Array, limit: int) -> None:
    """Notes that index's values are in [0, limit) (see _indices_checked)."""
    storage = index._storage
    if type(storage) is Storage:
        storage.gather_indices_checked = (index._offset, index._shape, index._strides, limit, storage.version)


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
        limit = x.shape[d]
        _lib.gather(out, x, index, d, _indices_checked(index, limit, "gather()"))
        _mark_checked(index, limit)  # the call raised otherwise
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
        limit = out.shape[d]
        _lib.scatter_add(out, index, src, d, _indices_checked(index, limit, "scatter_add_()"))
        _mark_checked(index, limit)
    return out


def scatter_add(x: Array, dim: int, index: Array, src: Array) -> Array:
    """A copy of x with src added at index along dim (out-of-place scatter_add_)."""
    _require_array(x, "scatter_add()")
    return scatter_add_(clone(x), dim, index, src)
