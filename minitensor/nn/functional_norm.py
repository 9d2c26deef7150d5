"""nn.functional's batch normalization: F.batch_norm, as torch's (re-exported by
nn/functional.py; the modules BatchNorm1d and BatchNorm2d are in nn/batchnorm.py).

In training, each channel c of an input (N, C, *) is normalized by the mean and
the biased variance of its N * prod(*) values, then scaled by weight[c] and
shifted by bias[c]; running_mean and running_var, when given, move towards the
batch's mean and *unbiased* variance by momentum (torch's convention: the
normalization uses the biased variance, the running estimate the unbiased one).
In evaluation (training=False) the running statistics normalize instead.

The training path is one gradient rule (_BatchNormTraining) over one kernel
family (src/batchnorm.cu: per-channel sums, then one elementwise pass, forward
and backward), so that backward is the closed form (two per-channel sums, then
one expression per element) rather than the gradient of every op of the
forward chain.
"""

from __future__ import annotations

from typing import Optional

from .. import ops
from .._errors import DimError
from ..autograd.engine import Function
from ..tensor import Tensor


class _BatchNormTraining(Function):
    """Normalization by the batch's statistics. forward(x, weight, bias,
    running_mean, running_var, momentum, eps) also updates the running
    statistics in place (not differentiated, as torch's kernel does): one
    kernel family forward and one backward (ops.batch_norm,
    ops.batch_norm_backward: src/batchnorm.cu)."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
        out, mean, rstd = ops.batch_norm(x, weight, bias, running_mean, running_var, momentum, eps)
        ctx.save_for_backward(x, mean, rstd, weight)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, mean, rstd, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        dx, dw, db = ops.batch_norm_backward(grad, x, mean, rstd, weight,
                                             (needs[0], needs[1] and weight is not None,
                                              needs[2]))
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
