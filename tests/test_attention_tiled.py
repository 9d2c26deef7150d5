"""The tiled rung of attention (src/attention_tiled.cu, mt.kernels.attention(...,
"tiled")): the output and the gradients of q, k and v against NumPy written from
the formulas (tests/test_attention_warp.py's reference), with and without the
causal mask, head dims 32, 64 and 128, both query blocks (64, 128), lengths off
its blocks and tiles, one query and one key, non-contiguous inputs; central
differences in float64; the refusals."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

import minitensor as mt
from gradcheck import gradcheck
from helpers import all_cases, assert_close
from test_attention_warp import ref_attention

# (dtype, head dim, queries, block) that run on the emulator: a partial block
# and tile of each query block, the largest head dim, float64, one query;
# each with one of the masks (the case's full-checked launches take minutes
# of CPU a mask): causal for the 128-query block and float64, not for the
# 64-query block and the default block of float32 (128 queries unmasked).
# tests/c/test_attention_tiled.c runs both masks on most of these classes.
EMULATOR_CASES = {(mt.float32, 64, 70, 64): (False,), (mt.float32, 128, 70, 128): (True,),
                  (mt.float32, 32, 1, 0): (False,), (mt.float64, 64, 70, 0): (True,)}


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("d", [32, 64, 128])
@pytest.mark.parametrize("length, keys", [(1, 1), (70, 45), (37, 130), (200, 200)])
@pytest.mark.parametrize("block", [0, 64, 128])
def test_tiled_rung_matches_numpy(dtype, d, length, keys, block) -> None:
    if block == 128 and dtype is mt.float64:
        pytest.skip("128 queries a block is for float32 only (test_tiled_rung_refuses)")
    if not all_cases() and (dtype, d, length, block) not in EMULATOR_CASES:
        pytest.skip("the emulator runs a few of these cases (tests/c/test_attention_tiled.c more); "
                    "the GPU runs them all")
    rng = np.random.default_rng(d + length + block)
    q, k, v = (rng.standard_normal((2, n, d)) for n in (length, keys, keys))
    dout = rng.standard_normal((2, length, d))
    for causal in (False, True) if all_cases() else EMULATOR_CASES[dtype, d, length, block]:
        ts = [mt.tensor(a, dtype=dtype, requires_grad=True) for a in (q, k, v)]
        out = mt.kernels.attention(*ts, "tiled", causal=causal, block_queries=block)
        out.backward(mt.tensor(dout, dtype=dtype))
        want = ref_attention(q, k, v, dout, 1 / math.sqrt(d), causal)
        assert_close(out, want[0], dtype, n=keys * d)
        for t, w, n in zip(ts, want[1:], (keys * d, length * d, length)):
            assert_close(t.grad, w, dtype, n=n * d)


def test_tiled_rung_on_views_and_a_scale() -> None:
    """q a transposed view (B, H, L, E) of (B, L, H, E), k a slice: made
    contiguous on the way in; a scale other than 1/sqrt(E)."""
    rng = np.random.default_rng(7)
    qa, ka, va = rng.standard_normal((2, 20, 2, 32)), rng.standard_normal((2, 2, 30, 32)), \
        rng.standard_normal((2, 2, 24, 32))
    q = mt.tensor(qa, dtype=mt.float32).transpose(1, 2)
    k = mt.tensor(ka, dtype=mt.float32)[:, :, 3:27]
    out = mt.kernels.attention(q, k, mt.tensor(va, dtype=mt.float32), "tiled", causal=True, scale=0.3)
    want = ref_attention(np.swapaxes(qa, 1, 2), ka[:, :, 3:27], va, np.zeros((2, 2, 20, 32)), 0.3, True)
    assert_close(out, want[0], mt.float32, n=24 * 32)


@pytest.mark.parametrize("causal", [False, True])
def test_tiled_rung_gradcheck(causal) -> None:
    """Central differences in float64 (the tiled rung's float64 kernels), in
    random directions a leaf: each launch is slow under the emulator's full
    checks, and every element (608 of them, 2 launches each) took minutes.
    The emulator checks 3 directions a leaf (18 launches, about 70 s a case
    at 8): a wrong rule is off in almost every direction, and
    test_tiled_rung_matches_numpy checks the float64 gradients element by
    element; the GPU (or MT_TEST_ALL_CASES=1) checks 8."""
    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal((1, n, 32)) for n in (5, 7, 7)]
    gradcheck(lambda m, q, k, v: mt.kernels.attention(q, k, v, "tiled", causal=causal), arrays,
              directions=8 if all_cases() else 3)


def test_tiled_rung_refuses() -> None:
    q = mt.tensor(np.ones((1, 4, 16), np.float32))
    with pytest.raises(ValueError, match="tiled rung takes head dims"):
        mt.kernels.attention(q, q, q, "tiled")
    q64 = mt.tensor(np.ones((1, 4, 64), np.float32))
    with pytest.raises(ValueError, match="block_queries 32"):
        mt.kernels.attention(q64, q64, q64, "tiled", block_queries=32)
    with pytest.raises(ValueError, match="the other rungs 0 only"):
        mt.kernels.attention(q64, q64, q64, "warp", block_queries=64)
    with pytest.raises(ValueError, match="float32 only"):
        d64 = mt.tensor(np.ones((1, 4, 64)))
        mt.kernels.attention(d64, d64, d64, "tiled", block_queries=128)


@pytest.mark.parametrize("rung", ["tiled/warp", "warp/tiled"])
def test_forward_of_one_rung_backward_of_another(rung) -> None:
    """A rung "F/B" (what ops.fused_attention_rung may choose) runs F's forward
    and B's backward: the lse each one-kernel rung saves is the same. One
    batch element on the emulator (the second only doubles the blocks)."""
    rng = np.random.default_rng(13)
    q, k, v, dout = (rng.standard_normal((2 if all_cases() else 1, 70, 64)) for _ in range(4))
    ts = [mt.tensor(a, dtype=mt.float32, requires_grad=True) for a in (q, k, v)]
    out = mt.autograd.Attention.apply(*ts, 0.125, True, rung)
    out.backward(mt.tensor(dout, dtype=mt.float32))
    want = ref_attention(q, k, v, dout, 0.125, True)
    assert_close(out, want[0], mt.float32, n=70 * 64)
    for t, w in zip(ts, want[1:]):
        assert_close(t.grad, w, mt.float32, n=70 * 64 * 2)


# (head dim, queries, keys, block) of the 2-rows-a-thread forward that run on
# the emulator: a partial block and tile of each query block, one query.
EMULATOR_ROW_CASES = {(128, 70, 45, 64), (64, 130, 33, 128), (32, 1, 1, 0)}


@pytest.mark.parametrize("d", [32, 64, 128])
@pytest.mark.parametrize("length, keys", [(1, 1), (70, 45), (130, 33), (200, 200)])
@pytest.mark.parametrize("block", [0, 64, 128])
def test_tiled_forward_with_two_rows_a_thread_matches_numpy(d, length, keys, block) -> None:
    """thread_rows 2 (twice the threads a block, each half the rows): the output
    and, through the backward that the forward's lse feeds, the gradients as
    NumPy's, with and without the causal mask."""
    if mt.backend() != "cuda" and (d, length, keys, block) not in EMULATOR_ROW_CASES:
        pytest.skip("the emulator runs a few of these cases (tests/c/test_attention_tiled.c more)")
    rng = np.random.default_rng(3 * d + length + block)
    q, k, v = (rng.standard_normal((2, n, d)) for n in (length, keys, keys))
    dout = rng.standard_normal((2, length, d))
    for causal in (False, True):
        ts = [mt.tensor(a, dtype=mt.float32, requires_grad=True) for a in (q, k, v)]
        out = mt.kernels.attention(*ts, "tiled", causal=causal, block_queries=block, thread_rows=2)
        out.backward(mt.tensor(dout, dtype=mt.float32))
        want = ref_attention(q, k, v, dout, 1 / math.sqrt(d), causal)
        assert_close(out, want[0], mt.float32, n=keys * d)
        for t, w, n in zip(ts, want[1:], (keys * d, length * d, length)):
            assert_close(t.grad, w, mt.float32, n=n * d)


def test_tiled_rung_refuses_rows_a_thread() -> None:
    q64 = mt.tensor(np.ones((1, 4, 64), np.float32))
    with pytest.raises(ValueError, match="thread_rows 3"):
        mt.kernels.attention(q64, q64, q64, "tiled", thread_rows=3)
    with pytest.raises(ValueError, match="the other rungs 0 only"):
        mt.kernels.attention(q64, q64, q64, "warp", thread_rows=2)
    with pytest.raises(ValueError, match="float32 only"):
        d64 = mt.tensor(np.ones((1, 4, 64)))
        mt.kernels.attention(d64, d64, d64, "tiled", thread_rows=2)


def test_attention_takes_leading_dims_as_one_node() -> None:
    """autograd.Attention over (B, H, L, E) directly (the leading dims merged by
    views inside ops.attention, no reshape node): the output, its graph of one
    node, and the gradients as over the (B*H, L, E) reshapes."""
    rng = np.random.default_rng(17)
    q, k, v, dout = (rng.standard_normal((2, 3, n, 32)) for n in (9, 11, 11, 9))
    dout = dout[:, :, :9]
    ts = [mt.tensor(a, dtype=mt.float32, requires_grad=True) for a in (q, k, v)]
    out = mt.autograd.Attention.apply(*ts, 0.2, True, "tiled/warp")
    assert out.shape == (2, 3, 9, 32)
    assert all(t.grad_fn is None for t in ts) and type(out.grad_fn).__name__.startswith("Attention")
    out.backward(mt.tensor(dout, dtype=mt.float32))
    want = ref_attention(q, k, v, dout, 0.2, True)
    assert_close(out, want[0], mt.float32, n=11 * 32)
    for t, w in zip(ts, want[1:]):
        assert_close(t.grad, w, mt.float32, n=11 * 32 * 2)


def test_sdpa_takes_the_matmul_rung_where_it_is_faster_with_a_gradient(monkeypatch) -> None:
    """ops.ATTENTION_MATMUL_WITH_GRAD: where the matmul, masked softmax, matmul
    rung measured faster forward + backward, sdpa runs it when a gradient is
    wanted, and the one-kernel rung when none is (no_grad, or no input that
    requires one); past ATTENTION_MATMUL_MAX_SCORES stored scores the one-kernel
    rung again. The same results either way."""
    chosen = []
    fused = mt.nn.functional._fused_attention
    monkeypatch.setattr(mt.nn.functional, "_fused_attention", lambda *a: chosen.append(a[5]) or fused(*a))
    rules = importlib.import_module("minitensor.ops.attention")  # mt.ops.attention is the function
    monkeypatch.setattr(rules, "ATTENTION_MATMUL_WITH_GRAD", {(32, False): 16})
    rng = np.random.default_rng(19)
    q, k, v, dout = (rng.standard_normal((1, 2, 20, 32)) for _ in range(4))
    want = ref_attention(q, k, v, dout, 1 / math.sqrt(32), False)
    with mt.kernels.policy("fast"):
        ts = [mt.tensor(a, dtype=mt.float32, requires_grad=True) for a in (q, k, v)]
        out = mt.nn.functional.scaled_dot_product_attention(*ts)
        assert chosen == []  # the matmul rung
        out.backward(mt.tensor(dout, dtype=mt.float32))
        assert_close(out, want[0], mt.float32, n=20 * 32)
        for t, w in zip(ts, want[1:]):
            assert_close(t.grad, w, mt.float32, n=20 * 32 * 2)
        with mt.no_grad():
            out = mt.nn.functional.scaled_dot_product_attention(*ts)
        assert len(chosen) == 1
        assert_close(out, want[0], mt.float32, n=20 * 32)
        mt.nn.functional.scaled_dot_product_attention(*(t.detach() for t in ts))
        mt.nn.functional.scaled_dot_product_attention(*ts, is_causal=True)  # not in the table
        monkeypatch.setattr(rules, "ATTENTION_MATMUL_MAX_SCORES", 2 * 20 * 20 - 1)
        mt.nn.functional.scaled_dot_product_attention(*ts)
        assert len(chosen) == 4
