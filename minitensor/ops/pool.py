"""2-D pooling (src/pool.cu): output sizes as torch computes them, output
allocation, and one kernel call each way."""

from __future__ import annotations

from typing import Optional

from .. import _lib
from .._array import Array, adopt, empty
from .._dtype import int64
from .core import _NEW_RESULTS, _new_result, require_float

Pair = tuple[int, int]


def pool_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """torch's pooling output size along one dim: floor((size + 2 padding -
    dilation (kernel - 1) - 1) / stride) + 1, or with ceil_mode the ceiling,
    less one when that last window would start past the input and its left
    padding (every window must start inside them)."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    outs = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (outs - 1) * stride >= size + padding:
        outs -= 1
    return outs


def max_pool2d(x: Array, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair,
               out_size: Pair, with_indices: bool = True) -> tuple[Array, Optional[Array]]:
    """Each window's maximum of x (N, C, H, W), and its int64 position y * W + x
    in its input plane: two (N, C, OH, OW) tensors, out_size = (OH, OW). Without
    with_indices the positions are None: the kernel writes the values only (a
    forward that no backward follows and that returns no indices)."""
    if not x._dtype.is_floating_point:  # (nn.functional checked; a call saved on the common road)
        require_float(x, "max_pool2d()")
    shape = x._shape[:2] + tuple(out_size)
    dtype = x._dtype
    # The outputs' layouts (core's cache of new results), then one call that
    # allocates them and runs the kernel (mt_max_pool2d_new).
    strides, nbytes, raw = _NEW_RESULTS.get((shape, dtype)) or _new_result(shape, dtype)
    if not nbytes:  # no element, or too many bytes: empty() says which
        out = empty(shape, dtype)
        indices = empty(shape, int64) if with_indices else None
        _lib.max_pool2d(out, indices, x, kernel, stride, padding, dilation)
        return out, indices
    desc = _lib.MtTensor.from_buffer_copy(raw)
    if with_indices:
        _, index_bytes, index_raw = _NEW_RESULTS.get((shape, int64)) or _new_result(shape, int64)
        index_desc = _lib.MtTensor.from_buffer_copy(index_raw)
        _lib.max_pool2d_new(desc, index_desc, x, kernel, stride, padding, dilation)
        return (adopt(desc.data, desc, shape, strides, dtype, nbytes),
                adopt(index_desc.data, index_desc, shape, strides, int64, index_bytes))
    _lib.max_pool2d_new(desc, None, x, kernel, stride, padding, dilation)
    return adopt(desc.data, desc, shape, strides, dtype, nbytes), None


def max_pool2d_backward(grad: Array, indices: Array, in_shape: tuple[int, ...], kernel: Pair, stride: Pair,
                        padding: Pair, dilation: Pair) -> Array:
    """The gradient of max_pool2d's input: each grad element added at its maximum."""
    out = empty(in_shape, grad.dtype)
    _lib.max_pool2d_backward(out, grad, indices, kernel, stride, padding, dilation)
    return out


def avg_pool2d(x: Array, kernel: Pair, stride: Pair, padding: Pair, count_include_pad: bool, divisor: int,
               out_size: Pair) -> Array:
    """Each window's mean of x (N, C, H, W); divisor 0 divides by the window's
    size (count_include_pad: padding included), else by divisor."""
    if not x._dtype.is_floating_point:  # (nn.functional checked; a call saved on the common road)
        require_float(x, "avg_pool2d()")
    shape = x._shape[:2] + tuple(out_size)
    dtype = x._dtype
    strides, nbytes, raw = _NEW_RESULTS.get((shape, dtype)) or _new_result(shape, dtype)
    if not nbytes:  # as in max_pool2d
        out = empty(shape, dtype)
        _lib.avg_pool2d(out, x, kernel, stride, padding, count_include_pad, divisor)
        return out
    desc = _lib.MtTensor.from_buffer_copy(raw)
    _lib.avg_pool2d_new(desc, x, kernel, stride, padding, count_include_pad, divisor)
    return adopt(desc.data, desc, shape, strides, dtype, nbytes)


def avg_pool2d_backward(grad: Array, in_shape: tuple[int, ...], kernel: Pair, stride: Pair, padding: Pair,
                        count_include_pad: bool, divisor: int) -> Array:
    """The gradient of avg_pool2d's input: each window's gradient spread over it."""
    out = empty(in_shape, grad.dtype)
    _lib.avg_pool2d_backward(out, grad, kernel, stride, padding, count_include_pad, divisor)
    return out


def adaptive_avg_pool2d(x: Array, out_size: Pair) -> Array:
    """The means of x's (N, C, H, W) adaptive windows, (N, C, OH, OW): output row o
    averages rows [floor(o H / OH), ceil((o + 1) H / OH)), columns alike."""
    require_float(x, "adaptive_avg_pool2d()")
    out = empty(x.shape[:2] + tuple(out_size), x.dtype)
    _lib.adaptive_avg_pool2d(out, x)
    return out


def adaptive_avg_pool2d_backward(grad: Array, in_shape: tuple[int, ...]) -> Array:
    """The gradient of adaptive_avg_pool2d's input."""
    out = empty(in_shape, grad.dtype)
    _lib.adaptive_avg_pool2d_backward(out, grad)
    return out
