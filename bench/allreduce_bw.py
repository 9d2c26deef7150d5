"""All-reduce time and bandwidth of minitensor.distributed, beside torch.distributed.

    python -m minitensor.distributed.run --nproc 4 bench/allreduce_bw.py [--sizes 1K,16M,256M] [--torch] [--out FILE]

For float32 buffers of each size, every rank calls all_reduce(op="sum", in
place) after warm-up, two ways:
  - queued: ``iters`` calls back to back, then one synchronize; the time per
    call (nccl-tests' way: the collectives follow each other on the stream,
    and the host's cost per call hides behind the device's unless it is
    the larger one). This is the number the targets compare.
  - waited: each call followed by a synchronize (the host waits for every
    collective): launch, collective and wake-up, one after the other.
With --torch, torch.distributed (NCCL, same GPUs, same process, its own
communicator) is timed the same way right after. As in nccl-tests'
PERFORMANCE.md:
    algbw = bytes / time
    busbw = algbw * 2 (n - 1) / n        (n ranks; what a ring moves per link)
Rank 0 prints a table and writes it as markdown to --out. Sizes take K, M
and G suffixes (powers of 1024); without --sizes: 1K to --max-mb by --factor.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import minitensor as mt  # noqa: E402
import minitensor.distributed as dist  # noqa: E402


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def label(nbytes: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:g} {unit}"
    return f"{nbytes} B"


def iterations(nbytes: int) -> int:
    return 400 if nbytes <= (1 << 20) else (60 if nbytes <= (64 << 20) else 15)


def timed(call: Callable[[], Any], sync: Callable[[], None], barrier: Callable[[], None],
          iters: int) -> tuple[float, float]:
    """(queued, waited) seconds per call."""
    for _ in range(10):
        call()
    sync()
    barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    sync()
    queued = (time.perf_counter() - start) / iters
    barrier()
    n = max(iters // 4, 5)
    start = time.perf_counter()
    for _ in range(n):
        call()
        sync()
    waited = (time.perf_counter() - start) / n
    return queued, waited


def torch_setup(rank: int, world: int, local_rank: int) -> Optional[Any]:
    """torch.distributed over NCCL on this rank's GPU, or None where torch or a GPU is missing."""
    try:
        import torch
        import torch.distributed as tdist
    except ImportError:
        return None
    if not torch.cuda.is_available() or mt.backend() != "cuda":
        return None
    torch.cuda.set_device(local_rank)
    port = int(os.environ.get("MASTER_PORT", "29500")) + 1  # the launcher's port + 1: its own store
    tdist.init_process_group("nccl", init_method=f"tcp://{os.environ.get('MASTER_ADDR', '127.0.0.1')}:{port}",
                             rank=rank, world_size=world)
    return torch


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=None, help="comma-separated sizes, e.g. 1K,16M,256M")
    parser.add_argument("--min-kb", type=float, default=1)
    parser.add_argument("--max-mb", type=float, default=1024)
    parser.add_argument("--factor", type=int, default=4)
    parser.add_argument("--iters", type=int, default=None, help="calls per size (default: by size)")
    parser.add_argument("--torch", action="store_true", help="also time torch.distributed's all_reduce")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.sizes:
        sizes = [parse_size(s) for s in args.sizes.split(",")]
    else:
        sizes, nbytes = [], int(args.min_kb * 1024)
        while nbytes <= args.max_mb * 1024 * 1024:
            sizes.append(nbytes)
            nbytes *= args.factor
    torch = torch_setup(rank, world, dist.get_local_rank()) if args.torch else None
    if args.torch and torch is None and rank == 0:
        print("(--torch: torch with CUDA is not here, or this is the emulator: minitensor only)", flush=True)
    bus = 2 * (world - 1) / world if world > 1 else 1.0
    rows = []
    if rank == 0:
        print(f"{world} ranks, backend {dist.get_backend()}; us per call (queued | waited), busbw GB/s of queued",
              flush=True)
    for nbytes in sizes:
        n = max(nbytes // 4, 1)
        iters = args.iters or iterations(nbytes)
        t = mt.ones(n)
        mine = timed(lambda: dist.all_reduce(t), mt.synchronize, dist.barrier, iters)
        del t
        theirs = None
        if torch is not None:
            import torch.distributed as tdist

            tt = torch.ones(n, device="cuda")
            theirs = timed(lambda: tdist.all_reduce(tt), torch.cuda.synchronize, tdist.barrier, iters)
            del tt
        rows.append((nbytes, mine, theirs))
        if rank == 0:
            line = (f"{label(nbytes):>9}  minitensor {mine[0] * 1e6:9.1f} | {mine[1] * 1e6:9.1f} us  "
                    f"busbw {nbytes / mine[0] / 1e9 * bus:7.1f}")
            if theirs is not None:
                line += (f"   torch {theirs[0] * 1e6:9.1f} | {theirs[1] * 1e6:9.1f} us  busbw "
                         f"{nbytes / theirs[0] / 1e9 * bus:7.1f}   time mt/torch {mine[0] / theirs[0]:.2f}x "
                         f"(waited {mine[1] / theirs[1]:.2f}x)")
            print(line, flush=True)
    if rank == 0 and args.out:
        head = "| size | minitensor queued (us) | waited (us) | busbw (GB/s) |"
        rule = "| ---: | ---: | ---: | ---: |"
        if torch is not None:
            head += " torch queued (us) | waited (us) | busbw (GB/s) | time mt / torch (queued, waited) |"
            rule += " ---: | ---: | ---: | ---: |"
        lines = [f"{world} ranks ({dist.get_backend()})", "", head, rule]
        for nbytes, mine, theirs in rows:
            line = (f"| {label(nbytes)} | {mine[0] * 1e6:.1f} | {mine[1] * 1e6:.1f} | "
                    f"{nbytes / mine[0] / 1e9 * bus:.1f} |")
            if theirs is not None:
                line += (f" {theirs[0] * 1e6:.1f} | {theirs[1] * 1e6:.1f} | {nbytes / theirs[0] / 1e9 * bus:.1f} | "
                         f"{mine[0] / theirs[0]:.2f}x, {mine[1] / theirs[1]:.2f}x |")
            lines.append(line)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(lines) + "\n")
    if torch is not None:
        import torch.distributed as tdist

        tdist.destroy_process_group()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
