"""Indexing a tensor with an index array (a list, a NumPy array, an int64 or
bool tensor, or a slice with a negative step): x[key] gathers the rows the
array names along its dim (_select), x[key] = value writes them (_assign_rows).
Basic indexing (ints, slices, None, ...) is a view (minitensor/_views.py).

The functions take Tensors; they are typed as autograd's Variable, and make
new Tensors with ``x._wrap``, because tensor.py imports this module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _array, autograd, ops
from ._array import Array
from ._dtype import DType, bool_, int64
from ._errors import OutOfMemoryError
from .autograd import Variable
from ._inplace import _check_leaf, _records, _previous, _rebase


def _is_index_array(k: Any) -> bool:
    """An index array, or a slice with a negative step (NumPy's reversed view;
    minitensor has no negative strides, so it selects rows as an array does)."""
    return isinstance(k, (list, np.ndarray, Array)) or (
        isinstance(k, slice) and isinstance(k.step, (int, np.integer)) and not isinstance(k.step, bool)
        and k.step < 0)


def _has_index_array(key: Any) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    return any(_is_index_array(k) for k in items)


def _index_plan(x: Variable, key: Any) -> tuple[int, int, np.ndarray, tuple[int, ...]]:
    """For a key with one index array (ints or a bool mask) among full slices
    and an ellipsis: (dim, how many dims of x it consumes, the rows it names
    along those dims flattened, in 0..size-1, the shape of the index)."""
    items = key if isinstance(key, tuple) else (key,)
    arrays = [i for i, k in enumerate(items) if _is_index_array(k)]
    for i in arrays:
        if isinstance(items[i], Array):
            if items[i].dtype.is_floating_point:
                raise IndexError(f"tensors used as indices must be int64 or bool tensors, got "
                                 f"{items[i].dtype.name} (as in torch)")
            # The rows it names are read back to the host (a synchronization, as
            # in torch: a mask's count of True decides the result's shape).
            items = items[:i] + (_array.to_numpy(items[i]),) + items[i + 1:]
    if len(arrays) != 1 or any(not (k is Ellipsis or k == slice(None)) for i, k in enumerate(items)
                               if i != arrays[0]):
        raise IndexError(f"only one index array, with ':' and '...' beside it, is supported; got {key!r}")
    at = arrays[0]
    if isinstance(items[at], slice):  # a negative step: the rows it walks, as an array
        fill = x.ndim - (sum(1 for k in items if k is not Ellipsis))
        dim = sum(fill if k is Ellipsis else 1 for k in items[:at])
        if fill < 0 or dim >= x.ndim:
            raise IndexError(f"too many indices for a tensor of {x.ndim} dims: {key!r}")
        walk = range(*items[at].indices(x.shape[dim]))
        _check_host_rows(len(walk), x, "a negative-step slice")
        index = np.arange(walk.start, walk.stop, walk.step, dtype=np.int64)
    else:
        index = np.asarray(items[at])
    if index.dtype == bool:
        consumed = index.ndim
    elif index.size == 0 or index.dtype.kind in "iu":
        consumed = 1
        index = index.astype(np.int64)
    else:
        raise IndexError(f"arrays used as indices must be of integer (or boolean) type, got {index.dtype}")
    others = sum(1 for k in items if k is not Ellipsis) - 1
    fill = x.ndim - others - consumed
    if fill < 0 or sum(1 for k in items if k is Ellipsis) > 1:
        raise IndexError(f"too many indices for a tensor of {x.ndim} dims: {key!r}")
    dim = sum(fill if k is Ellipsis else 1 for k in items[:at])
    if index.dtype == bool:
        shape = x.shape[dim:dim + consumed]
        if index.shape != shape:
            raise IndexError(f"the mask's shape {index.shape} does not match the indexed dims {shape} "
                             f"of a tensor of shape {x.shape}")
        rows = np.flatnonzero(index)
        return dim, consumed, rows, rows.shape
    size = x.shape[dim]
    if index.size and (index.min() < -size or index.max() >= size):
        bad = int(index[(index < -size) | (index >= size)].flat[0])
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
    return dim, 1, np.where(index < 0, index + size, index).reshape(-1), index.shape


def _check_host_rows(rows: int, x: Variable, what: str) -> None:
    """Refuses a host table of `rows` entries (the index array that a negative
    step or a write builds) larger than this machine's memory: an expanded
    tensor can have far more rows than anything could hold."""
    memory = _array._host_memory_bytes()
    if memory and rows * 8 > memory:
        raise OutOfMemoryError(f"{what} over {rows} rows of a tensor of shape {x.shape} needs more host memory "
                               f"than this machine's {memory} bytes; index a smaller part first")


def _flat(x: Variable, dim: int, consumed: int) -> Variable:
    """x with the `consumed` dims from dim on made one (a mask over several dims)."""
    return x if consumed == 1 else x.reshape(*x.shape[:dim], -1, *x.shape[dim + consumed:])


def _select(x: Variable, key: Any) -> Variable:
    """x[key] with an index array: the rows it names along its dim, gathered."""
    dim, consumed, rows, shape = _index_plan(x, key)
    picked = _gather_rows(_flat(x, dim, consumed), dim, rows)
    return picked.reshape(*x.shape[:dim], *shape, *x.shape[dim + consumed:])


def _assign_rows(x: Variable, key: Any, value: Any) -> None:
    """x[key] = value with an index array: where(written, value's rows, x) over
    the indexed dim, value's rows gathered to the positions they write (exact
    copies), computed out of place (recorded where autograd records) and
    written into x."""
    _check_leaf(x, "__setitem__")
    dim, consumed, rows, shape = _index_plan(x, key)
    if len(np.unique(rows)) != len(rows):
        raise IndexError("x[index] = value with repeated indices: which write wins is unspecified in torch; "
                         "minitensor refuses (make the indices unique, or use scatter_add for sums)")
    ops.check_writable(x, "__setitem__")  # before anything is built for the write
    selected = x.shape[:dim] + shape + x.shape[dim + consumed:]  # x[key].shape, which value broadcasts to
    if isinstance(value, Variable) and value.shape != selected:
        extra = value.ndim - len(selected)
        if extra > 0 and all(size == 1 for size in value.shape[:extra]):
            value = value.reshape(*value.shape[extra:])  # leading 1s dropped, as NumPy, torch and basic keys
        value = value.expand(*selected)
    records = _records(x, value)
    if len(rows) == 0:
        if records and isinstance(value, Variable) and value.requires_grad and x.dtype.is_floating_point:
            # Nothing is written, but value is in the graph, as torch's: its
            # gradient is zeros, not None. value has no element, so its sum
            # is exactly +0.0, and x - 0.0 keeps every value of x (-0.0 too).
            with autograd.enable_grad():
                _rebase(x, _previous(x) - value.sum().to(x.dtype))
        return
    _check_host_rows(int(np.prod(x.shape[dim:dim + consumed])), x, "a write through an index array")
    with autograd.enable_grad() if records else autograd.no_grad():
        # The rules below save what they read: a copy of x's old value, which
        # the write into x must not change (as _inplace does).
        old = autograd.Clone.apply(_previous(x)) if records else x.detach()
        flat = _flat(old, dim, consumed)
        size = flat.shape[dim]
        source = np.zeros(size, dtype=np.int64)  # position -> the row of value written there
        source[rows] = np.arange(len(rows))
        written = np.zeros(size, dtype=bool)
        written[rows] = True
        mask = _row_index(x, dim, written, flat.shape, bool_)  # True where a row is written, expanded
        if isinstance(value, Variable):
            rows_of_value = value.reshape(*flat.shape[:dim], len(rows), *flat.shape[dim + 1:])
            value = rows_of_value.gather(dim, _row_index(x, dim, source, flat.shape))
        result = autograd.Where.apply(mask, value, flat).reshape(*x.shape)
    if records:
        _rebase(x, result)
    else:
        ops.copy_(x, result)


def _row_index(like: Variable, dim: int, rows: np.ndarray, shape: tuple[int, ...],
               dtype: DType = int64) -> Variable:
    """Values along dim (rows for gather, or a mask) as an int64 (or dtype) tensor
    uploaded once and expanded over the other dims to `shape` (a Tensor, as like is)."""
    host = rows.astype(dtype.np_dtype).reshape((1,) * dim + (len(rows),) + (1,) * (len(shape) - dim - 1))
    index = _array.empty(host.shape, dtype)
    _array.upload(index, np.ascontiguousarray(host))
    return like._wrap(index).expand(*shape)


def _gather_rows(x: Variable, dim: int, rows: np.ndarray) -> Variable:
    """The rows of x along dim (whole numbers in 0..size-1), in order."""
    out_shape = x.shape[:dim] + (len(rows),) + x.shape[dim + 1:]
    return x.gather(dim, _row_index(x, dim, rows, out_shape))
