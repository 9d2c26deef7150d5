"""logsumexp over dims (src/logsumexp.cu under the fast policy; a chain of
reductions and maps under teaching)."""

from __future__ import annotations

import math
from typing import Any

from .. import _lib
from .._array import Array, empty
from .._views import squeeze
from .._shape import keepdim_shape, numel, reduce_dims
from .core import _require_array, require_float, fast_kernels, contiguous, fill_, reshape
from .reduce import reduce_
from .elementwise import map_, add, sub, mul, isinf
from .where import where


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
    if dims and numel(x.shape[d] for d in dims) == 0:  # a sum of nothing: log(0), as the kernel gives
        out = fill_(empty(keepdim_shape(x.shape, dims), x.dtype), -math.inf)
        return out if keepdim else squeeze(out, dims)
    m = reduce_("max", x, dim, keepdim=True)
    m = where(isinf(m), 0.0, m)  # rows of all -inf (or an inf) must not give inf - inf
    s = reduce_("sum", map_("exp", sub(x, m)), dim, keepdim=True)
    out = add(map_("log", s), m)
    if keepdim:
        return out
    return squeeze(out, dims)


def logsumexp_backward(grad: Array, x: Array, out: Array, dims: tuple[int, ...]) -> Array:
    """The gradient of out = logsumexp(x, dims) from grad, the gradient of out (each of
    the two with or without the reduced dims): grad * exp(x - out), the softmax of x
    scaled by grad, with grad and out repeated along dims. One elementwise kernel
    (mt_logsumexp_backward) under the fast policy; the chain sub, exp, mul under teaching."""
    keep = keepdim_shape(x.shape, dims)
    if not fast_kernels():
        return mul(reshape(grad, keep), map_("exp", sub(x, reshape(out, keep))))  # stable: x - out <= 0
    grad_in = empty(x.shape, x.dtype)
    if grad_in.numel() > 0:
        _lib.logsumexp_backward(grad_in, reshape(contiguous(grad), keep), x, reshape(contiguous(out), keep))
    return grad_in
