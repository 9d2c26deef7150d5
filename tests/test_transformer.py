"""The transformer path: erf and GELU (exact and tanh forms), scaled dot-product
attention with bool, float and causal masks, nn.MultiheadAttention,
nn.TransformerEncoderLayer (post- and pre-LN) and clip_grad_norm_, against
NumPy written from the formulas, and gradients against finite differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from gradcheck import gradcheck
from helpers import assert_close
from minitensor import nn

erf = np.vectorize(math.erf)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def ref_attention(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    return softmax(scores) @ v


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
def test_erf_and_gelu_match_their_formulas(dtype) -> None:
    x = np.random.default_rng(0).uniform(-5, 5, (7, 33))
    t = mt.tensor(x, dtype=dtype).T.T[:, ::2]  # a strided view
    xs = x[:, ::2]
    assert_close(t.erf(), erf(xs), dtype)
    assert_close(mt.erf(t), erf(xs), dtype)
    assert_close(F.gelu(t), xs * (1 + erf(xs / math.sqrt(2))) / 2, dtype)
    tanh_form = xs * (1 + np.tanh(math.sqrt(2 / math.pi) * (xs + 0.044715 * xs**3))) / 2
    assert_close(F.gelu(t, approximate="tanh"), tanh_form, dtype)
    assert_close(nn.GELU("tanh")(t), tanh_form, dtype)
    assert mt.tensor([1, 2]).erf().dtype is mt.float32  # integers computed in float32, as torch
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(t, approximate="fast")


def test_erf_and_gelu_gradients() -> None:
    x = np.random.default_rng(1).uniform(-3, 3, (4, 5))
    gradcheck(lambda m, x: x.erf(), [x])
    gradcheck(lambda m, x: F.gelu(x), [x])
    gradcheck(lambda m, x: F.gelu(x, approximate="tanh"), [x])


def test_scaled_dot_product_attention_matches_numpy_with_each_mask() -> None:
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((2, 3, 5, 4)), rng.standard_normal((2, 3, 6, 4)), rng.standard_normal((2, 3, 6, 7))
    tq, tk, tv = (mt.tensor(a) for a in (q, k, v))
    assert_close(F.scaled_dot_product_attention(tq, tk, tv), ref_attention(q, k, v), mt.float64, n=6)
    keep = rng.random((5, 6)) > 0.3
    keep[:, 0] = True  # no row masked whole (softmax of only -inf is nan, in torch too)
    assert_close(F.scaled_dot_product_attention(tq, tk, tv, attn_mask=mt.tensor(keep)),
                 ref_attention(q, k, v, keep), mt.float64, n=6)
    bias = rng.standard_normal((3, 1, 6))
    assert_close(F.scaled_dot_product_attention(tq, tk, tv, attn_mask=mt.tensor(bias)),
                 ref_attention(q, k, v, bias), mt.float64, n=6)
    causal = np.tril(np.ones((5, 6), bool))
    assert_close(F.scaled_dot_product_attention(tq, tk, tv, is_causal=True), ref_attention(q, k, v, causal),
                 mt.float64, n=6)
    with pytest.raises(mt.ShapeError, match="do not agree"):
        F.scaled_dot_product_attention(tq, tk, mt.tensor(v[..., :5, :]))
    gradcheck(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
              [q[0, :1], k[0, :1], v[0, :1]])


def ref_mha(m: nn.MultiheadAttention, x: np.ndarray, mask=None) -> np.ndarray:
    """x (L, N, E) through the module's own parameters, written out in NumPy."""
    w, b = m.in_proj_weight.numpy().astype(np.float64), m.in_proj_bias.numpy().astype(np.float64)
    e, h = m.embed_dim, m.num_heads
    q, k, v = (x @ w[i * e:(i + 1) * e].T + b[i * e:(i + 1) * e] for i in range(3))
    split = lambda t: t.reshape(t.shape[0], t.shape[1], h, e // h).transpose(1, 2, 0, 3)  # noqa: E731
    keep = None if mask is None else ~mask
    out = ref_attention(split(q), split(k), split(v), keep)  # N, h, L, d
    out = out.transpose(2, 0, 1, 3).reshape(x.shape)
    return out @ m.out_proj.weight.numpy().T + m.out_proj.bias.numpy()


def test_multihead_attention_matches_numpy() -> None:
    mt.manual_seed(0)
    m = nn.MultiheadAttention(8, 2, dtype=mt.float64)
    with mt.no_grad():
        m.in_proj_bias.copy_(mt.randn(24, dtype=mt.float64))
    x = np.random.default_rng(3).standard_normal((5, 3, 8))
    out, weights = m(mt.tensor(x), mt.tensor(x), mt.tensor(x))
    assert_close(out, ref_mha(m, x), mt.float64, n=8)
    assert weights.shape == (3, 5, 5)
    assert_close(weights.sum(-1), np.ones((3, 5)), mt.float64, n=5)
    future = ~np.tril(np.ones((5, 5), bool))  # True: not allowed, as torch's nn.MultiheadAttention
    causal, _ = m(mt.tensor(x), mt.tensor(x), mt.tensor(x), attn_mask=mt.tensor(future))
    assert_close(causal, ref_mha(m, x, future), mt.float64, n=8)
    again, _ = m(mt.tensor(x), mt.tensor(x), mt.tensor(x), attn_mask=mt.tensor(future), is_causal=True,
                 need_weights=False)  # torch's hint: the causal kernel, no mask read
    assert_close(again, causal.numpy(), mt.float64)
    m.batch_first = True
    first, _ = m(*(mt.tensor(x.transpose(1, 0, 2)),) * 3)
    assert_close(first, ref_mha(m, x).transpose(1, 0, 2), mt.float64, n=8)
    m.batch_first = False
    padding = np.zeros((3, 5), bool)
    padding[1, 3:] = True  # the last two keys of batch 1 are padding
    padded, w = m(mt.tensor(x), mt.tensor(x), mt.tensor(x), key_padding_mask=mt.tensor(padding))
    assert float(w[1, :, 3:].abs().max()) == 0.0
    with pytest.raises(ValueError, match="multiple"):
        nn.MultiheadAttention(10, 3)


def test_multihead_attention_with_kdim_and_vdim_matches_numpy() -> None:
    """Keys and values of other widths: q_proj_weight (E, E), k_proj_weight
    (E, kdim), v_proj_weight (E, vdim) instead of in_proj_weight, as torch."""
    mt.manual_seed(5)
    m = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, dtype=mt.float64)
    assert m.in_proj_weight is None and m.q_proj_weight.shape == (8, 8)
    assert m.k_proj_weight.shape == (8, 5) and m.v_proj_weight.shape == (8, 3)
    assert [name for name, _ in m.named_parameters()] == [
        "q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    with mt.no_grad():
        m.in_proj_bias.copy_(mt.randn(24, dtype=mt.float64))
    rng = np.random.default_rng(6)
    q, k, v = rng.standard_normal((4, 2, 8)), rng.standard_normal((6, 2, 5)), rng.standard_normal((6, 2, 3))
    b = m.in_proj_bias.numpy()
    pq, pk, pv = (x @ w.numpy().T + b[i * 8:(i + 1) * 8]
                  for i, (x, w) in enumerate(((q, m.q_proj_weight), (k, m.k_proj_weight), (v, m.v_proj_weight))))
    split = lambda t: t.reshape(t.shape[0], 2, 2, 4).transpose(1, 2, 0, 3)  # noqa: E731  L, N, E -> N, h, L, d
    future = ~np.tril(np.ones((4, 6), bool))
    for mask in (None, future):
        heads = ref_attention(split(pq), split(pk), split(pv), None if mask is None else ~mask)
        want = heads.transpose(2, 0, 1, 3).reshape(4, 2, 8) @ m.out_proj.weight.numpy().T + m.out_proj.bias.numpy()
        out, weights = m(mt.tensor(q), mt.tensor(k), mt.tensor(v), attn_mask=None if mask is None else mt.tensor(mask))
        assert_close(out, want, mt.float64, n=8)
        assert weights.shape == (2, 4, 6)
    m.batch_first = True  # (N, L, E) in and out
    first, _ = m(*(mt.tensor(a.transpose(1, 0, 2)) for a in (q, k, v)), attn_mask=mt.tensor(future))
    assert_close(first, out.numpy().transpose(1, 0, 2), mt.float64)
    m.batch_first = False
    out, _ = m(mt.tensor(q), mt.tensor(k), mt.tensor(v))
    out.sum().backward()
    assert m.k_proj_weight.grad.shape == (8, 5) and m.v_proj_weight.grad.shape == (8, 3)
    with pytest.raises(ValueError, match="key has 8 features, expected 5"):
        m(mt.tensor(q), mt.tensor(q), mt.tensor(v))
    with pytest.raises(ValueError, match="vdim must be a positive int"):
        nn.MultiheadAttention(8, 2, vdim=0)


def test_is_causal_follows_torch() -> None:
    """F.scaled_dot_product_attention refuses attn_mask with is_causal (torch
    raises); MultiheadAttention's is_causal is a hint that needs attn_mask."""
    q = mt.randn(1, 2, 3, 4)
    with pytest.raises(RuntimeError, match="not both"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=F.causal_mask(3), is_causal=True)
    m = nn.MultiheadAttention(4, 2)
    x = mt.randn(3, 1, 4)
    with pytest.raises(RuntimeError, match="needs attn_mask"):
        m(x, x, x, is_causal=True)
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.0)
    with pytest.raises(RuntimeError, match="needs attn_mask"):
        layer(x, is_causal=True)


