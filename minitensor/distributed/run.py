"""Start N ranks of a script: python -m minitensor.distributed.run --nproc N script.py [args...]

    python -m minitensor.distributed.run --nproc 2 examples/train_digits_ddp.py --epochs 3

Backend (--backend, default: what this machine runs):
  mpi   the emulator build; runs `mpirun -n N --oversubscribe --bind-to none`
        (+ --allow-run-as-root as root) from OpenMPI, which sets the
        OMPI_COMM_WORLD_* variables init_process_group reads. mpirun kills
        every rank when one fails.
  nccl  the CUDA build, one process per GPU: this launcher starts N
        processes itself with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1
        and a free MASTER_PORT (rank 0 hands the NCCL unique id to the others
        there). When one rank exits non-zero it terminates the others (so does
        a SIGTERM to the launcher).
The default is nccl when build/libminitensor_dist_cuda.so exists, a GPU is
visible (nvidia-smi -L) and MINITENSOR_BACKEND is not "emulator"; else mpi.
--timeout S sets MINITENSOR_DIST_TIMEOUT (seconds a collective may take).
The exit status is 0 when every rank succeeded, else the first failure's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

BUILD_DIR = Path(__file__).resolve().parent.parent.parent / "build"


def default_backend() -> str:
    forced = os.environ.get("MINITENSOR_BACKEND", "").strip().lower()
    if forced == "emulator":
        return "mpi"
    if not (BUILD_DIR / "libminitensor_dist_cuda.so").is_file():
        return "mpi"
    if forced == "cuda":
        return "nccl"
    try:
        ok = subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return "nccl" if ok else "mpi"


def mpirun_command(nproc: int, argv: list[str]) -> list[str]:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise SystemExit(
            "minitensor.distributed.run: mpirun not found. Install OpenMPI: "
            "`sudo apt-get install openmpi-bin libopenmpi-dev` (or `bash tools/setup.sh mpi`)"
        )
    cmd = [mpirun, "-n", str(nproc), "--oversubscribe", "--bind-to", "none"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    # Shared memory between ranks without ptrace-based single copy, which
    # containers often forbid.
    cmd += ["--mca", "btl_vader_single_copy_mechanism", "none"]
    return cmd + [sys.executable] + argv


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def spawn(nproc: int, argv: list[str]) -> int:
    """Starts nproc ranks; returns 0, or the first failing rank's status after killing the rest."""
    port = free_port()
    procs = []
    for rank in range(nproc):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.setdefault("NCCL_NVLS_ENABLE", "0")
        procs.append(subprocess.Popen([sys.executable] + argv, env=env, start_new_session=True))
    failed = None
    # Ended from outside (`timeout`, a job scheduler): take the ranks along.
    # They run in sessions of their own, so nothing else would stop them.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        while True:
            codes = [p.poll() for p in procs]
            for rank, code in enumerate(codes):
                if code not in (None, 0) and failed is None:
                    failed = (rank, code)
            if failed is not None or all(c == 0 for c in codes):
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        failed = (-1, 130)
    if failed is None:
        return 0
    rank, code = failed
    if rank >= 0:
        print(f"minitensor.distributed.run: rank {rank} exited with status {code}; stopping the other ranks",
              file=sys.stderr)
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return code if code > 0 else 1


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minitensor.distributed.run",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", "--nproc-per-node", "-n", type=int, required=True, dest="nproc",
                        help="number of ranks (processes) to start")
    parser.add_argument("--backend", choices=("mpi", "nccl"), default=None)
    parser.add_argument("--timeout", type=float, default=None, help="seconds a collective may take")
    parser.add_argument("script", help="the Python script every rank runs")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(args)
    if ns.nproc < 1:
        parser.error("--nproc must be at least 1")
    if ns.timeout is not None:
        os.environ["MINITENSOR_DIST_TIMEOUT"] = str(ns.timeout)
    backend = ns.backend or default_backend()
    argv = [ns.script] + ns.script_args
    if backend == "mpi":
        os.environ.setdefault("MINITENSOR_BACKEND", "emulator")
        # mpirun prints its own report and exits non-zero when a rank fails.
        return subprocess.call(mpirun_command(ns.nproc, argv))
    return spawn(ns.nproc, argv)


if __name__ == "__main__":
    sys.exit(main())
