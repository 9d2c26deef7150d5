"""The activations (src/activations.h), one map kernel forward and one zip kernel
backward each, against PyTorch on the GPU: issue 29's target is >= 0.95x torch
for GELU and SiLU, forward and forward + backward.

    python3 bench/activations.py            # on the GPU machine (needs torch)
    python3 bench/activations.py --sizes 24 # 2^24 elements only

Each case, float32, in one process: GELU (exact and tanh), SiLU, ELU, LeakyReLU
and hardtanh on 2^24 and 2^26 elements. Each result is checked against torch's
before timing (its first 2^20 elements). Two timings, both medians of CUDA events after warm-up (ms):

  call   one call between two events, as the other benches time: the GPU waits
         for the host's Python path too (tens of microseconds, a large share of
         a 2^24 forward).
  loop   ten calls between two events, divided by ten: the host queues the next
         call while the GPU runs this one, so this is the kernels' own time
         whenever the host is the faster of the two.

Forward + backward is `fn(x).sum().backward()` with x.grad set to None first (a
training step's zero_grad()), on both sides: torch's minimum is its kernel, the
sum, the seed's fill and the backward kernel, whose result becomes x.grad
without a copy; minitensor's is the same kernels (bench/pool.py's docstring
lists them). GB/s counts the bytes the minimum moves: forward reads and writes
N floats, backward reads 2N and writes N (the sum reads N more).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import minitensor as mt  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from event_timing import median_ms  # noqa: E402

TF = torch.nn.functional

# name, minitensor's call, torch's
CASES: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = [
    ("gelu", F.gelu, TF.gelu),
    ("gelu tanh", lambda x: F.gelu(x, "tanh"), lambda x: TF.gelu(x, approximate="tanh")),
    ("silu", F.silu, TF.silu),
    ("elu", F.elu, TF.elu),
    ("leaky_relu", F.leaky_relu, TF.leaky_relu),
    ("hardtanh", F.hardtanh, TF.hardtanh),
]


def loop_ms(fn: Callable[[], Any], start: Any, end: Any, calls: int = 10, repeats: int = 10) -> float:
    """The median over `repeats` of the time of `calls` back-to-back calls of fn,
    divided by calls (ms): what the GPU takes per call once the host runs ahead."""
    fn()
    times = []
    for _ in range(repeats):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def step(fn: Callable[[Any], Any], x: Any, forward: bool) -> Callable[[], Any]:
    """One timed call: fn(x), or x's gradient through fn(x).sum() from no gradient."""
    if forward:
        return lambda: fn(x)

    def fwd_bwd() -> None:
        x.grad = None
        fn(x).sum().backward()
    return fwd_bwd


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="24,26", help="comma-separated powers of two of the element count")
    parser.add_argument("--only", default="", help="comma-separated case names (gelu, silu, ...)")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    print(f"device: {torch.cuda.get_device_name()}; minitensor backend {mt.backend()}; float32; "
          f"torch {torch.__version__}")
    print("| case | elements | pass | mt call | torch call | torch / mt (call) | mt loop | torch loop | "
          "torch / mt (loop) | mt GB/s (loop) |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    for power in [int(p) for p in args.sizes.split(",")]:
        n = 2 ** power
        x = np.random.default_rng(power).standard_normal(n, dtype=np.float32) * 3
        mx = mt.tensor(x, requires_grad=True)
        tx = torch.tensor(x, device="cuda", requires_grad=True)
        for name, ours, theirs in CASES:
            if only and name not in only:
                continue
            ref = theirs(tx)
            ref.sum().backward()
            got = ours(mx)
            got.sum().backward()
            k = 2 ** 20  # checked on the first 2^20 elements: a download of all of them takes longer than the timing
            for what, a, b in (("forward", got[:k].detach().numpy(), ref[:k].detach().cpu().numpy()),
                               ("gradient", mx.grad[:k].numpy(), tx.grad[:k].cpu().numpy())):
                err = float(np.abs(a - b).max())
                assert err <= 1e-5 * max(1.0, float(np.abs(b).max())), f"{name} {what}: largest difference {err}"
            mx.grad, tx.grad = None, None
            for forward in (True, False):
                with (mt.no_grad() if forward else mt.enable_grad()), \
                        (torch.no_grad() if forward else torch.enable_grad()):
                    m_call = median_ms(step(ours, mx, forward), *mt_events)
                    t_call = median_ms(step(theirs, tx, forward), *t_events)
                    m_loop = loop_ms(step(ours, mx, forward), *mt_events)
                    t_loop = loop_ms(step(theirs, tx, forward), *t_events)
                moved = (2 if forward else 6) * n * 4  # bytes: see the docstring
                print(f"| {name} | 2^{power} | {'forward' if forward else 'fwd + bwd'} | {m_call:.3f} | "
                      f"{t_call:.3f} | {t_call / m_call:.2f}x | {m_loop:.3f} | {t_loop:.3f} | "
                      f"{t_loop / m_loop:.2f}x | {moved / m_loop / 1e6:.0f} |", flush=True)
        del mx, tx
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
