"""Host latency of small ops, for comparing two builds of minitensor.

Small tensors make every op cost its host path (Python, the binding, the
engine's checks, the launch) and nothing else, so this is where the checks
that each entry point makes would show. Run it once per build, alternating,
on the same machine:

    PYTHONPATH=path/to/old python bench/latency_ab.py --label old
    PYTHONPATH=.           python bench/latency_ab.py --label new

It uses only the public API that every version of the package has, prints
one line per case (median of --repeats loops of --loops ops, microseconds
per op) and nothing else.
"""

import argparse
import statistics
import time
from typing import Callable

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import nn, optim


def per_op_us(fn: Callable[[], object], loops: int, repeats: int) -> float:
    """Median over repeats of the host time per call, after a warm-up; each
    loop ends with a synchronize so that queued GPU work is counted once."""
    for _ in range(200):
        fn()
    mt.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        mt.synchronize()
        times.append((time.perf_counter() - start) / loops)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="this build")
    parser.add_argument("--loops", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    mt.manual_seed(0)
    a, b = mt.randn(16), mt.randn(16)
    m = mt.randn(16, 16)
    x = mt.randn(64, 64)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = optim.SGD(model.parameters(), lr=0.01)
    targets = mt.tensor([i % 10 for i in range(64)])

    def train_step() -> None:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), targets)
        loss.backward()
        opt.step()

    cases = [
        ("a + b (16 floats)", lambda: a + b, 1),
        ("a.sum() (16 floats)", lambda: a.sum(), 1),
        ("m @ m (16 x 16)", lambda: m @ m, 1),
        ("mt.empty(16)", lambda: mt.empty(16), 1),
        ("MLP train step (64 x 64 -> 128 -> 10, SGD)", train_step, 20),
    ]
    print(f"{args.label}: backend {mt.backend()}")
    for name, fn, divisor in cases:
        us = per_op_us(fn, max(args.loops // divisor, 20), args.repeats)
        print(f"{args.label}: {name}: {us:.1f} us/op")


if __name__ == "__main__":
    main()
