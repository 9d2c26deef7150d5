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
from .._errors import DimError
from ..autograd.engine import Function
from ..tensor import Tensor


def _channel_view(shape: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    """(C,) seen as (1, C, 1, ...) with ndim dims: broadcasts against (N, C, *)."""
    return (1, shape[0]) + (1,) * (ndim - 2)


class _BatchNormTraining(Function):
    """Normalization by the batch's statistics. forward(x, weight, bias,
    running_mean, running_var, momentum, eps) also updates the running
    statistics in place (not differentiated, as torch's kernel does)."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
        dims = (0,) + tuple(range(2, x.ndim))  # every dim but the channels
        count = x.numel() // x.shape[1]  # values per channel
        mean = ops.mean(x, dims, keepdim=True)  # 1,C,1,..
        centered = ops.sub(x, mean)
        var = ops.mean(ops.mul(centered, centered), dims, keepdim=True)  # biased
        rstd = ops.map_("reciprocal", ops.map_("sqrt", ops.add(var, eps)))
        xhat = ops.mul(centered, rstd)  # N,C,*
        out = xhat
        if weight is not None:
            out = ops.mul(out, ops.reshape(weight, mean.shape))
        if bias is not None:
            out = ops.add(out, ops.reshape(bias, mean.shape))
        if running_mean is not None:
            channels = (x.shape[1],)
            ops.inplace_("mul", running_mean, 1.0 - momentum)
            ops.inplace_("add", running_mean, ops.mul(ops.reshape(mean, channels), momentum))
        if running_var is not None:
            # the unbiased variance: the sum of squares over count - 1
            unbiased = ops.mul(ops.reshape(var, (x.shape[1],)), count / (count - 1))
            ops.inplace_("mul", running_var, 1.0 - momentum)
            ops.inplace_("add", running_var, ops.mul(unbiased, momentum))
        ctx.dims, ctx.count = dims, count
        ctx.save_for_backward(xhat, rstd, weight)
        return out

    @staticmethod
    def backward(ctx, grad):
        xhat, rstd, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        dims, count = ctx.dims, ctx.count
        # The two per-channel sums every gradient is made of.
        grad_bias = ops.reduce_("sum", grad, dims)  # C
        grad_weight = ops.reduce_("sum", ops.mul(grad, xhat), dims)  # C
        dx = None
        if needs[0]:
            # y = xhat * w + b, xhat = (x - mean) * rstd: with g = dL/dy,
            # dL/dx = w * rstd * (g - mean(g) - xhat * mean(g * xhat)),
            # the means over each channel's values (the two sums / count).
            keep = rstd.shape
            centered_grad = ops.sub(grad, ops.reshape(ops.mul(grad_bias, 1.0 / count), keep))
            dx = ops.sub(centered_grad, ops.mul(xhat, ops.reshape(ops.mul(grad_weight, 1.0 / count), keep)))
            scale = rstd if weight is None else ops.mul(rstd, ops.reshape(weight, keep))
            dx = ops.mul(dx, scale)
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
    and shift = bias - mean * scale (Tensor ops: the gradient, if asked, is theirs)."""
    keep = _channel_view(mean.shape, x.ndim)
    scale = 1.0 / (var + eps).sqrt()
    if weight is not None:
        scale = scale * weight
    shift = -mean * scale
    if bias is not None:
        shift = shift + bias
    return x * scale.reshape(keep) + shift.reshape(keep)

