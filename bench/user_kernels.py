"""Kernels compiled at run time: compile time and launch overhead, against
CuPy's RawKernel in the same process (GPU), or alone (emulator).

    .venv/bin/python bench/user_kernels.py [--repeats 2000]

- compile, first: a source neither compiler has seen (a fresh comment makes
  it new to both disk caches), from the call to a kernel ready to launch;
- compile, cached: the same source again in a new RawKernel object after the
  in-process memo is dropped, so the disk cache answers ("mt disk"), and
  with the memo kept ("mt memory"); CuPy: a new RawKernel object of a source
  it compiled, which its in-memory cache answers;
- launch overhead: host time per launch of a one-element kernel, the mean of
  `repeats` back-to-back launches then one synchronize, for a minitensor
  RawKernel, a library op of the same size (mt.add, out of place) and CuPy's
  RawKernel.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import minitensor as mt  # noqa: E402
from minitensor.cuda import _host_build, _nvrtc  # noqa: E402

SOURCE = r'''
// %s
extern "C" __global__ void add(float *out, const float *x, const float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = x[i] + y[i];
}
'''


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def compile_times(trials: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"mt first": [], "mt disk": [], "mt memory": [], "cupy first": [],
                                     "cupy cached": []}
    cupy = _cupy()
    for _ in range(trials):
        source = SOURCE % uuid.uuid4().hex
        start = time.perf_counter()
        mt.cuda.compile(source, name="add")
        times["mt first"].append(time.perf_counter() - start)
        _nvrtc._memo.clear()
        _host_build._memo.clear()
        start = time.perf_counter()
        kernel = mt.cuda.compile(source, name="add")
        times["mt disk"].append(time.perf_counter() - start)
        assert kernel.cached
        start = time.perf_counter()
        mt.cuda.compile(source, name="add")
        times["mt memory"].append(time.perf_counter() - start)
        if cupy is not None:
            start = time.perf_counter()
            cupy.RawKernel(source, "add").compile()
            times["cupy first"].append(time.perf_counter() - start)
            start = time.perf_counter()
            cupy.RawKernel(source, "add").compile()
            times["cupy cached"].append(time.perf_counter() - start)
    return times


def _cupy():
    if mt.backend() != "cuda":
        return None
    try:
        import cupy
        return cupy
    except ImportError:
        return None


def launch_overhead(repeats: int) -> dict[str, float]:
    kernel = mt.cuda.compile(SOURCE % "launch", name="add")
    x, y, out = mt.ones(1), mt.ones(1), mt.empty(1)
    result: dict[str, float] = {}

    def per_call(fn) -> float:
        for _ in range(50):
            fn()
        mt.cuda.synchronize()
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(repeats):
                fn()
            mt.cuda.synchronize()
            samples.append((time.perf_counter() - start) / repeats)
        return statistics.median(samples)

    result["minitensor RawKernel"] = per_call(lambda: kernel(1, 32, (out, x, y, 1)))
    result["minitensor op (x + y)"] = per_call(lambda: x + y)
    cupy = _cupy()
    if cupy is not None:
        ck = cupy.RawKernel(SOURCE % "launch", "add")
        cx, cy, cout = cupy.ones(1, cupy.float32), cupy.ones(1, cupy.float32), cupy.empty(1, cupy.float32)
        n = np.int32(1)
        result["CuPy RawKernel"] = per_call(lambda: ck((1,), (32,), (cout, cx, cy, n)))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["MINITENSOR_KERNEL_CACHE"] = cache
        print(f"backend: {mt.backend()}")
        times = compile_times(args.trials)
        print("compile time, median of", args.trials, "(first trial in brackets):")
        for name, values in times.items():
            if values:
                print(f"  {name:12s} {statistics.median(values) * 1e3:8.2f} ms  [{values[0] * 1e3:.2f} ms]")
        print("launch overhead, host time per launch:")
        for name, seconds in launch_overhead(args.repeats).items():
            print(f"  {name:24s} {seconds * 1e6:7.1f} us")


if __name__ == "__main__":
    main()
