"""ops: the raw tensor operations of minitensor, on Arrays, without autograd.

Every function here takes Arrays (minitensor/_array.py; a Tensor is an
Array, so Tensors are accepted) and Python numbers where noted, checks its
arguments, allocates its output Array and calls one or more engine kernels
through minitensor/_lib.py. It returns Arrays: it knows nothing of Tensor or
of gradients. The gradient rules (minitensor/autograd/) call these functions
in their forward and backward, and the Tensor layer (minitensor/tensor.py)
wraps the Arrays they return as Tensors.

Argument checks happen here, before any kernel runs, so a bad call raises a
Python exception naming the offending shapes or dim and never leaves an
output half-written. The C library checks again.

Conventions, as in torch and NumPy:

- shapes broadcast from the right; a mismatch raises ShapeError (a
  ValueError) naming both shapes;
- a dim may be negative; out of range raises DimError (an IndexError)
  naming the dim and the rank;
- dtypes promote as torch's do (minitensor/_dtype.py, the table in
  docs/api.md): bool < int64 < float32 < float64 by category, the operand
  of the lower dtype cast first; a Python number takes the dtype of the
  tensor it meets unless it is of a higher category (2.5 with an int64
  tensor gives float32). Comparisons give bool; argmax/argmin give int64;
  ops that only make sense for floats (exp, true division, mean, ...) take
  int64 and bool tensors as float32, as torch does; matmul, softmax and
  the other float kernels refuse them with a DTypeError.

Views (view, permute, expand, indexing, ...) are computed here too: they
only change shape, strides and offset (with the rules of _shape.py), and
share the storage.

Ops never hand a tensor with no elements to the engine: such outputs need
no kernel, and an empty input is handled in Python (e.g. the sum over a dim
of length 0 is filled with 0).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _lib, autotune, backends
from ._array import Array, alias, bump_version, empty, empty_like, shares_storage, upload
from ._storage import Storage
from ._array import to_numpy  # noqa: F401 - part of the ops API (an Array as a NumPy copy)
from ._views import (  # noqa: F401 - the views are ops too (ops.view, ops.permute, ...)
    as_strided,
    expand,
    index,
    narrow,
    permute,
    squeeze,
    transpose,
    unsqueeze,
    view,
)
from ._dtype import DType, bool_, default_dtype, float32, int64, promote, promote_scalar, to_dtype
from ._errors import DimError, DTypeError, InvalidArgumentError, MinitensorError, ShapeError
from ._shape import (
    as_shape,
    broadcast_shapes,
    check_new_shape,
    contiguous_strides,
    infer_shape,
    keepdim_shape,
    normalize_dim,
    numel,
    reduce_dims,
    view_strides,
)

Scalar = Union[int, float]
Shape = tuple[int, ...]

# ---- small helpers -----------------------------------------------------------


def is_array(x: Any) -> bool:
    """Whether x is an Array (a Tensor is one): what the ops compute on."""
    return isinstance(x, Array)


def is_scalar(x: Any) -> bool:
    """Whether x is a Python or NumPy real number (bool included, as in torch)."""
    return isinstance(x, numbers.Real)


def check_writable(out: Array, func: str) -> None:
    """An output must not have several elements at one address (an expanded view)."""
    for size, stride in zip(out.shape, out.strides):
        if size > 1 and stride == 0:
            raise MinitensorError(
                f"{func}: cannot write into a tensor of shape {out.shape} with strides "
                f"{out.strides}: several of its elements share one memory location "
                f"(an expanded view); clone() it first"
            )


def check_out(out: Any, shape: tuple[int, ...], dtype: Any, func: str) -> None:
    """out must be an Array of the result's shape (and dtype, unless None)
    that can be written (no expanded dims)."""
    _require_array(out, func, "out")
    if out.shape != shape:
        raise ShapeError(f"{func}: out has shape {out.shape}, but the result has shape {shape}")
    if dtype is not None and out.dtype is not dtype:
        raise DTypeError(f"{func}: out has dtype {out.dtype.name}, but the result has dtype {dtype.name}")
    check_writable(out, func)


def _require_array(x: Any, func: str, name: str = "input") -> None:
    if not is_array(x):
        raise TypeError(f"{func}: {name} must be a Tensor, got {type(x).__name__}")


def as_float(value: Scalar, func: str) -> float:
    """A Python number as the double the engine takes (ValueError if it has none)."""
    try:
        return float(value)
    except OverflowError:
        raise InvalidArgumentError(f"{func}: the number {value} is too large for a double") from None


# The engine takes every scalar as a double, which holds each integer only up
# to 2**53: a larger one meant for an int64 tensor is refused, not rounded.
_EXACT_INT = 2 ** 53


def engine_scalar(value: Scalar, dtype: DType, func: str) -> float:
    """value as the double the engine takes for a tensor of dtype: refused
    (InvalidArgumentError) for an int64 tensor when the double would not hold it exactly."""
    if dtype is int64 and isinstance(value, numbers.Integral) and abs(int(value)) > _EXACT_INT:
        raise InvalidArgumentError(f"{func}: the integer {value} is beyond 2**53, the largest that minitensor "
                                   f"passes to a kernel exactly; use a tensor operand")
    return as_float(value, func)


def require_float(x: Array, func: str, name: str = "input") -> None:
    """DTypeError unless x is a float32 or float64 tensor (the ops whose kernels
    only exist for floats: matmul, softmax, layer_norm, ...)."""
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{func}: the {name} has dtype {x.dtype.name}; this op takes float32 or float64 "
                         f"tensors (convert with .float())")


def _scalar_tensor(value: Scalar, dtype: DType, like: Array) -> Array:
    """A new 0-d tensor holding value."""
    out = empty((), dtype)
    _lib.fill(out, engine_scalar(value, dtype, "a scalar operand"))
    return out


def _promote_pair(a: Any, b: Any, func: str) -> tuple[Array, Array]:
    """Two tensors of one dtype from tensors or numbers (at least one tensor)."""
    if not is_array(a) and not is_array(b):
        raise TypeError(f"{func}: expected a Tensor operand, got {type(a).__name__} and {type(b).__name__}")
    for x in (a, b):
        if not is_array(x) and not is_scalar(x):
            raise TypeError(
                f"{func}: unsupported operand type {type(x).__name__}; use a Tensor or a "
                f"Python number (convert arrays with minitensor.tensor(...))"
            )
    if not is_array(a):
        a = _scalar_tensor(a, promote_scalar(b.dtype, a), b)
    if not is_array(b):
        b = _scalar_tensor(b, promote_scalar(a.dtype, b), a)
    dtype = promote(a.dtype, b.dtype)
    return cast(a, dtype), cast(b, dtype)


# ---- views (in _views.py) and the two that may copy ---------------------------------


def reshape(x: Array, shape: Sequence[int]) -> Array:
    """Like view(), but copies (once) when the strides do not allow a view."""
    shape = infer_shape(as_shape(shape, "reshape()"), x.numel(), "reshape()", x.shape)
    strides = view_strides(x.shape, x.strides, shape)
    if strides is None:
        return view(clone(x), shape)
    return alias(x, shape, strides, x.storage_offset())


def flatten(x: Array, start_dim: int = 0, end_dim: int = -1) -> Array:
    """Merges dims start_dim..end_dim into one (a view when possible, like reshape)."""
    if x.ndim == 0:
        return reshape(x, (1,))
    s = normalize_dim(start_dim, x.ndim, "flatten()")
    e = normalize_dim(end_dim, x.ndim, "flatten()")
    if s > e:
        raise DimError(f"flatten(): start_dim {start_dim} comes after end_dim {end_dim}")
    merged = numel(x.shape[s : e + 1])
    return reshape(x, x.shape[:s] + (merged,) + x.shape[e + 1 :])


# ---- copies, fills and casts ---------------------------------------------------


def fill_(out: Array, value: Scalar) -> Array:
    """Sets every element of out to value, in place."""
    if not is_scalar(value):
        raise TypeError(f"fill_(): value must be a number, got {type(value).__name__}")
    check_writable(out, "fill_()")
    value = engine_scalar(value, out.dtype, "fill_()")
    bump_version(out)
    if out.numel() > 0:
        _lib.fill(out, value)
    return out


def copy_(dst: Array, src: Any) -> Array:
    """Copies src (broadcast to dst's shape, cast to dst's dtype) into dst, in place."""
    if is_scalar(src):
        return fill_(dst, src)
    _require_array(src, "copy_()", "src")
    check_writable(dst, "copy_()")
    try:
        src = expand(src, dst.shape)
    except ShapeError:
        raise ShapeError(
            f"copy_(): a tensor of shape {src.shape} cannot be broadcast to the destination shape {dst.shape}"
        ) from None
    bump_version(dst)
    if dst.numel() == 0:
        return dst
    if shares_storage(src, dst):
        src = clone(src)  # they may overlap: read everything before writing
    _lib.map_("copy", dst, src)
    return dst


def setitem(x: Array, key: Any, value: Any) -> None:
    """x[key] = value, for a basic index and a number or a broadcastable tensor."""
    copy_(index(x, key), value)


def cast(x: Array, dtype: Any) -> Array:
    """x converted to dtype (x itself when it already has it)."""
    dtype = to_dtype(dtype)
    if x.dtype is dtype:
        return x
    out = empty(x.shape, dtype)
    if out.numel() > 0:
        _lib.map_("copy", out, x)
    return out


def clone(x: Array) -> Array:
    """A contiguous copy of x."""
    out = empty_like(x)
    if out.numel() > 0:
        _lib.map_("copy", out, x)
    return out


def contiguous(x: Array) -> Array:
    """x when it is already contiguous, else a contiguous copy."""
    if x.is_contiguous():
        return x
    return clone(x)


# ---- elementwise ------------------------------------------------------------------


# Maps whose result is a float whatever the input (torch computes them on an
# int64 or bool tensor in the default float dtype), and maps with a scalar,
# whose result dtype also depends on the scalar (promote_scalar).
_FLOAT_MAPS = frozenset(("exp", "log", "sigmoid", "tanh", "sqrt", "reciprocal", "softplus", "erf"))
_SCALAR_MAPS = frozenset(("add_scalar", "mul_scalar", "pow_scalar", "rpow_scalar"))


def _map_dtype(op: str, x: Array, scalar: Scalar) -> DType:
    """The dtype op computes in for x (and scalar): x's, promoted where torch promotes."""
    dtype = x.dtype
    if dtype.is_floating_point:
        return dtype
    if op in _FLOAT_MAPS:
        return default_dtype
    if op in _SCALAR_MAPS:
        dtype = promote_scalar(dtype, scalar)
        if dtype is bool_:  # a bool number with a bool tensor: map_ calls the bool zip
            return dtype
        if dtype is int64 and op == "pow_scalar" and scalar < 0:
            raise InvalidArgumentError("pow(): integers to negative integer powers are not allowed "
                                       "(as in torch); use a float tensor")
        return dtype
    if dtype is bool_ and op != "copy":
        raise DTypeError(f"{op}() is not defined for bool tensors (use ~ or logical_not() to invert a mask, "
                         f"or convert with .long() first)")
    return dtype


