"""Sliding windows: im2col/col2im (convolution as a matmul, and pooling) and
the tiled convolution kernel (src/conv.cu)."""

from __future__ import annotations

from typing import Any

from .. import _lib
from .._array import Array, empty
from .._views import as_strided, index, narrow
from .._dtype import DType
from .core import fill_, copy_, clone, contiguous
from .elementwise import inplace_


# ---- sliding windows (convolution and pooling) ------------------------------------------------


def window_shape(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """How many windows of `kernel` taps (`dilation` apart) fit along a dim of `size`
    padded by `padding` on each side, one every `stride` (torch's floor formula)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def im2col(x: Array, kernel: tuple[int, int], stride: tuple[int, int], padding: tuple[int, int],
           dilation: tuple[int, int], pad_value: float = 0.0) -> Array:
    """The sliding windows of x (N, C, H, W) as a new contiguous (N, C, KH, KW, OH, OW)
    tensor: out[n, c, i, j, y, x] = padded[n, c, y*sh + i*dh, x*sw + j*dw].

    Two copies and no arithmetic: the padded input (pad_value around x), then
    one strided copy of a view of it whose strides step through the windows
    (the "strided map" that makes convolution a matmul: the windows overlap,
    so the view reads some elements several times, which a copy may do).
    """
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    oh, ow = window_shape(h, kh, sh, ph, dh), window_shape(w, kw, sw, pw, dw)
    padded = x
    if ph or pw:
        padded = fill_(empty((n, c, h + 2 * ph, w + 2 * pw), x.dtype), pad_value)
        copy_(narrow(narrow(padded, 2, ph, h), 3, pw, w), x)
    padded = contiguous(padded)
    s_n, s_c, s_h, s_w = padded.strides
    windows = as_strided(padded, (n, c, kh, kw, oh, ow),
                         (s_n, s_c, dh * s_h, dw * s_w, sh * s_h, sw * s_w), padded.storage_offset())
    return clone(windows)


CONV_TILE, CONV_SHARED_LIMIT = 16, 48 * 1024  # src/conv.cu's kTile and kConvSharedLimit


def conv2d_tiled_fits(kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
                      dtype: DType) -> bool:
    """Whether mt_conv2d takes these sizes: a block's input patch (a 16 x 16 tile
    of outputs and its halo) and one channel's weights fit in 48 KiB of shared
    memory (the check src/conv.cu makes)."""
    patch = 1
    for k, s, d in zip(kernel, stride, dilation):
        patch *= (CONV_TILE - 1) * s + (k - 1) * d + 1
    return (patch + kernel[0] * kernel[1]) * dtype.itemsize <= CONV_SHARED_LIMIT


def conv2d_tiled(x: Array, weight: Array, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
                 dilation: tuple[int, int], groups: int) -> Array:
    """The convolution of x (N, C, H, W) by weight (C_out, C / groups, KH, KW), plus
    bias (C_out,) or None, in one kernel (mt_conv2d, the tiled rung): each block
    stages the input patch of a 16 x 16 output tile in shared memory; no window
    is copied to memory. The patch must fit in 48 KiB (else InvalidArgumentError
    naming its size)."""
    x, weight = contiguous(x), contiguous(weight)
    bias = None if bias is None else contiguous(bias)
    n, _, h, w = x.shape
    c_out, _, kh, kw = weight.shape
    oh = window_shape(h, kh, stride[0], padding[0], dilation[0])
    ow = window_shape(w, kw, stride[1], padding[1], dilation[1])
    out = empty((n, c_out, oh, ow), x.dtype)
    _lib.conv2d(out, x, weight, bias, stride, padding, dilation, groups)
    return out


def col2im(cols: Array, shape: tuple[int, ...], stride: tuple[int, int], padding: tuple[int, int],
           dilation: tuple[int, int]) -> Array:
    """The gradient of im2col: each window element of cols (N, C, KH, KW, OH, OW) added
    back to the input position it was read from, in a new (N, C, H, W) tensor.

    Windows overlap, so positions receive several additions: one strided
    in-place add per kernel tap (i, j), each a zip kernel over every window
    at once, so that no two threads of one launch write the same element.
    """
    n, c, h, w = shape
    _, _, kh, kw, oh, ow = cols.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    padded = fill_(empty((n, c, h + 2 * ph, w + 2 * pw), cols.dtype), 0.0)
    s_n, s_c, s_h, s_w = padded.strides
    for i in range(kh):
        for j in range(kw):
            # The input positions tap (i, j) read, window by window: a strided view.
            target = as_strided(padded, (n, c, oh, ow), (s_n, s_c, sh * s_h, sw * s_w), i * dh * s_h + j * dw * s_w)
            inplace_("add", target, index(cols, (slice(None), slice(None), i, j)))
    return contiguous(narrow(narrow(padded, 2, ph, h), 3, pw, w))
