"""nn.functional: the stateless building blocks that the modules of minitensor.nn use.

Every function here is composed of Tensor methods, so autograd records it
like any other expression, or applies one gradient rule of minitensor.autograd
(softplus, whose rule docs/kernels.md's "Add an op" writes; the activations
gelu, silu, elu, leaky_relu and hardtanh, one kernel each way).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Optional, Sequence

import numpy as np

from .._creation import rand, tensor, zeros
from .._shape import broadcast_shapes
from .._dtype import bool_, int64
from .._errors import DimError, InvalidArgumentError
from .. import autograd, ops
from ..tensor import Tensor
from .functional_conv import (  # noqa: F401 - F.conv2d, ...
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    avg_pool1d,
    avg_pool2d,
    conv1d,
    conv2d,
    max_pool1d,
    max_pool2d,
)
from .functional_norm import batch_norm  # noqa: F401 - F.batch_norm

_REDUCTIONS = ("mean", "sum", "none")


def relu(x: Tensor) -> Tensor:
    """max(x, 0), elementwise."""
    return x.relu()


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent, elementwise."""
    return x.tanh()


def sigmoid(x: Tensor) -> Tensor:
    """1 / (1 + exp(-x)), elementwise."""
    return x.sigmoid()


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(x)), elementwise: a smooth relu whose gradient is sigmoid(x).

    Only torch's defaults are supported (beta 1; above the threshold 20
    torch returns x itself, which log(1 + exp(x)) equals to float precision).
    """
    if beta != 1.0 or threshold != 20.0:
        raise ValueError(
            f"softplus(): only beta=1 and threshold=20 (torch's defaults) are supported, "
            f"got beta={beta!r}, threshold={threshold!r}"
        )
    if not isinstance(x, Tensor):
        raise TypeError(f"softplus(): input must be a Tensor, got {type(x).__name__}")
    return autograd.elementwise.Softplus.apply(x)


def _activation(x: Any, op: str, func: str, inplace: bool, s: float = 0.0, t: float = 0.0) -> Tensor:
    """One activation kernel forward and one backward (autograd.Activation)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{func}: input must be a Tensor, got {type(x).__name__}")
    if inplace:
        raise ValueError(f"{func}: inplace=True is not supported; use the result (inplace=False)")
    ops.require_float(x, func)
    if not (x.requires_grad and autograd.is_grad_enabled()):
        return Tensor._from_array(ops.activation(op, x, s, t))  # no backward: the kernel alone, no node
    return autograd.Activation.apply(x, op, s, t)


def _number(value: Any, name: str, func: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{func}: {name} must be a number, got {type(value).__name__}")
    return float(value)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """The Gaussian error linear unit, x * Phi(x), as torch's: exact,
    x * (1 + erf(x / sqrt(2))) / 2, or with approximate="tanh",
    x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) / 2 (GPT-2's form).
    One kernel forward, one backward (src/activations.h)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu(): approximate must be 'none' or 'tanh', got {approximate!r}")
    return _activation(x, "gelu" if approximate == "none" else "gelu_tanh", "gelu()", False)


def silu(x: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x) (swish), elementwise: one kernel forward, one backward."""
    return _activation(x, "silu", "silu()", inplace)


def elu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1): one kernel forward, one backward."""
    return _activation(x, "elu", "elu()", inplace, _number(alpha, "alpha", "elu()"))


def leaky_relu(x: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x: one kernel forward, one backward."""
    return _activation(x, "leaky_relu", "leaky_relu()", inplace,
                       _number(negative_slope, "negative_slope", "leaky_relu()"))