def map_(op: str, x: Array, scalar: Scalar = 0.0) -> Array:
    """A new tensor op(x) elementwise; op is an mt_map_op name ("exp", "add_scalar", ...)."""
    _require_array(x, f"{op}()")
    if not x.dtype.is_floating_point:
        dtype = _map_dtype(op, x, scalar)
        if dtype is bool_ and op in ("add_scalar", "mul_scalar"):
            return zip_("add" if op == "add_scalar" else "mul", x, scalar)  # or / and, as torch's bool + and *
        if dtype is bool_ and op in _SCALAR_MAPS:
            dtype = int64  # True ** True: computed on integers
        if op == "rpow_scalar" and dtype is int64:
            return zip_("pow", _scalar_tensor(scalar, int64, x), x)  # the map kernel has no int64 rpow
        x = cast(x, dtype)
    scalar = engine_scalar(scalar, x.dtype, f"{op}()")
    out = empty_like(x)
    if out.numel() > 0:
        _lib.map_(op, out, x, scalar)
    return out


COMPARISONS = frozenset(("eq", "ne", "lt", "le", "gt", "ge"))
_BITWISE = frozenset(("bitwise_and", "bitwise_or", "bitwise_xor"))
_INT_DIVISIONS = frozenset(("floor_divide", "remainder"))


