"""minitensor.distributed: data-parallel training, one process per device.

    # train.py, started with: python -m minitensor.distributed.run --nproc 2 train.py
    import minitensor as mt
    import minitensor.distributed as dist

    dist.init_process_group()            # NCCL on the CUDA build, MPI on the emulator
    model = dist.DistributedDataParallel(build_model())   # rank 0's weights everywhere
    for idx in dist.DistributedSampler(n_samples, batch_size=...):  # or shard by hand
        ...
        loss.backward()                  # gradients are averaged over ranks here
        optimizer.step()
    if dist.get_rank() == 0:
        print(...)                       # only rank 0 prints
    dist.destroy_process_group()

Backends (docs/distributed.md):
  - "mpi": the emulator build; OpenMPI between CPU processes, started by
    mpirun (the launcher calls it). Tensor memory is host memory.
  - "nccl": the CUDA build; NCCL between GPUs, each process on the GPU of its
    LOCAL_RANK. Rank 0 makes the NCCL unique id and hands it to the others
    over TCP at MASTER_ADDR:MASTER_PORT (the launcher sets them).

The collectives run in C (src/dist/comm.cu with comm_mpi.cu or comm_nccl.cu,
bound in _comm_lib.py). On NCCL they are queued on the current stream and
return at once, as torch's do; ``all_reduce(t, async_op=True)`` returns a
``Work`` to ``wait()`` on, the collective running meanwhile on a stream of
its own. Each must finish within a timeout (``timeout=`` or
MINITENSOR_DIST_TIMEOUT, seconds, default 300; NCCL: a watchdog thread
checks), so a dead rank makes the others fail with DistributedTimeoutError
instead of hanging.
An uncaught exception in a rank prints its traceback and aborts the whole
job (MPI_Abort / ncclCommAbort).

The other path, one process over several GPUs: ``PeerGroup`` (peer.py),
whose all-reduce kernels read the other GPUs' memory directly.
"""

from __future__ import annotations

from .collectives import (  # noqa: F401 - the package's API
    init_process_group,
    destroy_process_group,
    is_initialized,
    get_rank,
    get_world_size,
    get_local_rank,
    get_backend,
    all_reduce,
    broadcast,
    all_gather,
    reduce_scatter,
    barrier,
    set_timeout,
    DEFAULT_TIMEOUT_S,
    Work,
)
from ._comm_lib import DistributedError, DistributedTimeoutError
from .ddp import DistributedDataParallel
from .sampler import DistributedSampler
from .peer import PeerGroup, device_count, emulate_devices, oneshot_max_bytes

__all__ = [
    "init_process_group",
    "destroy_process_group",
    "is_initialized",
    "get_rank",
    "get_world_size",
    "get_local_rank",
    "get_backend",
    "all_reduce",
    "broadcast",
    "all_gather",
    "reduce_scatter",
    "barrier",
    "set_timeout",
    "Work",
    "DistributedDataParallel",
    "DistributedSampler",
    "DistributedError",
    "DistributedTimeoutError",
    "PeerGroup",
    "device_count",
    "emulate_devices",
    "oneshot_max_bytes",
]
