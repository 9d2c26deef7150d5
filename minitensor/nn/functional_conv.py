"""nn.functional's convolution and pooling: the convolution rungs (implicit GEMM,
tiled for depthwise layers, im2col under the teaching policy); pooling in one
kernel each way (src/pool.cu, autograd/pool.py).
nn.functional re-exports every public name, so F.conv2d is this conv2d.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import autograd, ops
from ..tensor import Tensor


def _ints(value: Any, n: int, name: str, func: str, minimum: int) -> tuple[int, ...]:
    """An int or a sequence of n ints (each >= minimum) as a tuple of n ints.
    (A plain loop and a list comprehension, no generator expression: each of
    those is a Python call per element, and a pooling call runs this four times.)"""
    if type(value) is int and value >= minimum:
        return (value,) * n  # the common case, without the loop below
    items = (value,) * n if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value
    ok = isinstance(items, (tuple, list)) and len(items) == n
    if ok:
        for v in items:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
                ok = False
    if not ok:
        raise ValueError(f"{func}: {name} must be an int >= {minimum} or a tuple of {n} of them, got {value!r}")
    return tuple([int(v) for v in items])


def _check_input(x: Any, dims: int, func: str, what: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{func}: input must be a Tensor, got {type(x).__name__}")
    if x.ndim != dims:
        raise ops.ShapeError(f"{func}: input must have shape {what}, got {x.shape}")
    ops.require_float(x, func)


def _output_size(x: Tensor, kernel: tuple[int, int], stride: tuple[int, int], padding: tuple[int, int],
                 dilation: tuple[int, int], func: str) -> tuple[int, int]:
    sizes = tuple(ops.window_shape(x.shape[2 + d], kernel[d], stride[d], padding[d], dilation[d]) for d in (0, 1))
    if min(sizes) < 1:
        raise ops.ShapeError(f"{func}: the input of shape {x.shape} padded by {padding} is smaller than the "
                             f"kernel {kernel} with dilation {dilation}: no window fits")
    return sizes


def conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation, as torch's): input (N, C, H, W), weight
    (C_out, C / groups, KH, KW), bias (C_out,); output (N, C_out, OH, OW).

    padding: an int, a pair, "valid" (0) or "same" (stride 1, an even total
    padding per dim). Under the fast kernel policy (the default) this runs the
    implicit-GEMM rung (src/conv_implicit_gemm.cu, ``mt.kernels.conv2d(...,
    algo="implicit_gemm")``): per group one matrix product of the weights
    (C_out / groups, C / groups * KH * KW) with the input's windows, gathered
    tile by tile into shared memory and never written to memory, its backward
    two more such products (each gradient's rung is ops.conv2d_grad_rungs's:
    with fewer than 16 input channels a group the input gradient runs im2col,
    and a depthwise layer's gradients run the depthwise kernels of
    src/conv_depthwise_backward.cu). A depthwise convolution (groups = C > 1: each
    output channel reads one input channel) runs the tiled rung instead (one
    kernel, shared-memory tiles: src/conv.cu), whose patch must fit in shared
    memory; the H100 measured it 27x faster forward than im2col there
    (bench/conv.py, docs/performance.md). Under the teaching policy it runs
    the im2col rung the course builds: the windows of the input, padded with
    zeros, copied into a (N, C, KH, KW, OH, OW) tensor by one strided copy
    (autograd.Im2Col), then one matmul per group.
    """
    return _conv2d(input, weight, bias, stride, padding, dilation, groups, "default", "conv2d()")


