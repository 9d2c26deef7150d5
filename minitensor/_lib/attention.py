"""The masked softmax (src/masked_softmax.cu) and fused attention (src/attention.cu)."""

from __future__ import annotations

from ctypes import c_double, c_int
from typing import Any

from .loader import MtTensor, declare, lib, check, _desc

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_masked_softmax": (c_int, [MtTensor, MtTensor, MtTensor, c_double, c_int]),
    "mt_attention": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_double, c_int]),
    "mt_attention_backward": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor,
                                      MtTensor, MtTensor, c_double, c_int]),
}
declare(SIGNATURES)


SOFTMAX_MASK, SOFTMAX_CAUSAL = 1, 2  # minitensor.h's flags


def masked_softmax(out: Any, inp: Any, mask: Any, scale: float, causal: bool) -> None:
    """out = softmax(inp * scale + mask [causal]) along the last dim in one kernel
    (mt_masked_softmax); mask None for none."""
    flags = (0 if mask is None else SOFTMAX_MASK) | (SOFTMAX_CAUSAL if causal else 0)
    check(lib().mt_masked_softmax(out.descriptor(), inp.descriptor(), _desc(mask), float(scale), flags),
          "mt_masked_softmax")


def attention(out: Any, lse: Any, q: Any, k: Any, v: Any, scale: float, causal: bool) -> None:
    """out = softmax(q @ k^T * scale) @ v in one kernel, each row's log-sum-exp in
    lse (mt_attention); contiguous 3-D tensors, lse (B, L)."""
    check(lib().mt_attention(out.descriptor(), lse.descriptor(), q.descriptor(), k.descriptor(), v.descriptor(),
                             float(scale), 1 if causal else 0), "mt_attention")


def attention_backward(dq: Any, dk: Any, dv: Any, dout: Any, q: Any, k: Any, v: Any, out: Any, lse: Any,
                       scale: float, causal: bool) -> None:
    """dq, dk, dv of mt_attention from dout and the forward's tensors (mt_attention_backward)."""
    check(lib().mt_attention_backward(dq.descriptor(), dk.descriptor(), dv.descriptor(), dout.descriptor(),
                                      q.descriptor(), k.descriptor(), v.descriptor(), out.descriptor(),
                                      lse.descriptor(), float(scale), 1 if causal else 0), "mt_attention_backward")