def _zip_dtypes(op: str, dtype: DType) -> tuple[DType, DType]:
    """For operands promoted to dtype: (the dtype op computes in, its result's)."""
    if op in COMPARISONS:
        return dtype, bool_
    if dtype.is_floating_point:
        if op in _BITWISE:
            raise DTypeError(f"{op}() is only defined for int64 and bool tensors, got {dtype.name}")
        return dtype, dtype
    if op == "div":
        return default_dtype, default_dtype  # true division, as torch: 7 / 2 is 3.5
    if op == "relu_backward":
        return default_dtype, default_dtype
    if dtype is bool_ and (op == "pow" or op in _INT_DIVISIONS):
        return int64, int64
    return dtype, dtype


def _check_divisor(op: str, b: Array) -> None:
    """floor_divide and remainder by an integer zero have no answer: ZeroDivisionError,
    as torch's CPU ops raise (the check reads the divisor back: a synchronization)."""
    if op in _INT_DIVISIONS and not b.dtype.is_floating_point and b.numel() > 0:
        if to_numpy(reduce_("min", map_("abs", b))).item() == 0:
            raise ZeroDivisionError(f"{op}(): integer division by zero")


def zip_(op: str, a: Any, b: Any) -> Array:
    """A new tensor op(a, b) with broadcasting; a or b may be a Python number."""
    if is_array(a) and is_array(b) and a.shape == b.shape and a.dtype is b.dtype and (
            a.dtype.is_floating_point and op not in _BITWISE):
        # The common case: two float tensors of one shape and dtype need no
        # promotion or broadcasting, and their shape has already been checked.
        out = empty(a.shape, bool_ if op in COMPARISONS else a.dtype)
        if out.numel() > 0:
            _lib.zip_(op, out, a, b)
        return out
    a, b = _promote_pair(a, b, f"{op}()")
    compute, result = _zip_dtypes(op, a.dtype)
    a, b = cast(a, compute), cast(b, compute)
    _check_divisor(op, b)
    shape = broadcast_shapes(a.shape, b.shape, f"{op}()")
    check_new_shape(shape, f"{op}()")
    out = empty(shape, result)
    if out.numel() > 0:
        _lib.zip_(op, out, a, b)
    return out


def check_inplace_shape(x: Array, other: Any, func: str) -> None:
    """x op= other must keep x's shape: other broadcasts to x, not x to more."""
    if is_array(other):
        shape = broadcast_shapes(x.shape, other.shape, func)
    elif is_scalar(other):
        shape = x.shape
    else:
        raise TypeError(
            f"{func}: unsupported operand type {type(other).__name__}; use a Tensor or a "
            f"Python number (convert arrays with minitensor.tensor(...))"
        )
    if shape != x.shape:
        raise ShapeError(f"{func}: output with shape {x.shape} doesn't match the broadcast shape {shape}")


def inplace_(op: str, x: Array, other: Any) -> Array:
    """x = x op other in x's memory (op: "add", "sub", "mul", "div"), so that every
    view of x sees it; other broadcasts to x's shape, and the result is cast to
    x's dtype (a float64 other is combined in float64 first, as torch does)."""
    func = f"{op}_()"
    _require_array(x, func)
    check_inplace_shape(x, other, func)
    check_writable(x, func)
    check_inplace_dtype(op, x, other, func)
    if op == "sub":
        refuse_bool_sub(x, other, func)
    if is_scalar(other) and op != "div" and x.dtype is not bool_:
        value = engine_scalar(other, x.dtype, func)
        bump_version(x)
        if x.numel() > 0:
            if op == "mul":
                _lib.map_("mul_scalar", x, x, value)
            else:
                _lib.map_("add_scalar", x, x, -value if op == "sub" else value)
        return x
    if is_scalar(other):
        other = _scalar_tensor(other, x.dtype, x)
    if other.dtype is not x.dtype:
        result = zip_(op, x, other)  # in the promoted dtype, then cast into x
        bump_version(x)
        if x.numel() > 0:
            _lib.map_("copy", x, result)
        return x
    if shares_storage(other, x) and not (
        other.shape == x.shape and other.strides == x.strides
        and other.storage_offset() == x.storage_offset()
    ):
        other = clone(other)  # an overlapping view: read it all before writing
    bump_version(x)
    if x.numel() > 0:
        _lib.zip_(op, x, x, other)
    return x


def check_inplace_dtype(op: str, x: Array, other: Any, func: str) -> None:
    """x op= other must give a result that x's dtype holds: torch refuses
    int_tensor += 1.5 (and /= on integers) rather than truncate."""
    if x.dtype.is_floating_point:
        return
    result = promote_scalar(x.dtype, other) if is_scalar(other) else promote(x.dtype, other.dtype)
    if op == "div":
        result = default_dtype
    if result.category > x.dtype.category:
        raise DTypeError(f"{func}: the result type {result.name} can't be cast to the desired output type "
                         f"{x.dtype.name} (as in torch); compute out of place, or convert first")


