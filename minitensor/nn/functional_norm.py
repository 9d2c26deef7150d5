"""nn.functional's batch normalization: F.batch_norm, as torch's (re-exported by
nn/functional.py; the modules BatchNorm1d and BatchNorm2d are in nn/batchnorm.py).

In training, each channel c of an input (N, C, *) is normalized by the mean and
the biased variance of its N * prod(*) values, then scaled by weight[c] and
shifted by bias[c]; running_mean and running_var, when given, move towards the
batch's mean and *unbiased* variance by momentum (torch's convention: the
normalization uses the biased variance, the running estimate the unbiased one).
In evaluation (training=False) the running statistics normalize instead.

The training path is one gradient rule (_BatchNormTraining) written with the
ops layer's reductions and elementwise kernels, so that backward is the closed
form (two per-channel sums, then one expression per element) rather than the
gradient of every op of the forward chain.
"""

from __future__ import annotations

from typing import Optional

from .. import ops
from .._array import Array
from .._errors import DimError
from ..autograd.engine import Function
from ..tensor import Tensor


def _channel_sum(x: Array) -> Array:
    """The sum of each channel of x (N, C, *) over N and *: (C,).

    Seen as (N, C, S), dim 0 first (one thread per (c, s) walks down N, reads
    coalesced), then each channel's S values: a small tensor by then. On the
    emulator this order is also about 5x cheaper than S first."""
    if x.ndim == 2:
        return ops.reduce_("sum", x, 0)
    return ops.reduce_("sum", ops.reshape(x, (x.shape[0], x.shape[1], -1)), (0, 2))


def _per_channel(v: Array, shape: tuple[int, ...]) -> Array:
    """v (C,) spread over one sample's (C, *) of shape (N, C, *), contiguous.

    Broadcasting v as (1, C, 1, ..) would send every elementwise op with it to
    the general strided zip kernel; a dense (C, *) block repeated N times is a
    trailing block of the (N, C, *) operand, the zip kernel's row-broadcast
    case (src/zip.cu), and costs one copy of 1/N of the data."""
    spatial = shape[2:]
    return ops.contiguous(ops.expand(ops.reshape(v, (shape[1],) + (1,) * len(spatial)), shape[1:]))


class _BatchNormTraining(Function):
    """Normalization by the batch's statistics. forward(x, weight, bias,
    running_mean, running_var, momentum, eps) also updates the running
    statistics in place (not differentiated, as torch's kernel does)."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
        shape = x.shape
        count = x.numel() // shape[1]  # values per channel
        mean = ops.mul(_channel_sum(x), 1.0 / count)  # C
        centered = ops.sub(x, _per_channel(mean, shape))  # N, C, *
        var = ops.mul(_channel_sum(ops.mul(centered, centered)), 1.0 / count)  # C, biased (two passes: exact)
        rstd = ops.map_("reciprocal", ops.map_("sqrt", ops.add(var, eps)))  # C
        # out = xhat * weight + bias with xhat = centered * rstd: one scale per channel.
        scale = rstd if weight is None else ops.mul(rstd, weight)
        out = ops.mul(centered, _per_channel(scale, shape))
        if bias is not None:
            out = ops.add(out, _per_channel(bias, shape))
        if running_mean is not None:
            ops.inplace_("mul", running_mean, 1.0 - momentum)
            ops.inplace_("add", running_mean, ops.mul(mean, momentum))
        if running_var is not None:
            # the unbiased variance: the sum of squares over count - 1
            ops.inplace_("mul", running_var, 1.0 - momentum)
            ops.inplace_("add", running_var, ops.mul(var, momentum * count / (count - 1)))
        ctx.count = count
        ctx.save_for_backward(centered, rstd, weight)
        return out

    @staticmethod
    def backward(ctx, grad):
        centered, rstd, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        shape, count = centered.shape, ctx.count
        # The two per-channel sums every gradient is made of: sum(g) and
        # sum(g * xhat) = rstd * sum(g * centered).
        grad_bias = _channel_sum(grad)  # C
        grad_weight = ops.mul(_channel_sum(ops.mul(grad, centered)), rstd)  # C
        dx = None
        if needs[0]:
            # y = xhat * w + b, xhat = (x - mean) * rstd: with g = dL/dy,
            # dL/dx = k * (g - mean(g) - xhat * mean(g * xhat)), k = w * rstd
            #       = k * g - (k * rstd * mean(g * xhat)) * centered - k * mean(g),
            # the means over each channel's count values: three per-channel factors.
            k = rstd if weight is None else ops.mul(rstd, weight)
            along_centered = ops.mul(ops.mul(k, rstd), ops.mul(grad_weight, -1.0 / count))
            constant = ops.mul(k, ops.mul(grad_bias, -1.0 / count))
            dx = ops.mul(grad, _per_channel(k, shape))
            dx = ops.add(dx, ops.mul(centered, _per_channel(along_centered, shape)))
            dx = ops.add(dx, _per_channel(constant, shape))
        dw = grad_weight if needs[1] else None
        db = grad_bias if needs[2] else None
        return dx, dw, db, None, None, None, None


def batch_norm(input: Tensor, running_mean: Optional[Tensor], running_var: Optional[Tensor],  # noqa: A002
               weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalization of input (N, C, *) per channel, as torch.nn.functional.batch_norm.

    training=True: the batch's mean and biased variance normalize; running_mean
    and running_var (C,), when given, are updated in place:
    running = (1 - momentum) * running + momentum * batch (the unbiased variance).
    training=False: running_mean and running_var normalize (both required).
    weight and bias (C,) scale and shift each channel when given.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"batch_norm(): input must be a Tensor, got {type(input).__name__}")
    if input.ndim < 2:
        raise DimError(f"batch_norm(): input must have at least 2 dims (N, C, *), got shape {input.shape}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"batch_norm(): input must be a float tensor, got {input.dtype.name}")
    channels = input.shape[1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is not None and (not isinstance(t, Tensor) or t.shape != (channels,)):
            got = t.shape if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"batch_norm(): {name} must be a tensor of shape ({channels},) for an input "
                             f"of shape {input.shape} ({channels} channels), got {got}")
    if training:
        count = input.numel() // channels if channels else 0
        if count <= 1:
            raise ValueError(f"batch_norm(): expected more than 1 value per channel when training, got "
                             f"input of shape {input.shape}")
        return _BatchNormTraining.apply(input, weight, bias, running_mean, running_var, float(momentum),
                                        float(eps))
    if running_mean is None or running_var is None:
        raise ValueError("batch_norm(): running_mean and running_var are required when training=False")
    return _normalize_by(input, running_mean, running_var, weight, bias, eps)


def _normalize_by(x: Tensor, mean: Tensor, var: Tensor, weight: Optional[Tensor], bias: Optional[Tensor],
                  eps: float) -> Tensor:
    """Evaluation: x * scale + shift with per-channel scale = weight / sqrt(var + eps)
    and shift = bias - mean * scale, each spread over one sample's (C, *) as in
    _per_channel (Tensor ops: the gradient, if asked, is theirs)."""
    scale = 1.0 / (var + eps).sqrt()
    if weight is not None:
        scale = scale * weight
    shift = -mean * scale
    if bias is not None:
        shift = shift + bias
    keep = (x.shape[1],) + (1,) * (x.ndim - 2)
    return (x * scale.reshape(keep).expand(x.shape[1:]).contiguous()
            + shift.reshape(keep).expand(x.shape[1:]).contiguous())
