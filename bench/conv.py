"""The convolution ladder against PyTorch's conv2d, on the GPU.

    python3 bench/conv.py            # on the GPU machine (needs torch)
    python3 bench/conv.py --layers 0,3 --rungs implicit_gemm   # a few rows, one rung

Forward and forward + backward of float32 2-D convolutions shaped like the
layers of a small ResNet, each rung of minitensor's ladder against torch in
the same process:

    im2col  the windows copied into a (N, C, KH, KW, OH, OW) tensor, then one
            batched matmul (what F.conv2d runs: mt.kernels.conv2d(...,
            algo="im2col")).
    tiled   the kernel of src/conv.cu (algo="tiled"): a block computes a
            16 x 16 tile of one output channel with the tile's input patch,
            halo included, in shared memory. Its backward is im2col's, or
            on depthwise layers the depthwise gradient kernels
            (src/conv_depthwise_backward.cu).
    igemm   the implicit GEMM of src/conv_implicit_gemm.cu
            (algo="implicit_gemm", what F.conv2d runs on all but depthwise
            layers): warptile's main loop with the windows gathered into
            shared memory, never written, or the same products on cp.async
            stages and larger tiles (src/conv_igemm_pipelined.cu), on the
            tile configuration the
            autotuner picks per product (timed on the first call, which the
            correctness check below makes, so the timings see the choice;
            --tuned prints each choice with every configuration's time); its backward
            is two more implicit GEMMs (input gradient, weight gradient with
            K split over blocks), except where ops.conv2d_grad_rungs says
            otherwise: the input gradient by im2col below 16 input channels
            a group (the stem), the depthwise kernels on depthwise layers.
    torch   torch.nn.functional.conv2d (cuDNN), with TF32 off
            (torch.backends.cudnn.allow_tf32 = False) so that all three
            compute in float32.

Before timing, each rung's output is checked against torch's (a mismatch
stops the run) and so are its three gradients (a mismatch is printed after
the table, and the exit status is 1). Forward + backward is the forward
followed by backward(g) with g a dense tensor of ones of the output's shape,
made once: the upstream gradient a network passes down (not .sum()'s
expanded view, which each backward would first copy into a dense one).
Times are medians of CUDA-event timings after warm-up (milliseconds). Which rung
F.conv2d takes for a shape is decided from this table.
"""

from __future__ import annotations

import argparse
from typing import Any
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import minitensor as mt  # noqa: E402
from event_timing import median_ms  # noqa: E402
from minitensor.autograd import conv as conv_rules  # noqa: E402  (each gradient product, to time alone)

# name, (N, C, H, W), (C_out, K), stride, padding, groups
LAYERS = [
    ("3x3, 64 ch, 32x32, N256 (issue 29)", (256, 64, 32, 32), (64, 3), 1, 1, 1),
    ("stem 7x7/2", (32, 3, 224, 224), (64, 7), 2, 3, 1),
    ("3x3, 64 ch, 56x56", (32, 64, 56, 56), (64, 3), 1, 1, 1),
    ("3x3, 128 ch, 28x28", (32, 128, 28, 28), (128, 3), 1, 1, 1),
    ("3x3, 256 ch, 14x14", (32, 256, 14, 14), (256, 3), 1, 1, 1),
    ("3x3/2, 64->128, 56x56", (32, 64, 56, 56), (128, 3), 2, 1, 1),
    ("1x1, 256->64, 28x28", (32, 256, 28, 28), (64, 1), 1, 0, 1),
    ("depthwise 3x3, 128 ch, 56x56", (32, 128, 56, 56), (128, 3), 1, 1, 128),
    ("digits CNN conv1, 1->32, 8x8, N512 (issue 29)", (512, 1, 8, 8), (32, 3), 1, 1, 1),
]



