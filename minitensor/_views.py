"""_views: views of an Array, new shape/strides/offset over the same storage.

view, permute, transpose, expand, unsqueeze, squeeze, narrow, basic
indexing and as_strided only compute a new shape, strides and offset (with
the rules of _shape.py) and return a new Array over the same Storage: no
kernel runs and nothing is copied. reshape and flatten, which copy when no
view is possible, are in ops/core.py. Arguments are checked here, with errors
that name the operation.
"""

from __future__ import annotations

import operator
from typing import Any, Optional, Sequence

import numpy as np

from ._array import Array, alias, same_elements
from ._errors import DimError, ShapeError
from ._shape import INT64_LIMIT, as_shape, check_layout, check_new_shape, normalize_dim, view_layout


def as_strided(x: Array, shape: Sequence[int], strides: Sequence[int], offset: Optional[int] = None) -> Array:
    """A view of x's storage with the given shape, strides and storage offset.

    As in torch, strides and the offset must not be negative, and every
    element must lie inside x's storage (ShapeError naming all three).
    """
    shape = as_shape(shape, "as_strided()")
    strides = as_shape(strides, "as_strided(): strides")
    if offset is None:
        offset = x._offset
    elif isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"as_strided(): storage_offset must be an int, got {type(offset).__name__}")
    offset = int(offset)
    if any(s < 0 for s in strides):
        raise ShapeError(f"as_strided(): negative strides {strides} are not supported")
    if offset < 0:
        raise ShapeError(f"as_strided(): negative storage offset {offset}")
    end = check_layout(shape, strides, offset, x.dtype.itemsize, "as_strided()")
    if end > x._storage.nbytes:
        raise ShapeError(
            f"as_strided(): shape {shape}, strides {strides} and storage offset {offset} need "
            f"{end} bytes, but the storage holds {x._storage.nbytes}"
        )
    return alias(x, shape, strides, offset, "as_strided()")


def view(x: Array, shape: Sequence[int]) -> Array:
    """A view with a new shape (one -1 is inferred); error if the strides do not allow it."""
    if type(shape) is tuple and shape == x._shape:
        return x  # nothing to change (an Array never changes), as reshape
    shape, strides = view_layout(x._shape, x._strides, as_shape(shape, "view()"), "view()")
    if strides is None:
        raise ShapeError(
            f"view(): view size {shape} is not compatible with the size {x.shape} and strides "
            f"{x.strides} of the input (at least one dim spans two contiguous chunks); "
            f"use .reshape(...) instead"
        )
    return same_elements(x, shape, strides, x._offset)


def permute(x: Array, dims: Sequence[int]) -> Array:
    """A view with the dims reordered: result dim i is x's dim dims[i]."""
    ndim = x._ndim
    if type(dims) is not tuple or len(dims) != ndim:
        dims = as_shape(dims, "permute()")  # varargs, lists; its message first for non-ints
    if len(dims) != ndim:
        raise DimError(f"permute(): got {len(dims)} dims {dims} for a tensor of rank {x.ndim}")
    norm = []
    shape = []
    strides = []
    for d in dims:  # a loop, not comprehensions: every transpose and .T comes here
        if type(d) is not int or not 0 <= d < ndim:  # a dim in range needs no call
            as_shape(dims, "permute()")
            d = normalize_dim(d, ndim, "permute()")
        norm.append(d)
        shape.append(x._shape[d])
        strides.append(x._strides[d])
    if len(set(norm)) != len(norm):
        raise DimError(f"permute(): dims {dims} repeat a dim")
    return same_elements(x, tuple(shape), tuple(strides), x._offset)


def transpose(x: Array, dim0: int, dim1: int) -> Array:
    """A view with dims dim0 and dim1 swapped."""
    if x.ndim == 0:
        normalize_dim(dim0, 0, "transpose()")
        normalize_dim(dim1, 0, "transpose()")
        return alias(x, (), (), x._offset)
    ndim = x._ndim
    # Two int dims in range need no call (matmul's backward transposes each operand).
    d0 = dim0 % ndim if type(dim0) is int and -ndim <= dim0 < ndim else normalize_dim(dim0, ndim, "transpose()")
    d1 = dim1 % ndim if type(dim1) is int and -ndim <= dim1 < ndim else normalize_dim(dim1, ndim, "transpose()")
    order = list(range(ndim))
    order[d0], order[d1] = order[d1], order[d0]
    return permute(x, tuple(order))


