"""The strided copy (.contiguous() of a view), against PyTorch on the GPU.

    python3 bench/copy_strided.py            # on the GPU machine (needs torch)
    python3 bench/copy_strided.py --quick    # fewer timed runs

Each case makes a view on both sides and copies it into a new row-major
tensor: minitensor's default copy (src/copy_strided.cu: dims collapsed, 32-bit
indices, 4 elements a thread), the naive rung it replaced (`kernels.copy(x,
"naive")`: map_strided, a 64-bit division per dim and element) and torch's
`.contiguous()`. The results are checked against torch's before timing.
Times: medians of CUDA-event timings of one call after warm-up (ms); GB/s
counts the bytes written plus the distinct bytes read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import minitensor as mt  # noqa: E402
from event_timing import median_ms  # noqa: E402


def to_mt(t: torch.Tensor) -> mt.Tensor:
    """A minitensor copy of a contiguous float32 torch tensor (device to device)."""
    return mt.kernels.from_device_pointer(t.contiguous().data_ptr(), tuple(t.shape), mt.float32)


def to_torch(x: mt.Tensor) -> torch.Tensor:
    """A torch copy of a contiguous minitensor tensor."""
    t = torch.empty(tuple(x.shape), dtype=torch.float32, device="cuda")
    mt.kernels.to_device_pointer(x.contiguous(), t.data_ptr())
    return t


# (name, shape of the source, the view on each side: torch and minitensor)
CASES: list[tuple[str, tuple[int, ...], Callable[[Any], Any], Callable[[Any], Any]]] = [
    ("expanded gradient (256, 64, 1, 1) -> (256, 64, 32, 32)", (256, 64, 1, 1),
     lambda t: t.expand(256, 64, 32, 32), lambda m: m.expand(256, 64, 32, 32)),
    ("row broadcast (4096,) -> (16384, 4096)", (4096,),
     lambda t: t.expand(16384, 4096), lambda m: m.expand(16384, 4096)),
    ("inner slice [:, :, 1:-1, 1:-1] of (256, 64, 34, 34)", (256, 64, 34, 34),
     lambda t: t[:, :, 1:-1, 1:-1], lambda m: m[:, :, 1:-1, 1:-1]),
    ("every other column [:, ::2] of (8192, 8192)", (8192, 8192),
     lambda t: t[:, ::2], lambda m: m[:, ::2]),
    ("NCHW -> NHWC permute of (64, 64, 56, 56)", (64, 64, 56, 56),
     lambda t: t.permute(0, 2, 3, 1), lambda m: m.permute(0, 2, 3, 1)),
    ("batch of transposes (64, 512, 512).transpose(0, 1)", (64, 512, 512),
     lambda t: t.transpose(0, 1), lambda m: m.transpose(0, 1)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed runs")
    args = parser.parse_args()
    repeats = 5 if args.quick else 20
    torch.manual_seed(0)
    print(f"{torch.cuda.get_device_name()}, float32, ms (GB/s); torch / minitensor, > 1: minitensor faster")
    print("| case | default | naive (map_strided) | torch | default vs torch | naive vs torch |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, shape, tview, mview in CASES:
        try:
            case(name, shape, tview, mview, repeats)
        except Exception as err:  # one failing case must not hide the others' numbers
            print(f"| {name} | failed: {type(err).__name__}: {err} | | | | |", flush=True)


def case(name: str, shape: tuple[int, ...], tview: Callable[[Any], Any], mview: Callable[[Any], Any],
         repeats: int) -> None:
    """One row of the table: checked, then timed on both sides."""
    ev = (lambda: (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True)))
    tev = (lambda: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
    src = torch.randn(*shape, device="cuda")
    msrc = to_mt(src)
    tv, mv = tview(src), mview(msrc)
    want = tv.contiguous()
    ok = torch.equal(to_torch(mv.contiguous()), want) and torch.equal(
        to_torch(mt.kernels.copy(mv, "naive")), want)
    moved = (want.numel() + src.numel()) * 4
    t_new = median_ms(lambda: mv.contiguous(), *ev(), repeats=repeats)
    t_naive = median_ms(lambda: mt.kernels.copy(mv, "naive"), *ev(), repeats=repeats)
    t_torch = median_ms(lambda: tv.contiguous(), *tev(), repeats=repeats)

    def cell(ms: float) -> str:
        return f"{ms:.3f} ({moved / ms / 1e6:.0f})"
    print(f"| {name}{'' if ok else ' (WRONG)'} | {cell(t_new)} | {cell(t_naive)} | {cell(t_torch)} | "
          f"{t_torch / t_new:.2f}x | {t_torch / t_naive:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
