"""max / min / argmax / argmin along a dim, against PyTorch on the GPU (issue 29 item 4).

    python3 bench/reduce_indices.py            # on the GPU machine (needs torch)

float32 rows of 4096 and 16384 (16384 rows), reduced over the last dim, each
result checked against torch's first (values and int64 indices equal). Three
timings per case, medians of CUDA-event timings in ms:

    gpu   one call, a ~1 ms spin kernel queued before the start event, so the
          host has queued the whole call before the GPU reaches it: the GPU's
          work alone (what bench/run.py's rows report)
    call  one call alone: the GPU also waits for the host's Python path
    loop  ten calls back to back, divided by ten

and the two rungs that can serve a long row (`kernels.reduce(x, "argmax", 1,
rung)`), the (value, index) pass of max(dim) without its values, and the
one-pass row kernel (src/reduce_index_rows.cu, `ops.reduce_index_rows`) with
1, 2, 4 and 8 warps a row: the library takes it for rows of at least 128
Packs, with the group size `index_rows_default_warps` picks.

    python3 bench/reduce_indices.py --quick     # fewer repeats, the sweep of warps
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import minitensor as mt  # noqa: E402

SPIN_CYCLES = 1_500_000  # about 1 ms at the H100's clock


def to_mt(t: torch.Tensor) -> mt.Tensor:
    """A minitensor copy of a contiguous float32 torch tensor (device to device)."""
    return mt.kernels.from_device_pointer(t.contiguous().data_ptr(), tuple(t.shape), mt.float32)


def to_torch(x: mt.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A torch copy of a minitensor tensor of float32 or int64 elements."""
    x = x.contiguous()
    t = torch.empty(tuple(x.shape), dtype=dtype, device="cuda")
    mt.kernels.to_device_pointer(x, t.data_ptr())
    return t


def timings(fn: Callable[[], Any], repeats: int = 15) -> tuple[float, float, float]:
    """(gpu, call, loop) in ms, as the module's docstring says; torch's events
    serve both libraries (both run on the default stream)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    gpu, call, loop = [], [], []
    for _ in range(repeats):
        torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        fn()
        end.record()
        end.synchronize()
        gpu.append(start.elapsed_time(end))
        start.record()
        fn()
        end.record()
        end.synchronize()
        call.append(start.elapsed_time(end))
        start.record()
        for _ in range(10):
            fn()
        end.record()
        end.synchronize()
        loop.append(start.elapsed_time(end) / 10)
    return statistics.median(gpu), statistics.median(call), statistics.median(loop)


def same(got: Any, want: Any) -> bool:
    """Equal values and indices (a pair), or equal indices / values alone."""
    if isinstance(want, tuple):
        return torch.equal(to_torch(got[0], torch.float32), want[0]) and torch.equal(
            to_torch(got[1], torch.int64), want[1])
    return torch.equal(to_torch(got, want.dtype), want)


def rows_kernel(mA: Any, op: str, warps: int) -> Any:
    """ops.reduce_index_rows as Tensors (a pair for max / min)."""
    got = mt.ops.reduce_index_rows(op, mA, warps)
    if isinstance(got, tuple):
        return tuple(mt.Tensor._from_array(g) for g in got)
    return mt.Tensor._from_array(got)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--shapes", default="16384x4096,16384x16384",
                        help="comma-separated ROWSxCOLS (default: %(default)s)")
    args = parser.parse_args()
    repeats = 7 if args.quick else 15
    torch.manual_seed(0)
    print(f"{torch.cuda.get_device_name()}, float32; torch / minitensor (> 1: minitensor faster), ms in brackets")
    print("| case | gpu | call | loop |")
    print("| --- | ---: | ---: | ---: |")
    for shape in args.shapes.split(","):
        rows, n = (int(v) for v in shape.split("x"))
        A = torch.randn(rows, n, device="cuda")
        mA = to_mt(A)
        cases: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
            ("max(dim=1) values and indices", lambda: mA.max(dim=1), lambda: A.max(dim=1)),
            ("min(dim=1) values and indices", lambda: mA.min(dim=1), lambda: A.min(dim=1)),
            ("argmax(dim=1)", lambda: mA.argmax(dim=1), lambda: A.argmax(dim=1)),
            ("argmin(dim=1)", lambda: mA.argmin(dim=1), lambda: A.argmin(dim=1)),
            ("amax(dim=1)", lambda: mA.amax(dim=1), lambda: A.amax(dim=1)),
        ]
        for rung in ("vectorized", "warp_rows"):
            cases.append((f"argmax(dim=1), rung {rung}", lambda r=rung: mt.kernels.reduce(mA, "argmax", 1, r),
                          lambda: A.argmax(dim=1)))
        for warps in (1, 2, 4, 8):
            cases.append((f"max(dim=1) values and indices, index_rows {warps} warps",
                          lambda w=warps: rows_kernel(mA, "max", w), lambda: A.max(dim=1)))
            cases.append((f"argmax(dim=1), index_rows {warps} warps", lambda w=warps: rows_kernel(mA, "argmax", w),
                          lambda: A.argmax(dim=1)))
            cases.append((f"amax(dim=1), index_rows {warps} warps", lambda w=warps: rows_kernel(mA, "amax", w),
                          lambda: A.amax(dim=1)))
        for name, mt_fn, torch_fn in cases:
            try:
                want = torch_fn()
                # (torch's named pair is a tuple; a plain tensor has an .indices method too)
                want = (want[0], want[1]) if isinstance(want, tuple) else want
                ok = same(mt_fn(), want)
                m, t = timings(mt_fn, repeats), timings(torch_fn, repeats)
                cells = " | ".join(f"{b / a:.2f}x ({a:.4f} / {b:.4f})" for a, b in zip(m, t))
                print(f"| {name}, {rows} x {n}{'' if ok else ' (WRONG)'} | {cells} |", flush=True)
            except Exception as err:  # one failing case must not hide the others' numbers
                print(f"| {name}, {rows} x {n} | failed: {type(err).__name__}: {err} | | |", flush=True)


if __name__ == "__main__":
    main()