def expand(x: Array, shape: Sequence[int]) -> Array:
    """A view repeating size-1 dims to shape without copying (stride 0); -1 keeps a size."""
    shape = as_shape(shape, "expand()")
    if len(shape) < x.ndim:
        raise ShapeError(
            f"expand(): a tensor of shape {x.shape} cannot be expanded to shape {shape}, "
            f"which has fewer dims"
        )
    for d, size in enumerate(shape):
        if size < -1:
            raise ShapeError(
                f"expand(): invalid size {size} for dim {d} in shape {shape} (sizes are >= 0, "
                f"or -1 to keep a dim's size)"
            )
    check_new_shape(tuple([abs(s) for s in shape]), "expand()")
    lead = len(shape) - x.ndim
    new_shape = []
    new_strides = []
    for d, size in enumerate(shape):
        if d < lead:
            if size < 0:
                raise ShapeError(f"expand(): -1 is not allowed for a new leading dim, got {shape}")
            new_shape.append(size)
            new_strides.append(0)
            continue
        old = x.shape[d - lead]
        if size == -1 or size == old:
            new_shape.append(old)
            new_strides.append(x.strides[d - lead])
        elif old == 1 and size >= 0:
            new_shape.append(size)
            new_strides.append(0)
        else:
            raise ShapeError(
                f"expand(): a tensor of shape {x.shape} cannot be expanded to shape {shape} "
                f"(dim {d}: {old} -> {size}; only size-1 dims can be expanded)"
            )
    return same_elements(x, tuple(new_shape), tuple(new_strides), x._offset)


def unsqueeze(x: Array, dim: int) -> Array:
    """A view with a new dim of size 1 at position dim (in [-ndim-1, ndim])."""
    d = normalize_dim(dim, x.ndim, "unsqueeze()", extra=1)
    check_new_shape(x.shape + (1,), "unsqueeze()")
    stride = x.strides[d] * x.shape[d] if d < x.ndim else 1
    shape = x.shape[:d] + (1,) + x.shape[d:]
    strides = x.strides[:d] + (stride,) + x.strides[d:]
    return alias(x, shape, strides, x._offset)


def squeeze(x: Array, dim: Any = None) -> Array:
    """A view without size-1 dims (all of them, or those in dim; other dims are kept)."""
    if dim is None:
        dims = set(range(x.ndim))
    elif isinstance(dim, (tuple, list)):
        dims = {normalize_dim(d, x.ndim, "squeeze()") for d in dim}
    else:
        dims = {normalize_dim(dim, x.ndim, "squeeze()")}
    keep = [d for d in range(x.ndim) if not (d in dims and x.shape[d] == 1)]
    return alias(x, tuple([x._shape[d] for d in keep]), tuple([x._strides[d] for d in keep]), x._offset)


def narrow(x: Array, dim: int, start: int, length: int) -> Array:
    """A view of elements start..start+length-1 along dim."""
    d = normalize_dim(dim, x.ndim, "narrow()")
    for name, v in (("start", start), ("length", length)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"narrow(): {name} must be an int, got {type(v).__name__}")
    start, length = int(start), int(length)
    if start < 0:
        start += x.shape[d]
    if not (0 <= start and length >= 0 and start + length <= x.shape[d]):
        raise DimError(
            f"narrow(): start {start} and length {length} are out of range for dim {dim} "
            f"of size {x.shape[d]}"
        )
    shape = x.shape[:d] + (length,) + x.shape[d + 1 :]
    return alias(x, shape, x.strides, x._offset + start * x.strides[d], "narrow()")


def index(x: Array, key: Any) -> Array:
    """Basic indexing x[key]: ints, slices (positive step), None and one Ellipsis."""
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:
        if isinstance(k, Array) or isinstance(k, (list, np.ndarray)):
            raise TypeError(
                "an index array cannot make a view (a Tensor's x[idx] gathers a copy, and x[idx] = v "
                "writes through the basic view around it: minitensor/_indexing.py); a view takes basic "
                "indices (ints, slices with a positive step, None, ...)"
            )
        if isinstance(k, bool) or not (
            k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer))
        ):
            # IndexError, as NumPy and torch raise for a float or string index.
            raise IndexError(f"invalid index {k!r} of type {type(k).__name__}: only integers, slices (`:`), "
                             f"ellipsis (`...`) and None are valid indices")
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > x.ndim:
        raise DimError(f"too many indices for a tensor of rank {x.ndim}: got {consumed}")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (x.ndim - consumed) + key[at + 1 :]
    else:
        key = key + (slice(None),) * (x.ndim - consumed)
    shape: list[int] = []
    strides: list[int] = []
    offset = x._offset
    d = 0  # the dim of x that the next int or slice applies to
    for k in key:
        if k is None:
            shape.append(1)
            strides.append(1)
        elif isinstance(k, slice):
            size, stride = x.shape[d], x.strides[d]
            for name in ("start", "stop", "step"):
                v = getattr(k, name)
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
                    raise TypeError(f"slice {name} must be an int or None, got {type(v).__name__}")
            if k.step is not None and operator.index(k.step) <= 0:
                raise ValueError(f"slice step must be positive, got {k.step} (negative strides are not supported)")
            start, stop, step = k.indices(size)
            if step >= INT64_LIMIT:
                raise ValueError(f"slice step {step} does not fit in an int64")
            length = len(range(start, stop, step))
            if length > 0:
                offset += start * stride
            shape.append(length)
            strides.append(stride * step)
            d += 1
        else:
            size = x.shape[d]
            i = operator.index(k)
            if not -size <= i < size:
                raise DimError(f"index {i} is out of bounds for dim {d} with size {size}")
            offset += (i % size) * x.strides[d]
            d += 1
    return alias(x, tuple(shape), tuple(strides), offset, "indexing")
