"""The TF32 convolution rung (src/conv_igemm_tf32.cu) against cuDNN with TF32 on,
on the GPU: each tile configuration of each product on the 3 x 3 layers of
examples/train_resnet.py (--batch 256 --width 64 --size 32), then forward +
backward through F.conv2d with the autotuner's choice; first, the error of
both libraries against float64.

    python3 bench/conv_tf32.py                 # on the GPU machine (needs torch)
    python3 bench/conv_tf32.py --layers 0 --repeats 5

Every configuration's result is checked against torch's float64 convolution
within TF32's error (2^-10 of the largest sum of |terms|, estimated as
2^-10 times the float64 result of |x| convolved with |w|) before its time
counts; a failure is printed and the exit status is 1. Times are medians of
CUDA-event timings after warm-up (milliseconds), torch in the same process
with torch.backends.cudnn.allow_tf32 = True.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import minitensor as mt  # noqa: E402
from minitensor import _lib  # noqa: E402
from event_timing import median_ms  # noqa: E402

# name, (N, C, H, W), C_out, stride: the 3 x 3 layers (padding 1) of the ResNet example.
LAYERS = [
    ("3x3 64->64, 32x32", (256, 64, 32, 32), 64, 1),
    ("3x3/2 64->128, 32x32", (256, 64, 32, 32), 128, 2),
    ("3x3 128->128, 16x16", (256, 128, 16, 16), 128, 1),
    ("3x3/2 128->256, 16x16", (256, 128, 16, 16), 256, 2),
    ("3x3 256->256, 8x8", (256, 256, 8, 8), 256, 1),
]
CONV = dict(padding=(1, 1), dilation=(1, 1), groups=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="", help="comma-separated row indices of LAYERS (default: all)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per median")
    args = parser.parse_args()
    layers = [LAYERS[int(i)] for i in args.layers.split(",") if i] or LAYERS
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = True
    configs = _lib.conv2d_tf32_config_count()
    print(f"device: {torch.cuda.get_device_name()}; TF32 on in both libraries")
    for c in range(configs):
        print(f"  config {c}: {_lib.conv2d_tf32_config_name(c)}")
    mt_ev = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_ev = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    failures: list[str] = []
    _errors(LAYERS[0])  # first: cheap, and past the timeout of a short run the table is what gets cut
    print("\n| layer | product | " + " | ".join(f"cfg {c}" for c in range(configs)) + " | best | torch | torch / best |")
    print("| --- | --- | " + "---: | " * (configs + 3))
    for name, shape, c_out, stride in layers:
        x, w, g = _layer_data(shape, c_out, stride, seed=0)
        ref, bound = _reference(x, w, g, stride)
        mx, mw, mg = mt.tensor(x), mt.tensor(w), mt.tensor(g)
        tx, tw, tg = (torch.tensor(a, device="cuda") for a in (x, w, g))
        sp = ((stride, stride), CONV["padding"], CONV["dilation"], CONV["groups"])
        outs = {"forward": mt.empty(g.shape), "input_grad": mt.empty(shape), "weight_grad": mt.empty(w.shape)}
        calls: dict[str, Callable[[int], None]] = {
            "forward": lambda c: _lib.conv2d_tf32(outs["forward"], mx, mw, None, *sp, c),
            "input_grad": lambda c: _lib.conv2d_tf32_input_grad(outs["input_grad"], mg, mw, *sp, c),
            "weight_grad": lambda c: _lib.conv2d_tf32_weight_grad(outs["weight_grad"], mg, mx, *sp, c),
        }
        theirs: dict[str, Callable[[], Any]] = {
            "forward": lambda: torch.nn.functional.conv2d(tx, tw, None, stride, 1),
            "input_grad": lambda: torch.ops.aten.convolution_backward(
                tg, tx, tw, None, [stride] * 2, [1, 1], [1, 1], False, [0, 0], 1, [True, False, False]),
            "weight_grad": lambda: torch.ops.aten.convolution_backward(
                tg, tx, tw, None, [stride] * 2, [1, 1], [1, 1], False, [0, 0], 1, [False, True, False]),
        }
        for product, call in calls.items():
            times = []
            for c in range(configs):
                call(c)
                # Two images (all of the weight gradient): a copy of the whole output costs more than the timing.
                got = outs[product].numpy() if product == "weight_grad" else outs[product][:2].numpy()
                err = float(np.abs(got - ref[product][:len(got)]).max())
                if err > bound[product]:
                    failures.append(f"{name} {product} config {c}: error {err:.3g} over the bound "
                                    f"{bound[product]:.3g}")
                times.append(median_ms(lambda: call(c), *mt_ev, repeats=args.repeats))
            t_ms = median_ms(theirs[product], *t_ev, repeats=args.repeats)
            best = int(np.argmin(times))
            print(f"| {name} | {product} | " + " | ".join(f"{t:.3f}" for t in times)
                  + f" | {best} | {t_ms:.3f} | {t_ms / times[best]:.2f}x |", flush=True)
        print(f"| {name} | fwd + bwd (F.conv2d, autotuned) | {_fwd_bwd(x, w, g, stride, mt_ev, t_ev, args.repeats)} |",
              flush=True)
    for f in failures:
        print("CHECK FAILED:", f)
    return 1 if failures else 0


def _layer_data(shape: tuple[int, ...], c_out: int, stride: int, seed: int) -> tuple[np.ndarray, ...]:
    """A layer's input x, weight w (scaled as at initialisation) and an output
    gradient g of the output's shape (3 x 3, padding 1), float32."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((c_out, shape[1], 3, 3)) / np.sqrt(shape[1] * 9)).astype(np.float32)
    n, _, h, wd = shape
    g = rng.standard_normal((n, c_out, (h - 1) // stride + 1, (wd - 1) // stride + 1)).astype(np.float32)
    return x, w, g


def _reference(x: np.ndarray, w: np.ndarray, g: np.ndarray, stride: int) -> tuple[dict[str, np.ndarray],
                                                                                    dict[str, float]]:
    """The three products in float64 (torch on the GPU), and each one's TF32 bound:
    2^-10 of the largest sum of |terms| (the same products of |x|, |w|, |g|) plus
    1e-5 of the largest result."""
    dx, dw, dg = (torch.tensor(a, device="cuda", dtype=torch.float64) for a in (x, w, g))

    def products(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> dict[str, np.ndarray]:
        out = torch.nn.functional.conv2d(a, b, None, stride, 1)
        gi, gw, _ = torch.ops.aten.convolution_backward(c, a, b, None, [stride] * 2, [1, 1], [1, 1], False,
                                                        [0, 0], 1, [True, True, False])
        return {"forward": out.cpu().numpy(), "input_grad": gi.cpu().numpy(), "weight_grad": gw.cpu().numpy()}

    ref = products(dx, dw, dg)
    mag = products(dx.abs(), dw.abs(), dg.abs())
    return ref, {k: 2.0**-10 * float(mag[k].max()) + 1e-5 * float(np.abs(ref[k]).max()) for k in ref}


def _fwd_bwd(x: np.ndarray, w: np.ndarray, g: np.ndarray, stride: int, mt_ev: Any, t_ev: Any,
             repeats: int) -> str:
    """Forward + backward through F.conv2d (the autotuner's configs) against torch's."""
    mt.backends.cuda.conv.allow_tf32 = True
    mx, mw = mt.tensor(x, requires_grad=True), mt.tensor(w, requires_grad=True)
    tx = torch.tensor(x, device="cuda", requires_grad=True)
    tw = torch.tensor(w, device="cuda", requires_grad=True)
    mg, tg = mt.tensor(g), torch.tensor(g, device="cuda")
    ours = median_ms(lambda: mt.nn.functional.conv2d(mx, mw, None, stride, 1).backward(mg), *mt_ev,
                     repeats=repeats)
    base = median_ms(lambda: torch.nn.functional.conv2d(tx, tw, None, stride, 1).backward(tg), *t_ev,
                     repeats=repeats)
    mt.backends.cuda.conv.allow_tf32 = False
    return f"mt {ours:.3f} ms, torch {base:.3f} ms, torch / mt {base / ours:.2f}x"


def _errors(layer: tuple[Any, ...]) -> None:
    """The largest error against float64, relative to the largest |result|, of
    minitensor's TF32 rung (library's config) and of cuDNN with TF32 on, for
    each product of one layer."""
    name, shape, c_out, stride = layer
    x, w, g = _layer_data(shape, c_out, stride, seed=1)
    ref, _ = _reference(x, w, g, stride)
    mx, mw, mg = mt.tensor(x), mt.tensor(w), mt.tensor(g)
    tx, tw, tg = (torch.tensor(a, device="cuda") for a in (x, w, g))
    sp = ((stride, stride), CONV["padding"], CONV["dilation"], CONV["groups"])
    mine = {"forward": mt.empty(g.shape), "input_grad": mt.empty(shape), "weight_grad": mt.empty(w.shape)}
    _lib.conv2d_tf32(mine["forward"], mx, mw, None, *sp, -1)
    _lib.conv2d_tf32_input_grad(mine["input_grad"], mg, mw, *sp, -1)
    _lib.conv2d_tf32_weight_grad(mine["weight_grad"], mg, mx, *sp, -1)
    t_out = torch.nn.functional.conv2d(tx, tw, None, stride, 1)
    t_gi, t_gw, _ = torch.ops.aten.convolution_backward(tg, tx, tw, None, [stride] * 2, [1, 1], [1, 1], False,
                                                        [0, 0], 1, [True, True, False])
    theirs = {"forward": t_out, "input_grad": t_gi, "weight_grad": t_gw}
    print(f"\nError against float64, max |got - exact| / max |exact|, {name}:")
    for k in ref:
        scale = float(np.abs(ref[k]).max())
        e_mt = float(np.abs(mine[k].numpy() - ref[k]).max()) / scale
        e_t = float(np.abs(theirs[k].cpu().numpy() - ref[k]).max()) / scale
        print(f"  {k}: minitensor TF32 {e_mt:.2e}, torch (cuDNN TF32) {e_t:.2e}")


if __name__ == "__main__":
    sys.exit(main())
