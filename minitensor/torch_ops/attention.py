"""scaled_dot_product_attention as a torch custom op, forward and backward.

One fused kernel each way (no (L, S) score matrix in memory): the forward
returns the output and each query row's log-sum-exp, which the backward
uses to recompute the weights. The rung is minitensor's: the faster of the
tiled rung (src/attention_tiled.cu) and the warp rung (src/attention_warp.cu)
for the head dim (ops.fused_attention_rung) under the fast kernel policy
when the head dims of query and value are equal and 32, 64 or 128; else the
flash rung (src/attention.cu: a thread per query
row), which takes head dims up to 64. dense.py's docstring says how an op
is registered (custom op, fake, autograd).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch

from .. import ops
from ._bridge import check_float, on_torch_stream, to_array, to_torch


def _rung(head_dim: int, value_dim: int) -> str:
    """The attention rung for these head dims (the forward and the backward agree)."""
    fused = ops.fused_attention_rung(head_dim, value_dim)
    if fused is not None:
        return fused
    if max(head_dim, value_dim) <= ops.ATTENTION_MAX_DIM:
        return "flash"
    raise ValueError(
        f"minitensor::sdpa: head dims {head_dim} (query, key) and {value_dim} (value) fit no fused attention "
        f"rung: the flash rung takes up to {ops.ATTENTION_MAX_DIM}, the warp rung equal dims of "
        f"{ops.ATTENTION_WARP_DIMS} (under the fast kernel policy); torch's own attention takes any")


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, ...]:
    """The shape of the output, after refusing operands that do not agree."""
    check_float("minitensor::sdpa", query=q, key=k, value=v)
    shapes = f"query {tuple(q.shape)}, key {tuple(k.shape)} and value {tuple(v.shape)}"
    if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ValueError(f"minitensor::sdpa: {shapes} must have one number of dims, at least 2 (..., length, features)")
    if q.shape[:-2] != k.shape[:-2] or q.shape[:-2] != v.shape[:-2]:
        raise ValueError(f"minitensor::sdpa: {shapes} must have the same leading (batch, head) dims "
                         f"(expand them first: this op does not broadcast them)")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"minitensor::sdpa: {shapes} do not agree: query and key need the same last dim, "
                         f"key and value the same length")
    if k.shape[-2] == 0 and q.shape[-2] > 0 and q.numel() > 0:
        raise ValueError(f"minitensor::sdpa: {shapes}: no key to attend to")
    _rung(q.shape[-1], v.shape[-1])
    return tuple(q.shape[:-1]) + (v.shape[-1],)


def _rows(x: Any) -> Any:
    """An Array (..., L, E) as (B, L, E), B the product of the leading dims (a view when it can be)."""
    return ops.reshape(x, (math.prod(x.shape[:-2]),) + tuple(x.shape[-2:]))


@torch.library.custom_op("minitensor::sdpa", mutates_args=(),
                         schema="(Tensor q, Tensor k, Tensor v, bool is_causal, float scale) -> (Tensor, Tensor)")
def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool,
          scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    out_shape = _check(q, k, v)
    with on_torch_stream(q):
        qa, ka, va = to_array(q), to_array(k), to_array(v)
        out, lse = ops.attention(_rows(qa), _rows(ka), _rows(va), scale, is_causal, _rung(q.shape[-1], v.shape[-1]))
        return to_torch(ops.reshape(out, out_shape)), to_torch(ops.reshape(lse, out_shape[:-1]))


@_sdpa.register_fake
def _sdpa_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool,
               scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    out_shape = _check(q, k, v)
    return q.new_empty(out_shape), q.new_empty(out_shape[:-1])


@torch.library.custom_op(
    "minitensor::sdpa_backward", mutates_args=(),
    schema="(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, bool is_causal, float scale) "
           "-> (Tensor, Tensor, Tensor)")
def _sdpa_backward(grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                   lse: torch.Tensor, is_causal: bool, scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    with on_torch_stream(q):
        arrays = [_rows(ops.contiguous(to_array(t))) for t in (grad, q, k, v, out)]
        lse_a = ops.reshape(to_array(lse), (arrays[0].shape[0], q.shape[-2]))
        dq, dk, dv = ops.attention_backward(*arrays, lse_a, scale, is_causal, _rung(q.shape[-1], v.shape[-1]))
        return (to_torch(ops.reshape(dq, tuple(q.shape))), to_torch(ops.reshape(dk, tuple(k.shape))),
                to_torch(ops.reshape(dv, tuple(v.shape))))


@_sdpa_backward.register_fake
def _sdpa_backward_fake(grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                        lse: torch.Tensor, is_causal: bool,
                        scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _sdpa_setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor]) -> None:
    q, k, v, ctx.is_causal, ctx.scale = inputs
    ctx.save_for_backward(q, k, v, *output)


def _sdpa_grad(ctx: Any, grad: torch.Tensor, _grad_lse: Any) -> tuple[Any, ...]:
    """dq, dk, dv from the saved output and log-sum-exp, each weight recomputed
    (P = exp(q k^T * scale - lse)): dV = P^T dO, dS = P * (dO V^T - rowsum(dO *
    O)), dQ = dS K * scale, dK = dS^T Q * scale. The log-sum-exp is an output
    only for the backward, and has no gradient of its own."""
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = _sdpa_backward(grad, q, k, v, out, lse, ctx.is_causal, ctx.scale)
    needs = ctx.needs_input_grad
    return dq if needs[0] else None, dk if needs[1] else None, dv if needs[2] else None, None, None


_sdpa.register_autograd(_sdpa_grad, setup_context=_sdpa_setup)


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 is_causal: bool = False, scale: Optional[float] = None) -> torch.Tensor:
    """``torch.nn.functional.scaled_dot_product_attention`` without a mask or dropout:
    softmax(query @ key^T * scale) @ value over query (..., L, E), key (..., S, E),
    value (..., S, Ev), the same leading dims on all three; scale 1/sqrt(E) by
    default; is_causal hides every key after its query (key j > query i, the
    top-left alignment torch uses when L != S)."""
    head_dim = query.shape[-1] if query.ndim else 0
    scale = (1.0 if head_dim == 0 else 1.0 / math.sqrt(head_dim)) if scale is None else float(scale)
    return _sdpa(query, key, value, bool(is_causal), scale)[0]
