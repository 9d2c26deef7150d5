"""The four dtypes of minitensor: float32, float64, int64 and bool.

A ``DType`` is a small immutable object with a name, its size in bytes, the
code the C engine uses for it (``MT_FLOAT32``, ``MT_FLOAT64``, ``MT_INT64``,
``MT_BOOL`` in src/minitensor.h) and the matching NumPy dtype. Wherever a
dtype is accepted, a NumPy dtype or a string ("float32", "float", "float64",
"double", "int64", "long", "bool") works too.

Type promotion follows torch (docs/api.md has the table): the dtypes form
three categories, bool < integer < floating point. Two tensors give the
higher category, and within floats the wider one (int64 with float32 is
float32, as in torch; NumPy would say float64). A Python number only moves
a tensor up a category: an int with an int64 tensor stays int64, a float
with an int64 or bool tensor gives the default float dtype (float32).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np


class DType:
    """A tensor element type, like ``torch.float32``."""

    def __init__(self, name: str, itemsize: int, code: int, np_dtype: np.dtype, category: int) -> None:
        self.name = name
        self.itemsize = itemsize
        self.code = code  # the mt_dtype value in src/minitensor.h
        self.np_dtype = np_dtype
        self.category = category  # 0 bool, 1 integer, 2 floating point: promotion goes up
        # True for float32 and float64, the dtypes that can require gradients (a
        # field, not a property: every op asks, and a field costs no call).
        self.is_floating_point = category == 2

    def __repr__(self) -> str:
        return f"minitensor.{self.name}"

    def __reduce__(self) -> str:
        # Pickle as a reference to the module-level object, so identity holds.
        return "bool_" if self.name == "bool" else self.name


float32 = DType("float32", 4, 0, np.dtype(np.float32), 2)
float64 = DType("float64", 8, 1, np.dtype(np.float64), 2)
int64 = DType("int64", 8, 2, np.dtype(np.int64), 1)
bool_ = DType("bool", 1, 3, np.dtype(np.bool_), 0)  # `bool` in the package, as torch.bool

# Default dtype of new float tensors, as in torch.
default_dtype = float32

_BY_NAME = {
    "float32": float32,
    "float": float32,
    "float64": float64,
    "double": float64,
    "int64": int64,
    "long": int64,
    "bool": bool_,
}

_SUPPORTED = "float32, float64, int64 and bool"


def to_dtype(dtype: Any) -> DType:
    """Turns a DType, a NumPy dtype, Python's ``int``/``float``/``bool`` or a name
    into a minitensor DType. Raises TypeError for any other type."""
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        if dtype in _BY_NAME:
            return _BY_NAME[dtype]
        raise TypeError(f"unknown dtype {dtype!r}: minitensor supports {_SUPPORTED}")
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"expected a dtype (minitensor.float32, float64, int64 or bool), got {dtype!r}") from None
    for candidate in (float32, float64, int64, bool_):
        if np_dtype == candidate.np_dtype:
            return candidate
    raise TypeError(f"unsupported dtype {np_dtype}: minitensor supports {_SUPPORTED}")


def from_numpy_dtype(np_dtype: np.dtype) -> DType:
    """The dtype a tensor made from NumPy data of this dtype gets: its own where
    minitensor has it, int64 for the other integers, float64 for float16."""
    if np_dtype.kind == "b":
        return bool_
    if np_dtype.kind in "iu":
        return int64
    if np_dtype == np.float32:
        return float32
    return float64


def promote(a: DType, b: DType) -> DType:
    """The result dtype of an op on two tensors of dtypes a and b (torch's rule)."""
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    return float64  # two different floats


def scalar_category(value: Any) -> int:
    """The category of a Python or NumPy number: 0 bool, 1 integer, 2 float."""
    if isinstance(value, (bool, np.bool_)):
        return 0
    if isinstance(value, numbers.Integral):
        return 1
    return 2


def promote_scalar(dtype: DType, value: Any) -> DType:
    """The result dtype of an op on a tensor of dtype and a Python number: the
    tensor's, unless the number is of a higher category (then int64 or the
    default float dtype)."""
    category = scalar_category(value)
    if category <= dtype.category:
        return dtype
    return int64 if category == 1 else default_dtype
