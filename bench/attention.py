"""The attention ladder against PyTorch's scaled_dot_product_attention, on the GPU.

    python3 bench/attention.py            # on the GPU machine (needs torch)
    python3 bench/attention.py --rungs warp,tiled:64,tiled:128x2 --repeats 10
                                          # some rungs; tiled:N the tiled
                                          # rung with N queries a block,
                                          # tiled:NxR with R rows a thread;
                                          # mma:QxK the mma rung, Q queries
                                          # a block, K keys a tile

Forward and forward + backward of softmax(q k^T / sqrt(d) [causal]) v for
(batch, heads, length, head dim) float32 inputs, each rung of minitensor's
ladder against torch in the same process:

    naive   each step one op: a matmul, the scale, the causal mask, the
            softmax, a matmul; the (L, L) scores go through memory each time.
    fused   a matmul, the scale, mask and softmax in one kernel
            (src/masked_softmax.cu, one read of the scores), a matmul: what
            F.scaled_dot_product_attention runs with a mask. Backward:
            matmuls and one softmax-backward kernel.
    flash   the fused kernel of src/attention.cu (mt.kernels.attention(...,
            "flash")): one thread per query row, tiles of K and V in shared
            memory, online softmax, no score stored. Its backward is two more
            kernels that recompute the weights from each row's log-sum-exp.
            Head dims up to 64 ("-" above).
    warp    src/attention_warp.cu ("warp"): 64 queries a block of 128 threads,
            scores and P V as register-tiled products, K/V tiles staged with
            cp.async, one fused backward kernel (dQ by atomics).
    tiled   src/attention_tiled.cu ("tiled"): flash block-tiled as a matmul,
            64 or 128 queries a block (tiled:64, tiled:128), 4 or 2 rows a
            thread in the forward (tiled:64x2: twice the threads a block),
            K and V each in one shared buffer staged in turn, masks only on
            the tiles that need them; backward a dQ kernel then a dK/dV
            kernel, no atomics.
    mma     src/attention_mma.cu ("mma"): the forward on the tensor cores,
            3xTF32 mma.sync at float32's accuracy (as torch's), 64 queries a
            block of 4 warps or 128 of 8, 16, 32 or 64 keys a tile
            (mma:64x32, mma:128x64; the default by shape, in the launcher
            of src/attention_mma.cu); its backward src/attention_mma_backward.cu, the same 3xTF32
            products (dQ per 64 queries, then dK and dV per 64 keys).
    sdpa    minitensor's F.scaled_dot_product_attention: the rung it chooses
            (ops.fused_attention_rung: at head dims 64 and 128 the mma
            forward and the mma backward, ops.ATTENTION_MMA_FORWARD and
            ATTENTION_MMA_BACKWARD; at 32 the warp rung; with a gradient at
            head dim 128 without the mask from length 1024 the matmul rung,
            ops.ATTENTION_MATMUL_WITH_GRAD).
    torch   torch.nn.functional.scaled_dot_product_attention (its own choice of
            fused kernel: memory-efficient for float32 on an H100, whose
            products run on tensor cores as 3xTF32, float32's accuracy).

Times are medians of CUDA-event timings after warm-up (milliseconds); the
ratios are torch's time over each rung's (> 1: minitensor faster). The
backward starts from a contiguous random gradient of the output, as a
network's does (the gradient of .sum() is a broadcast view, which the
backward would first copy).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import minitensor as mt  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from event_timing import median_ms  # noqa: E402

# (batch, heads, length, head dim): issue 30's shapes, then longer and wider.
SHAPES = ((64, 6, 256, 64), (16, 12, 1024, 64), (4, 16, 2048, 64),
          (64, 6, 256, 128), (16, 12, 1024, 128), (4, 16, 2048, 128))
RUNGS = ("naive", "masked_softmax", "flash", "warp", "tiled", "sdpa", "mma")
HEADINGS = {"masked_softmax": "fused", "sdpa": "sdpa (mt)"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rungs", default=",".join(RUNGS),
                        help="comma-separated rungs to time (tiled:64 and tiled:128 pick the tiled rung's "
                             "query block); default: all")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls a median is taken over")
    parser.add_argument("--no-flash-table", action="store_true", help="leave out the head dim 63 / 64 table")
    parser.add_argument("--dims", default="64,128", help="comma-separated head dims of SHAPES to time")
    parser.add_argument("--lengths", default="256,1024,2048", help="comma-separated lengths of SHAPES to time")
    parser.add_argument("--no-backward", action="store_true", help="time the forward only")
    parser.add_argument("--accuracy", action="store_true",
                        help="only the forward's error against float64 of each rung and of torch, then exit")
    args = parser.parse_args()
    rungs = args.rungs.split(",")
    for r in rungs:
        if r.split(":")[0] not in RUNGS:
            parser.error(f"unknown rung {r!r}; one of {RUNGS} (tiled:64, tiled:128, tiled:64x2, mma:64x32)")
    dims, lengths = [int(d) for d in args.dims.split(",")], [int(n) for n in args.lengths.split(",")]
    print(f"device: {torch.cuda.get_device_name()}; minitensor backend {mt.backend()}")
    if args.accuracy:
        accuracy(rungs, dims, lengths)
        return 0
    names = [HEADINGS.get(r, r) for r in rungs]
    print(f"| B, H, L, D, causal | pass | {' | '.join(names)} | torch sdpa | torch / {', '.join(names)} |")
    print("| --- | --- | " + "---: | " * (len(rungs) + 1) + "--- |")
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    for shape in SHAPES:
        if shape[3] not in dims or shape[2] not in lengths:
            continue
        rng = np.random.default_rng(0)  # once a shape (float32 directly): at B4 H16 T2048 D128 this took seconds
        arrays = [rng.standard_normal(shape, dtype=np.float32) for _ in range(3)]
        grad = rng.standard_normal(shape, dtype=np.float32)
        for causal in (False, True):
            mq, mk, mv = (mt.tensor(a, requires_grad=True) for a in arrays)
            tq, tk, tv = (torch.tensor(a, device="cuda", requires_grad=True) for a in arrays)
            mgrad, tgrad = mt.tensor(grad), torch.tensor(grad, device="cuda")

            def rung(spec):
                algo, _, config = spec.partition(":")
                block, _, rows = config.partition("x")
                if algo == "sdpa":
                    return lambda: F.scaled_dot_product_attention(mq, mk, mv, is_causal=causal)
                if algo == "flash" and shape[-1] > 64:  # the flash rung holds a row of at most 64 in registers
                    return None
                if algo == "mma":
                    return lambda: mt.kernels.attention(mq, mk, mv, algo, causal=causal, block_queries=int(block or 0),
                                                        block_keys=int(rows or 0))
                return lambda: mt.kernels.attention(mq, mk, mv, algo, causal=causal, block_queries=int(block or 0),
                                                    thread_rows=int(rows or 0))

            fns = [rung(spec) for spec in rungs]

            def theirs():
                return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)

            ref = theirs()
            ref.backward(tgrad)
            ref_grads = [t.grad.cpu().numpy() for t in (tq, tk, tv)]
            for spec, fn in zip(rungs, fns):
                if fn is not None:  # the output and the gradients against torch's, before any timing
                    for t in (mq, mk, mv):
                        t.grad = None
                    got = fn()
                    errors = [np.abs(got.detach().numpy() - ref.detach().cpu().numpy()).max()]
                    got.backward(mgrad)
                    errors += [np.abs(t.grad.numpy() - want).max() / max(1.0, np.abs(want).max())
                               for t, want in zip((mq, mk, mv), ref_grads)]
                    if errors[0] > 2e-4 or max(errors[1:]) > 2e-3:  # said, and the timings still taken
                        print(f"MISMATCH {spec} {shape} causal={causal}: out, dq, dk, dv errors "
                              f"{['%.1e' % e for e in errors]}")
            for name in ("forward",) if args.no_backward else ("forward", "fwd + bwd"):
                def timed(fn, events):
                    if fn is None:
                        return None
                    if name == "forward":
                        with mt.no_grad(), torch.no_grad():
                            return median_ms(fn, *events, repeats=args.repeats)
                    g = tgrad if events is t_events else mgrad
                    return median_ms(lambda: fn().backward(g), *events, repeats=args.repeats)

                ms = [timed(fn, mt_events) for fn in fns]
                torch_ms = timed(theirs, t_events)
                cells = " | ".join("-" if m is None else f"{m:.3f}" for m in ms)
                ratios = ", ".join("-" if m is None else f"{torch_ms / m:.2f}x" for m in ms)
                print(f"| {', '.join(map(str, shape))}, {causal} | {name} | {cells} | {torch_ms:.3f} | {ratios} |")
    if not args.no_flash_table:
        registers_against_local_memory(mt_events)
    return 0


def accuracy(rungs: list[str], dims: list[int], lengths: list[int]) -> None:
    """The largest error of each rung's forward output, and of torch's float32
    sdpa (TF32 off), against torch's sdpa of the same inputs in float64,
    relative to the output's largest magnitude: float32's accuracy is about
    1e-6 here, TF32's products about 1e-3."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("| B, H, L, D, causal | " + " | ".join(rungs) + " | torch sdpa (float32) |")
    print("| --- | " + "---: | " * (len(rungs) + 1))
    for shape in SHAPES:
        if shape[3] not in dims or shape[2] not in lengths:
            continue
        shape = (1,) + shape[1:]  # one batch element: the error does not grow with the batch
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(shape, dtype=np.float32) for _ in range(3)]
        for causal in (False, True):
            exact = torch.nn.functional.scaled_dot_product_attention(
                *(torch.tensor(a, device="cuda", dtype=torch.float64) for a in arrays), is_causal=causal)
            exact = exact.cpu().numpy()
            top = np.abs(exact).max()
            cells = []
            for spec in rungs:
                algo, _, config = spec.partition(":")
                if algo == "sdpa":
                    got = F.scaled_dot_product_attention(*(mt.tensor(a) for a in arrays), is_causal=causal)
                elif algo == "mma":
                    block, _, keys = config.partition("x")
                    got = mt.kernels.attention(*(mt.tensor(a) for a in arrays), "mma", causal=causal,
                                               block_queries=int(block or 0), block_keys=int(keys or 0))
                elif algo == "flash" and shape[-1] > 64:
                    cells.append("-")
                    continue
                else:
                    got = mt.kernels.attention(*(mt.tensor(a) for a in arrays), algo, causal=causal)
                cells.append(f"{np.abs(got.numpy() - exact).max() / top:.1e}")
            theirs = torch.nn.functional.scaled_dot_product_attention(
                *(torch.tensor(a, device="cuda") for a in arrays), is_causal=causal).cpu().numpy()
            cells.append(f"{np.abs(theirs - exact).max() / top:.1e}")
            print(f"| {', '.join(map(str, shape))}, {causal} | " + " | ".join(cells) + " |")


def registers_against_local_memory(events) -> None:
    """The flash rung with head dim 64, which its kernels know at compile time
    (rows in registers), against 63, read at run time (rows in local memory):
    nearly the same arithmetic, in one run."""
    print()
    print("| flash rung, 32 x 1024, causal | head dim 64 (compile time) | head dim 63 (run time) | 63 / 64 |")
    print("| --- | ---: | ---: | ---: |")
    rng = np.random.default_rng(1)
    for name in ("forward", "fwd + bwd"):
        ms = []
        for d in (64, 63):
            q, k, v = (mt.tensor(rng.standard_normal((32, 1024, d)).astype(np.float32), requires_grad=True)
                       for _ in range(3))

            def forward():
                return mt.kernels.attention(q, k, v, "flash", causal=True)

            if name == "forward":
                with mt.no_grad():
                    ms.append(median_ms(forward, *events))
            else:
                ms.append(median_ms(lambda: forward().sum().backward(), *events))
        print(f"| {name} | {ms[0]:.3f} | {ms[1]:.3f} | {ms[1] / ms[0]:.2f}x |")


if __name__ == "__main__":
    sys.exit(main())