def test_multihead_attention_gradients() -> None:
    mt.manual_seed(1)
    m = nn.MultiheadAttention(4, 2, dtype=mt.float64)
    x = np.random.default_rng(4).standard_normal((3, 2, 4))
    future = mt.tensor(~np.tril(np.ones((3, 3), bool)))
    gradcheck(lambda api, x: m(x, x, x, attn_mask=future, is_causal=True)[0], [x])
    out, _ = m(*(mt.tensor(x),) * 3)
    out.sum().backward()
    assert m.in_proj_weight.grad.shape == (12, 4) and m.out_proj.weight.grad.shape == (4, 4)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_composes_its_blocks(norm_first: bool) -> None:
    mt.manual_seed(2)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu",
                                       norm_first=norm_first, batch_first=True, dtype=mt.float64)
    x = mt.tensor(np.random.default_rng(5).standard_normal((2, 6, 8)))
    future = ~F.causal_mask(6)  # True: not allowed, as torch's
    out = layer(x, src_mask=future, is_causal=True)
    attend = lambda t: layer.self_attn(t, t, t, attn_mask=future)[0]  # noqa: E731
    ff = lambda t: layer.linear2(F.gelu(layer.linear1(t)))  # noqa: E731
    if norm_first:
        h = x + attend(layer.norm1(x))
        expected = h + ff(layer.norm2(h))
    else:
        h = layer.norm1(x + attend(x))
        expected = layer.norm2(h + ff(h))
    assert_close(out, expected.numpy(), mt.float64, n=16)
    out.sum().backward()
    assert all(p.grad is not None for p in layer.parameters())
    # Causal: the first position's output does not depend on the others.
    x2 = x.clone()
    x2[:, 1:] = 0.0
    assert_close(layer(x2, src_mask=future, is_causal=True)[:, 0], out[:, 0].detach().numpy(), mt.float64, n=16)


