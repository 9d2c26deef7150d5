"""DistributedSampler: which samples (indices) this rank trains on.

    sampler = DistributedSampler(len(x_train), shuffle=True, seed=0)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)           # a new shuffle each epoch, the same on every rank
        idx = np.fromiter(sampler, int)    # this rank's share: len(sampler) indices
        ...

As torch's: every rank draws the same permutation (seed + epoch), pads it by
repeating its start (or drops the tail, drop_last=True) to a multiple of the
world size, and keeps every world_size-th index starting at its rank, so the
shards are disjoint, equally long and together cover the data.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

import numpy as np


class DistributedSampler:
    def __init__(self, dataset: Any, num_replicas: Optional[int] = None, rank: Optional[int] = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        from .collectives import get_rank, get_world_size

        self.n = dataset if isinstance(dataset, (int, np.integer)) else len(dataset)
        self.num_replicas = get_world_size() if num_replicas is None else num_replicas
        self.rank = get_rank() if rank is None else rank
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"DistributedSampler: rank {self.rank} is not in 0..{self.num_replicas - 1}")
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        if drop_last:
            self.num_samples = self.n // self.num_replicas
        else:
            self.num_samples = -(-self.n // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Changes the shuffle (call it at the start of each epoch, on every rank)."""
        self.epoch = epoch

    def indices(self) -> np.ndarray:
        """This rank's indices for the current epoch, as an array."""
        if self.shuffle:
            order = np.random.default_rng(self.seed + self.epoch).permutation(self.n)
        else:
            order = np.arange(self.n)
        if self.total_size > len(order):
            reps = -(-self.total_size // max(len(order), 1))
            order = np.concatenate([order] * reps)[: self.total_size]
        else:
            order = order[: self.total_size]
        return order[self.rank : self.total_size : self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        return iter(int(i) for i in self.indices())

    def __len__(self) -> int:
        return self.num_samples