def add(a: Any, b: Any) -> Array:
    """a + b."""
    if is_array(a) and is_scalar(b):
        return map_("add_scalar", a, b)
    if is_scalar(a) and is_array(b):
        return map_("add_scalar", b, a)
    return zip_("add", a, b)


def refuse_bool_sub(a: Any, b: Any, func: str) -> None:
    """As torch, no subtraction with a bool (a bool tensor or a Python bool on
    either side): the one check of a - b, a -= b and their rules."""
    for x in (a, b):
        if isinstance(x, (bool, np.bool_)) or is_array(x) and x.dtype is bool_:
            raise DTypeError(f"{func}: subtraction with a bool is not supported (as in torch); use ^ or "
                             f"logical_xor() for masks, ~ or logical_not() to invert one, or convert with .long()")


def sub(a: Any, b: Any) -> Array:
    """a - b (not for bools, as in torch)."""
    refuse_bool_sub(a, b, "sub()")
    if is_array(a) and is_scalar(b):
        return map_("add_scalar", a, -b)
    return zip_("sub", a, b)


def mul(a: Any, b: Any) -> Array:
    """a * b."""
    if is_array(a) and is_scalar(b):
        return map_("mul_scalar", a, b)
    if is_scalar(a) and is_array(b):
        return map_("mul_scalar", b, a)
    return zip_("mul", a, b)


def div(a: Any, b: Any) -> Array:
    """a / b (true division)."""
    return zip_("div", a, b)


def pow(a: Any, b: Any) -> Array:  # noqa: A001 - torch's name
    """a ** b."""
    if is_array(a) and is_scalar(b):
        return map_("pow_scalar", a, b)
    if is_scalar(a) and is_array(b):
        return map_("rpow_scalar", b, a)
    return zip_("pow", a, b)


def maximum(a: Any, b: Any) -> Array:
    """Elementwise maximum of a and b."""
    return zip_("maximum", a, b)


def minimum(a: Any, b: Any) -> Array:
    """Elementwise minimum of a and b."""
    return zip_("minimum", a, b)


def relu_backward(grad: Array, x: Array) -> Array:
    """grad where x > 0, else 0 (the gradient of relu)."""
    return zip_("relu_backward", grad, x)


def isinf(x: Array) -> Array:
    """True where x is +inf or -inf (never for int64 and bool tensors)."""
    if not x.dtype.is_floating_point:
        return fill_(empty(x.shape, bool_), False)
    return zip_("eq", map_("abs", x), math.inf)


def where(cond: Array, a: Any, b: Any) -> Array:
    """a where cond is true (non-zero), else b (all three broadcast together).

    Exact for any values (inf and nan included): one kernel under the fast
    policy; under teaching, a and b are stacked along a new last dim and cond
    selects one of the two with gather().
    """
    _require_array(cond, "where()", "condition")
    if cond.dtype is int64:
        cond = cast(cond, bool_)  # the kernel reads bool and float conditions
    if not is_array(a) and not is_array(b) and is_scalar(a):
        # Two numbers: the dtype of the result is theirs (torch.where(c, 1, 0) is int64).
        a = _scalar_tensor(a, promote_scalar(bool_, a), cond)
    a, b = _promote_pair(a, b, "where()")
    shape = broadcast_shapes(cond.shape, broadcast_shapes(a.shape, b.shape, "where()"), "where()")
    if fast_kernels():  # one kernel (mt_where); the teaching policy keeps the chain below
        check_new_shape(shape, "where()")
        out = empty(shape, a.dtype)
        if out.numel() > 0:
            _lib.where(out, cond, a, b)
        return out
    check_new_shape(shape + (1,), "where()")
    both = empty(shape + (2,), a.dtype)  # ..., [b, a]
    copy_(index(both, (Ellipsis, 0)), b)
    copy_(index(both, (Ellipsis, 1)), a)
    pick = cast(zip_("ne", cond, 0), int64)  # 1 selects a
    pick = unsqueeze(expand(pick, shape), -1)
    return view(gather(both, -1, pick), shape)


# ---- reductions ------------------------------------------------------------------

_IDENTITY = {"sum": 0.0, "prod": 1.0}


def reduce_(op: str, x: Array, dim: Any = None, keepdim: bool = False) -> Array:
    """Reduces x with op ("sum", "prod", "max", "min", "argmax", "argmin").

    dim: None (every element), an int, or for sum/prod/max/min a tuple of ints.
    keepdim keeps the reduced dims with size 1. argmax/argmin give int64
    indices; with dim=None, the index into the flattened tensor. sum and prod
    of bool tensors count in int64, as torch's.
    """
    func = f"{op}()"
    _require_array(x, func)
    arg = op in ("argmax", "argmin")
    dims = reduce_dims(dim, x.ndim, func, not arg)
    if x.dtype is bool_ and op in _IDENTITY:
        x = cast(x, int64)
    out_dtype = int64 if arg else x.dtype
    if x.ndim == 0:
        if arg:
            return fill_(empty((), int64), 0)
        return clone(x)
    kept = keepdim_shape(x.shape, dims)
    final = kept if keepdim else tuple(n for d, n in enumerate(x.shape) if d not in dims)
    reduced = numel(x.shape[d] for d in dims)
    if reduced == 0 and op not in _IDENTITY:
        raise DimError(
            f"{func}: cannot reduce over zero elements (dims {dims} of a tensor of shape {x.shape}); "
            f"{op} has no identity"
        )
    out = empty(kept, out_dtype)
    if out.numel() == 0:
        pass
    elif x.numel() == 0:
        fill_(out, _IDENTITY[op])
    elif len(dims) == x.ndim and (len(dims) > 1 or dim is None):
        _lib.reduce_all(op, out, x)
    else:
        src = x
        for i, d in enumerate(dims):
            target = out if i == len(dims) - 1 else empty(src.shape[:d] + (1,) + src.shape[d + 1 :], x.dtype)
            _lib.reduce_(op, target, src, d)
            src = target
    return alias(out, final, contiguous_strides(final), out.storage_offset())


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
    return map_("mul_scalar", total, 1.0 / count if count else math.nan)