def _conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor], stride: Any, padding: Any,  # noqa: A002
            dilation: Any, groups: Any, algo: str, func: str) -> Tensor:
    """conv2d with the arguments checked and normalised, by one rung: "im2col",
    "tiled" (autograd.Conv2dTiled), "implicit_gemm" (autograd.Conv2dImplicitGemm)
    or "default" (_default_conv2d_rung); mt.kernels.conv2d calls it too."""
    _check_input(input, 4, func, "(N, C, H, W)")
    if not isinstance(weight, Tensor) or weight.ndim != 4:
        raise ops.ShapeError(f"{func}: weight must be a 4-D Tensor (C_out, C_in / groups, KH, KW), got "
                             f"{weight.shape if isinstance(weight, Tensor) else type(weight).__name__}")
    n, c, _, _ = input.shape
    c_out, c_group, kh, kw = weight.shape
    groups = _ints(groups, 1, "groups", func, 1)[0]
    if c % groups or c_out % groups or c_group != c // groups:
        raise ops.ShapeError(f"{func}: input of shape {input.shape} (C = {c}), weight of shape {weight.shape} and "
                             f"groups = {groups} do not agree: C and C_out must divide by groups, and the "
                             f"weight's dim 1 must be C / groups")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype is not input.dtype:
            raise ops.DTypeError(f"{func}: input is {input.dtype.name} but {name} is {t.dtype.name}")
    if bias is not None and bias.shape != (c_out,):
        raise ops.ShapeError(f"{func}: bias must have shape ({c_out},), got {bias.shape}")
    stride = _ints(stride, 2, "stride", func, 1)
    dilation = _ints(dilation, 2, "dilation", func, 1)
    kernel = (kh, kw)
    odd = (False, False)  # 'same' with an odd total padding in that dim
    if padding == "valid":
        padding = (0, 0)
    elif padding == "same":
        if stride != (1, 1):
            raise ValueError(f"{func}: padding='same' needs stride 1 (as torch), got stride {stride}")
        # The total padding, dilation * (kernel - 1), split as torch splits it:
        # the odd one out goes to the right (bottom). The kernels pad both sides
        # alike, so such a dim is padded by the larger half on both sides, and
        # the first output row (column), whose window starts one too early, is
        # dropped below.
        total = tuple(dilation[d] * (kernel[d] - 1) for d in (0, 1))
        odd = tuple(t % 2 == 1 for t in total)
        padding = tuple((t + 1) // 2 for t in total)
    elif isinstance(padding, str):
        raise ValueError(f"{func}: padding must be 'valid', 'same', an int or a pair, got {padding!r}")
    else:
        padding = _ints(padding, 2, "padding", func, 0)
    if any(odd):
        out = _conv2d(input, weight, bias, stride, padding, dilation, groups, algo, func)
        return out[:, :, 1 if odd[0] else 0:, 1 if odd[1] else 0:]
    oh, ow = _output_size(input, kernel, stride, padding, dilation, func)
    if algo == "default":
        algo = _default_conv2d_rung(input, weight, kernel, stride, padding, dilation, groups, (oh, ow))
    if algo == "tiled":
        return autograd.Conv2dTiled.apply(input, weight, bias, stride, padding, dilation, groups)
    if algo == "implicit_gemm":
        return autograd.Conv2dImplicitGemm.apply(input, weight, bias, stride, padding, dilation, groups)
    if algo == "depthwise":
        return autograd.Conv2dDepthwise.apply(input, weight, bias, stride, padding, dilation, groups)
    if algo == "direct":
        return autograd.Conv2dDirect.apply(input, weight, bias, stride, padding, dilation, groups)
    cols = autograd.Im2Col.apply(input, kernel, stride, padding, dilation)  # N, C, KH, KW, OH, OW
    cols = cols.reshape(n, groups, c_group * kh * kw, oh * ow)
    w = weight.reshape(groups, c_out // groups, c_group * kh * kw)
    out = (w @ cols).reshape(n, c_out, oh, ow)  # (groups, Co, K) @ (N, groups, K, L): one batched matmul
    if bias is not None:
        out = out + bias.reshape(1, c_out, 1, 1)
    return out


def _default_conv2d_rung(input: Tensor, weight: Tensor, kernel: tuple[int, int], stride: tuple[int, int],  # noqa: A002
                         padding: tuple[int, int], dilation: tuple[int, int], groups: int,
                         out_hw: tuple[int, int]) -> str:
    """The rung F.conv2d runs. Under the teaching policy, im2col (the course's rung,
    whatever the shape). Under the fast policy: tiled for a depthwise convolution
    (groups = C > 1) whose patch fits in shared memory, where each output channel
    reads one input channel and a matrix product has a single row; else the
    implicit GEMM (no window written, forward and backward; for 3x3 filters at
    stride 1 it races the Winograd rung, ops.conv2d_igemm says how), unless its
    32-bit indices do not hold the sizes; then im2col."""
    if not ops.fast_kernels():
        return "im2col"
    input_grad = getattr(input, "requires_grad", True)  # an Array (torch_ops): as if it had one
    small = ops.conv2d_small_rung(input.shape, weight.shape, stride, dilation, groups, input.dtype, input_grad)
    if small is not None:  # depthwise, or few products per output (src/conv_depthwise.cu, conv_direct.cu)
        return small
    if weight.shape[1] == 1 and groups > 1 and ops.conv2d_tiled_fits(kernel, stride, dilation, input.dtype):
        return "tiled"
    if ops.conv2d_igemm_fits(input.shape, weight.shape, padding, out_hw, groups):
        return "implicit_gemm"
    return "im2col"


def conv1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D convolution: input (N, C, L), weight (C_out, C / groups, K); conv2d over
    a height of 1."""
    func = "conv1d()"
    _check_input(input, 3, func, "(N, C, L)")
    if not isinstance(weight, Tensor) or weight.ndim != 3:
        raise ops.ShapeError(f"{func}: weight must be a 3-D Tensor (C_out, C_in / groups, K), got "
                             f"{weight.shape if isinstance(weight, Tensor) else type(weight).__name__}")
    pad = padding if isinstance(padding, str) else (0, _ints(padding, 1, "padding", func, 0)[0])
    out = conv2d(input.unsqueeze(2), weight.unsqueeze(2), bias, (1, _ints(stride, 1, "stride", func, 1)[0]), pad,
                 (1, _ints(dilation, 1, "dilation", func, 1)[0]), groups)
    return out.squeeze(2)


def _pool_input(input: Any, func: str) -> tuple[Tensor, bool]:  # noqa: A002
    """input as (N, C, H, W), and whether it came unbatched, (C, H, W), as torch takes it."""
    if isinstance(input, Tensor) and input.ndim == 4 and input._dtype.is_floating_point:
        return input, False  # the common case, checked without a call
    if isinstance(input, Tensor) and input.ndim == 3:
        _check_input(input, 3, func, "(N, C, H, W) or (C, H, W)")
        return input.unsqueeze(0), True
    _check_input(input, 4, func, "(N, C, H, W) or (C, H, W)")
    return input, False


# (H, W, kernel_size, stride, padding, dilation, ceil_mode) -> _pool_args' result, for
# arguments that are plain ints (stride also None) and passed its checks: a pooling
# layer called again on inputs of the same size skips five calls.
_POOL_ARGS: dict[tuple[Any, ...], tuple[tuple[int, int], ...]] = {}


def _pool_args(input: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool,
               func: str) -> tuple[tuple[int, int], ...]:
    """kernel, stride, padding, dilation and the output size (OH, OW), checked as torch checks them."""
    plain = type(kernel_size) is int and (stride is None or type(stride) is int) and type(padding) is int \
        and type(dilation) is int
    if plain:
        key = (input.shape[2], input.shape[3], kernel_size, stride, padding, dilation, bool(ceil_mode))
        known = _POOL_ARGS.get(key)
        if known is not None:
            return known
    kernel = _ints(kernel_size, 2, "kernel_size", func, 1)
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) \
        else _ints(stride, 2, "stride", func, 1)
    padding = _ints(padding, 2, "padding", func, 0)
    dilation = _ints(dilation, 2, "dilation", func, 1)
    if 2 * padding[0] > kernel[0] or 2 * padding[1] > kernel[1]:
        raise ValueError(f"{func}: padding {padding} must be at most half the kernel size {kernel} (as in torch)")
    if min(input.shape[2:]) < 1:
        raise ops.ShapeError(f"{func}: the input of shape {input.shape} has an empty plane (H and W must be >= 1)")
    size = (ops.pool_output_size(input.shape[2], kernel[0], stride[0], padding[0], dilation[0], bool(ceil_mode)),
            ops.pool_output_size(input.shape[3], kernel[1], stride[1], padding[1], dilation[1], bool(ceil_mode)))
    if min(size) < 1:
        raise ops.ShapeError(f"{func}: the input of shape {input.shape} padded by {padding} is smaller than the "
                             f"kernel {kernel} with dilation {dilation}: the output size {size} is too small")
    if plain:
        if len(_POOL_ARGS) >= 256:
            _POOL_ARGS.clear()
        _POOL_ARGS[key] = (kernel, stride, padding, dilation, size)
    return kernel, stride, padding, dilation, size


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """The maximum of each window (N, C, H, W) -> (N, C, OH, OW) (or unbatched (C, H,
    W)); stride defaults to the kernel size, padding (at most half the kernel) is
    never the maximum; ceil_mode rounds the output size up, as torch. One kernel
    (src/pool.cu), which also finds each maximum's int64 position in its input
    plane (row * W + column): return_indices returns them, as torch. The
    gradient goes to the maximum of each window (the first of equal ones; a NaN
    wins), one gather kernel backward."""
    func = "max_pool2d()"
    x, unbatched = _pool_input(input, func)
    kernel, stride, padding, dilation, size = _pool_args(x, kernel_size, stride, padding, dilation, ceil_mode, func)
    if not (x.requires_grad and autograd.is_grad_enabled()):
        # No backward: the kernel alone, without the rule's node; the values
        # only unless the indices are asked for.
        values, positions = ops.max_pool2d(x, kernel, stride, padding, dilation, size, return_indices)
        values = Tensor._from_array(values)
        if not return_indices:
            return values.squeeze(0) if unbatched else values
        positions = Tensor._from_array(positions)
        return (values.squeeze(0), positions.squeeze(0)) if unbatched else (values, positions)
    pooled = ops.max_pool2d(x, kernel, stride, padding, dilation, size)
    values = autograd.MaxPool2d.apply(x, pooled, kernel, stride, padding, dilation)
    indices = Tensor._from_array(pooled[1])
    if unbatched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: Optional[int] = None) -> Tensor:
    """The mean of each window (N, C, H, W) -> (N, C, OH, OW) (or unbatched); stride
    defaults to the kernel size; padding counts as zeros in the mean unless
    count_include_pad=False (a ceil_mode window hanging past the padding counts
    only up to it, as torch); divisor_override divides every window's sum by that
    number instead. One kernel each way (src/pool.cu)."""
    func = "avg_pool2d()"
    x, unbatched = _pool_input(input, func)
    kernel, stride, padding, _, size = _pool_args(x, kernel_size, stride, padding, 1, ceil_mode, func)
    divisor = 0
    if divisor_override is not None:
        if isinstance(divisor_override, bool) or not isinstance(divisor_override, (int, np.integer)) \
                or divisor_override == 0:
            raise ValueError(f"{func}: divisor_override must be a non-zero int, got {divisor_override!r}")
        divisor = int(divisor_override)
        if divisor < 0:  # the kernel takes a positive divisor; the sign goes after
            return -avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, -divisor)
    if not (x.requires_grad and autograd.is_grad_enabled()):
        # No backward: the kernel alone, without the rule's node.
        out = Tensor._from_array(ops.avg_pool2d(x, kernel, stride, padding, bool(count_include_pad), divisor, size))
        return out.squeeze(0) if unbatched else out
    out = autograd.AvgPool2d.apply(x, kernel, stride, padding, bool(count_include_pad), divisor, size)
    return out.squeeze(0) if unbatched else out


def _adaptive_size(output_size: Any, x: Tensor, func: str) -> tuple[int, int]:
    """output_size as (OH, OW): an int, or a pair whose None entries keep the input's size."""
    if type(output_size) is int and output_size >= 0:  # the common road: no generator, no isinstance chain
        return output_size, output_size
    items = (output_size, output_size) if output_size is None or isinstance(output_size, (int, np.integer)) \
        else output_size
    if not isinstance(items, (tuple, list)) or len(items) != 2 or any(
            v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0) for v in items):
        raise ValueError(f"{func}: output_size must be an int >= 0 or a pair of them (None keeps the input's "
                         f"size), got {output_size!r}")
    return tuple(x.shape[2 + d] if items[d] is None else int(items[d]) for d in (0, 1))


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    """Average pooling to a fixed output size (N, C, H, W) -> (N, C, OH, OW) (or
    unbatched): output row o averages input rows [floor(o H / OH), ceil((o + 1) H /
    OH)), columns alike (torch's windows, which overlap when OH does not divide
    H). output_size 1 is the global average pool a ResNet ends with. One kernel
    each way (src/pool.cu)."""
    func = "adaptive_avg_pool2d()"
    x, unbatched = _pool_input(input, func)
    size = _adaptive_size(output_size, x, func)
    if min(x.shape[2:]) < 1:
        raise ops.ShapeError(f"{func}: the input of shape {input.shape} has an empty plane (H and W must be >= 1)")
    if not (x.requires_grad and autograd.is_grad_enabled()):
        # No backward: the kernel alone, without the rule's node.
        out = Tensor._from_array(ops.adaptive_avg_pool2d(x, size))
        return out.squeeze(0) if unbatched else out
    out = autograd.AdaptiveAvgPool2d.apply(x, size)
    return out.squeeze(0) if unbatched else out


def _as_2d(input: Any, func: str) -> Tensor:  # noqa: A002
    """(N, C, L) or (C, L) as (N, C, 1, L) or (C, 1, L): the 1-D pools run the 2-D kernels."""
    if not isinstance(input, Tensor) or input.ndim not in (2, 3):
        raise ops.ShapeError(f"{func}: input must have shape (N, C, L) or (C, L), got "
                             f"{input.shape if isinstance(input, Tensor) else type(input).__name__}")
    return input.unsqueeze(-2)


def _one(value: Any, name: str, func: str, minimum: int) -> tuple[int, int]:
    """A 1-D pool's int (or 1-tuple) as the 2-D pair over a height of 1: (1, value),
    or (0, value) for a padding."""
    return minimum, _ints(value, 1, name, func, minimum)[0]


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """max_pool2d over a height of 1: (N, C, L) -> (N, C, OL); indices are positions in L."""
    func = "max_pool1d()"
    out = max_pool2d(_as_2d(input, func), _one(kernel_size, "kernel_size", func, 1),
                     None if stride is None else _one(stride, "stride", func, 1), _one(padding, "padding", func, 0),
                     _one(dilation, "dilation", func, 1), ceil_mode, return_indices)
    return (out[0].squeeze(-2), out[1].squeeze(-2)) if return_indices else out.squeeze(-2)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """avg_pool2d over a height of 1: (N, C, L) -> (N, C, OL)."""
    func = "avg_pool1d()"
    return avg_pool2d(_as_2d(input, func), _one(kernel_size, "kernel_size", func, 1),
                      None if stride is None else _one(stride, "stride", func, 1), _one(padding, "padding", func, 0),
                      ceil_mode, count_include_pad).squeeze(-2)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    """adaptive_avg_pool2d over a height of 1: (N, C, L) -> (N, C, output_size)."""
    func = "adaptive_avg_pool1d()"
    return adaptive_avg_pool2d(_as_2d(input, func), (1, _ints(output_size, 1, "output_size", func, 0)[0])).squeeze(-2)
