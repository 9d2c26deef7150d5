"""matmul, softmax and layer_norm as torch custom ops, forward and backward.

Each op is registered in three parts (torch.library):

- ``custom_op``: the real computation, on minitensor's kernels (the ops
  layer, minitensor/ops/), its torch tensors passed in and out without a
  copy (_bridge.py);
- ``register_fake``: the output's shape, dtype and device from the inputs'
  alone, so that ``torch.compile`` (and any tracing on fake tensors) can
  treat the op as opaque: it never looks inside;
- ``register_autograd``: the backward, itself written with minitensor's
  custom ops (each backward kernel is an op of its own, with its fake), so
  that torch's autograd, and a compiled backward graph, run minitensor's
  gradient kernels.

Every output is a new tensor, never a view of an input (custom ops may not
return aliases), and contiguous (row-major), as the fake says.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from .. import ops
from ._bridge import check_float, empty_like_none, maybe_array, on_torch_stream, to_array, to_torch


# ---- matmul ----------------------------------------------------------------------------------


def _matmul_shape(a: torch.Tensor, b: torch.Tensor) -> tuple[int, ...]:
    """torch.matmul's result shape (1-D operands, broadcast batch dims), or a ValueError."""
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"minitensor::matmul: both operands need at least 1 dim, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    a_shape = (1,) + tuple(a.shape) if a.ndim == 1 else tuple(a.shape)
    b_shape = tuple(b.shape) + (1,) if b.ndim == 1 else tuple(b.shape)
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(f"minitensor::matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be "
                         f"multiplied ({a_shape[-1]} != {b_shape[-2]})")
    batch = tuple(torch.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    return batch + ((a_shape[-2],) if a.ndim > 1 else ()) + ((b_shape[-1],) if b.ndim > 1 else ())


@torch.library.custom_op("minitensor::matmul", mutates_args=(), schema="(Tensor a, Tensor b) -> Tensor")
def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    check_float("minitensor::matmul", a=a, b=b)
    with on_torch_stream(a):
        return to_torch(ops.matmul(to_array(a), to_array(b)))


@_matmul.register_fake
def _matmul_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    check_float("minitensor::matmul", a=a, b=b)
    return a.new_empty(_matmul_shape(a, b))


def _matmul_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    ctx.save_for_backward(*inputs)


def _matmul_backward(ctx: Any, grad: torch.Tensor) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """For out = a @ b: da = grad @ b^T and db = a^T @ grad, each one more
    minitensor::matmul on transposed views (torch views: no copy, the kernels
    read the strides). 1-D operands become a row (1, K) and a column (K, 1), as
    in torch; batch dims that were broadcast are summed back (torch's
    sum_to_size, the one torch kernel here, run only then). A 2-D weight under a
    batch of rows (a Linear's x @ W^T) takes one product over every row at once."""
    a, b = ctx.saved_tensors
    a2 = a.unsqueeze(0) if a.ndim == 1 else a  # ..., M, K
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b  # ..., K, N
    batch = tuple(torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]))
    g2 = grad.reshape(batch + (a2.shape[-2], b2.shape[-1]))  # ..., M, N
    da = db = None
    if ctx.needs_input_grad[0]:
        da = _matmul(g2, b2.mT)
        if tuple(da.shape) != tuple(a2.shape):
            da = da.sum_to_size(a2.shape)
        da = da.reshape(a.shape)
    if ctx.needs_input_grad[1]:
        if b2.ndim == 2 and a2.ndim > 2:  # rows of every batch against one matrix: (K, R) @ (R, N)
            k, n = b2.shape
            db = _matmul(a2.reshape(-1, k).mT, g2.reshape(-1, n))
        else:
            db = _matmul(a2.mT, g2)
            if tuple(db.shape) != tuple(b2.shape):
                db = db.sum_to_size(b2.shape)
        db = db.reshape(b.shape)
    return da, db


_matmul.register_autograd(_matmul_backward, setup_context=_matmul_setup)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.matmul(a, b)`` on minitensor's matmul kernels (the default rung,
    its tile configuration from the autotuner): 2-D, batched with broadcast
    batch dims, and 1-D operands; float32 or float64, one dtype."""
    return _matmul(a, b)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``torch.nn.functional.linear``: x @ weight^T (minitensor::matmul), plus bias
    (added by torch)."""
    out = _matmul(x, weight.mT)
    return out if bias is None else out + bias


# ---- softmax ---------------------------------------------------------------------------------


@torch.library.custom_op("minitensor::softmax", mutates_args=(),
                         schema="(Tensor x, int dim, bool log) -> Tensor")
