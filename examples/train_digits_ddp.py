"""The digits demo (examples/train_digits.py), data-parallel over several processes.

    python -m minitensor.distributed.run --nproc 2 examples/train_digits_ddp.py
    python -m minitensor.distributed.run --nproc 2 examples/train_digits_ddp.py --epochs 3 --batch-size 256

Each rank trains the same MLP (rank 0's initial weights, broadcast by
DistributedDataParallel) on its shard of every epoch (DistributedSampler),
with --batch-size samples per rank per step; gradients are averaged over
ranks after each backward. Only rank 0 prints. At the end rank 0 reports
the held-out accuracy and the training throughput in samples per second
(all ranks together), the number docs/distributed.md compares for 1 and 2 GPUs.
Backend: NCCL between GPUs with the CUDA build, MPI between CPU processes
with the emulator build.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import minitensor as mt  # noqa: E402
import minitensor.distributed as dist  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from examples.train_digits import N_TEST, accuracy, build_model, load_digits  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64, help="samples per rank per step")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-accuracy", type=float, default=0.95)
    args = parser.parse_args()

    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()

    def log(*a: object) -> None:
        if rank == 0:
            print(*a, flush=True)

    log(f"minitensor backend: {mt.backend()}, {world} rank(s) over {dist.get_backend()}; "
        f"rank 0 on {mt.zeros(1).device}: {mt.device_info()}")
    images, labels = load_digits()
    order = np.random.default_rng(args.seed).permutation(len(images))
    test, train = order[:N_TEST], order[N_TEST:]
    x_train, y_train, x_test, y_test = images[train], labels[train], images[test], labels[test]

    mt.manual_seed(args.seed)
    model = build_model()
    std = x_train.std(axis=0)
    model[0].mean.copy_(mt.tensor(x_train.mean(axis=0)))
    model[0].std.copy_(mt.tensor(np.where(std > 0, std, 1.0).astype(np.float32)))
    model = dist.DistributedDataParallel(model)
    optimizer = mt.optim.Adam(model.parameters(), lr=args.lr)
    sampler = dist.DistributedSampler(len(x_train), shuffle=True, seed=args.seed)

    seen, train_seconds = 0, 0.0
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        idx_all = sampler.indices()
        dist.barrier()
        start = time.perf_counter()
        total_loss = 0.0
        for b in range(0, len(idx_all), args.batch_size):
            idx = idx_all[b : b + args.batch_size]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(mt.tensor(x_train[idx])), y_train[idx])
            loss.backward()  # ends with the gradients averaged over ranks
            optimizer.step()
            total_loss += loss.item() * len(idx)
        mt.synchronize()
        dist.barrier()
        seconds = time.perf_counter() - start
        train_seconds += seconds
        seen += len(idx_all) * world
        loss_t = mt.tensor([total_loss / len(idx_all)], dtype=mt.float64)
        dist.all_reduce(loss_t, op="avg")
        log(f"epoch {epoch:2d}/{args.epochs}  loss {loss_t.item():.4f}  {seconds:.2f} s  "
            f"{len(idx_all) * world / seconds:,.0f} samples/s")

    test_accuracy = accuracy(model.module, x_test, y_test)
    log(f"held-out accuracy: {test_accuracy:.2%}; throughput {seen / train_seconds:,.0f} samples/s "
        f"({world} rank(s) x {args.batch_size} samples per step)")
    dist.destroy_process_group()
    return 0 if test_accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
