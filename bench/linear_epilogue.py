"""The matmul epilogue (src/matmul_epilogue.cu) against the unfused chain and PyTorch, on the GPU.

    python3 bench/linear_epilogue.py      # on the GPU machine (needs torch)
    python3 bench/linear_epilogue.py --cases up,down --tuned

A transformer's feed-forward at GPT-2-small-like shapes, 16384 rows (batch x
length), float32 without TF32 on both sides (exact products):

    up      gelu(x @ W1.T + b1), (16384, 384) -> (16384, 1536)
    down    x + (h @ W2.T + b2), (16384, 1536) -> (16384, 384), the residual add
    bias    x @ W.T + b, (16384, 384) -> (16384, 384), what F.linear fuses

Each row times, in one process:

    chain (mt)   F.linear_chain (the warptile matmul, then a broadcast add), then
                 F.gelu / the residual add: one more pass over the output each
    fused (mt)   F.linear_act: one kernel, the bias, activation and residual in
                 the warptile kernel's store, on the tile configuration the
                 autotuner picked for the fused kernel (timed on its first
                 call, the correctness check; --tuned prints the choices of
                 the fused and the plain products with every configuration's
                 time)
    torch        F.gelu(F.linear(x, w, b)) / x + F.linear(h, w, b) / F.linear
    addmm        torch.addmm(b, x, w.T) (bias in cuBLAS's epilogue), then the
                 same gelu / residual add as torch's row

forward only (no_grad), then forward + backward of the "up" case. Times are
medians of CUDA-event timings after warm-up (milliseconds).
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import minitensor as mt  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from event_timing import median_ms  # noqa: E402

ROWS = 16384
CASES = (("up", 384, 1536, "gelu", False), ("down", 1536, 384, "none", True), ("bias", 384, 384, "none", False))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(c[0] for c in CASES), help="comma-separated case names")
    parser.add_argument("--tuned", action="store_true", help="print the autotuner's float32 entries")
    args = parser.parse_args()
    cases = [c for c in CASES if c[0] in args.cases.split(",")]
    torch.backends.cuda.matmul.allow_tf32 = False
    mt.backends.cuda.matmul.allow_tf32 = False
    tF = torch.nn.functional
    print(f"device: {torch.cuda.get_device_name()}; minitensor backend {mt.backend()}")
    print("| case (rows x in -> out) | pass | chain (mt) | fused (mt) | torch | addmm (torch) | fused vs chain "
          "| fused vs torch |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    for name, k, n, act, residual in cases:
        rng = np.random.default_rng(0)
        x0 = rng.standard_normal((ROWS, k)).astype(np.float32)
        w0 = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
        b0 = rng.standard_normal(n).astype(np.float32)
        r0 = rng.standard_normal((ROWS, n)).astype(np.float32) if residual else None
        mx, mw, mb = (mt.tensor(a, requires_grad=True) for a in (x0, w0, b0))
        tx, tw, tb = (torch.tensor(a, device="cuda", requires_grad=True) for a in (x0, w0, b0))
        mr = None if r0 is None else mt.tensor(r0)
        tr = None if r0 is None else torch.tensor(r0, device="cuda")

        def finish_mt(y):
            y = F.gelu(y) if act == "gelu" else y
            return y if mr is None else y + mr

        def finish_torch(y):
            y = tF.gelu(y) if act == "gelu" else y
            return y if tr is None else y + tr

        fns = (
            lambda: finish_mt(F.linear_chain(mx, mw, mb)),
            lambda: F.linear_act(mx, mw, mb, act, mr),
            lambda: finish_torch(tF.linear(tx, tw, tb)),
            lambda: finish_torch(torch.addmm(tb, tx, tw.t())),
        )
        ref = fns[2]().detach().cpu().numpy()
        for fn in fns[:2]:
            got = fn().detach().numpy()
            assert np.allclose(got, ref, atol=1e-3, rtol=1e-3), np.abs(got - ref).max()
        passes = [("forward", fns, True)]
        if name == "up":
            passes.append(("fwd + bwd", tuple(_backward(fn) for fn in fns), False))
        for label, timed, no_grad in passes:
            with mt.no_grad() if no_grad else nullcontext(), torch.no_grad() if no_grad else nullcontext():
                ms = [median_ms(fn, *mt_events) for fn in timed[:2]] + [median_ms(fn, *t_events) for fn in timed[2:]]
            print(f"| {name} ({ROWS} x {k} -> {n}) | {label} | {ms[0]:.3f} | {ms[1]:.3f} | {ms[2]:.3f} | "
                  f"{ms[3]:.3f} | {ms[0] / ms[1]:.2f}x | {ms[2] / ms[1]:.2f}x |", flush=True)
    if args.tuned:
        _print_tuned()
    return 0


def _print_tuned() -> None:
    """The autotuner's float32 entries of this device (the fused products'
    keys start with "epilogue"): the choice and each configuration's ms."""
    path = Path(mt.kernels.autotune_stats()["cache_file"])
    if not path.exists():
        print(f"\nno autotune cache at {path}")
        return
    print(f"\nThe autotuner's choices ({path}); configurations: {mt.kernels.matmul_configs()}")
    for entries in json.loads(path.read_text())["devices"].values():
        for key, entry in sorted(entries.items()):
            if "float32" in key and not key.startswith("conv2d"):
                print(f"  {key}: config {entry['config']} ({entry['name']}), ms {entry['ms']}")


def _backward(fn):
    return lambda: fn().sum().backward()


if __name__ == "__main__":
    sys.exit(main())
