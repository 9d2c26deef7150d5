"""Fuzz of int64 and bool tensors through the elementwise ops and reductions,
against NumPy: random values, shapes that broadcast, strided views. Where
torch computes, minitensor must give NumPy's values in torch's dtype; where
torch refuses (a bool subtraction or negation, the mean of integers, float
kernels), minitensor must raise a DTypeError naming the dtype. Integer
division by zero is a ZeroDivisionError. Deterministic under CI=true
(tests/conftest.py); about a second (MINITENSOR_FUZZ_EXAMPLES=n for more)."""

from __future__ import annotations

import operator
import os
from typing import Any, Callable, Optional

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitensor as mt

REFUSED = "refused"  # torch raises: minitensor must raise a DTypeError
# op: (minitensor call, NumPy reference, result dtype for int64, for bool); a
# dtype of None: NumPy's values in the input's dtype is not asked for (only the values).
BINARY: dict[str, tuple[Callable, Callable, Any, Any]] = {
    "add": (operator.add, lambda a, b: a + b, mt.int64, mt.bool),
    "sub": (operator.sub, lambda a, b: a - b, mt.int64, REFUSED),
    "mul": (operator.mul, lambda a, b: a * b, mt.int64, mt.bool),
    "truediv": (operator.truediv, lambda a, b: np.float32(a) / np.float32(b), mt.float32, mt.float32),
    "floordiv": (operator.floordiv, lambda a, b: a // b, mt.int64, None),
    "mod": (operator.mod, lambda a, b: a % b, mt.int64, None),
    "maximum": (mt.maximum, np.maximum, mt.int64, mt.bool),
    "minimum": (mt.minimum, np.minimum, mt.int64, mt.bool),
    "and": (operator.and_, lambda a, b: a & b, mt.int64, mt.bool),
    "or": (operator.or_, lambda a, b: a | b, mt.int64, mt.bool),
    "xor": (operator.xor, lambda a, b: a ^ b, mt.int64, mt.bool),
    "eq": (operator.eq, lambda a, b: a == b, mt.bool, mt.bool),
    "lt": (operator.lt, lambda a, b: a < b, mt.bool, mt.bool),
    "ge": (operator.ge, lambda a, b: a >= b, mt.bool, mt.bool),
}
UNARY: dict[str, tuple[Callable, Callable, Any, Any]] = {
    "neg": (operator.neg, lambda a: -a, mt.int64, REFUSED),
    "abs": (lambda t: t.abs(), np.abs, mt.int64, None),
    "sign": (lambda t: t.sign(), lambda a: np.sign(a.astype(np.int64)), mt.int64, None),
    "exp": (lambda t: t.exp(), lambda a: np.exp(a.astype(np.float32)), mt.float32, mt.float32),
    "sqrt": (lambda t: t.sqrt(), lambda a: np.sqrt(a.astype(np.float32)), mt.float32, mt.float32),
    "relu": (lambda t: t.relu(), lambda a: np.maximum(a, 0), mt.int64, REFUSED),
    "invert": (operator.invert, lambda a: ~a, mt.int64, mt.bool),
    "sum": (lambda t: t.sum(), lambda a: a.sum(dtype=np.int64), mt.int64, mt.int64),
    "sum(0)": (lambda t: t.sum(0), lambda a: a.sum(0, dtype=np.int64), mt.int64, mt.int64),
    "prod(-1)": (lambda t: t.prod(-1), lambda a: a.prod(-1, dtype=np.int64), mt.int64, mt.int64),
    "max": (lambda t: t.max(), np.max, mt.int64, mt.bool),
    "min(0)": (lambda t: t.min(0).values, lambda a: a.min(0), mt.int64, mt.bool),
    "argmax(-1)": (lambda t: t.argmax(-1), lambda a: a.argmax(-1), mt.int64, None),
    "mean": (lambda t: t.mean(), None, REFUSED, REFUSED),
    "softmax": (lambda t: t.softmax(-1), None, REFUSED, REFUSED),
    "matmul": (lambda t: t.reshape(-1, 1) @ t.reshape(1, -1), None, REFUSED, REFUSED),
}


def values(draw: Any, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    flat = draw(st.lists(st.integers(-4, 4), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    a = np.array(flat, dtype=np.int64).reshape(shape)
    return a > 0 if dtype is mt.bool else a


def as_tensor(a: np.ndarray, strided: bool) -> mt.Tensor:
    """a as a contiguous tensor, or as a strided view (the transpose of a transposed copy)."""
    if strided and a.ndim >= 2:
        return mt.tensor(np.ascontiguousarray(a.swapaxes(0, 1))).transpose(0, 1)
    return mt.tensor(a)


def check(call: Callable, reference: Optional[Callable], want: Any, dtype: Any, args: list[np.ndarray],
          tensors: list[mt.Tensor]) -> None:
    """call(*tensors) against reference(*args): torch's dtype and NumPy's values, or the refusal."""
    if want is REFUSED:
        with pytest.raises(mt.DTypeError, match=dtype.name):
            call(*tensors)
        return
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ref = np.asarray(reference(*args))
    if any(np.any(a == 0) for a in args[1:]) and call in (operator.floordiv, operator.mod):
        with pytest.raises((ZeroDivisionError, mt.DTypeError)):  # torch: a RuntimeError "ZeroDivisionError"
            call(*tensors)
        return
    try:
        got = call(*tensors)
    except mt.DTypeError as e:  # torch's acceptance is not known for this pair: a clear refusal will do
        assert want is None and dtype.name in str(e)
        return
    if want is not None:
        assert got.dtype is want, f"{got.dtype} != {want}"
    if want is mt.float32:
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-6)
    else:
        np.testing.assert_array_equal(got.numpy().astype(np.float64), ref.astype(np.float64))


shapes = st.sampled_from([(3,), (2, 3), (3, 1), (1, 3), (2, 2, 3), (1,)])


@settings(max_examples=int(os.environ.get("MINITENSOR_FUZZ_EXAMPLES", "60")), deadline=None)
@given(data=st.data(), op=st.sampled_from(sorted(BINARY)), dtype=st.sampled_from([mt.int64, mt.bool]),
       strided=st.booleans(), a_shape=shapes, b_shape=shapes)
def test_binary_ops_on_int64_and_bool_as_numpy_in_torchs_dtype(data, op, dtype, strided, a_shape, b_shape) -> None:
    if not _broadcast(a_shape, b_shape):
        b_shape = a_shape
    a, b = values(data.draw, a_shape, dtype), values(data.draw, b_shape, dtype)
    call, reference, int_dtype, bool_dtype = BINARY[op]
    check(call, reference, int_dtype if dtype is mt.int64 else bool_dtype, dtype, [a, b],
          [as_tensor(a, strided), as_tensor(b, strided)])


@settings(max_examples=int(os.environ.get("MINITENSOR_FUZZ_EXAMPLES", "60")), deadline=None)
@given(data=st.data(), op=st.sampled_from(sorted(UNARY)), dtype=st.sampled_from([mt.int64, mt.bool]),
       strided=st.booleans(), shape=shapes)
def test_unary_ops_and_reductions_on_int64_and_bool_as_numpy_in_torchs_dtype(data, op, dtype, strided,
                                                                               shape) -> None:
    a = values(data.draw, shape, dtype)
    call, reference, int_dtype, bool_dtype = UNARY[op]
    check(call, reference, int_dtype if dtype is mt.int64 else bool_dtype, dtype, [a], [as_tensor(a, strided)])


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False
