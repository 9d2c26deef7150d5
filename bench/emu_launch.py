#!/usr/bin/env python3
"""bench/emu_launch.py: what launches cost in the CPU emulator, before and after.

    make bench-emu                                       # this build only
    .venv/bin/python bench/emu_launch.py --compare OLD   # OLD: another build folder

Runs, for each build folder (``build`` and the one given to ``--compare``,
each holding ``libminitensor_emu.so`` and ``bench/emu_launch`` and
``bench/emu_barrier_cost`` made by ``make bench-emu``), in turns so that both
see the same load on a shared machine:

- ``bench/emu_launch``: one launch of 1024 threads with no barrier, 64 such
  blocks, a tree reduction (256 blocks of 256 threads, 9 barriers each), a
  warp-shuffle reduction;
- ``bench/emu_barrier_cost``: the cost of one ``__syncthreads()`` per thread;
- the public API in a Python process of its own (``MINITENSOR_LIB`` picks the
  library): the tiled matmul 256 x 256 x 256, the reduction ladder's
  ``sequential`` and ``warp_shuffle`` rungs, and a small op (``a + 1`` on 16
  floats).

Every number is a median: over many launches inside a run, then over the
runs (``--runs``), in CPU time: one OS thread runs blocks
(``MINITENSOR_EMU_THREADS=1``), and on a shared machine wall time would
mostly measure the other jobs. The emulator is for correctness;
these numbers say how long test suites take, never how fast a GPU is.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


def _median_us(repeats: int, call: Callable[[], object]) -> float:
    """Median CPU time of call() in microseconds, after one warm-up call.

    CPU time of the process, which runs every block on its own thread with
    MINITENSOR_EMU_THREADS=1: on a shared machine wall time would mostly
    measure the other jobs.
    """
    call()
    times = []
    for _ in range(repeats):
        start = time.process_time()
        call()
        times.append((time.process_time() - start) * 1e6)
    return statistics.median(times)


def python_cases() -> None:
    """Times the public-API cases in this process; prints 'name microseconds' lines."""
    sys.path.insert(0, str(ROOT))
    import minitensor as mt

    a, b = mt.randn(256, 256), mt.randn(256, 256)
    c = mt.kernels.matmul(a, b, algo="tiled")
    print(f"py_matmul_tiled_256 {_median_us(5, lambda: mt.kernels.matmul(a, b, algo='tiled', out=c)):.1f}")
    x = mt.randn(256, 4096)
    for algo in ("sequential", "warp_shuffle"):
        s = mt.kernels.reduce(x, "sum", dim=1, algo=algo)
        us = _median_us(5, lambda: mt.kernels.reduce(x, "sum", dim=1, algo=algo, out=s))
        print(f"py_reduce_{algo}_256x4096 {us:.1f}")
    small = mt.ones(16)
    print(f"py_small_op_add_16 {_median_us(301, lambda: small + 1):.1f}")


def _parse(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return out


def _barrier_costs(text: str) -> dict[str, float]:
    """'ns per __syncthreads()' per block size, from emu_barrier_cost's table."""
    out = {}
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) == 4:
            out[f"barrier_ns_block_{parts[0]}"] = float(parts[3])
    return out


def _run(cmd: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"emu_launch.py: {' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def one_run(build: Path) -> dict[str, float]:
    """Every case once against the library in `build`."""
    env = dict(os.environ, MINITENSOR_EMU_THREADS="1", MINITENSOR_BACKEND="emulator",
               MINITENSOR_LIB=str(build / "libminitensor_emu.so"))
    results = _parse(_run([str(build / "bench" / "emu_launch")], env))
    results.update(_barrier_costs(_run([str(build / "bench" / "emu_barrier_cost")], env)))
    results.update(_parse(_run([sys.executable, str(Path(__file__).resolve()), "--child"], env)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compare", type=Path, help="another build folder, run in turns with this one")
    parser.add_argument("--build", type=Path, default=ROOT / "build", help="this build folder")
    parser.add_argument("--runs", type=int, default=5, help="runs of every case per build (median)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        python_cases()
        return

    builds = {"this": args.build.resolve()}
    if args.compare:
        builds = {"other": args.compare.resolve(), **builds}
    for name, folder in builds.items():
        for need in ("libminitensor_emu.so", "bench/emu_launch", "bench/emu_barrier_cost"):
            if not (folder / need).exists():
                sys.exit(f"emu_launch.py: {folder / need} is missing (make bench-emu BUILD={folder})")
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    for _ in range(args.runs):
        for name, folder in builds.items():
            runs[name].append(one_run(folder))

    cases = list(runs["this"][0])
    medians = {name: {c: statistics.median(r[c] for r in rs) for c in cases} for name, rs in runs.items()}
    print(f"times in microseconds, median of {args.runs} runs "
          "(barrier_ns_*: ns per __syncthreads() per thread)")
    for name, folder in builds.items():
        print(f"  {name}: {folder}")
    print(f"{'case':<30}" + "".join(f"{n:>12}" for n in builds) + ("   speed-up" if args.compare else ""))
    for c in cases:
        row = f"{c:<30}" + "".join(f"{medians[n][c]:>12.1f}" for n in builds)
        if args.compare and medians["this"][c] > 0:
            row += f"   {medians['other'][c] / medians['this'][c]:.2f}x"
        print(row)


if __name__ == "__main__":
    main()
