"""Cross-entropy and its gradient (src/cross_entropy.cu)."""

from __future__ import annotations

from ctypes import c_double, c_int
from typing import Any

from .loader import MtTensor, declare, C, check

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_cross_entropy": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, c_int]),
    "mt_cross_entropy_backward": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_double, c_int]),
}
declare(SIGNATURES)


def cross_entropy(loss: Any, lse: Any, logits: Any, targets: Any, checked: bool) -> None:
    """Each row's cross-entropy and logsumexp (mt_cross_entropy); checked: the
    targets are known to be whole numbers in range (no device check)."""
    check(C.mt_cross_entropy(loss.descriptor(), lse.descriptor(), logits.descriptor(), targets.descriptor(),
                                 1 if checked else 0), "mt_cross_entropy")


def cross_entropy_backward(grad_logits: Any, logits: Any, targets: Any, lse: Any, grad: Any, scale: float,
                           checked: bool) -> None:
    """The gradient of cross_entropy's rows with respect to the logits (mt_cross_entropy_backward)."""
    check(C.mt_cross_entropy_backward(grad_logits.descriptor(), logits.descriptor(), targets.descriptor(),
                                          lse.descriptor(), grad.descriptor(), float(scale), 1 if checked else 0),
          "mt_cross_entropy_backward")
