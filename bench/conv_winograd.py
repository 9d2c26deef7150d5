"""The Winograd rung against the implicit GEMM and cuDNN, one product at a time, on the GPU.

    python3 bench/conv_winograd.py                 # on the GPU machine (needs torch)
    python3 bench/conv_winograd.py --layers 2      # one row
    python3 bench/conv_winograd.py --tf32          # the TF32 rungs, cuDNN's TF32 too

For the dense 3x3, stride-1 layers of bench/conv.py, each of a convolution's
three products alone, in float32 with TF32 off on both sides:

    forward        out = conv2d(x, w)
    input grad     dx for a dense upstream gradient g
    weight grad    dw for the same g

each by the implicit GEMM (src/conv_implicit_gemm.cu, on the tile
configuration the autotuner picks), by the Winograd rung F(2x2, 3x3)
(src/conv_winograd.cu: three transforms around 16 products, the weight
gradient's cut into ops.winograd_slices slices), and by cuDNN
(torch.nn.functional.conv2d, torch.nn.grad.conv2d_input / conv2d_weight).
The last column is what the autotuner chose for F.conv2d (autotune.conv_algo,
timed on the first call). With --tf32 the columns are the TF32 implicit GEMM
(src/conv_igemm_tf32.cu), the Winograd rung with its products on the TF32
matmul rung, and cuDNN with TF32 on. Before timing, every Winograd result is checked
against cuDNN's (a mismatch stops the run). Times are medians of CUDA-event
timings after warm-up (milliseconds).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import minitensor as mt  # noqa: E402
from minitensor import _lib, ops  # noqa: E402
from minitensor._array import empty  # noqa: E402
from minitensor.ops import autotune, conv_tf32  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from event_timing import median_ms  # noqa: E402

# name, N, C (= C_out), side
LAYERS = [
    ("64 ch 32x32 N256", 256, 64, 32),
    ("64 ch 56x56 N32", 32, 64, 56),
    ("128 ch 28x28 N32", 32, 128, 28),
    ("256 ch 14x14 N32", 32, 256, 14),
]
PRODUCTS = ("forward", "input_grad", "weight_grad")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="", help="comma-separated row indices of LAYERS (default: all)")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls a median (default 20)")
    parser.add_argument("--tf32", action="store_true", help="the TF32 rungs on both sides")
    args = parser.parse_args()
    layers = [LAYERS[int(i)] for i in args.layers.split(",") if i] or LAYERS
    torch.backends.cudnn.allow_tf32 = args.tf32
    mt.backends.cuda.conv.allow_tf32 = args.tf32
    tf32 = " tf32" if args.tf32 else ""
    print(f"device: {torch.cuda.get_device_name()}; float32, TF32 {'on' if args.tf32 else 'off'}; ms, medians of "
          f"{args.repeats}")
    print(f"| layer | product | igemm{tf32} | winograd{tf32} | cuDNN{tf32} | winograd vs cuDNN | autotuner's choice |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    mt_ev = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_ev = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    params = ((1, 1), (1, 1), (1, 1), 1)
    for name, n, c, side in layers:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((n, c, side, side), dtype=np.float32)
        w = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        g = rng.standard_normal((n, c, side, side), dtype=np.float32)
        mx, mw, mg = mt.tensor(x), mt.tensor(w), mt.tensor(g)
        tx, tw, tg = (torch.tensor(a, device="cuda") for a in (x, w, g))
        out, dx, dw = (empty(s, mt.float32) for s in (x.shape, x.shape, w.shape))

        def igemm_forward(config: int) -> None:
            _lib.conv2d_igemm(out, mx, mw, None, *params, config)

        def igemm_input_grad(config: int) -> None:
            _lib.conv2d_igemm_input_grad(dx, mg, mw, *params, config)

        def igemm_weight_grad(config: int) -> None:
            _lib.conv2d_igemm_weight_grad(dw, mg, mx, *params, config)

        igemm = {"forward": igemm_forward, "input_grad": igemm_input_grad, "weight_grad": igemm_weight_grad}
        tf32_igemm = {  # each tunes its own tiles on its first call
            "forward": lambda: conv_tf32.conv2d_tf32(mx, mw, None, *params),
            "input_grad": lambda: conv_tf32.conv2d_tf32_input_grad(mg, mw, x.shape, *params),
            "weight_grad": lambda: conv_tf32.conv2d_tf32_weight_grad(mg, mx, w.shape, *params),
        }
        winograd = {
            "forward": lambda: ops.conv2d_winograd(mx, mw, None, (1, 1), tf32=args.tf32),
            "input_grad": lambda: ops.conv2d_winograd_input_grad(mg, mw, x.shape, (1, 1), tf32=args.tf32),
            "weight_grad": lambda: ops.conv2d_winograd_weight_grad(mg, mx, w.shape, (1, 1), tf32=args.tf32),
        }
        cudnn = {
            "forward": lambda: torch.nn.functional.conv2d(tx, tw, padding=1),
            "input_grad": lambda: torch.nn.grad.conv2d_input(tx.shape, tw, tg, padding=1),
            "weight_grad": lambda: torch.nn.grad.conv2d_weight(tx, tw.shape, tg, padding=1),
        }
        # What F.conv2d's products run: timing both on this first call, then cached.
        ops.conv2d_igemm(mx, mw, None, *params)
        ops.conv2d_igemm_input_grad(mg, mw, x.shape, *params)
        ops.conv2d_igemm_weight_grad(mg, mx, w.shape, *params)
        for product in PRODUCTS:
            want = cudnn[product]().cpu().numpy()
            got = winograd[product]().numpy()
            err = np.abs(got - want).max()
            tol = 1e-2 if args.tf32 else 1e-3
            assert err <= tol * max(1.0, np.abs(want).max()), f"{name} {product}: largest difference {err}"
            if args.tf32:
                ours = tf32_igemm[product]
            else:
                config = autotune.conv_config(product, mx.shape, mw.shape, mt.float32, params, igemm[product])
                ours = (lambda product, config: lambda: igemm[product](config))(product, config)
            ms = [median_ms(ours, *mt_ev, repeats=args.repeats),
                  median_ms(winograd[product], *mt_ev, repeats=args.repeats),
                  median_ms(cudnn[product], *t_ev, repeats=args.repeats)]
            choice = autotune.conv_algo(product + tf32, mx.shape, mw.shape, mt.float32, params, lambda i: None)
            print(f"| {name} | {product} | {ms[0]:.3f} | {ms[1]:.3f} | {ms[2]:.3f} | {ms[2] / ms[1]:.2f}x | "
                  f"{autotune.CONV_ALGOS[choice]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
