"""minitensor.utils.data: datasets and batching, as torch.utils.data.

    from minitensor.utils.data import TensorDataset, DataLoader

    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    for epoch in range(10):
        for xb, yb in loader:          # a new order each epoch
            ...

A TensorDataset's batches are gathered on the device, one gather per tensor
(``Tensor.gather`` along dim 0 with the batch's row indices broadcast over
the other dims), never row by row; any other dataset (an object with
``__len__`` and ``__getitem__``) is batched by stacking its samples.
Shuffling draws a permutation from the package's generator
(``minitensor.manual_seed``) or from the ``generator`` given, a
``numpy.random.Generator``.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence

import numpy as np

from .. import _creation
from .._creation import tensor as _tensor
from .._functions import stack
from ..tensor import Tensor


class TensorDataset:
    """Samples made of the same row of each tensor (every tensor has the same
    length along dim 0): ``dataset[i]`` is ``(t0[i], t1[i], ...)``."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset(): give at least one tensor")
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset(): expected Tensors, got {type(t).__name__}")
            if t.ndim == 0:
                raise ValueError("TensorDataset(): a 0-d tensor has no rows")
        sizes = {t.shape[0] for t in tensors}
        if len(sizes) != 1:
            raise ValueError(f"TensorDataset(): tensors differ in length along dim 0: "
                             f"{[t.shape for t in tensors]}")
        self.tensors = tuple(tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def rows(self, indices: np.ndarray) -> tuple[Tensor, ...]:
        """The rows `indices` of every tensor, each as one gather on the device."""
        index = _tensor(indices.astype(np.int64))
        out = []
        for t in self.tensors:
            idx = index.reshape((len(indices),) + (1,) * (t.ndim - 1))
            out.append(t.gather(0, idx.expand((len(indices),) + t.shape[1:])))
        return tuple(out)


class DataLoader:
    """Batches of a dataset, in order or shuffled anew each epoch (iterate it once
    per epoch). batch_size: samples per batch; drop_last: leave out a last,
    smaller batch."""

    def __init__(self, dataset: Any, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False,
                 generator: Optional[np.random.Generator] = None) -> None:
        if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
            raise TypeError(f"DataLoader(): a dataset needs __len__ and __getitem__, got {type(dataset).__name__}")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"DataLoader(): batch_size must be a positive int, got {batch_size!r}")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.generator = generator

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _order(self) -> np.ndarray:
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        rng = self.generator if self.generator is not None else _creation.numpy_generator()
        return rng.permutation(n)

    def __iter__(self) -> Iterator[Any]:
        order = self._order()
        for start in range(0, len(order), self.batch_size):
            indices = order[start:start + self.batch_size]
            if self.drop_last and len(indices) < self.batch_size:
                return
            if isinstance(self.dataset, TensorDataset):
                yield self.dataset.rows(indices)
            else:
                yield _collate([self.dataset[int(i)] for i in indices])


def _collate(samples: Sequence[Any]) -> Any:
    """A batch from samples: tensors stacked along a new dim 0, tuples of them
    element by element, numbers into a tensor."""
    first = samples[0]
    if isinstance(first, Tensor):
        return stack(list(samples), 0)
    if isinstance(first, (tuple, list)):
        return type(first)(_collate([s[i] for s in samples]) for i in range(len(first)))
    if isinstance(first, (int, float, np.number)):
        return _tensor(np.asarray(samples))
    raise TypeError(f"DataLoader(): cannot batch samples of type {type(first).__name__}")
