"""Pooling in one kernel each way (src/pool.cu): max_pool2d (values, indices,
gradient), avg_pool2d, adaptive_avg_pool2d and the 1-D pools against NumPy
loops, float32 and float64, on strided views, odd sizes, ceil_mode, padding,
stride under and over the kernel, dilation, N or C of 1, an empty batch;
gradients against finite differences; conv2d's padding='same' with an odd
total padding against a NumPy convolution."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import _lib, nn
from gradcheck import gradcheck
from helpers import assert_close


def out_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    span = size + 2 * p - d * (k - 1) - 1
    outs = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (outs - 1) * s >= size + p:
        outs -= 1
    return outs


def ref_max_pool(x: np.ndarray, k, s, p, d, ceil_mode):
    """Values and flat indices, torch's loop: the first maximum, a NaN wins."""
    n, c, h, w = x.shape
    oh, ow = out_size(h, k[0], s[0], p[0], d[0], ceil_mode), out_size(w, k[1], s[1], p[1], d[1], ceil_mode)
    values, indices = np.zeros((n, c, oh, ow)), np.zeros((n, c, oh, ow), dtype=np.int64)
    for b in range(n):
        for ch in range(c):
            for oy in range(oh):
                for ox in range(ow):
                    best, at = -np.inf, -1
                    for i in range(k[0]):
                        for j in range(k[1]):
                            y, xx = oy * s[0] - p[0] + i * d[0], ox * s[1] - p[1] + j * d[1]
                            if 0 <= y < h and 0 <= xx < w:
                                v = x[b, ch, y, xx]
                                if at < 0 or v > best or np.isnan(v):
                                    best, at = v, y * w + xx
                    values[b, ch, oy, ox], indices[b, ch, oy, ox] = best, at
    return values, indices


def ref_avg_pool(x: np.ndarray, k, s, p, ceil_mode, count_include_pad, divisor=None):
    n, c, h, w = x.shape
    oh, ow = out_size(h, k[0], s[0], p[0], 1, ceil_mode), out_size(w, k[1], s[1], p[1], 1, ceil_mode)
    out = np.zeros((n, c, oh, ow))
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * s[0] - p[0], ox * s[1] - p[1]
            y1, x1 = min(y0 + k[0], h + p[0]), min(x0 + k[1], w + p[1])
            size = (y1 - y0) * (x1 - x0)
            ya, xa, yb, xb = max(y0, 0), max(x0, 0), min(y1, h), min(x1, w)
            total = x[:, :, ya:yb, xa:xb].sum(axis=(2, 3))
            div = divisor if divisor else size if count_include_pad else (yb - ya) * (xb - xa)
            out[:, :, oy, ox] = total / div
    return out


def ref_adaptive(x: np.ndarray, oh: int, ow: int) -> np.ndarray:
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    for oy in range(oh):
        for ox in range(ow):
            y0, y1 = oy * h // oh, -(-(oy + 1) * h // oh)
            x0, x1 = ox * w // ow, -(-(ox + 1) * w // ow)
            out[:, :, oy, ox] = x[:, :, y0:y1, x0:x1].mean(axis=(2, 3))
    return out


def permuted(a: np.ndarray, dtype) -> mt.Tensor:
    """a as a non-contiguous minitensor view: stored (N, H, W, C), seen (N, C, H, W)."""
    return mt.tensor(np.ascontiguousarray(a.transpose(0, 2, 3, 1)), dtype=dtype).permute(0, 3, 1, 2)