def test_clip_grad_norm_scales_every_gradient_together() -> None:
    a = mt.tensor([3.0, 0.0], requires_grad=True)
    b = mt.tensor([[4.0]], requires_grad=True)
    (a * mt.tensor([3.0, 0.0])).sum().backward()
    (b * 4.0).sum().backward()
    total = nn.utils.clip_grad_norm_([a, b], 1.0)
    assert abs(total.item() - 5.0) < 1e-6
    assert np.allclose(a.grad.tolist(), [0.6, 0.0], atol=1e-5) and np.allclose(b.grad.tolist(), [[0.8]], atol=1e-5)
    assert abs(nn.utils.clip_grad_norm_([a, b], 10.0).item() - 1.0) < 1e-5  # below max_norm: unchanged
    assert abs(nn.utils.clip_grad_norm_([a, b], 10.0, norm_type=float("inf")).item() - 0.8) < 1e-6


@pytest.mark.parametrize("shape", [(2, 0, 5, 3, 4), (2, 3, 0, 3, 4), (2, 3, 5, 0, 4), (2, 3, 5, 3, 0),
                                   (0, 3, 5, 3, 4)], ids=["no query", "no key", "head dim 0", "value dim 0",
                                                          "no batch"])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_with_an_empty_dimension(shape, causal) -> None:
    """torch's result (its math path): no key gives zeros (an empty matmul), a
    head dim of 0 scores every key 0 (weights uniform over the keys, or over
    the keys before each query when causal), and gradients of the same shapes."""
    b, length, keys, d, dv = shape
    rng = np.random.default_rng(3)
    q_np, k_np, v_np = (rng.standard_normal(s) for s in ((b, length, d), (b, keys, d), (b, keys, dv)))
    scores = np.zeros((b, length, keys)) if d == 0 else q_np @ k_np.transpose(0, 2, 1) / math.sqrt(d)
    if causal:
        scores = np.where(np.triu(np.ones((length, keys), dtype=bool), 1), -np.inf, scores)
    weights = np.exp(scores - scores.max(-1, keepdims=True)) if keys else scores
    weights = weights / weights.sum(-1, keepdims=True) if keys else weights
    want = weights @ v_np
    for algo in ("naive", "masked_softmax", "flash"):
        q, k, v = (mt.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np))
        out = mt.kernels.attention(q, k, v, algo=algo, causal=causal)
        assert out.shape == (b, length, dv)
        assert_close(out, want, mt.float64, n=max(keys, 1))
        out.sum().backward()
        assert q.grad.shape == q.shape and k.grad.shape == k.shape and v.grad.shape == v.shape
    q, k, v = (mt.tensor(a) for a in (q_np, k_np, v_np))
    assert_close(F.scaled_dot_product_attention(q, k, v, is_causal=causal), want, mt.float64, n=max(keys, 1))


