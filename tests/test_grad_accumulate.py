"""How backward fills a leaf's .grad the first time (autograd/engine.py's
_accumulate): the rule's result itself when nothing else can see it, as torch's
AccumulateGrad steals it, else a copy. A stolen gradient saves a pass over the
whole gradient; a wrongly stolen one would make .grad an alias of a tensor
someone else holds, so each way a gradient can be shared is checked here."""

from __future__ import annotations

import math

import numpy as np

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import _lib
from minitensor.autograd import engine


def leaf(shape: tuple[int, ...] = (3, 4), seed: int = 0) -> mt.Tensor:
    return mt.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), requires_grad=True)


def test_a_fresh_gradient_becomes_grad_without_a_copy():
    x = leaf()
    _lib.reset_launch_counts()
    F.gelu(x).sum().backward()
    if _lib.launch_count("map_contiguous_vec") >= 0 and engine._COUNTS_REFERENCES:
        # gelu, the sum, the seed and gelu's backward: no copy into .grad.
        assert _lib.launch_count("map_contiguous_vec", "map_cast") == 0
        assert _lib.launch_count("map_contiguous", "map_cast") == 0
    v = x.detach().numpy().astype(np.float64)
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0)))
    np.testing.assert_allclose(x.grad.numpy(), cdf + v * np.exp(-0.5 * v * v) / math.sqrt(2 * math.pi),
                               rtol=1e-5, atol=1e-6)


class Cached(mt.autograd.Function):
    """A rule whose backward returns a tensor it keeps (a user's cache)."""

    kept: mt.Tensor

    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, grad):
        return Cached.kept


def test_a_gradient_the_rule_keeps_is_copied():
    x = leaf()
    Cached.kept = mt.ones(3, 4)
    Cached.apply(x).sum().backward()
    x.grad += 1.0
    assert np.array_equal(Cached.kept.numpy(), np.ones((3, 4), np.float32))
    assert np.array_equal(x.grad.numpy(), np.full((3, 4), 2.0, np.float32))


class Same(mt.autograd.Function):
    """A rule that returns one fresh tensor for both of its inputs."""

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        g = grad * 1.0
        return g, g


def test_one_gradient_for_two_leaves_gives_two_tensors():
    a, b = leaf(seed=1), leaf(seed=2)
    Same.apply(a, b).sum().backward()
    a.grad += 1.0
    assert np.array_equal(b.grad.numpy(), np.ones((3, 4), np.float32))
    assert np.array_equal(a.grad.numpy(), np.full((3, 4), 2.0, np.float32))


def test_the_upstream_gradient_and_its_views_are_copied():
    x, y = leaf(seed=3), leaf(seed=4)
    out = x + y  # the rule passes its incoming gradient on to both
    seed = mt.ones(3, 4)
    out.backward(seed)
    x.grad += 1.0
    assert np.array_equal(seed.numpy(), np.ones((3, 4), np.float32))
    assert np.array_equal(y.grad.numpy(), np.ones((3, 4), np.float32))
    z = leaf((12,), seed=5)
    w = z.reshape(3, 4) * 1.0  # reshape's backward: a view of mul's result
    w.backward(seed)
    z.grad += 1.0
    assert np.array_equal(seed.numpy(), np.ones((3, 4), np.float32))


def test_a_gradient_saved_elsewhere_is_copied():
    """A leaf's gradient that a retained non-leaf's .grad shares is not stolen."""
    x = leaf(seed=6)
    y = x * 1.0
    y.retain_grad()
    y.sum().backward()
    x.grad += 1.0
    assert np.array_equal(y.grad.numpy(), np.ones((3, 4), np.float32))


def test_a_second_backward_adds_into_the_stolen_gradient():
    x = leaf(seed=7)
    F.silu(x).sum().backward()
    first = x.grad.numpy().copy()
    F.silu(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-6)
