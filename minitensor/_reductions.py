"""The reductions of Tensor: sum, mean, prod, max and min (with their indices
over an int dim, as torch's named pairs), amax, amin, argmax, argmin, all, any,
isclose, allclose, clamp, var, std, logsumexp, softmax and log_softmax.

Each differentiable method is one call to a gradient rule of minitensor/autograd/
(``Rule.apply``), as in minitensor/tensor.py, whose class Tensor inherits them
from ReductionOps; argmax and argmin have no gradient (int64 results), nor do
all, any and isclose (bool results).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Optional

from . import autograd, ops
from ._shape import dim_or_axis, normalize_dim
from .autograd import Variable


class ReductionOps:
    """Tensor's reductions: a mixin of minitensor.Tensor, whose _wrap makes a
    Tensor of the Array an op returns (its results are Tensors)."""

    def all(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """Whether every element (along dim) is non-zero (NaN counts as non-zero), as
        torch.all: a bool tensor; True over no elements."""
        with autograd.no_grad():
            return (self.detach() == 0).sum(dim_or_axis(dim, axis, "all()"), keepdim) == 0

    def any(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """Whether some element (along dim) is non-zero, as torch.any: a bool tensor;
        False over no elements."""
        with autograd.no_grad():
            return (self.detach() != 0).sum(dim_or_axis(dim, axis, "any()"), keepdim) > 0

    def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
        """Where |self - other| <= atol + rtol * |other| (other broadcast), as
        torch.isclose: equal infinities are close, NaN is close to NaN only with
        equal_nan. A bool tensor, as the comparisons give."""
        for name, value in (("rtol", rtol), ("atol", atol)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"isclose: {name} must be a number >= 0, got {value!r}")
        with autograd.no_grad():
            a = self.detach()
            b = other.detach() if isinstance(other, Variable) else other
            diff = (a - b).abs()
            tolerance = (b.abs() if isinstance(b, Variable) else abs(b)) * rtol + atol
            # An infinite difference is never within an (infinite) tolerance: an
            # infinity is close only to itself, which a == b finds (inf - inf is nan).
            close = (diff <= tolerance) & (diff != float("inf")) | (a == b)
            if equal_nan:
                close = close | (a != a) & ((b != b) if isinstance(b, Variable) else bool(b != b))
            return close

    def allclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
        """Whether every element of isclose holds, as torch.allclose (a bool)."""
        return bool(self.isclose(other, rtol, atol, equal_nan).all())

    def sum(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """Sum over dim (None: everything; an int or a tuple of ints; axis is another name for dim)."""
        return autograd.Sum.apply(self, dim_or_axis(dim, axis, "sum()"), keepdim)

    def mean(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """Mean over dim (None: everything; an int or a tuple of ints; or axis=)."""
        return autograd.Mean.apply(self, dim_or_axis(dim, axis, "mean()"), keepdim)

    def prod(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """Product over dim (None: everything; an int or a tuple of ints; or axis=)."""
        return autograd.Prod.apply(self, dim_or_axis(dim, axis, "prod()"), keepdim)

    def max(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """The maximum of every element (a tensor) or, as torch, over an int dim a named
        pair (values, indices), the indices int64. Over a tuple of dims:
        the values only (torch's amax)."""
        return _extremum(self, autograd.Max, "max", return_types.max,
                         dim if axis is None else dim_or_axis(dim, axis, "max()"), keepdim)

    def min(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """The minimum; like max(): a tensor, or (values, indices) over an int dim."""
        return _extremum(self, autograd.Min, "min", return_types.min,
                         dim if axis is None else dim_or_axis(dim, axis, "min()"), keepdim)

    def amax(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """The maximum over dim (None: everything; an int or a tuple; or axis=): values only."""
        return autograd.Max.apply(self, dim_or_axis(dim, axis, "amax()"), keepdim)

    def amin(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """The minimum over dim (None: everything; an int or a tuple; or axis=): values only."""
        return autograd.Min.apply(self, dim_or_axis(dim, axis, "amin()"), keepdim)

    def argmax(self, dim: Optional[int] = None, keepdim: bool = False, *, axis: Optional[int] = None) -> Any:
        """Index of the first maximum along dim (None: of the flattened tensor; or axis=), int64."""
        return self._wrap(ops.reduce_("argmax", self, dim_or_axis(dim, axis, "argmax()"), keepdim))

    def argmin(self, dim: Optional[int] = None, keepdim: bool = False, *, axis: Optional[int] = None) -> Any:
        """Index of the first minimum along dim (None: of the flattened tensor; or axis=), int64."""
        return self._wrap(ops.reduce_("argmin", self, dim_or_axis(dim, axis, "argmin()"), keepdim))

    def clamp(self, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - torch's names
        """Each element limited to [min, max] (numbers, or tensors that broadcast);
        NaN stays NaN; the gradient passes where min <= x <= max, as torch's."""
        if min is None and max is None:
            raise ValueError("clamp(): at least one of min and max must not be None")
        out = self
        if min is not None:
            out = autograd.Where.apply(out < min, min, out)
        if max is not None:
            out = autograd.Where.apply(out > max, max, out)
        return out

    clip = clamp

    def var(self, dim: Any = None, unbiased: Optional[bool] = None, keepdim: bool = False, *,
            correction: Optional[float] = None, axis: Any = None) -> Any:
        """The variance over dim: the sum of squared deviations from the mean over
        N - correction (correction 1 by default, Bessel's; ``unbiased=False`` is
        correction 0). N - correction <= 0 gives nan or inf, as torch."""
        if unbiased is not None and correction is not None:
            raise ValueError("var(): give unbiased or correction, not both")
        c = float(correction) if correction is not None else (0.0 if unbiased is False else 1.0)
        dim = dim_or_axis(dim, axis, "var()")
        dims = tuple(range(self.ndim)) if dim is None else dim
        count = 1
        for d in (dims if isinstance(dims, (tuple, list)) else (dims,)):
            count *= self.shape[normalize_dim(d, self.ndim, "var()")]
        centered = self - self.mean(dims, keepdim=True)
        total = (centered * centered).sum(dims, keepdim)
        if count - c > 0:
            return total * (1.0 / (count - c))
        return total / (total.detach() * 0.0)  # no terms left: 0/0 is nan, x/0 is inf, as torch

    def std(self, dim: Any = None, unbiased: Optional[bool] = None, keepdim: bool = False, *,
            correction: Optional[float] = None, axis: Any = None) -> Any:
        """The standard deviation over dim: the square root of var (same arguments)."""
        return self.var(dim_or_axis(dim, axis, "std()"), unbiased, keepdim, correction=correction).sqrt()

    def logsumexp(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """log(sum(exp(self))) over dim (or axis=), numerically stable."""
        return autograd.LogSumExp.apply(self, dim_or_axis(dim, axis, "logsumexp()", required=True), keepdim)

    def softmax(self, dim: Optional[int] = None, *, axis: Optional[int] = None) -> Any:
        """softmax along dim (or axis=), numerically stable."""
        return autograd.Softmax.apply(self, dim_or_axis(dim, axis, "softmax()", required=True))

    def log_softmax(self, dim: Optional[int] = None, *, axis: Optional[int] = None) -> Any:
        """log(softmax) along dim (or axis=), numerically stable."""
        return autograd.LogSoftmax.apply(self, dim_or_axis(dim, axis, "log_softmax()", required=True))


class return_types:  # noqa: N801 - torch's name (torch.return_types)
    """The named pairs that max and min over a dim return, as torch's."""

    max = namedtuple("max", ["values", "indices"])
    min = namedtuple("min", ["values", "indices"])


def _extremum(x: Any, rule: Any, op: str, pair: Any, dim: Any, keepdim: bool) -> Any:
    if dim is None or isinstance(dim, (tuple, list)):
        return rule.apply(x, dim, keepdim)
    values, indices = autograd.max_along_dim(x, op, dim, keepdim)  # one pass finds both
    return pair(values, x._wrap(indices))