def fast_kernels() -> bool:
    """Whether the kernel policy is fast: the ops whose only kernels are fused ones
    (logsumexp, cross-entropy) then take them; under teaching they run as chains
    of the kernels students write."""
    return _lib.get_kernel_policy() == "fast"


def logsumexp(x: Array, dim: Any, keepdim: bool = False) -> Array:
    """log(sum(exp(x))) over dim, stably: one kernel reading each row once (mt_logsumexp)
    for one dim under the fast policy; else m + log(sum(exp(x - m))), m = max."""
    _require_array(x, "logsumexp()")
    require_float(x, "logsumexp()")
    dims = reduce_dims(dim, x.ndim, "logsumexp()") if x.ndim else None
    if dims is not None and len(dims) == 1 and fast_kernels():
        d = dims[0]
        out = empty(x.shape[:d] + (1,) + x.shape[d + 1:], x.dtype)
        if out.numel() > 0:
            _lib.logsumexp(out, x, d)
        return out if keepdim else squeeze(out, dims)
    m = reduce_("max", x, dim, keepdim=True)
    m = where(isinf(m), 0.0, m)  # rows of all -inf (or an inf) must not give inf - inf
    s = reduce_("sum", map_("exp", sub(x, m)), dim, keepdim=True)
    out = add(map_("log", s), m)
    if keepdim:
        return out
    return squeeze(out, dims)


ATTENTION_MAX_DIM = 64  # the fused kernel keeps a row in registers (src/attention.cu)


def causal_future(length: int, keys: int) -> Array:
    """(length, keys) bool: True where key j comes after query i (j > i), the
    positions a causal mask hides."""
    host = np.triu(np.ones((length, keys), dtype=bool), 1)
    out = empty((length, keys), bool_)
    if out.numel() > 0:
        upload(out, host)
    return out


def attention(q: Array, k: Array, v: Array, scale: float, causal: bool) -> tuple[Array, Array]:
    """softmax(q @ k^T * scale) @ v over (B, L, D), (B, S, D), (B, S, Dv), in one kernel
    (mt_attention, the flash rung): no score is written to memory. Returns the
    output and each row's log-sum-exp (B, L) of the scaled scores, which is all
    the backward needs to recompute the weights."""
    q, k, v = contiguous(q), contiguous(k), contiguous(v)
    out = empty((q.shape[0], q.shape[1], v.shape[2]), q.dtype)
    lse = empty((q.shape[0], q.shape[1]), q.dtype)
    if out.numel() > 0 or lse.numel() > 0:
        _lib.attention(out, lse, q, k, v, scale, causal)
    return out, lse


def attention_backward(grad: Array, q: Array, k: Array, v: Array, out: Array, lse: Array, scale: float,
                       causal: bool) -> tuple[Array, Array, Array]:
    """dq, dk, dv of attention() from grad = dL/dout and the forward's q, k, v, out
    and lse: two kernels that recompute each weight from lse (mt_attention_backward)."""
    grad = contiguous(grad)
    dq, dk, dv = empty(q.shape, q.dtype), empty(k.shape, k.dtype), empty(v.shape, v.dtype)
    if dq.numel() + dk.numel() + dv.numel() > 0:
        _lib.attention_backward(dq, dk, dv, grad, q, k, v, out, lse, scale, causal)
    return dq, dk, dv


def masked_softmax(x: Array, mask: Optional[Array], scale: float, causal: bool) -> Array:
    """softmax(x * scale + mask) along the last dim, the keys after each query
    hidden when causal (x is (..., L, S)); mask (float, x's dtype) broadcasts to
    x's shape. A row whose every score is -inf gets zeros (torch's attention
    does the same: its "safe softmax"), not the NaN of a softmax over nothing.
    Under the fast policy one kernel reads each score once (mt_masked_softmax,
    the attention ladder's fused rung); under teaching the chain of the
    course's kernels: a multiply, an add, a where, the softmax, a where."""
    func = "masked_softmax()"
    _require_array(x, func)
    require_float(x, func)
    if causal and x.ndim < 2:
        raise ShapeError(f"{func}: the causal mask needs (..., queries, keys), got shape {x.shape}")
    if mask is not None:
        if mask.dtype is not x.dtype:
            raise DTypeError(f"{func}: the mask is {mask.dtype.name} but the scores are {x.dtype.name}")
        mask = expand(mask, x.shape)
    if x.ndim == 0 or not fast_kernels():
        scores = mul(x, scale)
        if mask is not None:
            scores = add(scores, mask)
        if causal:
            scores = where(causal_future(x.shape[-2], x.shape[-1]), float("-inf"), scores)
        if scores.ndim == 0:
            return softmax(scores, -1)
        hidden = zip_("eq", reduce_("max", scores, -1, keepdim=True), float("-inf"))
        return where(hidden, 0.0, softmax(scores, -1))
    x = contiguous(x)
    out = empty(x.shape, x.dtype)
    if out.numel() > 0:
        _lib.masked_softmax(out, x, mask, scale, causal)
    return out


def cross_entropy_rows(logits: Array, targets: Array, checked: bool = False) -> tuple[Array, Array]:
    """Each row's cross-entropy against its target class, and its logsumexp (kept
    for the backward): one kernel reading the logits once (mt_cross_entropy).
    logits (N, C); targets (N,) class indices in logits' dtype, checked on the
    device unless `checked` (the caller checked them on the host)."""
    n = logits.shape[0]
    loss, lse = empty((n,), logits.dtype), empty((n,), logits.dtype)
    # The device check waits for its answer; targets checked before and not
    # written since (the same view, the same storage version) are not checked again.
    # Only memory minitensor owns: another library may write a borrowed buffer
    # without minitensor's version counter knowing.
    storage = targets._storage
    own = type(storage) is Storage
    seal = (targets._offset, targets._shape, targets._strides, logits.shape[1], storage.version)
    checked = checked or own and getattr(storage, "class_indices_checked", None) == seal
    _lib.cross_entropy(loss, lse, logits, targets, checked)
    if own:
        storage.class_indices_checked = seal
    return loss, lse


