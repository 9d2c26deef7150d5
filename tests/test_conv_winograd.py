"""The Winograd rung of the convolution ladder (src/conv_winograd.cu, ops.conv2d_winograd):
F(2x2, 3x3) for 3x3 convolutions at stride 1, forward, input and weight gradients, against
the definition (test_conv.ref_conv2d, ref_weight_grad here) and the implicit GEMM's input
gradient, in float32 and float64, odd and even sides, padding 0-2, bias or none, the weight
gradient's products in one slice or several (ops.winograd_slices); where it applies
(ops.conv2d_winograd_fits); the TF32 products within a bound of their own terms; and the
autotuner's choice between it and the implicit GEMM (autotune.conv_algo; under TF32 among
three rungs), which F.conv2d and its backward then run, gradients checked."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from gradcheck import gradcheck
from helpers import assert_close, assert_within_tf32
from minitensor import _lib, ops
from minitensor.ops import conv as conv_ops
from minitensor.ops import autotune
from test_autotune import fake_timer
from test_conv import ref_conv2d

CASES = [  # n, c, h, w, k, padding
    (2, 5, 8, 8, 7, 1),    # even sides, padding 1 (a ResNet's 3x3)
    (1, 3, 7, 9, 4, 1),    # odd sides: the last tiles half outside the image
    (1, 4, 6, 5, 3, 0),    # no padding
    (2, 2, 5, 6, 3, 2),    # padding 2
    (1, 1, 1, 1, 2, 1),    # one pixel
    (2, 17, 9, 4, 19, 1),  # channels off every block
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n, c, h, w, k, pad", CASES)
def test_forward_is_the_convolution(dtype: str, n: int, c: int, h: int, w: int, k: int, pad: int) -> None:
    rng = np.random.default_rng(c * 31 + h)
    x, wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((k, c, 3, 3))
    b = rng.standard_normal(k)
    for bias in (b, None):
        got = ops.conv2d_winograd(mt.tensor(x, dtype=dtype), mt.tensor(wt, dtype=dtype),
                                  None if bias is None else mt.tensor(bias, dtype=dtype), (pad, pad))
        want = ref_conv2d(x, wt, bias, padding=(pad, pad))
        assert got.shape == want.shape
        assert_close(got.numpy(), want, dtype=dtype, n=9 * c)


def ref_weight_grad(x: np.ndarray, grad: np.ndarray, pad: int) -> np.ndarray:
    """dW[k, c, i, j] = sum over n, y, x of grad[n, k, y, x] x_padded[n, c, y + i, x + j]."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # (n, c, oh, ow, 3, 3)
    return np.einsum("nkyx,ncyxij->kcij", grad, windows)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n, c, h, w, k, pad", CASES)
def test_weight_gradient_is_the_definition(monkeypatch: pytest.MonkeyPatch, dtype: str, n: int, c: int, h: int,
                                           w: int, k: int, pad: int) -> None:
    rng = np.random.default_rng(n * 7 + c * 5 + h)
    x = rng.standard_normal((n, c, h, w))
    grad = rng.standard_normal((n, k, h + 2 * pad - 2, w + 2 * pad - 2))
    want = ref_weight_grad(x, grad, pad)
    for slices in sorted({1, n}):  # n slices: one image each, the partial sums added by the last step
        monkeypatch.setattr(conv_ops, "winograd_slices", lambda *args: slices)
        got = ops.conv2d_winograd_weight_grad(mt.tensor(grad, dtype=dtype), mt.tensor(x, dtype=dtype),
                                              (k, c, 3, 3), (pad, pad))
        assert got.shape == (k, c, 3, 3)
        # 16x: a tile's two transforms mix four values each, G^T . G up to 16 (src/conv_winograd.cu).
        assert_close(got.numpy(), want, dtype=dtype, n=16 * n * h * w)


