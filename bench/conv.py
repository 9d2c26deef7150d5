"""The convolution ladder against PyTorch's conv2d, on the GPU.

    python3 bench/conv.py            # on the GPU machine (needs torch)

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
            layers): warptile's 128 x 128 (or 64 x 128) tiles with the
            windows gathered into shared memory, never written; its backward
            is two more implicit GEMMs (input gradient, weight gradient with
            K split over blocks), except where ops.conv2d_grad_rungs says
            otherwise: the input gradient by im2col below 16 input channels
            a group (the stem), the depthwise kernels on depthwise layers.
    torch   torch.nn.functional.conv2d (cuDNN), with TF32 off
            (torch.backends.cudnn.allow_tf32 = False) so that all three
            compute in float32.

Before timing, each rung's output is checked against torch's (a mismatch
stops the run) and so are its three gradients (a mismatch is printed after
the table, and the exit status is 1). Times are
medians of CUDA-event timings after warm-up (milliseconds). Which rung
F.conv2d takes for a shape is decided from this table.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import minitensor as mt  # noqa: E402
from event_timing import median_ms  # noqa: E402

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
]



def main() -> int:
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"device: {torch.cuda.get_device_name()}; minitensor backend {mt.backend()}; float32, TF32 off")
    print("| layer | pass | im2col (mt) | tiled (mt) | igemm (mt) | torch | igemm vs im2col | igemm vs torch |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    problems: list[str] = []
    rungs: list[str] = []  # which rung computed each gradient, printed after the table
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    for name, shape, (c_out, k), stride, padding, groups in LAYERS:
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
        for algo in ("im2col", "tiled", "implicit_gemm"):
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

        def both(fn):
            return lambda: fn().sum().backward()

        for pass_name in ("forward", "fwd + bwd"):
            forward = pass_name == "forward"
            with (mt.no_grad() if forward else mt.enable_grad()), \
                    (torch.no_grad() if forward else torch.enable_grad()):
                fns = (rung("im2col"), rung("tiled"), rung("implicit_gemm"), theirs)
                if not forward:
                    fns = tuple(both(fn) for fn in fns)
                i, t, g = (median_ms(fn, *mt_events) for fn in fns[:3])
                ref_ms = median_ms(fns[3], *t_events)
            print(f"| {name} | {pass_name} | {i:.3f} | {t:.3f} | {g:.3f} | {ref_ms:.3f} | {i / g:.2f}x "
                  f"| {ref_ms / g:.2f}x |", flush=True)
    print("\nGradient rungs (ops.conv2d_grad_rungs) after each forward:")
    for line in rungs:
        print("  " + line)
    for problem in problems:
        print("GRADIENT CHECK FAILED:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
