"""Elementwise ops: the map kernel (src/map.cu, one input and a scalar) and
the zip kernel (src/zip.cu, two broadcast inputs), the promotions of their
dtype rules (the rules themselves are read from the library), the
arithmetic operators and the in-place ones (inplace_)."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from .. import _lib
from .._array import Array, bump_version, empty, empty_like, shares_storage, to_numpy
from .._dtype import DType, bool_, default_dtype, int64, promote, promote_scalar
from .._errors import DTypeError, InvalidArgumentError, ShapeError
from .._shape import broadcast_shapes, check_new_shape
from .core import (
    Scalar,
    is_array,
    is_scalar,
    check_writable,
    _require_array,
    engine_scalar,
    op_takes,
    op_result_dtype,
    _scalar_tensor,
    _promote_pair,
    fill_,
    cast,
    clone,
    new_map,
    new_zip,
)
from .reduce import reduce_


# (op, dtype) -> the dtype of op's result for two float operands of that one
# dtype, or None where op does not take them: the common case's dtype rule,
# read from the library's rules once per pair (_same_float_result).
_SAME_FLOAT_RESULT: dict[tuple[str, DType], Optional[DType]] = {}


def _same_float_result(op: str, dtype: DType) -> Optional[DType]:
    key = (op, dtype)
    if key not in _SAME_FLOAT_RESULT:
        takes = dtype.is_floating_point and op_takes("zip", op, dtype)
        _SAME_FLOAT_RESULT[key] = op_result_dtype("zip", op, dtype) if takes else None
    return _SAME_FLOAT_RESULT[key]


# ---- elementwise ------------------------------------------------------------------


def _map_dtype(op: str, x: Array, scalar: Scalar) -> DType:
    """The dtype op computes in for a non-float x (and scalar): x's, promoted
    where torch promotes. Which dtypes its kernel takes is its dtype rule in
    src/minitensor.h's op list (op_takes); the *_scalar maps also promote with
    the scalar."""
    dtype = x.dtype
    if op.endswith("_scalar"):
        dtype = promote_scalar(dtype, scalar)
        if dtype is bool_:  # a bool number with a bool tensor: map_ calls the bool zip
            return dtype
        if dtype is int64 and op == "pow_scalar" and scalar < 0:
            raise InvalidArgumentError("pow(): integers to negative integer powers are not allowed "
                                       "(as in torch); use a float tensor")
        return dtype
    if not op_takes("map", op, int64):
        return default_dtype  # float-only: integer and bool inputs compute in float32, as in torch
    if not op_takes("map", op, dtype):
        raise DTypeError(f"{op}() is not defined for bool tensors (use ~ or logical_not() to invert a mask, "
                         f"or convert with .long() first)")
    return dtype


def map_(op: str, x: Array, scalar: Scalar = 0.0) -> Array:
    """A new tensor op(x) elementwise; op is an mt_map_op name ("exp", "add_scalar", ...)."""
    if not isinstance(x, Array):
        _require_array(x, f"{op}()")
    if not x._dtype.is_floating_point:
        dtype = _map_dtype(op, x, scalar)
        if dtype is bool_ and op in ("add_scalar", "mul_scalar"):
            return zip_("add" if op == "add_scalar" else "mul", x, scalar)  # or / and, as torch's bool + and *
        if dtype is bool_ and op.endswith("_scalar"):
            dtype = int64  # True ** True: computed on integers
        if op == "rpow_scalar" and dtype is int64:
            return zip_("pow", _scalar_tensor(scalar, int64, x), x)  # the map kernel has no int64 rpow
        x = cast(x, dtype)
    if type(scalar) is not float:  # a float is the double the engine takes already
        scalar = engine_scalar(scalar, x._dtype, f"{op}()")
    return new_map(op, x, scalar)


def _zip_dtypes(op: str, dtype: DType) -> tuple[DType, DType]:
    """For operands promoted to dtype: (the dtype op computes in, its result's),
    from op's dtype rule in src/minitensor.h's op list."""
    result = op_result_dtype("zip", op, dtype)
    if result is not dtype:
        return dtype, result  # a comparison: any dtype in, bool out
    if not op_takes("zip", op, dtype):
        if dtype.is_floating_point:
            raise DTypeError(f"{op}() is only defined for int64 and bool tensors, got {dtype.name}")
        if not op_takes("zip", op, int64):
            return default_dtype, default_dtype  # float-only: true division, as torch: 7 / 2 is 3.5
        return int64, int64  # bools computed as integers (pow, floor_divide, remainder)
    return dtype, dtype


def _check_divisor(op: str, b: Array) -> None:
    """floor_divide and remainder by an integer zero have no answer: ZeroDivisionError,
    as torch's CPU ops raise (the check reads the divisor back: a synchronization)."""
    if op in ("floor_divide", "remainder") and not b.dtype.is_floating_point and b.numel() > 0:
        if to_numpy(reduce_("min", map_("abs", b))).item() == 0:
            raise ZeroDivisionError(f"{op}(): integer division by zero")


def zip_(op: str, a: Any, b: Any) -> Array:
    """A new tensor op(a, b) with broadcasting; a or b may be a Python number."""
    if isinstance(a, Array) and isinstance(b, Array) and a._dtype is b._dtype:
        # The common cases: two float tensors of one dtype need no promotion;
        # of one shape, no broadcasting either, and their shape has already
        # been checked.
        result = _SAME_FLOAT_RESULT.get((op, a._dtype), False)
        if result is False:
            result = _same_float_result(op, a._dtype)
        if result is not None:
            if a._shape == b._shape:
                return new_zip(op, a._shape, result, a, b)
            shape = broadcast_shapes(a._shape, b._shape, f"{op}()")
            check_new_shape(shape, f"{op}()", result.itemsize)
            return new_zip(op, shape, result, a, b)
    a, b = _promote_pair(a, b, f"{op}()")
    compute, result = _zip_dtypes(op, a.dtype)
    a, b = cast(a, compute), cast(b, compute)
    _check_divisor(op, b)
    shape = broadcast_shapes(a.shape, b.shape, f"{op}()")
    check_new_shape(shape, f"{op}()", result.itemsize)
    return new_zip(op, shape, result, a, b)


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
    if isinstance(a, Array):
        if isinstance(b, Array):
            return zip_("add", a, b)
        if is_scalar(b):
            return map_("add_scalar", a, b)
    elif is_scalar(a) and isinstance(b, Array):
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
    if isinstance(a, Array) and isinstance(b, Array) and a._dtype is b._dtype and a._dtype.is_floating_point:
        return zip_("sub", a, b)  # no bool here: refuse_bool_sub has nothing to refuse
    refuse_bool_sub(a, b, "sub()")
    if is_array(a) and is_scalar(b):
        return map_("add_scalar", a, -b)
    return zip_("sub", a, b)


def mul(a: Any, b: Any) -> Array:
    """a * b."""
    if isinstance(a, Array):
        if isinstance(b, Array):
            return zip_("mul", a, b)
        if is_scalar(b):
            return map_("mul_scalar", a, b)
    elif is_scalar(a) and isinstance(b, Array):
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


def activation(op: str, x: Array, s: float = 0.0, t: float = 0.0) -> Array:
    """A new tensor op(x) for an activation of a float tensor, one map kernel
    (src/activations.h): "gelu", "gelu_tanh", "silu", "elu" (s = alpha),
    "leaky_relu" (s = negative_slope), "hardtanh" (s, t = min_val, max_val)."""
    _require_array(x, f"{op}()")
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}() takes a float32 or float64 tensor, got {x.dtype.name}")
    if t == 0.0:  # mt_map's second scalar is 0: allocate and launch in one call
        return new_map(op, x, s)
    out = empty(x.shape, x.dtype)
    if out.numel() > 0:
        _lib.map_scalars(op, out, x, s, t)
    return out


def activation_backward(op: str, grad: Array, x: Array, s: float = 0.0, t: float = 0.0) -> Array:
    """The gradient of activation(op, x, s, t) from the incoming gradient (x's
    shape, or one that broadcasts with it): one zip kernel, op + "_backward"."""
    grad = cast(grad, x.dtype)
    shape = broadcast_shapes(grad.shape, x.shape, f"{op}_backward()")
    if s == 0.0 and t == 0.0:  # mt_zip's scalars are 0: allocate and launch in one call
        return new_zip(op + "_backward", shape, x.dtype, grad, x)
    out = empty(shape, x.dtype)
    if out.numel() > 0:
        _lib.zip_scalars(op + "_backward", out, grad, x, s, t)
    return out


def isinf(x: Array) -> Array:
    """True where x is +inf or -inf (never for int64 and bool tensors)."""
    if not x.dtype.is_floating_point:
        return fill_(empty(x.shape, bool_), False)
    return zip_("eq", map_("abs", x), math.inf)


def zip_out_(op: str, out: Array, a: Array, b: Array) -> None:
    """out = op(a, b) into an existing out of the broadcast shape and dtype (mt_zip);
    the caller checked the arguments (minitensor.kernels.add)."""
    _lib.zip_(op, out, a, b)
