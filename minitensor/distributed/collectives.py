"""The process group of minitensor.distributed and its collectives: starting
and ending the group, rank and world size, all_reduce, broadcast, all_gather,
reduce_scatter, barrier (over _comm_lib.py's library)."""

from __future__ import annotations

import atexit
import ctypes
import os
import socket
import sys
import time
import traceback
from typing import Any, Callable, Optional, Sequence

from .. import _array, _lib, ops
from .._creation import empty
from .._shape import contiguous_strides
from ..tensor import Tensor
from . import _comm_lib
from ._comm_lib import DistributedTimeoutError

DEFAULT_TIMEOUT_S = 300.0

_state: dict[str, Any] = {}


def _env_int(names: Sequence[str], default: Optional[int]) -> Optional[int]:
    """The first of the environment variables names that is set, as an int."""
    for name in names:
        value = os.environ.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                raise ValueError(f"minitensor.distributed: {name}={value!r} is not an integer") from None
    return default


def _exchange_unique_id(rank: int, world: int, dlib: Any, timeout: float) -> bytes:
    """NCCL: rank 0 makes the unique id and serves it to the others over TCP."""
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = _env_int(["MASTER_PORT"], None)
    if rank == 0:
        buf = ctypes.create_string_buffer(_comm_lib.UNIQUE_ID_BYTES)
        _comm_lib.check(dlib.mtd_get_unique_id(buf, len(buf)), "mtd_get_unique_id")
        uid = buf.raw
        if world == 1:
            return uid
    if port is None:
        raise ValueError(
            "minitensor.distributed: the NCCL backend needs MASTER_PORT (and MASTER_ADDR, default "
            "127.0.0.1) for rank 0 to hand out its unique id; start the ranks with "
            "python -m minitensor.distributed.run"
        )
    deadline = time.monotonic() + timeout
    if rank == 0:
        with socket.create_server((addr, port), reuse_port=False) as server:
            server.settimeout(timeout)
            for _ in range(world - 1):
                try:
                    conn, _peer = server.accept()
                except socket.timeout:
                    raise DistributedTimeoutError(
                        f"init_process_group (rank 0 of {world}): not every rank connected to "
                        f"{addr}:{port} within {timeout:.0f} s"
                    ) from None
                with conn:
                    conn.sendall(uid)
        return uid
    while True:
        try:
            with socket.create_connection((addr, port), timeout=5) as conn:
                data = b""
                while len(data) < _comm_lib.UNIQUE_ID_BYTES:
                    chunk = conn.recv(_comm_lib.UNIQUE_ID_BYTES - len(data))
                    if not chunk:
                        break
                    data += chunk
                if len(data) == _comm_lib.UNIQUE_ID_BYTES:
                    return data
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise DistributedTimeoutError(
                f"init_process_group (rank {rank} of {world}): no unique id from rank 0 at "
                f"{addr}:{port} within {timeout:.0f} s"
            )
        time.sleep(0.1)


def _abort_on_uncaught(exc_type: Any, exc: Any, tb: Any) -> None:
    """sys.excepthook of a rank: print the traceback, then end the whole job."""
    rank = _state.get("rank", "?")
    world = _state.get("world", "?")
    sys.stderr.write(f"[rank {rank} of {world}] failed; aborting every rank:\n")
    traceback.print_exception(exc_type, exc, tb)
    sys.stderr.flush()
    sys.stdout.flush()
    dlib = _state.get("dlib")
    if dlib is not None and world != 1:
        dlib.mtd_abort(1)  # does not return
    _state.get("previous_hook", sys.__excepthook__)(exc_type, exc, tb)


