"""The attention ladder against PyTorch's scaled_dot_product_attention, on the GPU.

    python3 bench/attention.py            # on the GPU machine (needs torch)

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
    sdpa    minitensor's F.scaled_dot_product_attention: the rung it chooses
            (the warp rung for these shapes, no mask).
    torch   torch.nn.functional.scaled_dot_product_attention (its own choice of
            fused kernel: memory-efficient for float32 on an H100).

Times are medians of CUDA-event timings after warm-up (milliseconds); the
ratios are torch's time over each rung's (> 1: minitensor faster).
"""

from __future__ import annotations

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
RUNGS = ("naive", "masked_softmax", "flash", "warp", "sdpa")


def main() -> int:
    print(f"device: {torch.cuda.get_device_name()}; minitensor backend {mt.backend()}")
    print("| B, H, L, D, causal | pass | naive | fused | flash | warp | sdpa (mt) | torch sdpa "
          "| torch / naive, fused, flash, warp, sdpa |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    for shape in SHAPES:
        for causal in (False, True):
            rng = np.random.default_rng(0)
            arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
            mq, mk, mv = (mt.tensor(a, requires_grad=True) for a in arrays)
            tq, tk, tv = (torch.tensor(a, device="cuda", requires_grad=True) for a in arrays)

            def rung(algo):
                if algo == "sdpa":
                    return lambda: F.scaled_dot_product_attention(mq, mk, mv, is_causal=causal)
                if algo == "flash" and shape[-1] > 64:  # the flash rung holds a row of at most 64 in registers
                    return None
                return lambda: mt.kernels.attention(mq, mk, mv, algo, causal=causal)

            fns = [rung(algo) for algo in RUNGS]

            def theirs():
                return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)

            ref = theirs().detach().cpu().numpy()
            for fn in fns:
                if fn is not None:
                    got = fn().detach().numpy()
                    assert np.allclose(got, ref, atol=2e-4), np.abs(got - ref).max()
            for name in ("forward", "fwd + bwd"):
                def timed(fn, events):
                    if fn is None:
                        return None
                    if name == "forward":
                        with mt.no_grad(), torch.no_grad():
                            return median_ms(fn, *events)
                    return median_ms(lambda: fn().sum().backward(), *events)

                ms = [timed(fn, mt_events) for fn in fns]
                torch_ms = timed(theirs, t_events)
                cells = " | ".join("-" if m is None else f"{m:.3f}" for m in ms)
                ratios = ", ".join("-" if m is None else f"{torch_ms / m:.2f}x" for m in ms)
                print(f"| {', '.join(map(str, shape))}, {causal} | {name} | {cells} | {torch_ms:.3f} | {ratios} |")
    registers_against_local_memory(mt_events)
    return 0


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
