"""The TF32 rung (src/matmul_tf32_mma.cu) at the GPT's products, in the layouts the step runs them, against torch's TF32.

    python3 bench/tf32_gpt_shapes.py                 # on the GPU machine (torch optional)
    python3 bench/tf32_gpt_shapes.py --rows 256 --repeats 2   # a quick run (the emulator)

The GPT of examples/train_gpt.py (width 384, 16384 tokens a step) runs, per
layer, four Linear layers (384 -> 1152 qkv, 384 -> 384 proj, 384 -> 1536 fc,
1536 -> 384 fc2), each three products:

    fwd   x @ W.T           b column-major (W.T, read in place)
    dx    dz @ W            both row-major
    dW    dz.T @ x          a column-major (dz.T), K = the tokens (split-K)

Each row: minitensor's mt.kernels.matmul(..., "tf32") (the library's tile
choice), torch's matmul with TF32 on, both on the same operands, in
milliseconds (median of CUDA-event timings after warm-up) and the ratio
torch / minitensor (> 1: minitensor faster). Then the fused Linear + GELU
(F.linear_act under allow_tf32) against torch's F.gelu(F.linear(...)), the
4096^3 product with each library's largest error against float64 (relative
to the sum of |terms|), the same product in the layouts x @ W.T, a @ b and
a.T @ b on the library's choice (the TMA rung on an H100), the TMA rung, the
wgmma rung and the mma rung, each with its error, the time of the transposing copy the
wgmma rung makes of a non-K-major operand, and the mma rung's tile variants (mt_matmul_tf32_tile) on
row-major copies of each product's operands, without split-K, beside the
library's choice on the step's own layouts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import minitensor as mt  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from event_timing import median_ms  # noqa: E402

LINEARS = (("qkv", 384, 1152), ("proj", 384, 384), ("fc", 384, 1536), ("fc2", 1536, 384))


def torch_cuda() -> Optional[Any]:
    """torch when it sees a CUDA device, else None (its columns are left out)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def mt_ms(fn: Callable[[], Any], repeats: int) -> float:
    return median_ms(fn, mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True), repeats)


def torch_ms(torch: Any, fn: Callable[[], Any], repeats: int) -> float:
    return median_ms(fn, torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True), repeats)


def products(rows: int) -> list[tuple[str, np.ndarray, np.ndarray, bool, bool]]:
    """(name, a, b, a_t, b_t): a @ b with a / b given as the transpose of a
    row-major array where a_t / b_t (a and b are the logical operands)."""
    rng = np.random.default_rng(0)
    out = []
    for name, k_in, k_out in LINEARS:
        x = rng.standard_normal((rows, k_in)).astype(np.float32)
        w = rng.standard_normal((k_out, k_in)).astype(np.float32)
        dz = rng.standard_normal((rows, k_out)).astype(np.float32)
        out.append((f"{name} fwd  x@W.T  {rows}x{k_in}x{k_out}", x, w.T, False, True))
        out.append((f"{name} dx   dz@W   {rows}x{k_out}x{k_in}", dz, w, False, False))
        out.append((f"{name} dW   dz.T@x {k_out}x{rows}x{k_in}", dz.T, x, True, False))
    return out


def as_mt(x: np.ndarray, transposed: bool) -> Any:
    """x as a minitensor tensor: a transposed view of a row-major copy of x.T where asked."""
    return mt.tensor(np.ascontiguousarray(x.T)).t() if transposed else mt.tensor(np.ascontiguousarray(x))


