"""pool: the gradient rules of 2-D pooling, one kernel each way (src/pool.cu)."""

from __future__ import annotations

from .. import ops
from .engine import Function


class MaxPool2d(Function):
    """Max pooling, whose one forward kernel (ops.max_pool2d, run by the caller)
    gives two outputs: pooled = (values, indices). The rule returns the values;
    F.max_pool2d returns the int64 positions of the maxima beside them, and
    backward adds each gradient element at its maximum (one gather kernel)."""

    @staticmethod
    def forward(ctx, x, pooled, kernel, stride, padding, dilation):
        values, indices = pooled
        ctx.args = (x.shape, kernel, stride, padding, dilation)
        ctx.save_for_backward(indices)
        return values

    @staticmethod
    def backward(ctx, grad):
        (indices,) = ctx.saved_tensors
        shape, kernel, stride, padding, dilation = ctx.args
        return ops.max_pool2d_backward(grad, indices, shape, kernel, stride, padding, dilation), None, None, None, \
            None, None


class AvgPool2d(Function):
    """Each window's mean; backward spreads each window's gradient evenly over it."""

    @staticmethod
    def forward(ctx, x, kernel, stride, padding, count_include_pad, divisor, out_size):
        ctx.args = (x.shape, kernel, stride, padding, count_include_pad, divisor)
        return ops.avg_pool2d(x, kernel, stride, padding, count_include_pad, divisor, out_size)

    @staticmethod
    def backward(ctx, grad):
        return ops.avg_pool2d_backward(grad, *ctx.args), None, None, None, None, None, None


class AdaptiveAvgPool2d(Function):
    """The means of windows that tile the input into out_size (OH, OW)."""

    @staticmethod
    def forward(ctx, x, out_size):
        ctx.in_shape = x.shape
        return ops.adaptive_avg_pool2d(x, out_size)

    @staticmethod
    def backward(ctx, grad):
        return ops.adaptive_avg_pool2d_backward(grad, ctx.in_shape), None
