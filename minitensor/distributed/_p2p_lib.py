"""_p2p_lib: the ctypes binding of the p2p library (src/dist/minitensor_p2p.h).

A library of its own (``build/libminitensor_p2p_emu.so`` or
``build/libminitensor_p2p_cuda.so``, matching the core backend;
``MINITENSOR_P2P_LIB`` overrides the path), linked with the core and with
no MPI or NCCL, loaded on first use by ``minitensor.distributed.PeerGroup``.
It reports failures through the core's error state, so a failed status is
raised with the core's ``mt_last_error()`` message (``_lib.check``).
"""

from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, c_char_p, c_float, c_int, c_int64, c_void_p
from pathlib import Path
from typing import Any, Optional

from .. import _lib

ABI_VERSION = 1
MAX_DEVICES = 8
RUNGS: tuple[str, ...] = ("naive", "ring", "oneshot", "twoshot", "auto")

# Every function of src/dist/minitensor_p2p.h: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mtp_abi_version": (c_int, []),
    "mtp_rung_count": (c_int, []),
    "mtp_rung_name": (c_char_p, [c_int]),
    "mtp_oneshot_max_bytes": (c_int64, []),
    "mtp_device_count": (c_int, [POINTER(c_int)]),
    "mtp_emulate_devices": (c_int, [c_int, c_int]),
    "mtp_group_create": (c_int, [POINTER(c_int), c_int, POINTER(c_void_p)]),
    "mtp_group_destroy": (c_int, [c_void_p]),
    "mtp_all_reduce": (c_int, [c_void_p, POINTER(_lib.MtTensor), c_int, c_int]),
    "mtp_bench": (c_int, [c_void_p, c_int, c_int, c_int64, c_int, c_int, POINTER(c_float)]),
}

_PLIB: Optional[ctypes.CDLL] = None


def load() -> ctypes.CDLL:
    """The p2p library matching the core backend (loaded on first use)."""
    global _PLIB
    if _PLIB is None:
        _PLIB = _open(_lib.backend_name())  # loads the core first: the p2p library links it
    return _PLIB


def _open(core_backend: str) -> ctypes.CDLL:
    suffix = "emu" if core_backend == "emulator" else "cuda"
    path = Path(os.environ.get("MINITENSOR_P2P_LIB") or _lib.BUILD_DIR / f"libminitensor_p2p_{suffix}.so")
    if not path.is_file():
        raise ImportError(f"minitensor.distributed.PeerGroup: {path} is not built; run `make p2p` in {_lib.REPO_ROOT}")
    plib = _lib.load_library(path, SIGNATURES, "minitensor.distributed.PeerGroup")
    _lib.check_abi("minitensor.distributed.PeerGroup", path, plib.mtp_abi_version(), ABI_VERSION, "make p2p")
    names = _lib.read_names(plib.mtp_rung_name, plib.mtp_rung_count())
    if names != RUNGS:
        raise ImportError(f"minitensor.distributed.PeerGroup: {path} has rungs {names}, expected {RUNGS}")
    return plib


def rung_id(rung: str) -> int:
    try:
        return RUNGS.index(rung)
    except ValueError:
        raise ValueError(f"unknown all-reduce rung {rung!r}: use one of {', '.join(RUNGS)}") from None
