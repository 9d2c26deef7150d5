"""All-reduce bandwidth of minitensor.distributed, reported as nccl-tests does.

    python -m minitensor.distributed.run --nproc 2 bench/allreduce_bw.py [--max-mb 1024] [--out FILE]

For float32 buffers from 1 KB to --max-mb, every rank calls all_reduce
(op="sum", in place) --iters times after warm-up; the time is the mean per
call (each call waits for completion, as nccl-tests' default does per
iteration). As in nccl-tests' PERFORMANCE.md:
    algbw = bytes / time
    busbw = algbw * 2 (n - 1) / n        (n ranks; what a ring moves per link)
busbw is the number to compare with the link's speed (NVLink on H200s). Rank
0 prints a table and writes it as markdown to --out.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import minitensor as mt  # noqa: E402
import minitensor.distributed as dist  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-kb", type=float, default=1)
    parser.add_argument("--max-mb", type=float, default=1024)
    parser.add_argument("--factor", type=int, default=4)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = []
    nbytes = int(args.min_kb * 1024)
    while nbytes <= args.max_mb * 1024 * 1024:
        n = nbytes // 4
        t = mt.ones(n)
        iters = 200 if nbytes <= (1 << 20) else (50 if nbytes <= (64 << 20) else 10)
        for _ in range(5):
            dist.all_reduce(t)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        seconds = (time.perf_counter() - start) / iters
        algbw = nbytes / seconds / 1e9
        busbw = algbw * 2 * (world - 1) / world
        rows.append((nbytes, seconds * 1e6, algbw, busbw))
        if rank == 0:
            print(f"{nbytes:>12,d} B  {seconds * 1e6:10.1f} us  algbw {algbw:8.2f} GB/s  busbw {busbw:8.2f} GB/s",
                  flush=True)
        del t
        nbytes *= args.factor
    if rank == 0 and args.out:
        lines = ["| size | time (us) | algbw (GB/s) | busbw (GB/s) |", "| ---: | ---: | ---: | ---: |"]
        for nbytes, us, algbw, busbw in rows:
            size = f"{nbytes / 2**30:g} GiB" if nbytes >= 2**30 else (
                f"{nbytes / 2**20:g} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:g} KiB")
            lines.append(f"| {size} | {us:.1f} | {algbw:.2f} | {busbw:.2f} |")
        Path(args.out).write_text("\n".join(lines) + "\n")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