# (shape, kernel, stride, padding, dilation, ceil_mode)
MAX_CASES = [
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((1, 2, 7, 9), (3, 3), (2, 2), (1, 1), (1, 1), False),   # ResNet's 3x3/2
    ((1, 1, 7, 7), (3, 2), (2, 2), (1, 1), (1, 1), True),    # ceil_mode
    ((1, 2, 6, 6), (2, 2), (2, 2), (0, 0), (1, 1), True),    # ceil_mode changing nothing
    ((1, 2, 11, 5), (3, 3), (1, 1), (1, 0), (2, 1), False),  # stride < kernel, dilation
    ((2, 1, 9, 10), (2, 2), (3, 4), (1, 0), (1, 1), True),   # stride > kernel
    ((0, 3, 6, 6), (2, 2), (2, 2), (0, 0), (1, 1), False),   # an empty batch
    ((3, 1, 5, 3), (5, 3), (1, 1), (2, 1), (1, 1), False),   # C = 1, the widest padding
]


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("case", MAX_CASES)
def test_max_pool2d_values_indices_and_gradient(dtype, case) -> None:
    shape, k, s, p, d, ceil_mode = case
    rng = np.random.default_rng(sum(shape))
    x = np.round(rng.standard_normal(shape) * 2)  # whole numbers: ties go to the first maximum
    t = permuted(x, dtype).requires_grad_()
    values, indices = F.max_pool2d(t, k, s, p, d, ceil_mode, return_indices=True)
    ref_v, ref_i = ref_max_pool(x, k, s, p, d, ceil_mode)
    assert_close(values, ref_v, dtype)
    assert indices.dtype is mt.int64 and np.array_equal(indices.numpy(), ref_i)
    grad = rng.standard_normal(ref_v.shape)
    values.backward(mt.tensor(grad, dtype=dtype))
    ref_grad = np.zeros(x.shape)
    for b, ch, oy, ox in np.ndindex(*ref_v.shape):
        y, xx = divmod(ref_i[b, ch, oy, ox], shape[3])
        ref_grad[b, ch, y, xx] += grad[b, ch, oy, ox]
    assert_close(t.grad, ref_grad, dtype, n=k[0] * k[1])


@pytest.mark.parametrize("case", MAX_CASES)
def test_max_pool2d_without_gradient_or_indices(case) -> None:
    """No gradient wanted and no indices asked for: the kernel writes the values
    alone (mt_max_pool2d with indices none), the same values."""
    shape, k, s, p, d, ceil_mode = case
    x = np.round(np.random.default_rng(sum(shape) + 1).standard_normal(shape) * 2)
    ref = ref_max_pool(x, k, s, p, d, ceil_mode)[0]
    with mt.no_grad():
        values = F.max_pool2d(permuted(x, mt.float32).requires_grad_(), k, s, p, d, ceil_mode)
    assert not values.requires_grad
    assert_close(values, ref, mt.float32)
    assert_close(F.max_pool2d(permuted(x, mt.float32), k, s, p, d, ceil_mode), ref, mt.float32)


def test_max_pool2d_nan_wins_and_unbatched() -> None:
    x = np.array([[[1.0, np.nan, 3.0, 2.0], [0.0, 5.0, -1.0, 4.0]]])
    values, indices = F.max_pool2d(mt.tensor(x), 2, return_indices=True)
    assert values.shape == (1, 1, 2) and np.isnan(values.numpy()[0, 0, 0]) and values.numpy()[0, 0, 1] == 4.0
    assert indices.tolist() == [[[1, 7]]]


# (shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
AVG_CASES = [
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), False, True, None),
    ((1, 2, 7, 9), (3, 3), (2, 2), (1, 1), False, True, None),
    ((1, 2, 7, 9), (3, 3), (2, 2), (1, 1), False, False, None),
    ((1, 1, 7, 6), (3, 3), (2, 2), (1, 1), True, True, None),   # ceil_mode: a window clipped at the padding
    ((1, 1, 7, 6), (3, 3), (2, 2), (1, 1), True, False, None),
    ((2, 2, 5, 5), (2, 3), (1, 2), (1, 1), False, True, 3),    # divisor_override
    ((0, 2, 5, 5), (2, 2), (2, 2), (0, 0), False, True, None),  # an empty batch
    ((1, 1, 3, 11), (1, 4), (1, 5), (0, 2), True, False, None),  # stride > kernel, odd sizes
]


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("case", AVG_CASES)
def test_avg_pool2d_matches_numpy(dtype, case) -> None:
    shape, k, s, p, ceil_mode, include, divisor = case
    x = np.random.default_rng(len(shape) + sum(shape)).standard_normal(shape)
    got = F.avg_pool2d(permuted(x, dtype), k, s, p, ceil_mode, include, divisor)
    assert_close(got, ref_avg_pool(x, k, s, p, ceil_mode, include, divisor), dtype, n=k[0] * k[1])
    module = nn.AvgPool2d(k, s, p, ceil_mode, include, divisor)
    assert_close(module(mt.tensor(x, dtype=dtype)), got.numpy(), dtype)