def cross_entropy_backward(grad: Array, logits: Array, targets: Array, lse: Array, scale: float) -> Array:
    """The gradient of cross_entropy_rows' losses with respect to the logits, each
    row's loss gradient grad (N,) (a broadcast view is fine) times scale
    (mt_cross_entropy_backward). The targets are those the forward checked."""
    out = empty(logits.shape, logits.dtype)
    if out.numel() > 0:
        _lib.cross_entropy_backward(out, logits, targets, lse, grad, scale, True)
    return out


def softmax(x: Array, dim: int, log: bool = False) -> Array:
    """softmax (or log_softmax when log) along dim, one fused stable pass per row."""
    func = "log_softmax()" if log else "softmax()"
    _require_array(x, func)
    require_float(x, func)
    d = normalize_dim(dim, x.ndim, func)
    if x.ndim == 0:
        return view(softmax(view(x, (1,)), 0, log), ())
    out = empty(x.shape, x.dtype)
    if out.numel() > 0:
        _lib.softmax(out, x, d, log)
    return out


def softmax_backward(grad: Array, out: Array, dim: int, log: bool = False, scale: float = 1.0) -> Array:
    """The gradient of softmax (or log_softmax) along dim from its output out,
    times scale: scale * out * (grad - sum(grad * out)), or scale * (grad -
    exp(out) * sum(grad)). One kernel under the fast policy
    (mt_softmax_backward); the course's map, zip and reduce kernels under
    teaching."""
    if out.ndim == 0:
        return view(softmax_backward(view(grad, (1,)), view(out, (1,)), 0, log, scale), ())
    d = normalize_dim(dim, out.ndim, "softmax_backward()")
    if grad.dtype is not out.dtype:
        grad = cast(grad, out.dtype)
    if not fast_kernels():
        if log:
            result = sub(grad, mul(map_("exp", out), reduce_("sum", grad, d, keepdim=True)))
        else:
            result = mul(out, sub(grad, reduce_("sum", mul(grad, out), d, keepdim=True)))
        return result if scale == 1.0 else mul(result, scale)
    result = empty(out.shape, out.dtype)
    if result.numel() > 0:
        _lib.softmax_backward(result, expand(grad, out.shape), out, d, log, scale)
    return result


def _rows_of(x: Array, rows: int, n: int) -> Array:
    """x as a contiguous (rows, n) Array (a copy only when x is not contiguous)."""
    return view(contiguous(x), (rows, n))


