"""Hostile arguments at the entry points of the last round: integer and bool
tensors in float-only ops, index keys of every kind, convolution, pooling,
attention, cross-entropy and embedding. Each call must raise a clean
exception (a minitensor error, TypeError, ValueError or IndexError) whose
message names the offending argument, and a refused write must leave its
target untouched. In process and small: the whole file runs in seconds."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import nn

X4 = lambda: mt.randn(2, 4, 5, 5)  # noqa: E731  N, C, H, W
W4 = lambda: mt.randn(6, 4, 3, 3)  # noqa: E731  C_out, C, KH, KW
QKV = lambda *s: mt.randn(*s)  # noqa: E731

CASES = [
    # integer and bool tensors where only floats go (DTypeError, a TypeError, as torch's refusals)
    ("int matmul", lambda: mt.ones(2, 2, dtype=mt.int64) @ mt.ones(2, 2, dtype=mt.int64), mt.DTypeError, "int64"),
    ("int softmax", lambda: mt.ones(3, dtype=mt.int64).softmax(0), mt.DTypeError, "int64"),
    ("int layer_norm", lambda: F.layer_norm(mt.ones(2, 3, dtype=mt.int64), (3,)), mt.DTypeError, "int64"),
    ("int logsumexp", lambda: mt.tensor([1, 2]).logsumexp(0), mt.DTypeError, "int64"),
    ("bool neg", lambda: -mt.tensor([True]), mt.DTypeError, "bool"),
    ("bool sub", lambda: mt.tensor([True]) - mt.tensor([False]), mt.DTypeError, "bool"),
    ("bool relu", lambda: F.relu(mt.tensor([True, False])), mt.DTypeError, "bool"),
    ("int requires_grad", lambda: mt.tensor([1, 2], requires_grad=True), RuntimeError, "floating point"),
    ("int // 0", lambda: mt.tensor([1]) // mt.tensor([0]), ZeroDivisionError, "division by zero"),
    # convolution
    ("conv stride 0", lambda: F.conv2d(X4(), W4(), stride=0), ValueError, "stride"),
    ("conv negative padding", lambda: F.conv2d(X4(), W4(), padding=-1), ValueError, "padding"),
    ("conv dilation 0", lambda: F.conv2d(X4(), W4(), dilation=0), ValueError, "dilation"),
    ("conv groups 0", lambda: F.conv2d(X4(), W4(), groups=0), ValueError, "groups"),
    ("conv groups not dividing", lambda: F.conv2d(X4(), mt.randn(6, 2, 3, 3), groups=3), mt.ShapeError, "groups"),
    ("conv kernel past the input", lambda: F.conv2d(X4(), mt.randn(6, 4, 7, 7)), mt.ShapeError, "no window"),
    ("conv 3-D input", lambda: F.conv2d(mt.randn(4, 5, 5), W4()), mt.ShapeError, r"\(N, C, H, W\)"),
    ("conv channels", lambda: F.conv2d(X4(), mt.randn(6, 3, 3, 3)), mt.ShapeError, "C / groups"),
    ("conv bias", lambda: F.conv2d(X4(), W4(), bias=mt.randn(5)), mt.ShapeError, "bias"),
    ("conv huge stride", lambda: F.conv2d(X4(), W4(), stride=2**63), (ValueError, mt.ShapeError), "stride"),
    ("conv float stride", lambda: F.conv2d(X4(), W4(), stride=1.5), ValueError, "stride"),
    ("conv int input", lambda: F.conv2d(mt.ones(1, 1, 3, 3, dtype=mt.int64), mt.ones(1, 1, 2, 2)),
     mt.DTypeError, "int64"),
    ("conv1d kernel past the input", lambda: F.conv1d(mt.randn(2, 3, 4), mt.randn(2, 3, 5)), mt.ShapeError,
     "no window"),
    # pooling
    ("max_pool kernel 0", lambda: F.max_pool2d(X4(), 0), ValueError, "kernel_size"),
    ("max_pool stride 0", lambda: F.max_pool2d(X4(), 2, stride=0), ValueError, "stride"),
    ("max_pool padding over half", lambda: F.max_pool2d(X4(), 2, padding=2), ValueError, "half"),
    ("max_pool kernel past the input", lambda: F.max_pool2d(X4(), 7), mt.ShapeError, "smaller than the kernel"),
    ("max_pool 2-D input", lambda: F.max_pool2d(mt.randn(4, 4), 2), mt.ShapeError, r"\(N, C, H, W\)"),
    ("max_pool bool", lambda: F.max_pool2d(mt.ones(1, 1, 4, 4, dtype=mt.bool), 2), mt.DTypeError, "bool"),
    ("avg_pool negative padding", lambda: F.avg_pool2d(X4(), 2, padding=-1), ValueError, "padding"),
    ("avg_pool divisor 0", lambda: F.avg_pool2d(X4(), 2, divisor_override=0), ValueError, "divisor_override"),
    ("avg_pool int", lambda: F.avg_pool2d(mt.ones(1, 1, 4, 4, dtype=mt.int64), 2), mt.DTypeError, "int64"),
    # attention
    ("sdpa heads", lambda: F.scaled_dot_product_attention(QKV(2, 3, 4, 8), QKV(2, 2, 4, 8), QKV(2, 2, 4, 8)),
     mt.ShapeError, "scaled_dot_product_attention"),
    ("sdpa dims", lambda: F.scaled_dot_product_attention(QKV(1, 3, 4), QKV(1, 5, 6), QKV(1, 5, 4)),
     mt.ShapeError, "do not agree"),
    ("sdpa mask shape", lambda: F.scaled_dot_product_attention(QKV(1, 3, 4), QKV(1, 5, 4), QKV(1, 5, 4),
                                                               attn_mask=mt.ones(3, 4, dtype=mt.bool)),
     mt.ShapeError, "scaled_dot_product_attention"),
    ("sdpa int mask", lambda: F.scaled_dot_product_attention(QKV(1, 3, 4), QKV(1, 5, 4), QKV(1, 5, 4),
                                                             attn_mask=mt.ones(3, 5, dtype=mt.int64)),
     mt.DTypeError, "attn_mask"),
    ("sdpa int query", lambda: F.scaled_dot_product_attention(mt.ones(1, 3, 4, dtype=mt.int64), QKV(1, 5, 4),
                                                              QKV(1, 5, 4)), mt.DTypeError, "int64"),
    ("sdpa mixed dtypes", lambda: F.scaled_dot_product_attention(QKV(1, 3, 4), QKV(1, 5, 4).double(), QKV(1, 5, 4)),
     mt.DTypeError, "float64"),
    ("sdpa mask and is_causal", lambda: F.scaled_dot_product_attention(
        QKV(1, 3, 4), QKV(1, 3, 4), QKV(1, 3, 4), attn_mask=F.causal_mask(3), is_causal=True), RuntimeError,
     "not both"),
    ("sdpa list mask", lambda: F.scaled_dot_product_attention(QKV(1, 3, 4), QKV(1, 5, 4), QKV(1, 5, 4),
                                                              attn_mask=[[True]]), TypeError, "Tensor"),
    ("mha heads", lambda: nn.MultiheadAttention(10, 3), ValueError, "multiple"),
    ("mha key width", lambda: nn.MultiheadAttention(8, 2)(QKV(3, 1, 8), QKV(4, 1, 6), QKV(4, 1, 8)),
     ValueError, "key has 6 features"),
    ("mha kdim", lambda: nn.MultiheadAttention(8, 2, kdim=-1), ValueError, "kdim"),
    ("mha batch", lambda: nn.MultiheadAttention(8, 2)(QKV(3, 2, 8), QKV(4, 1, 8), QKV(4, 1, 8)), ValueError,
     "batch"),
    ("mha mask shape", lambda: nn.MultiheadAttention(8, 2)(QKV(3, 1, 8), QKV(4, 1, 8), QKV(4, 1, 8),
                                                           attn_mask=mt.ones(3, 3, dtype=mt.bool)),
     mt.ShapeError, "attn_mask must have shape"),
    ("mha int mask", lambda: nn.MultiheadAttention(8, 2)(QKV(3, 1, 8), QKV(4, 1, 8), QKV(4, 1, 8),
                                                         attn_mask=mt.ones(3, 4, dtype=mt.int64)),
     mt.DTypeError, "bool or float"),
    ("mha padding shape", lambda: nn.MultiheadAttention(8, 2)(QKV(3, 1, 8), QKV(4, 1, 8), QKV(4, 1, 8),
                                                              key_padding_mask=mt.ones(1, 3, dtype=mt.bool)),
     ValueError, "key_padding_mask"),
    ("mha is_causal alone", lambda: nn.MultiheadAttention(8, 2)(QKV(3, 1, 8), QKV(3, 1, 8), QKV(3, 1, 8),
                                                                is_causal=True), RuntimeError, "needs attn_mask"),
    # cross-entropy
    ("ce target past the classes", lambda: F.cross_entropy(mt.randn(3, 4), mt.tensor([0, 4, 1])),
     mt.InvalidArgumentError, "index 4 out of range"),
    ("ce negative target", lambda: F.cross_entropy(mt.randn(3, 4), mt.tensor([0, -1, 1])),
     mt.InvalidArgumentError, "index -1 out of range"),
    ("ce huge target", lambda: F.cross_entropy(mt.randn(3, 4), mt.tensor([0, 2**62, 1])),
     mt.InvalidArgumentError, "out of range"),
    ("ce fractional target", lambda: F.cross_entropy(mt.randn(3, 4), mt.tensor([0.5, 1.0, 1.0])),
     mt.InvalidArgumentError, "whole number"),
    ("ce bool target", lambda: F.cross_entropy(mt.randn(3, 4), mt.tensor([True, False, True])), TypeError,
     "int64"),
    ("ce int logits", lambda: F.cross_entropy(mt.ones(3, 4, dtype=mt.int64), mt.tensor([0, 1, 1])),
     mt.DTypeError, "int64"),
    ("ce batch", lambda: F.cross_entropy(mt.randn(3, 4), mt.tensor([0, 1])), ValueError, "batch"),
    # embedding
    ("embedding past the table", lambda: F.embedding(mt.tensor([0, 5]), mt.randn(5, 3)), mt.InvalidArgumentError,
     "index 5 out of range"),
    ("embedding negative", lambda: F.embedding(mt.tensor([0, -1]), mt.randn(5, 3)), mt.InvalidArgumentError,
     "index -1 out of range"),
    ("embedding bool", lambda: F.embedding(mt.tensor([True]), mt.randn(5, 3)), TypeError, "int64"),
    ("embedding padding_idx", lambda: F.embedding(mt.tensor([0]), mt.randn(5, 3), padding_idx=7), ValueError,
     "padding_idx"),
    ("Embedding module", lambda: nn.Embedding(4, 2)(mt.tensor([4])), mt.InvalidArgumentError, "out of range"),
]


@pytest.mark.parametrize("name,call,error,match", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_call_raises_a_clean_error(name, call, error, match) -> None:
    with pytest.raises(error, match=match):
        call()


# Index keys: reads and writes refuse them alike, and a refused write leaves x as it was.
BAD_KEYS = [
    ("mask of the wrong shape", mt.ones(4, dtype=mt.bool), "mask's shape"),
    ("mask of the wrong shape, second dim", (slice(None), np.ones(3, dtype=bool)), "mask's shape"),
    ("0-d mask", np.array(True), "0-d boolean"),
    ("float tensor", mt.tensor([0.0]), "int64 or bool"),
    ("float list", [0.5], "integer"),
    ("string list", ["a"], "integer"),
    ("ragged list", [[0], [1, 2]], "rectangular"),
    ("list of tensors", [mt.tensor(0)], "tuple"),
    ("out of range", [3], "index 3 is out of bounds for dimension 0 with size 3"),
    ("out of range, second array", ([0, 1], [0, 9]), "index 9 is out of bounds for dimension 1"),
    ("out of range, int64 tensor", (mt.tensor([0, -4]),), "index -4 is out of bounds"),
    ("int64 max", [2**63 - 1], "out of bounds"),
    ("int64 min", [-2**63], "out of bounds"),
    ("uint64 past int64", np.array([2**64 - 1], dtype=np.uint64), "does not fit in an int64"),
    ("arrays that do not broadcast", ([0, 1], [0, 1, 2]), "could not be broadcast"),
    ("too many indices", ([0], [0], [0]), "too many indices"),
    ("two ellipses", (Ellipsis, [0], Ellipsis), "single ellipsis"),
    ("a string beside an array", ([0], "a"), "invalid index"),
    ("True beside an array", ([0], True), "invalid index"),
    ("an int out of range beside an array", (5, [0]), "out of bounds"),
]


@pytest.mark.parametrize("name,key,match", BAD_KEYS, ids=[c[0] for c in BAD_KEYS])
def test_a_hostile_index_key_is_refused_and_writes_nothing(name, key, match) -> None:
    x = mt.arange(12.0).reshape(3, 4)
    with pytest.raises(IndexError, match=match):
        x[key]
    with pytest.raises(IndexError, match=match):
        x[key] = -1.0
    np.testing.assert_array_equal(x.numpy(), np.arange(12.0).reshape(3, 4))


@pytest.mark.parametrize("key,value,error,match", [
    (([0, 1], [0, 0]), "x", TypeError, "tensor or a number"),
    (([0, 1], [0, 0]), np.ones(2), TypeError, "tensor or a number"),
    (([0, 1], [0, 0]), mt.ones(3), mt.ShapeError, "expand"),
    (([0, 1, 0], [2, 3, 2]), 1.0, IndexError, "repeated indices"),
    ((0, slice(None, None, -1)), mt.ones(5), mt.ShapeError, "expand"),
    (([0], slice(None, None, 0)), 1.0, ValueError, "step"),
    ((0, slice(None, None, -2**63)), 1.0, ValueError, "int64"),
])
def test_a_hostile_write_through_index_arrays_leaves_the_tensor_untouched(key, value, error, match) -> None:
    x = mt.arange(12.0).reshape(3, 4)
    with pytest.raises(error, match=match):
        x[key] = value
    np.testing.assert_array_equal(x.numpy(), np.arange(12.0).reshape(3, 4))


def test_a_write_into_a_view_that_cannot_be_written_is_refused_first() -> None:
    x = mt.ones(1, 4).expand(3, 4)  # stride 0: one element seen three times
    with pytest.raises(mt.MinitensorError, match="write"):
        x[[0, 1], [0, 1]] = 5.0
    with pytest.raises(mt.MinitensorError, match="write"):
        x[0, ::-1] = 5.0
    np.testing.assert_array_equal(x.numpy(), np.ones((3, 4)))


@pytest.mark.parametrize("make,op,error,match", [
    (lambda: mt.tensor([1, 2, 3]), lambda x: x.add_(1.5), mt.DTypeError, "can't be cast"),
    (lambda: mt.tensor([1, 2, 3]), lambda x: x.mul_(mt.tensor([0.5, 0.5, 0.5])), mt.DTypeError, "can't be cast"),
    (lambda: mt.tensor([1, 2, 3]), lambda x: x.div_(2), mt.DTypeError, "can't be cast"),
    (lambda: mt.tensor([True, False]), lambda x: x.add_(1), mt.DTypeError, "can't be cast"),
    (lambda: mt.tensor([True, False]), lambda x: x.sub_(True), mt.DTypeError, "bool"),
    (lambda: mt.tensor([1.0, 2.0, 3.0]), lambda x: x.scatter_add_(0, mt.tensor([0, 5]), mt.ones(2)),
     mt.InvalidArgumentError, "index 5 out of range"),
    (lambda: mt.tensor([1.0, 2.0, 3.0]), lambda x: x.scatter_add_(0, mt.tensor([0, -1]), mt.ones(2)),
     mt.InvalidArgumentError, "index -1 out of range"),
], ids=["int add_ float", "int mul_ float tensor", "int div_", "bool add_ int", "bool sub_", "scatter_add_ past",
        "scatter_add_ negative"])
def test_a_refused_in_place_op_on_int_or_bool_leaves_the_tensor_untouched(make, op, error, match) -> None:
    """As torch: an in-place result must keep the tensor's dtype; the refusal comes first."""
    x = make()
    before = x.numpy().copy()
    with pytest.raises(error, match=match):
        op(x)
    np.testing.assert_array_equal(x.numpy(), before)
