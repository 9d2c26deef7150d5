"""AdamW's step and clip_grad_norm_ over the parameters of issue 30's GPT (78
tensors, 10.8 M elements), per parameter and as one list (src/optim_multi.cu),
against torch's foreach and fused AdamW and its clip_grad_norm_, on the GPU.

    python3 bench/optim_list.py                # the GPT of train_gpt.py at 6 x 384
    python3 bench/optim_list.py --width 128    # another width

Each case is timed two ways, medians of CUDA events after warm-up (ms):

  call   one call between two events: the host's Python path and the launches
         are in it (what a training step pays when the GPU waits for the host);
  host   the host's own time of one call (time.perf_counter, the GPU not
         waited for).

The gradients are set once; every call updates the parameters (or scales the
gradients) again, which does not change the work.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import minitensor as mt  # noqa: E402


def load_example() -> Any:
    """examples/train_gpt.py, loaded by path (an example, not part of the package)."""
    spec = importlib.util.spec_from_file_location("train_gpt", REPO / "examples" / "train_gpt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timings(fn: Callable[[], Any], start: Any, end: Any, repeats: int = 20) -> tuple[float, float]:
    """(call ms, host ms): medians over repeats, after two warm-up calls."""
    fn()
    fn()
    end.record()
    end.synchronize()
    calls, hosts = [], []
    for _ in range(repeats):
        start.record()
        t0 = time.perf_counter()
        fn()
        hosts.append((time.perf_counter() - t0) * 1e3)
        end.record()
        end.synchronize()
        calls.append(start.elapsed_time(end))
    return statistics.median(calls), statistics.median(hosts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--context", type=int, default=256)
    args = parser.parse_args()
    import numpy as np
    import torch

    demo = load_example()
    mt.manual_seed(0)
    model = demo.GPT(83, args.context, args.width, args.heads, args.layers)
    params = list(model.parameters())
    rng = np.random.default_rng(0)
    values = [p.numpy() for p in params]
    grads = [rng.standard_normal(v.shape).astype(np.float32) for v in values]
    elements = sum(v.size for v in values)
    print(f"device: {torch.cuda.get_device_name()}; {len(params)} parameters, {elements:,} elements (float32)")
    print("| case | minitensor call | minitensor host | torch call | torch host | torch / mt (call) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))

    def mt_params() -> list[Any]:
        ps = [mt.nn.Parameter(mt.tensor(v)) for v in values]
        for p, g in zip(ps, grads):
            p.grad = mt.tensor(g)
        return ps

    def torch_params() -> list[Any]:
        ps = [torch.nn.Parameter(torch.tensor(v, device="cuda")) for v in values]
        for p, g in zip(ps, grads):
            p.grad = torch.tensor(g, device="cuda")
        return ps

    cases = [
        ("AdamW.step, per parameter (foreach=False) / torch foreach=False",
         lambda ps: mt.optim.AdamW(ps, lr=1e-3, fused=True, foreach=False).step,
         lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=False).step),
        ("AdamW.step, one list (foreach=True) / torch foreach=True",
         lambda ps: mt.optim.AdamW(ps, lr=1e-3, foreach=True).step,
         lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=True).step),
        ("AdamW.step, one list (foreach=True) / torch fused=True",
         lambda ps: mt.optim.AdamW(ps, lr=1e-3, foreach=True).step,
         lambda ps: torch.optim.AdamW(ps, lr=1e-3, fused=True).step),
        ("clip_grad_norm_, ops (foreach=False) / torch foreach=False",
         lambda ps: lambda: mt.nn.utils.clip_grad_norm_(ps, 1e9, foreach=False),
         lambda ps: lambda: torch.nn.utils.clip_grad_norm_(ps, 1e9, foreach=False)),
        ("clip_grad_norm_, list (foreach=True) / torch foreach=True",
         lambda ps: lambda: mt.nn.utils.clip_grad_norm_(ps, 1e9, foreach=True),
         lambda ps: lambda: torch.nn.utils.clip_grad_norm_(ps, 1e9, foreach=True)),
    ]
    for name, ours, theirs in cases:
        m_call, m_host = timings(ours(mt_params()), *mt_events)
        t_call, t_host = timings(theirs(torch_params()), *t_events)
        print(f"| {name} | {m_call:.3f} | {m_host:.3f} | {t_call:.3f} | {t_host:.3f} | {t_call / m_call:.2f}x |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
