"""The masked softmax (src/masked_softmax.cu) and fused attention: the flash rung
(src/attention.cu), the warp rung (src/attention_warp.cu) and the tiled rung
(src/attention_tiled.cu) and the mma rung (src/attention_mma.cu, its backward
src/attention_mma_backward.cu)."""

from __future__ import annotations

from ctypes import POINTER, byref, c_double, c_int
from typing import Any

from .loader import MtTensor, declare, lib, check, _desc

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_masked_softmax": (c_int, [MtTensor, MtTensor, MtTensor, c_double, c_int]),
    "mt_attention": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_double, c_int]),
    "mt_attention_backward": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor,
                                      MtTensor, MtTensor, c_double, c_int]),
    "mt_attention_warp": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_double, c_int]),
    "mt_attention_warp_backward": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor,
                                           MtTensor, MtTensor, c_double, c_int]),
    "mt_attention_tiled": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_double, c_int, c_int,
                                   c_int]),
    "mt_attention_tiled_backward": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor,
                                            MtTensor, MtTensor, c_double, c_int, c_int]),
    "mt_attention_mma": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_double, c_int, c_int,
                                 c_int]),
    "mt_attention_mma_backward": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor,
                                          MtTensor, MtTensor, c_double, c_int, c_int]),
    "mt_attention_mma_supported": (c_int, [c_int, POINTER(c_int), POINTER(c_int)]),
}
declare(SIGNATURES)


def attention_mma_supported(head_dim: int) -> tuple[bool, bool]:
    """Whether this GPU runs the mma rung's forward and its backward at this
    head dim with their default tiles (mt_attention_mma_supported: compute
    capability 8.0 and the tiles' shared memory; both True on the emulator,
    both False for head dims other than 64 and 128)."""
    forward, backward = c_int(), c_int()
    check(lib().mt_attention_mma_supported(head_dim, byref(forward), byref(backward)),
          "mt_attention_mma_supported")
    return bool(forward.value), bool(backward.value)


SOFTMAX_MASK, SOFTMAX_CAUSAL = 1, 2  # minitensor.h's flags


def masked_softmax(out: Any, inp: Any, mask: Any, scale: float, causal: bool) -> None:
    """out = softmax(inp * scale + mask [causal]) along the last dim in one kernel
    (mt_masked_softmax); mask None for none."""
    flags = (0 if mask is None else SOFTMAX_MASK) | (SOFTMAX_CAUSAL if causal else 0)
    check(lib().mt_masked_softmax(out.descriptor(), inp.descriptor(), _desc(mask), float(scale), flags),
          "mt_masked_softmax")


def attention(out: Any, lse: Any, q: Any, k: Any, v: Any, scale: float, causal: bool, rung: str = "flash",
              block_queries: int = 0, thread_rows: int = 0, block_keys: int = 0) -> None:
    """out = softmax(q @ k^T * scale) @ v in one kernel, each row's log-sum-exp in
    lse (mt_attention, or mt_attention_warp for rung "warp", mt_attention_tiled
    with block_queries and thread_rows for rung "tiled", mt_attention_mma with
    block_queries and block_keys for rung "mma"); contiguous 3-D tensors, lse
    (B, L)."""
    if rung == "mma":
        check(lib().mt_attention_mma(out.descriptor(), lse.descriptor(), q.descriptor(), k.descriptor(),
                                     v.descriptor(), float(scale), 1 if causal else 0, int(block_queries),
                                     int(block_keys)),
              "mt_attention_mma")
        return
    if rung == "tiled":
        check(lib().mt_attention_tiled(out.descriptor(), lse.descriptor(), q.descriptor(), k.descriptor(),
                                       v.descriptor(), float(scale), 1 if causal else 0, int(block_queries),
                                       int(thread_rows)),
              "mt_attention_tiled")
        return
    name = "mt_attention_warp" if rung == "warp" else "mt_attention"
    check(getattr(lib(), name)(out.descriptor(), lse.descriptor(), q.descriptor(), k.descriptor(), v.descriptor(),
                               float(scale), 1 if causal else 0), name)


def attention_backward(dq: Any, dk: Any, dv: Any, dout: Any, q: Any, k: Any, v: Any, out: Any, lse: Any,
                       scale: float, causal: bool, rung: str = "flash", block_queries: int = 0,
                       block_cols: int = 0) -> None:
    """dq, dk, dv of mt_attention (mt_attention_backward), of mt_attention_warp
    (mt_attention_warp_backward, rung "warp"), of mt_attention_tiled
    (mt_attention_tiled_backward, rung "tiled") or of mt_attention_mma
    (mt_attention_mma_backward, rung "mma": block_cols the rows of the tiles its
    kernels walk, 32 or 64, 0 the default) from dout and the forward's tensors."""
    if rung == "mma":
        check(lib().mt_attention_mma_backward(dq.descriptor(), dk.descriptor(), dv.descriptor(), dout.descriptor(),
                                              q.descriptor(), k.descriptor(), v.descriptor(), out.descriptor(),
                                              lse.descriptor(), float(scale), 1 if causal else 0,
                                              int(block_cols)),
              "mt_attention_mma_backward")
        return
    if rung == "tiled":
        check(lib().mt_attention_tiled_backward(dq.descriptor(), dk.descriptor(), dv.descriptor(), dout.descriptor(),
                                                q.descriptor(), k.descriptor(), v.descriptor(), out.descriptor(),
                                                lse.descriptor(), float(scale), 1 if causal else 0,
                                                int(block_queries)),
              "mt_attention_tiled_backward")
        return
    name = "mt_attention_warp_backward" if rung == "warp" else "mt_attention_backward"
    check(getattr(lib(), name)(dq.descriptor(), dk.descriptor(), dv.descriptor(), dout.descriptor(),
                               q.descriptor(), k.descriptor(), v.descriptor(), out.descriptor(),
                               lse.descriptor(), float(scale), 1 if causal else 0), name)
