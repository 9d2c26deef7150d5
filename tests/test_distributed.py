"""minitensor.distributed: collectives, DDP and failure handling across processes.

Each test starts a small job with the launcher,

    python -m minitensor.distributed.run --nproc N tests/dist_worker.py MODE

on the backend this machine runs (MPI between emulator processes in CI, NCCL
between GPUs on a machine with several), and checks its exit status and
output; the checks of the results run inside the ranks (tests/dist_worker.py).
The MPI tests need OpenMPI's mpirun; `make test` installs it
(tools/setup.sh mpi), so in CI they always run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minitensor.distributed import _comm_lib, run
from minitensor.distributed.sampler import DistributedSampler

REPO = Path(__file__).resolve().parent.parent
WORKER = REPO / "tests" / "dist_worker.py"
HEADER = REPO / "src" / "dist" / "minitensor_dist.h"

BACKEND = run.default_backend()


def _gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return len([line for line in out.stdout.splitlines() if line.startswith("GPU ")]) if out.returncode == 0 else 0


def _skip_reason(nproc: int) -> str | None:
    if BACKEND == "mpi":
        if shutil.which("mpirun") is None:
            return "needs OpenMPI's mpirun (bash tools/setup.sh mpi; `make test` installs it)"
        if not _comm_lib.LIB_PATHS["emulator"].is_file():
            return f"{_comm_lib.LIB_PATHS['emulator']} is not built (make dist)"
    elif _gpu_count() < nproc:
        return f"NCCL with {nproc} ranks needs {nproc} GPUs, this machine has {_gpu_count()}"
    return None


def launch(nproc: int, mode: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    reason = _skip_reason(nproc)
    if reason:
        pytest.skip(reason)
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "minitensor.distributed.run", "--nproc", str(nproc), "--backend", BACKEND,
         str(WORKER), mode],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )
    return result, time.monotonic() - start


def output(result: subprocess.CompletedProcess) -> str:
    return f"exit status {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


@pytest.mark.parametrize("nproc", [2, 3, 4])
def test_collectives(nproc):
    """all_reduce (sum/avg/max, and async_op=True with several Works in flight),
    broadcast, all_gather, reduce_scatter, barrier; float32 and float64; sizes
    0, 1, 7, 33, 5x13, 1025; a transposed view."""
    result, _ = launch(nproc, "collectives")
    assert result.returncode == 0, output(result)
    for r in range(nproc):
        assert f"rank {r}: collectives ok ({nproc} ranks)" in result.stdout, output(result)


@pytest.mark.parametrize("nproc", [2, 4])
def test_ddp_matches_one_process_on_the_whole_batch(nproc):
    """The demo MLP, 4 SGD steps: N ranks x 32 samples end with the weights of 1 x 32N;
    every gradient bucket was started from the gradient hooks, during backward."""
    result, _ = launch(nproc, "ddp")
    assert result.returncode == 0, output(result)
    assert f"rank 0: ddp ok ({nproc} ranks x 32 samples == 1 x {32 * nproc}" in result.stdout, output(result)


def test_a_rank_that_raises_fails_the_job_with_its_message():
    result, seconds = launch(2, "fail", timeout=60)
    assert result.returncode != 0, output(result)
    assert "ValueError: rank 1 fails on purpose" in result.stderr, output(result)
    assert "[rank 1 of 2] failed" in result.stderr, output(result)
    assert seconds < 30, f"the job took {seconds:.1f} s to fail\n{output(result)}"


def test_a_rank_that_dies_fails_the_job():
    result, seconds = launch(2, "exit", timeout=60)
    assert result.returncode != 0, output(result)
    assert seconds < 30, f"the job took {seconds:.1f} s to fail\n{output(result)}"


def test_a_collective_that_a_rank_never_joins_times_out():
    """Rank 1 sleeps; rank 0's all_reduce gives up after its 2 s timeout and the job fails."""
    result, seconds = launch(2, "timeout", timeout=60)
    assert result.returncode != 0, output(result)
    assert "DistributedTimeoutError" in result.stderr and "timed out after 2.0 s" in result.stderr, output(result)
    assert "(rank 0 of 2)" in result.stderr, output(result)
    assert seconds < 30, f"the job took {seconds:.1f} s to fail\n{output(result)}"


