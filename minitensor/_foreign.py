"""_foreign: Storage over memory that another library owns (zero-copy import).

A ``ForeignStorage`` does not allocate and never frees. It keeps the
producer (a torch tensor, a CuPy or NumPy array, or the DLPack record that
stands for it) alive as long as any minitensor view of it lives, and makes
the bytes the view can address known to the engine's table of buffers
(``mt_register_buffer``), so every kernel call checks its descriptors
against them exactly as it does for the library's own allocations.

The table refuses two registrations that overlap, but two imports of one
producer's memory overlap all the time (``x[:3]`` and ``x[1:]`` of one torch
tensor). So the registrations are counted here, per *region*: a region is
one registered range and the number of live imports inside it. An import
inside a region adds one user; one that overlaps a region (or several)
replaces them by one registration of their union (``mt_grow_buffer``, in one
step, so that an op on an overlapping import running in another thread never
finds its memory unknown); the last user of a region unregisters it. A
region only grows while it has users, which is safe: the ranges that overlap
lie in one allocation of the producer, and each user keeps its producer, and
so that allocation, alive.

Memory the engine already knows by itself (a NumPy view of a minitensor
tensor, imported back on the emulator) needs no registration: the producer
chain keeps that allocation alive.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from . import _lib
from ._storage import Storage


class _Region:
    """One registered range [lo, hi) and the number of imports that use it."""

    __slots__ = ("lo", "hi", "users")

    def __init__(self, lo: int, hi: int, users: int) -> None:
        self.lo, self.hi, self.users = lo, hi, users


_regions: list[_Region] = []
_lock = threading.Lock()


def _acquire(lo: int, hi: int) -> bool:
    """Makes [lo, hi) known to the engine; False when it already was by itself."""
    with _lock:
        hits = [r for r in _regions if r.lo < hi and lo < r.hi]
        if not hits:
            known = _lib.find_allocation(lo)
            if known is not None and known[0] <= lo and hi <= known[0] + known[1]:
                return False
            _lib.register_buffer(lo, hi - lo)
            _regions.append(_Region(lo, hi, 1))
            return True
        new_lo = min([lo] + [r.lo for r in hits])
        new_hi = max([hi] + [r.hi for r in hits])
        if len(hits) == 1 and (hits[0].lo, hits[0].hi) == (new_lo, new_hi):
            hits[0].users += 1
            return True
        _lib.grow_buffer(new_lo, new_hi - new_lo)  # replaces the hits' registrations at once
        for r in hits:
            _regions.remove(r)
        _regions.append(_Region(new_lo, new_hi, sum(r.users for r in hits) + 1))
        return True


def _release(lo: int) -> None:
    """One import inside the region holding lo is gone."""
    with _lock:
        for r in _regions:
            if r.lo <= lo < r.hi:
                r.users -= 1
                if r.users == 0:
                    _regions.remove(r)
                    _lib.unregister_buffer(r.lo)
                return


def registered_regions() -> list[tuple[int, int, int]]:
    """(start, nbytes, users) of every region registered for imports (for tests)."""
    with _lock:
        return sorted((r.lo, r.hi - r.lo, r.users) for r in _regions)


class ForeignStorage(Storage):
    """nbytes of another library's memory at ptr, lent to minitensor.

    owner is kept alive while this storage lives; release (e.g. a DLPack
    deleter) is called once when it dies. The range is registered with the
    engine for as long (see the module docstring).
    """

    def __init__(self, ptr: int, nbytes: int, owner: Any,
                 release: Optional[Callable[[], None]] = None) -> None:
        self.ptr = 0  # set first, so that __del__ works if the registration raises
        self.nbytes = 0
        self.owner = owner
        self._on_release = release
        self._registered = False
        if nbytes > 0:
            self._registered = _acquire(ptr, ptr + nbytes)
            self.ptr, self.nbytes = ptr, nbytes

    def __del__(self) -> None:
        if self._shutting_down:
            return
        try:
            if self._registered:
                _release(self.ptr)
            if self._on_release is not None:
                self._on_release()
        except Exception:  # noqa: BLE001 - a finalizer must never raise
            pass

    def __repr__(self) -> str:
        return f"ForeignStorage(ptr={self.ptr:#x}, nbytes={self.nbytes}, owner={type(self.owner).__name__})"
