"""The optimizers' fused updates, in place: one kernel per parameter (src/optim.cu),
or one call for a whole list of parameters, a few launches in all
(src/optim_multi.cu, torch's foreach and fused optimizers)."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from .. import _lib
from .._array import Array, bump_version, empty
from .._dtype import float64
from .._shape import is_contiguous


# ---- optimizer updates (in place, one kernel per parameter) ----------------------------


def fused_update_applies(param: Array, *others: Array) -> bool:
    """Whether the fused updates below take these tensors: contiguous float
    tensors of one shape and dtype (otherwise the optimizers use ops)."""
    if not (param._dtype.is_floating_point and is_contiguous(param._shape, param._strides)):
        return False
    for o in others:  # a loop, not a generator expression: no call per tensor
        if not (o._shape == param._shape and o._dtype is param._dtype
                and (o._strides == param._strides or is_contiguous(o._shape, o._strides))):
            return False
    return True


def sgd_step_(param: Array, grad: Array, momentum_buffer: Any, lr: float, momentum: float,
              weight_decay: float, first_step: bool, step: Optional[Array] = None) -> None:
    """One SGD update of param (and its momentum buffer) in place (mt_sgd_step).
    With step (the count, one int64 element on the device: capturable), the
    count is advanced on the device and its first step found there, in place
    of first_step (mt_sgd_step_capturable)."""
    bump_version(param)
    if momentum_buffer is not None:
        bump_version(momentum_buffer)
    if step is None:
        _lib.sgd_step(param, grad, momentum_buffer, lr, momentum, weight_decay, first_step)
        return
    bump_version(step)
    _lib.sgd_step_capturable(param, grad, momentum_buffer, step, lr, momentum, weight_decay)


def adam_step_(param: Array, grad: Array, exp_avg: Array, exp_avg_sq: Array, lr: float,
               betas: tuple[float, float], eps: float, weight_decay: float, step: Union[int, Array],
               decoupled: bool = False) -> None:
    """One Adam update (AdamW's when decoupled) of param and its moving averages in
    place (mt_adam_step). step is the count, from 1, or (capturable) a tensor of
    one int64 element on the device, advanced there before the update reads it
    (mt_adam_step_capturable)."""
    for x in (param, exp_avg, exp_avg_sq):
        x._storage.version += 1  # bump_version's line: a call per tensor is the step's largest cost
    if isinstance(step, Array):
        bump_version(step)
        _lib.adam_step_capturable(param, grad, exp_avg, exp_avg_sq, step, lr, betas[0], betas[1], eps,
                                  weight_decay, decoupled)
        return
    _lib.adam_step(param, grad, exp_avg, exp_avg_sq, lr, betas[0], betas[1], eps, weight_decay, step, decoupled)


# ---- the same over a list of tensors, a few launches in all ----------------------------


def adam_step_list_(params: Sequence[Array], grads: Sequence[Array], exp_avgs: Sequence[Array],
                    exp_avg_sqs: Sequence[Array], lr: float, betas: tuple[float, float], eps: float,
                    weight_decay: float, step: Union[int, Sequence[Array]], decoupled: bool = False) -> None:
    """adam_step_ on every (params[i], grads[i], exp_avgs[i], exp_avg_sqs[i]) in
    one call (mt_adam_step_list): the update of a whole model in a few
    launches. step is the host's count, from 1, or (capturable) a list of the
    parameters' device counts, each advanced there before the update reads it."""
    for group in (params, exp_avgs, exp_avg_sqs):
        for x in group:
            x._storage.version += 1  # bump_version's line, without a call per tensor
    steps = None
    if not isinstance(step, int):
        for x in step:
            x._storage.version += 1
        steps = _lib.descriptors(step)
    _lib.adam_step_list(_lib.descriptors(params), _lib.descriptors(grads), _lib.descriptors(exp_avgs),
                        _lib.descriptors(exp_avg_sqs), steps, len(params), lr, betas[0], betas[1], eps,
                        weight_decay, 0 if steps is not None else step, decoupled)


def clip_grad_norm_list_(grads: Sequence[Array], max_norm: float, inf_norm: bool = False) -> Array:
    """Scales every gradient of grads in place by min(max_norm / (norm + 1e-6), 1),
    where norm is their joint 2-norm (all of them as one vector; with
    inf_norm, their largest |g|), and returns that norm: a 0-d float64 Array,
    never read back (mt_grad_norm_list, then mt_grad_scale_list: the norm in
    one or two launches, the scaling in one, whatever the number of tensors)."""
    norm = empty((), float64, "clip_grad_norm_")
    descriptors = _lib.descriptors(grads)
    _lib.grad_norm_list(descriptors, len(grads), norm, inf_norm)
    for g in grads:
        g._storage.version += 1
    _lib.grad_scale_list(descriptors, len(grads), norm, max_norm)
    return norm