def test_binding_matches_the_header():
    """Every function of minitensor_dist.h is declared in _comm_lib.SIGNATURES and vice versa;
    the ABI version, unique-id size and reduce ops agree."""
    text = HEADER.read_text()
    declared = set(re.findall(r"^\s*(?:const\s+)?\w+\s*\*?\s*(mtd_\w+)\s*\(", text, re.MULTILINE))
    assert declared == set(_comm_lib.SIGNATURES), declared ^ set(_comm_lib.SIGNATURES)
    assert int(re.search(r"#define MTD_ABI_VERSION (\d+)", text).group(1)) == _comm_lib.ABI_VERSION
    assert int(re.search(r"#define MTD_UNIQUE_ID_BYTES (\d+)", text).group(1)) == _comm_lib.UNIQUE_ID_BYTES
    ops = re.search(r"MTD_SUM = 0,(.*?)MTD_OP_COUNT", text, re.DOTALL).group(1)
    assert re.findall(r"MTD_(\w+)", "MTD_SUM" + ops) == [o.upper() for o in _comm_lib.REDUCE_OPS]
    for code, name in ((16, "MTD_ERR_COMM"), (17, "MTD_ERR_TIMEOUT")):
        assert re.search(rf"#define {name} {code}\b", text)
        assert code in _comm_lib.STATUS_ERRORS


@pytest.mark.parametrize("n, world, drop_last", [(10, 3, False), (10, 3, True), (7, 2, False), (4, 4, False)])
def test_sampler_shards_are_disjoint_and_cover_the_data(n, world, drop_last):
    shards = [DistributedSampler(n, num_replicas=world, rank=r, seed=3, drop_last=drop_last) for r in range(world)]
    for s in shards:
        s.set_epoch(2)
    got = [s.indices() for s in shards]
    assert len({len(g) for g in got}) == 1 and all(len(g) == len(s) for g, s in zip(got, shards))
    flat = sorted(i for g in got for i in g)
    if drop_last:
        assert len(set(flat)) == len(flat) == (n // world) * world
    else:
        assert set(flat) == set(range(n))
    # the same epoch gives the same shuffle; another epoch another one
    again = DistributedSampler(n, num_replicas=world, rank=0, seed=3, drop_last=drop_last)
    again.set_epoch(2)
    assert list(again) == list(got[0])


def test_a_sigterm_to_the_launcher_ends_its_ranks(tmp_path):
    """The NCCL launcher (spawn; the script needs no NCCL) starts its ranks in sessions of
    their own; a SIGTERM to it (e.g. from `timeout`) must end them too."""
    import os
    import signal

    script = tmp_path / "sleeper.py"
    script.write_text("import os, sys, time\n"
                      "open(os.path.join(sys.argv[1], 'pid' + os.environ['RANK']), 'w').write(str(os.getpid()))\n"
                      "time.sleep(60)\n")
    launcher = subprocess.Popen([sys.executable, "-m", "minitensor.distributed.run", "--nproc", "2",
                                 "--backend", "nccl", str(script), str(tmp_path)], cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        while not all((tmp_path / f"pid{r}").is_file() for r in range(2)):
            assert time.monotonic() < deadline, "the ranks did not start"
            time.sleep(0.1)
        time.sleep(0.2)  # the pid files are written; the launcher is in its loop
        pids = [int((tmp_path / f"pid{r}").read_text()) for r in range(2)]
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=20) != 0
        for pid in pids:
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, signal.SIGKILL)
                raise AssertionError(f"rank pid {pid} outlived its launcher")
    finally:
        if launcher.poll() is None:
            launcher.kill()