def hardtanh(x: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """x clamped to [min_val, max_val] (NaN stays NaN); the gradient is 0 where x
    is at or beyond a bound, as torch's. One kernel forward, one backward."""
    lo, hi = _number(min_val, "min_val", "hardtanh()"), _number(max_val, "max_val", "hardtanh()")
    if lo > hi:
        raise ValueError(f"hardtanh(): min_val ({lo}) cannot be greater than max_val ({hi})")
    return _activation(x, "hardtanh", "hardtanh()", inplace, lo, hi)


def softmax(x: Tensor, dim: int) -> Tensor:
    """softmax along dim, numerically stable (dim is required, unlike torch's deprecated default)."""
    return x.softmax(dim)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    """log(softmax(x)) along dim, computed stably in one pass."""
    return x.log_softmax(dim)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """x @ weight.T + bias; weight is (out_features, in_features) as in torch.

    With a bias, under the fast kernel policy, the bias is added in the product's
    store (linear_act, one kernel); under teaching, linear_chain (the course's
    task: a matmul, then a broadcast add)."""
    if bias is not None:
        return linear_act(x, weight, bias)
    return linear_chain(x, weight, bias)


def linear_act(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: str = "none",
               residual: Optional[Tensor] = None) -> Tensor:
    """activation(x @ weight.T + bias) + residual: a Linear, its activation ("none",
    "relu", "gelu" or "gelu_tanh", torch's gelu(approximate="tanh")) and a residual
    add. Under the fast kernel policy one kernel does it all, the bias, activation
    and residual applied as each output of the product is stored
    (src/matmul_epilogue.cu; the TF32 rung's stores under
    mt.backends.cuda.matmul.allow_tf32); under teaching the unfused chain
    linear_chain, the activation, an add."""
    if activation not in ("none", "relu", "gelu", "gelu_tanh"):
        raise ValueError(f"linear_act(): activation must be 'none', 'relu', 'gelu' or 'gelu_tanh', "
                         f"got {activation!r}")
    if not isinstance(x, Tensor) or not isinstance(weight, Tensor):
        raise TypeError(f"linear(): input and weight must be Tensors, got {type(x).__name__} and "
                        f"{type(weight).__name__}")
    if ops.linear_fusable(x.dtype):
        grads = autograd.is_grad_enabled() and (
            x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad))
        return autograd.LinearFused.apply(x, weight, bias, residual, activation, grads)
    out = linear_chain(x, weight, bias)
    if activation == "relu":
        out = relu(out)
    elif activation != "none":
        out = gelu(out, "tanh" if activation == "gelu_tanh" else "none")
    return out if residual is None else out + residual


