"""Pooling and activations, one kernel each way, against PyTorch on the GPU.

    python3 bench/pool.py                 # on the GPU machine (needs torch)
    python3 bench/pool.py --only pool     # the pooling cases only (issue 29's pooling target)

Forward and forward + backward, float32, each case in one process: minitensor's
kernel (src/pool.cu, src/activations.h), the chain of ops it replaced (the
im2col windows and a reduction for pooling, a chain of Tensor ops for GELU),
and torch (cuDNN / ATen). Each result is checked against torch's before
timing. Times are medians of CUDA-event timings after warm-up (milliseconds):
"call" times one call alone (the GPU also waits for the host's Python path),
"loop" ten calls back to back, divided by ten (the kernels' own time when the
host runs ahead; bench/activations.py says more). Forward + backward is
fn(x).sum().backward() from x.grad = None, on both sides: each side's minimum is
its forward kernel, the sum, the seed's fill and the backward kernel, whose
result becomes x.grad without a copy (minitensor's engine, as torch's
AccumulateGrad, keeps a gradient nothing else holds). A max_pool2d forward
with no gradient wanted and no indices asked for writes the values alone in
minitensor, where torch's CUDA kernel writes its int64 indices anyway: the
"return_indices" row is the like-for-like forward.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import minitensor as mt  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from event_timing import median_ms  # noqa: E402
from activations import loop_ms, step  # noqa: E402


def max_pool_chain(x: Any, k: int, s: int, p: int) -> Any:
    """max_pool2d as it was before src/pool.cu: the windows copied out, then a max."""
    n, c = x.shape[:2]
    cols = mt.autograd.Im2Col.apply(x, (k, k), (s, s), (p, p), (1, 1), float("-inf"))
    oh, ow = cols.shape[4:]
    return cols.reshape(n, c, k * k, oh, ow).max(2)[0]


def avg_pool_chain(x: Any, k: int, s: int, p: int) -> Any:
    n, c = x.shape[:2]
    cols = mt.autograd.Im2Col.apply(x, (k, k), (s, s), (p, p), (1, 1))
    oh, ow = cols.shape[4:]
    return cols.reshape(n, c, k * k, oh, ow).sum(2) * (1.0 / (k * k))


def gelu_chain(x: Any) -> Any:
    return x * ((x * (1.0 / math.sqrt(2.0))).erf() + 1.0) * 0.5


# name, input shape, minitensor kernel, the chain it replaced (or None), torch
CASES: list[tuple[str, tuple[int, ...], Callable, Any, Callable]] = [
    ("max_pool2d 3x3/2 pad 1, 64 ch, 112x112", (32, 64, 112, 112), lambda x: F.max_pool2d(x, 3, 2, 1),
     lambda x: max_pool_chain(x, 3, 2, 1), lambda x: torch.nn.functional.max_pool2d(x, 3, 2, 1)),
    ("max_pool2d 3x3/2 pad 1, 64 ch, 112x112, return_indices", (32, 64, 112, 112),
     lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)[0], None,
     lambda x: torch.nn.functional.max_pool2d(x, 3, 2, 1, return_indices=True)[0]),
    ("max_pool2d 2x2/2, N256, 64 ch, 32x32 (issue 29's table)", (256, 64, 32, 32), lambda x: F.max_pool2d(x, 2),
     lambda x: max_pool_chain(x, 2, 2, 0), lambda x: torch.nn.functional.max_pool2d(x, 2)),
    ("max_pool2d 2x2/2, 128 ch, 56x56, ceil_mode", (32, 128, 55, 55), lambda x: F.max_pool2d(x, 2, ceil_mode=True),
     None, lambda x: torch.nn.functional.max_pool2d(x, 2, ceil_mode=True)),
    ("avg_pool2d 2x2/2, 256 ch, 56x56", (32, 256, 56, 56), lambda x: F.avg_pool2d(x, 2),
     lambda x: avg_pool_chain(x, 2, 2, 0), lambda x: torch.nn.functional.avg_pool2d(x, 2)),
    ("avg_pool2d 3x3/1 pad 1, 64 ch, 56x56", (32, 64, 56, 56), lambda x: F.avg_pool2d(x, 3, 1, 1),
     lambda x: avg_pool_chain(x, 3, 1, 1), lambda x: torch.nn.functional.avg_pool2d(x, 3, 1, 1)),
    ("adaptive_avg_pool2d 1, 512 ch, 7x7", (256, 512, 7, 7), lambda x: F.adaptive_avg_pool2d(x, 1), None,
     lambda x: torch.nn.functional.adaptive_avg_pool2d(x, 1)),
    ("gelu 4096x4096", (4096, 4096), F.gelu, gelu_chain, torch.nn.functional.gelu),
    ("gelu tanh 4096x4096", (4096, 4096), lambda x: F.gelu(x, "tanh"), None,
     lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
    ("silu 4096x4096", (4096, 4096), F.silu, lambda x: x * x.sigmoid(), torch.nn.functional.silu),
    ("elu 4096x4096", (4096, 4096), F.elu, None, torch.nn.functional.elu),
    ("leaky_relu 4096x4096", (4096, 4096), F.leaky_relu, None, torch.nn.functional.leaky_relu),
    ("hardtanh 4096x4096", (4096, 4096), F.hardtanh, None, torch.nn.functional.hardtanh),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated case name prefixes ('pool': every pooling case)")
    args = parser.parse_args()
    only = [p for p in args.only.split(",") if p]
    print(f"device: {torch.cuda.get_device_name()}; minitensor backend {mt.backend()}; float32")
    print("| case | pass | kernel (mt) | chain (mt) | torch | kernel vs chain | torch / kernel | kernel loop | "
          "torch loop | torch / kernel (loop) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    for name, shape, ours, chain, theirs in CASES:
        if only and not any(name.startswith(p) or (p == "pool" and "pool" in name) for p in only):
            continue
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        mx = mt.tensor(x, requires_grad=True)
        tx = torch.tensor(x, device="cuda", requires_grad=True)
        ref = theirs(tx).detach().cpu().numpy()
        for label, fn in (("kernel", ours), ("chain", chain)):
            if fn is not None:
                err = np.abs(fn(mx).detach().numpy() - ref).max()
                assert err <= 1e-4 * max(1.0, np.abs(ref).max()), f"{name} {label}: largest difference {err}"
        for forward in (True, False):
            with (mt.no_grad() if forward else mt.enable_grad()), \
                    (torch.no_grad() if forward else torch.enable_grad()):
                k_ms = median_ms(step(ours, mx, forward), *mt_events)
                c_ms = median_ms(step(chain, mx, forward), *mt_events) if chain is not None else float("nan")
                t_ms = median_ms(step(theirs, tx, forward), *t_events)
                k_loop = loop_ms(step(ours, mx, forward), *mt_events)
                t_loop = loop_ms(step(theirs, tx, forward), *t_events)
            print(f"| {name} | {'forward' if forward else 'fwd + bwd'} | {k_ms:.3f} | {c_ms:.3f} | {t_ms:.3f} | "
                  f"{c_ms / k_ms:.2f}x | {t_ms / k_ms:.2f}x | {k_loop:.3f} | {t_loop:.3f} | {t_loop / k_loop:.2f}x |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
