"""Cross-entropy of rows of logits against class indices, and its gradient
(src/cross_entropy.cu)."""

from __future__ import annotations

from .. import _lib
from .._array import Array, empty
from .._storage import Storage


def cross_entropy_rows(logits: Array, targets: Array, checked: bool = False) -> tuple[Array, Array]:
    """Each row's cross-entropy against its target class, and its logsumexp (kept
    for the backward): one kernel reading the logits once (mt_cross_entropy).
    logits (N, C); targets (N,) class indices in logits' dtype, checked on the
    device unless `checked` (the caller checked them on the host)."""
    n = logits.shape[0]
    loss, lse = empty((n,), logits.dtype), empty((n,), logits.dtype)
    # The device check waits for its answer; targets checked before and not
    # written since (the same view, the same storage version) are not checked again.
    # Only memory minitensor owns: another library may write a borrowed buffer
    # without minitensor's version counter knowing.
    storage = targets._storage
    own = type(storage) is Storage
    seal = (targets._offset, targets._shape, targets._strides, logits.shape[1], storage.version)
    checked = checked or own and getattr(storage, "class_indices_checked", None) == seal
    _lib.cross_entropy(loss, lse, logits, targets, checked)
    if own:
        storage.class_indices_checked = seal
    return loss, lse


def cross_entropy_backward(grad: Array, logits: Array, targets: Array, lse: Array, scale: float) -> Array:
    """The gradient of cross_entropy_rows' losses with respect to the logits, each
    row's loss gradient grad (N,) (a broadcast view is fine) times scale
    (mt_cross_entropy_backward). The targets are those the forward checked."""
    out = empty(logits.shape, logits.dtype)
    if out.numel() > 0:
        _lib.cross_entropy_backward(out, logits, targets, lse, grad, scale, True)
    return out
