"""The attention ladder against PyTorch's scaled_dot_product_attention, on the GPU.

    python3 bench/attention.py            # on the GPU machine (needs torch)

Forward and forward + backward of softmax(q k^T / sqrt(d) [causal]) v for
(batch x heads, length, 64) float32 inputs, each rung of minitensor's ladder
against torch in the same process:

    naive   each step one op: a matmul, the scale, the causal mask, the
            softmax, a matmul; the (L, L) scores go through memory each time.
    fused   a matmul, the scale, mask and softmax in one kernel
            (src/masked_softmax.cu, one read of the scores), a matmul: what
            F.scaled_dot_product_attention runs. Backward: matmuls and one
            softmax-backward kernel.
    flash   the fused kernel of src/attention.cu (mt.kernels.attention(...,
            "flash")): tiles of K and V in shared memory, online softmax, no
            score stored. Its backward is two more kernels that recompute the
            weights from each row's log-sum-exp.
    torch   torch.nn.functional.scaled_dot_product_attention (its own choice of
            fused kernel: flash or memory-efficient on an H100).

Times are medians of CUDA-event timings after warm-up (milliseconds).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import minitensor as mt  # noqa: E402
from event_timing import median_ms  # noqa: E402



def main() -> int:
    print(f"device: {torch.cuda.get_device_name()}; minitensor backend {mt.backend()}")
    print("| batch x heads, length, causal | pass | naive (mt) | fused (mt) | flash (mt) | torch sdpa "
          "| naive / fused / flash vs torch |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    for bh, length in ((64, 256), (32, 1024), (16, 2048)):
        for causal in (False, True):
            rng = np.random.default_rng(0)
            arrays = [rng.standard_normal((bh, length, 64)).astype(np.float32) for _ in range(3)]
            mq, mk, mv = (mt.tensor(a, requires_grad=True) for a in arrays)
            tq, tk, tv = (torch.tensor(a, device="cuda", requires_grad=True) for a in arrays)
            def rung(algo):
                return lambda: mt.kernels.attention(mq, mk, mv, algo, causal=causal)

            naive, fused, flash = rung("naive"), rung("masked_softmax"), rung("flash")

            def ours(fn):
                return lambda: fn().sum().backward()

            def theirs():
                return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)

            ref = theirs().detach().cpu().numpy()
            for fn in (naive, fused, flash):
                got = fn().detach().numpy()
                assert np.allclose(got, ref, atol=2e-4), np.abs(got - ref).max()
            for name, fns in (("forward", (naive, fused, flash, theirs)),
                              ("fwd + bwd", (ours(naive), ours(fused), ours(flash),
                                             lambda: theirs().sum().backward()))):
                with mt.no_grad() if name == "forward" else _nothing(), \
                        torch.no_grad() if name == "forward" else _nothing():
                    ms = [median_ms(fn, *mt_events) for fn in fns[:3]] + [median_ms(fns[3], *t_events)]
                ratios = " / ".join(f"{ms[3] / m:.2f}x" for m in ms[:3])
                print(f"| {bh}, {length}, {causal} | {name} | {ms[0]:.3f} | {ms[1]:.3f} | {ms[2]:.3f} | "
                      f"{ms[3]:.3f} | {ratios} |")
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


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


if __name__ == "__main__":
    sys.exit(main())
