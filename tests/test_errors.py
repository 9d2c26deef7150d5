"""Every documented error: its exception type, and a message that names the
offending shapes or dim. Errors are raised before any kernel runs."""

from __future__ import annotations

import re

import numpy as np
import pytest

import minitensor as mt


def shape_re(*shapes: tuple[int, ...]) -> str:
    """A regex matching the shapes, in order, as Python prints tuples."""
    return ".*".join(re.escape(str(tuple(s))) for s in shapes)


@pytest.mark.parametrize(
    "op",
    [
        lambda a, b: a + b,
        lambda a, b: a - b,
        lambda a, b: a * b,
        lambda a, b: a / b,
        lambda a, b: a**b,
        lambda a, b: a < b,
        lambda a, b: a == b,
        mt.maximum,
        mt.minimum,
        lambda a, b: mt.where(mt.ones(1), a, b),
    ],
)
def test_broadcast_mismatch_is_a_value_error_naming_both_shapes(op) -> None:
    a, b = mt.ones(2, 3), mt.ones(4)
    with pytest.raises(ValueError, match=shape_re((2, 3), (4,))):
        op(a, b)
    with pytest.raises(mt.ShapeError):
        op(a, b)


def test_matmul_mismatch_names_both_shapes() -> None:
    with pytest.raises(ValueError, match=shape_re((2, 3), (4, 5))):
        mt.ones(2, 3) @ mt.ones(4, 5)
    with pytest.raises(ValueError, match=shape_re((3,), (2,))):
        mt.ones(3) @ mt.ones(2)
    with pytest.raises(ValueError, match=shape_re((2, 2, 3), (3, 3, 1))):
        mt.ones(2, 2, 3) @ mt.ones(3, 3, 1)
    with pytest.raises(ValueError, match=shape_re((), (3,))):
        mt.tensor(1.0) @ mt.ones(3)


def test_shape_errors_are_also_runtime_errors_like_torch() -> None:
    with pytest.raises(RuntimeError):
        mt.ones(2) + mt.ones(3)
    assert issubclass(mt.ShapeError, mt.MinitensorError)
    assert issubclass(mt.MinitensorError, RuntimeError)
    assert issubclass(mt.DimError, IndexError) and issubclass(mt.DTypeError, TypeError)


@pytest.mark.parametrize(
    "call, dim",
    [
        (lambda t: t.sum(3), 3),
        (lambda t: t.sum(-4), -4),
        (lambda t: t.mean((0, 5)), 5),
        (lambda t: t.max(3), 3),
        (lambda t: t.min(-4), -4),
        (lambda t: t.argmax(7), 7),
        (lambda t: t.prod(3), 3),
        (lambda t: mt.softmax(t, 3), 3),
        (lambda t: mt.log_softmax(t, -4), -4),
        (lambda t: mt.logsumexp(t, 3), 3),
        (lambda t: t.transpose(0, 3), 3),
        (lambda t: t.permute(0, 1, 3), 3),
        (lambda t: t.unsqueeze(5), 5),
        (lambda t: t.squeeze(3), 3),
        (lambda t: t.size(3), 3),
        (lambda t: t.flatten(0, 4), 4),
        (lambda t: t.gather(3, mt.zeros(2, 3, 4)), 3),
        (lambda t: mt.cat([t, t], 3), 3),
        (lambda t: mt.stack([t, t], 4), 4),
    ],
)
def test_dim_out_of_range_is_an_index_error_naming_dim_and_rank(call, dim: int) -> None:
    t = mt.ones(2, 3, 4)
    with pytest.raises(IndexError, match=rf"dim {dim}\b.*rank [34]"):
        call(t)


def test_index_out_of_range() -> None:
    t = mt.ones(2, 3)
    with pytest.raises(IndexError, match=r"index 5 .*dim 1 .*size 3"):
        t[0, 5]
    with pytest.raises(IndexError, match=r"index -3 .*dim 0 .*size 2"):
        t[-3]
    with pytest.raises(IndexError, match="too many indices.*rank 2"):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="ellipsis"):
        t[..., ...]


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t + "a",
        lambda t: t * [1, 2],
        lambda t: t @ 2.0,
        lambda t: t.sum(dim="0"),
        lambda t: t.sum(dim=1.0),
        lambda t: t.argmax(dim=(0, 1)),
        lambda t: t.view("a"),
        lambda t: t.reshape(2.5),
        lambda t: t.to("int32"),
        lambda t: t.fill_("x"),
        lambda t: mt.exp(np.ones(2)),
        lambda t: mt.softmax([1.0], 0),
        lambda t: t.gather(0, [[0]]),
        lambda t: mt.full((2,), 1.0, dtype="float16"),
    ],
)
def test_wrong_argument_type_is_a_type_error(call) -> None:
    with pytest.raises(TypeError):
        call(mt.ones(2, 3))


@pytest.mark.parametrize("key", [1.5, (0, 1.0), "a", (slice(None), 2.0)])
def test_an_index_that_is_no_int_is_an_index_error_as_in_numpy(key) -> None:
    with pytest.raises(IndexError, match="valid indices"):
        mt.ones(2, 3)[key]
    with pytest.raises(IndexError):
        np.ones((2, 3))[key]


@pytest.mark.parametrize(
    "call, shapes",
    [
        (lambda t: t.view(5, 5), [(2, 3, 4)]),
        (lambda t: t.reshape(7, -1), [(2, 3, 4)]),
        (lambda t: t.view(-1, -1), []),
        (lambda t: t.expand(3, 3, 4), [(2, 3, 4), (3, 3, 4)]),
        (lambda t: t.expand(3, 4), [(2, 3, 4), (3, 4)]),
        (lambda t: t.T, [(2, 3, 4)]),
        (lambda t: t.gather(0, mt.zeros(2, 4, 4)), [(2, 4, 4), (2, 3, 4)]),
        (lambda t: t.scatter_add_(0, mt.zeros(1, 3, 4), mt.ones(1, 3, 5)), [(1, 3, 4), (1, 3, 5)]),
        (lambda t: t.unsqueeze(0).unsqueeze(0).unsqueeze(0).unsqueeze(0).unsqueeze(0).unsqueeze(0), []),
        (lambda t: t.item(), [(2, 3, 4)]),
    ],
)
def test_other_shape_errors_name_the_shapes(call, shapes) -> None:
    with pytest.raises(ValueError, match=shape_re(*shapes) if shapes else None):
        call(mt.ones(2, 3, 4))


def test_a_failed_op_leaves_its_operands_untouched() -> None:
    t = mt.arange(6).reshape(2, 3)
    before = t.numpy().copy()
    for bad in (lambda: t.copy_(mt.ones(4)), lambda: t.__setitem__(0, mt.ones(2)),
                lambda: t.scatter_add_(1, mt.tensor([[9.0]]), mt.ones(1, 1))):
        with pytest.raises((ValueError, IndexError, RuntimeError)):
            bad()
        np.testing.assert_array_equal(t.numpy(), before)


def test_mixing_float32_and_float64_is_not_an_error() -> None:
    r = mt.ones(2) + mt.ones(2, dtype=mt.float64)
    assert r.dtype is mt.float64
