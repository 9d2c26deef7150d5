"""The mma rung of attention (src/attention_mma.cu, mt.kernels.attention(...,
"mma")): the forward on the tensor cores in 3xTF32 (float32's accuracy), and
its backward (src/attention_mma_backward.cu), the same products. The output and the gradients of q, k and v
against NumPy in float64 at float32's tolerance (tests/helpers.py; plain TF32
products, 1e-3, would fail it), with and without the causal mask, head dims 64
and 128, both key tiles, lengths off the 64-query block, non-contiguous
inputs; the refusals."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

import minitensor as mt
from helpers import assert_close
from test_attention_warp import ref_attention

# (head dim, queries, keys, query block, key tile) that run on the emulator:
# one of each kernel's blocks, a partial tile, more keys than queries. Its full
# checks (CI runs this file under MINITENSOR_EMU_CHECK=full) cost one to two
# seconds a block of these kernels, so the emulator runs few;
# tests/c/test_attention_mma.c more, the GPU all.
EMULATOR_CASES = {(64, 37, 40, 0, 32)}


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("length, keys", [(1, 1), (70, 45), (37, 40), (130, 97)])
@pytest.mark.parametrize("block_queries", [0, 128])
@pytest.mark.parametrize("block_keys", [0, 16, 32, 64])
def test_mma_rung_matches_numpy(d, length, keys, block_queries, block_keys) -> None:
    if mt.backend() != "cuda" and (d, length, keys, block_queries, block_keys) not in EMULATOR_CASES:
        pytest.skip("the emulator's checks cost seconds per block of this kernel: it runs a few of "
                    "these cases; the GPU runs them all")
    rng = np.random.default_rng(d + length + block_keys)
    q, k, v = (rng.standard_normal((2, n, d)) for n in (length, keys, keys))
    dout = rng.standard_normal((2, length, d))
    for causal in (False, True) if mt.backend() == "cuda" else (True,):  # the C tests run both on the emulator
        ts = [mt.tensor(a, dtype=mt.float32, requires_grad=True) for a in (q, k, v)]
        out = mt.kernels.attention(*ts, "mma", causal=causal, block_queries=block_queries, block_keys=block_keys)
        out.backward(mt.tensor(dout, dtype=mt.float32))
        # The reference from the float32 inputs, in float64.
        want = ref_attention(*(t.detach().numpy().astype(np.float64) for t in ts), dout.astype(np.float32),
                             1 / math.sqrt(d), causal)
        assert_close(out, want[0], mt.float32, n=keys * d)
        for t, w, n in zip(ts, want[1:], (keys * d, length * d, length)):
            assert_close(t.grad, w, mt.float32, n=n * d)


# (head dim, queries, keys, causal) of the backward through
# F.scaled_dot_product_attention on the emulator (the rest on the GPU): a
# length off the tiles, at each head dim (128: the 8-warp kernels).
SDPA_EMULATOR_CASES = {(64, 17, 40, True), (128, 17, 40, False)}


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("length, keys", [(1, 1), (17, 40), (70, 33), (130, 130), (45, 150)])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_mma_backward_matches_the_warp_backward_and_numpy(d, length, keys, causal) -> None:
    """The gradients through F.scaled_dot_product_attention, which takes the
    mma forward and backward ("mma/mma") under the fast policy, of q, k, v
    given as transposed views (B, H, L, E) of (B, L, H, E) as a transformer
    has them: NumPy's in float64 at float32's tolerance, and the warp
    backward's (the previous choice) from the same forward."""
    if mt.backend() != "cuda" and (d, length, keys, causal) not in SDPA_EMULATOR_CASES:
        pytest.skip("the emulator runs a few of these cases; the GPU runs them all")
    with mt.kernels.policy("fast"):
        assert mt.ops.fused_attention_rung(d, d, length, causal=causal) == "mma/mma"
    rng = np.random.default_rng(d + length + keys)
    batch = 2 if mt.backend() == "cuda" else 1
    arrays = [rng.standard_normal((batch, n, 2, d)) for n in (length, keys, keys)]
    dout = rng.standard_normal((batch, 2, length, d))
    grads = {}
    # The warp backward's gradients beside them on the GPU only (emulator time).
    for rung in ("sdpa", "mma/warp") if mt.backend() == "cuda" else ("sdpa",):
        ts = [mt.tensor(a, dtype=mt.float32, requires_grad=True) for a in arrays]
        views = [t.transpose(1, 2) for t in ts]
        assert length == 1 or not views[0].is_contiguous()  # one query: the transpose moves nothing
        with mt.kernels.policy("fast"):
            if rung == "sdpa":
                out = mt.nn.functional.scaled_dot_product_attention(*views, is_causal=causal)
            else:
                out = mt.autograd.attention.Attention.apply(*views, 1 / math.sqrt(d), causal, rung)
            out.backward(mt.tensor(dout, dtype=mt.float32))
        grads[rung] = [t.grad.numpy() for t in ts]
        want = ref_attention(*(np.swapaxes(t.detach().numpy().astype(np.float64), 1, 2) for t in ts),
                             dout.astype(np.float32), 1 / math.sqrt(d), causal)
        for t, w, n in zip(ts, want[1:], (keys, length, length)):
            assert_close(t.grad.transpose(1, 2), w, mt.float32, n=n * d)
    for mine, warp, n in zip(grads["sdpa"], grads.get("mma/warp", grads["sdpa"]), (keys, length, length)):
        assert_close(mt.tensor(mine), warp.astype(np.float64), mt.float32, n=n * d)


