"""Layer normalization and its gradient (src/layernorm.cu); batch normalization in
training mode and its gradient (src/batchnorm.cu)."""

from __future__ import annotations

import math
from typing import Any, Sequence

from .. import _lib
from .._array import Array, empty
from .._views import view
from .._errors import DTypeError, ShapeError
from .core import _require_array, as_float, require_float, contiguous
from .reduce import mean


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


def _planes_of(x: Array) -> Array:
    """x (N, C, *) as a contiguous (N, C, S) Array, S the product of * (1 when none)."""
    return view(contiguous(x), (x.shape[0], x.shape[1], math.prod(x.shape[2:])))


def batch_norm(x: Array, weight: Any, bias: Any, running_mean: Any, running_var: Any, momentum: float,
               eps: float) -> tuple[Array, Array, Array]:
    """Batch normalization in training mode of x (N, C, *) per channel, one column
    reduction and one elementwise pass (mt_batch_norm, src/batchnorm.cu): returns
    (out, mean, rstd), the statistics (C,) kept for batch_norm_backward.
    running_mean and running_var (C,), when given, move towards the batch's mean
    and unbiased variance by momentum, in place."""
    func = "batch_norm()"
    _require_array(x, func)
    require_float(x, func)
    if x.ndim < 2:
        raise ShapeError(f"{func}: the input must be (N, C, *), got shape {x.shape}")
    channels = x.shape[1]
    for name, p in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        if p is not None:
            _require_array(p, func, name)
            if p.shape != (channels,):
                raise ShapeError(f"{func}: {name} has shape {p.shape}, expected ({channels},) for an input "
                                 f"of shape {x.shape}")
            if p.dtype is not x.dtype:
                raise DTypeError(f"{func}: {name} is {p.dtype.name} but the input is {x.dtype.name}")
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{func}: running_mean and running_var go together (one of them is None)")
    weight = None if weight is None else contiguous(weight)
    bias = None if bias is None else contiguous(bias)
    planes = _planes_of(x)
    out = empty(planes.shape, x.dtype)
    mean, rstd = empty((channels,), x.dtype), empty((channels,), x.dtype)
    _lib.batch_norm(out, mean, rstd, planes, weight, bias, running_mean, running_var,
                    as_float(momentum, func), as_float(eps, func))
    return view(out, x.shape), mean, rstd


def batch_norm_backward(grad: Array, x: Array, mean: Array, rstd: Array, weight: Any,
                        needs: tuple[bool, bool, bool]) -> tuple[Any, Any, Any]:
    """The gradients (of x, weight, bias) of batch_norm that `needs` asks for, None
    for the others, from the forward's x, statistics and weight
    (mt_batch_norm_backward: one column reduction, one elementwise pass)."""
    g, planes = _planes_of(grad), _planes_of(x)
    channels = x.shape[1]
    dx = empty(planes.shape, x.dtype) if needs[0] else None
    dw = empty((channels,), x.dtype) if needs[1] else None
    db = empty((channels,), x.dtype) if needs[2] else None
    _lib.batch_norm_backward(dx, dw, db, g, planes, mean, rstd, None if weight is None else contiguous(weight))
    return None if dx is None else view(dx, x.shape), dw, db
