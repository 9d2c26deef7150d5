"""Attention: the fused flash kernel and its gradient (src/attention.cu), the
one-kernel rungs (src/attention_warp.cu, src/attention_tiled.cu,
src/attention_mma.cu), and the masked softmax of the attention ladder
(src/masked_softmax.cu)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from .. import _lib
from .._array import Array, empty, upload
from .._views import expand
from .._dtype import bool_
from .._errors import DTypeError, ShapeError
from .core import _require_array, require_float, contiguous, fast_kernels, reshape
from .reduce import reduce_
from .elementwise import zip_, add, mul
from .where import where
from .softmax import softmax


ATTENTION_MAX_DIM = 64  # the fused kernel keeps a row in registers (src/attention.cu)
ATTENTION_WARP_DIMS = (32, 64, 128)  # the warp rung's compile-time head dims, q's and v's alike (src/attention_warp.cu)
ATTENTION_TILED_DIMS = (32, 64, 128)  # the tiled rung's, likewise (src/attention_tiled.cu)
ATTENTION_TILED_BLOCKS = (0, 64, 128)  # its query blocks: 0 the default; 128 for float32 only
ATTENTION_TILED_ROWS = (0, 4, 2)  # its forward's rows a thread: 0 the default; 2 (twice the threads) float32 only
# The mma rung's (src/attention_mma.cu: the forward on the tensor cores, 3xTF32,
# float32 only; its backward src/attention_mma_backward.cu, the same products):
# head dims, queries a block and keys a tile (0: the default by shape,
# src/attention_mma.cu's launcher; 16 keys the forward only).
ATTENTION_MMA_DIMS = (64, 128)
ATTENTION_MMA_BLOCKS = (0, 64, 128)
ATTENTION_MMA_KEYS = (0, 16, 32, 64)
# The rung per head dim, from bench/attention.py on the H100 (2026-11-27 20:30,
# docs/performance.md "Attention: the tiled rung"): at head dim 64 the tiled
# rung's forward was 3-12% faster than the warp rung's, its deterministic
# two-kernel backward 15-25% slower than the warp rung's fused one (dQ by
# atomics), so the pair "tiled/warp"; at 128 the tiled forward was no faster;
# 32 was not measured. Other equal dims of 32, 64, 128: the warp rung.
ATTENTION_FUSED_RUNGS = {32: "warp", 64: "tiled/warp", 128: "warp"}
# Where the mma rung's forward (tensor cores, 3xTF32) replaces the rung above's
# forward, its backward kept (the mma rung saves the same lse): (head dim,
# causal) -> the shortest length it does so from, from bench/attention.py on
# the H100 (checkpoint 2026-11-28 04:00): at every length measured (T256,
# 1024, 2048), causal or not, its forward beat the FFMA rungs' (head dim 64:
# 1.04-1.30x torch against 0.86-1.04x; 128: 0.88-1.03x against 0.63-0.67x),
# and with the warp backward it beat "tiled/warp" and "warp" forward +
# backward too (e.g. 6.66 against 6.80 ms at B16 H12 T1024 D64).
ATTENTION_MMA_FORWARD: dict[tuple[int, bool], int] = {(64, False): 1, (64, True): 1, (128, False): 1,
                                                      (128, True): 1}
# Where the mma rung's backward (tensor cores, 3xTF32, two kernels and no
# atomics) then replaces the FFMA rung's backward too, "mma/mma": (head dim,
# causal) -> the shortest length it does so from. Every pair from the first
# length: on the H200 (checkpoint 2026-11-28 10:45, timing
# the backward alone, B*H 384 T256 to B*H 64 T2048) it beat the warp
# backward at all 10 shapes, in 22-36% less time at head dim 64 (2.08 against 3.22 ms
# at B*H 192 T1024 causal), 8-23% less at 128 (10.9 against 14.1 ms at T2048
# causal); SDPA forward + backward against torch: 1.00-1.53x at head dim 64
# but 0.65x at T2048 causal, 0.73-0.93x at 128.
ATTENTION_MMA_BACKWARD: dict[tuple[int, bool], int] = {(64, False): 1, (64, True): 1, (128, False): 1,
                                                       (128, True): 1}


# Where the matmul, masked softmax, matmul rung (scores stored, the backward
# four matmuls and one softmax-backward kernel) beats the one-kernel rungs
# when a gradient is wanted: (head dim, causal) -> the shortest length it
# does so at, from bench/attention.py on the H100 (checkpoint 2026-11-27
# 23:50: at head dim 128 without the mask, B16 H12 T1024, 11.79 ms forward +
# backward against the warp rung's 15.50; at T256 2.51 against 2.41, so not
# there). Without a gradient, and for every other pair, the one-kernel rungs
# are faster (the causal mask halves their work, not the matmuls'; at head
# dim 64 the warp backward beat it at every length). The scores (B, L, S) it
# keeps are capped at ATTENTION_MATMUL_MAX_SCORES elements (1 GiB of float32).
ATTENTION_MATMUL_WITH_GRAD = {(128, False): 1024}
ATTENTION_MATMUL_MAX_SCORES = 1 << 28


def fused_attention_rung(head_dim: int, value_dim: int, length: int = 0, scores: int = 0, causal: bool = False,
                         needs_grad: bool = False) -> Optional[str]:
    """The fastest one-kernel attention rung for these head dims under the fast
    kernel policy (ATTENTION_FUSED_RUNGS): "warp" (src/attention_warp.cu),
    "tiled" (src/attention_tiled.cu) or "F/B", F's forward and B's backward
    (F "mma", src/attention_mma.cu, where ATTENTION_MMA_FORWARD says so; B
    "mma" too, src/attention_mma_backward.cu, where ATTENTION_MMA_BACKWARD
    does; each only where the GPU runs it, mma_supported);
    None when no one-kernel rung takes them, under the teaching policy (the
    course's rungs run there), or when a gradient is wanted (needs_grad) and
    the matmul rung is faster at this length (ATTENTION_MATMUL_WITH_GRAD;
    scores, the (B, L, S) elements it would store, at most
    ATTENTION_MATMUL_MAX_SCORES)."""
    if not fast_kernels() or head_dim != value_dim:
        return None
    if needs_grad and 0 < scores <= ATTENTION_MATMUL_MAX_SCORES:
        # Compared, not looked up (as below).
        for (dim, masked), shortest in ATTENTION_MATMUL_WITH_GRAD.items():
            if head_dim == dim and bool(causal) == masked and length >= shortest:
                return None
    # Compared, not looked up: under torch.compile's fake tensors a head dim
    # can be a symbolic int, which compares but does not hash.
    for dim, rung in ATTENTION_FUSED_RUNGS.items():
        if head_dim == dim:
            for (mma_dim, masked), shortest in ATTENTION_MMA_FORWARD.items():
                if head_dim == mma_dim and bool(causal) == masked and length >= shortest > 0:
                    forward_runs, backward_runs = mma_supported(mma_dim)
                    if not forward_runs:
                        break
                    backward = _mma_backward(mma_dim, causal, length) if backward_runs else None
                    return "mma/" + (backward or rung.partition("/")[2] or rung)
            return rung
    return None


# (device, head dim) -> whether the mma rung's forward and backward run there.
_MMA_SUPPORTED: dict[tuple[int, int], tuple[bool, bool]] = {}


def mma_supported(head_dim: int) -> tuple[bool, bool]:
    """Whether this GPU runs the mma rung's forward and its backward at this
    head dim (64 or 128), asked once a device (_lib.attention_mma_supported):
    a GPU older than compute capability 8.0 has no mma.sync, and at head
    dim 128 the backward's tiles need more shared memory than sm_86 and
    sm_89 give a block. Where they do not run, fused_attention_rung keeps
    the FFMA rungs."""
    key = (_lib.get_device(), head_dim)
    if key not in _MMA_SUPPORTED:
        _MMA_SUPPORTED[key] = _lib.attention_mma_supported(head_dim)
    return _MMA_SUPPORTED[key]


def _mma_backward(head_dim: int, causal: bool, length: int) -> Optional[str]:
    """"mma" where ATTENTION_MMA_BACKWARD takes the mma backward at this
    length, else None (compared, not looked up, as in fused_attention_rung)."""
    for (dim, masked), shortest in ATTENTION_MMA_BACKWARD.items():
        if head_dim == dim and bool(causal) == masked and length >= shortest > 0:
            return "mma"
    return None


def check_attention_rung(func: str, algo: str, head_dim: int, value_dim: int, dtype_name: str,
                         block_queries: int = 0, thread_rows: int = 0, block_keys: int = 0) -> None:
    """Raise a ValueError naming the dims when a one-kernel rung does not take
    these head dims (flash: up to ATTENTION_MAX_DIM; warp, tiled and mma: equal
    dims of their lists), this query block (the tiled rung's
    ATTENTION_TILED_BLOCKS, 128 for float32 only; the mma rung's
    ATTENTION_MMA_BLOCKS; 0 for any rung), these rows
    a thread (the tiled rung's ATTENTION_TILED_ROWS, 2 for float32 only; 0 for
    any rung), this key tile (the mma rung's ATTENTION_MMA_KEYS; 0 for any
    rung) or this dtype (the mma rung: float32 only)."""
    if algo == "flash" and max(head_dim, value_dim) > ATTENTION_MAX_DIM:
        raise ValueError(f"{func}: the flash rung takes head dims up to {ATTENTION_MAX_DIM}, got "
                         f"{head_dim} and {value_dim}; use algo='naive'")
    for rung, dims in (("warp", ATTENTION_WARP_DIMS), ("tiled", ATTENTION_TILED_DIMS), ("mma", ATTENTION_MMA_DIMS)):
        if algo == rung and not head_dim == value_dim in dims:
            raise ValueError(f"{func}: the {rung} rung takes head dims {dims}, q's and v's alike, "
                             f"got {head_dim} and {value_dim}; use algo='naive'")
    blocks = {"tiled": ATTENTION_TILED_BLOCKS, "mma": ATTENTION_MMA_BLOCKS}.get(algo, (0,))
    if block_queries not in blocks:
        raise ValueError(f"{func}: block_queries {block_queries!r}: the tiled rung takes "
                         f"{ATTENTION_TILED_BLOCKS}, the mma rung {ATTENTION_MMA_BLOCKS}, the other rungs 0 only")
    if block_queries == 128 and dtype_name != "float32":
        raise ValueError(f"{func}: block_queries 128 is for float32 only, got {dtype_name} (its tiles would "
                         f"not fit in shared memory)")
    if thread_rows not in (ATTENTION_TILED_ROWS if algo == "tiled" else (0,)):
        raise ValueError(f"{func}: thread_rows {thread_rows!r}: the tiled rung takes {ATTENTION_TILED_ROWS}, "
                         f"the other rungs 0 only")
    if thread_rows == 2 and dtype_name != "float32":
        raise ValueError(f"{func}: thread_rows 2 is for float32 only, got {dtype_name}")
    if block_keys not in (ATTENTION_MMA_KEYS if algo == "mma" else (0,)):
        raise ValueError(f"{func}: block_keys {block_keys!r}: the mma rung takes {ATTENTION_MMA_KEYS}, "
                         f"the other rungs 0 only")
    if algo == "mma" and dtype_name != "float32":
        raise ValueError(f"{func}: the mma rung is float32 only (3xTF32 products), got {dtype_name}; "
                         f"use algo='warp'")


def causal_future(length: int, keys: int) -> Array:
    """(length, keys) bool: True where key j comes after query i (j > i), the
    positions a causal mask hides."""
    host = np.triu(np.ones((length, keys), dtype=bool), 1)
    out = empty((length, keys), bool_)
    if out.numel() > 0:
        upload(out, host)
    return out


def _flat(x: Array, trailing: int) -> Array:
    """x with its leading dims merged into one before its last `trailing` dims:
    (..., L, E) as (B, L, E) with trailing 2, an lse (..., L) as (B, L) with
    trailing 1. A view of a contiguous x (the kernels take contiguous 3-D q,
    k, v and a 2-D lse)."""
    x = contiguous(x)
    if x.ndim == trailing + 1:
        return x
    batch = 1
    for n in x.shape[:-trailing]:
        batch *= n
    return reshape(x, (batch,) + tuple(x.shape[-trailing:]))


def attention(q: Array, k: Array, v: Array, scale: float, causal: bool, rung: str = "flash",
              block_queries: int = 0, thread_rows: int = 0, block_keys: int = 0) -> tuple[Array, Array]:
    """softmax(q @ k^T * scale) @ v over (..., L, D), (..., S, D), (..., S, Dv) with
    the same leading dims, in one kernel (rung "flash": mt_attention, a thread
    per query row; rung "warp": mt_attention_warp, register tiles, D = Dv in
    ATTENTION_WARP_DIMS; rung "tiled": mt_attention_tiled, block_queries
    queries a block, thread_rows rows a thread, D = Dv in ATTENTION_TILED_DIMS;
    rung "mma": mt_attention_mma, the tensor cores at float32's accuracy,
    block_queries queries a block, block_keys keys a tile, D = Dv in ATTENTION_MMA_DIMS, float32 only): no
    score is written to memory. Returns the output (..., L, Dv) and each
    row's log-sum-exp (..., L) of the scaled scores, which is all the backward
    needs to recompute the weights. A rung "F/B" (fused_attention_rung) runs F
    here and B in attention_backward: every one-kernel rung saves the same lse
    (a rung "mma/B" chosen for a float64 q runs the warp forward instead:
    the mma rung is float32 only). The leading dims are flattened into one by
    views, not by autograd ops."""
    # out and lse allocated flat, (B, L, Dv) and (B, L), and given q's leading
    # dims after the launch: views made while the kernel runs, not before.
    batch = 1
    for n in q.shape[:-2]:
        batch *= n
    out = empty((batch,) + q.shape[-2:-1] + (v.shape[-1],), q.dtype)
    lse = empty((batch,) + q.shape[-2:-1], q.dtype)
    forward = rung.partition("/")[0]
    if forward == "mma" and "/" in rung and q.dtype.name != "float32":
        forward = "warp"
    if out.numel() > 0 or lse.numel() > 0:
        _lib.attention(out, lse, _flat(q, 2), _flat(k, 2), _flat(v, 2), scale, causal, forward, block_queries,
                       thread_rows, block_keys)
    if q.ndim != 3:
        out, lse = reshape(out, q.shape[:-1] + (v.shape[-1],)), reshape(lse, q.shape[:-1])
    return out, lse


def attention_backward(grad: Array, q: Array, k: Array, v: Array, out: Array, lse: Array, scale: float,
                       causal: bool, rung: str = "flash", block_queries: int = 0) -> tuple[Array, Array, Array]:
    """dq, dk, dv of attention() from grad = dL/dout and the forward's q, k, v, out
    and lse, recomputing each weight from lse: the flash rung's two kernels
    (mt_attention_backward), the warp rung's fused one (mt_attention_warp_backward)
    the tiled rung's two, dQ then dK and dV (mt_attention_tiled_backward), or
    the mma rung's two on the tensor cores (mt_attention_mma_backward; every
    rung's lse is the same, so any forward's will do). A rung "F/mma" for
    inputs the mma rung does not take (float64: the forward ran the warp
    rung) runs the warp rung's backward."""
    dq, dk, dv = empty(q.shape, q.dtype), empty(k.shape, k.dtype), empty(v.shape, v.dtype)
    backward = rung.partition("/")[2] or rung
    if backward == "mma" and not (q.dtype.name == "float32" and q.shape[-1] == v.shape[-1] in ATTENTION_MMA_DIMS):
        backward = "warp"
    if dq.numel() + dk.numel() + dv.numel() > 0:
        _lib.attention_backward(_flat(dq, 2), _flat(dk, 2), _flat(dv, 2), _flat(grad, 2), _flat(q, 2),
                                _flat(k, 2), _flat(v, 2), _flat(out, 2), _flat(lse, 1), scale, causal, backward,
                                block_queries)
    return dq, dk, dv


