"""The TF32 rung's transposed operands and fused epilogue (src/matmul_tf32_mma.cu):
mt_matmul_tf32 reads a column-major operand (a transposed view, as F.linear's
weight.T or the backward's grad.T) in place, and mt_matmul_tf32_epilogue applies
bias, activation and residual as it stores, so F.linear / F.linear_act stay fused
under mt.backends.cuda.matmul.allow_tf32. Each result is checked against float64
within the TF32 bound of tests/helpers.py (assert_within_tf32)."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from helpers import assert_close, assert_within_tf32
from minitensor import nn
from test_linear_fused import act_np


@pytest.fixture(autouse=True)
def tf32_fast() -> Iterator[None]:
    """TF32 on and the fast kernel policy (the fused rung's), both restored after."""
    mt.backends.cuda.matmul.allow_tf32 = True
    with mt.kernels.policy("fast"):
        yield
    mt.backends.cuda.matmul.allow_tf32 = False


def rand(rng: np.random.Generator, shape: Any) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# (M, K, N): off the 64/128/256 tiles, columns that are 16-byte multiples (read
# in place) and ones that are not (copied), and a batch.
LAYOUT_SHAPES = [(132, 68, 36), (129, 37, 131), (1, 1, 1), (33, 100, 65)]


@pytest.mark.parametrize("a_t", [False, True])
@pytest.mark.parametrize("b_t", [False, True])
@pytest.mark.parametrize("m,k,n", LAYOUT_SHAPES)
def test_transposed_operands_are_within_tf32_rounding(m: int, k: int, n: int, a_t: bool, b_t: bool) -> None:
    rng = np.random.default_rng(m + k + n)
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    ta = mt.tensor(np.ascontiguousarray(a.T)).t() if a_t else mt.tensor(a)
    tb = mt.tensor(np.ascontiguousarray(b.T)).t() if b_t else mt.tensor(b)
    assert ta.is_contiguous() == (not a_t or m == 1 or k == 1)
    got = ta @ tb
    exact = a.astype(np.float64) @ b
    assert_within_tf32(got, exact, np.abs(a).astype(np.float64) @ np.abs(b))
    np.testing.assert_array_equal(got.numpy(), mt.kernels.matmul(ta, tb, "tf32").numpy())


def test_batched_transposed_operands() -> None:
    rng = np.random.default_rng(7)
    a, b = rand(rng, (3, 68, 40)), rand(rng, (40, 72))
    ta = mt.tensor(np.ascontiguousarray(a.transpose(0, 2, 1))).transpose(1, 2)  # (3, 68, 40), column-major
    tb = mt.tensor(np.ascontiguousarray(b.T)).t()
    assert_within_tf32(ta @ tb, a.astype(np.float64) @ b, np.abs(a).astype(np.float64) @ np.abs(b))


ACTS = ("none", "relu", "gelu", "gelu_tanh")


@pytest.mark.parametrize("act", ACTS)
def test_linear_act_is_fused_and_within_tf32_rounding(act: str) -> None:
    rng = np.random.default_rng(1)
    for (rows, k, n), with_bias, with_res in [((2, 65, 68), True, True), ((1, 7, 5), True, False),
                                              ((3, 130, 36), False, True)]:
        x, w = rand(rng, (rows, 9, k)), rand(rng, (n, k))
        b = rand(rng, (n,)) if with_bias else None
        r = rand(rng, (rows, 9, n)) if with_res else None
        xt = mt.tensor(x, requires_grad=True)
        out = F.linear_act(xt, mt.tensor(w), None if b is None else mt.tensor(b), act,
                           None if r is None else mt.tensor(r))
        assert type(out.grad_fn).__name__ == "LinearFused"
        z = x.astype(np.float64) @ w.T.astype(np.float64) + (0.0 if b is None else b)
        terms = np.abs(x).astype(np.float64) @ np.abs(w).T
        y = act_np(z, act) + (0.0 if r is None else r)
        # The activations' slopes are at most ~1.13: y is off by z's error at most 1.2 times.
        assert_within_tf32(out, y, 1.2 * terms + 1e-2 * (1.0 + np.abs(z)))


def test_gradients_match_the_float32_fused_path() -> None:
    rng = np.random.default_rng(3)
    x0, w0, b0, r0 = rand(rng, (4, 33, 40)), rand(rng, (36, 40)), rand(rng, (36,)), rand(rng, (4, 33, 36))
    results = []
    for tf32 in (True, False):
        mt.backends.cuda.matmul.allow_tf32 = tf32
        x = mt.tensor(x0, requires_grad=True)
        w = mt.tensor(w0, requires_grad=True)
        b = mt.tensor(b0, requires_grad=True)
        out = F.linear_act(x, w, b, "gelu", mt.tensor(r0))
        assert type(out.grad_fn).__name__ == "LinearFused"
        (out * out).sum().backward()
        results.append((out.numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()))
    # TF32 loses up to 2^-10 of each product: within 1e-2 of the gradients' scale.
    for got, want in zip(*results):
        scale = np.abs(want).max()
        assert np.abs(got - want).max() <= 1e-2 * scale, (np.abs(got - want).max(), scale)


def test_empty_dims_and_k_zero() -> None:
    b = mt.tensor(np.arange(4, dtype=np.float32))
    assert F.linear_act(mt.zeros(0, 3), mt.ones(4, 3), b, "gelu").shape == (0, 4)
    r = np.ones((2, 4), np.float32)
    out = F.linear_act(mt.zeros(2, 0), mt.zeros(4, 0), b, "relu", mt.tensor(r))
    assert_close(out, np.maximum(np.arange(4.0), 0) + r, mt.float32)


def test_transformer_layer_under_tf32_matches_float32() -> None:
    mt.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
    src = np.random.default_rng(5).standard_normal((2, 9, 32)).astype(np.float32)
    results = []
    for tf32 in (True, False):
        mt.backends.cuda.matmul.allow_tf32 = tf32
        layer.zero_grad()
        out = layer(mt.tensor(src))
        out.sum().backward()
        results.append((out.numpy(), layer.linear1.weight.grad.numpy(), layer.linear2.bias.grad.numpy()))
    for got, want in zip(*results):
        assert np.abs(got - want).max() <= 1e-2 * np.abs(want).max()


def test_the_tf32_epilogue_refuses_a_config_and_float64() -> None:
    x = mt.randn(3, 4)
    out = mt.empty(3, 5)
    with pytest.raises(ValueError, match="config must be -1"):
        mt._lib.matmul_epilogue(out, x, mt.randn(4, 5), config=0, tf32=True)
    x64 = mt.randn(3, 4, dtype=mt.float64)
    out64 = mt.empty(3, 5, dtype=mt.float64)
    with pytest.raises(mt.DTypeError, match="float32"):
        mt._lib.matmul_epilogue(out64, x64, mt.randn(4, 5, dtype=mt.float64), tf32=True)
    # float64 under the switch stays on the float64 epilogue.
    w64 = mt.randn(5, 4, dtype=mt.float64)
    got = F.linear_act(x64, w64, None, "relu")
    assert_close(got, np.maximum(x64.numpy() @ w64.numpy().T, 0.0), mt.float64, n=4)
