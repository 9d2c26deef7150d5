"""softmax and log_softmax along a dim, and their gradient (src/softmax.cu)."""

from __future__ import annotations

from .. import _lib
from .._array import Array, empty
from .._views import expand, view
from .._shape import normalize_dim
from .core import _require_array, require_float, cast, fast_kernels
from .reduce import reduce_
from .elementwise import map_, sub, mul


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


def softmax_out_(out: Array, x: Array, dim: int, log: bool) -> None:
    """(log_)softmax of x along dim into an existing out of x's shape and dtype
    (mt_softmax); the caller checked the arguments (minitensor.kernels.softmax)."""
    _lib.softmax(out, x, dim, log)