def linear_chain(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """x @ weight.T + bias as two ops, a matmul then a broadcast add: the course's
    task, and what linear runs under the teaching kernel policy."""
    # TASK(layers_optim) BEGIN
    out = x.matmul(weight.t())  # ..., out_features
    return out if bias is None else out + bias
    # TASK(layers_optim) STUB
    #| # TODO (task layers_optim): x @ weight.T (Tensor.matmul, Tensor.t), plus bias
    #| # when there is one (it broadcasts over the leading dims).
    #| raise NotImplementedError("task layers_optim is not done: linear_chain in minitensor/nn/functional.py")
    # TASK(layers_optim) END


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zeroes each element with probability p and scales the others by 1/(1-p).

    The mask is drawn by the package's generator (``minitensor.rand``, seeded
    by ``minitensor.manual_seed``), so a seed repeats it on every backend.
    With training=False, or p=0, x is returned as it is.
    """
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"dropout(): p must be a number, got {type(p).__name__}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout(): p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = (rand(x.shape, dtype=x.dtype) >= p).to(x.dtype)  # 1 with probability 1-p, else 0
    return x * (keep * (1.0 / (1.0 - p)))


def layer_norm(x: Tensor, normalized_shape: Sequence[int], weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """Normalizes over the last len(normalized_shape) dims (biased variance, as torch),
    then scales by weight and shifts by bias when given: one kernel forward and one
    backward (src/layernorm.cu); layer_norm_composite is the same as a chain of ops."""
    normalized_shape = tuple(normalized_shape)
    if len(normalized_shape) > x.ndim or x.shape[x.ndim - len(normalized_shape):] != normalized_shape:
        raise ValueError(
            f"layer_norm(): the last dims of the input of shape {x.shape} must be the "
            f"normalized shape {normalized_shape}"
        )
    return autograd.LayerNorm.apply(x, normalized_shape, weight, bias, eps)


def layer_norm_composite(x: Tensor, normalized_shape: Sequence[int], weight: Optional[Tensor] = None,
                         bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """layer_norm as a chain of eight ops (mean, subtract, square, mean, add, sqrt,
    divide, scale and shift): the rung below the fused kernel, for comparison
    (bench/run.py) and as the reference of its tests."""
    dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    centered = x - x.mean(dims, keepdim=True)
    variance = (centered * centered).mean(dims, keepdim=True)
    out = centered / (variance + eps).sqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def _class_indices(targets: Any, count: int, classes: int, like: Tensor, func: str) -> Tensor:
    """targets (an int64 Tensor, a NumPy integer array or a list; or, a documented
    difference from torch, a float Tensor of whole numbers) as a (count,) int64
    tensor, or one of like's dtype; host-side values are range-checked here."""
    if isinstance(targets, Tensor):
        if targets.dtype is bool_:
            raise TypeError(f"{func}: targets must be class indices (int64), got a bool tensor")
        index = targets.detach() if targets.dtype is int64 else targets.detach().to(like.dtype)
    else:
        array = np.asarray(targets)
        if array.dtype.kind not in "iu":
            raise TypeError(
                f"{func}: targets must be class indices: a Tensor of whole numbers, a NumPy "
                f"integer array or a list of ints (got an array of {array.dtype})"
            )
        if array.size and (array.min() < 0 or array.max() >= classes):
            bad = array[(array < 0) | (array >= classes)].reshape(-1)[0]
            raise IndexError(f"{func}: target {bad} is out of range for {classes} classes")
        index = tensor(array, dtype=int64)
    if index.shape != (count,):
        raise ValueError(
            f"{func}: targets of shape {index.shape} do not match the batch of {count} "
            f"(expected shape ({count},))"
        )
    return index


