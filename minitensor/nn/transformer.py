"""nn.transformer: multi-head attention and the transformer encoder layer, as torch's.

Both are compositions of modules and functions of this package: the
attention is F.scaled_dot_product_attention over heads split from one input
projection, and the layer wraps it and a feed-forward block in residual
connections with layer normalization (before each block with norm_first,
the pre-LN arrangement of GPT-2 and most models since).
"""

from __future__ import annotations

import math
from typing import Any, Optional

from .. import autograd, ops
from .._dtype import bool_, default_dtype, to_dtype
from .._creation import zeros
from ..tensor import Tensor
from . import functional as F
from .modules import Dropout, GELU, LayerNorm, Linear, Module, ReLU, _uniform
from .parameter import Parameter


class _PackedSelfAttention(autograd.Function):
    """Self-attention from the packed in-projection qkv, (N, L, 3 E) with
    batch_first or (L, N, 3 E), whose thirds are q, k and v, heads side by side:
    to the heads' outputs side by side, (N, L, E) or (L, N, E), through a
    one-kernel attention rung. Called as apply(qkv, heads, scale, is_causal,
    rung, batch_first).

    The layout work of MultiheadAttention's self-attention in one node. Forward:
    one copy per third lays q, k and v out as (N * heads, L, d), the rung runs,
    one copy puts the heads side by side again. Backward: the rung's backward,
    dq, dk and dv each copied back to the layout of a third, and one copy
    interleaves the three into qkv's gradient. Every copy writes a dense
    block and reads a view of at most four dims (three, for the last one, once
    its dims are merged): the strided copy's fast rung (src/copy_strided.cu),
    where a five-dim view, or a strided destination, took map_strided at a
    quarter of the memory's speed. Built from narrow views of qkv and per-head
    reshapes instead, the backward gave each view a zero-filled gradient as
    large as qkv and added the three up."""

    @staticmethod
    def _to_heads(batch_first: bool) -> tuple[int, ...]:
        """The permutation of one third, (N, L, h, d) or (L, N, h, d), that gives (N, h, L, d)."""
        return (0, 2, 1, 3) if batch_first else (1, 2, 0, 3)

    @staticmethod
    def forward(ctx, qkv, heads, scale, causal, rung, batch_first):
        n, length = (qkv.shape[0], qkv.shape[1]) if batch_first else (qkv.shape[1], qkv.shape[0])
        e = qkv.shape[2] // 3
        d = e // heads
        third = (qkv.shape[0], qkv.shape[1], heads, d)  # the layout of q, k or v in qkv
        to_heads = _PackedSelfAttention._to_heads(batch_first)
        q, k, v = (ops.reshape(ops.contiguous(ops.permute(ops.reshape(ops.narrow(qkv, 2, i * e, e), third), to_heads)),
                               (n * heads, length, d)) for i in range(3))
        out, lse = ops.attention(q, k, v, scale, causal, rung)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.args = (heads, scale, causal, rung, batch_first, third)
        back = tuple(to_heads.index(i) for i in range(4))  # (N, h, L, d) -> the layout of a third
        side_by_side = ops.contiguous(ops.permute(ops.reshape(out, (n, heads, length, d)), back))
        return ops.reshape(side_by_side, (qkv.shape[0], qkv.shape[1], e))

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, lse = ctx.saved_tensors
        heads, scale, causal, rung, batch_first, third = ctx.args
        n_h, length, d = q.shape
        to_heads = _PackedSelfAttention._to_heads(batch_first)
        back = tuple(to_heads.index(i) for i in range(4))
        g = ops.reshape(ops.contiguous(ops.permute(ops.reshape(grad, third), to_heads)), (n_h, length, d))
        dq, dk, dv = ops.attention_backward(g, q, k, v, out, lse, scale, causal, rung)
        parts = ops.empty((3,) + third, grad.dtype)  # (3, ., ., h, d): dq, dk, dv in a third's layout
        for i, part in enumerate((dq, dk, dv)):
            ops.copy_(ops.index(parts, i), ops.permute(ops.reshape(part, (n_h // heads, heads, length, d)), back))
        dqkv = ops.contiguous(ops.permute(parts, (1, 2, 0, 3, 4)))  # (., ., 3, h, d): q's, k's, v's side by side
        return ops.reshape(dqkv, (third[0], third[1], 3 * heads * d)), None, None, None, None, None


class MultiheadAttention(Module):
    """Attention with num_heads heads of embed_dim / num_heads features each.

    Parameters as torch's: in_proj_weight (3 E, E) and in_proj_bias (3 E,)
    project query, key and value; with kdim or vdim other than embed_dim
    (keys and values of other widths), q_proj_weight (E, E), k_proj_weight
    (E, kdim) and v_proj_weight (E, vdim) replace in_proj_weight (which is
    then None). out_proj (a Linear(E, E)) joins the heads.
    forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False) returns
    (output, weights): inputs (L, N, E), key (S, N, kdim), value (S, N, vdim),
    or batch first with batch_first. As in torch, a bool mask here is True
    where attention is NOT allowed (the opposite of
    F.scaled_dot_product_attention's); a float mask is added. is_causal is
    torch's hint that attn_mask is the causal mask: it needs attn_mask
    (RuntimeError without one, as torch), and where no weights, no padding
    mask and no dropout are asked for, the causal kernel runs in its place.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 batch_first: bool = False, kdim: Optional[int] = None, vdim: Optional[int] = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} must be a positive multiple of "
                             f"num_heads {num_heads}")
        kdim = embed_dim if kdim is None else kdim
        vdim = embed_dim if vdim is None else vdim
        for name, size in (("kdim", kdim), ("vdim", vdim)):
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                raise ValueError(f"MultiheadAttention: {name} must be a positive int, got {size!r}")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim, self.vdim = kdim, vdim
        self._qkv_same_embed_dim = kdim == embed_dim and vdim == embed_dim
        dtype = default_dtype if dtype is None else to_dtype(dtype)
        if self._qkv_same_embed_dim:
            bound = math.sqrt(6.0 / (embed_dim + 3 * embed_dim))  # torch's xavier_uniform_ of (3E, E)
            self.in_proj_weight = _uniform((3 * embed_dim, embed_dim), bound, dtype)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.register_parameter("in_proj_weight", None)
            for name, width in (("q_proj_weight", embed_dim), ("k_proj_weight", kdim), ("v_proj_weight", vdim)):
                setattr(self, name, _uniform((embed_dim, width), math.sqrt(6.0 / (embed_dim + width)), dtype))
        if bias:
            self.in_proj_bias = Parameter(zeros(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if bias:
            with autograd.no_grad():
                self.out_proj.bias.zero_()

    def _check(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        """The shapes torch requires, in (L, N, E) order, each named when wrong."""
        func = "MultiheadAttention"
        for name, t, width in (("query", query, self.embed_dim), ("key", key, self.kdim),
                               ("value", value, self.vdim)):
            if not isinstance(t, Tensor) or t.ndim != 3:
                raise ValueError(f"{func}: {name} must be a 3-D Tensor (length, batch, features), got "
                                 f"{getattr(t, 'shape', type(t).__name__)}")
            if t.shape[-1] != width:
                raise ValueError(f"{func}: {name} has {t.shape[-1]} features, expected {width} "
                                 f"(embed_dim {self.embed_dim}, kdim {self.kdim}, vdim {self.vdim})")
        if key.shape[:2] != value.shape[:2] or key.shape[1] != query.shape[1]:
            raise ValueError(f"{func}: key {key.shape} and value {value.shape} need one length and query "
                             f"{query.shape}'s batch (shapes in (length, batch, features) order)")

    def _check_masks(self, attn_mask: Any, key_padding_mask: Any, length: int, source: int, batch: int) -> None:
        """torch's rules for the masks: bool or float, attn_mask (L, S) or (N * heads, L, S)."""
        for name, m in (("attn_mask", attn_mask), ("key_padding_mask", key_padding_mask)):
            if m is None:
                continue
            if not isinstance(m, Tensor):
                raise TypeError(f"MultiheadAttention: {name} must be a Tensor, got {type(m).__name__}")
            if m.dtype is not bool_ and not m.dtype.is_floating_point:
                raise ops.DTypeError(f"MultiheadAttention: {name} must be a bool or float tensor (as torch), got "
                                     f"{m.dtype.name}")
        shapes = ((length, source), (batch * self.num_heads, length, source))
        if attn_mask is not None and attn_mask.shape not in shapes:
            raise ops.ShapeError(f"MultiheadAttention: attn_mask must have shape {shapes[0]} or {shapes[1]} "
                                 f"(batch * num_heads, L, S), got {attn_mask.shape}")
        if key_padding_mask is not None and key_padding_mask.shape != (batch, source):
            raise ValueError(f"MultiheadAttention: key_padding_mask must have shape ({batch}, {source}), got "
                             f"{key_padding_mask.shape}")

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = True, attn_mask: Optional[Tensor] = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Optional[Tensor]]:
        packed = self.in_proj_weight is not None and query is key and key is value  # self-attention
        rung = self._packed_rung(query, packed, need_weights, key_padding_mask, attn_mask, is_causal)
        if rung is not None:
            batch, length = query.shape[:2] if self.batch_first else query.shape[1::-1]
            self._check_masks(attn_mask, None, length, length, batch)  # the hint's mask, checked as torch does
            qkv = F.linear(query, self.in_proj_weight, self.in_proj_bias)  # in the input's own layout
            d = self.embed_dim // self.num_heads
            heads = _PackedSelfAttention.apply(qkv, self.num_heads, 1.0 / math.sqrt(d), is_causal, rung,
                                               self.batch_first)
            return self.out_proj(heads), None
        if self.batch_first:
            query, key, value = (t.transpose(0, 1) if isinstance(t, Tensor) else t for t in (query, key, value))
        self._check(query, key, value)
        if is_causal and attn_mask is None:
            raise RuntimeError("MultiheadAttention: is_causal=True is a hint that attn_mask is the causal mask, "
                               "and needs attn_mask, as in torch; pass attn_mask=~F.causal_mask(L, S) "
                               "(True where a query must not look)")
        length, batch, e = query.shape
        source = key.shape[0]
        self._check_masks(attn_mask, key_padding_mask, length, source, batch)
        h, d = self.num_heads, e // self.num_heads
        b = self.in_proj_bias
        if packed:
            # One input for all three: one product of 3 E outputs, cut into q, k
            # and v (torch's packed in-projection), where three products of
            # sliced weights took three kernels and six slices forward and back.
            qkv = F.linear(query, self.in_proj_weight, b)
            parts = [qkv.narrow(2, i * e, e) for i in range(3)]
        else:
            if self.in_proj_weight is not None:
                w = self.in_proj_weight
                weights_in = [w[i * e:(i + 1) * e] for i in range(3)]
            else:
                weights_in = [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
            parts = [F.linear(x, weights_in[i], None if b is None else b[i * e:(i + 1) * e])
                     for i, x in enumerate((query, key, value))]
        # (L, N, E) -> (N, heads, L, d): each head attends over its own d features.
        q, k, v = (p.reshape(p.shape[0], batch, h, d).permute(1, 2, 0, 3) for p in parts)
        if not need_weights and key_padding_mask is None and (attn_mask is None or is_causal) and (
                self.dropout == 0.0 or not self.training):
            # No weights to return and no mask, or torch's causal hint: the
            # attention function, without building a mask (as torch, which
            # then trusts the hint and does not read attn_mask).
            heads = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
            out = self.out_proj(heads.permute(2, 0, 1, 3).reshape(length, batch, e))
            return (out.transpose(0, 1) if self.batch_first else out), None
        scores = q @ k.transpose(-2, -1)  # N, h, L, S
        mask = self._mask(attn_mask, key_padding_mask, length, source, batch, scores)
        if mask is not None:  # additive, in the scores' dtype (torch converts a float mask too)
            mask = F.additive_mask(mask, scores.dtype) if mask.dtype is bool_ else mask.to(scores.dtype)
        # The scale, the mask and the softmax in one kernel: the attention ladder's fused rung.
        weights = autograd.MaskedSoftmax.apply(scores, mask, 1.0 / math.sqrt(d), False)
        if self.dropout > 0.0:
            weights = F.dropout(weights, self.dropout, self.training)
        out = (weights @ v).permute(2, 0, 1, 3).reshape(length, batch, e)  # heads side by side again
        out = self.out_proj(out)
        if self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        return out, (weights.mean(1) if average_attn_weights else weights)

    def _packed_rung(self, query: Any, packed: bool, need_weights: bool, key_padding_mask: Any,
                     attn_mask: Any, is_causal: bool) -> Optional[str]:
        """The one-kernel attention rung of the packed self-attention path
        (_PackedSelfAttention), or None where forward takes the general path:
        self-attention with the packed in-projection, no weights to return, no
        padding mask, no mask or torch's causal hint (which needs one: that
        error is the general path's), no dropout in training, a float query of
        at least one element and a head dim that a rung takes (none under the
        teaching policy: the course's rungs run there)."""
        hinted_or_none = attn_mask is not None if is_causal else attn_mask is None
        if not (packed and not need_weights and key_padding_mask is None and hinted_or_none and
                (self.dropout == 0.0 or not self.training)):
            return None
        if not (isinstance(query, Tensor) and query.ndim == 3 and query.numel() > 0
                and query.dtype.is_floating_point and query.shape[-1] == self.embed_dim):
            return None  # the general path checks the shapes and names what is wrong
        d = self.embed_dim // self.num_heads
        # The rung choice takes the length, the scores a matmul rung would
        # store and whether a gradient is wanted, as scaled_dot_product_attention's
        # (at head dim 128, unmasked and long, the matmul rung is the faster one
        # with a gradient: ops.ATTENTION_MATMUL_WITH_GRAD).
        length, batch = (query.shape[1], query.shape[0]) if self.batch_first else (query.shape[0], query.shape[1])
        needs_grad = autograd.is_grad_enabled() and (query.requires_grad or self.in_proj_weight.requires_grad)
        return ops.fused_attention_rung(d, d, length, batch * self.num_heads * length * length, is_causal, needs_grad)

    @staticmethod
    def _mask(attn_mask: Optional[Tensor], key_padding_mask: Optional[Tensor], length: int,
              source: int, batch: int, scores: Tensor) -> Optional[Tensor]:
        """One mask of the scores (N, h, L, S): True (or -inf) where a query must not look."""
        mask = attn_mask
        if key_padding_mask is not None:
            padding = key_padding_mask.reshape(batch, 1, 1, source)
            if mask is None:
                mask = padding
            elif mask.dtype is bool_ and padding.dtype is bool_:
                mask = mask | padding
            else:
                as_float = [m if m.dtype is not bool_ else F.additive_mask(m, scores.dtype) for m in (mask, padding)]
                mask = as_float[0] + as_float[1]
        if mask is not None and mask.ndim == 3:  # (N * h, L, S), as torch accepts
            mask = mask.reshape(batch, -1, length, source)
        return mask

    def extra_repr(self) -> str:
        widths = "" if self._qkv_same_embed_dim else f", kdim={self.kdim}, vdim={self.vdim}"
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}{widths}, batch_first={self.batch_first}"


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block (Linear, activation, Linear), each with
    a residual connection, dropout and layer normalization: after each block by
    default (torch's default), before it with norm_first=True (pre-LN). Arguments
    and parameter names as torch's; activation "relu" or "gelu"."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str = "relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, dtype: Any = None) -> None:
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"TransformerEncoderLayer: activation must be 'relu' or 'gelu', got {activation!r}")
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype)
        self.dropout, self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout), Dropout(dropout)
        self.activation = ReLU() if activation == "relu" else GELU()
        self.norm_first = norm_first

    def forward(self, src: Tensor, src_mask: Optional[Tensor] = None, src_key_padding_mask: Optional[Tensor] = None,
                is_causal: bool = False) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._attend(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return self._feed_forward(self.norm2(x), residual=x)
        x = self.norm1(x + self._attend(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(self._feed_forward(x, residual=x))

    def _attend(self, x: Tensor, mask: Optional[Tensor], padding: Optional[Tensor], is_causal: bool) -> Tensor:
        out, _ = self.self_attn(x, x, x, key_padding_mask=padding, need_weights=False, attn_mask=mask,
                                is_causal=is_causal)
        return self.dropout1(out)

    def _feed_forward(self, x: Tensor, residual: Tensor) -> Tensor:
        """residual + dropout2(linear2(dropout(activation(linear1(x))))). With the
        layer's own ReLU or GELU, linear1 and the activation are one kernel
        (F.linear_act: the activation applied in the product's store), and so are
        linear2 and the residual add when dropout2 does nothing (eval, or p = 0);
        F.linear_act runs the unfused chain under the teaching kernel policy."""
        act = self._fused_activation()
        if act is None:  # an activation module of the user's: the plain chain
            return residual + self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))
        h = self.dropout(F.linear_act(x, self.linear1.weight, self.linear1.bias, act))
        if not self.training or self.dropout2.p == 0.0:
            return F.linear_act(h, self.linear2.weight, self.linear2.bias, residual=residual)
        return residual + self.dropout2(self.linear2(h))

    def _fused_activation(self) -> Optional[str]:
        """F.linear_act's name of self.activation, or None if it is not this layer's
        own ReLU or GELU (a module put in its place)."""
        if type(self.activation) is ReLU:
            return "relu"
        if type(self.activation) is GELU:
            return "gelu_tanh" if self.activation.approximate == "tanh" else "gelu"
        return None
