"""The p2p all-reduce ladder against NCCL, one process over every GPU.

    python bench/p2p_allreduce.py [--devices 4] [--min-kb 1] [--max-mb 256] [--out DIR]

For float32 buffers from --min-kb to --max-mb (x4 each step), every rung of
minitensor.distributed.PeerGroup (naive, ring, oneshot, twoshot) and NCCL's
all-reduce over the same GPUs from the same process (torch.cuda.nccl.all_reduce
on one tensor per GPU; NCCL_NVLS_ENABLE=0, NVLink multicast off, as the
issue asks). Each call is timed with CUDA events on every GPU around it,
the longest of them, after warm-up; the median over the calls is reported,
as nccl-tests (PERFORMANCE.md) does:
    algbw = bytes / time
    busbw = algbw * 2 (n - 1) / n        (n GPUs; what a ring moves per link)
The table says which wins at each size, and the summary where each rung
wins. With --out, DIR/p2p_allreduce.md and DIR/p2p_allreduce.json.

On the emulator (no GPU) it runs on 4 emulated devices up to 64 KB, without
NCCL: a smoke test of the script, whose times mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Optional

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # before NCCL is loaded

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

import minitensor as mt  # noqa: E402
from minitensor.distributed import PeerGroup, device_count, emulate_devices  # noqa: E402

RUNGS = ["naive", "ring", "oneshot", "twoshot"]


def iterations(nbytes: int) -> tuple[int, int]:
    """(warm-up, timed) calls for a size: many for small sizes, whose times are noisy."""
    if nbytes <= 1 << 20:
        return 10, 50
    if nbytes <= 16 << 20:
        return 5, 20
    return 2, 8


def nccl_times(devices: list[int], count: int, warmup: int, iters: int) -> Optional[list[float]]:
    """ms per call of torch.cuda.nccl.all_reduce over one float32 tensor per device; None without it."""
    try:
        import torch
        import torch.cuda.nccl as nccl
    except ImportError:
        return None
    tensors = [torch.ones(count, device=f"cuda:{d}") for d in devices]
    if not nccl.is_available(tensors):
        return None
    for _ in range(warmup):
        nccl.all_reduce(tensors)
    for d in devices:
        torch.cuda.synchronize(d)
    starts = [torch.cuda.Event(enable_timing=True) for _ in devices]
    stops = [torch.cuda.Event(enable_timing=True) for _ in devices]
    times = []
    for _ in range(iters):
        for d, e in zip(devices, starts):
            with torch.cuda.device(d):
                e.record()
        nccl.all_reduce(tensors)
        for d, e in zip(devices, stops):
            with torch.cuda.device(d):
                e.record()
        for e in stops:
            e.synchronize()
        times.append(max(s.elapsed_time(e) for s, e in zip(starts, stops)))
    return times


def check_rungs(group: PeerGroup, count: int) -> None:
    """Every rung's result against a plain sum, once, before timing."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(count).astype(np.float32) for _ in range(group.world_size)]
    ref = sum(a.astype(np.float64) for a in arrays)
    for rung in RUNGS:
        tensors = [mt.tensor(a) for a in arrays]
        group.all_reduce(tensors, rung=rung)
        for t in tensors:
            err = float(np.max(np.abs(t.numpy() - ref)))
            if err > 1e-4 * max(1.0, float(np.max(np.abs(ref)))):
                raise SystemExit(f"rung {rung}: wrong result (max error {err})")


def human(nbytes: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes // size} {unit}"
    return f"{nbytes} B"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", type=int, default=None, help="GPUs to use (default: all)")
    parser.add_argument("--min-kb", type=float, default=1)
    parser.add_argument("--max-mb", type=float, default=256)
    parser.add_argument("--out", default=None, help="folder for p2p_allreduce.md and .json")
    args = parser.parse_args()

    emulator = mt.backend() == "emulator"
    if emulator:
        emulate_devices(args.devices or 4)
        args.max_mb = min(args.max_mb, 1 / 16)
    n = args.devices or device_count()
    if n < 2:
        print(f"p2p_allreduce: {n} device; the all-reduce needs at least 2")
        return 1
    devices = list(range(n))
    group = PeerGroup(devices)
    check_rungs(group, 4099)
    device = mt.device_info()
    print(f"# p2p all-reduce vs NCCL, {n} devices, float32 ({device})", flush=True)

    rows = []
    nbytes = int(args.min_kb * 1024)
    while nbytes <= args.max_mb * (1 << 20):
        count = nbytes // 4
        warmup, iters = iterations(nbytes)
        if emulator:
            warmup, iters = 1, 3
        times = {rung: statistics.median(group.bench(count, "float32", rung, warmup, iters)) for rung in RUNGS}
        nccl = None if emulator else nccl_times(devices, count, warmup, iters)
        if nccl is not None:
            times["nccl"] = statistics.median(nccl)
        busbw = {k: nbytes / (ms * 1e-3) / 1e9 * 2 * (n - 1) / n for k, ms in times.items()}
        best = min(times, key=times.get)
        rows.append({"bytes": nbytes, "us": {k: v * 1e3 for k, v in times.items()}, "busbw": busbw, "best": best})
        print(f"{human(nbytes):>8}  " + "  ".join(f"{k} {times[k] * 1e3:9.1f} us {busbw[k]:7.1f} GB/s" for k in times)
              + f"  -> {best}", flush=True)
        nbytes *= 4
    group.close()

    names = list(rows[0]["us"]) if rows else []
    lines = [f"p2p all-reduce vs NCCL: {n} devices, float32, median of CUDA-event times ({device}); "
             f"busbw = bytes / time x 2(n-1)/n, GB/s", "",
             "| size | " + " | ".join(f"{k} us (busbw)" for k in names) + " | fastest |",
             "| ---: | " + " | ".join("---:" for _ in names) + " | --- |"]
    for r in rows:
        lines.append(f"| {human(r['bytes'])} | "
                     + " | ".join(f"{r['us'][k]:.1f} ({r['busbw'][k]:.1f})" for k in names) + f" | {r['best']} |")
    # Where each wins: the runs of consecutive sizes with the same fastest.
    lines.append("")
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i]["best"] != rows[start]["best"]:
            lines.append(f"- {rows[start]['best']} is fastest from {human(rows[start]['bytes'])} to "
                         f"{human(rows[i - 1]['bytes'])}")
            start = i
    print("\n".join(lines))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "p2p_allreduce.md").write_text("\n".join(lines) + "\n")
        (out / "p2p_allreduce.json").write_text(json.dumps({"devices": n, "device": device, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
