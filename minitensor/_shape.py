"""_shape: the shape arithmetic of minitensor, on tuples of ints only.

Nothing here touches memory or the engine: these functions compute sizes,
row-major strides, broadcast shapes, the strides of a view, and they
normalise dims. Every other module takes its shape rules from here, so each
rule is written once. A function that rejects its input raises the
library's exceptions (ShapeError, DimError, TypeError), naming ``func``, the
user-facing operation it checks for.

Dims follow torch: a dim may be negative (counted from the end), and a 0-d
tensor accepts dim 0 and -1 as if it had one dim of size 1; reducing a 0-d
tensor over that dim reduces nothing (``reduce_dims`` returns ``()``).
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

import numpy as np

from ._errors import DimError, ShapeError
from ._lib import MAX_DIMS

Shape = tuple[int, ...]


def numel(shape: Iterable[int]) -> int:
    """Number of elements of a shape (1 for the 0-d shape ())."""
    n = 1
    for size in shape:
        n *= size
    return n


def contiguous_strides(shape: Sequence[int]) -> Shape:
    """Row-major strides, in elements, of a tensor of this shape."""
    # Every new tensor asks this: a dict lookup beats the loop for the shapes
    # a program repeats (the cache holds the most recent few hundred).
    key = tuple(shape)
    found = _STRIDES_CACHE.get(key)
    if found is not None:
        return found
    if len(_STRIDES_CACHE) >= 512:
        _STRIDES_CACHE.clear()
    found = _STRIDES_CACHE[key] = _row_major_strides(key)
    return found


_STRIDES_CACHE: dict[Shape, Shape] = {}


def contiguous_layout(shape: Shape) -> tuple[Shape, int]:
    """(row-major strides, number of elements) of a shape (a tuple): what a new
    result needs, in one call (cached as contiguous_strides is)."""
    found = _LAYOUT_CACHE.get(shape)
    if found is None:
        if len(_LAYOUT_CACHE) >= 512:
            _LAYOUT_CACHE.clear()
        found = _LAYOUT_CACHE[shape] = (contiguous_strides(shape), numel(shape))
    return found


_LAYOUT_CACHE: dict[Shape, tuple[Shape, int]] = {}


def _row_major_strides(shape: Shape) -> Shape:
    strides = [0] * len(shape)
    step = 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether these strides lay the elements out row-major without gaps (size-1 dims ignored)."""
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size == 0:
            return True
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def normalize_dim(dim: Any, ndim: int, func: str, extra: int = 0) -> int:
    """dim in [-n, n) -> [0, n) with n = ndim + extra (extra=1 where a dim is
    inserted, as in unsqueeze); a 0-d tensor accepts 0 and -1, as in torch."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{func}: dim must be an int, got {type(dim).__name__}")
    dim = int(dim)
    rank = max(ndim + extra, 1)
    if not -rank <= dim < rank:
        raise DimError(
            f"{func}: dim {dim} is out of range for a tensor of rank {ndim} "
            f"(expected a dim in [{-rank}, {rank - 1}])"
        )
    return dim % rank


def dim_or_axis(dim: Any, axis: Any, func: str, required: bool = False) -> Any:
    """dim, or axis, NumPy's name for it, which torch accepts in its place.

    Both given is a TypeError, as in torch; with required, so is neither
    (softmax, log_softmax and logsumexp need a dim).
    """
    if axis is None:
        if dim is None and required:
            raise TypeError(f"{func}: missing the argument dim (or axis)")
        return dim
    if dim is not None:
        raise TypeError(f"{func}: got both dim={dim!r} and axis={axis!r}; axis is another name for dim, "
                        f"pass one of them")
    return axis


def reduce_dims(dim: Any, ndim: int, func: str, allow_tuple: bool = True) -> Shape:
    """The dims a reduction over dim covers, normalised and sorted.

    dim is None (every dim), an int, or (when allow_tuple) a tuple or list of
    ints; an empty tuple means every dim, as in torch. A 0-d tensor accepts
    dim 0 and -1 and has no dim to reduce: the result is then ().
    """
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (tuple, list)):
        if not allow_tuple:
            raise TypeError(f"{func}: dim must be an int or None, got {dim!r}")
        dims = [normalize_dim(d, ndim, func) for d in dim]
        for d in set(dims):
            if dims.count(d) > 1:
                raise DimError(f"{func}: dim {d} appears more than once in dims {tuple(dim)}")
        if not dims:
            return tuple(range(ndim))
        return tuple(sorted(set(dims))) if ndim else ()
    d = normalize_dim(dim, ndim, func)
    return (d,) if ndim else ()


def keepdim_shape(shape: Sequence[int], dims: Sequence[int]) -> Shape:
    """shape with the reduced dims set to 1 (the keepdim=True shape)."""
    return tuple([1 if d in dims else n for d, n in enumerate(shape)])


def as_shape(shape: Any, func: str) -> Shape:
    """A tuple of ints from a shape given as a tuple, a list or varargs."""
    if type(shape) is tuple:  # the common case, a tuple of ints already: no call per size
        for size in shape:
            if type(size) is not int:
                break
        else:
            return shape
    if isinstance(shape, (tuple, list)) and len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"{func}: a shape must be ints or a tuple of ints, got {type(shape).__name__}")
    result = []
    for size in shape:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise TypeError(f"{func}: a shape must contain ints, got {tuple(shape)!r}")
        result.append(int(size))
    return tuple(result)


# Every size, stride, offset and byte count the engine sees is an int64 (and
# ctypes wraps a larger Python int silently): the checks below keep each one,
# and the largest byte an array can address, below this limit.
INT64_LIMIT = 2**63


def check_new_shape(shape: Shape, func: str, itemsize: int = 0) -> int:
    """A shape for a new tensor: no negative sizes, at most MAX_DIMS dims, each
    size an int64; with itemsize, numel * itemsize bytes must fit an int64 too.
    Returns the number of elements (which every new tensor needs next)."""
    count = 1
    for size in shape:
        if size < 0:
            raise ShapeError(f"{func}: negative dimension {size} in shape {shape}")
        if size >= INT64_LIMIT:
            raise ShapeError(f"{func}: size {size} in shape {shape} does not fit in an int64")
        count *= size
    if len(shape) > MAX_DIMS:
        raise ShapeError(
            f"{func}: shape {shape} has {len(shape)} dims; minitensor supports at most {MAX_DIMS}"
        )
    if itemsize and count * itemsize >= INT64_LIMIT:
        raise ShapeError(
            f"{func}: shape {shape} has {numel(shape)} elements, {numel(shape) * itemsize} bytes "
            f"at {itemsize} bytes each; more than an int64 can count (2**63 - 1)"
        )
    return count


def check_layout(shape: Shape, strides: Shape, offset: int, itemsize: int, func: str) -> int:
    """Checks the layout of a view and returns the bytes it spans from the
    storage's start (0 for a view with no elements).

    Each size, stride and the offset must be an int64, the offset and the
    lowest element address non-negative, and the byte just past the highest
    element (offset + sum((size_i - 1) * stride_i) + 1, times itemsize) below
    2**63, so that no address computation in the engine can overflow.
    """
    check_new_shape(shape, func)
    if len(strides) != len(shape):
        raise ShapeError(f"{func}: {len(strides)} strides {strides} for the {len(shape)} dims of shape {shape}")
    for stride in strides:
        if not -INT64_LIMIT <= stride < INT64_LIMIT:
            raise ShapeError(f"{func}: stride {stride} in strides {strides} does not fit in an int64")
    if not 0 <= offset < INT64_LIMIT:
        raise ShapeError(f"{func}: storage offset {offset} is out of range (0 <= offset < 2**63)")
    if 0 in shape:
        return 0
    low = high = offset
    for size, stride in zip(shape, strides):
        if stride > 0:
            high += (size - 1) * stride
        else:
            low += (size - 1) * stride
    if low < 0:
        raise ShapeError(
            f"{func}: shape {shape}, strides {strides} and offset {offset} address an element "
            f"before the start of the storage"
        )
    end = (high + 1) * itemsize
    if end >= INT64_LIMIT:
        raise ShapeError(
            f"{func}: shape {shape}, strides {strides} and offset {offset} address byte {end - 1}, "
            f"beyond what an int64 can count (2**63 - 1)"
        )
    return end


def broadcast_shapes(a: Shape, b: Shape, func: str) -> Shape:
    """The NumPy broadcast of two shapes; ShapeError naming both if they do not."""
    ndim = max(len(a), len(b))
    pa = (1,) * (ndim - len(a)) + tuple(a)
    pb = (1,) * (ndim - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ShapeError(f"{func}: shapes {tuple(a)} and {tuple(b)} cannot be broadcast together")
    return tuple(out)


def infer_shape(shape: Shape, count: int, func: str, old_shape: Shape) -> Shape:
    """Resolves one -1 in shape so that it has count elements (view/reshape)."""
    if shape.count(-1) > 1:
        raise ShapeError(f"{func}: only one dimension can be inferred (-1), got shape {shape}")
    known = 1
    for s in shape:  # a loop, not generator expressions: every view() comes here
        if s < -1:
            raise ShapeError(f"{func}: invalid shape {shape}")
        if s != -1:
            known *= s
    if -1 in shape:
        if known == 0 or count % known != 0:
            raise ShapeError(
                f"{func}: shape {shape} is invalid for a tensor of shape {old_shape} ({count} elements)"
            )
        shape = tuple([count // known if s == -1 else s for s in shape])
    if numel(shape) != count:
        raise ShapeError(
            f"{func}: shape {shape} is invalid for a tensor of shape {old_shape} ({count} elements)"
        )
    check_new_shape(shape, func)
    return shape


def view_layout(old_shape: Shape, old_strides: Shape, shape: Shape, func: str) -> tuple[Shape, Optional[Shape]]:
    """(shape with its -1 resolved, its strides over the old memory or None)
    for a view or reshape of an array of old_shape and old_strides to shape (a
    tuple of ints): infer_shape, then view_strides. Cached by the three: a
    program views the same layouts again every step (attention's heads, a
    layer norm's rows), and the two cost several calls each."""
    key = (old_shape, old_strides, shape)
    layout = _VIEW_LAYOUTS.get(key)
    if layout is None:
        new_shape = infer_shape(shape, numel(old_shape), func, old_shape)  # raises for a bad shape
        layout = (new_shape, view_strides(old_shape, old_strides, new_shape))
        if len(_VIEW_LAYOUTS) >= 1024:
            _VIEW_LAYOUTS.clear()
        _VIEW_LAYOUTS[key] = layout
    return layout


_VIEW_LAYOUTS: dict[tuple[Shape, Shape, Shape], tuple[Shape, Optional[Shape]]] = {}


def view_strides(old_shape: Shape, old_strides: Shape, new_shape: Shape) -> Optional[Shape]:
    """Strides that show old memory with new_shape without a copy, or None.

    torch's rule (computeStride): the old dims are cut into chunks that are
    contiguous among themselves; each chunk must be covered exactly by a run
    of new dims.
    """
    if numel(old_shape) == 0:
        return contiguous_strides(new_shape)
    if len(old_shape) == 0:
        old_shape, old_strides = (1,), (1,)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_strides[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        chunk_ends = tensor_d == 0 or (
            old_shape[tensor_d - 1] != 1 and old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride
        )
        if chunk_ends:
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def t_dims(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation of .T / .t(): swap the two dims of a matrix."""
    if len(shape) > 2:
        raise ShapeError(
            f".T and t() expect a tensor of at most 2 dims, got shape {shape}; "
            f"use .mT, .transpose(d0, d1) or .permute(...)"
        )
    return tuple(reversed(range(len(shape))))
