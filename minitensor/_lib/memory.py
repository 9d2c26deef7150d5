"""Device memory: allocation, the table of known buffers and copies (src/memory.cu)."""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_int, c_int64, c_size_t, c_void_p
from typing import Any, Optional

import numpy as np

from .._errors import OutOfMemoryError
from .loader import MT_OK, declare, C, check

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_malloc": (c_int, [POINTER(c_void_p), c_size_t]),
    "mt_free": (c_int, [c_void_p]),
    "mt_memory_in_use": (c_int, [POINTER(c_int64)]),
    "mt_register_buffer": (c_int, [c_void_p, c_size_t]),
    "mt_grow_buffer": (c_int, [c_void_p, c_size_t]),
    "mt_unregister_buffer": (c_int, [c_void_p]),
    "mt_find_allocation": (c_int, [c_void_p, POINTER(c_void_p), POINTER(c_size_t)]),
    "mt_memcpy_h2d": (c_int, [c_void_p, c_void_p, c_size_t]),
    "mt_memcpy_d2h": (c_int, [c_void_p, c_void_p, c_size_t]),
    "mt_memcpy_d2d": (c_int, [c_void_p, c_void_p, c_size_t]),
}
declare(SIGNATURES)


# ---- memory -----------------------------------------------------------------


def malloc(nbytes: int) -> int:
    """Allocates nbytes of device memory; returns the address."""
    ptr = c_void_p()
    status = C.mt_malloc(ctypes.byref(ptr), nbytes)
    if status != MT_OK:
        check(status, "mt_malloc")
    if ptr.value is None:
        raise OutOfMemoryError(f"mt_malloc: returned a null pointer for {nbytes} bytes")
    return ptr.value


def free(ptr: int) -> None:
    check(C.mt_free(ptr), "mt_free")


def memory_in_use() -> int:
    nbytes = c_int64()
    check(C.mt_memory_in_use(ctypes.byref(nbytes)), "mt_memory_in_use")
    return nbytes.value


def register_buffer(ptr: int, nbytes: int) -> None:
    """Makes memory the library did not allocate known to it (mt_register_buffer)."""
    check(C.mt_register_buffer(ptr, nbytes), "mt_register_buffer")


def grow_buffer(ptr: int, nbytes: int) -> None:
    """Registers [ptr, ptr + nbytes) in place of the registered buffers inside it, in one step."""
    check(C.mt_grow_buffer(ptr, nbytes), "mt_grow_buffer")


def unregister_buffer(ptr: int) -> None:
    check(C.mt_unregister_buffer(ptr), "mt_unregister_buffer")


def find_allocation(ptr: int) -> Optional[tuple[int, int]]:
    """(start, nbytes) of the known buffer holding ptr, or None if there is none."""
    base, nbytes = c_void_p(), c_size_t()
    if C.mt_find_allocation(ptr, ctypes.byref(base), ctypes.byref(nbytes)) != MT_OK:
        return None
    return base.value or 0, nbytes.value


def memcpy_h2d(dst: int, src: np.ndarray) -> None:
    """Copies a C-contiguous host array to device address dst."""
    assert src.flags.c_contiguous
    check(C.mt_memcpy_h2d(dst, src.ctypes.data, src.nbytes), "mt_memcpy_h2d")


def memcpy_d2h(dst: np.ndarray, src: int) -> None:
    """Fills a C-contiguous host array from device address src."""
    assert dst.flags.c_contiguous and dst.flags.writeable
    check(C.mt_memcpy_d2h(dst.ctypes.data, src, dst.nbytes), "mt_memcpy_d2h")


def memcpy_d2d(dst: int, src: int, nbytes: int) -> None:
    check(C.mt_memcpy_d2d(dst, src, nbytes), "mt_memcpy_d2d")