@pytest.mark.parametrize("d", [64, 128])
def test_mma_backward_is_deterministic(d) -> None:
    """No atomics: the same inputs give the same gradients bit for bit (on the
    GPU, where blocks race; the emulator runs them one at a time)."""
    if mt.backend() != "cuda":
        pytest.skip("blocks race on the GPU only")
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((1, 70, d)) for _ in range(3)]
    runs = []
    for _ in range(2):
        ts = [mt.tensor(a, dtype=mt.float32, requires_grad=True) for a in arrays]
        mt.kernels.attention(*ts, "mma", causal=True).backward(mt.tensor(arrays[0], dtype=mt.float32))
        runs.append([t.grad.numpy() for t in ts])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_mma_rung_on_a_transposed_view() -> None:
    """q a transposed view (B, H, L, E) of (B, L, H, E): copied to contiguous
    rows first, the same result as NumPy's."""
    rng = np.random.default_rng(7)
    qa, ka, va = (rng.standard_normal((1, 20, 2, 64)) for _ in range(3))
    ts = [mt.tensor(a, dtype=mt.float32) for a in (qa, ka, va)]
    out = mt.kernels.attention(*(t.transpose(1, 2) for t in ts), "mma", causal=True)
    want = ref_attention(*(np.swapaxes(t.numpy().astype(np.float64), 1, 2) for t in ts),
                         np.zeros((1, 2, 20, 64)), 1 / 8, True)
    assert_close(out, want[0], mt.float32, n=20 * 64)


def test_sdpa_takes_the_mma_backward_where_the_table_says(monkeypatch) -> None:
    """ops.ATTENTION_MMA_BACKWARD: from its length on, the mma forward's
    backward is the mma rung's too ("mma/mma"); below, the head dim's rung's."""
    module = importlib.import_module("minitensor.ops.attention")
    monkeypatch.setattr(module, "ATTENTION_MMA_FORWARD", {(64, True): 16, (128, False): 16})
    monkeypatch.setattr(module, "ATTENTION_MMA_BACKWARD", {(64, True): 32})
    with mt.kernels.policy("fast"):
        assert mt.ops.fused_attention_rung(64, 64, 32, causal=True) == "mma/mma"
        assert mt.ops.fused_attention_rung(64, 64, 31, causal=True) == "mma/warp"
        assert mt.ops.fused_attention_rung(128, 128, 64, causal=False) == "mma/warp"
    with mt.kernels.policy("teaching"):
        assert mt.ops.fused_attention_rung(64, 64, 32, causal=True) is None


def test_mma_supported_here() -> None:
    """mt_attention_mma_supported: the emulator runs both halves at head dims
    64 and 128 (so does an H100, whose blocks hold the D128 backward's 133
    KiB; a GPU of 99 KiB a block does not); other head dims neither."""
    for d in (64, 128):
        runs = mt._lib.attention_mma_supported(d)
        assert runs == (True, True) if mt.backend() == "emulator" else all(isinstance(r, bool) for r in runs)
    assert mt._lib.attention_mma_supported(32) == (False, False)
    assert mt._lib.attention_mma_supported(0) == (False, False)


