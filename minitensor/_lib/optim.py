"""The optimizers' fused updates (src/optim.cu)."""

from __future__ import annotations

from ctypes import POINTER, c_double, c_int, c_int64
from typing import Any, Optional, Sequence

from .loader import MT_OK, MtTensor, declare, C, check, _desc

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_sgd_step": (c_int, [MtTensor, MtTensor, MtTensor, c_double, c_double, c_double, c_int]),
    "mt_adam_step": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, c_double, c_double, c_double, c_double,
                             c_double, c_int64, c_int]),
    "mt_sgd_step_capturable": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, c_double, c_double, c_double]),
    "mt_adam_step_capturable": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_double, c_double,
                                        c_double, c_double, c_double, c_int]),
    "mt_adam_step_list": (c_int, [c_int64, POINTER(MtTensor), POINTER(MtTensor), POINTER(MtTensor),
                                  POINTER(MtTensor), POINTER(MtTensor), c_double, c_double, c_double, c_double,
                                  c_double, c_int64, c_int]),
    "mt_grad_norm_list": (c_int, [c_int64, POINTER(MtTensor), MtTensor, c_int]),
    "mt_grad_scale_list": (c_int, [c_int64, POINTER(MtTensor), MtTensor, c_double]),
}
declare(SIGNATURES)


def sgd_step(param: Any, grad: Any, momentum_buffer: Any, lr: float, momentum: float, weight_decay: float,
             first_step: bool) -> None:
    """One SGD update of param in place (mt_sgd_step); momentum_buffer is None without momentum."""
    check(C.mt_sgd_step(param.descriptor(), grad.descriptor(), _desc(momentum_buffer), float(lr),
                            float(momentum), float(weight_decay), 1 if first_step else 0), "mt_sgd_step")


def adam_step(param: Any, grad: Any, exp_avg: Any, exp_avg_sq: Any, lr: float, beta1: float, beta2: float,
              eps: float, weight_decay: float, step: int, decoupled: bool) -> None:
    """One Adam (AdamW when decoupled) update of param and its state in place (mt_adam_step)."""
    # x._desc: the descriptor a parameter and its state have built already (a
    # descriptor() call only where not); the status checked here, without a call.
    status = C.mt_adam_step(param._desc or param.descriptor(), grad._desc or grad.descriptor(),
                            exp_avg._desc or exp_avg.descriptor(), exp_avg_sq._desc or exp_avg_sq.descriptor(),
                            float(lr), float(beta1), float(beta2), float(eps), float(weight_decay), int(step),
                            1 if decoupled else 0)
    if status != MT_OK:
        check(status, "mt_adam_step")


def sgd_step_capturable(param: Any, grad: Any, momentum_buffer: Any, step: Any, lr: float, momentum: float,
                        weight_decay: float) -> None:
    """SGD's update with the step count on the device (mt_sgd_step_capturable):
    step, one int64 element, is advanced there first."""
    check(C.mt_sgd_step_capturable(param.descriptor(), grad.descriptor(), _desc(momentum_buffer),
                                   step.descriptor(), float(lr), float(momentum), float(weight_decay)),
          "mt_sgd_step_capturable")


def adam_step_capturable(param: Any, grad: Any, exp_avg: Any, exp_avg_sq: Any, step: Any, lr: float,
                         beta1: float, beta2: float, eps: float, weight_decay: float, decoupled: bool) -> None:
    """Adam's (AdamW's) update with the step count on the device (mt_adam_step_capturable)."""
    status = C.mt_adam_step_capturable(param._desc or param.descriptor(), grad._desc or grad.descriptor(),
                                       exp_avg._desc or exp_avg.descriptor(),
                                       exp_avg_sq._desc or exp_avg_sq.descriptor(), step._desc or step.descriptor(),
                                       float(lr), float(beta1), float(beta2), float(eps), float(weight_decay),
                                       1 if decoupled else 0)
    if status != MT_OK:  # as in adam_step
        check(status, "mt_adam_step_capturable")


def descriptors(tensors: Sequence[Any]) -> Any:
    """The descriptors of tensors as one C array (an argument of the *_list
    functions): built once per list, each from the descriptor the tensor
    already holds where it has one."""
    return (MtTensor * len(tensors))(*[t._desc or t.descriptor() for t in tensors])


def adam_step_list(params: Any, grads: Any, exp_avgs: Any, exp_avg_sqs: Any, steps: Optional[Any], count: int,
                   lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int,
                   decoupled: bool) -> None:
    """Adam's (AdamW's) update of count parameters in a few launches
    (mt_adam_step_list); each list is a descriptors() array; steps (the
    device counts, capturable) or None (the host's count step)."""
    status = C.mt_adam_step_list(count, params, grads, exp_avgs, exp_avg_sqs, steps, float(lr), float(beta1),
                                 float(beta2), float(eps), float(weight_decay), int(step), 1 if decoupled else 0)
    if status != MT_OK:
        check(status, "mt_adam_step_list")


def grad_norm_list(grads: Any, count: int, norm: Any, inf_norm: bool) -> None:
    """The joint 2-norm (or inf-norm) of count gradients (a descriptors()
    array) into norm, one float64 element (mt_grad_norm_list)."""
    check(C.mt_grad_norm_list(count, grads, norm.descriptor(), 1 if inf_norm else 0), "mt_grad_norm_list")


def grad_scale_list(grads: Any, count: int, norm: Any, max_norm: float) -> None:
    """Every gradient times min(max_norm / (norm + 1e-6), 1), the factor
    computed from norm on the device (mt_grad_scale_list)."""
    check(C.mt_grad_scale_list(count, grads, norm.descriptor(), float(max_norm)), "mt_grad_scale_list")