@pytest.mark.parametrize("case", AVG_CASES[:6])
def test_avg_pool2d_with_64_bit_indexing(case) -> None:
    """A divisor of 2^31 is past what the kernels count in int32 (src/pool.cu's
    index_fits_int32), so this runs the int64 instantiations, forward and
    backward; the results are scaled back by 2^31 (exact in float64)."""
    shape, k, s, p, ceil_mode, include, _ = case
    x = np.random.default_rng(sum(shape)).standard_normal(shape)
    t = permuted(x, mt.float64).requires_grad_()
    _lib.reset_launch_counts()
    got = F.avg_pool2d(t, k, s, p, ceil_mode, include, 2**31)
    assert _lib.launch_count("avg_pool2d_forward", "double, long") in (1, -1)  # -1: the CUDA build counts none
    assert_close(got * 2.0**31, ref_avg_pool(x, k, s, p, ceil_mode, include, 1), mt.float64, n=k[0] * k[1])
    grad = np.random.default_rng(1).standard_normal(got.shape)
    got.backward(mt.tensor(grad))
    ones = mt.tensor(x).requires_grad_()
    F.avg_pool2d(ones, k, s, p, ceil_mode, include, 1).backward(mt.tensor(grad))
    assert_close(t.grad * 2.0**31, ones.grad.numpy(), mt.float64, n=k[0] * k[1])


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("shape,size", [((2, 3, 7, 7), (1, 1)), ((1, 2, 10, 7), (3, 4)), ((1, 1, 4, 6), (4, 6)),
                                        ((2, 1, 3, 2), (5, 7)), ((0, 2, 5, 5), (2, 2))])
def test_adaptive_avg_pool2d_matches_numpy(dtype, shape, size) -> None:
    x = np.random.default_rng(sum(shape)).standard_normal(shape)
    got = F.adaptive_avg_pool2d(permuted(x, dtype), size)
    assert_close(got, ref_adaptive(x, *size), dtype, n=x.shape[2] * x.shape[3])
    assert_close(nn.AdaptiveAvgPool2d(size)(mt.tensor(x, dtype=dtype)), got.numpy(), dtype)
    assert F.adaptive_avg_pool2d(mt.tensor(x, dtype=dtype), (None, 2)).shape == shape[:3] + (2,)


def test_pool_gradients_match_finite_differences() -> None:
    x = np.random.default_rng(3).standard_normal((2, 2, 7, 6))
    gradcheck(lambda m, x: m.nn.functional.max_pool2d(x, 3, 2, 1, 1, True), [x])
    gradcheck(lambda m, x: m.nn.functional.max_pool2d(x, (2, 3), (1, 2), (1, 1), (2, 1)), [x])
    gradcheck(lambda m, x: m.nn.functional.avg_pool2d(x, 3, 2, 1, True, False), [x])
    gradcheck(lambda m, x: m.nn.functional.avg_pool2d(x, (2, 3), (1, 2), (1, 1), False, True, 5), [x])
    gradcheck(lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, (3, 4)), [x])
    gradcheck(lambda m, x: m.nn.functional.adaptive_avg_pool2d(x.transpose(2, 3), 1), [x])


def test_pool1d_through_the_2d_kernels() -> None:
    x = np.random.default_rng(4).standard_normal((2, 3, 11))
    t = mt.tensor(x)
    values, indices = F.max_pool1d(t, 3, 2, 1, ceil_mode=True, return_indices=True)
    ref_v, ref_i = ref_max_pool(x[:, :, None, :], (1, 3), (1, 2), (0, 1), (1, 1), True)
    assert_close(values, ref_v[:, :, 0], mt.float64)
    assert np.array_equal(indices.numpy(), ref_i[:, :, 0])
    assert_close(F.avg_pool1d(t, 4, 3, 2, False, False), ref_avg_pool(x[:, :, None, :], (1, 4), (1, 3), (0, 2),
                                                                      False, False)[:, :, 0], mt.float64, n=4)
    assert_close(F.adaptive_avg_pool1d(t, 4), ref_adaptive(x[:, :, None, :], 1, 4)[:, :, 0], mt.float64, n=11)


