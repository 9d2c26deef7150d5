"""Layer normalization and its gradient (src/layernorm.cu)."""

from __future__ import annotations

from ctypes import c_double, c_int
from typing import Any

from .loader import MT_OK, C, MtTensor, declare, check, _desc

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_layer_norm": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_int, c_double]),
    "mt_layer_norm_backward": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor,
                                       MtTensor, c_int, c_int]),
}
declare(SIGNATURES)


LAYER_NORM_WEIGHT, LAYER_NORM_BIAS, LAYER_NORM_GRAD_IN = 1, 2, 4  # minitensor.h's flags


def layer_norm(out: Any, mean: Any, rstd: Any, inp: Any, weight: Any, bias: Any, eps: float) -> None:
    """Normalizes the rows of a contiguous (rows, n) inp into out, saving each row's
    mean and rstd; weight and bias (n,) may be None (mt_layer_norm)."""
    affine = (LAYER_NORM_WEIGHT if weight is not None else 0) | (LAYER_NORM_BIAS if bias is not None else 0)
    status = C.mt_layer_norm(out.descriptor(), mean.descriptor(), rstd.descriptor(), inp.descriptor(),
                             _desc(weight), _desc(bias), affine, float(eps))
    if status != MT_OK:  # checked here: check() is a call more on every success
        check(status, "mt_layer_norm")


def layer_norm_backward(grad_in: Any, grad_weight: Any, grad_bias: Any, grad_out: Any, inp: Any, mean: Any,
                        rstd: Any, weight: Any, has_bias: bool) -> None:
    """The gradients of layer_norm that are not None (mt_layer_norm_backward)."""
    want = ((LAYER_NORM_GRAD_IN if grad_in is not None else 0) | (LAYER_NORM_WEIGHT if grad_weight is not None else 0)
            | (LAYER_NORM_BIAS if grad_bias is not None else 0))
    affine = (LAYER_NORM_WEIGHT if weight is not None else 0) | (LAYER_NORM_BIAS if has_bias else 0)
    status = C.mt_layer_norm_backward(_desc(grad_in), _desc(grad_weight), _desc(grad_bias), grad_out.descriptor(),
                                      inp.descriptor(), mean.descriptor(), rstd.descriptor(), _desc(weight),
                                      want, affine)
    if status != MT_OK:
        check(status, "mt_layer_norm_backward")


# ---- batch normalization in training mode (src/batchnorm.cu, src/batchnorm.h) ----

SIGNATURES_BATCH_NORM: dict[str, tuple[Any, list[Any]]] = {
    "mt_batch_norm": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor,
                              c_int, c_double, c_double]),
    "mt_batch_norm_backward": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor,
                                       MtTensor, c_int, c_int]),
}
declare(SIGNATURES_BATCH_NORM)

BATCH_NORM_WEIGHT, BATCH_NORM_BIAS, BATCH_NORM_RUNNING, BATCH_NORM_GRAD_IN = 1, 2, 4, 8  # batchnorm.h's flags


def batch_norm(out: Any, mean: Any, rstd: Any, inp: Any, weight: Any, bias: Any, running_mean: Any,
               running_var: Any, momentum: float, eps: float) -> None:
    """Normalizes each channel of a contiguous (N, C, S) inp by its batch statistics
    into out, saving each channel's mean and rstd (C,) and, when running_mean and
    running_var are given, moving them by momentum (mt_batch_norm)."""
    flags = ((BATCH_NORM_WEIGHT if weight is not None else 0) | (BATCH_NORM_BIAS if bias is not None else 0)
             | (BATCH_NORM_RUNNING if running_mean is not None else 0))
    status = C.mt_batch_norm(out.descriptor(), mean.descriptor(), rstd.descriptor(), inp.descriptor(),
                             _desc(weight), _desc(bias), _desc(running_mean), _desc(running_var), flags,
                             float(momentum), float(eps))
    if status != MT_OK:
        check(status, "mt_batch_norm")


def batch_norm_backward(grad_in: Any, grad_weight: Any, grad_bias: Any, grad_out: Any, inp: Any, mean: Any,
                        rstd: Any, weight: Any) -> None:
    """The gradients of batch_norm that are not None (mt_batch_norm_backward)."""
    want = ((BATCH_NORM_GRAD_IN if grad_in is not None else 0) | (BATCH_NORM_WEIGHT if grad_weight is not None else 0)
            | (BATCH_NORM_BIAS if grad_bias is not None else 0))
    status = C.mt_batch_norm_backward(_desc(grad_in), _desc(grad_weight), _desc(grad_bias), grad_out.descriptor(),
                                      inp.descriptor(), mean.descriptor(), rstd.descriptor(), _desc(weight), want,
                                      BATCH_NORM_WEIGHT if weight is not None else 0)
    if status != MT_OK:
        check(status, "mt_batch_norm_backward")