def init_process_group(backend: Optional[str] = None, timeout: Optional[float] = None) -> None:
    """Joins this process to the job.

    Reads RANK, WORLD_SIZE and LOCAL_RANK (torchrun's names, set by
    minitensor.distributed.run), or OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK
    (set by mpirun). Without any, this is a job of one process. backend:
    "nccl" (CUDA build) or "mpi" (emulator build); None picks the one that
    matches the engine in use. timeout: seconds a collective may take
    (default MINITENSOR_DIST_TIMEOUT or 300).
    """
    if _state.get("initialised"):
        raise RuntimeError("init_process_group: already initialised (call destroy_process_group first)")
    rank = _env_int(["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"], None)
    world = _env_int(["WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"], None)
    local_rank = _env_int(["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"], None)
    if timeout is None:
        timeout = float(os.environ.get("MINITENSOR_DIST_TIMEOUT", DEFAULT_TIMEOUT_S))
    if timeout <= 0:
        raise ValueError(f"init_process_group: timeout must be > 0 seconds, got {timeout}")

    core = _lib.backend_name()
    expected = "nccl" if core == "cuda" else "mpi"
    backend = (backend or expected).lower()
    if backend not in ("nccl", "mpi"):
        raise ValueError(f"init_process_group: unknown backend {backend!r}: use 'nccl' or 'mpi'")
    if backend != expected:
        raise ValueError(
            f"init_process_group: backend {backend!r} does not go with the {core} engine: "
            f"use {expected!r} (NCCL on the CUDA build, MPI on the emulator build)"
        )

    if backend == "nccl":
        rank = 0 if rank is None else rank
        world = 1 if world is None else world
        local_rank = rank if local_rank is None else local_rank
        # Before any tensor exists: every allocation of this process goes to this GPU.
        _lib.set_device(local_rank)
        dlib = _comm_lib.load()
        uid = _exchange_unique_id(rank, world, dlib, timeout)
        _comm_lib.check(dlib.mtd_init(rank, world, local_rank, uid, len(uid), timeout), "mtd_init")
    else:
        dlib = _comm_lib.load()
        _comm_lib.check(
            dlib.mtd_init(-1 if rank is None else rank, -1 if world is None else world, local_rank or 0, None, 0,
                          timeout),
            "mtd_init",
        )
        r, w = ctypes.c_int(), ctypes.c_int()
        _comm_lib.check(dlib.mtd_get_rank(ctypes.byref(r)), "mtd_get_rank")
        _comm_lib.check(dlib.mtd_get_world_size(ctypes.byref(w)), "mtd_get_world_size")
        rank, world = r.value, w.value
        local_rank = 0 if local_rank is None else local_rank

    _state.update(initialised=True, rank=rank, world=world, local_rank=local_rank, backend=backend,
                  dlib=dlib, timeout=timeout)
    if "previous_hook" not in _state:
        _state["previous_hook"] = sys.excepthook
        sys.excepthook = _abort_on_uncaught
        atexit.register(_at_exit)


def _at_exit() -> None:
    if _state.get("initialised"):
        destroy_process_group()


def destroy_process_group() -> None:
    """Leaves the job (MPI_Finalize / ncclCommDestroy). Called at exit if not before."""
    if not _state.get("initialised"):
        return
    _state["initialised"] = False
    _comm_lib.check(_state["dlib"].mtd_finalize(), "mtd_finalize")


def is_initialized() -> bool:
    return bool(_state.get("initialised"))


def _require(func: str) -> Any:
    if not _state.get("initialised"):
        raise RuntimeError(f"{func}: call minitensor.distributed.init_process_group() first")
    return _state["dlib"]


def get_rank() -> int:
    """This process's rank, 0..world_size-1 (0 when not initialised, as a single process)."""
    return _state["rank"] if _state.get("initialised") else 0


def get_world_size() -> int:
    """The number of processes in the job (1 when not initialised)."""
    return _state["world"] if _state.get("initialised") else 1


def get_local_rank() -> int:
    """The rank within this machine: the GPU index on the CUDA build."""
    return _state["local_rank"] if _state.get("initialised") else 0


def get_backend() -> str:
    """'nccl' or 'mpi'."""
    _require("get_backend")
    return _state["backend"]


