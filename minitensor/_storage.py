"""Storage: one block of device memory shared by a tensor and its views.

A Storage owns the pointer it got from ``mt_malloc`` and gives it back with
``mt_free`` when the last tensor (or view) that uses it is garbage-collected.
The release is ``Storage.__del__`` (cheaper than a ``weakref.finalize``
object per allocation, which matters for small tensors). Once the interpreter
starts shutting down, an ``atexit`` hook sets ``Storage._shutting_down`` and
``__del__`` stops freeing: the process is about to hand all its memory back
anyway, the CUDA runtime may already be tearing down, and the module's
globals may already be gone (the flag is read through the instance's class,
which outlives them).

An empty storage (0 bytes) allocates nothing and has address 0; the ops
never pass a tensor with no elements to the engine.
"""

from __future__ import annotations

import atexit

import numpy as np

from . import _lib
from ._errors import ShapeError


class Storage:
    """nbytes of device memory, freed when no tensor refers to it any more."""

    # Set by _mark_shutdown (an atexit hook): from then on __del__ frees nothing.
    _shutting_down = False

    # The version counter of torch: every in-place write into this storage
    # (ops.fill_, copy_, scatter_add_, the in-place arithmetic) adds one, so
    # the tensor and all its views share it. Autograd notes it when it saves
    # a tensor for backward and refuses a backward that would read a saved
    # tensor changed since.
    version = 0
    stream_owner = None  # the foreign stream object it was allocated on, kept alive

    def __init__(self, nbytes: int) -> None:
        self.ptr = 0  # set first, so that __del__ works if malloc raises
        if not 0 <= nbytes < 2**63:
            # ctypes would wrap a size_t silently: never let such a count through.
            raise ShapeError(f"cannot allocate {nbytes} bytes: not a size in [0, 2**63)")
        self.nbytes = nbytes
        if nbytes > 0:
            self.ptr = _lib.malloc(nbytes)
            owner = _lib.stream_state.owner
            if owner is not None:
                # Allocated on another library's stream, freed on it later:
                # the stream must outlive this storage (CuPy destroys a
                # stream when its object goes).
                self.stream_owner = owner

    @classmethod
    def adopt(cls, ptr: int, nbytes: int) -> Storage:
        """A Storage owning nbytes at ptr, which the engine allocated already
        (mt_zip_new and mt_map_new allocate a result and compute it in one call)."""
        storage = cls.__new__(cls)
        storage.ptr = ptr
        storage.nbytes = nbytes
        owner = _lib.stream_state.owner
        if owner is not None:
            storage.stream_owner = owner  # as in __init__
        return storage

    def __del__(self) -> None:
        # The library's free, called directly (its status ignored: a finalizer
        # must never raise): every result of every op comes here.
        if self.ptr and not self._shutting_down:
            _lib.C.mt_free(self.ptr)

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


def _mark_shutdown() -> None:
    Storage._shutting_down = True


atexit.register(_mark_shutdown)