def test_pool_refusals() -> None:
    x = mt.randn(1, 2, 6, 6)
    with pytest.raises(ValueError, match="half the kernel"):
        F.max_pool2d(x, 3, padding=2)
    with pytest.raises(mt.ShapeError, match="too small"):
        F.max_pool2d(mt.randn(1, 1, 2, 2), 3, dilation=2)
    with pytest.raises(mt.ShapeError, match=r"\(N, C, H, W\)"):
        F.avg_pool2d(mt.randn(6, 6), 2)
    with pytest.raises(mt.DTypeError, match="int64"):
        F.max_pool2d(x.long(), 2)
    with pytest.raises(mt.ShapeError, match="empty plane"):
        F.adaptive_avg_pool2d(mt.randn(1, 1, 0, 3), 1)
    with pytest.raises(mt.ShapeError, match="empty plane"):
        F.max_pool2d(mt.randn(1, 1, 0, 3), 2, padding=1)
    with pytest.raises(ValueError, match="output_size"):
        F.adaptive_avg_pool2d(x, (1, 2, 3))
    with pytest.raises(ValueError, match="divisor_override"):
        F.avg_pool2d(x, 2, divisor_override=0)


def ref_conv(x: np.ndarray, w: np.ndarray, pad: tuple[tuple[int, int], tuple[int, int]], dil: tuple[int, int]):
    """A stride-1 convolution with its own padding per side."""
    xp = np.pad(x, ((0, 0), (0, 0), pad[0], pad[1]))
    kh, kw = w.shape[2:]
    oh, ow = xp.shape[2] - dil[0] * (kh - 1), xp.shape[3] - dil[1] * (kw - 1)
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dil[0]:i * dil[0] + oh, j * dil[1]:j * dil[1] + ow]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out


