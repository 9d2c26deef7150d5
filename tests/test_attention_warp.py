"""The warp rung of attention (src/attention_warp.cu, mt.kernels.attention(...,
"warp")) and F.scaled_dot_product_attention's choice of it: the output and the
gradients of q, k and v against NumPy written from the formulas, with and
without the causal mask, head dims 32, 64 and 128, lengths off the kernels'
64-query blocks and 32/64-key tiles, non-contiguous inputs and broadcast
batch dims."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from helpers import assert_close


def ref_attention(q, k, v, dout, scale, causal):
    """softmax(q k^T * scale [causal]) v and its gradients, in float64:
    dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K * scale,
    dK = dS^T Q * scale."""
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = p @ v
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dout * out).sum(-1, keepdims=True))
    return out, ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, np.swapaxes(p, -1, -2) @ dout


# (dtype, head dim, queries) that run on the emulator: a partial block and tile,
# the largest head dim, float64.
EMULATOR_CASES = {(mt.float32, 32, 70), (mt.float32, 128, 1), (mt.float64, 64, 1)}


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("d", [32, 64, 128])
@pytest.mark.parametrize("length, keys", [(1, 1), (70, 45), (37, 130)])
def test_warp_rung_matches_numpy(dtype, d, length, keys) -> None:
    if mt.backend() != "cuda" and (dtype, d, length) not in EMULATOR_CASES:
        pytest.skip("the emulator's checks cost seconds per block of this kernel: it runs a few of "
                    "these cases (tests/c/test_attention.c more); the GPU runs them all")
    rng = np.random.default_rng(d + length)
    q, k, v = (rng.standard_normal((2, n, d)) for n in (length, keys, keys))
    dout = rng.standard_normal((2, length, d))
    for causal in (False, True):
        ts = [mt.tensor(a, dtype=dtype, requires_grad=True) for a in (q, k, v)]
        out = mt.kernels.attention(*ts, "warp", causal=causal)
        out.backward(mt.tensor(dout, dtype=dtype))
        want = ref_attention(q, k, v, dout, 1 / math.sqrt(d), causal)
        assert_close(out, want[0], dtype, n=keys * d)
        for t, w, n in zip(ts, want[1:], (keys * d, length * d, length)):
            assert_close(t.grad, w, dtype, n=n * d)


def fast_rung(d: int) -> str:
    """The one-kernel rung F.scaled_dot_product_attention takes for head dim d
    under the fast kernel policy."""
    with mt.kernels.policy("fast"):
        return mt.ops.fused_attention_rung(d, d)


def test_sdpa_takes_the_warp_rung_on_views_and_broadcast_batches(monkeypatch) -> None:
    """query a transposed view (B, H, L, E) of (B, L, H, E), key and value with a
    batch dim of 1 broadcast against query's: the output and the gradients
    (summed over the broadcast dim) as NumPy's, through the one-kernel rung the
    head dim takes (ops.fused_attention_rung: the warp or the tiled rung)."""
    chosen = []
    fused = F._fused_attention
    monkeypatch.setattr(F, "_fused_attention", lambda *a: chosen.append(a[5]) or fused(*a))
    rng = np.random.default_rng(3)
    qa, ka, va = rng.standard_normal((2, 20, 2, 32)), rng.standard_normal((1, 2, 24, 32)), \
        rng.standard_normal((1, 2, 24, 32))
    dout = rng.standard_normal((2, 2, 20, 32))
    for causal in (False, True):
        chosen.clear()
        base = mt.tensor(qa, dtype=mt.float32, requires_grad=True)
        k, v = (mt.tensor(a, dtype=mt.float32, requires_grad=True) for a in (ka, va))
        with mt.kernels.policy("fast"):  # the teaching policy keeps the course's rung (the suite runs under both)
            out = F.scaled_dot_product_attention(base.transpose(1, 2), k, v, is_causal=causal)
            out.backward(mt.tensor(dout, dtype=mt.float32))
        assert chosen == [fast_rung(32)]
        q_np = np.swapaxes(qa, 1, 2)
        want = ref_attention(q_np, np.broadcast_to(ka, (2, 2, 24, 32)), np.broadcast_to(va, (2, 2, 24, 32)), dout,
                             1 / math.sqrt(32), causal)
        assert_close(out, want[0], mt.float32, n=24 * 32)
        assert_close(base.grad, np.swapaxes(want[1], 1, 2), mt.float32, n=24 * 32 * 32)
        assert_close(k.grad, want[2].sum(0, keepdims=True), mt.float32, n=2 * 20 * 32 * 32)
        assert_close(v.grad, want[3].sum(0, keepdims=True), mt.float32, n=2 * 20 * 32)


def test_sdpa_keeps_the_other_rungs_where_the_warp_rung_does_not_fit(monkeypatch) -> None:
    """A mask, dropout, a head dim of 16 or 48, q's and v's dims differing, or the
    teaching kernel policy: the matmul, masked softmax, matmul rung, with the
    same result."""
    chosen = []
    fused = F._fused_attention
    monkeypatch.setattr(F, "_fused_attention", lambda *a: chosen.append(a[5]) or fused(*a))
    rng = np.random.default_rng(5)

    def run(d, dv, **kwargs):
        q, k, v = rng.standard_normal((2, 9, d)), rng.standard_normal((2, 11, d)), rng.standard_normal((2, 11, dv))
        got = F.scaled_dot_product_attention(*(mt.tensor(a) for a in (q, k, v)), **kwargs)
        if kwargs.get("dropout_p", 0.0) == 0.0:
            mask = kwargs.get("attn_mask")
            keep = np.tril(np.ones((9, 11), bool)) if kwargs.get("is_causal") else \
                None if mask is None else mask.numpy()
            s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
            s = s if keep is None else np.where(keep, s, -np.inf)
            p = np.exp(s - s.max(-1, keepdims=True))
            assert_close(got, p / p.sum(-1, keepdims=True) @ v, mt.float64, n=11 * d)

    with mt.kernels.policy("fast"):
        run(16, 16, is_causal=True)
        run(48, 48)
        run(64, 32)
        run(32, 32, attn_mask=mt.tensor(np.tril(np.ones((9, 11), bool))))
        run(32, 32, dropout_p=0.5)
    with mt.kernels.policy("teaching"):
        run(32, 32, is_causal=True)
    assert chosen == []
    with mt.kernels.policy("fast"):
        run(32, 32, is_causal=True)
    assert chosen == [fast_rung(32)]


def test_warp_rung_refuses_other_head_dims() -> None:
    q = mt.tensor(np.ones((1, 4, 16)))
    with pytest.raises(ValueError, match="warp rung takes head dims"):
        mt.kernels.attention(q, q, q, "warp")
    with pytest.raises(ValueError, match="q's and v's alike"):
        mt.kernels.attention(mt.tensor(np.ones((1, 4, 32))), mt.tensor(np.ones((1, 4, 32))),
                             mt.tensor(np.ones((1, 4, 64))), "warp")
