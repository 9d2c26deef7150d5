"""The depthwise and direct convolution rungs against PyTorch's conv2d, on the GPU.

    python3 bench/conv_small.py                 # on the GPU machine (needs torch)
    python3 bench/conv_small.py --layers 0,1    # a few rows
    ncu --kernel-name regex:depthwise python3 bench/conv_small.py --layers 0 --check-only

The convolutions a matrix product serves badly, float32, TF32 off on both sides:

    depthwise  groups = C = C_out (src/conv_depthwise.cu, algo="depthwise"): a
               block stages a 32 x 32 output tile's input patch of one channel
               in shared memory, each thread computes 4 outputs; the input
               gradient is the same kernel with the taps flipped (stride 1),
               the weight gradient a per-channel reduction with block partials
               (src/conv_depthwise_backward.cu). Against the tiled rung
               (algo="tiled", src/conv.cu), the one F.conv2d took before.
    direct     few products per output, C / groups KH KW <= ops.DIRECT_MAX_TAPS
               (src/conv_direct.cu, algo="direct"): a thread per output pixel
               and 8 output channels at a time, the input gradient a gather,
               the weight gradient the same reduction. Against the implicit
               GEMM (algo="implicit_gemm").

Each rung's output and gradients are checked against torch's first (a
mismatch is printed after the table and the exit status is 1). Forward +
backward is ``out.sum().backward()`` as in bench/conv.py: the incoming
gradient is an expanded tensor, which these kernels read in place. Times are
medians of CUDA-event timings after warm-up (milliseconds).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import minitensor as mt  # noqa: E402
from event_timing import median_ms  # noqa: E402

# name, (N, C, H, W), (C_out, K), stride, padding, groups, (new rung, the rung it replaces)
LAYERS = [
    ("depthwise 3x3, 128 ch, 56x56, N32", (32, 128, 56, 56), (128, 3), 1, 1, 128, ("depthwise", "tiled")),
    ("digits CNN conv1, 1->32, 8x8, N512", (512, 1, 8, 8), (32, 3), 1, 1, 1, ("direct", "implicit_gemm")),
    ("depthwise 5x5, 256 ch, 28x28, N32", (32, 256, 28, 28), (256, 5), 1, 2, 256, ("depthwise", "tiled")),
    ("depthwise 3x3/2, 128 ch, 56x56, N32", (32, 128, 56, 56), (128, 3), 2, 1, 128, ("depthwise", "tiled")),
    ("depthwise 3x3, 512 ch, 7x7, N32", (32, 512, 7, 7), (512, 3), 1, 1, 512, ("depthwise", "tiled")),
    ("3->32, 3x3, 32x32, N128 (27 taps)", (128, 3, 32, 32), (32, 3), 1, 1, 1, ("direct", "implicit_gemm")),
    ("1->64, 5x5, 28x28, N128 (25 taps)", (128, 1, 28, 28), (64, 5), 1, 2, 1, ("direct", "implicit_gemm")),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="", help="comma-separated row indices of LAYERS (default: all)")
    parser.add_argument("--check-only", action="store_true", help="run each rung once, forward and backward, "
                        "and check it, without timing (for a profiler: ncu --kernel-name ...)")
    args = parser.parse_args()
    layers = [LAYERS[int(i)] for i in args.layers.split(",") if i] or LAYERS
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"device: {torch.cuda.get_device_name()}; minitensor backend {mt.backend()}; float32, TF32 off")
    print("| layer | pass | new rung (mt) | old rung (mt) | torch | new vs torch | new vs old |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    problems: list[str] = []
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    for name, shape, (c_out, k), stride, padding, groups, (new, old) in layers:
        rng = np.random.default_rng(0)
        x = rng.standard_normal(shape).astype(np.float32)
        w = (rng.standard_normal((c_out, shape[1] // groups, k, k)) / np.sqrt(shape[1] // groups * k * k)).astype(
            np.float32)
        b = rng.standard_normal(c_out).astype(np.float32)
        mx, mw, mb = (mt.tensor(a, requires_grad=True) for a in (x, w, b))
        tx, tw, tb = (torch.tensor(a, device="cuda", requires_grad=True) for a in (x, w, b))

        def rung(algo):
            return lambda: mt.kernels.conv2d(mx, mw, mb, stride, padding, 1, groups, algo=algo)

        def theirs():
            return torch.nn.functional.conv2d(tx, tw, tb, stride, padding, 1, groups)

        ref = theirs()
        ref.backward(torch.ones_like(ref))
        ref_grads = [t.grad.detach().cpu().numpy() for t in (tx, tw, tb)]
        ref = ref.detach().cpu().numpy()
        for algo in (new, old):
            got = rung(algo)()
            err = np.abs(got.detach().numpy() - ref).max()
            if err > 1e-3 * max(1.0, np.abs(ref).max()):
                problems.append(f"{name} {algo}: the output differs from torch's by {err}")
            for leaf in (mx, mw, mb):
                leaf.grad = None
            got.sum().backward()
            for leaf, want, what in zip((mx, mw, mb), ref_grads, ("input", "weight", "bias")):
                err = np.abs(leaf.grad.numpy() - want).max()
                if err > 1e-3 * max(1.0, np.abs(want).max()):
                    problems.append(f"{name} {algo}: the {what} gradient differs from torch's by {err}")

        if args.check_only:
            continue

        def both(fn):
            return lambda: fn().sum().backward()

        for pass_name in ("forward", "fwd + bwd"):
            forward = pass_name == "forward"
            with (mt.no_grad() if forward else mt.enable_grad()), \
                    (torch.no_grad() if forward else torch.enable_grad()):
                fns = [rung(new), rung(old), theirs]
                if not forward:
                    fns = [both(fn) for fn in fns]
                new_ms, old_ms = (median_ms(fn, *mt_events) for fn in fns[:2])
                ref_ms = median_ms(fns[2], *t_events)
            print(f"| {name} ({new} / {old}) | {pass_name} | {new_ms:.3f} | {old_ms:.3f} | {ref_ms:.3f} | "
                  f"{ref_ms / new_ms:.2f}x | {old_ms / new_ms:.2f}x |", flush=True)
    for problem in problems:
        print("CHECK FAILED:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
