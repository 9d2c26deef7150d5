"""reduce: the gradient rules of the reductions: sum, mean, prod, max/min.

max(dim)/min(dim) send the gradient to the index the forward picked (the
first maximum/minimum, as torch's ``max(dim)`` does); max/min over every
element and amax/amin over any dims split it evenly among the tied elements
(as torch's ``max()`` and ``amax`` do).
"""

from __future__ import annotations

import math
from typing import Any

from .. import ops
from .._shape import keepdim_shape, numel, reduce_dims
from .engine import Function, is_grad_enabled
from .helpers import expand_reduced, save_reduction, saved_reduction, zeros


# ---- reductions ----------------------------------------------------------------------------


class Sum(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        out = ops.reduce_("sum", x, dim, keepdim)
        if ctx.records:  # only backward needs them
            ctx.in_shape = x.shape
            ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        return out

    @staticmethod
    def backward(ctx, grad):
        # TASK(autograd_rules) BEGIN
        return expand_reduced(grad, ctx.in_shape, ctx.dims), None, None
        # TASK(autograd_rules) STUB
        #| # TODO (task autograd_rules): every input element of the reduced dims
        #| # (ctx.dims) added into one output element, so each gets that element's
        #| # gradient: spread grad back over ctx.in_shape (helpers.py). One gradient
        #| # per argument of forward: None for dim and keepdim.
        #| raise NotImplementedError("task autograd_rules is not done: Sum.backward in minitensor/autograd/reduce.py")
        # TASK(autograd_rules) END


class Mean(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        out = ops.mean(x, dim, keepdim)
        ctx.in_shape = x.shape
        ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        return out

    @staticmethod
    def backward(ctx, grad):
        count = numel(ctx.in_shape[d] for d in ctx.dims)
        scale = 1.0 / count if count else math.nan
        return ops.mul(expand_reduced(grad, ctx.in_shape, ctx.dims), scale), None, None


class Prod(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        out = ops.reduce_("prod", x, dim, keepdim)
        ctx.save_for_backward(x)
        ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        return out

    @staticmethod
    def backward(ctx, grad):
        # d prod / d x_i = the product of the other elements: prod/x_i without
        # zeros; with one zero, the product of the non-zeros at the zero and 0
        # elsewhere; with two or more zeros, 0 everywhere.
        (x,) = ctx.saved_tensors
        dims = ctx.dims
        is_zero = ops.zip_("eq", x, 0.0)
        zeros_in_row = ops.reduce_("sum", is_zero, dims, keepdim=True)
        safe = ops.where(is_zero, 1.0, x)
        prod_nonzero = ops.reduce_("prod", safe, dims, keepdim=True)
        no_zero = ops.mul(ops.div(prod_nonzero, safe), ops.zip_("eq", zeros_in_row, 0.0))
        one_zero = ops.mul(ops.mul(prod_nonzero, is_zero), ops.zip_("eq", zeros_in_row, 1.0))
        return ops.mul(expand_reduced(grad, x.shape, dims), ops.add(no_zero, one_zero)), None, None


class Max(Function):
    """max over every element (torch's max()) or amax over dims: the gradient split
    evenly among the tied elements, as torch's. max(dim) with indices is MaxAlongDim."""

    op = "max"  # Min below changes only this

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        return save_reduction(ctx, x, ops.reduce_(ctx.op, x, dim, keepdim), dim)

    @staticmethod
    def backward(ctx, grad):
        x, out, keep = saved_reduction(ctx)
        is_selected = ops.zip_("eq", x, ops.reshape(out, keep))
        count = ops.reduce_("sum", is_selected, ctx.dims, keepdim=True)
        share = ops.div(ops.reshape(grad, keep), count)
        return ops.mul(is_selected, share), None, None


class Min(Max):
    op = "min"


class MaxAlongDim(Function):
    """The values of torch's max(dim) or min(dim), which one pass found together with
    their indices (max_along_dim below): the gradient goes to the index picked, the
    first maximum (minimum), as torch's."""

    @staticmethod
    def forward(ctx, x, dim, keepdim, values, indices):
        ctx.in_shape = x.shape
        ctx.dims = reduce_dims(dim, x.ndim, "reduction", False)
        ctx.indices = indices
        return values

    @staticmethod
    def backward(ctx, grad):
        if not ctx.dims:  # a 0-d input is its own maximum
            return grad, None, None, None, None
        (d,) = ctx.dims
        keep = keepdim_shape(ctx.in_shape, ctx.dims)
        index = ops.reshape(ctx.indices, keep)
        dx = ops.scatter_add_(zeros(ctx.in_shape, grad), d, index, ops.reshape(grad, keep))
        return dx, None, None, None, None


def max_along_dim(x: Any, op: str, dim: int, keepdim: bool = False) -> tuple[Any, Any]:
    """torch's x.max(dim) (op "max") or x.min(dim) ("min"): the values (recorded in the
    graph when x requires a gradient) and the int64 indices, from one pass over x."""
    values, indices = ops.reduce_with_indices(op, x, dim, keepdim)
    if x._requires_grad and is_grad_enabled():
        return MaxAlongDim.apply(x, dim, keepdim, values, indices), indices
    return x._wrap(values), indices  # no node to record: what apply would return, without its calls
