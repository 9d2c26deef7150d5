"""minitensor.utils.data: TensorDataset and DataLoader as torch.utils.data's."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from minitensor.utils.data import DataLoader, TensorDataset


def test_batches_in_order_cover_the_dataset_once() -> None:
    x = np.arange(10 * 3, dtype=np.float32).reshape(10, 3)
    y = np.arange(10, dtype=np.float32)
    loader = DataLoader(TensorDataset(mt.tensor(x), mt.tensor(y)), batch_size=4)
    batches = list(loader)
    assert len(loader) == len(batches) == 3
    assert [b[0].shape for b in batches] == [(4, 3), (4, 3), (2, 3)]
    np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in batches]), x)
    np.testing.assert_array_equal(np.concatenate([b[1].numpy() for b in batches]), y)
    assert len(DataLoader(TensorDataset(mt.tensor(y)), batch_size=4, drop_last=True)) == 2
    assert [b[0].shape[0] for b in DataLoader(TensorDataset(mt.tensor(y)), batch_size=4, drop_last=True)] == [4, 4]


def test_shuffle_is_a_new_permutation_each_epoch_and_follows_the_seed() -> None:
    x = mt.tensor(np.arange(20, dtype=np.float32).reshape(10, 2))  # row i is (2i, 2i + 1)
    y = mt.tensor(np.arange(10, dtype=np.float32))
    mt.manual_seed(3)
    loader = DataLoader(TensorDataset(x, y), batch_size=3, shuffle=True)
    epochs = []
    for _ in range(2):
        xs, ys = zip(*loader)
        order = np.concatenate([b.numpy() for b in ys])
        assert sorted(order.tolist()) == list(range(10))  # every sample once
        np.testing.assert_array_equal(np.concatenate([b.numpy() for b in xs]), np.stack([2 * order, 2 * order + 1], 1))
        epochs.append(order)
    assert not np.array_equal(epochs[0], epochs[1])
    mt.manual_seed(3)
    again = np.concatenate([b[1].numpy() for b in loader])
    np.testing.assert_array_equal(again, epochs[0])
    mine = DataLoader(TensorDataset(y), batch_size=10, shuffle=True, generator=np.random.default_rng(0))
    np.testing.assert_array_equal(next(iter(mine))[0].numpy(), np.random.default_rng(0).permutation(10))


def test_strided_tensors_and_other_datasets() -> None:
    x = mt.tensor(np.arange(12, dtype=np.float64).reshape(3, 4)).T  # 4 rows of a transposed view
    (batch,) = next(iter(DataLoader(TensorDataset(x), batch_size=4)))
    np.testing.assert_array_equal(batch.numpy(), np.arange(12).reshape(3, 4).T)

    class Squares:
        def __len__(self) -> int:
            return 5

        def __getitem__(self, i: int):
            return mt.tensor([float(i)]), float(i * i)

    xs, ys = next(iter(DataLoader(Squares(), batch_size=5)))
    assert xs.shape == (5, 1) and ys.tolist() == [0.0, 1.0, 4.0, 9.0, 16.0]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        TensorDataset(mt.ones(3), mt.ones(4))
    with pytest.raises(ValueError, match="at least one tensor"):
        TensorDataset()
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        DataLoader(TensorDataset(mt.ones(3)), batch_size=0)
    with pytest.raises(TypeError, match="__len__ and __getitem__"):
        DataLoader(3)
    assert len(TensorDataset(mt.ones(3, 2))) == 3 and TensorDataset(mt.ones(3, 2))[1][0].shape == (2,)
    assert list(DataLoader(TensorDataset(mt.zeros(0, 2)), batch_size=2)) == []