def test_clip_grad_norm_inf_keeps_float64_range() -> None:
    """The inf-norm is taken in float64, as the 2-norm: a float64 gradient of
    1e300 has that norm (not inf) and is scaled to max_norm (not to 0)."""
    a = mt.tensor([1e300, -3.0], dtype=mt.float64, requires_grad=True)
    (a * mt.tensor([1.0, 1.0], dtype=mt.float64)).sum().backward()
    a.grad.mul_(0.0).add_(mt.tensor([1e300, -3.0], dtype=mt.float64))
    total = nn.utils.clip_grad_norm_([a], 2.0, norm_type=float("inf"))
    assert total.dtype is mt.float64 and total.item() == 1e300
    assert np.allclose(a.grad.tolist(), [2.0, -6e-300], rtol=1e-12, atol=0)


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("shape", [(2, 70, 45, 16, 8), (1, 33, 97, 64, 64), (3, 5, 1, 1, 3), (1, 129, 129, 24, 24)])
def test_fused_attention_matches_numpy(dtype, shape) -> None:
    """Both rungs of mt.kernels.attention; the flash kernel (src/attention.cu) on
    lengths that are no multiple of its 64-query blocks or 32-key tiles, the
    largest head dim it takes, one key."""
    b, length, keys, d, dv = shape
    rng = np.random.default_rng(length)
    q, k, v = rng.standard_normal((b, length, d)), rng.standard_normal((b, keys, d)), rng.standard_normal((b, keys, dv))
    for causal in (False, True):
        keep = np.tril(np.ones((length, keys), bool)) if causal else None
        for algo in ("naive", "masked_softmax", "flash"):  # the warp rung: tests/test_attention_warp.py
            got = mt.kernels.attention(*(mt.tensor(a, dtype=dtype) for a in (q, k, v)), algo, causal=causal)
            assert_close(got, ref_attention(q, k, v, keep), dtype, n=keys * d)