def cross_entropy(logits: Tensor, targets: Any, reduction: str = "mean", weight: Optional[Tensor] = None,
                  ignore_index: int = -100, label_smoothing: float = 0.0) -> Tensor:
    """The negative log-likelihood of the target classes under softmax(logits), as
    torch's F.cross_entropy with class indices.

    logits: (N, C) unnormalized scores, or (N, C, d1, ...) with the classes
    along dim 1. targets: class indices in [0, C) of shape (N,) (or (N, d1,
    ...)), given as an int64 Tensor, a NumPy integer array or a list.
    reduction: "mean" (the default), "sum" or "none" (targets' shape).
    weight: a (C,) tensor of class weights (the mean divides by the sum of
    the targets' weights, as torch). ignore_index: targets of this value add
    nothing and are not counted (torch's default -100). label_smoothing in
    [0, 1]: the target is mixed with the uniform distribution, as torch.
    Computed from log_softmax(logits), which is stable for large logits; with
    the defaults and no ignored target, one fused kernel (fast policy) or the
    course's chain (teaching policy).
    """
    func = "cross_entropy()"
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{func}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if not isinstance(logits, Tensor):
        raise TypeError(f"{func}: logits must be a Tensor, got {type(logits).__name__}")
    if logits.ndim < 2:
        raise ValueError(f"{func}: logits must have shape (N, C) or (N, C, d1, ...), got {logits.shape}")
    if weight is not None and (not isinstance(weight, Tensor) or weight.shape != (logits.shape[1],)
                               or weight.dtype is not logits.dtype):
        raise ValueError(f"{func}: weight must be a {logits.dtype.name} Tensor of shape ({logits.shape[1]},), "
                         f"one weight per class; got "
                         f"{weight.shape if isinstance(weight, Tensor) else type(weight).__name__}")
    if not isinstance(ignore_index, (int, np.integer)) or isinstance(ignore_index, bool):
        raise TypeError(f"{func}: ignore_index must be an int, got {type(ignore_index).__name__}")
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(f"{func}: label_smoothing must be in [0, 1], got {label_smoothing!r}")
    batch_shape = (logits.shape[0],) + logits.shape[2:]
    if logits.ndim > 2:  # the classes last, then one row per position
        logits = logits.permute(0, *range(2, logits.ndim), 1).reshape(-1, logits.shape[1])
        if isinstance(targets, Tensor):
            if targets.shape != batch_shape:
                raise ValueError(f"{func}: targets of shape {targets.shape} do not match logits' "
                                 f"(N, d1, ...) = {batch_shape}")
            targets = targets.reshape(-1)
        else:
            array = np.asarray(targets)
            if array.shape != batch_shape:
                raise ValueError(f"{func}: targets of shape {array.shape} do not match logits' "
                                 f"(N, d1, ...) = {batch_shape}")
            targets = array.reshape(-1)
    n, classes = logits.shape
    if weight is None and float(label_smoothing) == 0.0:
        plain = True
        if not isinstance(targets, Tensor):
            array = np.asarray(targets)
            plain = not (array.dtype.kind in "iu" and (array == ignore_index).any())
        if plain:
            try:
                index = _class_indices(targets, n, classes, logits, func)
                if ops.fast_kernels():
                    # Targets from the host were range-checked there; a Tensor's are checked on the device.
                    loss = autograd.CrossEntropy.apply(logits, index, reduction, not isinstance(targets, Tensor))
                else:
                    loss = cross_entropy_chain(logits, index, reduction)
                return loss.reshape(*batch_shape) if reduction == "none" else loss
            except (InvalidArgumentError, DimError):
                # A Tensor's target out of range: the general path below if it is
                # ignore_index (read back: this is the error path), else the error.
                if not isinstance(targets, Tensor) or not (targets.detach().numpy() == ignore_index).any():
                    raise
    loss = _cross_entropy_general(logits, targets, reduction, weight, int(ignore_index), float(label_smoothing),
                                  func)
    return loss.reshape(*batch_shape) if reduction == "none" else loss


def _cross_entropy_general(logits: Tensor, targets: Any, reduction: str, weight: Optional[Tensor],
                           ignore_index: int, label_smoothing: float, func: str) -> Tensor:
    """cross_entropy with class weights, ignored targets or label smoothing,
    as torch's formulas, from log_softmax (targets read on the host)."""
    n, classes = logits.shape
    if isinstance(targets, Tensor):
        if targets.dtype is bool_:
            raise TypeError(f"{func}: targets must be class indices (int64), got a bool tensor")
        array = targets.detach().numpy()
        if array.dtype.kind == "f":
            if not (np.isfinite(array).all() and (array == np.round(array)).all()):
                raise TypeError(f"{func}: float targets must hold whole numbers (class indices)")
            array = array.astype(np.int64)
    else:
        array = np.asarray(targets)
        if array.dtype.kind not in "iu":
            raise TypeError(f"{func}: targets must be class indices: a Tensor of whole numbers, a NumPy "
                            f"integer array or a list of ints (got an array of {array.dtype})")
    if array.shape != (n,):
        raise ValueError(f"{func}: targets of shape {array.shape} do not match the batch of {n} "
                         f"(expected shape ({n},))")
    keep = array != ignore_index
    bad = keep & ((array < 0) | (array >= classes))
    if bad.any():
        raise IndexError(f"{func}: target {array[bad][0]} is out of range for {classes} classes "
                         f"(and is not ignore_index {ignore_index})")
    index = tensor(np.where(keep, array, 0).astype(np.int64))
    ignored = tensor(~keep)
    logp = logits.log_softmax(1)
    picked = -logp.gather(1, index.unsqueeze(1)).squeeze(1)
    kept = tensor(keep.astype(logits.dtype.np_dtype))
    row_weight = kept if weight is None else weight.gather(0, index) * kept  # 0 where ignored
    nll = picked.masked_fill(ignored, 0.0) * row_weight
    if reduction == "none":
        loss = nll
    elif reduction == "sum":
        loss = nll.sum()
    else:
        loss = nll.sum() / row_weight.sum()  # 0 / 0 = NaN when every target is ignored, as torch
    if label_smoothing == 0.0:
        return loss
    # torch's smoothing term: -sum over the classes of (weighted) log-probabilities.
    smooth = -(logp if weight is None else logp * weight).sum(1)
    smooth = smooth.masked_fill(ignored, 0.0)
    if reduction == "sum":
        smooth = smooth.sum()
    elif reduction == "mean":
        smooth = smooth.sum() / row_weight.sum()
    return (1.0 - label_smoothing) * loss + smooth * (label_smoothing / classes)


