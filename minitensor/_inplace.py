"""In-place ops on tensors and their autograd bookkeeping (torch's rules).

A tensor changed in place in a graph gets the history of the change: the op
is computed out of place on x's old value (_previous: the same memory as a
separate object, which becomes the node's input), written into x, and x
takes the result's grad_fn (_rebase). A leaf that requires grad may change
in place only under no_grad (_check_leaf). Tensor's add_, sub_, mul_, div_,
fill_, zero_, copy_, __setitem__ and scatter_add_ call these. The functions
take Tensors; they are typed as autograd's Variable, and make new Tensors
with ``x._wrap``, because tensor.py imports this module.
"""

from __future__ import annotations

from typing import Any

from . import autograd, ops
from .autograd import Variable


def _check_leaf(x: Variable, func: str) -> None:
    """torch's rule: a leaf that requires grad may change in place only under no_grad."""
    if x.requires_grad and x.grad_fn is None and autograd.is_grad_enabled():
        raise RuntimeError(
            f"{func}: a leaf Variable that requires grad is being used in an in-place operation; "
            f"change it in place only inside minitensor.no_grad() (as optimizers do)"
        )


def _records(x: Variable, other: Any) -> bool:
    """Whether an in-place op on x with other must be recorded in the graph."""
    return autograd.is_grad_enabled() and (
        x.requires_grad or (isinstance(other, Variable) and other.requires_grad)
    )


def _previous(x: Variable) -> Variable:
    """x's value and autograd record before an in-place op, as a separate object
    (same memory): the input of the node that will become x's grad_fn."""
    old = x._wrap(x)
    old.requires_grad = x.requires_grad
    old.grad_fn = x.grad_fn
    return old


def _rebase(x: Variable, result: Variable) -> Variable:
    """Writes result (computed out of place, recorded) into x and gives x its history."""
    ops.copy_(x, result)  # cast to x's dtype; bumps the version
    x.requires_grad = result.requires_grad
    x.grad_fn = result.grad_fn
    return x


def _inplace(x: Variable, op: str, rule: Any, other: Any) -> Variable:
    """x op= other in x's memory; recorded in the graph when x or other requires grad."""
    func = f"{op}_()"
    _check_leaf(x, func)
    if _records(x, other):
        ops.check_inplace_shape(x, other, func)
        ops.check_writable(x, func)
        if op in ("add", "sub") or (op in ("mul", "div") and ops.is_scalar(other)):
            # The gradient needs neither x's old value nor its new one: one
            # kernel into x's memory, recorded as such (torch's true in-place).
            result = autograd.InPlace.apply(_previous(x), op, other)
            x.requires_grad = result.requires_grad
            x.grad_fn = result.grad_fn
            return x
        # The rule sees a copy of x's old value: the write below must not change
        # what it saved for backward.
        return _rebase(x, rule.apply(autograd.Clone.apply(_previous(x)), other))
    return ops.inplace_(op, x, other)


def _overwrite(x: Variable, key: Any, value: Any, func: str) -> Variable:
    """x[key] = value (fill_, zero_, copy_, setitem); recorded as autograd.Overwrite."""
    _check_leaf(x, func)
    if _records(x, value):
        ops.check_writable(x, func)
        return _rebase(x, autograd.Overwrite.apply(_previous(x), key, value))
    if key is Ellipsis:
        return ops.copy_(x, value)
    ops.setitem(x, key, value)
    return x
