"""The operators of Tensor that have no gradient: the comparisons (<, ==, ...),
&, |, ^, ~, // and %, and their named forms (bitwise_and, logical_or,
floor_divide, remainder, ...).

Their results are bool or int64 tensors (or floats, where // and % meet a
float tensor), which never require a gradient. Each is one zip (or map) of
the ops layer, kept apart from the differentiable methods of
minitensor/tensor.py, whose class Tensor inherits them from NoGradOps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _array, ops
from ._array import Array
from ._dtype import bool_, int64
from ._errors import DTypeError


class NoGradOps:
    """Tensor's operators without a gradient: a mixin of minitensor.Tensor, whose
    _wrap makes a Tensor of the Array an op returns."""

    def _compare(self, op: str, other: Any) -> Any:
        """self op other elementwise; NotImplemented for an operand that is no tensor,
        number, list, tuple or NumPy array (so that == with None or a string is False)."""
        if isinstance(other, (list, tuple, np.ndarray)):
            try:
                host = np.array(other, dtype=self._dtype.np_dtype, order="C")
            except (ValueError, TypeError) as e:
                raise TypeError(f"{op}(): cannot compare a tensor with {type(other).__name__} {other!r}: {e}") from None
            other = _array.empty(host.shape, self._dtype, f"{op}()")
            _array.upload(other, host)
        elif not (isinstance(other, Array) or ops.is_scalar(other)):
            return NotImplemented
        return self._wrap(ops.zip_(op, self, other))

    def _no_grad_zip(self, op: str, a: Any, b: Any) -> Any:
        """op(a, b) as a Tensor; NotImplemented for an operand that is no tensor
        or number."""
        for x in (a, b):
            if not (isinstance(x, Array) or ops.is_scalar(x)):
                return NotImplemented
        return self._wrap(ops.zip_(op, a, b))

    # Comparisons are elementwise against a tensor, a number, or a list or
    # NumPy array (converted with this tensor's dtype), in either order; the
    # result is a bool tensor, as torch's.

    def __lt__(self, other: Any) -> Any:
        return self._compare("lt", other)

    def __le__(self, other: Any) -> Any:
        return self._compare("le", other)

    def __gt__(self, other: Any) -> Any:
        return self._compare("gt", other)

    def __ge__(self, other: Any) -> Any:
        return self._compare("ge", other)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare("eq", other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare("ne", other)

    # Integer and mask operators.

    def __and__(self, other: Any) -> Any:
        return self._no_grad_zip("bitwise_and", self, other)

    def __or__(self, other: Any) -> Any:
        return self._no_grad_zip("bitwise_or", self, other)

    def __xor__(self, other: Any) -> Any:
        return self._no_grad_zip("bitwise_xor", self, other)

    __rand__ = __and__
    __ror__ = __or__
    __rxor__ = __xor__

    def __invert__(self) -> Any:
        """~x: logical not of a bool tensor, bitwise not (-x - 1) of an int64 one."""
        if self._dtype is bool_:
            return self._no_grad_zip("bitwise_xor", self, True)
        if self._dtype is int64:
            return self._wrap(ops.map_("add_scalar", ops.map_("neg", self), -1))
        raise DTypeError(f"~ (bitwise_not) is only defined for int64 and bool tensors, got {self._dtype.name}")

    def __floordiv__(self, other: Any) -> Any:
        return self._no_grad_zip("floor_divide", self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return self._no_grad_zip("floor_divide", other, self)

    def __mod__(self, other: Any) -> Any:
        return self._no_grad_zip("remainder", self, other)

    def __rmod__(self, other: Any) -> Any:
        return self._no_grad_zip("remainder", other, self)

    def floor_divide(self, other: Any) -> Any:
        """self // other: the quotient rounded toward -inf (as Python's //, and torch's
        floor_divide since 1.13). Integer division by zero raises ZeroDivisionError."""
        return self._no_grad_zip("floor_divide", self, other)

    def remainder(self, other: Any) -> Any:
        """self % other, with the sign of other (Python's %, torch.remainder)."""
        return self._no_grad_zip("remainder", self, other)

    def bitwise_and(self, other: Any) -> Any:
        """self & other, for int64 and bool tensors."""
        return self._no_grad_zip("bitwise_and", self, other)

    def bitwise_or(self, other: Any) -> Any:
        """self | other, for int64 and bool tensors."""
        return self._no_grad_zip("bitwise_or", self, other)

    def bitwise_xor(self, other: Any) -> Any:
        """self ^ other, for int64 and bool tensors."""
        return self._no_grad_zip("bitwise_xor", self, other)

    def bitwise_not(self) -> Any:
        """~self, for int64 and bool tensors."""
        return ~self

    def logical_and(self, other: Any) -> Any:
        """Both non-zero (a bool tensor)."""
        return _as_mask(self) & _as_mask(other)

    def logical_or(self, other: Any) -> Any:
        """Either non-zero (a bool tensor)."""
        return _as_mask(self) | _as_mask(other)

    def logical_xor(self, other: Any) -> Any:
        """Exactly one non-zero (a bool tensor)."""
        return _as_mask(self) ^ _as_mask(other)

    def logical_not(self) -> Any:
        """Zero (a bool tensor)."""
        return ~_as_mask(self)


def _as_mask(x: Any) -> Any:
    """x as a bool tensor (non-zero is True); a number as a bool."""
    if isinstance(x, NoGradOps):
        return x if x._dtype is bool_ else x != 0
    if ops.is_scalar(x):
        return bool(x)
    raise TypeError(f"expected a Tensor or a number, got {type(x).__name__}")
