"""Indexing a tensor with index arrays (lists, NumPy arrays, int64 or bool
tensors) or slices with a negative step: x[key] reads (_select), x[key] =
value writes (_assign_rows). Basic indexing (ints, slices, None, ...) is a
view (minitensor/_views.py).

How a key is taken apart (_plan), e.g. x[0, ::-1, idx, None] with idx an
index array:

1. The basic part, with each index array replaced by ``:`` and each
   negative-step slice by the positive-step slice over the same elements, is
   a view of x (no copy): here x[0, lo:hi:s, :, None].
2. That view's dims from the first to the last one an index array or a
   negative step touches (the "middle") are numbered row-major; the dims
   before it (the "lead", unless separated index arrays send their dims to
   the front) and after it (the "tail") are taken whole. ``rows`` is an
   int64 tensor with, for each element of the result's middle, the ordinal
   of the middle element it reads: a sum, computed on the device with
   broadcasting, of one term per middle dim (index values, or an arange,
   reversed for a negative step, times that dim's row-major stride).
3. A read is then one gather along the view's middle made one dim; its
   gradient scatter-adds, so repeated indices accumulate. A write builds,
   with scatter_add on the device, which middle element each value row
   goes to, and writes where(written, value's rows, old) through the basic
   view.

Where the index arrays' dims go (in the result's middle), as torch and NumPy:
the arrays broadcast together to one shape B; if the dims they index are
next to each other in the view, B replaces them in place, else B comes
first. As in torch, an integer is a basic index (its dim is removed
first), so x[0, :, [0, 1]] has shape (x.shape[1], 2); NumPy, which counts
the 0 as an index array, gives (2, x.shape[1]).

The functions take Tensors; they are typed as autograd's Variable, and make
new Tensors with ``x._wrap``, because tensor.py imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from . import _array, _views, autograd, ops
from ._array import Array
from ._dtype import bool_, int64
from ._errors import OutOfMemoryError
from .autograd import Variable
from ._inplace import _check_leaf, _records, _previous, _rebase, _overwrite

# One item of a key after _item: a basic index, an int64 index array (on the
# host or the device) or a bool mask (on the host).
_Item = Union[None, type(Ellipsis), int, slice, np.ndarray, Array]


def _is_index_array(k: Any) -> bool:
    """An index array, or a slice with a negative step (minitensor has no
    negative strides: the elements it walks are gathered)."""
    return isinstance(k, (list, np.ndarray, Array)) or (
        isinstance(k, slice) and isinstance(k.step, (int, np.integer)) and not isinstance(k.step, bool)
        and k.step < 0)


def _has_index_array(key: Any) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    return any(_is_index_array(k) for k in items)


def _item(k: Any) -> _Item:
    """k as _plan reads it: a 0-d integer array is an int (torch selects with a
    0-d integer tensor), a list becomes a NumPy array, an integer array int64."""
    if isinstance(k, Array):
        if k.dtype.is_floating_point:
            raise IndexError(f"tensors used as indices must be int64 or bool tensors, got "
                             f"{k.dtype.name} (as in torch)")
        if k.dtype is bool_ or k.ndim == 0:
            # Read back (a synchronization, as in torch: a mask's count of True
            # decides the result's shape).
            k = _array.to_numpy(k)
        else:
            return k  # an int64 tensor stays on the device
    if isinstance(k, list):
        if any(e is None or e is Ellipsis or isinstance(e, (slice, Array)) for e in k):
            # torch reads such a list as a tuple (a legacy rule), NumPy as an array: refused.
            raise IndexError(f"a list holding tensors, slices, None or ... is not an index array; "
                             f"write the key as a tuple: x[{', '.join(map(repr, k))}]")
        try:
            k = np.asarray(k)
        except ValueError as e:  # a ragged list
            raise IndexError(f"an index list must be rectangular: {e}") from None
        if k.size == 0:
            k = k.astype(np.int64)  # [] is an empty index, not a float array
    if isinstance(k, np.ndarray):
        if k.dtype == bool:
            if k.ndim == 0:
                raise IndexError("a 0-d boolean index is not supported; use None to add a dim")
            return k
        if k.dtype.kind not in "iu":
            raise IndexError(f"arrays used as indices must be of integer (or boolean) type, got {k.dtype}")
        if k.dtype.kind == "u" and k.size and int(k.max()) > np.iinfo(np.int64).max:
            raise IndexError(f"index {int(k.max())} does not fit in an int64")
        return int(k) if k.ndim == 0 else k.astype(np.int64)
    return k


@dataclass
class _Plan:
    """What a key selects: the basic view's dims lead..end-1 (the "middle") are
    addressed by a table of rows; the dims before (lead) and after (tail) are
    taken whole."""

    basic: tuple            # the basic key (ints, positive-step slices, None)
    rows: Optional[Array]   # int64, shape middle_shape: ordinals in the view's middle (None: a basic key)
    lead: int               # the view's dims before the middle
    end: int                # the view's dims up to the middle's end
    middle_shape: tuple[int, ...]  # the result's dims that replace the view's middle
    adv: bool               # whether the key has an index array (a write may then repeat rows)


def _check_host_rows(rows: int, x: Variable, what: str) -> None:
    """Refuses a host table of `rows` entries (an arange this module uploads)
    larger than this machine's memory: an expanded tensor can have far more
    rows than anything could hold."""
    memory = _array._host_memory_bytes()
    if memory and rows * 8 > memory:
        raise OutOfMemoryError(f"{what} over {rows} rows of a tensor of shape {x.shape} needs more host memory "
                               f"than this machine's {memory} bytes; index a smaller part first")


def _upload(host: np.ndarray) -> Array:
    """An int64 device copy of a host array."""
    out = _array.empty(host.shape, int64)
    if host.size:
        _array.upload(out, np.ascontiguousarray(host, dtype=np.int64))
    return out


def _checked(a: Union[np.ndarray, Array], size: int, dim: int) -> Union[np.ndarray, Array]:
    """Index values a for a dim of `size`, checked (IndexError naming the first
    bad one, as torch's) and with negatives wrapped (-1 is the last)."""
    if isinstance(a, np.ndarray):
        bad = (a < -size) | (a >= size)
        if bad.any():
            raise IndexError(f"index {int(a[bad].flat[0])} is out of bounds for dimension {dim} with size {size}")
        return np.where(a < 0, a + size, a)
    if a.numel() == 0:
        return a
    # Two reductions on the device and two numbers read back, not the array.
    lo = int(_array.to_numpy(ops.reduce_all("min", a)))
    hi = int(_array.to_numpy(ops.reduce_all("max", a)))
    if lo < -size or hi >= size:
        raise IndexError(f"index {lo if lo < -size else hi} is out of bounds for dimension {dim} with size {size}")
    return ops.where(ops.zip_("lt", a, 0), ops.add(a, size), a) if lo < 0 else a


def _placed(a: Array, at: int, ndim: int) -> Array:
    """a viewed with its dims at positions at.. of a rank-ndim shape, 1 elsewhere."""
    return _views.view(a, (1,) * at + a.shape + (1,) * (ndim - at - a.ndim)) if a.ndim < ndim else a


def _parse(x: Variable, key: Any) -> tuple[tuple, list[str], list[tuple[Any, int, int]]]:
    """The basic key, what each dim of its view is ("plain", "flip": a negative
    step, "adv": an index array), and per "adv" dim its index values, the dim's
    size and x's dim. A mask over k dims is k index arrays (its nonzero)."""
    items = [_item(k) for k in (key if isinstance(key, tuple) else (key,))]
    if sum(1 for k in items if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(k.ndim if isinstance(k, np.ndarray) and k.dtype == bool else 0 if k is None or k is Ellipsis
                   else 1 for k in items)
    if consumed > x.ndim:
        raise IndexError(f"too many indices for a tensor of {x.ndim} dims: {key!r}")
    fill = [slice(None)] * (x.ndim - consumed)
    dots = [i for i, k in enumerate(items) if k is Ellipsis]
    items = items[:dots[0]] + fill + items[dots[0] + 1:] if dots else items + fill
    basic: list[Any] = []
    kinds: list[str] = []  # per dim of the view: "plain", "flip" (a negative step) or "adv" (an index array)
    arrays: list[tuple[Any, int, int]] = []  # per "adv" dim: its index values, the dim's size, x's dim
    d = 0  # the dim of x the next item indexes
    for k in items:
        if k is None:
            basic.append(None)
            kinds.append("plain")
        elif isinstance(k, slice) and _is_index_array(k):
            walk = range(*k.indices(x.shape[d]))
            # The same elements in increasing order: walk reversed, a basic slice.
            basic.append(slice(walk[-1], walk[0] + 1, -walk.step) if len(walk) else slice(0, 0))
            kinds.append("flip")
            d += 1
        elif isinstance(k, np.ndarray) and k.dtype == bool:
            shape = x.shape[d:d + k.ndim]
            if k.shape != shape:
                raise IndexError(f"the mask's shape {k.shape} does not match the indexed dims {shape} "
                                 f"of a tensor of shape {x.shape}")
            for j, a in enumerate(np.nonzero(k)):  # a mask over k dims is k index arrays
                basic.append(slice(None))
                kinds.append("adv")
                arrays.append((a.astype(np.int64), x.shape[d + j], d + j))
            d += k.ndim
        elif isinstance(k, (np.ndarray, Array)):
            basic.append(slice(None))
            kinds.append("adv")
            arrays.append((k, x.shape[d], d))
            d += 1
        else:  # an int or a positive-step slice; _views.index checks them and refuses anything else
            basic.append(k)
            if isinstance(k, slice):
                kinds.append("plain")
            elif k is not Ellipsis and not isinstance(k, bool) and isinstance(k, (int, np.integer)):
                pass  # an int removes its dim
            else:
                raise IndexError(f"invalid index {k!r} of type {type(k).__name__}: only integers, slices "
                                 f"(`:`), ellipsis (`...`), None, and int64 or bool arrays are valid indices")
            d += 1
    return tuple(basic), kinds, arrays


def _plan(x: Variable, key: Any) -> _Plan:
    """Takes key apart as the module docstring says; every check happens here,
    before anything is written."""
    basic_key, kinds, arrays = _parse(x, key)
    view_shape = _views.index(x, basic_key).shape  # checks the ints and slices
    touched = [i for i, kind in enumerate(kinds) if kind != "plain"]
    if not touched:
        return _Plan(basic_key, None, 0, 0, (), False)
    adv = [i for i in touched if kinds[i] == "adv"]
    # The dims before the first one touched stay in front, unless separated
    # index arrays send their block to the front.
    lead = touched[0] if not adv or adv == list(range(adv[0], adv[-1] + 1)) else 0
    end = touched[-1] + 1
    middle = range(lead, end)
    stride = {i: int(np.prod(view_shape[i + 1:end], dtype=np.int64)) for i in middle}  # row-major, in the middle
    others = [i for i in middle if kinds[i] != "adv"]
    try:
        block = tuple(np.broadcast_shapes(*(a.shape for a, _, _ in arrays)))
    except ValueError:
        shapes = ", ".join(str(list(a.shape)) for a, _, _ in arrays)
        raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together with shapes "
                         f"{shapes}") from None
    # Where the block goes: in place of index arrays next to each other, else first.
    at = 0
    if adv and adv == list(range(adv[0], adv[-1] + 1)):
        at = sum(1 for i in others if i < adv[0])
    shape_others = [view_shape[i] for i in others]
    head_shape = tuple(shape_others[:at]) + block + tuple(shape_others[at:])  # the result's middle
    terms: list[Array] = []
    for (a, size, dim), i in zip(arrays, adv):
        a = _checked(a, size, dim)
        term = _upload(a * stride[i]) if isinstance(a, np.ndarray) else ops.mul(a, stride[i])
        terms.append(_placed(term, at + len(block) - a.ndim, len(head_shape)))
    for pos, i in enumerate(others):
        n = view_shape[i]
        if n <= 1:
            continue  # its only index, 0, adds nothing
        _check_host_rows(n, x, "a negative-step slice" if kinds[i] == "flip" else "indexing with an index array")
        walk = np.arange(n - 1, -1, -1) if kinds[i] == "flip" else np.arange(n)
        terms.append(_placed(_upload(walk * stride[i]), pos if pos < at else pos + len(block), len(head_shape)))
    rows = terms[0] if terms else _upload(np.zeros((1,) * len(head_shape), dtype=np.int64))
    for term in terms[1:]:
        rows = ops.add(rows, term)  # broadcast: one element per element of the middle
    if rows.shape != head_shape:
        rows = ops.contiguous(_views.expand(rows, head_shape))
    return _Plan(basic_key, rows, lead, end, head_shape, bool(adv))


def _middle_as_one(view: Variable, plan: _Plan) -> Variable:
    """view with its middle dims made one (a copy where no view can be)."""
    middle = int(np.prod(view.shape[plan.lead:plan.end], dtype=np.int64))
    return view.reshape(*view.shape[:plan.lead], middle, *view.shape[plan.end:])


def _along(like: Variable, table: Array, plan: _Plan, view_shape: tuple[int, ...]) -> Variable:
    """A 1-D int64 (or bool) table along the middle, expanded over the lead and
    tail dims (stride 0: nothing copied), as a Tensor."""
    lead, tail = view_shape[:plan.lead], view_shape[plan.end:]
    placed = _views.view(table, (1,) * len(lead) + table.shape + (1,) * len(tail))
    return like._wrap(_views.expand(placed, lead + table.shape + tail))


def _select(x: Variable, key: Any) -> Variable:
    """x[key] with index arrays or negative steps: one gather along the view's middle."""
    plan = _plan(x, key)
    view = autograd.Index.apply(x, plan.basic)
    if plan.rows is None:
        return view
    flat = _views.view(plan.rows, (plan.rows.numel(),))
    picked = _middle_as_one(view, plan).gather(plan.lead, _along(x, flat, plan, view.shape))
    return picked.reshape(*view.shape[:plan.lead], *plan.middle_shape, *view.shape[plan.end:])


def _assign_rows(x: Variable, key: Any, value: Any) -> None:
    """x[key] = value with index arrays or negative steps: where(written, value's
    rows, old) over the view's middle, computed out of place (recorded where
    autograd records) and written through the basic view."""
    _check_leaf(x, "__setitem__")
    ops.check_writable(x, "__setitem__")  # before anything is built for the write
    plan = _plan(x, key)
    if plan.rows is None:
        return x.__setitem__(plan.basic, value)  # only basic indices (a 0-d index tensor)
    if not isinstance(value, Variable) and not ops.is_scalar(value):
        raise TypeError(f"x[index] = value takes a tensor or a number as value, got {type(value).__name__}")
    view_shape = _views.index(x, plan.basic).shape
    lead, tail = view_shape[:plan.lead], view_shape[plan.end:]
    selected = lead + plan.middle_shape + tail  # x[key].shape, which value broadcasts to
    if isinstance(value, Variable) and value.shape != selected:
        extra = value.ndim - len(selected)
        if extra > 0 and all(size == 1 for size in value.shape[:extra]):
            value = value.reshape(*value.shape[extra:])  # leading 1s dropped, as NumPy, torch and basic keys
        value = value.expand(*selected)
    records = _records(x, value)
    count = plan.rows.numel()
    if count == 0 or 0 in lead or 0 in tail:
        if records and isinstance(value, Variable) and value.requires_grad and x.dtype.is_floating_point:
            # Nothing is written, but value is in the graph, as torch's: its
            # gradient is zeros, not None. value has no element, so its sum
            # is exactly +0.0, and x - 0.0 keeps every value of x (-0.0 too).
            with autograd.enable_grad():
                _rebase(x, _previous(x) - value.sum().to(x.dtype))
        return
    _check_host_rows(count, x, "a write through an index array")
    size = int(np.prod(view_shape[plan.lead:plan.end], dtype=np.int64))
    flat = _views.view(plan.rows, (count,))
    # How often each element of the middle is written, and by which row of value:
    # scatter_add into zeros on the device (each is written at most once).
    times = ops.scatter_add_(ops.fill_(_array.empty((size,), int64), 0), 0, flat,
                             ops.fill_(_array.empty((count,), int64), 1))
    if plan.adv and int(_array.to_numpy(ops.reduce_all("max", times))) > 1:
        raise IndexError("x[index] = value with repeated indices: which write wins is unspecified in torch; "
                         "minitensor refuses (make the indices unique, or use scatter_add for sums)")
    source = ops.scatter_add_(ops.fill_(_array.empty((size,), int64), 0), 0, flat, _upload(np.arange(count)))
    written = ops.zip_("gt", times, 0)
    with autograd.enable_grad() if records else autograd.no_grad():
        view = autograd.Index.apply(_previous(x) if records else x.detach(), plan.basic)
        if isinstance(value, Variable):
            value = value.reshape(*lead, count, *tail).gather(plan.lead, _along(x, source, plan, view_shape))
        new = autograd.Where.apply(_along(x, written, plan, view_shape), value, _middle_as_one(view, plan))
        new = new.reshape(*view_shape)
    _overwrite(x, plan.basic, new, "__setitem__")
