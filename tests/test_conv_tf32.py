"""The TF32 convolution rung (src/conv_igemm_tf32.cu, minitensor/ops/conv_tf32.py)
and its switch, mt.backends.cuda.conv.allow_tf32: off by default; on, the float32
convolutions that take the implicit GEMM (F.conv2d and its two gradients) run on
tensor cores, within TF32's bound (tests/helpers.py, assert_within_tf32) of a
float64 NumPy reference; float64 never does. The tile configurations one by one
are tests/c/test_conv_tf32.c's.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import ops
from helpers import assert_within_tf32


@pytest.fixture(autouse=True)
def tf32_conv_off() -> Iterator[None]:
    yield
    mt.backends.cuda.conv.allow_tf32 = False


def conv_products(x: np.ndarray, w: np.ndarray, g: np.ndarray, stride: int, padding: int, dilation: int,
                  groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """out = conv2d(x, w) and, for the output's gradient g, grad_x and grad_w, in
    float64: one einsum per tap (i, j) and group over the strided view of the
    padded input that tap reads."""
    n, c, h, wd = x.shape
    c_out, cg, kh, kw = w.shape
    go = c_out // groups
    oh, ow = g.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    gxp = np.zeros_like(xp)
    out = np.zeros(g.shape)
    gw = np.zeros(w.shape)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dilation, i * dilation + stride * (oh - 1) + 1, stride)
            cols = slice(j * dilation, j * dilation + stride * (ow - 1) + 1, stride)
            for k in range(groups):
                ci, co = slice(k * cg, (k + 1) * cg), slice(k * go, (k + 1) * go)
                tap = w[co, :, i, j].astype(np.float64)  # Co/G, C/G
                out[:, co] += np.einsum("nchw,oc->nohw", xp[:, ci, rows, cols], tap)
                gw[co, :, i, j] += np.einsum("nohw,nchw->oc", g[:, co], xp[:, ci, rows, cols])
                gxp[:, ci, rows, cols] += np.einsum("nohw,oc->nchw", g[:, co], tap)
    return out, gxp[:, :, padding:padding + h, padding:padding + wd], gw


# (N, C, H, W), (C_out, K), stride, padding, dilation, groups: channels and pixels
# off the tiles, N = 1, stride, dilation, groups, 1 x 1.
CASES = [
    ((2, 16, 7, 9), (65, 3), 1, 1, 1, 1),
    ((1, 24, 9, 10), (8, 3), 2, 1, 1, 1),
    ((1, 8, 9, 11), (12, 3), 1, 2, 2, 2),
    ((3, 40, 5, 5), (33, 1), 1, 0, 1, 1),
]


@pytest.mark.parametrize("x_shape,w_shape,stride,padding,dilation,groups", CASES)
def test_conv2d_and_its_gradients_within_tf32(x_shape: Any, w_shape: Any, stride: int, padding: int,
                                              dilation: int, groups: int) -> None:
    rng = np.random.default_rng(0)
    c_out, k = w_shape
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((c_out, x_shape[1] // groups, k, k)).astype(np.float32)
    b = rng.standard_normal(c_out).astype(np.float32)
    mt.backends.cuda.conv.allow_tf32 = True
    tx, tw, tb = (mt.tensor(a, requires_grad=True) for a in (x, w, b))
    out = F.conv2d(tx, tw, tb, stride=stride, padding=padding, dilation=dilation, groups=groups)
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(mt.tensor(g))
    exact, gx, gw = conv_products(x, w, g, stride, padding, dilation, groups)
    mag, mag_gx, mag_gw = conv_products(np.abs(x), np.abs(w), np.abs(g), stride, padding, dilation, groups)
    assert_within_tf32(out, exact + b[None, :, None, None], mag + np.abs(b)[None, :, None, None])
    assert_within_tf32(tx.grad, gx, mag_gx)
    assert_within_tf32(tw.grad, gw, mag_gw)


def test_the_switch_is_off_by_default_and_routes_float32_only() -> None:
    assert mt.backends.cuda.conv.allow_tf32 is False
    assert mt.backends.cuda.matmul.allow_tf32 is False  # the two switches are separate
    rng = np.random.default_rng(1)
    x = mt.tensor(rng.standard_normal((2, 32, 6, 6)).astype(np.float32))
    w = mt.tensor(rng.standard_normal((24, 32, 3, 3)).astype(np.float32))
    exact = F.conv2d(x, w, padding=1).numpy()
    np.testing.assert_array_equal(exact, ops.conv2d_igemm(x, w, None, (1, 1), (1, 1), (1, 1), 1).numpy())
    x64, w64 = x.double(), w.double()
    exact64 = F.conv2d(x64, w64, padding=1).numpy()
    mt.backends.cuda.conv.allow_tf32 = True
    got = F.conv2d(x, w, padding=1).numpy()
    if mt.kernels.get_policy() == "teaching":
        # The switch routes the convolutions that take the implicit-GEMM rung
        # (minitensor/backends.py); under the teaching policy F.conv2d runs the
        # course's rung, in float32, switch or not.
        np.testing.assert_array_equal(got, exact)
    else:
        np.testing.assert_array_equal(got, ops.conv2d_tf32(x, w, None, (1, 1), (1, 1), (1, 1), 1).numpy())
        assert not np.array_equal(got, exact)  # 288 random products an output: TF32 differs somewhere
    np.testing.assert_array_equal(F.conv2d(x64, w64, padding=1).numpy(), exact64)  # float64: unchanged


def test_wrong_uses_are_refused() -> None:
    with pytest.raises(TypeError, match="True or False"):
        mt.backends.cuda.conv.allow_tf32 = 1  # type: ignore[assignment]
    x = mt.zeros((1, 2, 4, 4), dtype=mt.float64)
    w = mt.zeros((3, 2, 3, 3), dtype=mt.float64)
    with pytest.raises(mt.DTypeError, match="mt_conv2d_tf32.*float32"):
        ops.conv2d_tf32(x, w, None, (1, 1), (1, 1), (1, 1), 1)
    with pytest.raises(ValueError, match="no TF32 convolution config"):
        mt._lib.conv2d_tf32_config_name(mt._lib.conv2d_tf32_config_count())