def layer_norm(x: Array, normalized_shape: Sequence[int], weight: Any = None, bias: Any = None,
               eps: float = 1e-5) -> tuple[Array, Array, Array]:
    """Layer normalization over the last len(normalized_shape) dims, one kernel
    (mt_layer_norm): returns (out, mean, rstd), the statistics one per row (the
    shape of x without the normalized dims), kept for layer_norm_backward."""
    func = "layer_norm()"
    _require_array(x, func)
    require_float(x, func)
    shape = tuple(int(d) for d in normalized_shape)
    k = len(shape)
    if k == 0 or k > x.ndim or x.shape[x.ndim - k:] != shape:
        raise ShapeError(f"{func}: the last dims of the input of shape {x.shape} must be the "
                         f"normalized shape {shape}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None:
            _require_array(p, func, name)
            if p.shape != shape:
                raise ShapeError(f"{func}: {name} has shape {p.shape}, expected the normalized shape {shape}")
            if p.dtype is not x.dtype:
                raise DTypeError(f"{func}: {name} is {p.dtype.name} but the input is {x.dtype.name}")
    eps = as_float(eps, func)
    n, lead = math.prod(shape), x.shape[: x.ndim - k]
    rows = math.prod(lead)
    rows_x = _rows_of(x, rows, n)
    out = empty((rows, n), x.dtype)
    mean, rstd = empty((rows,), x.dtype), empty((rows,), x.dtype)
    w = None if weight is None else view(contiguous(weight), (n,))
    b = None if bias is None else view(contiguous(bias), (n,))
    _lib.layer_norm(out, mean, rstd, rows_x, w, b, eps)
    return view(out, x.shape), view(mean, lead), view(rstd, lead)


def layer_norm_backward(grad: Array, x: Array, mean: Array, rstd: Array, weight: Any, has_bias: bool,
                        needs: tuple[bool, bool, bool]) -> tuple[Any, Any, Any]:
    """The gradients (of x, weight, bias) of layer_norm that `needs` asks for, None
    for the others, from the forward's x, statistics and weight (mt_layer_norm_backward)."""
    k = x.ndim - mean.ndim
    n, rows = math.prod(x.shape[x.ndim - k:]), mean.numel()
    g, xr = _rows_of(grad, rows, n), _rows_of(x, rows, n)
    dx = empty(xr.shape, x.dtype) if needs[0] else None
    dw = empty((n,), x.dtype) if needs[1] and weight is not None else None
    db = empty((n,), x.dtype) if needs[2] and has_bias else None
    w = None if weight is None else view(contiguous(weight), (n,))
    _lib.layer_norm_backward(dx, dw, db, g, xr, view(mean, (rows,)), view(rstd, (rows,)), w, has_bias)
    param_shape = x.shape[x.ndim - k:]
    return (None if dx is None else view(dx, x.shape), None if dw is None else view(dw, param_shape),
            None if db is None else view(db, param_shape))


# ---- optimizer updates (in place, one kernel per parameter) ----------------------------


def fused_update_applies(param: Array, *others: Array) -> bool:
    """Whether the fused updates below take these tensors: contiguous float
    tensors of one shape and dtype (otherwise the optimizers use ops)."""
    return param.dtype.is_floating_point and param.is_contiguous() and all(
        o.is_contiguous() and o.shape == param.shape and o.dtype is param.dtype for o in others)


def sgd_step_(param: Array, grad: Array, momentum_buffer: Any, lr: float, momentum: float,
              weight_decay: float, first_step: bool) -> None:
    """One SGD update of param (and its momentum buffer) in place (mt_sgd_step)."""
    bump_version(param)
    if momentum_buffer is not None:
        bump_version(momentum_buffer)
    _lib.sgd_step(param, grad, momentum_buffer, lr, momentum, weight_decay, first_step)


def adam_step_(param: Array, grad: Array, exp_avg: Array, exp_avg_sq: Array, lr: float,
               betas: tuple[float, float], eps: float, weight_decay: float, step: int,
               decoupled: bool = False) -> None:
    """One Adam update (AdamW's when decoupled) of param and its moving averages in
    place (mt_adam_step)."""
    for x in (param, exp_avg, exp_avg_sq):
        bump_version(x)
    _lib.adam_step(param, grad, exp_avg, exp_avg_sq, lr, betas[0], betas[1], eps, weight_decay, step, decoupled)


# ---- matmul ----------------------------------------------------------------------------


def matmul(a: Array, b: Array, algo: str = "default", config: int = -1, out: Any = None) -> Array:
    """a @ b as in torch.matmul: 2-D, batched N-D with broadcast batch dims, 1-D operands.

    A 1-D a is a row vector (1, K) and a 1-D b a column (K, 1); the added dim
    is removed from the result. algo picks a kernel of the ladder (one of
    _lib.op_names("matmul"): "default", "naive", "coalesced", "tiled",
    "blocktile_1d", "blocktile_2d", "vectorized", "warptile", "pipelined"), or
    "tf32", the tensor-core rung (float32 only; "default" takes it for float32
    operands while mt.backends.cuda.matmul.allow_tf32 is set), or
    "tf32_simple", the first TF32 rung, for comparison. config is a
    tile configuration of warptile or pipelined (an index below
    _lib.matmul_config_count()); -1 lets "default" ask the autotuner and the
    rungs choose from the shape.
    out, if given, is an Array of the result's shape and dtype to write into.
    """
    _require_array(a, "matmul()", "a")
    _require_array(b, "matmul()", "b")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            f"matmul(): both arguments need at least 1 dim, got shapes {a.shape} and {b.shape}"
        )
    if not isinstance(algo, str) or (algo not in _lib.TF32_RUNGS and algo not in _lib.op_names("matmul")):
        raise ValueError(f"matmul(): unknown algo {algo!r}; one of {_lib.op_names('matmul') + tuple(_lib.TF32_RUNGS)}")
    # Every shape check comes before the casts, which allocate.
    a_shape = (1,) + a.shape if a.ndim == 1 else a.shape
    b_shape = b.shape + (1,) if b.ndim == 1 else b.shape
    m, k = a_shape[-2:]
    k2, n = b_shape[-2:]
    if k != k2:
        raise ShapeError(
            f"matmul(): shapes {a.shape} and {b.shape} cannot be multiplied ({k} != {k2})"
        )
    try:
        batch = broadcast_shapes(a_shape[:-2], b_shape[:-2], "matmul()")
    except ShapeError:
        raise ShapeError(
            f"matmul(): the batch dims of shapes {a.shape} and {b.shape} cannot be broadcast together"
        ) from None
    dtype = promote(a.dtype, b.dtype)
    if not dtype.is_floating_point:
        raise DTypeError(f"matmul(): both operands are {a.dtype.name if a.dtype is b.dtype else 'integer or bool'}"
                         f" tensors (shapes {a.shape} and {b.shape}); the matmul kernels take float32 or float64, "
                         f"as torch's CUDA matmul does (convert with .float())")
    check_new_shape(batch + (m, n), "matmul()", dtype.itemsize)
    a2 = cast(a, dtype)
    b2 = cast(b, dtype)
    if a.ndim == 1:
        a2 = unsqueeze(a2, 0)
    if b.ndim == 1:
        b2 = unsqueeze(b2, 1)
    shape = batch + ((m,) if a.ndim > 1 else ()) + ((n,) if b.ndim > 1 else ())
    if out is None:
        out = empty(shape, dtype)
    else:
        check_out(out, shape, dtype, "matmul()")
    target = view(out, batch + (m, n))  # the (M, N) dims that a 1-D operand dropped, back
    a2 = expand(a2, batch + (m, k))
    b2 = expand(b2, batch + (k, n))
    if target.numel() > 0:
        if k == 0:
            fill_(target, 0.0)
        else:
            if algo == "default" and config == -1 and dtype is float32 and backends.cuda.matmul.allow_tf32:
                algo = "tf32"
            if algo in _lib.TF32_RUNGS:
                _lib.matmul_tf32(target, a2, b2, algo)
                return out
            # "default": the tile configuration comes from the autotuner
            # (measured once per device and shape class, then cached).
            if config == -1 and algo == "default":
                config = autotune.matmul_config(target, a2, b2)
            _lib.matmul(target, a2, b2, algo, config)
    return out


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


# ---- joining ---------------------------------------------------------------------------------