@pytest.mark.parametrize("kernel,dilation", [((2, 2), (1, 1)), ((4, 3), (1, 1)), ((2, 3), (3, 2)), ((3, 3), (1, 1))])
def test_conv2d_same_padding_puts_the_odd_one_at_the_end(kernel, dilation) -> None:
    """torch's padding='same': total dilation * (kernel - 1) per dim, the extra
    one (when odd) at the bottom and right."""
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 3, 7, 8)), rng.standard_normal((4, 3) + kernel)
    pads = []
    for d in (0, 1):
        total = dilation[d] * (kernel[d] - 1)
        pads.append((total // 2, total - total // 2))
    t = mt.tensor(x, requires_grad=True)
    out = F.conv2d(t, mt.tensor(w), padding="same", dilation=dilation)
    assert out.shape == (2, 4, 7, 8)
    assert_close(out, ref_conv(x, w, tuple(pads), dilation), mt.float64, n=3 * math.prod(kernel))
    gradcheck(lambda m, x: m.nn.functional.conv2d(x, m.tensor(w[:, :, :, :]), padding="same", dilation=dilation),
              [x[:1, :, :4, :5]])
    assert F.conv1d(mt.randn(1, 2, 9), mt.randn(3, 2, 4), padding="same").shape == (1, 3, 9)


def test_pooling_arguments_remembered_per_input_size_still_checked() -> None:
    """_pool_args remembers the checked arguments of plain ints per input size: a
    second call of another size gets its own output size, and arguments that are
    not plain ints (a bool, a negative padding, a padding past half the kernel)
    are still refused after a remembered call."""
    rng = np.random.default_rng(11)
    for shape in ((2, 3, 8, 8), (2, 3, 9, 7), (1, 2, 8, 8)):
        a = rng.standard_normal(shape).astype(np.float32)
        x = mt.tensor(a)
        oh, ow = shape[2] // 2, shape[3] // 2
        windows = a[:, :, : oh * 2, : ow * 2].reshape(shape[0], shape[1], oh, 2, ow, 2)
        for _ in range(2):  # the first call checks and remembers, the second reuses
            got = F.max_pool2d(x, 2)
            assert got.shape == shape[:2] + (oh, ow)
            np.testing.assert_array_equal(got.numpy(), windows.max(axis=(3, 5)))
            np.testing.assert_allclose(F.avg_pool2d(x, 2).numpy(), windows.mean(axis=(3, 5)), rtol=1e-6, atol=1e-6)
    x = mt.tensor(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    F.max_pool2d(x, 2, 2, 1)
    for bad in (dict(kernel_size=True), dict(kernel_size=2, padding=-1), dict(kernel_size=2, padding=2),
                dict(kernel_size=2, stride=False)):
        with pytest.raises(ValueError):
            F.max_pool2d(x, **bad)
        with pytest.raises(ValueError):
            F.avg_pool2d(x, **bad)


def test_avg_pool2d_without_gradient_matches_the_recorded_road() -> None:
    """avg_pool2d with no gradient wanted runs the kernel without the rule's node:
    the same values as the recorded road, and no grad_fn."""
    a = np.random.default_rng(12).standard_normal((2, 3, 9, 9)).astype(np.float32)
    x = mt.tensor(a, requires_grad=True)
    recorded = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)
    with mt.no_grad():
        plain = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)
    assert recorded.grad_fn is not None and plain.grad_fn is None and not plain.requires_grad
    np.testing.assert_array_equal(plain.numpy(), recorded.detach().numpy())
    unbatched = F.avg_pool2d(mt.tensor(a[0]), 2)
    np.testing.assert_array_equal(unbatched.numpy(), F.avg_pool2d(mt.tensor(a[:1]), 2).numpy()[0])


def test_pool_forwards_make_their_results_in_one_call_and_free_them() -> None:
    """The forwards' results come allocated from the library's call
    (mt_max_pool2d_new, mt_avg_pool2d_new): right values and indices, and every
    byte back once the results are gone."""
    from minitensor import _lib as lib

    a = np.random.default_rng(13).standard_normal((2, 3, 8, 8)).astype(np.float32)
    x = mt.tensor(a)
    windows = a.reshape(2, 3, 4, 2, 4, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 4, 4, 4)
    before = lib.memory_in_use()
    for _ in range(3):
        values, indices = F.max_pool2d(x, 2, return_indices=True)
        np.testing.assert_array_equal(values.numpy(), windows.max(-1))
        first = windows.argmax(-1)
        rows, cols = np.arange(4)[:, None] * 2 + first // 2, np.arange(4)[None, :] * 2 + first % 2
        np.testing.assert_array_equal(indices.numpy(), rows * 8 + cols)
        np.testing.assert_allclose(F.avg_pool2d(x, 2).numpy(), windows.mean(-1), rtol=1e-6, atol=1e-6)
        assert F.max_pool2d(x, 2).shape == (2, 3, 4, 4)
        del values, indices
    assert lib.memory_in_use() == before


def test_max_pool2d_return_indices_without_gradient_matches_the_recorded_road() -> None:
    """max_pool2d(return_indices=True) with no gradient wanted runs the kernel
    without the rule's node: the same values and indices, batched or not."""
    a = np.random.default_rng(14).integers(-2, 3, (2, 3, 9, 9)).astype(np.float32)  # ties
    x = mt.tensor(a, requires_grad=True)
    values, indices = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    with mt.no_grad():
        plain_values, plain_indices = F.max_pool2d(x, 3, 2, 1, return_indices=True)
        one_values, one_indices = F.max_pool2d(mt.tensor(a[0]), 3, 2, 1, return_indices=True)
    assert values.grad_fn is not None and plain_values.grad_fn is None and plain_indices.dtype is mt.int64
    np.testing.assert_array_equal(plain_values.numpy(), values.detach().numpy())
    np.testing.assert_array_equal(plain_indices.numpy(), indices.numpy())
    np.testing.assert_array_equal(one_values.numpy(), plain_values.numpy()[0])
    np.testing.assert_array_equal(one_indices.numpy(), plain_indices.numpy()[0])