# ---- collectives ------------------------------------------------------------------


def _check_tensor(t: Any, func: str, name: str = "tensor") -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{func}: {name} must be a minitensor Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{func}: {name} has dtype {t.dtype.name}; the collectives take float32 and float64 "
                        f"tensors (convert with .float())")


def _in_place(t: Tensor, func: str, call: Any) -> None:
    """Runs call(contiguous tensor) on t; a non-contiguous t goes through a copy."""
    if t.is_contiguous():
        call(t)
        return
    buf = ops.clone(t)
    call(buf)
    ops.copy_(t, buf)


class Work:
    """A collective started with ``async_op=True`` (torch's ``Work``).

    ``wait()`` orders it before what comes next: on NCCL the current stream
    waits for it (on the device; the host does not block, as torch's NCCL
    work does), on MPI the call returns when it is done. Call it once; the
    tensor is kept alive until then.
    """

    def __init__(self, handle: int, tensor: Tensor, then: Optional[Callable[[], None]] = None) -> None:
        self._handle: Optional[int] = handle
        self._tensor: Optional[Tensor] = tensor
        self._then = then

    def wait(self) -> bool:
        """The collective's result is visible to the work queued after this call. Returns True."""
        if self._handle is None:
            return True
        handle, self._handle = self._handle, None
        _comm_lib.check(_require("Work.wait").mtd_work_wait(handle), "mtd_work_wait")
        if self._then is not None:
            self._then()
        self._tensor = self._then = None
        return True

    def is_completed(self) -> bool:
        """Whether the collective has finished (never blocks)."""
        if self._handle is None:
            return True
        done = ctypes.c_int()
        _comm_lib.check(_require("Work.is_completed").mtd_work_query(self._handle, ctypes.byref(done)),
                        "mtd_work_query")
        return bool(done.value)


def all_reduce(tensor: Tensor, op: str = "sum", async_op: bool = False) -> Optional[Work]:
    """tensor = op over every rank's tensor, in place; op is "sum", "avg" or "max".

    NCCL: queued on the current stream (later ops on it see the result; the
    host does not wait). async_op=True runs it on the library's own stream
    after what the current stream has queued, and returns a Work whose
    ``wait()`` joins it back: the collective overlaps the work queued in
    between. MPI (emulator): done when the call returns, or, with async_op,
    when ``wait()`` returns.
    """
    dlib = _require("all_reduce")
    _check_tensor(tensor, "all_reduce")
    op_id = _comm_lib.op_id(op)
    if async_op:
        buf = tensor if tensor.is_contiguous() else ops.clone(tensor)
        handle = ctypes.c_int()
        _comm_lib.check(dlib.mtd_all_reduce_start(buf.descriptor(), op_id, ctypes.byref(handle)),
                        "mtd_all_reduce_start")
        then = None if buf is tensor else (lambda: ops.copy_(tensor, buf))
        return Work(handle.value, buf, then)
    if tensor.is_contiguous():  # the common case: one call into C, nothing else
        _comm_lib.check(dlib.mtd_all_reduce(tensor.descriptor(), op_id), "mtd_all_reduce")
        return None
    _in_place(tensor, "all_reduce",
              lambda t: _comm_lib.check(dlib.mtd_all_reduce(t.descriptor(), op_id), "mtd_all_reduce"))
    return None


def broadcast(tensor: Tensor, src: int = 0) -> None:
    """tensor = rank src's tensor, on every rank, in place (any dtype: int64 and bool buffers too)."""
    dlib = _require("broadcast")
    if not isinstance(tensor, Tensor):
        raise TypeError(f"broadcast: tensor must be a minitensor Tensor, got {type(tensor).__name__}")
    _in_place(tensor, "broadcast",
              lambda t: _comm_lib.check(dlib.mtd_broadcast(t.descriptor(), int(src)), "mtd_broadcast"))


