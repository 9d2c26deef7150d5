"""Every tile configuration of the tunable matmul rungs (warptile and
pipelined) against torch (cuBLAS, TF32 off), on square float32 products.

    python3 bench/matmul_configs.py                       # on the GPU machine (needs torch)
    python3 bench/matmul_configs.py --sizes 4096 --configs 1,12

For each size and configuration: the median of CUDA-event timings after
warm-up, in ms and TFLOP/s, and torch's time over it (above 1: minitensor is
faster). Each result is checked against torch's first. This is the table that
shows what each rung's ideas buy at the same tile shape (warptile's register
staging against pipelined's cp.async stages).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import minitensor as mt  # noqa: E402
from event_timing import median_ms  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,2048,4096", help="comma-separated n of n^3 products")
    parser.add_argument("--configs", default="", help="comma-separated config indices (default: all)")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per case")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    names = mt.kernels.matmul_configs()
    configs = [int(c) for c in args.configs.split(",") if c] or list(range(len(names)))
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    print(f"device: {torch.cuda.get_device_name()}; minitensor backend {mt.backend()}")
    print("| n | config | ms | TFLOP/s | torch ms | vs torch |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for n in (int(s) for s in args.sizes.split(",")):
        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")
        want = a @ b
        ma, mb = mt.from_dlpack(a), mt.from_dlpack(b)
        out = mt.empty(n, n)
        torch_ms = median_ms(lambda: a @ b, *t_events, repeats=args.repeats)
        for c in configs:
            rung = mt.kernels.matmul_config_rung(c)
            run = lambda c=c, rung=rung: mt.kernels.matmul(ma, mb, rung, c, out=out)  # noqa: E731
            run()
            err = (torch.from_dlpack(out) - want).abs().max().item()
            if err > 1e-3 * n ** 0.5:
                print(f"config {c} at n={n}: max error {err:.3g} against torch", file=sys.stderr)
                return 1
            ms = median_ms(run, *mt_events, repeats=args.repeats)
            print(f"| {n} | {c}: {names[c]} | {ms:.3f} | {2 * n**3 / ms / 1e9:.1f} | {torch_ms:.3f} | "
                  f"{torch_ms / ms:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
