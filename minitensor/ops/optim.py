"""The optimizers' fused updates, in place, one kernel per parameter (src/optim.cu)."""

from __future__ import annotations

from typing import Any

from .. import _lib
from .._array import Array, bump_version


# ---- optimizer updates (in place, one kernel per parameter) ----------------------------


def fused_update_applies(param: Array, *others: Array) -> bool:
    """Whether the fused updates below take these tensors: contiguous float
    tensors of one shape and dtype (otherwise the optimizers use ops)."""
    return param.dtype.is_floating_point and param.is_contiguous() and all(
        o.is_contiguous() and o.shape == param.shape and o.dtype is param.dtype for o in others)


def sgd_step_(param: Array, grad: Array, momentum_buffer: Any, lr: float, momentum: float,
              weight_decay: float, first_step: bool) -> None:
    """One SGD update of param (and its momentum buffer) in place (mt_sgd_step)."""
    bump_version(param)
    if momentum_buffer is not None:
        bump_version(momentum_buffer)
    _lib.sgd_step(param, grad, momentum_buffer, lr, momentum, weight_decay, first_step)


def adam_step_(param: Array, grad: Array, exp_avg: Array, exp_avg_sq: Array, lr: float,
               betas: tuple[float, float], eps: float, weight_decay: float, step: int,
               decoupled: bool = False) -> None:
    """One Adam update (AdamW's when decoupled) of param and its moving averages in
    place (mt_adam_step)."""
    for x in (param, exp_avg, exp_avg_sq):
        bump_version(x)
    _lib.adam_step(param, grad, exp_avg, exp_avg_sq, lr, betas[0], betas[1], eps, weight_decay, step, decoupled)
