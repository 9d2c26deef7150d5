"""The two dtypes of minitensor, float32 and float64.

A ``DType`` is a small immutable object with a name, its size in bytes, the
code the C engine uses for it (``MT_FLOAT32`` / ``MT_FLOAT64`` in
src/minitensor.h) and the matching NumPy dtype. Wherever a dtype is accepted,
a NumPy dtype or a string ("float32", "float", "float64", "double") works too.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class DType:
    """A tensor element type, like ``torch.float32``."""

    def __init__(self, name: str, itemsize: int, code: int, np_dtype: np.dtype) -> None:
        self.name = name
        self.itemsize = itemsize
        self.code = code  # the mt_dtype value in src/minitensor.h
        self.np_dtype = np_dtype

    @property
    def is_floating_point(self) -> bool:
        """Always True: minitensor only has floating-point dtypes."""
        return True

    def __repr__(self) -> str:
        return f"minitensor.{self.name}"

    def __reduce__(self) -> str:
        # Pickle as a reference to the module-level object, so identity holds.
        return self.name


float32 = DType("float32", 4, 0, np.dtype(np.float32))
float64 = DType("float64", 8, 1, np.dtype(np.float64))

# Default dtype of new tensors, as in torch.
default_dtype = float32

_BY_NAME = {
    "float32": float32,
    "float": float32,
    "float64": float64,
    "double": float64,
}


def to_dtype(dtype: Any) -> DType:
    """Turns a DType, a NumPy dtype or a name into a minitensor DType.

    Raises TypeError for anything that is not float32 or float64.
    """
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        if dtype in _BY_NAME:
            return _BY_NAME[dtype]
        raise TypeError(f"unknown dtype {dtype!r}: minitensor supports float32 and float64")
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(
            f"expected a dtype (minitensor.float32 or minitensor.float64), got {dtype!r}"
        ) from None
    if np_dtype == np.float32:
        return float32
    if np_dtype == np.float64:
        return float64
    raise TypeError(f"unsupported dtype {np_dtype}: minitensor supports float32 and float64")


def promote(a: DType, b: DType) -> DType:
    """The result dtype of an op on a and b (NumPy promotion: float64 wins)."""
    if a is float64 or b is float64:
        return float64
    return float32
