"""int64 and bool tensors (issue: integer and boolean tensors, full indexing):
how they are made and inferred, torch's promotion table, integer arithmetic
against NumPy (wrapping, floor division, remainder), comparisons and masks,
int64 reductions and arg-reductions, indexing with int64 and bool tensors
(reads, writes and their gradients), and the refusals where an op has no
meaning for a dtype. NumPy is the reference for values; the promotion table
is torch's (torch.promote_types, written out here)."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from gradcheck import gradcheck
from helpers import assert_close

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def ints(seed: int, shape: tuple[int, ...], low: int = -50, high: int = 50) -> np.ndarray:
    return np.random.default_rng(seed).integers(low, high, size=shape, dtype=np.int64)


def strided_int_views(seed: int) -> list[tuple[mt.Tensor, np.ndarray]]:
    """The same int64 values as views of several layouts, with the NumPy view of each."""
    base = ints(seed, (6, 10))
    t = mt.tensor(base)
    views = [
        (t, base),
        (t.T, base.T),
        (t[1::2, ::3], base[1::2, ::3]),
        (t[:, 3].unsqueeze(1).expand(6, 4), np.broadcast_to(base[:, 3:4], (6, 4))),
        (t[:0], base[:0]),
        (t[2:3, 4:5], base[2:3, 4:5]),
    ]
    return views


# ---- making tensors ----------------------------------------------------------------------


def test_tensor_infers_the_dtype_as_torch() -> None:
    assert mt.tensor([1, 2, 3]).dtype is mt.int64
    assert mt.tensor(7).dtype is mt.int64
    assert mt.tensor([True, False]).dtype is mt.bool
    assert mt.tensor([1.0, 2]).dtype is mt.float32
    assert mt.tensor(np.arange(3, dtype=np.int32)).dtype is mt.int64  # other widths become int64
    assert mt.tensor(np.array([1, 0], dtype=np.uint8)).dtype is mt.int64
    assert mt.tensor(np.zeros(2, dtype=bool)).dtype is mt.bool
    assert mt.tensor(np.zeros(2)).dtype is mt.float64
    assert mt.tensor([1, 2], dtype=mt.float32).dtype is mt.float32
    assert mt.long is mt.int64 and mt.tensor([1]).long().dtype is mt.int64
    big = np.array([INT64_MAX, INT64_MIN, 2**53 + 1])
    np.testing.assert_array_equal(mt.tensor(big).numpy(), big)  # exact, not through a double


def test_creation_functions_give_torchs_dtypes() -> None:
    assert mt.arange(5).dtype is mt.int64 and mt.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert mt.arange(0.0, 2.0, 0.5).dtype is mt.float32
    assert mt.arange(10, 0, -3).tolist() == [10, 7, 4, 1]
    assert mt.full((2,), 3).dtype is mt.int64
    assert mt.full((2,), True).dtype is mt.bool and mt.full((2,), True).tolist() == [True, True]
    assert mt.full((2,), 2.5).dtype is mt.float32
    assert mt.zeros(2).dtype is mt.float32 and mt.ones(2, dtype=mt.int64).tolist() == [1, 1]
    assert mt.zeros(3, dtype=mt.bool).tolist() == [False] * 3
    mt.manual_seed(0)
    r = mt.randint(-3, 4, (200,))
    assert r.dtype is mt.int64 and r.min().item() >= -3 and r.max().item() <= 3
    p = mt.randperm(50)
    assert p.dtype is mt.int64 and sorted(p.tolist()) == list(range(50))
    assert mt.randint(5, (3,), dtype=mt.float64).dtype is mt.float64
    assert mt.eye(3, dtype=mt.int64).sum().item() == 3
    with pytest.raises(TypeError, match="float32 or float64"):
        mt.rand(3, dtype=mt.int64)


def test_item_tolist_and_index_give_python_types() -> None:
    assert type(mt.tensor(3).item()) is int
    assert type(mt.tensor(True).item()) is bool
    assert type(mt.tensor(2.5).item()) is float
    assert mt.tensor([[1, 2]]).tolist() == [[1, 2]]
    assert [10, 20, 30][mt.tensor(2)] == 30  # __index__
    with pytest.raises(TypeError, match="integer tensors"):
        [1, 2][mt.tensor(1.0)]
    assert "dtype=int64" in repr(mt.tensor([1, 2]))


def test_only_float_tensors_require_gradients() -> None:
    with pytest.raises(RuntimeError, match="floating point"):
        mt.tensor([1, 2], requires_grad=True)
    t = mt.tensor([1, 2])
    with pytest.raises(RuntimeError, match="floating point"):
        t.requires_grad = True
    with pytest.raises(RuntimeError, match="floating point"):
        t.requires_grad_()
    x = mt.tensor([1.5, -2.5], requires_grad=True)
    i = x.long()  # a cast to int64 ends the graph, as in torch
    assert i.tolist() == [1, -2] and not i.requires_grad and i.grad_fn is None
    assert not (x > 0).requires_grad and x.argmax().grad_fn is None
    y = x * mt.tensor([2, 3])  # an int64 operand of a float op: the gradient reaches x only
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 3.0]


# ---- casts and promotion -------------------------------------------------------------------


def test_casts_between_every_pair_of_dtypes() -> None:
    f = np.array([0.0, -0.0, 1.9, -1.9, 2.5, -7.0, 1e30, -1e30, np.inf, -np.inf, np.nan])
    t = mt.tensor(f, dtype=mt.float64)
    # Toward zero; out of range saturates and NaN gives 0, as the GPU's conversion
    # (documented: torch leaves these undefined).
    assert t.long().tolist() == [0, 0, 1, -1, 2, -7, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 0]
    assert t.bool().tolist() == [False, False, True, True, True, True, True, True, True, True, True]
    assert t.float().long().tolist()[:6] == [0, 0, 1, -1, 2, -7]
    i = mt.tensor([0, 3, -2, 2**40 + 1])
    assert i.bool().tolist() == [False, True, True, True]
    assert i.double().tolist() == [0.0, 3.0, -2.0, float(2**40 + 1)]
    b = mt.tensor([True, False])
    assert b.long().tolist() == [1, 0] and b.float().tolist() == [1.0, 0.0]
    assert b.to(mt.bool) is b
    # Through a strided view too.
    base = ints(3, (4, 5))
    np.testing.assert_array_equal(mt.tensor(base).T.double().numpy(), base.T.astype(np.float64))
    np.testing.assert_array_equal(mt.tensor(base)[:, ::2].bool().numpy(), base[:, ::2] != 0)


# torch.promote_types for every pair (b: bool, i: int64, f: float32, d: float64).
PROMOTION = {
    ("b", "b"): "b", ("b", "i"): "i", ("b", "f"): "f", ("b", "d"): "d",
    ("i", "i"): "i", ("i", "f"): "f", ("i", "d"): "d",
    ("f", "f"): "f", ("f", "d"): "d", ("d", "d"): "d",
}
LETTER = {"b": mt.bool, "i": mt.int64, "f": mt.float32, "d": mt.float64}


@pytest.mark.parametrize("pair", sorted(PROMOTION))
def test_two_tensors_promote_as_torch(pair: tuple[str, str]) -> None:
    a, b = (mt.ones(2, dtype=LETTER[k]) for k in pair)
    expected = LETTER[PROMOTION[pair]]
    assert (a * b).dtype is expected and (b * a).dtype is expected
    assert mt.cat([a, b]).dtype is expected
    assert mt.where(mt.tensor([True, False]), a, b).dtype is expected
    assert (a == b).dtype is mt.bool


def test_numbers_promote_only_across_categories() -> None:
    i, b, f = mt.tensor([1, 2]), mt.tensor([True, False]), mt.tensor([1.0], dtype=mt.float64)
    assert (i + 1).dtype is mt.int64 and (i + 1).tolist() == [2, 3]
    assert (i * 2.5).dtype is mt.float32 and (i * 2.5).tolist() == [2.5, 5.0]
    assert (b + 1).dtype is mt.int64 and (b + 1).tolist() == [2, 1]
    assert (b * 1.5).dtype is mt.float32
    assert (f + 1).dtype is mt.float64
    assert (2 ** i).tolist() == [2, 4] and (2 ** i).dtype is mt.int64
    assert (i ** 2).tolist() == [1, 4] and (i ** 0.5).dtype is mt.float32
    assert (i / 2).dtype is mt.float32 and (i / 2).tolist() == [0.5, 1.0]  # true division
    assert (mt.tensor([7]) / mt.tensor([2])).tolist() == [3.5]
    assert i.exp().dtype is mt.float32 and abs(i.exp().tolist()[1] - np.exp(2)) < 1e-5
    assert mt.where(b, 1, 0).dtype is mt.int64 and mt.where(b, 1.0, 0).dtype is mt.float32
    with pytest.raises(mt.InvalidArgumentError, match="2\\*\\*53"):
        i + 2**60  # the engine takes numbers as doubles: refused, not rounded
    with pytest.raises(mt.InvalidArgumentError, match="negative integer powers"):
        i ** -1


def test_in_place_ops_keep_the_dtype_or_refuse() -> None:
    i = mt.tensor([1, 2, 3])
    i += 2
    i *= mt.tensor([1, 0, 1])
    assert i.tolist() == [3, 0, 5] and i.dtype is mt.int64
    with pytest.raises(mt.DTypeError, match="can't be cast"):
        i += 1.5
    with pytest.raises(mt.DTypeError, match="can't be cast"):
        i /= 2
    f = mt.tensor([1.0, 2.0])
    f += mt.tensor([1, 2])  # an int64 operand into a float tensor is fine
    assert f.tolist() == [2.0, 4.0]
    m = mt.tensor([True, False])
    m |= mt.tensor([False, True])
    assert m.tolist() == [True, True]


# ---- integer arithmetic against NumPy ------------------------------------------------------


@pytest.mark.parametrize("op", ["add", "sub", "mul", "maximum", "minimum", "floor_divide", "remainder",
                                "bitwise_and", "bitwise_or", "bitwise_xor"])
def test_int64_binary_ops_match_numpy_on_views_and_broadcasts(op: str) -> None:
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
           "minimum": np.minimum, "floor_divide": np.floor_divide, "remainder": np.remainder,
           "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}[op]
    run = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
           "maximum": mt.maximum, "minimum": mt.minimum, "floor_divide": lambda x, y: x // y,
           "remainder": lambda x, y: x % y, "bitwise_and": lambda x, y: x & y,
           "bitwise_or": lambda x, y: x | y, "bitwise_xor": lambda x, y: x ^ y}[op]
    other = ints(9, (10,), 1, 7) * np.where(np.arange(10) % 2, 1, -1)  # no zero: a divisor
    o = mt.tensor(other)
    for t, a in strided_int_views(1):
        b, nb = o[: a.shape[1]], other[: a.shape[1]]  # broadcast along the rows
        assert_close(run(t, b), ref(a, nb), mt.int64)
        assert_close(run(t, 3), ref(a, 3), mt.int64)


def test_int64_arithmetic_wraps_as_twos_complement() -> None:
    big = mt.tensor([INT64_MAX, INT64_MIN, INT64_MIN])
    assert (big + mt.tensor([1, -1, 0])).tolist() == [INT64_MIN, INT64_MAX, INT64_MIN]
    assert (-big).tolist() == [INT64_MIN + 1, INT64_MIN, INT64_MIN]
    assert big.abs().tolist()[1] == INT64_MIN  # as NumPy and torch: |INT64_MIN| does not exist
    assert (big * 2).tolist() == [-2, 0, 0]
    assert (big // -1).tolist() == [-INT64_MAX, INT64_MIN, INT64_MIN]  # no trap
    assert (big % -1).tolist() == [0, 0, 0]


def test_floor_division_and_remainder_follow_python_signs() -> None:
    a = mt.tensor([7, -7, 7, -7, 0])
    b = mt.tensor([2, 2, -2, -2, 3])
    assert (a // b).tolist() == [7 // 2, -7 // 2, 7 // -2, -7 // -2, 0]
    assert (a % b).tolist() == [7 % 2, -7 % 2, 7 % -2, -7 % -2, 0]
    assert (a // 2).tolist() == [3, -4, 3, -4, 0] and (7 // mt.tensor([2, -2])).tolist() == [3, -4]
    f = mt.tensor([7.5, -7.5], dtype=mt.float64)
    assert (f // 2).tolist() == [3.0, -4.0] and (f % -2).tolist() == [-0.5, -1.5]
    with pytest.raises(ZeroDivisionError):
        a // mt.tensor([1, 1, 0, 1, 1])
    with pytest.raises(ZeroDivisionError):
        a % 0
    assert np.isnan((f % 0).numpy()).all()  # floats give NaN, as torch


def test_bool_logic_and_masks() -> None:
    p = np.array([True, True, False, False])
    q = np.array([True, False, True, False])
    a, b = mt.tensor(p), mt.tensor(q)
    assert (a & b).tolist() == list(p & q) and (a | b).tolist() == list(p | q)
    assert (a ^ b).tolist() == list(p ^ q) and (~a).tolist() == list(~p)
    assert (a + b).tolist() == list(p | q) and (a * b).tolist() == list(p & q)  # torch's bool + and *
    assert (a + b).dtype is mt.bool
    assert mt.logical_and(mt.tensor([2.0, 0.0]), mt.tensor([1, 1])).tolist() == [True, False]
    assert mt.logical_not(mt.tensor([0, 3])).tolist() == [True, False]
    assert (~mt.tensor([0, 5, -1])).tolist() == [-1, -6, 0]
    with pytest.raises(mt.DTypeError, match="bool"):
        a - b
    with pytest.raises(mt.DTypeError, match="bool"):
        -a
    with pytest.raises(mt.DTypeError, match="int64 and bool"):
        mt.tensor([1.0]) & mt.tensor([1.0])


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64, mt.int64, mt.bool])
def test_comparisons_give_bool(dtype: mt.DType) -> None:
    rng = np.random.default_rng(4)
    a = rng.integers(0, 3, (5, 6)).astype(dtype.np_dtype)
    b = rng.integers(0, 3, (6,)).astype(dtype.np_dtype)
    ta, tb = mt.tensor(a, dtype=dtype), mt.tensor(b, dtype=dtype)
    for op, ref in (("__lt__", np.less), ("__le__", np.less_equal), ("__gt__", np.greater),
                    ("__ge__", np.greater_equal), ("__eq__", np.equal), ("__ne__", np.not_equal)):
        got = getattr(ta.T.T[:, ::2], op)(tb[1::2])  # a strided view against a broadcast row
        assert got.dtype is mt.bool
        np.testing.assert_array_equal(got.numpy(), ref(a[:, ::2], b[1::2]))
    assert (ta > 1).dtype is mt.bool


# ---- reductions ------------------------------------------------------------------------------


def test_int64_reductions_are_exact_beyond_float_precision() -> None:
    a = np.array([[2**60, 3, -(2**59)], [1, 2**53 + 1, 1]])
    t = mt.tensor(a)
    assert t.sum().item() == int(a.sum()) and t.sum().dtype is mt.int64
    np.testing.assert_array_equal(t.sum(0).numpy(), a.sum(0))
    np.testing.assert_array_equal(t.max(1).values.numpy(), a.max(1))
    np.testing.assert_array_equal(t.min(0).values.numpy(), a.min(0))
    np.testing.assert_array_equal(t.prod(1).numpy(), a.prod(1))
    for v, base in strided_int_views(5):
        if base.size:
            assert v.sum().item() == int(base.sum()) and v.max().item() == int(base.max())
            np.testing.assert_array_equal(v.amin(1).numpy(), base.min(1))
    assert mt.zeros(0, dtype=mt.int64).sum().item() == 0
    with pytest.raises(mt.DTypeError, match="float"):
        t.mean()


def test_bool_sums_count_and_all_any_give_bool() -> None:
    m = mt.tensor([[True, False, True], [False, False, False]])
    assert m.sum().item() == 2 and m.sum().dtype is mt.int64 and m.sum(1).tolist() == [2, 0]
    assert m.any(1).tolist() == [True, False] and m.all(0).tolist() == [False, False, False]
    assert m.any().dtype is mt.bool and bool(m.any()) and not bool(m.all())
    assert mt.zeros(0).all().item() is True and mt.zeros(0).any().item() is False
    assert mt.tensor([1.0, float("nan")]).all().item() is True  # NaN is non-zero
    assert mt.count_nonzero(mt.tensor([[0, 1], [2, 0]]), 0).tolist() == [1, 1]


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64, mt.int64, mt.bool])
def test_argmax_argmin_give_int64_first_index(dtype: mt.DType) -> None:
    rng = np.random.default_rng(2)
    a = rng.integers(0, 4, (7, 37)).astype(dtype.np_dtype)  # ties: the first index wins
    t = mt.tensor(a, dtype=dtype)
    for d in (0, 1, -1):
        got = t.argmax(d)
        assert got.dtype is mt.int64
        np.testing.assert_array_equal(got.numpy(), a.argmax(d))
        np.testing.assert_array_equal(t.argmin(d, keepdim=True).numpy(), np.expand_dims(a.argmin(d), d))
    assert t.argmax().item() == a.argmax() and t.T.argmin().item() == a.T.argmin()
    values, indices = t.max(1)
    assert indices.dtype is mt.int64 and values.dtype is dtype
    assert mt.tensor(5.0).argmax().dtype is mt.int64


# ---- where, masked_fill, nonzero ----------------------------------------------------------


def test_where_and_masked_fill_with_bool_masks() -> None:
    a = np.arange(12.0).reshape(3, 4)
    t = mt.tensor(a, dtype=mt.float64)
    mask = t > 5
    np.testing.assert_array_equal(mt.where(mask, t, -t).numpy(), np.where(a > 5, a, -a))
    np.testing.assert_array_equal(t.masked_fill(mask, 0.0).numpy(), np.where(a > 5, 0.0, a))
    np.testing.assert_array_equal(t.masked_fill(mt.tensor([True, False, False, True]), -1).numpy(),
                                  np.where([True, False, False, True], -1.0, a))
    i = mt.tensor([3, 4, 5])
    assert i.masked_fill(i > 3, 0).tolist() == [3, 0, 0] and i.masked_fill(i > 3, 0).dtype is mt.int64
    with pytest.raises(mt.DTypeError, match="bool"):
        t.masked_fill(t, 0.0)
    x = mt.tensor([1.0, -2.0, 3.0], dtype=mt.float64, requires_grad=True)
    x.masked_fill(x < 0, 0.0).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 1.0]


def test_nonzero_matches_numpy() -> None:
    a = np.array([[0, 1, 0], [2, 0, 3]])
    t = mt.tensor(a)
    np.testing.assert_array_equal(t.nonzero().numpy(), np.argwhere(a))
    assert t.nonzero().dtype is mt.int64
    rows, cols = mt.nonzero(t, as_tuple=True)
    assert rows.tolist() == [0, 1, 1] and cols.tolist() == [1, 0, 2]
    assert mt.zeros(2, 2).nonzero().shape == (0, 2)
    assert mt.tensor(3).nonzero().shape == (1, 0) and mt.tensor(0).nonzero().shape == (0, 0)


# ---- indexing with int64 and bool tensors ------------------------------------------------------


def test_indexing_with_int64_and_bool_tensors_reads_as_numpy() -> None:
    a = np.arange(24.0).reshape(4, 6)
    t = mt.tensor(a, dtype=mt.float64)
    idx = np.array([3, -1, 0, 3])
    np.testing.assert_array_equal(t[mt.tensor(idx)].numpy(), a[idx])
    np.testing.assert_array_equal(t[:, mt.tensor(idx)].numpy(), a[:, idx])
    np.testing.assert_array_equal(t[mt.tensor([[0, 1], [2, 3]])].numpy(), a[np.array([[0, 1], [2, 3]])])
    np.testing.assert_array_equal(t[t > 10].numpy(), a[a > 10])
    np.testing.assert_array_equal(t.T[mt.tensor([True, False, True, False, False, True])].numpy(),
                                  a.T[[True, False, True, False, False, True]])
    np.testing.assert_array_equal(t[mt.tensor(2)].numpy(), a[2])  # a 0-d index drops the dim
    i = mt.tensor(np.arange(10) * 3)
    assert i[i % 2 == 0].tolist() == [0, 6, 12, 18, 24] and i[i % 2 == 0].dtype is mt.int64
    m = mt.tensor([True, False, True])
    assert m[mt.tensor([2, 1])].tolist() == [True, False]
    with pytest.raises(IndexError, match="int64 or bool"):
        t[mt.tensor([0.0, 1.0])]
    with pytest.raises(IndexError, match="out of bounds"):
        t[mt.tensor([4])]
    with pytest.raises(IndexError, match="mask"):
        t[mt.tensor([True, False])]


def test_writes_through_int64_and_bool_tensors() -> None:
    a = np.arange(12.0).reshape(3, 4)
    t = mt.tensor(a, dtype=mt.float64)
    t[t > 6] = 0.0
    a[a > 6] = 0.0
    np.testing.assert_array_equal(t.numpy(), a)
    t[mt.tensor([2, 0])] = mt.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]], dtype=mt.float64)
    a[[2, 0]] = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]
    np.testing.assert_array_equal(t.numpy(), a)
    i = mt.tensor([5, 6, 7, 8])
    i[mt.tensor([0, 3])] = 0
    i[i == 6] = -6
    assert i.tolist() == [0, -6, 7, 0]


def test_gradients_through_tensor_indices() -> None:
    rows = mt.tensor([2, 0, 2])
    gradcheck(lambda m, x: x[rows] * 2.0, [np.random.default_rng(0).standard_normal((3, 4))])

    def masked(m, x):
        return x[x.detach() > 0] ** 2

    gradcheck(masked, [np.random.default_rng(1).standard_normal((3, 5))])


def test_gather_scatter_add_and_embedding_with_int64_indices() -> None:
    src = np.arange(12.0).reshape(3, 4)
    index = np.array([[0, 3], [1, 1], [2, 0]])
    t = mt.tensor(src, dtype=mt.float64)
    np.testing.assert_array_equal(t.gather(1, mt.tensor(index)).numpy(), np.take_along_axis(src, index, 1))
    np.testing.assert_array_equal(mt.tensor(src.astype(np.int64)).gather(1, mt.tensor(index)).numpy(),
                                  np.take_along_axis(src, index, 1).astype(np.int64))
    out = mt.zeros(3, 4, dtype=mt.int64).scatter_add(1, mt.tensor(index), mt.ones(3, 2, dtype=mt.int64))
    ref = np.zeros((3, 4), np.int64)
    np.add.at(ref, (np.arange(3)[:, None], index), 1)  # repeated indices add up
    np.testing.assert_array_equal(out.numpy(), ref)
    with pytest.raises(mt.InvalidArgumentError):
        t.gather(1, mt.tensor([[4]]))
    with pytest.raises(mt.DTypeError, match="int64"):
        t.gather(1, mt.tensor([[True]]))
    emb = mt.nn.Embedding(5, 3)
    assert emb(mt.tensor([[4, 0]])).shape == (1, 2, 3)


def test_cross_entropy_takes_int64_targets() -> None:
    logits = mt.tensor(np.random.default_rng(0).standard_normal((6, 4)), requires_grad=True)
    targets = mt.tensor([0, 3, 1, 1, 2, 0])
    loss = mt.nn.functional.cross_entropy(logits, targets)
    ref = mt.nn.functional.cross_entropy(logits.detach(), targets.double())
    assert abs(loss.item() - ref.item()) < 1e-12
    loss.backward()
    assert logits.grad.shape == (6, 4)
    with pytest.raises(TypeError, match="bool"):
        mt.nn.functional.cross_entropy(logits, targets > 0)


# ---- refusals -------------------------------------------------------------------------------------


def test_float_only_ops_refuse_integer_tensors_with_the_reason() -> None:
    i = mt.tensor([[1, 2], [3, 4]])
    with pytest.raises(mt.DTypeError, match="matmul.*float32 or float64"):
        i @ i
    assert (i @ i.double()).dtype is mt.float64  # a float operand: the int64 one is cast
    with pytest.raises(mt.DTypeError, match="softmax"):
        i.softmax(0)
    with pytest.raises(mt.DTypeError, match="logsumexp"):
        i.logsumexp(0)
    with pytest.raises(mt.DTypeError, match="layer_norm"):
        mt.nn.functional.layer_norm(i, (2,))
    with pytest.raises(TypeError, match="dtype"):
        mt.nn.Linear(2, 2).to(mt.int64)


def test_numpy_and_dlpack_round_trips_keep_the_dtype() -> None:
    for host in (np.array([[1, -2], [3, 2**62]]), np.array([True, False, True])):
        t = mt.tensor(host)
        np.testing.assert_array_equal(t.numpy(), host)
        assert t.numpy().dtype == host.dtype
    if mt.backend() == "emulator":  # host memory: NumPy can share it
        i = mt.tensor([1, 2, 3])
        shared = np.from_dlpack(i)
        assert shared.dtype == np.int64 and shared.tolist() == [1, 2, 3]
        back = mt.from_dlpack(np.array([True, False]))
        assert back.dtype is mt.bool and back.tolist() == [True, False]