def test_flash_rung_gradients_and_refusals() -> None:
    rng = np.random.default_rng(7)
    q, k, v = rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 7, 4)), rng.standard_normal((2, 7, 3))
    for causal in (False, True):
        gradcheck(lambda m, q, k, v: mt.kernels.attention(q, k, v, "flash", causal=causal), [q, k, v])
    # A head dim above 64 is refused by the flash rung, computed by the naive one.
    q2, k2 = rng.standard_normal((1, 4, 80)), rng.standard_normal((1, 6, 80))
    v2 = rng.standard_normal((1, 6, 2))
    with pytest.raises(ValueError, match="up to 64"):
        mt.kernels.attention(mt.tensor(q2), mt.tensor(k2), mt.tensor(v2))
    got = mt.kernels.attention(mt.tensor(q2), mt.tensor(k2), mt.tensor(v2), "naive")
    assert_close(got, ref_attention(q2, k2, v2), mt.float64, n=480)
    with pytest.raises(ValueError, match="unknown algo"):
        mt.kernels.attention(mt.tensor(q2), mt.tensor(k2), mt.tensor(v2), "fast")


def test_flash_backward_kernels_match_the_naive_rung() -> None:
    """The two backward kernels on lengths that cross their 64-row blocks and
    32-row tiles, against the naive rung's gradients (autograd through three
    ops), with and without the causal mask, in both dtypes."""
    rng = np.random.default_rng(11)
    b, length, keys, d, dv = 2, 70, 97, 16, 8
    q, k, v = rng.standard_normal((b, length, d)), rng.standard_normal((b, keys, d)), rng.standard_normal((b, keys, dv))
    dout = rng.standard_normal((b, length, dv))
    for dtype in (mt.float32, mt.float64):
        for causal in (False, True):
            grads = {}
            for algo in ("naive", "flash"):
                ts = [mt.tensor(a, dtype=dtype, requires_grad=True) for a in (q, k, v)]
                mt.kernels.attention(*ts, algo, causal=causal).backward(mt.tensor(dout, dtype=dtype))
                grads[algo] = [t.grad for t in ts]
            for got, want in zip(grads["flash"], grads["naive"]):
                assert_close(got, want.numpy().astype(np.float64), dtype, n=keys * d)


