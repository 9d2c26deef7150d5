"""helpers: what several gradient rules share.

``unbroadcast(grad, shape)`` is the one place where broadcasting is undone;
every rule of a broadcasting op calls it. The others make small constant
arrays and pick the Python numbers out of an op's arguments.
"""

from __future__ import annotations

from typing import Any, Sequence

from .. import ops
from .._array import Array, empty
from .._shape import keepdim_shape, reduce_dims


def unbroadcast(grad: Array, shape: Sequence[int]) -> Array:
    """grad summed down to shape: undoes NumPy broadcasting of a tensor of shape to grad.shape.

    The leading dims that broadcasting added are summed away, and so are the
    dims where shape has 1 but grad does not.
    """
    # TASK(autograd_rules) BEGIN
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(
        lead + d for d, size in enumerate(shape) if size == 1 and grad.shape[lead + d] != 1
    )
    if len(dims) == lead:  # only added dims (a bias's gradient): the sum has shape already
        return ops.reduce_("sum", grad, dims) if dims else ops.reshape(grad, shape)
    return ops.reshape(ops.reduce_("sum", grad, dims, keepdim=True), shape)
    # TASK(autograd_rules) STUB
    #| # TODO (task autograd_rules): a tensor of shape broadcast to grad.shape was
    #| # used once per repeat, so its gradient is grad summed over the repeats: over
    #| # the leading dims broadcasting added, and (keeping them) over the dims where
    #| # shape has 1 and grad does not. Return an Array of exactly shape.
    #| raise NotImplementedError("task autograd_rules is not done: unbroadcast in minitensor/autograd/helpers.py")
    # TASK(autograd_rules) END


def expand_reduced(grad: Array, shape: Sequence[int], dims: Sequence[int]) -> Array:
    """The gradient of a reduction's result, viewed with keepdim and expanded to the input's shape."""
    if grad.ndim == 0:  # every dim reduced, none kept: a 0-d gradient expands to any shape as it is
        return ops.expand(grad, tuple(shape))
    return ops.expand(ops.reshape(grad, keepdim_shape(shape, dims)), tuple(shape))


def save_reduction(ctx: Any, x: Array, out: Array, dim: Any) -> Array:
    """For a reduction whose backward reads both its input and its result (max, min,
    logsumexp): notes the reduced dims (ctx.dims), saves x and out, returns out."""
    ctx.dims = reduce_dims(dim, x.ndim, "reduction")
    ctx.save_for_backward(x, out)
    return out


def saved_reduction(ctx: Any) -> tuple[Any, Any, tuple[int, ...]]:
    """What save_reduction kept: (x, out, the keepdim shape of out)."""
    x, out = ctx.saved_tensors
    return x, out, keepdim_shape(x.shape, ctx.dims)


def scalar_like(value: float, like: Array) -> Array:
    """A 0-d tensor holding value, in like's dtype."""
    return ops.fill_(empty((), like.dtype), value)


def zeros(shape: Sequence[int], like: Array) -> Array:
    """A new tensor of zeros of shape, in like's dtype."""
    return ops.fill_(empty(tuple(shape), like.dtype), 0.0)


def scalars_of(*args: Any) -> tuple[Any, ...]:
    """The Python numbers among args, None in place of the tensors (those are saved
    with save_for_backward): rules with an operand that may be either keep both."""
    return tuple([None if isinstance(x, Array) else x for x in args])