def as_torch(torch: Any, x: np.ndarray, transposed: bool) -> Any:
    t = torch.from_numpy(np.ascontiguousarray(x.T if transposed else x)).cuda()
    return t.t() if transposed else t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16384, help="tokens a step (the GPT's: 64 x 256)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--big", type=int, default=4096, help="the square product with the error check")
    parser.add_argument("--no-sweep", action="store_true", help="leave out the tile variants")
    parser.add_argument("--no-wgmma", action="store_true", help="leave out the n^3 rows in x @ W.T's layout")
    args = parser.parse_args()
    torch = torch_cuda()
    mt.backends.cuda.matmul.allow_tf32 = True
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = True
    print(f"TF32 products on {mt.backend()}; torch {'on ' + torch.cuda.get_device_name() if torch else 'absent'}")
    print(f"{'product':<36} {'mt ms':>8} {'torch ms':>9} {'torch/mt':>8}")
    total_mt = total_torch = 0.0
    for name, a, b, a_t, b_t in products(args.rows):
        ma, mb = as_mt(a, a_t), as_mt(b, b_t)
        ms = mt_ms(lambda: mt.kernels.matmul(ma, mb, "tf32"), args.repeats)
        total_mt += ms
        row = f"{name:<36} {ms:8.3f}"
        if torch is not None:
            ta, tb = as_torch(torch, a, a_t), as_torch(torch, b, b_t)
            tms = torch_ms(torch, lambda: ta @ tb, args.repeats)
            total_torch += tms
            row += f" {tms:9.3f} {tms / ms:8.2f}"
        print(row, flush=True)
    print(f"{'sum of the 12 products':<36} {total_mt:8.3f}" +
          (f" {total_torch:9.3f} {total_torch / total_mt:8.2f}" if torch is not None else ""))

    # The feed-forward's first Linear with its GELU: fused (one kernel) against torch's two.
    rng = np.random.default_rng(1)
    x = rng.standard_normal((args.rows, 384)).astype(np.float32)
    w = rng.standard_normal((1536, 384)).astype(np.float32) / 20
    bias = rng.standard_normal(1536).astype(np.float32)
    mx, mw, mb = mt.tensor(x), mt.tensor(w), mt.tensor(bias)
    with mt.no_grad():
        ms = mt_ms(lambda: F.linear_act(mx, mw, mb, "gelu"), args.repeats)
    row = f"{'linear+gelu fused ' + str(args.rows) + 'x384->1536':<36} {ms:8.3f}"
    if torch is not None:
        tx, tw, tb = (torch.from_numpy(v).cuda() for v in (x, w, bias))
        tF = torch.nn.functional
        with torch.no_grad():
            tms = torch_ms(torch, lambda: tF.gelu(tF.linear(tx, tw, tb)), args.repeats)
        row += f" {tms:9.3f} {tms / ms:8.2f}"
    print(row, flush=True)

    # n^3: time, and the largest error against float64 over 2^-10 sum |terms| (<= 1: within TF32's bound).
    n = args.big
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    ma, mb = mt.tensor(a), mt.tensor(b)
    ms = mt_ms(lambda: mt.kernels.matmul(ma, mb, "tf32"), args.repeats)
    got = mt.kernels.matmul(ma, mb, "tf32").numpy().astype(np.float64)
    if torch is not None:
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        exact_t = ta.double() @ tb.double()
        terms_t = ta.double().abs() @ tb.double().abs()
        exact, terms = exact_t.cpu().numpy(), terms_t.cpu().numpy()
        tms = torch_ms(torch, lambda: ta @ tb, args.repeats)
        t_err = float(((ta @ tb).double() - exact_t).abs().div(terms_t).max())
    else:
        exact = a.astype(np.float64) @ b
        terms = np.abs(a).astype(np.float64) @ np.abs(b)
        tms, t_err = float("nan"), float("nan")
    m_err = float(np.max(np.abs(got - exact) / terms))
    print(f"{'matmul ' + str(n) + '^3':<36} {ms:8.3f} {tms:9.3f} {tms / ms:8.2f}   "
          f"TFLOP/s mt {2 * n ** 3 / ms / 1e9:.1f} torch {2 * n ** 3 / tms / 1e9:.1f}")
    print(f"  max |err| / sum|terms| against float64: minitensor {m_err:.3e}, torch {t_err:.3e} "
          f"(TF32's bound 2^-10 = {2.0 ** -10:.3e})")

    # The same n^3 in each layout (the Linear forward's x @ W.T: b a transposed view; a @ b: both
    # row-major; a.T @ b: a a transposed view) on each TF32 rung that reads it, with the error. The
    # wgmma rung reads x @ W.T in place and copies (transposes) the other layouts' non-K-major
    # operand first; the time of that copy alone (.contiguous() of the transposed view) is shown.
    if not args.no_wgmma:
        layouts = (("x@W.T", ma, mt.tensor(np.ascontiguousarray(b.T)).t()),
                   ("A@B", ma, mb),
                   ("A.T@B", mt.tensor(np.ascontiguousarray(a.T)).t(), mb))
        for label, la, lb in layouts:
            for rung in ("tf32", "tf32_tma", "tf32_wgmma", "tf32_mma"):
                try:
                    ms = mt_ms(lambda r=rung: mt.kernels.matmul(la, lb, r), args.repeats)
                except mt.MinitensorError as error:  # the wgmma rung off Hopper
                    print(f"  {rung}: {error}")
                    continue
                got = mt.kernels.matmul(la, lb, rung).numpy().astype(np.float64)
                m_err = float(np.max(np.abs(got - exact) / terms))
                print(f"{'matmul ' + str(n) + '^3 ' + label + ' ' + rung:<36} {ms:8.3f} {tms:9.3f} {tms / ms:8.2f}   "
                      f"TFLOP/s mt {2 * n ** 3 / ms / 1e9:.1f}; max |err| / sum|terms| {m_err:.3e}", flush=True)
        transposed = layouts[0][2]
        ms = mt_ms(lambda: transposed.contiguous(), args.repeats)
        print(f"  the transposing copy of one {n}x{n} operand: {ms:.3f} ms ({8 * n * n / ms / 1e6:.0f} GB/s)")

    if not args.no_sweep:
        names = mt._lib.matmul_tf32_tile_names()
        print("tile variants on row-major copies of the operands (no split-K), against the library's choice "
              "on the step's own layouts (in place, split-K where it splits), ms:")
        for name, a, b, a_t, b_t in products(args.rows):
            out = mt.empty(a.shape[0], b.shape[1])
            la, lb = as_mt(a, a_t), as_mt(b, b_t)
            choice = mt_ms(lambda: mt._lib.matmul_tf32_tile(out, la, lb, -1), args.repeats)
            ma, mb = mt.tensor(np.ascontiguousarray(a)), mt.tensor(np.ascontiguousarray(b))
            times = [mt_ms(lambda t=t: mt._lib.matmul_tf32_tile(out, ma, mb, t), args.repeats)
                     for t in range(len(names))]
            best = int(np.argmin(times))
            print(f"  {name:<34} choice {choice:.3f}  " + " ".join(f"{t}:{v:.3f}" for t, v in enumerate(times))
                  + f"  best {best}", flush=True)
        print("  tiles: " + "; ".join(f"{t} {n}" for t, n in enumerate(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
