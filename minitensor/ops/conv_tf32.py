"""The TF32 tensor-core convolution rung (src/conv_igemm_tf32.cu): the
implicit-GEMM convolution and its two gradients with the tile products on
tensor cores (mma.sync), operands rounded to TF32.

Opt-in: ops.conv2d_igemm and its gradients (ops/conv.py) come here for float32
operands while ``mt.backends.cuda.conv.allow_tf32`` is set (default False), so
F.conv2d, nn.Conv2d and their backward run it without other changes; a 3x3
stride-1 product first races it against the Winograd rung, with its products in
float32 and in TF32 (ops/conv.py, _igemm_or_winograd). The error
is TF32's, about 1e-3 relative (tests/helpers.py's "tf32" tolerance), as with
torch's cuDNN under torch.backends.cudnn.allow_tf32.
"""

from __future__ import annotations

from typing import Any

from .. import _lib, backends
from . import autotune
from .._array import Array, empty
from .._dtype import DType, float32
from .core import contiguous

# What examples/train_resnet.py prints as the rung its convolutions take with --tf32.
TF32_CONV_RUNG = "conv_igemm_tf32: implicit GEMM on mma.sync.m16n8k8 tensor cores"


def tf32_conv_allowed(dtype: DType) -> bool:
    """Whether a convolution of this dtype runs the TF32 rung: float32 while
    mt.backends.cuda.conv.allow_tf32 is set."""
    return dtype is float32 and backends.cuda.conv.allow_tf32


def _out_hw(h: int, w: int, kernel: tuple[int, int], stride: tuple[int, int], padding: tuple[int, int],
            dilation: tuple[int, int]) -> tuple[int, int]:
    """The output's (OH, OW): torch's floor formula."""
    return tuple((size + 2 * p - d * (k - 1) - 1) // s + 1  # type: ignore[return-value]
                 for size, k, s, p, d in zip((h, w), kernel, stride, padding, dilation))


def conv2d_tf32(x: Array, weight: Array, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
                dilation: tuple[int, int], groups: int) -> Array:
    """The convolution of x (N, C, H, W) by weight (C_out, C / groups, KH, KW), plus
    bias (C_out,) or None, on tensor cores (mt_conv2d_tf32): float32 only. The
    tile configuration is the autotuner's, as for ops.conv2d_igemm."""
    x, weight = contiguous(x), contiguous(weight)
    bias = None if bias is None else contiguous(bias)
    n, _, h, w = x.shape
    c_out, _, kh, kw = weight.shape
    out = empty((n, c_out, *_out_hw(h, w, (kh, kw), stride, padding, dilation)), x.dtype)
    args = (stride, padding, dilation, groups)

    def run(config: int) -> None:
        _lib.conv2d_tf32(out, x, weight, bias, *args, config)

    run(autotune.conv_config("forward", x.shape, weight.shape, x.dtype, args, run, rung="conv2d_tf32"))
    return out


def conv2d_tf32_input_grad(grad: Array, weight: Array, input_shape: tuple[int, ...], stride: tuple[int, int],
                           padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> Array:
    """The gradient of the convolution's input (of input_shape, (N, C, H, W)) for the
    output's gradient grad (N, C_out, OH, OW), on tensor cores
    (mt_conv2d_tf32_input_grad)."""
    out = empty(tuple(input_shape), grad.dtype)
    grad, weight = contiguous(grad), contiguous(weight)
    args = (stride, padding, dilation, groups)

    def run(config: int) -> None:
        _lib.conv2d_tf32_input_grad(out, grad, weight, *args, config)

    run(autotune.conv_config("input_grad", tuple(input_shape), weight.shape, grad.dtype, args, run,
                             rung="conv2d_tf32"))
    return out


def conv2d_tf32_weight_grad(grad: Array, x: Array, weight_shape: tuple[int, ...], stride: tuple[int, int],
                            padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> Array:
    """The gradient of the convolution's weight (of weight_shape, (C_out, C / groups,
    KH, KW)) for grad and the input x, summed over the batch, on tensor cores
    (mt_conv2d_tf32_weight_grad: the pixels split over blocks, the partial
    products added in a fixed order)."""
    out = empty(tuple(weight_shape), grad.dtype)
    grad, x = contiguous(grad), contiguous(x)
    args = (stride, padding, dilation, groups)

    def run(config: int) -> None:
        _lib.conv2d_tf32_weight_grad(out, grad, x, *args, config)

    run(autotune.conv_config("weight_grad", x.shape, tuple(weight_shape), grad.dtype, args, run,
                             rung="conv2d_tf32"))
    return out
