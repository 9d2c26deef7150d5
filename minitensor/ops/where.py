"""where(cond, a, b) (src/where.cu under the fast policy; a gather under teaching)."""

from __future__ import annotations

from typing import Any

from .. import _lib
from .._array import Array, empty
from .._views import expand, index, unsqueeze, view
from .._dtype import bool_, int64, promote_scalar
from .._shape import broadcast_shapes, check_new_shape
from .core import (
    is_array,
    is_scalar,
    _require_array,
    _scalar_tensor,
    _promote_pair,
    copy_,
    cast,
    fast_kernels,
)
from .elementwise import zip_
from .gather import gather


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