def ref_masked_softmax(x, mask, scale, causal):
    scores = x * scale + (0 if mask is None else mask)
    if causal:
        scores = np.where(np.triu(np.ones(x.shape[-2:], bool), 1), -np.inf, scores)
    m = scores.max(-1, keepdims=True)
    e = np.exp(scores - m)
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("policy", ["fast", "teaching"])
def test_masked_softmax_rung_matches_numpy(policy) -> None:
    """autograd.MaskedSoftmax: one kernel under the fast policy, the course's
    kernels under teaching; a broadcast mask with -inf in it, the causal mask,
    both; a row hidden whole gives zeros, as torch's attention; a strided input."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 9, 40))
    mask = np.where(rng.random((3, 1, 40)) < 0.2, -np.inf, rng.standard_normal((3, 1, 40)))
    mask[..., 0] = 0.0  # every row keeps key 0
    with mt.kernels.policy(policy):
        for dtype in (mt.float32, mt.float64):
            for m in (None, mask):
                for causal in (False, True):
                    got = mt.autograd.MaskedSoftmax.apply(mt.tensor(x, dtype=dtype),
                                                          None if m is None else mt.tensor(m, dtype=dtype), 0.3,
                                                          causal)
                    assert_close(got, ref_masked_softmax(x, m, 0.3, causal), dtype, n=40)
        strided = mt.tensor(np.swapaxes(x, -1, -2).copy()).transpose(-2, -1)
        assert_close(mt.autograd.MaskedSoftmax.apply(strided, None, 1.0, True),
                     ref_masked_softmax(x, None, 1.0, True), mt.float64, n=40)
        hidden = np.zeros((1, 4, 5))
        hidden[0, 2] = -np.inf
        got = mt.autograd.MaskedSoftmax.apply(mt.tensor(rng.standard_normal((1, 4, 5))), mt.tensor(hidden), 1.0,
                                              False).numpy()
        assert (got[0, 2] == 0).all() and np.isfinite(got).all()  # no key: no weight (torch's safe softmax)


def test_masked_softmax_gradients_and_refusals() -> None:
    rng = np.random.default_rng(6)
    x, bias = rng.standard_normal((2, 4, 6)), rng.standard_normal((4, 6))
    for causal in (False, True):
        gradcheck(lambda m, x, b: mt.autograd.MaskedSoftmax.apply(x, b, 0.7, causal), [x, bias])
        gradcheck(lambda m, x: mt.autograd.MaskedSoftmax.apply(x, None, 0.7, causal), [x])
    for policy in ("fast", "teaching"):  # softmax and log_softmax backward: one kernel, or the course's chain
        with mt.kernels.policy(policy):
            gradcheck(lambda m, x: (x.T.softmax(0) * 1.0).sum(0) * x.T[0], [x[0]])
            gradcheck(lambda m, x: x.log_softmax(1) * x, [x[1]])
    with pytest.raises(mt.DTypeError, match="mask is float32"):
        mt.autograd.MaskedSoftmax.apply(mt.tensor(x), mt.tensor(bias, dtype=mt.float32), 1.0, False)
    with pytest.raises(mt.ShapeError, match="causal mask needs"):
        mt.autograd.MaskedSoftmax.apply(mt.tensor(x[0, 0]), None, 1.0, True)
    with pytest.raises(mt.ShapeError):
        mt.autograd.MaskedSoftmax.apply(mt.tensor(x), mt.tensor(bias[:3]), 1.0, False)
    q = mt.tensor(x)
    with pytest.raises(mt.DTypeError, match="scores' dtype"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mt.tensor(bias, dtype=mt.float32))
    with pytest.raises(mt.ShapeError, match="does not broadcast"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mt.tensor(np.ones((3, 2, 4, 4))))


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("is_causal", [True, False])
def test_packed_self_attention_matches_the_general_path(batch_first: bool, is_causal: bool) -> None:
    """MultiheadAttention's packed self-attention node (one copy into heads, the
    one-kernel rung, one copy back; under the fast policy, head dim 64) gives
    the output and every gradient of the general path (narrow views of the
    projection split into heads, F.scaled_dot_product_attention)."""
    rng = np.random.default_rng(3)
    mt.manual_seed(0)
    m = nn.MultiheadAttention(128, 2, batch_first=batch_first)
    with mt.no_grad():
        m.in_proj_bias.copy_(mt.tensor(rng.standard_normal(384).astype(np.float32)))
    x = mt.tensor(rng.standard_normal((3, 5, 128)).astype(np.float32), requires_grad=True)
    mask = ~F.causal_mask(5 if batch_first else 3) if is_causal else None
    grad_out = mt.tensor(rng.standard_normal((3, 5, 128)).astype(np.float32))
    results = []
    with mt.kernels.policy("fast"):
        assert m._packed_rung(x, True, False, None, mask, is_causal) is not None  # the packed path runs
        for packed in (True, False):
            x.grad = None
            m.zero_grad()
            if not packed:
                m._packed_rung = lambda *args: None  # the general path
            out, weights = m(x, x, x, need_weights=False, attn_mask=mask, is_causal=is_causal)
            assert weights is None and out.shape == (3, 5, 128)
            out.backward(grad_out)
            results.append([out.numpy(), x.grad.numpy()] + [p.grad.numpy() for p in m.parameters()])
            if not packed:
                del m._packed_rung
    for got, want in zip(*results):
        assert_close(got, want, mt.float32, n=128)