def test_weight_gradient_of_views_and_many_slices() -> None:
    """Non-contiguous operands, and the slice rule's own choice (several slices) on sides of 32."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 32, 32))
    grad = rng.standard_normal((4, 2, 32, 32))
    assert ops.winograd_slices(4, 16 * 16, (2, 3), 4) == 4
    got = ops.conv2d_winograd_weight_grad(mt.tensor(grad).transpose(2, 3), mt.tensor(x).transpose(2, 3),
                                          (2, 3, 3, 3), (1, 1))
    want = ref_weight_grad(x.transpose(0, 1, 3, 2), grad.transpose(0, 1, 3, 2), 1)
    assert_close(got.numpy(), want, dtype="float32", n=16 * 4 * 32 * 32)


# F(2x2, 3x3)'s matrices (src/conv_winograd.cu), to bound the TF32 products' error below.
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=float)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=float)


def tiles_of(x: np.ndarray, pad: int, size: int, step: int, out_hw: tuple[int, int]) -> np.ndarray:
    """(N, C, tiles_h, tiles_w, size, size): the tiles of x padded by pad (zeros also past
    the far side), one every step pixels, for the 2x2 output tiles of out_hw."""
    th, tw = (out_hw[0] + 1) // 2, (out_hw[1] + 1) // 2
    n, c, h, w = x.shape
    xp = np.zeros((n, c, 2 * th + size, 2 * tw + size))
    xp[:, :, pad:pad + h, pad:pad + w] = x
    windows = np.lib.stride_tricks.sliding_window_view(xp, (size, size), axis=(2, 3))
    return windows[:, :, :step * th:step, :step * tw:step][:, :, :th, :tw]


def tf32_terms_forward(x: np.ndarray, wt: np.ndarray, pad: int) -> np.ndarray:
    """Each output's sum of |terms| of the 16 products, carried through the output step:
    |A^T| (sum over c of |U| |V|) |A|. A TF32 product rounds U and V, each by at most
    2^-11 relative (helpers.assert_within_tf32's bound then holds)."""
    oh, ow = x.shape[2] + 2 * pad - 2, x.shape[3] + 2 * pad - 2
    u = np.abs(np.einsum("ai,kcij,bj->kcab", G, wt, G))
    v = np.abs(np.einsum("ai,ncyxij,bj->ncyxab", BT, tiles_of(x, pad, 4, 2, (oh, ow)), BT))
    terms = np.einsum("ai,nkyxij,bj->nkyaxb", np.abs(AT), np.einsum("kcij,ncyxij->nkyxij", u, v), np.abs(AT))
    n, k, th, _, tw, _ = terms.shape
    return terms.reshape(n, k, 2 * th, 2 * tw)[:, :, :oh, :ow]


def tf32_terms_weight_grad(x: np.ndarray, grad: np.ndarray, pad: int) -> np.ndarray:
    """The weight gradient's: |G^T| (sum over tiles of |dM| |V|) |G|."""
    oh, ow = grad.shape[2:]
    v = np.abs(np.einsum("ai,ncyxij,bj->ncyxab", BT, tiles_of(x, pad, 4, 2, (oh, ow)), BT))
    dm = np.abs(np.einsum("ai,nkyxab,bj->nkyxij", AT, tiles_of(grad, 0, 2, 2, (oh, ow)), AT))
    return np.einsum("ai,kcab,bj->kcij", np.abs(G), np.einsum("nkyxij,ncyxij->kcij", dm, v), np.abs(G))


@pytest.mark.parametrize("n, c, h, w, k, pad", CASES[:4])
def test_tf32_products_stay_within_the_tf32_bound(n: int, c: int, h: int, w: int, k: int, pad: int) -> None:
    """The three products with tf32=True (the products on the matmul ladder's TF32 rung)
    against float64, within the TF32 bound of their own terms."""
    rng = np.random.default_rng(c + 11 * h)
    x, wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((k, c, 3, 3))
    grad = rng.standard_normal((n, k, h + 2 * pad - 2, w + 2 * pad - 2))
    mx, mw, mg = mt.tensor(x, dtype="float32"), mt.tensor(wt, dtype="float32"), mt.tensor(grad, dtype="float32")
    got = ops.conv2d_winograd(mx, mw, None, (pad, pad), tf32=True)
    assert_within_tf32(got, ref_conv2d(x, wt, None, padding=(pad, pad)), tf32_terms_forward(x, wt, pad))
    flipped = wt[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
    got = ops.conv2d_winograd_input_grad(mg, mw, (n, c, h, w), (pad, pad), tf32=True)
    assert_within_tf32(got, ref_conv2d(grad, flipped, None, padding=(2 - pad, 2 - pad)),
                       tf32_terms_forward(grad, flipped, 2 - pad))
    got = ops.conv2d_winograd_weight_grad(mg, mx, (k, c, 3, 3), (pad, pad), tf32=True)
    assert_within_tf32(got, ref_weight_grad(x, grad, pad), tf32_terms_weight_grad(x, grad, pad))


def test_the_matmul_flag_leaves_the_winograd_products_float32(monkeypatch: pytest.MonkeyPatch) -> None:
    """The convolution's own flag (conv.allow_tf32) decides its products, as torch's cudnn
    flag does: the matmul flag alone keeps all three products off the TF32 rung."""
    monkeypatch.setattr(mt.backends.cuda.matmul, "allow_tf32", True)
    calls: list[str] = []
    spy(monkeypatch, calls, "matmul_tf32")
    rng = np.random.default_rng(3)
    x, wt = rng.standard_normal((2, 40, 6, 6)), rng.standard_normal((24, 40, 3, 3))
    g = rng.standard_normal((2, 24, 6, 6))
    mx, mw, mg = (mt.tensor(a, dtype="float32") for a in (x, wt, g))
    got = ops.conv2d_winograd(mx, mw, None, (1, 1))
    assert_close(got.numpy(), ref_conv2d(x, wt, None, padding=(1, 1)), dtype="float32", n=9 * 40)
    ops.conv2d_winograd_input_grad(mg, mw, x.shape, (1, 1))
    got = ops.conv2d_winograd_weight_grad(mg, mx, wt.shape, (1, 1))
    assert_close(got.numpy(), ref_weight_grad(x, g, 1), dtype="float32", n=16 * 2 * 36)
    assert calls == []


@pytest.mark.parametrize("n, per_image, channels, itemsize, slices", [
    (32, 196, (128, 128), 4, 16),  # 128 ch 28^2: two images a slice (392 tiles)
    (32, 49, (256, 256), 4, 4),    # 256 ch 14^2: eight images a slice
    (256, 256, (64, 64), 4, 64),   # 64 ch 32^2: at most 64 slices
    (32, 49, (2048, 512), 4, 2),   # 512 input channels: partial sums no larger than the transforms
    (3, 10, (4, 4), 4, 1),         # too few tiles to cut
    (8, 129, (4, 4), 4, 2),        # 2 images, 258 tiles, are not 16 bytes whole in float32: 4 images
    (8, 129, (4, 4), 8, 4),        # ... they are in float64
])
def test_winograd_slices_fill_the_gpu_with_long_sums(n: int, per_image: int, channels: tuple[int, int],
                                                     itemsize: int, slices: int) -> None:
    assert ops.winograd_slices(n, per_image, channels, itemsize) == slices


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n, c, h, w, k, pad", CASES)
def test_input_gradient_matches_the_implicit_gemm(dtype: str, n: int, c: int, h: int, w: int, k: int,
                                                  pad: int) -> None:
    rng = np.random.default_rng(k * 17 + w)
    wt = mt.tensor(rng.standard_normal((k, c, 3, 3)), dtype=dtype)
    grad = mt.tensor(rng.standard_normal((n, k, h + 2 * pad - 2, w + 2 * pad - 2)), dtype=dtype)
    got = ops.conv2d_winograd_input_grad(grad, wt, (n, c, h, w), (pad, pad))
    want = ops.conv2d_igemm_input_grad(grad, wt, (n, c, h, w), (1, 1), (pad, pad), (1, 1), 1)
    assert got.shape == (n, c, h, w)
    assert_close(got.numpy(), want.numpy(), dtype=dtype, n=9 * k)


def test_where_the_rung_applies() -> None:
    fits = ops.conv2d_winograd_fits
    assert fits((32, 128, 28, 28), (128, 128, 3, 3), (1, 1), (1, 1), (1, 1), 1)
    assert fits((1, 3, 3, 3), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1)
    assert not fits((32, 128, 28, 28), (128, 128, 3, 3), (2, 2), (1, 1), (1, 1), 1)  # stride 2
    assert not fits((32, 128, 28, 28), (128, 64, 3, 3), (1, 1), (1, 1), (1, 1), 2)   # groups
    assert not fits((32, 128, 28, 28), (128, 128, 3, 3), (1, 1), (2, 2), (2, 2), 1)  # dilation
    assert not fits((32, 128, 28, 28), (128, 128, 5, 5), (1, 1), (2, 2), (1, 1), 1)  # 5x5
    assert not fits((32, 128, 28, 28), (128, 128, 3, 3), (1, 1), (3, 3), (1, 1), 1)  # the gradient's padding < 0
    assert not fits((0, 128, 28, 28), (128, 128, 3, 3), (1, 1), (1, 1), (1, 1), 1)   # an empty batch
    assert not fits((1, 3, 2, 2), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1)          # no window fits


def test_a_bad_operand_is_refused_with_the_shapes() -> None:
    with pytest.raises(mt.ShapeError, match=r"grad has shape \(1, 2, 6, 6\).*is \(1, 2, 7, 7\)"):
        ops.conv2d_winograd_weight_grad(mt.zeros(1, 2, 6, 6), mt.zeros(1, 3, 7, 7), (2, 3, 3, 3), (1, 1))
    u = mt.zeros(16, 4, 4)
    with pytest.raises(mt.ShapeError, match=r"weight must be \(K, C, 3, 3\)"):
        _lib.conv2d_winograd_filter(u, mt.zeros(4, 4, 5, 5), False)
    with pytest.raises(mt.ShapeError, match=r"v must be \(16, 3, 9\)"):
        _lib.conv2d_winograd_input(mt.zeros(16, 3, 8), mt.zeros(1, 3, 6, 6), (1, 1))


def spy(monkeypatch: pytest.MonkeyPatch, calls: list[str], *steps: str) -> None:
    """Record in calls the name of each of these _lib functions as it is called."""
    for step in steps:
        original = getattr(_lib, step)
        monkeypatch.setattr(_lib, step,
                            lambda *a, step=step, original=original: (calls.append(step), original(*a))[1])


@pytest.fixture
def tuning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tuning forced on (the emulator times nothing by itself) in a private cache, fast policy."""
    monkeypatch.setenv("MINITENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MINITENSOR_AUTOTUNE", "force")
    autotune.reset()
    with mt.kernels.policy("fast"):
        yield
    autotune.set_timer(None)
    autotune.reset()


@pytest.mark.parametrize("winner", [0, 1])
def test_f_conv2d_runs_the_rung_the_autotuner_picks(tuning: None, monkeypatch: pytest.MonkeyPatch,
                                                    winner: int) -> None:
    calls: list[str] = []
    spy(monkeypatch, calls, "conv2d_winograd_output", "conv2d_winograd_output_grad")
    autotune.set_timer(fake_timer(winner))
    rng = np.random.default_rng(winner)
    # 16 input channels: fewer take im2col for the input gradient (ops.conv2d_grad_rungs).
    x = rng.standard_normal((2, 16, 7, 8))
    w, b = rng.standard_normal((5, 16, 3, 3)), rng.standard_normal(5)
    mx, mw, mb = (mt.tensor(a, dtype="float64", requires_grad=True) for a in (x, w, b))
    out = F.conv2d(mx, mw, mb, padding=1)
    assert_close(out.detach(), ref_conv2d(x, w, b, padding=(1, 1)), dtype="float64", n=144)
    out.sum().backward()  # the first calls time both rungs (the fake timer runs each once) ...
    first_grad = mw.grad.numpy().copy()
    calls.clear()
    mw.grad = None
    F.conv2d(mx, mw, mb, padding=1).sum().backward()  # ... the next run the choice, forward and backward
    # winograd is 1 in autotune.CONV_ALGOS: the forward and both gradients
    want = ["conv2d_winograd_output", "conv2d_winograd_output", "conv2d_winograd_output_grad"]
    assert sorted(calls) == (want if winner == 1 else [])
    assert_close(mw.grad.numpy(), first_grad, dtype="float64", n=144)
    if winner == 1:
        gradcheck(lambda m, x, w, b: m.nn.functional.conv2d(x, w, b, padding=1),
                  [x[:1, :2, :4, :5], w[:3, :2], b[:3]], directions=3)


@pytest.mark.parametrize("winner", [0, 1, 2])
def test_under_tf32_three_rungs_race(tuning: None, monkeypatch: pytest.MonkeyPatch, winner: int) -> None:
    """Under conv.allow_tf32 the TF32 implicit GEMM (0), the Winograd rung with float32
    products (1) and with TF32 products (2) race, and F.conv2d's three products then run
    the winner (autotune.CONV_ALGOS)."""
    monkeypatch.setattr(mt.backends.cuda.conv, "allow_tf32", True)
    calls: list[str] = []
    spy(monkeypatch, calls, "conv2d_winograd_output", "conv2d_winograd_output_grad", "matmul_tf32")
    autotune.set_timer(fake_timer(winner))
    rng = np.random.default_rng(winner)
    x, w = rng.standard_normal((2, 16, 7, 8)), rng.standard_normal((5, 16, 3, 3))
    g = rng.standard_normal((2, 5, 7, 8))
    mx, mw = (mt.tensor(a, dtype="float32", requires_grad=True) for a in (x, w))
    F.conv2d(mx, mw, padding=1).sum().backward()  # the first calls time the three rungs
    calls.clear()
    mx.grad = mw.grad = None
    out = F.conv2d(mx, mw, padding=1)
    out.backward(mt.tensor(g, dtype="float32"))
    steps = ["conv2d_winograd_output", "conv2d_winograd_output", "conv2d_winograd_output_grad"]
    assert sorted(calls) == {0: [], 1: steps, 2: steps + ["matmul_tf32"] * 3}[winner]
    flipped = w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
    for got, want in ((out.detach(), ref_conv2d(x, w, None, padding=(1, 1))),
                      (mx.grad, ref_conv2d(g, flipped, None, padding=(1, 1))),
                      (mw.grad, ref_weight_grad(x, g, 1))):
        # TF32's 2^-10 of a sum of |terms|; float32 products (winner 1) pass it by far
        np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=5e-3 * np.abs(want).max())
