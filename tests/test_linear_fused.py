"""The matmul epilogue (src/matmul_epilogue.cu): F.linear_act, act(x @ W.T + b) + residual
in one kernel, and F.linear's fused bias, against NumPy; its gradients; the unfused
chain under the teaching policy; the transformer's feed-forward that uses it."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from gradcheck import gradcheck
from helpers import assert_close
from minitensor import nn

ACTS = ("none", "relu", "gelu", "gelu_tanh")


def act_np(z: np.ndarray, act: str) -> np.ndarray:
    """The activations in float64, as torch defines them."""
    if act == "none":
        return z
    if act == "relu":
        return np.maximum(z, 0.0)
    if act == "gelu":
        return 0.5 * z * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
    return 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z ** 3)))


def reference(x, w, b, act, r):
    z = x.astype(np.float64) @ w.astype(np.float64).T
    if b is not None:
        z = z + b
    y = act_np(z, act)
    return y if r is None else y + r


def rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("act", ACTS)
def test_forward_matches_numpy_off_the_tile(dtype, act):
    rng = np.random.default_rng(0)
    npt = dtype.np_dtype
    for (m, k, n), with_bias, with_res in [((1, 1, 1), True, False), ((37, 33, 45), True, True),
                                           ((130, 17, 129), False, True), ((7, 64, 5), False, False)]:
        x, w = rand(rng, (m, k), npt), rand(rng, (n, k), npt)
        b = rand(rng, (n,), npt) if with_bias else None
        r = rand(rng, (m, n), npt) if with_res else None
        out = F.linear_act(mt.tensor(x), mt.tensor(w), None if b is None else mt.tensor(b), act,
                           None if r is None else mt.tensor(r))
        assert_close(out, reference(x, w, b, act, r), dtype, n=k)


@pytest.fixture
def fast_policy():
    """The fused rung runs under the fast policy only (teaching keeps the
    course's chain): tests of the fused path itself pin it."""
    with mt.kernels.policy("fast"):
        yield


@pytest.mark.usefixtures("fast_policy")
def test_linear_with_bias_is_fused_and_matches_numpy():
    rng = np.random.default_rng(1)
    x, w, b = rand(rng, (2, 5, 40), np.float32), rand(rng, (24, 40), np.float32), rand(rng, (24,), np.float32)
    xt = mt.tensor(x, requires_grad=True)
    out = F.linear(xt, mt.tensor(w), mt.tensor(b))
    assert type(out.grad_fn).__name__ == "LinearFused"
    assert_close(out, reference(x, w, b, "none", None), mt.float32, n=40)


def test_strided_batched_and_broadcast_operands():
    rng = np.random.default_rng(2)
    base = rand(rng, (3, 40, 9, 2), np.float32)
    x = mt.tensor(base)[:, ::2, :, 0]  # (3, 20, 9), not contiguous
    w_t = rand(rng, (9, 13), np.float32)
    w = mt.tensor(w_t).t()  # (13, 9), a transposed view
    b = mt.tensor(rand(rng, (26,), np.float32))[::2]  # a strided bias
    r = rand(rng, (13,), np.float32)  # broadcast over every row
    out = F.linear_act(x, w, b, "gelu", mt.tensor(r))
    assert_close(out, reference(base[:, ::2, :, 0], w_t.T, b.numpy(), "gelu", r), mt.float32, n=9)
    # A non-contiguous residual of the result's shape, and a 1-D input.
    rr = rand(rng, (20, 3, 13), np.float32)
    out = F.linear_act(x, w, b, "relu", mt.tensor(rr).permute(1, 0, 2))
    assert_close(out, reference(base[:, ::2, :, 0], w_t.T, b.numpy(), "relu", rr.transpose(1, 0, 2)),
                 mt.float32, n=9)
    v = rand(rng, (9,), np.float32)
    out = F.linear_act(mt.tensor(v), w, b, "gelu_tanh")
    assert out.shape == (13,)
    assert_close(out, reference(v, w_t.T, b.numpy(), "gelu_tanh", None), mt.float32, n=9)


def test_empty_dims():
    b = mt.tensor(np.arange(4, dtype=np.float32))
    assert F.linear_act(mt.zeros(0, 3), mt.ones(4, 3), b, "gelu").shape == (0, 4)
    assert F.linear_act(mt.zeros(2, 3), mt.ones(0, 3), mt.zeros(0), "relu").shape == (2, 0)
    # in_features 0: the sums are empty, out = act(bias) + residual.
    r = np.ones((2, 4), np.float32)
    out = F.linear_act(mt.zeros(2, 0), mt.zeros(4, 0), b, "relu", mt.tensor(r))
    assert_close(out, np.maximum(np.arange(4.0), 0) + r, mt.float32)


@pytest.mark.parametrize("act", ACTS)
def test_gradients(act):
    rng = np.random.default_rng(3)
    x, w, b, r = rand(rng, (2, 5, 6), np.float64), rand(rng, (7, 6), np.float64), \
        rand(rng, (7,), np.float64), rand(rng, (7,), np.float64)
    gradcheck(lambda m, x, w, b, r: m.nn.functional.linear_act(x, w, b, act, r), [x, w, b, r])
    gradcheck(lambda m, x, w: m.nn.functional.linear_act(x, w, None, act), [x[0], w])


def test_gradients_of_strided_leaves_match_the_unfused_chain():
    rng = np.random.default_rng(4)
    x0, w0, b0 = rand(rng, (9, 4, 6), np.float32), rand(rng, (6, 5), np.float32), rand(rng, (5,), np.float32)
    grads = []
    for policy in ("fast", "teaching"):
        with mt.kernels.policy(policy):
            x = mt.tensor(x0, requires_grad=True)
            w = mt.tensor(w0, requires_grad=True)
            b = mt.tensor(b0, requires_grad=True)
            out = F.linear_act(x.permute(1, 0, 2), w.t(), b, "gelu", x[:, 0, :5])
            assert (type(out.grad_fn).__name__ == "LinearFused") == (policy == "fast")
            (out * out).sum().backward()
            grads.append((out.numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()))
    for fused, chain in zip(*grads):
        assert_close(fused, chain, mt.float32, n=64)


def test_only_the_residual_requires_grad():
    r = mt.randn(3, 5, requires_grad=True)
    out = F.linear_act(mt.randn(3, 4), mt.randn(5, 4), mt.randn(5), "gelu", r)
    (out * 2.0).sum().backward()
    assert_close(r.grad, np.full((3, 5), 2.0), mt.float32)


def test_no_grad_saves_nothing_and_teaching_keeps_the_chain():
    x, w, b = mt.randn(3, 4), mt.randn(5, 4, requires_grad=True), mt.randn(5)
    with mt.no_grad():
        assert F.linear_act(x, w, b, "gelu").grad_fn is None
    with mt.kernels.policy("teaching"):
        assert type(F.linear(x, w, b).grad_fn).__name__ != "LinearFused"


@pytest.mark.usefixtures("fast_policy")
def test_bad_arguments_name_the_shapes():
    x, w = mt.randn(3, 4), mt.randn(5, 4)
    with pytest.raises(mt.ShapeError, match=r"bias has shape \(4,\)"):
        F.linear_act(x, w, mt.randn(4))
    with pytest.raises(mt.ShapeError, match="in_features"):
        F.linear_act(mt.randn(3, 5), w, None, "relu")
    with pytest.raises(mt.ShapeError, match="residual"):
        F.linear_act(x, w, None, "relu", mt.randn(2, 5))
    with pytest.raises(mt.DTypeError, match="share a float dtype"):
        F.linear_act(x, w, mt.randn(5, dtype=mt.float64))
    with pytest.raises(ValueError, match="activation"):
        F.linear_act(x, w, None, "swish")


@pytest.mark.parametrize("activation, norm_first", [("relu", False), ("gelu", True)])
def test_transformer_feed_forward_fused_equals_chain(activation, norm_first):
    mt.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=40, dropout=0.0, activation=activation,
                                       batch_first=True, norm_first=norm_first)
    src = np.random.default_rng(5).standard_normal((2, 7, 16)).astype(np.float32)
    results = []
    for policy in ("fast", "teaching"):
        with mt.kernels.policy(policy):
            layer.zero_grad()
            out = layer(mt.tensor(src))
            out.sum().backward()
            results.append((out.numpy(), layer.linear1.weight.grad.numpy(), layer.linear2.bias.grad.numpy()))
    for fused, chain in zip(*results):
        assert_close(fused, chain, mt.float32, n=64)
