"""Device memory: storages are freed with their last tensor, and a long loop
of ops (a small training step, errors included) leaves memory in use flat."""

from __future__ import annotations

import gc

import pytest

import minitensor as mt


def in_use() -> int:
    gc.collect()
    return mt.memory_in_use()


def test_storage_is_freed_with_its_last_view() -> None:
    start = in_use()
    t = mt.zeros(1000, dtype=mt.float64)
    assert in_use() >= start + 8000
    v = t[10:20].unsqueeze(0).expand(3, 10)
    del t
    assert in_use() >= start + 8000  # the view keeps the storage alive
    assert v.sum().item() == 0.0
    del v
    assert in_use() == start


def test_empty_tensors_allocate_nothing() -> None:
    start = in_use()
    e = mt.zeros(0, 5)
    assert in_use() == start
    assert (e + 1).shape == (0, 5)
    del e


def test_long_loop_of_ops_does_not_leak() -> None:
    mt.manual_seed(0)
    w = mt.randn(8, 4) * 0.1
    b = mt.zeros(4)
    x = mt.randn(16, 8)
    target = mt.rand(16, 4)

    def step(i: int) -> None:
        nonlocal w
        h = (x @ w + b).relu()  # 16,4
        p = mt.softmax(h, 1)
        loss = ((p - target) ** 2).mean()
        g = x.T @ (p - target)  # 8,4 (not the true gradient; exercises the ops)
        w = w - 0.01 * g
        _ = mt.logsumexp(h, 1).sum() + loss + h[:, 1:3].max() + h.argmax(1).sum()
        if i % 10 == 0:
            with pytest.raises(ValueError):
                h + mt.ones(5)  # a failed op must not leak either
            with pytest.raises(mt.MinitensorError):
                h.gather(1, mt.full((16, 1), 99.0))

    for i in range(20):  # warm up caches and pools
        step(i)
    start = in_use()
    for i in range(2000):
        step(i)
    assert in_use() == start
