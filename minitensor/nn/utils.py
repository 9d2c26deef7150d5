"""nn.utils: helpers for training loops, as torch.nn.utils."""

from __future__ import annotations

from typing import Any, Optional

from .. import autograd, ops
from .._creation import tensor
from .._dtype import float64
from ..tensor import Tensor


def clip_grad_norm_(parameters: Any, max_norm: float, norm_type: float = 2.0, *,
                    foreach: Optional[bool] = None) -> Tensor:
    """Scales the gradients of parameters in place so that their joint norm (all of
    them as one vector) is at most max_norm; returns the norm before clipping, as
    torch.nn.utils.clip_grad_norm_ (norm_type 2 or inf).

    foreach (torch's): True computes the norm and scales every gradient with
    the multi-tensor kernels (src/optim_multi.cu: a few launches whatever the
    number of gradients; contiguous float gradients only); False with the
    ops below (a copy of all gradients into one vector, its norm, and a
    multiply per gradient); None (the default) takes the kernels under the
    fast kernel policy wherever they apply, the ops under the teaching one."""
    grads = [p.grad for p in ([parameters] if isinstance(parameters, Tensor) else list(parameters))
             if p.grad is not None]
    if norm_type not in (2.0, float("inf")):
        raise ValueError(f"clip_grad_norm_(): norm_type must be 2 or inf, got {norm_type!r}")
    if foreach not in (None, True, False):
        raise TypeError(f"clip_grad_norm_(): foreach must be None, True or False, got {foreach!r}")
    with autograd.no_grad():
        if not grads:
            return tensor(0.0)
        if foreach is not False and (foreach or ops.fast_kernels()):
            if all(ops.fused_update_applies(g) for g in grads):
                norm = ops.clip_grad_norm_list_(grads, float(max_norm), norm_type != 2.0)
                return Tensor._from_array(norm).to(grads[0].dtype)
            if foreach:
                raise ValueError("clip_grad_norm_(foreach=True): the multi-tensor kernels take contiguous float "
                                 "gradients; got " + ", ".join(f"{g.dtype.name} {tuple(g.shape)}"
                                                               f"{'' if g.is_contiguous() else ' (not contiguous)'}"
                                                               for g in grads if not ops.fused_update_applies(g)))
        if norm_type == 2.0:
            # Every gradient flattened into one float64 vector (no overflow, few
            # roundings), cast as it is copied in, and one norm over it: four
            # ops, whatever the number of parameters (a norm per gradient and
            # their sum took five ops per parameter, each a host road).
            flat = ops.cat([ops.reshape(g, (g.numel(),)) for g in grads], 0, float64)
            total = Tensor._from_array(ops.map_("sqrt", ops.reduce_("sum", ops.mul(flat, flat))))
        else:
            total = tensor([float(g.abs().max()) if g.numel() else 0.0 for g in grads], dtype="float64").max()
        # The factor stays on the device, clamped to 1 there, as torch's: no
        # value is read back, so the clipping can be captured into a CUDA graph
        # with the rest of a training step (a factor of exactly 1 changes nothing).
        factor = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
        factors = {}  # cast once per dtype, not once per gradient
        for g in grads:
            if g.dtype not in factors:
                factors[g.dtype] = factor.to(g.dtype)
            ops.inplace_("mul", g, factors[g.dtype])  # g.mul_(...): no graph to record under no_grad
    return total.to(grads[0].dtype)
