"""Several index arrays in one key (x[i, j], x[i, :, k]), and negative steps
next to integers (x[0, ::-1]): reads, writes and gradients, against NumPy
(whose placement of the index arrays' dims torch follows, except for an
integer beside an index array: torch removes the integer's dim first)."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from gradcheck import gradcheck
from helpers import random_array

I = np.array  # an index array given as a NumPy array

# Keys on which torch and NumPy agree (no integer beside an index array).
READ_KEYS = [
    ([0, 2], [1, 3]),                                  # two arrays, next to each other: in place
    ([0, 2], slice(None), [4, 0]),                     # separated by a slice: the block goes first
    (slice(None), [[0], [3]], [1, 2, 4]),              # broadcast (2, 1) with (3,) to (2, 3), in place
    (I([[2], [0]]), slice(1, 3), I([0, 1, 3])),        # broadcast, separated
    (None, [1, 0], slice(None), [2, 2]),               # None before, separated
    ([1, 0], None, [2, 2]),                            # None between: separated
    (Ellipsis, [0, 3], [4, 1]),                        # at the end
    ([], []),                                          # empty
    (I([True, False, True]), slice(None), [0, 4]),     # a mask and an array, separated
    (slice(None), I([[True, False, True, False, True]] * 4)),  # a mask over two dims
    ([0, 2], slice(None), slice(None, None, -1)),      # an array and a negative step
    (slice(None, None, -1), [1, 1], [0, 4]),           # a negative step before two arrays
    ([[0, 1], [2, 0]], [[3], [1]], slice(1, None, 2)),  # 2-D arrays broadcast, then a slice
]

# A negative step beside integers (torch and NumPy agree: no index array).
STEP_KEYS = [
    (0, slice(None, None, -1)), (slice(None, None, -1), 1), (1, slice(None, None, -2), 2),
    (slice(None, None, -1), 0, slice(None, None, -1)), (2, slice(3, 0, -1)), (Ellipsis, 1, slice(None, None, -3)),
    (0, slice(0, 0, -1)), (None, 1, slice(None, None, -1), None),
]


def _tensors(x: np.ndarray):
    """x as a contiguous tensor, and as a strided view (of a permuted copy)."""
    base = mt.tensor(np.ascontiguousarray(x.transpose(2, 0, 1)))
    return mt.tensor(x), base.permute(1, 2, 0)


@pytest.mark.parametrize("key", READ_KEYS + STEP_KEYS + [([2, 2, 0], [1, 1, 1])],
                         ids=range(len(READ_KEYS + STEP_KEYS) + 1))
def test_several_index_arrays_read_as_numpy(key) -> None:
    x = random_array(0, (3, 4, 5), mt.float64)
    for t in _tensors(x):
        got = t[key]
        assert got.shape == x[key].shape
        np.testing.assert_array_equal(got.numpy(), x[key])


def test_index_arrays_as_int64_tensors_lists_and_numpy_arrays_agree() -> None:
    x = random_array(1, (3, 4, 5), mt.float64)
    t = mt.tensor(x)
    want = x[[0, 2], :, [1, -1]]
    for i, k in (([0, 2], [1, -1]), (I([0, 2]), I([1, -1])), (mt.tensor([0, 2]), mt.tensor([1, -1])),
                 (mt.tensor([0, 2]), [1, -1])):
        np.testing.assert_array_equal(t[i, :, k].numpy(), want)
    # A strided int64 index tensor (a transposed view) reads as its values.
    idx = mt.tensor([[0, 1], [2, 0]]).t()
    np.testing.assert_array_equal(t[idx, [[1], [3]]].numpy(), x[idx.numpy(), [[1], [3]]])


def test_an_integer_beside_an_index_array_is_a_basic_index_as_in_torch() -> None:
    """torch removes an integer's dim before it indexes with the arrays, so
    x[0, :, [0, 1]] is x[0][:, [0, 1]] (NumPy would put the 2 first)."""
    x = random_array(2, (3, 4, 5), mt.float64)
    t = mt.tensor(x)
    np.testing.assert_array_equal(t[0, :, [0, 1]].numpy(), x[0][:, [0, 1]])
    assert t[0, :, [0, 1]].shape == (4, 2)
    np.testing.assert_array_equal(t[[2, 0], 1, [3, 3]].numpy(), x[:, 1][[2, 0], [3, 3]])
    np.testing.assert_array_equal(t[mt.tensor(1), [0, 3]].numpy(), x[1][[0, 3]])  # a 0-d tensor is an int
    assert t[mt.tensor(1), 2].shape == (5,)


@pytest.mark.parametrize("key", READ_KEYS + STEP_KEYS, ids=range(len(READ_KEYS + STEP_KEYS)))
def test_several_index_arrays_write_as_numpy(key) -> None:
    x = random_array(3, (3, 4, 5), mt.float64)
    shape = x[key].shape
    for value in (-7.0, random_array(4, shape, mt.float64), random_array(5, (1, 1) + shape[1:], mt.float64)):
        ref = x.copy()
        ref[key] = value
        contiguous, view = _tensors(x)
        for t in (contiguous, view):
            t[key] = mt.tensor(value) if isinstance(value, np.ndarray) else value
            np.testing.assert_array_equal(t.numpy(), ref)


def test_a_write_broadcasts_the_value_and_drops_its_leading_ones() -> None:
    t = mt.zeros(3, 4, 5, dtype=mt.float64)
    ref = np.zeros((3, 4, 5))
    t[[0, 2], :, [1, 3]] = mt.tensor([1.0, 2.0, 3.0, 4.0], dtype=mt.float64)  # (4,) to (2, 4)
    ref[[0, 2], :, [1, 3]] = [1.0, 2.0, 3.0, 4.0]
    t[[[1], [2]], [0, 3]] = mt.ones(1, 1, 2, 1, 5, dtype=mt.float64) * 9.0  # leading 1s dropped
    ref[[[1], [2]], [0, 3]] = 9.0
    np.testing.assert_array_equal(t.numpy(), ref)
    with pytest.raises(mt.ShapeError):
        t[[0, 1], [0, 1]] = mt.ones(3, 5, dtype=mt.float64)


def test_a_write_with_a_repeated_pair_is_refused_and_writes_nothing() -> None:
    t = mt.zeros(3, 4)
    with pytest.raises(IndexError, match="repeated indices"):
        t[[0, 1, 0], [2, 2, 2]] = 5.0
    t[[0, 0], [1, 2]] = 5.0  # a row repeated, but no pair: fine
    assert t.numpy().sum() == 10.0


def test_a_read_gradient_accumulates_repeated_pairs() -> None:
    x = mt.zeros(3, 4, dtype=mt.float64, requires_grad=True)
    x[[2, 2, 0, 2], [1, 1, 3, 1]].sum().backward()
    want = np.zeros((3, 4))
    want[2, 1], want[0, 3] = 3.0, 1.0
    np.testing.assert_array_equal(x.grad.numpy(), want)


@pytest.mark.parametrize("key", [([2, 2, 0], [1, 1, 1]), ([0, 2], slice(None), [4, 0]),
                                 (I([True, False, True]), slice(1, None), [[0], [4]]),
                                 (0, slice(None, None, -1)), (slice(None, None, -2), 1, slice(None))],
                         ids=range(5))
def test_a_read_is_differentiable(key) -> None:
    gradcheck(lambda m, a: a[key] * 2.0, [random_array(6, (3, 3, 5), mt.float64)])


@pytest.mark.parametrize("key", [([0, 2], slice(None), [4, 0]), ([1, 0], [[2], [0]]), (1, slice(None, None, -1)),
                                 (slice(None, None, -1), 2)], ids=range(4))
def test_a_write_is_differentiable(key) -> None:
    x = random_array(7, (3, 4, 5), mt.float64)
    v = random_array(8, x[key].shape, mt.float64)

    def fn(m, a, b):
        y = a * 2.0
        y[key] = b * b
        return y

    gradcheck(fn, [x, v])


@pytest.mark.parametrize("key,match", [
    (([0, 1], [0, 1, 2]), "broadcast together with shapes \\[2\\], \\[3\\]"),
    (([0, 1], [0, 4]), "index 4 is out of bounds for dimension 1 with size 4"),
    ((mt.tensor([0, 1]), mt.tensor([-5, 0])), "index -5 is out of bounds for dimension 1 with size 4"),
    ((0, mt.tensor([1.0])), "int64 or bool"),
    ((I([True, False]), [0]), "mask's shape"),
    (([0], [0], [0]), "too many indices"),
    (([0], "a"), "invalid index"),
    (([0], True), "invalid index"),
    (([[0, 1], [2]],), "rectangular"),
])
def test_bad_index_arrays_are_refused_and_write_nothing(key, match) -> None:
    t = mt.zeros(3, 4)
    with pytest.raises(IndexError, match=match):
        t[key]
    with pytest.raises(IndexError, match=match):
        t[key] = 1.0
    assert not t.numpy().any()