def all_gather(out: Any, tensor: Tensor) -> None:
    """Gathers every rank's tensor.

    out is either a list of world_size tensors (torch's form: out[r] gets
    rank r's tensor) or one tensor of world_size * tensor.numel() elements
    (e.g. shape (world_size, *tensor.shape)), filled rank after rank.
    """
    dlib = _require("all_gather")
    _check_tensor(tensor, "all_gather")
    world = get_world_size()
    src = ops.contiguous(tensor)
    n = tensor.numel()
    if isinstance(out, (list, tuple)):
        if len(out) != world:
            raise ValueError(f"all_gather: the output list has {len(out)} tensors, expected world_size {world}")
        flat = empty(world * n, dtype=tensor.dtype)
        _comm_lib.check(dlib.mtd_all_gather(flat.descriptor(), src.descriptor()), "mtd_all_gather")
        for r, o in enumerate(out):
            _check_tensor(o, "all_gather", f"out[{r}]")
            if o.numel() != n:
                raise ValueError(f"all_gather: out[{r}] has {o.numel()} elements, expected {n}")
            if n:
                ops.copy_(o, _flat_slice(flat, r * n, o.shape))
        return
    _check_tensor(out, "all_gather", "out")
    if out.dtype is not tensor.dtype:
        raise TypeError(f"all_gather: out is {out.dtype}, tensor is {tensor.dtype}")
    _in_place(out, "all_gather",
              lambda o: _comm_lib.check(dlib.mtd_all_gather(o.descriptor(), src.descriptor()), "mtd_all_gather"))


def reduce_scatter(out: Tensor, inputs: Any, op: str = "sum") -> None:
    """out = op over ranks of this rank's chunk of inputs.

    inputs is a list of world_size tensors shaped like out (torch's form:
    rank r keeps the reduction of everyone's inputs[r]) or one tensor of
    world_size * out.numel() elements (rank r keeps chunk r).
    """
    dlib = _require("reduce_scatter")
    _check_tensor(out, "reduce_scatter", "out")
    op_id = _comm_lib.op_id(op)
    world = get_world_size()
    n = out.numel()
    if isinstance(inputs, (list, tuple)):
        if len(inputs) != world:
            raise ValueError(f"reduce_scatter: {len(inputs)} inputs, expected world_size {world}")
        flat = empty(world * n, dtype=out.dtype)
        for r, x in enumerate(inputs):
            _check_tensor(x, "reduce_scatter", f"inputs[{r}]")
            if x.numel() != n:
                raise ValueError(f"reduce_scatter: inputs[{r}] has {x.numel()} elements, expected {n}")
            if n:
                ops.copy_(_flat_slice(flat, r * n, x.shape), x)
    else:
        _check_tensor(inputs, "reduce_scatter", "inputs")
        flat = ops.contiguous(inputs)
    if flat.dtype is not out.dtype:
        raise TypeError(f"reduce_scatter: out is {out.dtype}, inputs are {flat.dtype}")
    _in_place(out, "reduce_scatter",
              lambda o: _comm_lib.check(dlib.mtd_reduce_scatter(o.descriptor(), flat.descriptor(), op_id),
                                        "mtd_reduce_scatter"))


def set_timeout(seconds: float) -> None:
    """Seconds each later collective may take before it fails with DistributedTimeoutError."""
    dlib = _require("set_timeout")
    _comm_lib.check(dlib.mtd_set_timeout(float(seconds)), "mtd_set_timeout")
    _state["timeout"] = float(seconds)


def barrier() -> None:
    """Returns (on the host) when every rank has called barrier() and the
    collectives queued before it have finished."""
    dlib = _require("barrier")
    _comm_lib.check(dlib.mtd_barrier(), "mtd_barrier")


def _flat_slice(flat: Tensor, start: int, shape: Sequence[int]) -> Tensor:
    """A contiguous view of shape over flat's elements from start on."""
    shape = tuple(shape)
    view = _array.alias(flat, shape, contiguous_strides(shape), flat.storage_offset() + start)
    return Tensor._from_array(view)
