"""The convolution and pooling layers of minitensor.nn (Conv1d, Conv2d, MaxPool2d,
AvgPool2d, AdaptiveAvgPool2d): modules over nn.functional's conv2d and pooling (nn/functional_conv.py).
"""

from __future__ import annotations

import math
from typing import Any, Optional

from .._dtype import default_dtype, to_dtype
from ..tensor import Tensor
from . import functional_conv as F
from .modules import Module, _check_size, _uniform


class _ConvNd(Module):
    """What Conv1d and Conv2d share: the weight (C_out, C_in / groups, *kernel) and
    bias (C_out,), initialized as torch's: uniform in [-1/sqrt(fan_in),
    1/sqrt(fan_in)] with fan_in = C_in / groups * prod(kernel)."""

    dims = 2
    name = "Conv2d"

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, dtype: Any = None) -> None:
        super().__init__()
        for what, value in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
            _check_size(value, self.name, what)
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{self.name}: in_channels {in_channels} and out_channels {out_channels} must both "
                             f"divide by groups {groups}")
        kernel = F._ints(kernel_size, self.dims, "kernel_size", self.name, 1)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        dtype = default_dtype if dtype is None else to_dtype(dtype)
        fan_in = in_channels // groups * math.prod(kernel)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        self.weight = _uniform((out_channels, in_channels // groups) + kernel, bound, dtype)
        if bias:
            self.bias = _uniform((out_channels,), bound, dtype)
        else:
            self.register_parameter("bias", None)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}, "
                f"bias={self.bias is not None}")


class Conv1d(_ConvNd):
    """1-D convolution over (N, C_in, L) (F.conv1d)."""

    dims = 1
    name = "Conv1d"

    def forward(self, x: Tensor) -> Tensor:
        return F.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C_in, H, W) (F.conv2d: an implicit GEMM; im2col under teaching)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class MaxPool2d(Module):
    """The maximum of each window (F.max_pool2d); stride defaults to kernel_size."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x: Tensor) -> Any:
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """The mean of each window (F.avg_pool2d); stride defaults to kernel_size."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: Optional[int] = None) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad, self.divisor_override = ceil_mode, count_include_pad, divisor_override

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed output size (F.adaptive_avg_pool2d): output_size an
    int or a pair (None keeps the input's size); 1 is the global pool of a ResNet."""

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
