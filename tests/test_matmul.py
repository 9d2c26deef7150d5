"""Matrix products against NumPy: partial tiles, batch broadcasting, 1-D
operands, strided operands, every kernel of the ladder, dtype promotion."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitensor as mt
from helpers import assert_close, dtypes, pair, random_array, seeds

TILE_SIZES = [1, 7, 31, 33, 65]
ALGOS = list(mt.kernels.algorithms("matmul"))  # every rung of the ladder


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (7, 33, 31), (33, 7, 65), (65, 31, 1), (31, 65, 33)])
def test_partial_tiles(algo: str, m: int, k: int, n: int) -> None:
    for dtype in (mt.float32, mt.float64):
        ta, a = pair(random_array(m + k, (m, k), dtype), dtype)
        tb, b = pair(random_array(k + n, (k, n), dtype), dtype)
        assert_close(mt.kernels.matmul(ta, tb, algo), a @ b, dtype, n=k)


@st.composite
def matmul_shapes(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shapes of a and b that multiply: 1-D to 4-D, broadcast batch dims."""
    m, k, n = (draw(st.sampled_from([0, 1, 2, 3, 7, 17])) for _ in range(3))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    a_batch = [1 if draw(st.booleans()) else s for s in batch]
    b_batch = [1 if draw(st.booleans()) else s for s in batch]
    a_batch = a_batch[draw(st.integers(0, len(a_batch))):]
    b_batch = b_batch[draw(st.integers(0, len(b_batch))):]
    a_shape = (k,) if draw(st.booleans()) and not a_batch else tuple(a_batch) + (m, k)
    b_shape = (k,) if draw(st.booleans()) and not b_batch else tuple(b_batch) + (k, n)
    return a_shape, b_shape


@given(shapes=matmul_shapes(), dtype=dtypes, seed=seeds, algo=st.sampled_from(ALGOS))
def test_matmul_like_numpy(shapes: tuple, dtype: mt.DType, seed: int, algo: str) -> None:
    a_shape, b_shape = shapes
    ta, a = pair(random_array(seed, a_shape, dtype), dtype)
    tb, b = pair(random_array(seed + 1, b_shape, dtype), dtype)
    expected = np.matmul(a, b)
    k = a_shape[-1]
    assert_close(mt.kernels.matmul(ta, tb, algo), expected, dtype, n=k)
    if algo == "default":
        assert_close(ta @ tb, expected, dtype, n=k)
        assert_close(mt.matmul(ta, tb), expected, dtype, n=k)


@given(dtype=dtypes, seed=seeds, m=st.integers(1, 9), k=st.integers(1, 9), n=st.integers(1, 9),
       transpose_a=st.booleans(), transpose_b=st.booleans(), step=st.integers(1, 2))
def test_matmul_strided_operands(dtype: mt.DType, seed: int, m: int, k: int, n: int,
                                 transpose_a: bool, transpose_b: bool, step: int) -> None:
    base_a = random_array(seed, (k, m * step) if transpose_a else (m, k * step), dtype)
    base_b = random_array(seed + 1, (n, k) if transpose_b else (k, n), dtype)
    ta, tb = mt.tensor(base_a), mt.tensor(base_b)
    a, b = base_a.astype(np.float64), base_b.astype(np.float64)
    if transpose_a:
        ta, a = ta[:, ::step].T, a[:, ::step].T
    else:
        ta, a = ta[:, ::step], a[:, ::step]
    if transpose_b:
        tb, b = tb.T, b.T
    assert_close(ta @ tb, a @ b, dtype, n=k)
    # an expanded (stride-0) batch operand
    tb3 = tb.unsqueeze(0).expand(3, k, n)
    assert_close(ta @ tb3, np.matmul(a, np.broadcast_to(b, (3, k, n))), dtype, n=k)


def test_matmul_vectors() -> None:
    a = mt.tensor([1.0, 2.0, 3.0])
    m = mt.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert (a @ a).shape == () and (a @ a).item() == 14.0
    assert (a @ m).tolist() == [4.0, 5.0]
    assert (m.T @ a).tolist() == [4.0, 5.0]
    assert (mt.ones(4, 2, 3) @ a).shape == (4, 2)
    assert (a @ mt.ones(4, 3, 2)).shape == (4, 2)


def test_matmul_mixed_dtypes() -> None:
    a = mt.ones(2, 3)
    b = mt.ones(3, 2, dtype=mt.float64)
    assert (a @ b).dtype is mt.float64
    assert (a @ b).tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_matmul_empty_inner_dim_is_zeros() -> None:
    assert (mt.ones(2, 0) @ mt.ones(0, 3)).tolist() == [[0.0] * 3] * 2
