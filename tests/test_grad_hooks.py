"""Tensor.register_post_accumulate_grad_hook (autograd/engine.py), as torch's:
the hook runs once per backward pass per leaf, after the last gradient of the
pass has been accumulated into .grad (DistributedDataParallel starts its
gradient all-reduces from it)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import minitensor as mt


def test_hook_runs_once_after_the_last_use_of_a_leaf():
    """w is used three times; the hook sees the full gradient, once per pass."""
    w = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
    x = mt.tensor([4.0, 5.0, 6.0])
    ((w * x).sum() + (w * w).sum() + w.sum()).backward()
    want = np.array([4.0, 5.0, 6.0]) + 2 * np.array([1.0, 2.0, 3.0]) + 1
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], want)
    # A second pass accumulates onto .grad; the hook sees the sum, once more.
    (w * x).sum().backward()
    assert len(seen) == 2
    np.testing.assert_allclose(seen[1], want + np.array([4.0, 5.0, 6.0]))


def test_hooks_run_in_the_order_gradients_complete():
    """A chain of layers: the last layer's parameter is complete first, as DDP's buckets assume."""
    mt.manual_seed(0)
    layers = [mt.nn.Linear(4, 4) for _ in range(3)]
    order = []
    for k, layer in enumerate(layers):
        layer.weight.register_post_accumulate_grad_hook(lambda t, k=k: order.append(k))
    h = mt.randn(2, 4)
    for layer in layers:
        h = layer(h).relu()
    h.sum().backward()
    assert order == [2, 1, 0]


def test_remove_and_the_refusals():
    w = mt.tensor([1.0, 2.0], requires_grad=True)
    calls = []
    handle = w.register_post_accumulate_grad_hook(calls.append)
    handle.remove()
    handle.remove()  # a second remove does nothing
    (w * 2).sum().backward()
    assert calls == [] and w.grad is not None
    y = w * 2
    with pytest.raises(RuntimeError, match="non-leaf"):
        y.register_post_accumulate_grad_hook(calls.append)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        mt.tensor([1.0]).register_post_accumulate_grad_hook(calls.append)
    with pytest.raises(TypeError, match="callable"):
        w.register_post_accumulate_grad_hook(3)


def test_a_leaf_that_gets_no_gradient_runs_no_hook_and_backward_on_a_leaf_runs_it():
    a = mt.tensor([1.0, 2.0], requires_grad=True)
    b = mt.tensor([3.0, 4.0], requires_grad=True)
    calls = []
    a.register_post_accumulate_grad_hook(lambda t: calls.append("a"))
    b.register_post_accumulate_grad_hook(lambda t: calls.append("b"))
    (a * 3).sum().backward()
    assert calls == ["a"] and b.grad is None
    b.backward(mt.tensor([1.0, 1.0]))  # backward on the leaf itself
    assert calls == ["a", "b"]


def test_a_freed_leaf_takes_its_hooks_out_of_the_count() -> None:
    """A leaf that dies with hooks still registered no longer makes every
    backward count leaf uses (the process-wide hook count goes back)."""
    from minitensor.autograd import engine

    gc.collect()  # hooked leaves an earlier test left in reference cycles leave the count now, not mid-test
    before = engine._hook_count
    w = mt.ones(3, requires_grad=True)
    handle = w.register_post_accumulate_grad_hook(lambda t: None)
    w.register_post_accumulate_grad_hook(lambda t: None)
    assert engine._hook_count == before + 2
    del w
    gc.collect()
    assert engine._hook_count == before
    handle.remove()  # removing after the leaf is gone changes nothing
    assert engine._hook_count == before
