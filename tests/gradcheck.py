"""gradcheck: analytic gradients against central finite differences (float64).

``gradcheck(fn, arrays)`` runs ``fn(m, *leaves)`` (m: the minitensor adapter of
tests/grad_cases.py) on float64 leaves, backpropagates a random weight per
output element, and compares each leaf's .grad with central differences of
the same weighted sum. A central difference with eps = 1e-6 in float64 is
accurate to about 1e-9 (its rounding error, ~1e-16 * |f| / eps, dominates):
far outside the float64 tolerance of tests/helpers.py but well inside its
float32 tolerance, so the comparison uses the float32 line of that one
policy. A wrong rule is off by O(1), not by 1e-5.
"""

from __future__ import annotations

import numpy as np

import minitensor as mt
from grad_cases import Api
from helpers import assert_close

MT = Api(mt)
EPS = 1e-6


def gradcheck(fn, arrays, seed: int = 0, leaves=None, directions: int = 0) -> None:
    """Analytic gradients of sum(w * fn(m, *leaves)) equal central differences.

    arrays: the leaves' values (float64); leaves: the leaf tensors themselves
    when they are to be strided views (default: new contiguous tensors).
    directions: 0 checks every element of every leaf (two calls of fn each);
    n > 0 checks n random directions per leaf instead, the directional
    derivative grad . u against (f(a + eps u) - f(a - eps u)) / 2 eps, as
    torch's fast gradcheck does: a wrong rule still fails (it is off in almost
    every direction), for 2 n calls a leaf, which the emulator's full checks
    need for kernels whose every launch is slow.
    """
    if leaves is None:
        leaves = [mt.tensor(a, requires_grad=True) for a in arrays]
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    out = fn(MT, *leaves)
    assert out.requires_grad and out.grad_fn is not None
    weights = np.random.default_rng(seed + 1).standard_normal(out.shape)
    (out * mt.tensor(weights)).sum().backward()

    def f(inputs):
        with mt.no_grad():
            return float((fn(MT, *[mt.tensor(a) for a in inputs]).numpy() * weights).sum())

    rng = np.random.default_rng(seed + 2)
    for i, leaf in enumerate(leaves):
        assert leaf.grad is not None, f"input {i} got no gradient"
        assert leaf.grad.shape == leaf.shape and leaf.grad.dtype is mt.float64
        if directions:
            units = [rng.standard_normal(arrays[i].shape) for _ in range(directions)]
            units = [u / np.linalg.norm(u) for u in units]
            analytic = np.array([float((leaf.grad.numpy() * u).sum()) for u in units])
            numeric = np.zeros(directions)
            for j, u in enumerate(units):
                plus = [a.copy() for a in arrays]
                minus = [a.copy() for a in arrays]
                plus[i] += EPS * u
                minus[i] -= EPS * u
                numeric[j] = (f(plus) - f(minus)) / (2 * EPS)
            assert_close(analytic, numeric, mt.float32)
            continue
        numeric = np.zeros(arrays[i].shape)
        for idx in np.ndindex(arrays[i].shape):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[i][idx] += EPS
            minus[i][idx] -= EPS
            numeric[idx] = (f(plus) - f(minus)) / (2 * EPS)
        assert_close(leaf.grad.numpy(), numeric, mt.float32)
