"""Where the host time of one pooling forward goes, layer by layer, against torch.

    python3 bench/pool_host.py            # on the GPU machine (needs torch)

bench/pool.py's "call" column times one F.max_pool2d alone: the GPU waits for
the host's road to the launch, and for the frees of the results dropped before
the end event. This script times that road without the kernel: a tiny input
(2 x 3 x 8 x 8), whose kernel takes a few microseconds of GPU, called --calls
times back to back, so that the host is the bottleneck; microseconds per call
(the median of --repeats loops, each ended by a synchronize), one layer at a
time from the top:

    F.max_pool2d(x, 2)               the whole road (values only, no gradient)
    F.max_pool2d(x, 2, indices)      return_indices=True: two results
    F.avg_pool2d(x, 2)
    ops.max_pool2d                   the Array layer: the outputs' allocation and the binding
    _lib.max_pool2d (out given)      the binding alone: descriptors, ctypes, the C checks, the launch
    empty + free                     one result's allocation and release (Storage, mt_malloc, mt_free)
    mt_malloc + mt_free (ctypes)     the same without the Python objects

and torch's F.max_pool2d, F.avg_pool2d and torch.empty beside them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ctypes  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import minitensor as mt  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from minitensor import _array, _lib, ops  # noqa: E402


def per_call_us(fn: Callable[[], Any], sync: Callable[[], None], calls: int, repeats: int) -> float:
    """The median over `repeats` loops of `calls` calls of fn, in microseconds a call."""
    for _ in range(50):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    shape = (2, 3, 8, 8)
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x = mt.tensor(a)
    tx = torch.tensor(a, device="cuda")
    out = ops.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), (4, 4))
    values, indices = out
    mt_sync, t_sync = mt.cuda.synchronize, torch.cuda.synchronize
    malloc, free = _lib.C.mt_malloc, _lib.C.mt_free

    def raw_pair() -> None:
        p = ctypes.c_void_p()
        malloc(ctypes.byref(p), 96 * 4)
        free(p.value)

    cases: list[tuple[str, Callable[[], Any], Callable[[], None]]] = [
        ("F.max_pool2d(x, 2)", lambda: F.max_pool2d(x, 2), mt_sync),
        ("F.max_pool2d(x, 2, return_indices=True)", lambda: F.max_pool2d(x, 2, return_indices=True), mt_sync),
        ("F.avg_pool2d(x, 2)", lambda: F.avg_pool2d(x, 2), mt_sync),
        ("ops.max_pool2d (values and indices)", lambda: ops.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), (4, 4)),
         mt_sync),
        ("ops.max_pool2d (values only)",
         lambda: ops.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), (4, 4), False), mt_sync),
        ("_lib.max_pool2d (outputs given)",
         lambda: _lib.max_pool2d(values, indices, x, (2, 2), (2, 2), (0, 0), (1, 1)), mt_sync),
        ("empty + free (one float32 result)", lambda: _array.empty((2, 3, 4, 4), mt.float32), mt_sync),
        ("mt_malloc + mt_free (ctypes only)", raw_pair, mt_sync),
        ("torch F.max_pool2d(x, 2)", lambda: torch.nn.functional.max_pool2d(tx, 2), t_sync),
        ("torch F.max_pool2d(x, 2, return_indices=True)",
         lambda: torch.nn.functional.max_pool2d(tx, 2, return_indices=True), t_sync),
        ("torch F.avg_pool2d(x, 2)", lambda: torch.nn.functional.avg_pool2d(tx, 2), t_sync),
        ("torch.empty (one float32 result)", lambda: torch.empty((2, 3, 4, 4), device="cuda"), t_sync),
    ]
    print(f"device: {torch.cuda.get_device_name()}; host microseconds a call, input {shape}, "
          f"{args.calls} calls a loop, median of {args.repeats}")
    print("| case | us a call |")
    print("| --- | ---: |")
    with mt.no_grad(), torch.no_grad():
        for name, fn, sync in cases:
            print(f"| {name} | {per_call_us(fn, sync, args.calls, args.repeats):.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