def cross_entropy_chain(logits: Tensor, index: Tensor, reduction: str = "mean") -> Tensor:
    """cross_entropy as a chain of ops (log_softmax, gather, a reduction): the
    course's task, and what cross_entropy runs under the teaching kernel policy;
    under the fast one it is a kernel forward and one backward. index: (N,)
    class indices in logits' dtype, checked by cross_entropy."""
    # TASK(layers_optim) BEGIN
    picked = logits.log_softmax(1).gather(1, index.unsqueeze(1))  # N, 1
    if reduction == "mean":
        return -picked.mean()
    if reduction == "sum":
        return -picked.sum()
    return -picked.squeeze(1)
    # TASK(layers_optim) STUB
    #| # TODO (task layers_optim): the log-probability of each row's target class
    #| # (log_softmax along dim 1, then gather with index.unsqueeze(1): N, 1),
    #| # negated, then reduced as reduction says ("mean", "sum" or "none": N).
    #| raise NotImplementedError("task layers_optim is not done: cross_entropy_chain in minitensor/nn/functional.py")
    # TASK(layers_optim) END


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    """The mean (or sum, or elementwise) squared difference of input and target."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"mse_loss(): reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if isinstance(target, Tensor) and target.shape != input.shape:
        warnings.warn(
            f"mse_loss(): input of shape {input.shape} and target of shape {target.shape} "
            f"differ and will be broadcast, which is rarely intended",
            stacklevel=2,
        )
    diff = input - target
    squared = diff * diff
    if reduction == "mean":
        return squared.mean()
    if reduction == "sum":
        return squared.sum()
    return squared


def embedding(indices: Any, weight: Tensor, padding_idx: Optional[int] = None) -> Tensor:
    """Rows of weight (num_embeddings, dim) picked by indices of any shape: the result
    has shape indices.shape + (dim,). The backward adds into the picked rows
    (scatter_add), so repeated indices accumulate; as torch, nothing goes to
    row padding_idx (negative counts from the end)."""
    if not isinstance(weight, Tensor) or weight.ndim != 2:
        raise ValueError(
            f"embedding(): weight must be a 2-D Tensor (num_embeddings, embedding_dim), got "
            f"{weight.shape if isinstance(weight, Tensor) else type(weight).__name__}"
        )
    if isinstance(indices, Tensor):
        if indices.dtype is bool_:
            raise TypeError("embedding(): indices must be int64, got a bool tensor")
        index = indices.detach()
    else:
        array = np.asarray(indices)
        if array.dtype.kind not in "iu":
            raise TypeError(f"embedding(): indices must be whole numbers, got an array of {array.dtype}")
        index = tensor(array, dtype=int64)
    dim = weight.shape[1]
    padding_idx = _padding_idx(padding_idx, weight.shape[0], "embedding()")
    rows = index.reshape(-1, 1).expand(-1, dim)  # n, dim (stride 0 along dim)
    out = weight.gather(0, rows).reshape(*index.shape, dim)
    if padding_idx is not None and out.requires_grad:
        # The same values; the gradient of the padding positions goes to the
        # detached copy, so none reaches weight[padding_idx].
        padding = (index == padding_idx).reshape(*index.shape, 1)
        out = autograd.Where.apply(padding, out.detach(), out)
    return out


def _padding_idx(padding_idx: Any, num_embeddings: int, func: str) -> Optional[int]:
    """padding_idx in [0, num_embeddings), from one in [-num_embeddings, num_embeddings) as torch."""
    if padding_idx is None:
        return None
    if not isinstance(padding_idx, (int, np.integer)) or isinstance(padding_idx, bool):
        raise TypeError(f"{func}: padding_idx must be an int or None, got {type(padding_idx).__name__}")
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"{func}: padding_idx {padding_idx} must be within num_embeddings "
                         f"(in [-{num_embeddings}, {num_embeddings}))")
    return int(padding_idx) % num_embeddings


# ---- convolution and pooling: in nn/functional_conv.py, re-exported above ----


# ---- attention ------------------------------------------------------------------------------


def causal_mask(length: int, source_length: Optional[int] = None) -> Tensor:
    """A (length, source_length) bool mask, True on and below the diagonal: the
    positions a query may attend to when it must not see the future (the
    complement of ops.causal_future, which the attention code masks with)."""
    source_length = length if source_length is None else source_length
    return ~Tensor._from_array(ops.causal_future(length, source_length))


def additive_mask(hidden: Tensor, dtype: Any) -> Tensor:
    """A bool mask (True: the key is hidden) as the float mask the scores add:
    0 where a key takes part, -inf where it is hidden."""
    return zeros(hidden.shape, dtype=dtype).masked_fill(hidden, float("-inf"))


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: Optional[float] = None) -> Tensor:
    """softmax(query @ key^T * scale + mask) @ value, as torch's: query (..., L, E),
    key (..., S, E), value (..., S, Ev) -> (..., L, Ev); scale 1/sqrt(E) by default.

    attn_mask: a bool tensor (True: the key takes part) or a float tensor added
    to the scores, broadcast to (..., L, S); is_causal masks every key after its
    query. The attention ladder's second rung: a matmul, then the scale, the
    mask and the softmax in one kernel (autograd.MaskedSoftmax, which reads the
    (L, S) scores once), then a matmul. On the H100 it is as fast as the naive
    rung without a mask, 2.3-7x faster with the causal one, and forward +
    backward faster than the one-kernel flash rung at length 1024 and more
    (``mt.kernels.attention(..., algo="naive" | "flash")``), which is why it
    is the one used here without a mask when the warp rung does not fit;
    docs/performance.md has all three against torch. Under the fast kernel
    policy, with no attn_mask, no dropout and head dims 32, 64 or 128 (query's
    and value's alike), a one-kernel rung runs instead, the faster for the
    head dim (ops.fused_attention_rung): the tiled rung (src/attention_tiled.cu:
    a matmul's block tiling, a two-kernel deterministic backward) or the warp
    rung (src/attention_warp.cu: register tiles, one fused backward kernel).
    """
    func = "scaled_dot_product_attention()"
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor) or t.ndim < 2:
            raise ops.ShapeError(f"{func}: {name} must be a Tensor of at least 2 dims (..., length, features)")
    if not query.dtype.is_floating_point or query.dtype is not key.dtype or query.dtype is not value.dtype:
        raise ops.DTypeError(f"{func}: query, key and value must be float tensors of one dtype (as torch), got "
                             f"{query.dtype.name}, {key.dtype.name} and {value.dtype.name}")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ops.ShapeError(f"{func}: query {query.shape}, key {key.shape} and value {value.shape} do not agree: "
                             f"query and key need the same last dim, key and value the same length")
    if not query.shape[:-2] == key.shape[:-2] == value.shape[:-2]:  # batch, heads (equal: the common case, no call)
        broadcast_shapes(broadcast_shapes(query.shape[:-2], key.shape[:-2], func), value.shape[:-2], func)
    if is_causal and attn_mask is not None:
        # torch raises a RuntimeError; InvalidArgumentError is one, and a ValueError.
        raise InvalidArgumentError(f"{func}: give attn_mask or is_causal, not both (as torch)")
    # A head dim of 0: every score is an empty sum, 0, whatever the scale (torch
    # scales query and key, not the scores), so 1/sqrt(0) is never taken.
    scale = 1.0 if query.shape[-1] == 0 else 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    rung = _fused_rung(query, key, value, is_causal)
    if attn_mask is None and dropout_p == 0.0 and rung is not None:
        return _fused_attention(query, key, value, scale, is_causal, rung, func)
    scores = query @ key.transpose(-2, -1)
    if attn_mask is not None:
        if not isinstance(attn_mask, Tensor):
            raise TypeError(f"{func}: attn_mask must be a Tensor, got {type(attn_mask).__name__}")
        if attn_mask.dtype is bool_:  # True takes part: 0 added; False hidden: -inf
            attn_mask = additive_mask(~attn_mask, scores.dtype)
        elif attn_mask.dtype is not scores.dtype:
            raise ops.DTypeError(f"{func}: a float attn_mask must have the scores' dtype {scores.dtype.name}, "
                                 f"got {attn_mask.dtype.name}")
        if broadcast_shapes(attn_mask.shape, scores.shape, func) != scores.shape:
            raise ops.ShapeError(f"{func}: attn_mask of shape {attn_mask.shape} does not broadcast to the "
                                 f"scores' shape {scores.shape} (..., L, S)")
    weights = autograd.MaskedSoftmax.apply(scores, attn_mask, scale, is_causal)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return weights @ value


def _fused_rung(query: Tensor, key: Tensor, value: Tensor, is_causal: bool = False) -> Optional[str]:
    """The one-kernel rung scaled_dot_product_attention runs (src/attention_tiled.cu
    or src/attention_warp.cu, no score stored), or None: under the fast kernel
    policy only (the teaching policy keeps the course's rung), for one float
    dtype, query's and value's head dims alike and one the rungs take
    (ops.fused_attention_rung), and at least one query, key and batch element;
    else, or where the matmul rung is the faster when a gradient is wanted (a
    pass per measurement: ops.ATTENTION_MATMUL_WITH_GRAD), the matmul, masked
    softmax, matmul rung."""
    if not (query.dtype is key.dtype is value.dtype and query.dtype.is_floating_point
            and query.numel() > 0 and key.numel() > 0 and value.numel() > 0):
        return None
    needs_grad = autograd.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad)
    # The scores count only where a gradient is wanted (host time before the
    # kernel's launch is GPU time at length 256).
    scores = math.prod(broadcast_shapes(query.shape[:-1], key.shape[:-2] + (1,), "scaled_dot_product_attention()")) \
        * key.shape[-2] if needs_grad else 0
    return ops.fused_attention_rung(query.shape[-1], value.shape[-1], query.shape[-2], scores, is_causal,
                                    needs_grad)


def _fused_attention(query: Tensor, key: Tensor, value: Tensor, scale: float, is_causal: bool, rung: str,
                     func: str) -> Tensor:
    """A one-kernel rung over the batch dims: query, key and value as they come
    when their leading dims agree (the rung merges them by views: one node of
    the graph, and no Python op a reshape, which at length 256 cost as much
    as a tenth of the kernel), else expanded to the broadcast batch dims."""
    if query.shape[:-2] == key.shape[:-2] == value.shape[:-2]:
        return autograd.Attention.apply(query, key, value, scale, is_causal, rung)
    batch = broadcast_shapes(broadcast_shapes(query.shape[:-2], key.shape[:-2], func), value.shape[:-2], func)
    q, k, v = (t.expand(*batch, *t.shape[-2:]) for t in (query, key, value))
    return autograd.Attention.apply(q, k, v, scale, is_causal, rung)

