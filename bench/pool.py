"""Pooling and activations, one kernel each way, against PyTorch on the GPU.

    python3 bench/pool.py            # on the GPU machine (needs torch)

Forward and forward + backward, float32, each case in one process: minitensor's
kernel (src/pool.cu, src/activations.h), the chain of ops it replaced (the
im2col windows and a reduction for pooling, a chain of Tensor ops for GELU),
and torch (cuDNN / ATen). Each result is checked against torch's before
timing. Times are medians of CUDA-event timings after warm-up (milliseconds).
"""

from __future__ import annotations

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
    print(f"device: {torch.cuda.get_device_name()}; minitensor backend {mt.backend()}; float32")
    print("| case | pass | kernel (mt) | chain (mt) | torch | kernel vs chain | torch / kernel |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    for name, shape, ours, chain, theirs in CASES:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        mx = mt.tensor(x, requires_grad=True)
        tx = torch.tensor(x, device="cuda", requires_grad=True)
        ref = theirs(tx).detach().cpu().numpy()
        for label, fn in (("kernel", ours), ("chain", chain)):
            if fn is not None:
                err = np.abs(fn(mx).detach().numpy() - ref).max()
                assert err <= 1e-4 * max(1.0, np.abs(ref).max()), f"{name} {label}: largest difference {err}"
        for pass_name in ("forward", "fwd + bwd"):
            forward = pass_name == "forward"

            def run(fn: Callable, arg: Any) -> Callable[[], Any]:
                return (lambda: fn(arg)) if forward else (lambda: fn(arg).sum().backward())

            with (mt.no_grad() if forward else mt.enable_grad()), \
                    (torch.no_grad() if forward else torch.enable_grad()):
                k_ms = median_ms(run(ours, mx), *mt_events)
                c_ms = median_ms(run(chain, mx), *mt_events) if chain is not None else float("nan")
                t_ms = median_ms(run(theirs, tx), *t_events)
            print(f"| {name} | {pass_name} | {k_ms:.3f} | {c_ms:.3f} | {t_ms:.3f} | {c_ms / k_ms:.2f}x | "
                  f"{t_ms / k_ms:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