def masked_softmax(x: Array, mask: Optional[Array], scale: float, causal: bool) -> Array:
    """softmax(x * scale + mask) along the last dim, the keys after each query
    hidden when causal (x is (..., L, S)); mask (float, x's dtype) broadcasts to
    x's shape. A row whose every score is -inf gets zeros (torch's attention
    does the same: its "safe softmax"), not the NaN of a softmax over nothing.
    Under the fast policy one kernel reads each score once (mt_masked_softmax,
    the attention ladder's fused rung); under teaching the chain of the
    course's kernels: a multiply, an add, a where, the softmax, a where."""
    func = "masked_softmax()"
    _require_array(x, func)
    require_float(x, func)
    if causal and x.ndim < 2:
        raise ShapeError(f"{func}: the causal mask needs (..., queries, keys), got shape {x.shape}")
    if mask is not None:
        if mask.dtype is not x.dtype:
            raise DTypeError(f"{func}: the mask is {mask.dtype.name} but the scores are {x.dtype.name}")
        mask = expand(mask, x.shape)
    if x.numel() == 0:  # no query or no key: nothing to normalise (the teaching chain's max would refuse)
        return empty(x.shape, x.dtype)
    if x.ndim == 0 or not fast_kernels():
        scores = mul(x, scale)
        if mask is not None:
            scores = add(scores, mask)
        if causal:
            scores = where(causal_future(x.shape[-2], x.shape[-1]), float("-inf"), scores)
        if scores.ndim == 0:
            return softmax(scores, -1)
        hidden = zip_("eq", reduce_("max", scores, -1, keepdim=True), float("-inf"))
        return where(hidden, 0.0, softmax(scores, -1))
    x = contiguous(x)
    out = empty(x.shape, x.dtype)
    if out.numel() > 0:
        _lib.masked_softmax(out, x, mask, scale, causal)
    return out
