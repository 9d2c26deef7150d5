"""The implicit-GEMM rung of the convolution ladder (src/conv_implicit_gemm.cu,
mt.kernels.conv2d(..., algo="implicit_gemm"), what F.conv2d runs under the fast
policy): its forward against plain NumPy loops and the im2col rung (stride,
padding, dilation and groups per dim, sizes off the 64/128 x 128 tiles, N = 1,
C = 1, 1 x 1 kernels, strided views, float32 and float64), its two backward
kernels against finite differences and the im2col rung's gradients (stride > 1,
the weight gradient's split over blocks), which rung F.conv2d takes under each
policy, and the refusals of the C entry points."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from gradcheck import gradcheck
from helpers import assert_close
from minitensor import ops
from test_conv import ref_conv2d

CASES = [  # (N, C, H, W), (C_out, KH, KW), stride, padding, dilation, groups
    ((2, 3, 7, 9), (4, 3, 3), 1, 0, 1, 1),
    ((1, 4, 8, 5), (6, 3, 2), (2, 1), (1, 2), (1, 2), 2),
    ((3, 1, 5, 5), (2, 5, 5), 1, 2, 1, 1),  # C = 1, a kernel as large as the image
    ((2, 6, 9, 7), (6, 1, 1), 3, 0, 1, 3),  # 1 x 1 kernel, stride over it
    ((1, 2, 11, 4), (3, 2, 3), (3, 2), (0, 1), (2, 1), 1),
    ((1, 5, 13, 11), (70, 3, 3), 1, 1, 1, 1),  # C_out > 64: the 128-row tile, rows off the tile
    ((2, 4, 12, 13), (130, 3, 3), 2, 1, 1, 2),  # 65 output channels a group, stride 2
    ((1, 1, 1, 1), (1, 1, 1), 1, 0, 1, 1),  # one pixel
    ((1, 2, 17, 9), (3, 3, 3), 1, 1, 1, 1),  # N H W = 153: columns off the 128-wide tile
]


def pair(v):
    return (v, v) if isinstance(v, int) else v


def igemm(x, w, b, stride, padding, dilation, groups):
    return mt.kernels.conv2d(x, w, b, stride, padding, dilation, groups, algo="implicit_gemm")


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_implicit_gemm_matches_numpy_and_im2col(case, dtype) -> None:
    shape, (co, kh, kw), stride, padding, dilation, groups = case
    rng = np.random.default_rng(co + kh)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((co, shape[1] // groups, kh, kw))
    b = rng.standard_normal(co)
    ref = ref_conv2d(x, w, b, pair(stride), pair(padding), pair(dilation), groups)
    xt, wt, bt = (mt.tensor(a, dtype=dtype) for a in (x, w, b))
    permuted = mt.tensor(x.transpose(0, 2, 3, 1).copy(), dtype=dtype).permute(0, 3, 1, 2)  # a strided view
    for inp in (xt, permuted):
        got = igemm(inp, wt, bt, stride, padding, dilation, groups)
        assert got.shape == ref.shape and got.dtype is dtype
        assert_close(got, ref, dtype, n=w[0].size)
    no_bias = igemm(xt, wt, None, stride, padding, dilation, groups)
    assert_close(no_bias, ref - b[None, :, None, None], dtype, n=w[0].size)
    im2col = mt.kernels.conv2d(xt, wt, bt, stride, padding, dilation, groups, algo="im2col")
    assert_close(got, im2col.numpy().astype(np.float64), dtype, n=w[0].size)


def test_implicit_gemm_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(11)
    x, w, b = rng.standard_normal((2, 4, 6, 5)), rng.standard_normal((4, 2, 3, 2)), rng.standard_normal(4)
    gradcheck(lambda m, x, w, b: igemm(x, w, b, (2, 1), 1, (1, 2), 2), [x, w, b])
    # Stride 3 in both dims with dilation: most taps of an input pixel fall between output pixels.
    x, w = rng.standard_normal((1, 2, 10, 11)), rng.standard_normal((3, 2, 3, 3))
    gradcheck(lambda m, x, w: igemm(x, w, None, 3, (1, 2), 2, 1), [x, w])


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("shape, weight, stride, padding, dilation, groups", [
    ((2, 3, 19, 18), (5, 3, 3, 3), 1, 1, 1, 1),
    ((2, 6, 15, 16), (70, 3, 3, 3), (2, 3), (1, 0), 1, 2),  # strides over the tap count's phases
    ((3, 8, 24, 24), (16, 8, 3, 3), 1, 1, 1, 1),  # N OH OW = 1728: the weight gradient split over blocks
    ((1, 4, 9, 9), (4, 4, 1, 1), 2, 0, 1, 1),  # 1 x 1, stride 2: a quarter of the input gets a gradient
])
def test_implicit_gemm_gradients_match_im2col(shape, weight, stride, padding, dilation, groups, dtype) -> None:
    rng = np.random.default_rng(12)
    x, w, b = rng.standard_normal(shape), rng.standard_normal(weight), rng.standard_normal(weight[0])
    grads = []
    for algo in ("im2col", "implicit_gemm"):
        leaves = [mt.tensor(a, dtype=dtype, requires_grad=True) for a in (x, w, b)]
        out = mt.kernels.conv2d(*leaves, stride, padding, dilation, groups, algo=algo)
        (out * mt.tensor(np.sin(np.arange(out.numel())).reshape(out.shape), dtype=dtype)).sum().backward()
        grads.append([leaf.grad.numpy().astype(np.float64) for leaf in leaves])
    for g_im2col, g_igemm in zip(*grads):
        assert_close(g_igemm, g_im2col, dtype, n=int(np.prod(shape)))
    # Only the input requires a gradient: the weight's is not computed (and the other way round).
    xi = mt.tensor(x, dtype=dtype, requires_grad=True)
    igemm(xi, mt.tensor(w, dtype=dtype), None, stride, padding, dilation, groups).sum().backward()
    assert xi.grad.shape == x.shape
    wi = mt.tensor(w, dtype=dtype, requires_grad=True)
    igemm(mt.tensor(x, dtype=dtype), wi, None, stride, padding, dilation, groups).sum().backward()
    assert wi.grad.shape == w.shape


def test_implicit_gemm_empty_sizes() -> None:
    assert igemm(mt.randn(0, 6, 5, 5), mt.randn(4, 3, 3, 3), None, 1, 0, 1, 2).shape == (0, 4, 3, 3)
    assert igemm(mt.randn(2, 6, 5, 5), mt.randn(0, 6, 3, 3), None, 1, 0, 1, 1).shape == (2, 0, 3, 3)
    # No input channel: the output is the bias, and the gradients are empty or zero.
    x = mt.randn(2, 0, 5, 5, requires_grad=True)
    b = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    alone = igemm(x, mt.randn(3, 0, 3, 3, requires_grad=True), b, 1, 0, 1, 1)
    assert alone.shape == (2, 3, 3, 3) and alone[:, 1].tolist() == [[[2.0] * 3] * 3] * 2
    alone.sum().backward()
    assert x.grad.shape == (2, 0, 5, 5) and b.grad.tolist() == [18.0] * 3
    # An empty batch: the weight's gradient is zero.
    w = mt.randn(2, 3, 3, 3, requires_grad=True)
    igemm(mt.randn(0, 3, 5, 5), w, None, 1, 1, 1, 1).sum().backward()
    assert not w.grad.numpy().any()


def test_conv2d_default_rung_per_policy() -> None:
    """F.conv2d runs the implicit GEMM under the fast policy (the depthwise rung for
    depthwise layers), and the im2col rung the course builds under teaching;
    conv1d goes through conv2d."""
    rng = np.random.default_rng(13)
    x, w, b = (mt.tensor(rng.standard_normal(s), requires_grad=True) for s in ((2, 4, 9, 8), (6, 2, 3, 3), (6,)))
    with mt.kernels.policy("fast"):
        fast = F.conv2d(x, w, b, padding=1, groups=2)
        assert type(fast.grad_fn).__name__ == "Conv2dImplicitGemm"
        depthwise = F.conv2d(x, mt.randn(4, 1, 3, 3, dtype=mt.float64), groups=4)
        assert type(depthwise.grad_fn).__name__ == "Conv2dDepthwise"
        line = F.conv1d(mt.randn(2, 3, 20, requires_grad=True), mt.randn(5, 3, 4), stride=2)
        assert type(line.grad_fn).__name__ != "Conv2dImplicitGemm"  # a squeeze of it
        assert line.shape == (2, 5, 9)
    with mt.kernels.policy("teaching"):
        teaching = F.conv2d(x, w, b, padding=1, groups=2)
        assert type(teaching.grad_fn).__name__ not in ("Conv2dImplicitGemm", "Conv2dTiled")
    assert_close(fast, teaching.numpy(), mt.float64, n=18)
    # Sizes whose pixel count reaches 2^31 go to im2col (the kernel's int indices).
    assert ops.conv2d_igemm_fits((2, 4, 9, 8), (6, 2, 3, 3), (1, 1), (9, 8), 2)
    assert not ops.conv2d_igemm_fits((2**16, 1, 2**8, 2**8), (1, 1, 1, 1), (0, 0), (2**8, 2**8), 1)
    assert not ops.conv2d_igemm_fits((1, 1, 5, 5), (1, 1, 1, 1), (2**30, 0), (2**31 + 5, 5), 1)


def test_conv1d_by_implicit_gemm_matches_numpy() -> None:
    rng = np.random.default_rng(14)
    x, w, b = rng.standard_normal((2, 3, 23)), rng.standard_normal((4, 3, 5)), rng.standard_normal(4)
    with mt.kernels.policy("fast"):
        got = F.conv1d(mt.tensor(x), mt.tensor(w), mt.tensor(b), stride=2, padding=3, dilation=2)
    ref = ref_conv2d(x[:, :, None], w[:, :, None], b, (1, 2), (0, 3), (1, 2), 1)[:, :, 0]
    assert_close(got, ref, mt.float64, n=15)


def test_implicit_gemm_c_refusals_name_the_problem() -> None:
    """The C entry points check their operands again (a C caller, or a bug above)."""
    x, w, g = mt.randn(1, 2, 6, 6), mt.randn(3, 2, 3, 3), mt.randn(1, 3, 4, 4)
    with pytest.raises(mt.ShapeError, match=r"mt_conv2d_igemm_input_grad: grad_out must be.*\(1, 3, 6, 6\)"):
        ops.conv2d_igemm_input_grad(g, w, (1, 2, 6, 6), (1, 1), (1, 1), (1, 1), 1)  # padding 1: 6 x 6 out
    with pytest.raises(mt.ShapeError, match=r"mt_conv2d_igemm_weight_grad: .*groups = 2 do not agree"):
        ops.conv2d_igemm_weight_grad(g, x, (3, 2, 3, 3), (1, 1), (0, 0), (1, 1), 2)
    with pytest.raises(mt.DTypeError, match="mt_conv2d_igemm"):
        ops.conv2d_igemm(x, w.double(), None, (1, 1), (0, 0), (1, 1), 1)
    with pytest.raises(mt.DTypeError, match="int64"):
        ops.conv2d_igemm(x.long(), w.long(), None, (1, 1), (0, 0), (1, 1), 1)
    with pytest.raises(mt.InvalidArgumentError, match=r"stride \(0, 1\)"):
        ops.conv2d_igemm_input_grad(g, w, (1, 2, 6, 6), (0, 1), (0, 0), (1, 1), 1)
    with pytest.raises(mt.ShapeError, match="no window fits"):
        ops.conv2d_igemm_weight_grad(mt.randn(1, 3, 1, 1), mt.randn(1, 2, 2, 2), (3, 2, 3, 3), (1, 1), (0, 0),
                                     (1, 1), 1)


def ref_input_grad(grad: np.ndarray, w: np.ndarray, x_shape: tuple[int, ...], stride: tuple[int, int],
                   padding: tuple[int, int], groups: int) -> np.ndarray:
    """The input gradient of a convolution (dilation 1), in float64: each tap's
    W^T G added at the input positions that tap read (a strided slice of a
    padded input)."""
    n, c, h, wd = x_shape
    c_out, c_group, kh, kw = w.shape
    oh, ow = grad.shape[2:]
    (sh, sw), (ph, pw), co_group = stride, padding, c_out // groups
    dx = np.zeros((n, c, h + 2 * ph + kh * sh, wd + 2 * pw + kw * sw))
    for g in range(groups):
        gs, cs = slice(g * co_group, (g + 1) * co_group), slice(g * c_group, (g + 1) * c_group)
        for i in range(kh):
            for j in range(kw):
                dx[:, cs, i:i + oh * sh:sh, j:j + ow * sw:sw] += np.einsum("oc,noyx->ncyx", w[gs, :, i, j], grad[:, gs])
    return dx[:, :, ph:ph + h, pw:pw + wd]


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
def test_strided_input_grad_by_phases_matches_numpy(dtype) -> None:
    """Stride > 1 with dilation 1: the input gradient runs one product per stride
    phase (src/conv_igemm_phases.h). Random shapes (strides 2-3 per dim, kernels
    1-5, padding, groups, N = 1, planes smaller than the stride), a transposed
    (non-contiguous) upstream gradient, against NumPy."""
    rng = np.random.default_rng(29)
    cases = [((1, 16, 9, 9), (8, 16, 3, 3), (2, 2), (1, 1), 1),  # the 3 x 3 / 2 layer
             ((2, 6, 7, 8), (4, 6, 1, 1), (2, 2), (0, 0), 1),  # 1 x 1 / 2: three phases get zeros
             ((1, 4, 1, 5), (6, 2, 1, 3), (2, 3), (0, 1), 2)]  # H = 1 under stride 2
    for _ in range(6):
        groups = int(rng.integers(1, 3))
        kh, kw = (int(k) for k in rng.integers(1, 6, size=2))
        shape = (int(rng.integers(1, 3)), groups * int(rng.integers(1, 4)), int(rng.integers(kh, 15)),
                 int(rng.integers(kw, 15)))
        weight = (groups * int(rng.integers(1, 4)), shape[1] // groups, kh, kw)
        cases.append((shape, weight, tuple(int(s) for s in rng.integers(2, 4, size=2)),
                      (int(rng.integers(0, kh)), int(rng.integers(0, kw))), groups))
    for shape, weight, stride, padding, groups in cases:
        oh, ow = ((size + 2 * p - k) // s + 1 for size, k, s, p in zip(shape[2:], weight[2:], stride, padding))
        grad = rng.standard_normal((shape[0], weight[0], ow, oh)).transpose(0, 1, 3, 2)  # a transposed view
        w = rng.standard_normal(weight)
        mt_grad = mt.tensor(np.ascontiguousarray(grad.transpose(0, 1, 3, 2)), dtype=dtype).transpose(2, 3)
        got = ops.conv2d_igemm_input_grad(mt_grad, mt.tensor(w, dtype=dtype), shape, stride, padding, (1, 1), groups)
        assert_close(np.asarray(got.numpy(), dtype=np.float64), ref_input_grad(grad, w, shape, stride, padding, groups),
                     dtype, n=weight[0] // groups * weight[2] * weight[3])


def test_every_tile_config_forward_matches_numpy() -> None:
    """Each tile configuration the autotuner may pick (the stepped forward
    gather's among them, src/conv_igemm_walk.h: a mask of the taps inside the
    image per window, k walked by adds) on windows in and out of the padding,
    dilation, groups, per-dim strides, a 7 x 7 kernel (49 taps, the mask's
    largest family here) and a 9 x 9 one (81 taps: the plain gather), N = 1."""
    from minitensor import _lib

    rng = np.random.default_rng(30)
    cases = [((2, 4, 9, 10), (6, 4, 3, 3), (1, 1), (1, 1), (1, 1), 1),
             ((1, 3, 19, 18), (5, 3, 7, 7), (2, 2), (3, 3), (1, 1), 1),
             ((1, 2, 12, 11), (3, 2, 9, 9), (1, 1), (4, 4), (1, 1), 1),
             ((1, 4, 13, 12), (4, 2, 3, 2), (1, 2), (2, 1), (2, 3), 2)]
    for shape, weight, stride, padding, dilation, groups in cases:
        x, w, b = rng.standard_normal(shape), rng.standard_normal(weight), rng.standard_normal(weight[0])
        want = ref_conv2d(x, w, b, stride, padding, dilation, groups)
        args = [mt.tensor(a, dtype=mt.float32) for a in (x, w, b)]
        for config in range(_lib.conv2d_igemm_config_count()):
            out = mt.full(want.shape, 5.0)  # every output is written
            _lib.conv2d_igemm(out, *args, stride, padding, dilation, groups, config)
            assert_close(out.numpy(), want, mt.float32, n=weight[1] * weight[2] * weight[3])
