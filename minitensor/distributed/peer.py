"""PeerGroup: one process, one kernel over several GPUs (docs/distributed.md).

The other multi-GPU path beside ``init_process_group`` (one process per GPU,
NCCL underneath): one process drives every GPU of a group, with peer access
enabled between each pair, and launches the same kernel on each of them;
every launch gets the pointers of every GPU's buffer, so the kernel on
GPU 0 reads and writes GPU 3's memory directly (over NVLink). On it, an
all-reduce ladder (src/dist/p2p_*.cu):

    import minitensor as mt
    from minitensor.distributed import PeerGroup

    with PeerGroup() as group:              # every device of the machine
        parts = [mt.randn(1000) for _ in range(group.world_size)]
        group.all_reduce(parts, rung="ring")  # parts[r] = sum of all parts, in place

Rungs: "naive" (each GPU reads every GPU's buffer and sums), "ring"
(reduce-scatter then all-gather, step by step with the left neighbour),
"oneshot" (naive's plan, wide loads: latency), "twoshot" (reduce 1/N from
everyone, then gather: bandwidth), "auto" (oneshot up to
``oneshot_max_bytes()``, twoshot above).

On the emulator, ``emulate_devices(4)`` (or MINITENSOR_EMU_DEVICES=4) gives
the process four emulated devices, whose kernels run together, so the
ladder runs and is tested without a GPU.
"""

from __future__ import annotations

import ctypes
from ctypes import c_float, c_int, c_void_p
from typing import Optional, Sequence

from .. import _lib, ops
from ..tensor import Tensor
from . import _p2p_lib

RUNGS = _p2p_lib.RUNGS


def device_count() -> int:
    """The devices this process can put in a group (emulated ones on the emulator)."""
    plib = _p2p_lib.load()
    count = c_int()
    _lib.check(plib.mtp_device_count(ctypes.byref(count)), "mtp_device_count")
    return count.value


def emulate_devices(count: int, peer_access: bool = True) -> None:
    """Emulator only: this process gets `count` emulated devices (1 to 64).

    ``peer_access=False`` makes every pair unable to reach each other, as
    two GPUs without NVLink or a PCIe peer path are, so that ``PeerGroup``
    refuses them. No group may be alive. On the CUDA build: an error.
    """
    plib = _p2p_lib.load()
    _lib.check(plib.mtp_emulate_devices(int(count), 1 if peer_access else 0), "mtp_emulate_devices")


def oneshot_max_bytes() -> int:
    """Buffer size up to which rung "auto" takes oneshot (above: twoshot)."""
    return int(_p2p_lib.load().mtp_oneshot_max_bytes())


class PeerGroup:
    """Devices of this process with peer access between every pair; rank r is devices[r].

    ``devices=None`` takes every device. Creating the group enables peer
    access (cudaDeviceEnablePeerAccess) for every ordered pair, and fails
    with a message naming the pair where that is impossible. Close it with
    ``close()`` or a ``with`` block.
    """

    def __init__(self, devices: Optional[Sequence[int]] = None) -> None:
        plib = _p2p_lib.load()
        if devices is None:
            devices = range(device_count())
        self.devices: tuple[int, ...] = tuple(int(d) for d in devices)
        if not 1 <= len(self.devices) <= _p2p_lib.MAX_DEVICES:
            raise ValueError(f"PeerGroup: {len(self.devices)} devices; a group has 1 to {_p2p_lib.MAX_DEVICES}")
        handle = c_void_p()
        ids = (c_int * len(self.devices))(*self.devices)
        _lib.check(plib.mtp_group_create(ids, len(self.devices), ctypes.byref(handle)), "mtp_group_create")
        self._handle: Optional[c_void_p] = handle

    @property
    def world_size(self) -> int:
        """Devices in the group."""
        return len(self.devices)

    def _live(self, func: str) -> c_void_p:
        if self._handle is None:
            raise RuntimeError(f"PeerGroup.{func}: the group is closed")
        return self._handle

    def all_reduce(self, tensors: Sequence[Tensor], rung: str = "auto") -> None:
        """tensors[r] (rank r's part) = the sum over every rank's part, in place.

        One float32 or float64 tensor per rank, all of one dtype and shape.
        Each is copied into its rank's device, reduced there by the rung's
        kernels (which read the other devices' memory directly), and copied
        back. A non-contiguous tensor goes through a contiguous copy.
        """
        handle = self._live("all_reduce")
        rung_id = _p2p_lib.rung_id(rung)
        tensors = list(tensors)
        if len(tensors) != self.world_size:
            raise ValueError(f"PeerGroup.all_reduce: {len(tensors)} tensors for a group of {self.world_size} "
                             f"devices (one per device)")
        for r, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"PeerGroup.all_reduce: tensors[{r}] must be a minitensor Tensor, "
                                f"got {type(t).__name__}")
            if not t.is_floating_point():
                raise TypeError(f"PeerGroup.all_reduce: tensors[{r}] has dtype {t.dtype.name}; the all-reduce "
                                f"takes float32 and float64 tensors")
            if t.dtype is not tensors[0].dtype or tuple(t.shape) != tuple(tensors[0].shape):
                raise ValueError(f"PeerGroup.all_reduce: tensors[{r}] is {t.dtype.name} {tuple(t.shape)}, "
                                 f"tensors[0] is {tensors[0].dtype.name} {tuple(tensors[0].shape)}")
        work = [t if t.is_contiguous() else ops.clone(t) for t in tensors]
        descs = (_lib.MtTensor * len(work))(*[w.descriptor() for w in work])
        _lib.check(_p2p_lib.load().mtp_all_reduce(handle, descs, len(work), rung_id), "mtp_all_reduce")
        for t, w in zip(tensors, work):
            if w is not t:
                ops.copy_(t, w)

    def bench(self, count: int, dtype: str = "float32", rung: str = "auto", warmup: int = 5,
              iters: int = 20) -> list[float]:
        """Milliseconds of each of `iters` all-reduces of `count` elements on the
        group's own buffers (no copies), after `warmup` untimed ones: CUDA
        events on every device around each call, the longest of them."""
        handle = self._live("bench")
        dtypes = {"float32": 0, "float64": 1}
        if dtype not in dtypes:
            raise ValueError(f"PeerGroup.bench: dtype {dtype!r}; one of float32, float64")
        ms = (c_float * max(int(iters), 1))()
        _lib.check(_p2p_lib.load().mtp_bench(handle, _p2p_lib.rung_id(rung), dtypes[dtype], int(count),
                                             int(warmup), int(iters), ms), "mtp_bench")
        return [float(ms[i]) for i in range(int(iters))]

    def close(self) -> None:
        """Frees the group's buffers and streams (peer access stays enabled)."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _lib.check(_p2p_lib.load().mtp_group_destroy(handle), "mtp_group_destroy")

    def __enter__(self) -> "PeerGroup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"PeerGroup(devices={list(self.devices)})"
