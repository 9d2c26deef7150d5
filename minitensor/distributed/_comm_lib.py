"""_comm_lib: the ctypes binding of the distributed library (src/dist/minitensor_dist.h).

Kept apart from minitensor/_lib/ (the core binding) on purpose: the core
must load and work where MPI and NCCL are not installed, so this library is
a separate .so with its own handle, loaded only when
``minitensor.distributed.init_process_group`` runs. It is loaded
and checked with _lib's machinery (``_lib.load_library``,
``_lib.check_abi``, ``_lib.read_names``, ``_lib.raise_status``): a path next
to the core library (``MINITENSOR_DIST_LIB`` overrides it), every function
declared in ``SIGNATURES`` (tests/test_distributed.py checks them against
the header), the ABI version and the op table checked at load, a failed
status raised as an exception carrying ``mtd_last_error()``.

Which library: the one matching the core backend in use,
``build/libminitensor_dist_cuda.so`` (NCCL) for the CUDA build and
``build/libminitensor_dist_emu.so`` (MPI) for the emulator.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, c_char_p, c_double, c_int, c_size_t
from pathlib import Path
from typing import Any, Optional

from .. import _lib
from .._errors import MinitensorError

ABI_VERSION = 2
UNIQUE_ID_BYTES = 128
REDUCE_OPS: tuple[str, ...] = ("sum", "avg", "max")


class DistributedError(MinitensorError):
    """An MPI or NCCL call failed (MTD_ERR_COMM)."""


class DistributedTimeoutError(DistributedError, TimeoutError):
    """A collective did not finish in time: another rank failed or never called it (MTD_ERR_TIMEOUT)."""


# mtd_status: the core's mt_status values, and two of its own.
STATUS_ERRORS: dict[int, type[MinitensorError]] = {
    **_lib.STATUS_ERRORS,
    16: DistributedError,  # MTD_ERR_COMM
    17: DistributedTimeoutError,  # MTD_ERR_TIMEOUT
}

MtTensor = _lib.MtTensor

# Every function of src/dist/minitensor_dist.h: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mtd_abi_version": (c_int, []),
    "mtd_backend_name": (c_char_p, []),
    "mtd_op_name": (c_char_p, [c_int]),
    "mtd_op_count": (c_int, []),
    "mtd_unique_id_bytes": (c_int, []),
    "mtd_last_error": (c_char_p, []),
    "mtd_get_unique_id": (c_int, [c_char_p, c_size_t]),
    "mtd_init": (c_int, [c_int, c_int, c_int, c_char_p, c_size_t, c_double]),
    "mtd_get_rank": (c_int, [POINTER(c_int)]),
    "mtd_get_world_size": (c_int, [POINTER(c_int)]),
    "mtd_set_timeout": (c_int, [c_double]),
    "mtd_finalize": (c_int, []),
    "mtd_abort": (c_int, [c_int]),
    "mtd_all_reduce": (c_int, [MtTensor, c_int]),
    "mtd_broadcast": (c_int, [MtTensor, c_int]),
    "mtd_all_gather": (c_int, [MtTensor, MtTensor]),
    "mtd_reduce_scatter": (c_int, [MtTensor, MtTensor, c_int]),
    "mtd_barrier": (c_int, []),
    "mtd_all_reduce_start": (c_int, [MtTensor, c_int, POINTER(c_int)]),
    "mtd_work_wait": (c_int, [c_int]),
    "mtd_work_query": (c_int, [c_int, POINTER(c_int)]),
}

LIB_PATHS = {
    "cuda": _lib.BUILD_DIR / "libminitensor_dist_cuda.so",
    "emulator": _lib.BUILD_DIR / "libminitensor_dist_emu.so",
}

_DLIB: Optional[ctypes.CDLL] = None


def path_for(core_backend: str) -> Path:
    override = os.environ.get("MINITENSOR_DIST_LIB")
    return Path(override) if override else LIB_PATHS[core_backend]


def load() -> ctypes.CDLL:
    """The distributed library matching the core backend (loaded on first use)."""
    global _DLIB
    if _DLIB is not None:
        return _DLIB
    core = _lib.backend_name()  # loads the core first: the dist library links it
    path = path_for(core)
    if not path.is_file():
        hint = (
            "it needs OpenMPI: `bash tools/setup.sh mpi` (or apt-get install openmpi-bin libopenmpi-dev)"
            if core == "emulator"
            else "it needs nvcc and NCCL (nccl.h, libnccl)"
        )
        raise ImportError(
            f"minitensor.distributed: {path} is not built; run `make dist` in {_lib.REPO_ROOT} ({hint})"
        )
    # RTLD_GLOBAL: OpenMPI's plugins, which it dlopens, look up libmpi's symbols.
    dlib = _lib.load_library(path, SIGNATURES, "minitensor.distributed", mode=ctypes.RTLD_GLOBAL)
    _lib.check_abi("minitensor.distributed", path, dlib.mtd_abi_version(), ABI_VERSION, "make dist")
    names = _lib.read_names(dlib.mtd_op_name, dlib.mtd_op_count())
    if names != REDUCE_OPS:
        raise ImportError(f"minitensor.distributed: {path} has reduce ops {names}, expected {REDUCE_OPS}")
    _DLIB = dlib
    return dlib


def check(status: int, func: str) -> None:
    """Raises the exception for a failed status, with the library's message."""
    if status != _lib.MT_OK:
        _lib.raise_status(status, func, load().mtd_last_error(), STATUS_ERRORS, DistributedError)


def op_id(op: str) -> int:
    try:
        return REDUCE_OPS.index(op)
    except ValueError:
        raise ValueError(f"unknown reduce op {op!r}: use one of {', '.join(REDUCE_OPS)}") from None
