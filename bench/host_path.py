"""Where the host time of a small op goes, layer by layer (issue: host overhead).

    python bench/host_path.py [--loops 3000] [--repeats 7]

`a + b` on 16 float32 elements costs its host path and nothing else: the
kernel is a few hundred nanoseconds on a GPU. Each line below runs one layer
of minitensor's road from Tensor to kernel (docs/architecture.md) with
everything above it removed, so the differences between lines are what each
layer costs. It uses the public API only (mt.kernels.add is the op without
the Tensor and autograd layers):

    Tensor a + b                  autograd's Function.apply, the rule, ops, binding
    no_grad a + b                 the same without recording a graph
    kernels.add(a, b)             promotion, broadcasting, the output's allocation
    kernels.add(a, b, out=out)    the binding: descriptors, the op table, the status
    mt.empty(16) + free           one allocation and free, and the Tensor around it
    torch a + b                   for comparison, in the same process (if importable)

Each number is the median over --repeats loops of --loops calls, in
microseconds per call, after a warm-up; each loop ends with a synchronize.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import minitensor as mt  # noqa: E402


def per_call_us(fn: Callable[[], object], sync: Callable[[], None], loops: int, repeats: int) -> float:
    for _ in range(200):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        sync()
        times.append((time.perf_counter() - start) / loops)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    a, b = mt.randn(16), mt.randn(16)
    out = mt.empty_like(a)

    def no_grad_add() -> object:
        with mt.no_grad():
            return a + b

    cases: list[tuple[str, Callable[[], object], Callable[[], None]]] = [
        ("Tensor a + b", lambda: a + b, mt.synchronize),
        ("no_grad a + b", no_grad_add, mt.synchronize),
        ("kernels.add(a, b)", lambda: mt.kernels.add(a, b), mt.synchronize),
        ("kernels.add(a, b, out=out)", lambda: mt.kernels.add(a, b, out=out), mt.synchronize),
        ("mt.empty(16) + free", lambda: mt.empty(16), mt.synchronize),
    ]
    try:
        import torch

        if mt.backend() == "cuda" and torch.cuda.is_available():
            ta, tb = torch.randn(16, device="cuda"), torch.randn(16, device="cuda")
            cases.append(("torch a + b", lambda: ta + tb, torch.cuda.synchronize))
    except ImportError:
        pass

    print(f"backend {mt.backend()}; microseconds per call (median of {args.repeats} x {args.loops})")
    print("| layer | us/call |\n| --- | ---: |")
    for name, fn, sync in cases:
        print(f"| {name} | {per_call_us(fn, sync, args.loops, args.repeats):.2f} |")


if __name__ == "__main__":
    main()