def test_sdpa_keeps_the_ffma_rungs_where_the_gpu_cannot_run_mma(monkeypatch) -> None:
    """ops.mma_supported gates the table: a GPU without mma.sync (below
    compute capability 8.0) keeps the head dim's FFMA rungs, and one whose
    blocks cannot hold the backward's tiles (head dim 128 on sm_86 / sm_89)
    takes the mma forward with the FFMA backward."""
    module = importlib.import_module("minitensor.ops.attention")
    device = mt._lib.get_device()
    monkeypatch.setattr(module, "ATTENTION_MMA_FORWARD", {(64, True): 1, (128, True): 1})
    monkeypatch.setattr(module, "ATTENTION_MMA_BACKWARD", {(64, True): 1, (128, True): 1})
    monkeypatch.setitem(module._MMA_SUPPORTED, (device, 64), (False, False))
    monkeypatch.setitem(module._MMA_SUPPORTED, (device, 128), (True, False))
    with mt.kernels.policy("fast"):
        assert mt.ops.fused_attention_rung(64, 64, 256, causal=True) == module.ATTENTION_FUSED_RUNGS[64]
        assert mt.ops.fused_attention_rung(128, 128, 256, causal=True) == "mma/warp"
    monkeypatch.setitem(module._MMA_SUPPORTED, (device, 64), (True, True))
    with mt.kernels.policy("fast"):
        assert mt.ops.fused_attention_rung(64, 64, 256, causal=True) == "mma/mma"


def test_mma_rung_refuses() -> None:
    q32 = mt.tensor(np.ones((1, 4, 32), np.float32))
    q64 = mt.tensor(np.ones((1, 4, 64), np.float32))
    with pytest.raises(ValueError, match="mma rung takes head dims"):
        mt.kernels.attention(q32, q32, q32, "mma")
    with pytest.raises(ValueError, match="q's and v's alike"):
        mt.kernels.attention(q64, q64, mt.tensor(np.ones((1, 4, 128), np.float32)), "mma")
    with pytest.raises(ValueError, match="float32 only"):
        d64 = mt.tensor(np.ones((1, 4, 64)))
        mt.kernels.attention(d64, d64, d64, "mma")
    with pytest.raises(ValueError, match="block_keys 8"):
        mt.kernels.attention(q64, q64, q64, "mma", block_keys=8)
    with pytest.raises(ValueError, match="block_queries 32"):
        mt.kernels.attention(q64, q64, q64, "mma", block_queries=32)
    with pytest.raises(ValueError, match="block_keys 32"):
        mt.kernels.attention(q64, q64, q64, "warp", block_keys=32)


def test_sdpa_takes_the_mma_forward_where_the_table_says(monkeypatch) -> None:
    """ops.ATTENTION_MMA_FORWARD names (head dim, causal) and the shortest
    length: from there F.scaled_dot_product_attention runs the mma forward
    with the backward of the head dim's rung (ATTENTION_MMA_BACKWARD empty),
    the same result as NumPy's; a
    float64 input takes the warp forward instead (the mma rung is float32
    only)."""
    # the module (mt.ops.attention is its function)
    monkeypatch.setattr(importlib.import_module("minitensor.ops.attention"), "ATTENTION_MMA_FORWARD",
                        {(64, True): 16})
    monkeypatch.setattr(importlib.import_module("minitensor.ops.attention"), "ATTENTION_MMA_BACKWARD", {})
    with mt.kernels.policy("fast"):
        assert mt.ops.fused_attention_rung(64, 64, 16, causal=True) == "mma/warp"
        assert mt.ops.fused_attention_rung(64, 64, 15, causal=True) != "mma/warp"
        assert mt.ops.fused_attention_rung(64, 64, 16, causal=False) != "mma/warp"
        assert mt.ops.fused_attention_rung(64, 64, 0, causal=True) != "mma/warp"  # length unknown
    chosen = []
    fused = mt.nn.functional._fused_attention
    monkeypatch.setattr(mt.nn.functional, "_fused_attention", lambda *a: chosen.append(a[5]) or fused(*a))
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((1, 1, 20, 64)) for _ in range(3))
    dout = rng.standard_normal((1, 1, 20, 64))
    for dtype in (mt.float32, mt.float64):
        ts = [mt.tensor(a, dtype=dtype, requires_grad=True) for a in (q, k, v)]
        with mt.kernels.policy("fast"):
            out = mt.nn.functional.scaled_dot_product_attention(*ts, is_causal=True)
            out.backward(mt.tensor(dout, dtype=dtype))
        assert chosen[-1] == "mma/warp"
        want = ref_attention(*(t.detach().numpy().astype(np.float64) for t in ts), dout, 1 / 8, True)
        assert_close(out, want[0], dtype, n=20 * 64)
        for t, w in zip(ts, want[1:]):
            assert_close(t.grad, w, dtype, n=20 * 64 * 64)
