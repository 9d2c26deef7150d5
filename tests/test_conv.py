"""Convolution and pooling (the im2col rung): conv1d, conv2d, max_pool2d and
avg_pool2d against plain NumPy loops (stride, padding, dilation, groups,
strided input views, odd sizes, batch and channel counts of 1), their
gradients against finite differences, the nn modules, and the refusals.
Then the tiled rung (mt.kernels.conv2d(..., algo="tiled"), src/conv.cu):
against the same loops and the im2col rung, its gradients, its refusals."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from gradcheck import gradcheck
from helpers import assert_close
from minitensor import nn


def windows(xp: np.ndarray, kh: int, kw: int, stride, dilation, oh: int, ow: int):
    """(i, j, the (N, C, OH, OW) input values tap (i, j) reads) for every tap."""
    for i in range(kh):
        for j in range(kw):
            r, c = i * dilation[0], j * dilation[1]
            yield i, j, xp[:, :, r: r + stride[0] * (oh - 1) + 1: stride[0], c: c + stride[1] * (ow - 1) + 1: stride[1]]


def out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def ref_conv2d(x, w, b, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    n, c, h, wd = x.shape
    co, cg, kh, kw = w.shape
    oh, ow = (out_size(h, kh, stride[0], padding[0], dilation[0]), out_size(wd, kw, stride[1], padding[1], dilation[1]))
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    out = np.zeros((n, co, oh, ow))
    per = co // groups
    for i, j, tap in windows(xp, kh, kw, stride, dilation, oh, ow):
        for g in range(groups):
            out[:, g * per:(g + 1) * per] += np.einsum("nchw,oc->nohw", tap[:, g * cg:(g + 1) * cg],
                                                       w[g * per:(g + 1) * per, :, i, j])
    return out if b is None else out + b[None, :, None, None]


def ref_pool(x, k, stride, padding, reduce, pad_value):
    oh, ow = (out_size(x.shape[2], k[0], stride[0], padding[0], 1), out_size(x.shape[3], k[1], stride[1], padding[1], 1))
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2), constant_values=pad_value)
    taps = np.stack([tap for _, _, tap in windows(xp, k[0], k[1], stride, (1, 1), oh, ow)], axis=2)
    return reduce(taps, axis=2)


CONV_CASES = [  # (N, C, H, W), (C_out, KH, KW), stride, padding, dilation, groups
    ((2, 3, 7, 9), (4, 3, 3), 1, 0, 1, 1),
    ((1, 4, 8, 5), (6, 3, 2), (2, 1), (1, 2), (1, 2), 2),
    ((3, 1, 5, 5), (2, 5, 5), 1, 2, 1, 1),
    ((2, 6, 9, 7), (6, 1, 1), 3, 0, 1, 3),
    ((1, 2, 11, 4), (3, 2, 3), (3, 2), (0, 1), (2, 1), 1),
]


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("case", CONV_CASES, ids=range(len(CONV_CASES)))
def test_conv2d_matches_numpy(case, dtype) -> None:
    shape, (co, kh, kw), stride, padding, dilation, groups = case
    rng = np.random.default_rng(len(shape) + co)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((co, shape[1] // groups, kh, kw))
    b = rng.standard_normal(co)
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    ref = ref_conv2d(x, w, b, pair(stride), pair(padding), pair(dilation), groups)
    # The input as a strided view (a permuted copy permuted back) as well as contiguous.
    permuted = mt.tensor(x.transpose(0, 2, 3, 1).copy(), dtype=dtype).permute(0, 3, 1, 2)
    for xt in (mt.tensor(x, dtype=dtype), permuted):
        got = F.conv2d(xt, mt.tensor(w, dtype=dtype), mt.tensor(b, dtype=dtype), stride, padding, dilation, groups)
        assert_close(got, ref, dtype, n=w[0].size)
    no_bias = F.conv2d(mt.tensor(x, dtype=dtype), mt.tensor(w, dtype=dtype), None, stride, padding, dilation, groups)
    assert_close(no_bias, ref - b[None, :, None, None], dtype, n=w[0].size)


def test_conv1d_and_same_padding_match_numpy() -> None:
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((2, 4, 13)), rng.standard_normal((6, 2, 3)), rng.standard_normal(6)
    got = F.conv1d(mt.tensor(x), mt.tensor(w), mt.tensor(b), stride=2, padding=1, dilation=2, groups=2)
    ref = ref_conv2d(x[:, :, None], w[:, :, None], b, (1, 2), (0, 1), (1, 2), 2)[:, :, 0]
    assert_close(got, ref, mt.float64, n=6)
    same = F.conv2d(mt.tensor(x[:, :, None].repeat(5, 2)), mt.tensor(w[:, :, None].repeat(3, 2)), groups=2,
                    padding="same")
    assert same.shape == (2, 6, 5, 13)
    assert F.conv1d(mt.tensor(x), mt.tensor(w), groups=2, padding="valid").shape == (2, 6, 11)


@pytest.mark.parametrize("stride, padding", [(None, 0), (1, 1), ((2, 1), (1, 0))])
def test_pooling_matches_numpy(stride, padding) -> None:
    x = np.random.default_rng(2).standard_normal((2, 3, 7, 6))
    k = (3, 2)
    s = k if stride is None else ((stride, stride) if isinstance(stride, int) else stride)
    p = (padding, padding) if isinstance(padding, int) else padding
    if p[1] * 2 > k[1]:
        p = (p[0], 1)
    t = mt.tensor(x).transpose(2, 3).transpose(2, 3)  # a view, same values
    assert_close(F.max_pool2d(t, k, stride, p), ref_pool(x, k, s, p, np.max, -np.inf), mt.float64)
    assert_close(F.avg_pool2d(t, k, stride, p), ref_pool(x, k, s, p, np.mean, 0.0), mt.float64, n=6)
    inside = ref_pool(np.ones_like(x), k, s, p, np.sum, 0.0)
    assert_close(F.avg_pool2d(t, k, stride, p, count_include_pad=False), ref_pool(x, k, s, p, np.sum, 0.0) / inside,
                 mt.float64, n=6)
    assert_close(F.avg_pool2d(t, k, stride, p, divisor_override=4), ref_pool(x, k, s, p, np.sum, 0.0) / 4,
                 mt.float64, n=6)


def test_max_pool2d_indices_point_at_the_maxima() -> None:
    x = mt.tensor(np.random.default_rng(3).standard_normal((2, 3, 8, 7)))
    values, indices = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    assert indices.dtype is mt.int64 and indices.shape == values.shape
    picked = x.flatten(2).gather(2, indices.flatten(2)).reshape(*values.shape)
    assert_close(picked, values.numpy(), mt.float64)
    v2, i2 = nn.MaxPool2d(2, return_indices=True)(x)
    assert v2.shape == (2, 3, 4, 3) and int(i2[0, 0, 0, 0]) in (0, 1, 7, 8)


def test_conv_and_pool_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((2, 4, 6, 5)), rng.standard_normal((4, 2, 3, 2)), rng.standard_normal(4)
    gradcheck(lambda m, x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2), groups=2), [x, w, b])
    gradcheck(lambda m, x, w: F.conv1d(x, w, stride=2, padding=2, groups=2), [x[:, :, 0], w[:, :, 0]])
    gradcheck(lambda m, x: F.max_pool2d(x, 2, 1, 1), [x])
    gradcheck(lambda m, x: F.avg_pool2d(x, (3, 2), (1, 2), (1, 1), count_include_pad=False), [x])


def test_overlapping_windows_add_their_gradients() -> None:
    x = mt.ones(1, 1, 4, 4, dtype=mt.float64, requires_grad=True)
    F.conv2d(x, mt.ones(1, 1, 3, 3, dtype=mt.float64)).sum().backward()
    # How many 3x3 windows (stride 1) cover each position of a 4x4 plane.
    assert x.grad[0, 0].tolist() == [[1, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]]


def test_modules_and_a_small_cnn_learns() -> None:
    mt.manual_seed(0)
    conv = nn.Conv2d(3, 8, 3, padding=1)
    assert conv.weight.shape == (8, 3, 3, 3) and conv.bias.shape == (8,)
    assert float(conv.weight.abs().max()) <= 1 / np.sqrt(27)  # torch's bound, 1/sqrt(fan_in)
    assert nn.Conv1d(4, 6, 5, groups=2, bias=False).weight.shape == (6, 2, 5)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 4, 3),
                          nn.AvgPool2d(2), nn.Flatten(), nn.Linear(4, 2))
    x = mt.randn(8, 1, 8, 8)
    y = mt.tensor([0, 1] * 4)
    opt = mt.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert "Conv2d(1, 4, kernel_size=(3, 3)" in repr(model)


def test_bad_arguments_name_the_problem() -> None:
    x = mt.randn(2, 4, 5, 5)
    with pytest.raises(mt.ShapeError, match="groups"):
        F.conv2d(x, mt.randn(6, 3, 3, 3), groups=2)
    with pytest.raises(mt.ShapeError, match="no window fits"):
        F.conv2d(x, mt.randn(2, 4, 7, 7))
    with pytest.raises(mt.ShapeError, match=r"\(N, C, H, W\)"):
        F.conv2d(mt.randn(4, 5, 5), mt.randn(2, 4, 3, 3))
    with pytest.raises(mt.DTypeError, match="float64"):
        F.conv2d(x, mt.randn(2, 4, 3, 3, dtype=mt.float64))
    with pytest.raises(mt.DTypeError, match="int64"):
        F.conv2d(x.long(), mt.randn(2, 4, 3, 3))
    with pytest.raises(ValueError, match="stride"):
        F.conv2d(x, mt.randn(2, 4, 3, 3), stride=0)
    with pytest.raises(ValueError, match="same"):
        F.conv2d(x, mt.randn(2, 4, 2, 2), padding="same", stride=2)
    with pytest.raises(ValueError, match="half the kernel"):
        F.avg_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="divide by groups"):
        nn.Conv2d(3, 4, 3, groups=2)


# ---- the tiled rung: one kernel, the input patch of each 16 x 16 output tile in shared memory ----

TILED_CASES = CONV_CASES + [  # odd planes across several tiles, a 7x7 stem, 1x1 images, depthwise
    ((1, 2, 37, 21), (3, 3, 3), 1, 1, 1, 1),
    ((2, 3, 35, 35), (2, 7, 7), 2, 3, 1, 1),
    ((3, 2, 1, 1), (4, 1, 1), 1, 0, 1, 1),
    ((2, 2, 1, 1), (2, 3, 3), 1, 1, 1, 1),
    ((1, 4, 18, 17), (4, 3, 3), 1, 2, 2, 4),
]


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("case", TILED_CASES, ids=range(len(TILED_CASES)))
def test_tiled_conv2d_matches_numpy_and_im2col(case, dtype) -> None:
    shape, (co, kh, kw), stride, padding, dilation, groups = case
    rng = np.random.default_rng(len(shape) + co + kh)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((co, shape[1] // groups, kh, kw))
    b = rng.standard_normal(co)
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    ref = ref_conv2d(x, w, b, pair(stride), pair(padding), pair(dilation), groups)
    xt, wt, bt = (mt.tensor(a, dtype=dtype) for a in (x, w, b))
    permuted = mt.tensor(x.transpose(0, 2, 3, 1).copy(), dtype=dtype).permute(0, 3, 1, 2)  # a strided view
    for inp in (xt, permuted):
        got = mt.kernels.conv2d(inp, wt, bt, stride, padding, dilation, groups, algo="tiled")
        assert got.shape == ref.shape and got.dtype is dtype
        assert_close(got, ref, dtype, n=w[0].size)
    no_bias = mt.kernels.conv2d(xt, wt, None, stride, padding, dilation, groups, algo="tiled")
    assert_close(no_bias, ref - b[None, :, None, None], dtype, n=w[0].size)
    im2col = mt.kernels.conv2d(xt, wt, bt, stride, padding, dilation, groups, algo="im2col")
    assert_close(got, im2col.numpy().astype(np.float64), dtype, n=w[0].size)


def test_tiled_conv2d_views_and_arguments() -> None:
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((2, 6, 12, 10)), rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4)
    # Non-contiguous input, weight and bias: a sliced input, a transposed weight, a stepped bias.
    xs = mt.tensor(np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 2))))[:, :, 1:, :10]
    ws = mt.tensor(w.transpose(0, 1, 3, 2).copy()).transpose(2, 3)
    bs = mt.tensor(np.repeat(b, 2))[::2]
    assert not (xs.is_contiguous() or ws.is_contiguous() or bs.is_contiguous())
    got = mt.kernels.conv2d(xs, ws, bs, stride=(2, 1), padding="valid", groups=2, algo="tiled")
    assert_close(got, ref_conv2d(x, w, b, (2, 1), (0, 0), (1, 1), 2), mt.float64, n=27)
    same = mt.kernels.conv2d(mt.tensor(x), mt.tensor(w), padding="same", dilation=2, groups=2, algo="tiled")
    assert_close(same, ref_conv2d(x, w, None, (1, 1), (2, 2), (2, 2), 2), mt.float64, n=27)
    # algo="default" is what F.conv2d runs.
    assert mt.kernels.algorithms("conv2d") == ("default", "im2col", "tiled", "implicit_gemm", "depthwise", "direct")
    default = mt.kernels.conv2d(mt.tensor(x), mt.tensor(w), groups=2)
    assert_close(default, F.conv2d(mt.tensor(x), mt.tensor(w), groups=2).numpy(), mt.float64)
    # An empty batch gives an empty result, and no output channel an empty plane.
    assert mt.kernels.conv2d(mt.randn(0, 6, 5, 5), mt.randn(4, 3, 3, 3), groups=2, algo="tiled").shape == (0, 4, 3, 3)
    assert mt.kernels.conv2d(mt.randn(2, 6, 5, 5), mt.randn(0, 6, 3, 3), algo="tiled").shape == (2, 0, 3, 3)
    # No input channel: the output is the bias.
    alone = mt.kernels.conv2d(mt.randn(2, 0, 5, 5), mt.randn(3, 0, 3, 3), mt.tensor([1.0, 2.0, 3.0]), algo="tiled")
    assert alone.shape == (2, 3, 3, 3) and alone[:, 1].tolist() == [[[2.0] * 3] * 3] * 2


def test_tiled_conv2d_gradients_match_finite_differences_and_im2col() -> None:
    rng = np.random.default_rng(6)
    x, w, b = rng.standard_normal((2, 4, 6, 5)), rng.standard_normal((4, 2, 3, 2)), rng.standard_normal(4)
    gradcheck(lambda m, x, w, b: mt.kernels.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2), groups=2,
                                                   algo="tiled"), [x, w, b])
    # A larger case across tiles: the gradients equal the im2col rung's.
    x, w, b = rng.standard_normal((2, 3, 19, 18)), rng.standard_normal((5, 3, 3, 3)), rng.standard_normal(5)
    grads = []
    for algo in ("im2col", "tiled"):
        leaves = [mt.tensor(a, requires_grad=True) for a in (x, w, b)]
        out = mt.kernels.conv2d(*leaves, stride=1, padding=1, algo=algo)
        (out * mt.tensor(np.sin(np.arange(out.numel())).reshape(out.shape))).sum().backward()
        grads.append([leaf.grad.numpy() for leaf in leaves])
    for g_im2col, g_tiled in zip(*grads):
        assert_close(g_tiled, g_im2col, mt.float64, n=64)
    # Only the input requires a gradient: the weight's is not computed.
    xi = mt.tensor(x, requires_grad=True)
    mt.kernels.conv2d(xi, mt.tensor(w), algo="tiled").sum().backward()
    assert xi.grad.shape == x.shape


def test_tiled_conv2d_refusals_name_the_problem() -> None:
    x = mt.randn(1, 2, 40, 40)
    with pytest.raises(ValueError, match="unknown algo 'winograd'"):
        mt.kernels.conv2d(x, mt.randn(2, 2, 3, 3), algo="winograd")
    # The patch of a 16 x 16 tile at stride 8 is 121 x 121 floats: over 48 KiB of shared memory.
    with pytest.raises(mt.InvalidArgumentError, match=r"121 x 121.*shared memory"):
        mt.kernels.conv2d(x, mt.randn(2, 2, 1, 1), stride=8, algo="tiled")
    # float64 halves what fits: stride 6 (91 x 91 doubles) is refused, float32 takes it.
    with pytest.raises(mt.InvalidArgumentError, match="91 x 91"):
        mt.kernels.conv2d(x.double(), mt.randn(2, 2, 1, 1, dtype=mt.float64), stride=6, algo="tiled")
    assert mt.kernels.conv2d(x, mt.randn(2, 2, 1, 1), stride=6, algo="tiled").shape == (1, 2, 7, 7)
    # The im2col rung has no such limit.
    assert mt.kernels.conv2d(x, mt.randn(2, 2, 1, 1), stride=8, algo="im2col").shape == (1, 2, 5, 5)
    # The argument checks are F.conv2d's, naming kernels.conv2d().
    with pytest.raises(mt.ShapeError, match=r"kernels.conv2d\(\).*groups"):
        mt.kernels.conv2d(x, mt.randn(2, 1, 3, 3), groups=3, algo="tiled")
    with pytest.raises(mt.DTypeError, match="int64"):
        mt.kernels.conv2d(x.long(), mt.randn(2, 2, 3, 3), algo="tiled")
    with pytest.raises(mt.DTypeError, match="float64"):
        mt.kernels.conv2d(x, mt.randn(2, 2, 3, 3), mt.randn(2, dtype=mt.float64), algo="tiled")
    with pytest.raises(mt.ShapeError, match="no window fits"):
        mt.kernels.conv2d(mt.randn(1, 2, 2, 2), mt.randn(2, 2, 3, 3), algo="tiled")


def test_conv2d_default_takes_the_tiled_rung_for_depthwise_and_falls_back_where_it_cannot() -> None:
    """F.conv2d runs the tiled kernel for depthwise layers whose patch fits in
    shared memory (the fast policy) and im2col otherwise: the same values and
    gradients either way, a stride too large for the tiled patch included."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 6, 19, 21)), rng.standard_normal((6, 1, 3, 3))
    assert mt.ops.conv2d_tiled_fits((3, 3), (1, 1), (1, 1), mt.float32)
    assert not mt.ops.conv2d_tiled_fits((3, 3), (9, 9), (1, 1), mt.float64)
    for stride in (1, 9):
        grads = []
        for run in (lambda a, b: F.conv2d(a, b, stride=stride, padding=1, groups=6),
                    lambda a, b: mt.kernels.conv2d(a, b, stride=stride, padding=1, groups=6, algo="im2col")):
            a, b = mt.tensor(x, requires_grad=True), mt.tensor(w, requires_grad=True)
            out = run(a, b)
            out.backward(mt.ones(out.shape, dtype=out.dtype))
            grads.append((out.numpy(), a.grad.numpy(), b.grad.numpy()))
        for got, want in zip(*grads):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_conv2d_tiled_fits_states_the_kernels_own_limit() -> None:
    """ops.conv2d_tiled_fits mirrors src/conv.cu's shared-memory check: at the
    largest stride it accepts the tiled kernel runs, one more is refused."""
    x = mt.tensor(np.random.default_rng(8).standard_normal((1, 2, 40, 40)))
    w = mt.tensor(np.random.default_rng(9).standard_normal((2, 1, 3, 3)))
    stride = 1
    while mt.ops.conv2d_tiled_fits((3, 3), (stride + 1, 1), (1, 1), mt.float64):
        stride += 1
    mt.kernels.conv2d(x, w, stride=(stride, 1), groups=2, algo="tiled")
    with pytest.raises(mt.InvalidArgumentError, match="shared memory"):
        mt.kernels.conv2d(x, w, stride=(stride + 1, 1), groups=2, algo="tiled")
