"""Which rung computes each gradient of a convolution (ops.conv2d_grad_rungs, what
autograd.Conv2dImplicitGemm and Conv2dTiled call), and the kernels that rule
brings in: the depthwise gradients (src/conv_depthwise_backward.cu) against
finite differences and the im2col rung's gradients (stride, padding, dilation
per dim, planes off the 256-thread block, float32 and float64), and the stem's
shape (C = 3, 7 x 7, stride 2), whose input gradient runs im2col while the
implicit GEMM's own input gradient kernel stays right for it."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from gradcheck import gradcheck
from helpers import assert_close
from minitensor import ops


def test_grad_rungs_follow_the_rule() -> None:
    rungs = ops.conv2d_grad_rungs
    # The stem: 3 input channels, so the input gradient's GEMM would have 3 rows of a 64-row tile.
    assert rungs((32, 3, 224, 224), (64, 3, 7, 7), 1, "implicit_gemm") == ("im2col", "implicit_gemm")
    assert rungs((2, 8, 9, 9), (6, 4, 3, 3), 2, "implicit_gemm") == ("im2col", "implicit_gemm")  # 4 a group
    small = ops.IGEMM_INPUT_GRAD_MIN_CHANNELS
    assert rungs((2, small, 9, 9), (6, small, 3, 3), 1, "implicit_gemm") == ("implicit_gemm", "implicit_gemm")
    assert rungs((2, 64, 9, 9), (64, 64, 3, 3), 1, "implicit_gemm") == ("implicit_gemm", "implicit_gemm")
    # Depthwise (groups = C = C_out), whichever forward ran.
    for forward in ("tiled", "implicit_gemm"):
        assert rungs((2, 128, 9, 9), (128, 1, 3, 3), 128, forward) == ("depthwise", "depthwise")
    # A channel multiplier (C_out = 2 C) is not depthwise here: the forward's own rung.
    assert rungs((2, 4, 9, 9), (8, 1, 3, 3), 4, "tiled") == ("im2col", "im2col")
    assert rungs((2, 64, 9, 9), (64, 64, 3, 3), 1, "tiled") == ("im2col", "im2col")


def _recorded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Wrap each gradient kernel of ops so that a call appends its name to the list returned."""
    calls: list[str] = []
    for name in ("conv2d_depthwise_input_grad", "conv2d_depthwise_weight_grad", "conv2d_igemm_input_grad",
                 "conv2d_igemm_weight_grad", "col2im", "im2col"):
        original = getattr(ops, name)

        def wrapper(*args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(*args, **kwargs)
        monkeypatch.setattr(ops, name, wrapper)
    return calls


@pytest.mark.parametrize("shape, weight, stride, padding, groups, expected", [
    ((1, 3, 11, 10), (4, 3, 7, 7), 2, 3, 1, ["col2im", "conv2d_igemm_weight_grad"]),  # the stem's rule
    ((1, 16, 5, 5), (4, 16, 3, 3), 1, 1, 1, ["conv2d_igemm_input_grad", "conv2d_igemm_weight_grad"]),
    ((1, 4, 6, 7), (4, 1, 3, 3), 1, 1, 4, ["conv2d_depthwise_input_grad", "conv2d_depthwise_weight_grad"]),
    ((1, 4, 6, 7), (4, 1, 3, 3), 9, 0, 4, ["conv2d_depthwise_input_grad", "conv2d_depthwise_weight_grad"]),
])
def test_conv2d_backward_calls_the_rule_s_rungs(monkeypatch, shape, weight, stride, padding, groups,
                                                expected) -> None:
    """F.conv2d's backward calls the kernels ops.conv2d_grad_rungs names (the last case:
    a stride whose patch the tiled rung cannot hold, so the forward is the implicit GEMM)."""
    x = mt.randn(*shape, requires_grad=True)
    w = mt.randn(*weight, requires_grad=True)
    with mt.kernels.policy("fast"):
        out = F.conv2d(x, w, None, stride, padding, 1, groups)
    calls = _recorded(monkeypatch)
    out.sum().backward()
    picked = [c for c in calls if c != "im2col"]  # col2im's own steps call nothing recorded
    assert sorted(picked) == sorted(expected)
    assert x.grad.shape == x.shape and w.grad.shape == w.shape


DEPTHWISE = [  # (N, C, H, W), (KH, KW), stride, padding, dilation
    ((2, 3, 9, 10), (3, 3), 1, 1, 1),
    ((1, 2, 17, 13), (3, 3), 2, 1, 1),
    ((1, 2, 16, 19), (3, 2), (3, 2), (0, 1), (2, 3)),
    ((1, 2, 19, 18), (7, 7), 2, 3, 1),
    ((2, 1, 2, 2), (5, 5), 1, 2, 1),  # mostly padding, C = 1
    ((2, 2, 23, 19), (3, 3), 1, 1, 1),  # 874 products a tap: several per thread
]


def _grads(algo_or_none, x, w, b, stride, padding, dilation, groups, dtype):
    leaves = [mt.tensor(a, dtype=dtype, requires_grad=True) for a in (x, w, b)]
    out = mt.kernels.conv2d(*leaves, stride, padding, dilation, groups, algo=algo_or_none)
    (out * mt.tensor(np.sin(np.arange(out.numel())).reshape(out.shape), dtype=dtype)).sum().backward()
    return [leaf.grad.numpy().astype(np.float64) for leaf in leaves]


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("case", DEPTHWISE, ids=range(len(DEPTHWISE)))
def test_depthwise_gradients_match_im2col(case, dtype) -> None:
    shape, (kh, kw), stride, padding, dilation = case
    rng = np.random.default_rng(kh * 10 + shape[2])
    c = shape[1]
    x, w, b = rng.standard_normal(shape), rng.standard_normal((c, 1, kh, kw)), rng.standard_normal(c)
    reference = _grads("im2col", x, w, b, stride, padding, dilation, c, dtype)
    for algo in ("tiled", "implicit_gemm"):  # both forwards take the depthwise backward
        got = _grads(algo, x, w, b, stride, padding, dilation, c, dtype)
        for g, r in zip(got, reference):
            assert_close(g, r, dtype, n=int(np.prod(shape)))


def test_depthwise_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(21)
    x, w, b = rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((3, 1, 3, 2)), rng.standard_normal(3)
    gradcheck(lambda m, x, w, b: F.conv2d(x, w, b, (2, 1), 1, (1, 2), 3), [x, w, b])
    x, w = rng.standard_normal((1, 2, 10, 11)), rng.standard_normal((2, 1, 3, 3))
    gradcheck(lambda m, x, w: F.conv2d(x, w, None, 3, (1, 2), 2, 2), [x, w])


def test_depthwise_gradient_kernels_refuse_a_non_depthwise_weight() -> None:
    grad = ops.empty((1, 4, 5, 5), mt.float32)
    with pytest.raises(ops.ShapeError, match=r"\(C, 1, KH, KW\)"):
        ops.conv2d_depthwise_input_grad(grad, ops.empty((4, 2, 3, 3), mt.float32), (1, 4, 7, 7), (1, 1), (0, 0),
                                        (1, 1))
    # An empty batch: a zero weight gradient.
    dw = ops.conv2d_depthwise_weight_grad(ops.empty((0, 2, 3, 3), mt.float32), ops.empty((0, 2, 5, 5), mt.float32),
                                          (2, 1, 3, 3), (1, 1), (0, 0), (1, 1))
    assert not mt.Tensor._from_array(dw).numpy().any()


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
def test_stem_gradients_match_im2col(dtype) -> None:
    """The stem's shape, small: F.conv2d's gradients (input gradient by im2col, weight
    gradient by the implicit GEMM) against the im2col rung's, and the implicit GEMM's
    own input gradient kernel, which the rule no longer calls here, against them too."""
    rng = np.random.default_rng(22)
    x, w, b = rng.standard_normal((2, 3, 19, 18)), rng.standard_normal((5, 3, 7, 7)), rng.standard_normal(5)
    reference = _grads("im2col", x, w, b, 2, 3, 1, 1, dtype)
    got = _grads("implicit_gemm", x, w, b, 2, 3, 1, 1, dtype)
    for g, r in zip(got, reference):
        assert_close(g, r, dtype, n=x.size)
    grad = np.sin(np.arange(2 * 5 * 10 * 9)).reshape(2, 5, 10, 9)
    direct = ops.conv2d_igemm_input_grad(mt.tensor(grad, dtype=dtype), mt.tensor(w, dtype=dtype), x.shape, (2, 2),
                                         (3, 3), (1, 1), 1)
    assert_close(mt.Tensor._from_array(direct).numpy().astype(np.float64), reference[0], dtype, n=x.size)
