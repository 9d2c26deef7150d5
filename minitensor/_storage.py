"""Storage: one block of device memory shared by a tensor and its views.

A Storage owns the pointer it got from ``mt_malloc`` and gives it back with
``mt_free`` when the last tensor (or view) that uses it is garbage-collected.
The release is a ``weakref.finalize`` callback; at interpreter shutdown the
callbacks are skipped (``atexit = False``), because the process is about to
hand all its memory back anyway and the CUDA runtime may already be tearing
down.

An empty storage (0 bytes) allocates nothing and has address 0; the ops
never pass a tensor with no elements to the engine.
"""

from __future__ import annotations

import weakref

import numpy as np

from . import _lib


def _release(ptr: int) -> None:
    """Frees ptr; errors are swallowed because this runs inside the GC."""
    try:
        _lib.free(ptr)
    except Exception:  # noqa: BLE001 - a finalizer must never raise
        pass


class Storage:
    """nbytes of device memory, freed when no tensor refers to it any more."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.ptr = _lib.malloc(nbytes) if nbytes > 0 else 0
        if self.ptr:
            finalizer = weakref.finalize(self, _release, self.ptr)
            finalizer.atexit = False

    def upload(self, array: np.ndarray, byte_offset: int = 0) -> None:
        """Copies a C-contiguous host array into this storage at byte_offset."""
        if array.nbytes == 0:
            return
        assert byte_offset + array.nbytes <= self.nbytes
        _lib.memcpy_h2d(self.ptr + byte_offset, array)

    def download(self, out: np.ndarray, byte_offset: int = 0) -> None:
        """Fills a C-contiguous host array from this storage at byte_offset."""
        if out.nbytes == 0:
            return
        assert byte_offset + out.nbytes <= self.nbytes
        _lib.memcpy_d2h(out, self.ptr + byte_offset)

    def __repr__(self) -> str:
        return f"Storage(ptr={self.ptr:#x}, nbytes={self.nbytes})"