def cat(tensors: Sequence[Array], dim: int = 0) -> Array:
    """Concatenates tensors along an existing dim (all other sizes must match)."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) == 0:
        raise ValueError("cat(): expected a non-empty list or tuple of tensors")
    for t in tensors:
        _require_array(t, "cat()", "every element")
    first = tensors[0]
    if first.ndim == 0:
        raise ShapeError("cat(): zero-dimensional tensors cannot be concatenated; use stack()")
    d = normalize_dim(dim, first.ndim, "cat()")
    dtype = first.dtype
    for t in tensors:
        if t.ndim != first.ndim or any(
            t.shape[k] != first.shape[k] for k in range(first.ndim) if k != d
        ):
            raise ShapeError(
                f"cat(): shapes {first.shape} and {t.shape} do not match outside dim {d}"
            )
        dtype = promote(dtype, t.dtype)
    total = sum(t.shape[d] for t in tensors)
    out = empty(first.shape[:d] + (total,) + first.shape[d + 1 :], dtype)
    start = 0
    for t in tensors:
        copy_(narrow(out, d, start, t.shape[d]), t)
        start += t.shape[d]
    return out


def stack(tensors: Sequence[Array], dim: int = 0) -> Array:
    """Stacks tensors of one shape along a new dim."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) == 0:
        raise ValueError("stack(): expected a non-empty list or tuple of tensors")
    for t in tensors:
        _require_array(t, "stack()", "every element")
        if t.shape != tensors[0].shape:
            raise ShapeError(f"stack(): shapes {tensors[0].shape} and {t.shape} differ")
    d = normalize_dim(dim, tensors[0].ndim, "stack()", extra=1)
    return cat([unsqueeze(t, d) for t in tensors], d)



# ---- sliding windows (convolution and pooling) ------------------------------------------------


def window_shape(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """How many windows of `kernel` taps (`dilation` apart) fit along a dim of `size`
    padded by `padding` on each side, one every `stride` (torch's floor formula)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def im2col(x: Array, kernel: tuple[int, int], stride: tuple[int, int], padding: tuple[int, int],
           dilation: tuple[int, int], pad_value: float = 0.0) -> Array:
    """The sliding windows of x (N, C, H, W) as a new contiguous (N, C, KH, KW, OH, OW)
    tensor: out[n, c, i, j, y, x] = padded[n, c, y*sh + i*dh, x*sw + j*dw].

    Two copies and no arithmetic: the padded input (pad_value around x), then
    one strided copy of a view of it whose strides step through the windows
    (the "strided map" that makes convolution a matmul: the windows overlap,
    so the view reads some elements several times, which a copy may do).
    """
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    oh, ow = window_shape(h, kh, sh, ph, dh), window_shape(w, kw, sw, pw, dw)
    padded = x
    if ph or pw:
        padded = fill_(empty((n, c, h + 2 * ph, w + 2 * pw), x.dtype), pad_value)
        copy_(narrow(narrow(padded, 2, ph, h), 3, pw, w), x)
    padded = contiguous(padded)
    s_n, s_c, s_h, s_w = padded.strides
    windows = as_strided(padded, (n, c, kh, kw, oh, ow),
                         (s_n, s_c, dh * s_h, dw * s_w, sh * s_h, sw * s_w), padded.storage_offset())
    return clone(windows)


CONV_TILE, CONV_SHARED_LIMIT = 16, 48 * 1024  # src/conv.cu's kTile and kConvSharedLimit


def conv2d_tiled_fits(kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
                      dtype: DType) -> bool:
    """Whether mt_conv2d takes these sizes: a block's input patch (a 16 x 16 tile
    of outputs and its halo) and one channel's weights fit in 48 KiB of shared
    memory (the check src/conv.cu makes)."""
    patch = 1
    for k, s, d in zip(kernel, stride, dilation):
        patch *= (CONV_TILE - 1) * s + (k - 1) * d + 1
    return (patch + kernel[0] * kernel[1]) * dtype.itemsize <= CONV_SHARED_LIMIT


def conv2d_tiled(x: Array, weight: Array, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
                 dilation: tuple[int, int], groups: int) -> Array:
    """The convolution of x (N, C, H, W) by weight (C_out, C / groups, KH, KW), plus
    bias (C_out,) or None, in one kernel (mt_conv2d, the tiled rung): each block
    stages the input patch of a 16 x 16 output tile in shared memory; no window
    is copied to memory. The patch must fit in 48 KiB (else InvalidArgumentError
    naming its size)."""
    x, weight = contiguous(x), contiguous(weight)
    bias = None if bias is None else contiguous(bias)
    n, _, h, w = x.shape
    c_out, _, kh, kw = weight.shape
    oh = window_shape(h, kh, stride[0], padding[0], dilation[0])
    ow = window_shape(w, kw, stride[1], padding[1], dilation[1])
    out = empty((n, c_out, oh, ow), x.dtype)
    _lib.conv2d(out, x, weight, bias, stride, padding, dilation, groups)
    return out


def col2im(cols: Array, shape: tuple[int, ...], stride: tuple[int, int], padding: tuple[int, int],
           dilation: tuple[int, int]) -> Array:
    """The gradient of im2col: each window element of cols (N, C, KH, KW, OH, OW) added
    back to the input position it was read from, in a new (N, C, H, W) tensor.

    Windows overlap, so positions receive several additions: one strided
    in-place add per kernel tap (i, j), each a zip kernel over every window
    at once, so that no two threads of one launch write the same element.
    """
    n, c, h, w = shape
    _, _, kh, kw, oh, ow = cols.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    padded = fill_(empty((n, c, h + 2 * ph, w + 2 * pw), cols.dtype), 0.0)
    s_n, s_c, s_h, s_w = padded.strides
    for i in range(kh):
        for j in range(kw):
            # The input positions tap (i, j) read, window by window: a strided view.
            target = as_strided(padded, (n, c, oh, ow), (s_n, s_c, sh * s_h, sw * s_w), i * dh * s_h + j * dw * s_w)
            inplace_("add", target, index(cols, (slice(None), slice(None), i, j)))
    return contiguous(narrow(narrow(padded, 2, ph, h), 3, pw, w))