def _softmax(x: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    check_float("minitensor::softmax", x=x)
    with on_torch_stream(x):
        return to_torch(ops.softmax(to_array(x), dim, log))


@_softmax.register_fake
def _softmax_fake(x: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    check_float("minitensor::softmax", x=x)
    if not -max(x.ndim, 1) <= dim < max(x.ndim, 1):
        raise IndexError(f"minitensor::softmax: dim {dim} is out of range for a tensor of {x.ndim} dims")
    return x.new_empty(x.shape)


@torch.library.custom_op("minitensor::softmax_backward", mutates_args=(),
                         schema="(Tensor grad, Tensor out, int dim, bool log) -> Tensor")
def _softmax_backward(grad: torch.Tensor, out: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    with on_torch_stream(out):
        return to_torch(ops.softmax_backward(to_array(grad), to_array(out), dim, log))


@_softmax_backward.register_fake
def _softmax_backward_fake(grad: torch.Tensor, out: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    return out.new_empty(out.shape)


def _softmax_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    ctx.dim, ctx.log = inputs[1], inputs[2]
    ctx.save_for_backward(output)  # the gradient needs only the output
    if ctx.dim < 0:
        ctx.dim += max(output.ndim, 1)


def _softmax_grad(ctx: Any, grad: torch.Tensor) -> tuple[Optional[torch.Tensor], None, None]:
    """softmax: y * (grad - sum(grad * y)); log_softmax: grad - exp(y) * sum(grad):
    one kernel (mt_softmax_backward)."""
    (out,) = ctx.saved_tensors
    return _softmax_backward(grad, out, ctx.dim, ctx.log), None, None


_softmax.register_autograd(_softmax_grad, setup_context=_softmax_setup)


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``torch.softmax(x, dim)`` on minitensor's one-pass softmax kernel."""
    return _softmax(x, dim, False)


def log_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``torch.log_softmax(x, dim)`` on minitensor's one-pass softmax kernel."""
    return _softmax(x, dim, True)


# ---- layer_norm ------------------------------------------------------------------------------


def _layer_norm_stats_shape(x: torch.Tensor, normalized_shape: Sequence[int], weight: Optional[torch.Tensor],
                            bias: Optional[torch.Tensor]) -> tuple[int, ...]:
    """The shape of the per-row mean and rstd: x's shape without the normalized dims
    (after the checks ops.layer_norm makes, so that the fake refuses what the op does)."""
    k, shape = len(normalized_shape), tuple(normalized_shape)
    if k == 0 or k > x.ndim or tuple(x.shape[x.ndim - k:]) != shape:
        raise ValueError(f"minitensor::layer_norm: the last dims of the input of shape {tuple(x.shape)} "
                         f"must be the normalized shape {shape}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != shape:
            raise ValueError(f"minitensor::layer_norm: {name} has shape {tuple(p.shape)}, expected the "
                             f"normalized shape {shape}")
    return tuple(x.shape[: x.ndim - k])


@torch.library.custom_op(
    "minitensor::layer_norm", mutates_args=(),
    schema="(Tensor x, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)")
def _layer_norm(x: torch.Tensor, normalized_shape: Sequence[int], weight: Optional[torch.Tensor],
                bias: Optional[torch.Tensor], eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    check_float("minitensor::layer_norm", x=x, weight=weight, bias=bias)
    _layer_norm_stats_shape(x, normalized_shape, weight, bias)
    with on_torch_stream(x):
        out, mean, rstd = ops.layer_norm(to_array(x), normalized_shape, maybe_array(weight), maybe_array(bias), eps)
        return to_torch(out), to_torch(mean), to_torch(rstd)


@_layer_norm.register_fake
def _layer_norm_fake(x: torch.Tensor, normalized_shape: Sequence[int], weight: Optional[torch.Tensor],
                     bias: Optional[torch.Tensor], eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    check_float("minitensor::layer_norm", x=x, weight=weight, bias=bias)
    lead = _layer_norm_stats_shape(x, normalized_shape, weight, bias)
    return x.new_empty(x.shape), x.new_empty(lead), x.new_empty(lead)


@torch.library.custom_op(
    "minitensor::layer_norm_backward", mutates_args=(),
    schema="(Tensor grad, Tensor x, Tensor mean, Tensor rstd, Tensor? weight, bool need_input, bool need_weight, "
           "bool need_bias) -> (Tensor, Tensor, Tensor)")
def _layer_norm_backward(grad: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
                         weight: Optional[torch.Tensor], need_input: bool, need_weight: bool,
                         need_bias: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    with on_torch_stream(x):
        grads = ops.layer_norm_backward(to_array(grad), to_array(x), to_array(mean), to_array(rstd),
                                        maybe_array(weight), need_bias, (need_input, need_weight, need_bias))
        return tuple(empty_like_none(x) if g is None else to_torch(g) for g in grads)


@_layer_norm_backward.register_fake
def _layer_norm_backward_fake(grad: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor,
                              weight: Optional[torch.Tensor], need_input: bool, need_weight: bool,
                              need_bias: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    normalized = tuple(x.shape[mean.ndim:])
    return (x.new_empty(x.shape) if need_input else empty_like_none(x),
            x.new_empty(normalized) if need_weight else empty_like_none(x),
            x.new_empty(normalized) if need_bias else empty_like_none(x))


def _layer_norm_setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, ...]) -> None:
    x, _, weight, bias, _ = inputs
    _, mean, rstd = output
    ctx.has_weight, ctx.has_bias = weight is not None, bias is not None
    ctx.save_for_backward(x, mean, rstd, weight)


def _layer_norm_grad(ctx: Any, grad: torch.Tensor, _grad_mean: Any, _grad_rstd: Any) -> tuple[Any, ...]:
    """dx, dweight, dbias from the forward's per-row mean and rstd, in one kernel
    (mt_layer_norm_backward); the statistics are outputs only for the backward,
    and have no gradient of their own."""
    x, mean, rstd, weight = ctx.saved_tensors
    needs = ctx.needs_input_grad
    need_weight, need_bias = ctx.has_weight and needs[2], ctx.has_bias and needs[3]
    dx, dw, db = _layer_norm_backward(grad, x, mean, rstd, weight, needs[0], need_weight, need_bias)
    return dx if needs[0] else None, None, dw if need_weight else None, db if need_bias else None, None


_layer_norm.register_autograd(_layer_norm_grad, setup_context=_layer_norm_setup)


def layer_norm(x: torch.Tensor, normalized_shape: Sequence[int], weight: Optional[torch.Tensor] = None,
               bias: Optional[torch.Tensor] = None, eps: float = 1e-5) -> torch.Tensor:
    """``torch.nn.functional.layer_norm`` on minitensor's one-kernel layer norm
    (forward saves each row's mean and rstd for the one-kernel backward)."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    return _layer_norm(x, [int(n) for n in normalized_shape], weight, bias, float(eps))[0]

