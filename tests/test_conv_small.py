"""The depthwise rung (src/conv_depthwise.cu, conv_depthwise_backward.cu) and the
direct rung (src/conv_direct.cu): mt.kernels.conv2d(..., algo="depthwise" /
"direct") against plain NumPy loops and against the im2col rung's gradients
(float32 and float64, strides, padding, dilation, 3 x 3 and 5 x 5 compiled
and other sizes at run time, planes off the 32 x 32 tile, N = 1, groups),
gradients against finite differences, incoming gradients in any layout (an
expanded one from .sum(), a transposed one), a deterministic weight
gradient, F.conv2d's choice of rung per policy, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from gradcheck import gradcheck
from helpers import assert_close
from test_conv import ref_conv2d

# (N, C, H, W), (C_out, KH, KW), stride, padding, dilation, groups
DEPTHWISE_CASES = [
    ((2, 3, 9, 11), (3, 3, 3), 1, 1, 1, 3),
    ((1, 2, 35, 40), (2, 3, 3), 1, 1, 1, 2),       # two tiles each way, the second partial
    ((2, 2, 10, 9), (2, 5, 5), 2, (2, 1), 1, 2),    # 5 x 5, stride 2 (the input gradient gathers)
    ((1, 2, 12, 13), (2, 3, 2), (1, 2), (0, 1), (2, 1), 2),  # run-time kernel, per-dim arguments
    ((3, 4, 1, 1), (4, 1, 1), 1, 0, 1, 4),          # 1 x 1 images
]
DIRECT_CASES = [
    ((3, 1, 8, 8), (10, 3, 3), 1, 1, 1, 1),         # the digits layer, 10 output channels (8 + 2)
    ((2, 3, 9, 7), (5, 3, 3), (2, 1), (1, 0), (1, 2), 1),
    ((2, 4, 9, 7), (6, 2, 3), 1, 1, 1, 2),          # run-time 2 x 3, 2 groups
    ((1, 1, 6, 6), (9, 7, 7), 1, 3, 1, 1),          # 7 x 7 mostly padding, N = 1
]


def _pair(v):
    return v if isinstance(v, tuple) else (v, v)


def _run(algo, x, w, b, stride, padding, dilation, groups, grad):
    """out and the gradients of x, w, b for the incoming gradient `grad` (NumPy)."""
    xt, wt, bt = (mt.tensor(a, requires_grad=True) for a in (x, w, b))
    out = mt.kernels.conv2d(xt, wt, bt, stride, padding, dilation, groups, algo=algo)
    out.backward(mt.tensor(grad))
    return out.numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("algo, case", [("depthwise", c) for c in DEPTHWISE_CASES] +
                         [("direct", c) for c in DIRECT_CASES])
def test_small_rungs_match_numpy_and_im2col(algo, case, dtype) -> None:
    shape, (co, kh, kw), stride, padding, dilation, groups = case
    rng = np.random.default_rng(21)
    npt = np.float32 if dtype == mt.float32 else np.float64
    x = rng.standard_normal(shape).astype(npt)
    w = rng.standard_normal((co, shape[1] // groups, kh, kw)).astype(npt)
    b = rng.standard_normal(co).astype(npt)
    ref = ref_conv2d(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), _pair(stride),
                     _pair(padding), _pair(dilation), groups)
    grad = rng.standard_normal(ref.shape).astype(npt)
    got = _run(algo, x, w, b, stride, padding, dilation, groups, grad)
    want = _run("im2col", x, w, b, stride, padding, dilation, groups, grad)
    n = shape[1] // groups * kh * kw
    assert_close(got[0], ref, dtype, n=n)
    assert_close(got[1], want[1], dtype, n=co * kh * kw)
    assert_close(got[2], want[2], dtype, n=shape[0] * ref.shape[2] * ref.shape[3])
    assert_close(got[3], want[3], dtype, n=shape[0] * ref.shape[2] * ref.shape[3])


def test_small_rungs_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(22)
    x = mt.tensor(rng.standard_normal((2, 3, 7, 6)), requires_grad=True)
    wd = mt.tensor(rng.standard_normal((3, 1, 3, 3)), requires_grad=True)
    b = mt.tensor(rng.standard_normal(3), requires_grad=True)
    gradcheck(lambda m, x, w, b: mt.kernels.conv2d(x, w, b, 1, 1, 1, 3, algo="depthwise"), [x, wd, b])
    gradcheck(lambda m, x, w, b: mt.kernels.conv2d(x, w, b, (2, 1), (1, 2), (1, 2), 3, algo="depthwise"), [x, wd, b])
    wf = mt.tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
    bf = mt.tensor(rng.standard_normal(4), requires_grad=True)
    gradcheck(lambda m, x, w, b: mt.kernels.conv2d(x, w, b, 1, 1, 1, 1, algo="direct"), [x, wf, bf])
    gradcheck(lambda m, x, w, b: mt.kernels.conv2d(x, w, b, 2, 0, 1, 1, algo="direct"), [x, wf, bf])


@pytest.mark.parametrize("algo, groups, c_out", [("depthwise", 4, 4), ("direct", 1, 5)])
def test_incoming_gradients_in_any_layout(algo, groups, c_out) -> None:
    """The gradient kernels read grad_out by its strides: the expanded gradient of
    .sum() and a transposed one give what a contiguous copy gives."""
    rng = np.random.default_rng(23)
    x, w = rng.standard_normal((2, 4, 9, 10)), rng.standard_normal((c_out, 4 // groups, 3, 3))
    xs = mt.tensor(x, requires_grad=True)
    ws = mt.tensor(w, requires_grad=True)
    out = mt.kernels.conv2d(xs, ws, None, 1, 1, 1, groups, algo=algo)
    out.sum().backward()
    want = _run("im2col", x, w, np.zeros(c_out), 1, 1, 1, groups, np.ones(out.shape))
    assert_close(xs.grad, want[1], mt.float64, n=c_out * 9)
    assert_close(ws.grad, want[2], mt.float64, n=180)
    g = rng.standard_normal((2, c_out, 10, 9))
    xs.grad = ws.grad = None
    out = mt.kernels.conv2d(xs, ws, None, 1, 1, 1, groups, algo=algo)
    g_view = mt.tensor(g).transpose(2, 3)  # (2, C_out, 9, 10), not contiguous
    assert not g_view.is_contiguous()
    out.backward(g_view)
    want = _run("im2col", x, w, np.zeros(c_out), 1, 1, 1, groups, g.transpose(0, 1, 3, 2))
    assert_close(xs.grad, want[1], mt.float64, n=c_out * 9)
    assert_close(ws.grad, want[2], mt.float64, n=180)


def test_weight_gradient_is_deterministic() -> None:
    """Block partial sums added in a fixed order: the same bits on every run."""
    rng = np.random.default_rng(24)
    x = mt.tensor(rng.standard_normal((40, 2, 12, 12)).astype(np.float32))
    w = mt.tensor(rng.standard_normal((2, 1, 3, 3)).astype(np.float32), requires_grad=True)
    runs = []
    for _ in range(2):
        w.grad = None
        mt.kernels.conv2d(x, w, None, 1, 1, 1, 2, algo="depthwise").sum().backward()
        runs.append(w.grad.numpy().copy())
    np.testing.assert_array_equal(runs[0], runs[1])


def test_conv2d_default_takes_the_small_rungs_under_the_fast_policy() -> None:
    rng = np.random.default_rng(25)
    digits = mt.tensor(rng.standard_normal((4, 1, 8, 8)), requires_grad=True)
    w1 = mt.tensor(rng.standard_normal((32, 1, 3, 3)))
    dw_x = mt.tensor(rng.standard_normal((2, 6, 9, 9)), requires_grad=True)
    dw_w = mt.tensor(rng.standard_normal((6, 1, 3, 3)))
    dense_w = mt.tensor(rng.standard_normal((4, 6, 3, 3)))
    with mt.kernels.policy("fast"):
        assert type(F.conv2d(digits, w1, padding=1).grad_fn).__name__ == "Conv2dDirect"
        assert type(F.conv2d(dw_x, dw_w, padding=1, groups=6).grad_fn).__name__ == "Conv2dDepthwise"
        assert type(F.conv2d(dw_x, dense_w, padding=1).grad_fn).__name__ == "Conv2dImplicitGemm"  # 54 taps
        # A depthwise stride whose patch does not fit: the rung the choice made before.
        assert not mt.ops.conv2d_depthwise_fits((3, 3), (9, 9), (1, 1), mt.float64)
        assert type(F.conv2d(dw_x, dw_w, stride=9, padding=1, groups=6).grad_fn).__name__ != "Conv2dDepthwise"
    with mt.kernels.policy("teaching"):
        assert type(F.conv2d(digits, w1, padding=1).grad_fn).__name__ not in ("Conv2dDirect", "Conv2dDepthwise")
        assert type(F.conv2d(dw_x, dw_w, padding=1, groups=6).grad_fn).__name__ != "Conv2dDepthwise"


def test_small_rungs_refusals_name_the_problem() -> None:
    x = mt.randn(1, 2, 6, 6)
    with pytest.raises(mt.ShapeError, match="multiplier"):
        mt.kernels.conv2d(x, mt.randn(4, 1, 3, 3), groups=2, algo="depthwise")
    with pytest.raises(mt.ShapeError, match=r"\(C, 1, KH, KW\)"):
        mt.kernels.conv2d(x, mt.randn(2, 2, 3, 3), algo="depthwise")
    with pytest.raises(ValueError, match="shared memory"):
        mt.kernels.conv2d(mt.randn(1, 1, 3, 3), mt.randn(1, 1, 1, 1), stride=8, groups=1, algo="depthwise")
    with pytest.raises(mt.ShapeError, match="no window fits"):
        mt.kernels.conv2d(x, mt.randn(3, 2, 7, 7), algo="direct")
    with pytest.raises(mt.ShapeError, match="groups"):
        mt.kernels.conv2d(x, mt.randn(3, 2, 3, 3), groups=2, algo="direct")


def test_first_layer_without_input_grad_takes_the_implicit_gemm_above_9_taps() -> None:
    """The direct rung's win is its input gradient: a first layer (its input the
    data, no gradient) with more than ops.DIRECT_MAX_TAPS_NO_INPUT_GRAD taps runs
    the implicit GEMM (the ResNet stem: 27 taps); the digits layer (9) stays direct."""
    rng = np.random.default_rng(26)
    images = mt.tensor(rng.standard_normal((2, 3, 8, 8)))  # no gradient
    stem_w = mt.tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
    digits = mt.tensor(rng.standard_normal((2, 1, 8, 8)))
    digits_w = mt.tensor(rng.standard_normal((4, 1, 3, 3)), requires_grad=True)
    with mt.kernels.policy("fast"):
        out = F.conv2d(images, stem_w, padding=1)
        assert type(out.grad_fn).__name__ == "Conv2dImplicitGemm"
        assert_close(out.detach().numpy(), ref_conv2d(images.numpy(), stem_w.detach().numpy(), None, (1, 1), (1, 1)),
                     mt.float64, n=27)
        assert type(F.conv2d(images.requires_grad_(), stem_w, padding=1).grad_fn).__name__ == "Conv2dDirect"
        assert type(F.conv2d(digits, digits_w, padding=1).grad_fn).__name__ == "Conv2dDirect"
