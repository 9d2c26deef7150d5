"""The reduction ladder over the last dim, on rows of several shapes, against torch.

    python3 bench/reduce_rows.py            # on the GPU machine (needs torch)

For each shape (rows x length, float32, 2^28 elements or fewer) and each rung
of mt.kernels.reduce(x, "sum", 1, algo), the time of a sum over the last dim
and torch's x.sum(dim=1), in the same process: medians of CUDA-event timings
after warm-up, in microseconds, and the memory rate. Each result is checked
against torch's first. This is the table that decides which rung mt_reduce
takes for rows (src/reduce.cu).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import minitensor as mt  # noqa: E402
from event_timing import median_ms  # noqa: E402

SHAPES = [(16384, 16384), (4096, 65536), (65536, 4096), (262144, 1024), (1048576, 256), (524288, 128), (2097152, 32),
          (4194304, 16), (2097152, 7)]



def main() -> int:
    print(f"device: {torch.cuda.get_device_name()}; minitensor backend {mt.backend()}")
    algos = [a for a in mt.kernels.algorithms("reduce")]
    print("| rows x length | " + " | ".join(algos) + " | torch | best rung vs torch |")
    print("| --- |" + " ---: |" * (len(algos) + 2))
    mt_events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    t_events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    for rows, length in SHAPES:
        a = torch.randn(rows, length, device="cuda")
        m = mt.from_dlpack(a)
        want = a.sum(dim=1)
        cells, times = [], {}
        for algo in algos:
            out = mt.empty(rows, 1)
            got = torch.from_dlpack(mt.kernels.reduce(m, "sum", 1, algo, keepdim=True, out=out)).reshape(rows)
            assert torch.allclose(got, want, rtol=1e-4, atol=1e-3), (algo, (got - want).abs().max().item())
            times[algo] = 1e3 * median_ms(lambda: mt.kernels.reduce(m, "sum", 1, algo, keepdim=True, out=out),
                                         *mt_events, repeats=30)
            cells.append(f"{times[algo]:.1f}")
        t = 1e3 * median_ms(lambda: a.sum(dim=1), *t_events, repeats=30)
        best = min(times, key=times.get)
        gbs = rows * length * 4 / (times[best] * 1e-6) / 1e9
        print(f"| {rows} x {length} | " + " | ".join(cells) + f" | {t:.1f} | {best} {t / times[best]:.2f}x "
              f"({gbs:.0f} GB/s) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
