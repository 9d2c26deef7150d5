"""The arithmetic of Tensor: the operators +, -, *, /, **, @ (and their reflected
and unary forms), their named methods (add, mul, exp, relu, ...), masked_fill and
nonzero.

Each differentiable method is one call to a gradient rule of minitensor/autograd/
(``Rule.apply``), as in minitensor/tensor.py, whose class Tensor inherits them
from ArithmeticOps; sign has no gradient, and nonzero reads the tensor back to
the host. The operators without a gradient (comparisons, &, |, //, ...) are in
_nograd_ops.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _array, autograd, ops
from ._array import Array
from ._dtype import bool_, to_dtype
from ._errors import DTypeError, ShapeError
from ._shape import dim_or_axis
from .autograd import Variable

_NUMBERS = (int, float)  # the operands, beside Tensors, of the arithmetic operators' short road


class ArithmeticOps:
    """Tensor's arithmetic: a mixin of minitensor.Tensor, whose _wrap makes a
    Tensor of the Array an op returns (its results are Tensors)."""

    def __neg__(self) -> Any:
        return autograd.Neg.apply(self)

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        return autograd.Abs.apply(self)

    # The arithmetic operators' short road: where no operand requires a gradient
    # (a Tensor that does not, or a Python number), no node is recorded, so the
    # op runs without Function.apply's work (0.9 us of a + b's host time). The
    # condition is written out in each: a helper's call costs what it saves.

    def __add__(self, other: Any) -> Any:
        if not self._requires_grad and (type(other) in _NUMBERS or isinstance(other, ArithmeticOps) and not other._requires_grad):
            return self._wrap(ops.add(self, other))
        return autograd.Add.apply(self, other)

    def __radd__(self, other: Any) -> Any:
        if not self._requires_grad and (type(other) in _NUMBERS or isinstance(other, ArithmeticOps) and not other._requires_grad):
            return self._wrap(ops.add(other, self))
        return autograd.Add.apply(other, self)

    def __sub__(self, other: Any) -> Any:
        if not self._requires_grad and (type(other) in _NUMBERS or isinstance(other, ArithmeticOps) and not other._requires_grad):
            return self._wrap(ops.sub(self, other))
        return autograd.Sub.apply(self, other)

    def __rsub__(self, other: Any) -> Any:
        if not self._requires_grad and (type(other) in _NUMBERS or isinstance(other, ArithmeticOps) and not other._requires_grad):
            return self._wrap(ops.sub(other, self))
        return autograd.Sub.apply(other, self)

    def __mul__(self, other: Any) -> Any:
        if not self._requires_grad and (type(other) in _NUMBERS or isinstance(other, ArithmeticOps) and not other._requires_grad):
            return self._wrap(ops.mul(self, other))
        return autograd.Mul.apply(self, other)

    def __rmul__(self, other: Any) -> Any:
        if not self._requires_grad and (type(other) in _NUMBERS or isinstance(other, ArithmeticOps) and not other._requires_grad):
            return self._wrap(ops.mul(other, self))
        return autograd.Mul.apply(other, self)

    def __truediv__(self, other: Any) -> Any:
        if not self._requires_grad and (type(other) in _NUMBERS or isinstance(other, ArithmeticOps) and not other._requires_grad):
            return self._wrap(ops.div(self, other))
        return autograd.Div.apply(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        if not self._requires_grad and (type(other) in _NUMBERS or isinstance(other, ArithmeticOps) and not other._requires_grad):
            return self._wrap(ops.div(other, self))
        return autograd.Div.apply(other, self)

    def __pow__(self, other: Any) -> Any:
        return autograd.Pow.apply(self, other)

    def __rpow__(self, other: Any) -> Any:
        return autograd.Pow.apply(other, self)

    def __matmul__(self, other: Any) -> Any:
        return autograd.MatMul.apply(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return autograd.MatMul.apply(other, self)

    def masked_fill(self, mask: Any, value: Any) -> Any:
        """A copy with value where mask (a bool tensor broadcast to self's shape) is True."""
        _check_mask(mask, "masked_fill()")
        if isinstance(value, Variable) and value.ndim > 0:
            raise ShapeError(f"masked_fill(): value must be a number or a 0-d tensor, got shape {value.shape}")
        if isinstance(value, Variable):
            value = value.to(self._dtype)
        out = autograd.Where.apply(mask, value, self)
        if out.shape != self._shape:
            raise ShapeError(f"masked_fill(): the mask of shape {mask.shape} does not broadcast to the "
                             f"tensor's shape {self._shape}")
        return out if out._dtype is self._dtype else out.to(self._dtype)

    def masked_fill_(self, mask: Any, value: Any) -> Any:
        """Sets self to value where mask is True, in place."""
        return self.copy_(self.masked_fill(mask, value))

    def nonzero(self, as_tuple: bool = False) -> Any:
        """The indices of the non-zero elements: an (n, ndim) int64 tensor, row-major
        order, or with as_tuple one int64 tensor per dim. Reads the tensor back to the
        host (its size depends on the values), as torch's does."""
        host = self.numpy()
        found = np.nonzero(host.reshape(1) if self.ndim == 0 else host)
        if as_tuple:
            return tuple(self._wrap(_host_array(f.astype(np.int64))) for f in found)
        if self.ndim == 0:  # torch: (1, 0) for a non-zero scalar, (0, 0) for zero
            return self._wrap(_host_array(np.zeros((len(found[0]), 0), dtype=np.int64)))
        return self._wrap(_host_array(np.stack(found, axis=1).astype(np.int64)))

    def count_nonzero(self, dim: Any = None, *, axis: Any = None) -> Any:
        """How many elements (along dim; axis is another name for it) are non-zero, as int64."""
        with autograd.no_grad():
            return (self.detach() != 0).sum(dim_or_axis(dim, axis, "count_nonzero()"))

    def add(self, other: Any) -> Any:
        """self + other."""
        return autograd.Add.apply(self, other)

    def sub(self, other: Any) -> Any:
        """self - other."""
        return autograd.Sub.apply(self, other)

    def mul(self, other: Any) -> Any:
        """self * other."""
        return autograd.Mul.apply(self, other)

    def div(self, other: Any) -> Any:
        """self / other."""
        return autograd.Div.apply(self, other)

    def pow(self, exponent: Any) -> Any:
        """self ** exponent."""
        return autograd.Pow.apply(self, exponent)

    def maximum(self, other: Any) -> Any:
        """Elementwise maximum."""
        return autograd.Maximum.apply(self, other)

    def minimum(self, other: Any) -> Any:
        """Elementwise minimum."""
        return autograd.Minimum.apply(self, other)

    def neg(self) -> Any:
        """-self."""
        return autograd.Neg.apply(self)

    def exp(self) -> Any:
        """e ** self, elementwise."""
        return autograd.Exp.apply(self)

    def log(self) -> Any:
        """Natural logarithm, elementwise."""
        return autograd.Log.apply(self)

    def relu(self) -> Any:
        """max(self, 0), elementwise."""
        return autograd.Relu.apply(self)

    def sigmoid(self) -> Any:
        """1 / (1 + exp(-self)), elementwise."""
        return autograd.Sigmoid.apply(self)

    def tanh(self) -> Any:
        """Hyperbolic tangent, elementwise."""
        return autograd.Tanh.apply(self)

    def erf(self) -> Any:
        """The error function, elementwise."""
        return autograd.Erf.apply(self)

    def abs(self) -> Any:
        """|self|, elementwise."""
        return autograd.Abs.apply(self)

    def sqrt(self) -> Any:
        """Square root, elementwise."""
        return autograd.Sqrt.apply(self)

    def reciprocal(self) -> Any:
        """1 / self, elementwise."""
        return autograd.Reciprocal.apply(self)

    def sign(self) -> Any:
        """-1, 0 or 1, elementwise."""
        return self._wrap(ops.map_("sign", self))


def _check_mask(mask: Any, func: str) -> None:
    if not isinstance(mask, Variable) or mask._dtype is not bool_:
        what = mask._dtype.name if isinstance(mask, Variable) else type(mask).__name__
        raise DTypeError(f"{func}: the mask must be a bool tensor, got {what}")


def _host_array(host: np.ndarray) -> Array:
    """A new Array holding a copy of a host array (of one of minitensor's dtypes)."""
    host = np.ascontiguousarray(host)
    out = _array.empty(tuple(host.shape), to_dtype(host.dtype))
    if host.size:
        _array.upload(out, host)
    return out