RUNGS = ("im2col", "tiled", "implicit_gemm")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="", help="comma-separated row indices of LAYERS (default: all)")
    parser.add_argument("--rungs", default=",".join(RUNGS), help="comma-separated rungs to time besides torch "
                        "(implicit_gemm always runs)")
    parser.add_argument("--tuned", action="store_true", help="print the autotuner's entries for the "
                        "convolutions (each product's choice and every configuration's time)")
    parser.add_argument("--grads", action="store_true", help="after the table, time each gradient product of "
                        "the implicit-GEMM rung alone (input gradient by implicit GEMM and by im2col, weight "
                        "gradient) with a dense upstream gradient")
    args = parser.parse_args()
    layers = [LAYERS[int(i)] for i in args.layers.split(",") if i] or LAYERS
    timed_rungs = [r for r in RUNGS if r in args.rungs.split(",") or r == "implicit_gemm"]
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"device: {torch.cuda.get_device_name()}; minitensor backend {mt.backend()}; float32, TF32 off")
    heads = {"im2col": "im2col (mt)", "tiled": "tiled (mt)", "implicit_gemm": "igemm (mt)"}
    print("| layer | pass | " + " | ".join(heads[r] for r in timed_rungs) + " | torch | "
          + ("igemm vs im2col | " if "im2col" in timed_rungs else "") + "igemm vs torch |")
    print("| --- | --- | " + "---: | " * (len(timed_rungs) + 2 + ("im2col" in timed_rungs)))
    problems: list[str] = []
    rungs: list[str] = []  # which rung computed each gradient, printed after the table
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    for name, shape, (c_out, k), stride, padding, groups in layers:
        rng = np.random.default_rng(0)
        x = rng.standard_normal(shape).astype(np.float32)
        w = (rng.standard_normal((c_out, shape[1] // groups, k, k)) / np.sqrt(shape[1] // groups * k * k)).astype(
            np.float32)
        b = rng.standard_normal(c_out).astype(np.float32)
        mx, mw, mb = (mt.tensor(a, requires_grad=True) for a in (x, w, b))
        per_forward = (f"{fwd}: dx {dx}, dw {dw}" for fwd in ("tiled", "implicit_gemm")
                       for dx, dw in [mt.kernels.conv2d_grad_rungs(shape, w.shape, groups, fwd)])
        rungs.append(f"{name}: " + "; ".join(per_forward))
        tx, tw, tb = (torch.tensor(a, device="cuda", requires_grad=True) for a in (x, w, b))

        def rung(algo):
            return lambda: mt.kernels.conv2d(mx, mw, mb, stride, padding, 1, groups, algo=algo)

        def theirs():
            return torch.nn.functional.conv2d(tx, tw, tb, stride, padding, 1, groups)

        ref = theirs()
        ref.backward(torch.ones_like(ref))
        ref_grads = [t.grad.detach().cpu().numpy() for t in (tx, tw, tb)]
        ref = ref.detach().cpu().numpy()
        for algo in timed_rungs:
            got = rung(algo)()
            err = np.abs(got.detach().numpy() - ref).max()
            assert err <= 1e-3 * max(1.0, np.abs(ref).max()), f"{name} {algo}: largest difference {err}"
            for leaf in (mx, mw, mb):
                leaf.grad = None
            got.backward(mt.ones(got.shape))
            for leaf, want, what in zip((mx, mw, mb), ref_grads, ("input", "weight", "bias")):
                err = np.abs(leaf.grad.numpy() - want).max()
                if err > 1e-3 * max(1.0, np.abs(want).max()):  # reported after the table, which is still timed
                    problems.append(f"{name} {algo}: the {what} gradient differs from torch's by {err}")

        # The upstream gradient a network passes down: a dense tensor of the
        # output's shape, made once (not .sum()'s expanded view, which each
        # backward would first have to copy into a dense one).
        mt_up, t_up = mt.ones(ref.shape), torch.ones(ref.shape, device="cuda")

        def both(fn, up):
            return lambda: fn().backward(up)

        for pass_name in ("forward", "fwd + bwd"):
            forward = pass_name == "forward"
            with (mt.no_grad() if forward else mt.enable_grad()), \
                    (torch.no_grad() if forward else torch.enable_grad()):
                fns = [rung(r) for r in timed_rungs] + [theirs]
                if not forward:
                    fns = [both(fn, mt_up) for fn in fns[:-1]] + [both(fns[-1], t_up)]
                ms = {r: median_ms(fn, *mt_events) for r, fn in zip(timed_rungs, fns)}
                ref_ms = median_ms(fns[-1], *t_events)
            g = ms["implicit_gemm"]
            vs_im2col = f"{ms['im2col'] / g:.2f}x | " if "im2col" in ms else ""
            print(f"| {name} | {pass_name} | " + " | ".join(f"{ms[r]:.3f}" for r in timed_rungs)
                  + f" | {ref_ms:.3f} | {vs_im2col}{ref_ms / g:.2f}x |", flush=True)
    print("\nGradient rungs (ops.conv2d_grad_rungs) after each forward:")
    for line in rungs:
        print("  " + line)
    if args.grads:
        print("\nEach gradient product alone (ms; dense upstream gradient):")
        for layer in layers:
            print("  " + _grad_products(layer, mt_events))
    if args.tuned:
        _print_tuned()
    for problem in problems:
        print("GRADIENT CHECK FAILED:", problem)
    return 1 if problems else 0


def _grad_products(layer: tuple[Any, ...], events: tuple[Any, Any]) -> str:
    """One layer's gradient products timed one at a time: where its backward goes."""
    name, shape, (c_out, k), stride, padding, groups = layer
    rng = np.random.default_rng(0)
    x = mt.tensor(rng.standard_normal(shape).astype(np.float32))
    w = mt.tensor(rng.standard_normal((c_out, shape[1] // groups, k, k)).astype(np.float32))
    oh, ow = ((size + 2 * padding - k) // stride + 1 for size in shape[2:])
    up = mt.ones((shape[0], c_out, oh, ow))
    args = ((stride, stride), (padding, padding), (1, 1), groups)
    products = {
        "dx igemm": lambda: conv_rules._input_grad("implicit_gemm", up, shape, w, *args),
        "dx im2col": lambda: conv_rules._input_grad("im2col", up, shape, w, *args),
        "dw igemm": lambda: conv_rules._weight_grad("implicit_gemm", up, x, w.shape, *args),
    }
    with mt.no_grad():
        return f"{name}: " + ", ".join(f"{what} {median_ms(fn, *events):.3f}" for what, fn in products.items())


def _print_tuned() -> None:
    """The autotuner's convolution entries of this device: the choice, then
    each configuration's time (ms), in configuration order."""
    path = Path(mt.kernels.autotune_stats()["cache_file"])
    if not path.exists():
        print(f"\nno autotune cache at {path} (MINITENSOR_AUTOTUNE={os.environ.get('MINITENSOR_AUTOTUNE', '1')})")
        return
    print(f"\nThe autotuner's choices ({path}), each configuration's ms in configuration order:")
    for device, entries in json.loads(path.read_text())["devices"].items():
        for key, entry in sorted(entries.items()):
            if key.startswith("conv2d "):
                print(f"  {key}: config {entry['config']} ({entry['name']}), ms {entry['ms']}")


if __name__ == "__main__":
    sys.exit(main())
