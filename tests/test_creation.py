"""Creation functions, attributes and conversions back to Python and NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitensor as mt
from helpers import assert_close, dtypes, np_dtype, random_array, seeds, shapes


def test_tensor_from_scalar() -> None:
    t = mt.tensor(3.5)
    assert t.shape == () and t.ndim == 0 and t.dtype is mt.float32
    assert t.item() == 3.5
    assert t.tolist() == 3.5


def test_tensor_from_nested_lists() -> None:
    t = mt.tensor([[1, 2, 3], [4, 5, 6]])
    assert t.shape == (2, 3)
    assert t.dtype is mt.int64  # integers give int64, as in torch
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert mt.tensor([True, False]).tolist() == [True, False]
    assert mt.tensor([[1, 2.5]]).dtype is mt.float32  # a float among them: the default float dtype


def test_tensor_from_numpy_keeps_its_dtype() -> None:
    assert mt.tensor(np.zeros(3, dtype=np.float64)).dtype is mt.float64
    assert mt.tensor(np.zeros(3, dtype=np.float32)).dtype is mt.float32
    assert mt.tensor(np.zeros(3, dtype=np.int64)).dtype is mt.int64
    assert mt.tensor(np.zeros(3, dtype=np.int16)).dtype is mt.int64
    assert mt.tensor(np.zeros(3, dtype=np.float64), dtype=mt.float32).dtype is mt.float32


@given(shape=shapes(), dtype=dtypes, seed=seeds)
def test_tensor_roundtrip(shape: tuple[int, ...], dtype: mt.DType, seed: int) -> None:
    a = random_array(seed, shape, dtype)
    t = mt.tensor(a)
    assert t.shape == shape and t.dtype is dtype and t.is_contiguous()
    back = t.numpy()
    assert back.dtype == np_dtype(dtype)
    np.testing.assert_array_equal(back, a)
    np.testing.assert_array_equal(np.asarray(t), a)


def test_tensor_copies_its_input() -> None:
    a = np.ones(3, dtype=np.float32)
    t = mt.tensor(a)
    a[0] = 5
    assert t.tolist() == [1.0, 1.0, 1.0]
    u = mt.tensor(t)
    u[0] = 7.0
    assert t.tolist() == [1.0, 1.0, 1.0]


def test_dtype_arguments() -> None:
    assert mt.zeros(2, dtype=mt.float64).dtype is mt.float64
    assert mt.zeros(2, dtype="float64").dtype is mt.float64
    assert mt.zeros(2, dtype=np.float64).dtype is mt.float64
    assert mt.zeros(2, dtype="float").dtype is mt.float32
    assert mt.double is mt.float64 and mt.float is mt.float32
    assert repr(mt.float32) == "minitensor.float32"


@pytest.mark.parametrize("make, value", [(mt.zeros, 0.0), (mt.ones, 1.0)])
def test_zeros_ones_shapes(make, value) -> None:
    assert make(2, 3).shape == (2, 3)
    assert make((2, 3)).shape == (2, 3)
    assert make([4]).shape == (4,)
    assert make().shape == ()
    assert make(0, 3).shape == (0, 3)
    assert make(2, 2, dtype=mt.float64).tolist() == [[value] * 2] * 2


def test_full_and_like() -> None:
    t = mt.full((2, 3), 7.0)
    assert t.tolist() == [[7.0] * 3] * 2
    assert mt.full(2, -1.5, dtype=mt.float64).tolist() == [-1.5, -1.5]
    x = mt.ones(2, 3, dtype=mt.float64)
    assert mt.zeros_like(x).tolist() == [[0.0] * 3] * 2 and mt.zeros_like(x).dtype is mt.float64
    assert mt.ones_like(x).shape == (2, 3)
    assert mt.full_like(x, 2.0).tolist() == [[2.0] * 3] * 2
    assert mt.zeros_like(x, dtype=mt.float32).dtype is mt.float32


def test_arange() -> None:
    assert mt.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert mt.arange(2, 5).tolist() == [2, 3, 4]
    assert mt.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert mt.arange(0).shape == (0,)
    assert mt.arange(5, dtype=mt.float64).dtype is mt.float64
    with pytest.raises(ValueError, match="step"):
        mt.arange(0, 3, 0)


def test_values_outside_int64_are_refused_not_wrapped() -> None:
    """As torch: an int64 tensor cannot hold them, so creation raises (an
    OverflowError that is also a RuntimeError and a ValueError, torch's two)
    instead of wrapping them."""
    for make in (lambda: mt.tensor([1e19], dtype=mt.int64), lambda: mt.tensor(2**63),
                 lambda: mt.tensor(np.uint64(2**64 - 1)), lambda: mt.tensor([2**63, -1]),
                 lambda: mt.tensor([[1], [2**70]]), lambda: mt.tensor(-(2**63) - 1),
                 lambda: mt.tensor(np.array([2.0**63]), dtype=mt.int64),
                 lambda: mt.tensor([2**63], dtype=mt.int64),
                 lambda: mt.arange(2**63 - 2, 2**63 + 1), lambda: mt.arange(-(2**63) - 1, 0),
                 lambda: mt.arange(0.0, 1e19, 1e18, dtype=mt.int64)):
        with pytest.raises(OverflowError, match="outside the range of int64"):
            make()
        with pytest.raises(RuntimeError):
            make()
        with pytest.raises(ValueError):  # torch's error for a Python integer
            make()
    # The edges themselves, and floats that only a float tensor holds, are fine.
    assert mt.tensor([2**63 - 1, -(2**63)]).tolist() == [2**63 - 1, -(2**63)]
    assert mt.tensor(np.uint64(2**63 - 1)).item() == 2**63 - 1
    assert mt.tensor([2**63, 1.5]).dtype is mt.float32
    assert mt.tensor([2**70], dtype=mt.float64).item() == 2.0**70
    assert mt.tensor([-(2.0**63)], dtype=mt.int64).item() == -(2**63)
    assert mt.arange(2**63 - 3, 2**63 - 1).tolist() == [2**63 - 3, 2**63 - 2]
    assert mt.arange(-(2**63), -(2**63) + 2).tolist() == [-(2**63), -(2**63) + 1]
    assert mt.arange(0, 10, 3).tolist() == [0, 3, 6, 9] and mt.arange(10, 0, -4).tolist() == [10, 6, 2]


def test_rand_randn_and_seed() -> None:
    mt.manual_seed(123)
    a = mt.rand(3, 4).numpy()
    b = mt.randn(100, dtype=mt.float64).numpy()
    mt.manual_seed(123)
    np.testing.assert_array_equal(mt.rand(3, 4).numpy(), a)
    np.testing.assert_array_equal(mt.randn(100, dtype=mt.float64).numpy(), b)
    assert a.shape == (3, 4) and a.dtype == np.float32
    assert (a >= 0).all() and (a < 1).all()
    assert abs(b.mean()) < 0.5 and 0.5 < b.std() < 1.5
    assert mt.rand((2, 2)).shape == (2, 2)
    assert mt.randn(2, 2, requires_grad=True).requires_grad


def test_attributes() -> None:
    t = mt.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.ndim == 3 and t.dim() == 3 and t.numel() == 24
    assert t.strides == (12, 4, 1) and t.stride() == (12, 4, 1) and t.stride(0) == 12
    assert t.is_contiguous() and t.storage_offset() == 0 and t.element_size() == 4
    m = mt.zeros(2, 5)
    assert m.T.shape == (5, 2) and m.T.strides == (1, 5) and not m.T.is_contiguous()
    assert mt.zeros(3).T.shape == (3,)
    assert mt.zeros(2, 3, 4).mT.shape == (2, 4, 3)
    with pytest.raises(ValueError, match=r"\(2, 3, 4\)"):
        mt.zeros(2, 3, 4).T


def test_requires_grad_is_stored() -> None:
    t = mt.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad and t.grad is None and t.grad_fn is None
    assert not mt.zeros(2).requires_grad
    assert "requires_grad=True" in repr(t)


def test_item_tolist_len_iter() -> None:
    t = mt.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert len(t) == 2
    assert [row.tolist() for row in t] == [[1.0, 2.0], [3.0, 4.0]]
    assert t[1, 0].item() == 3.0 and float(t[0, 1]) == 2.0 and int(t[1, 1]) == 4
    assert isinstance(t[0, 0].item(), float)
    assert mt.tensor([5.0]).item() == 5.0
    with pytest.raises(ValueError, match="4 elements"):
        t.item()
    with pytest.raises(TypeError):
        len(mt.tensor(1.0))


def test_bool_of_many_elements_raises() -> None:
    assert bool(mt.tensor(1.0)) is True
    assert bool(mt.tensor([0.0])) is False
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(mt.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError):
        bool(mt.zeros(0))
    with pytest.raises(RuntimeError):
        if mt.ones(2) == mt.ones(2):
            pass


def test_tensors_hash_by_identity() -> None:
    a, b = mt.zeros(2), mt.zeros(2)
    assert len({a, b, a}) == 2
    assert {a: 1}[a] == 1
    assert (a == None) is False  # noqa: E711 - comparison with a non-tensor
    assert (a != "x") is True


def test_repr_shows_values_shape_dtype_backend() -> None:
    r = repr(mt.tensor([[1.0, 2.5], [3.0, 4.0]], dtype=mt.float64))
    assert r.startswith("tensor([[1. , 2.5],")
    assert "shape=(2, 2)" in r and "dtype=float64" in r and f"backend={mt.backend()}" in r
    assert "3." in r
    assert repr(mt.tensor(2.0)).startswith("tensor(2.")
    assert f"{mt.tensor(2.0):.2f}" == "2.00"


def test_conversions_between_dtypes() -> None:
    t = mt.tensor([1.5, 2.5])
    d = t.double()
    assert d.dtype is mt.float64 and d.tolist() == [1.5, 2.5]
    assert d.float().dtype is mt.float32
    assert t.to(mt.float64).dtype is mt.float64
    assert t.to("float32") is t
    x = mt.tensor([0.1], dtype=mt.float64)
    assert x.float().item() == float(np.float32(0.1))


@given(shape=shapes(max_dims=3), dtype=dtypes, seed=seeds)
def test_rand_like_shapes(shape: tuple[int, ...], dtype: mt.DType, seed: int) -> None:
    x = mt.zeros(shape, dtype=dtype)
    assert mt.rand_like(x).shape == shape and mt.randn_like(x).dtype is dtype
    assert_close(mt.zeros_like(x), np.zeros(shape), dtype)


def test_creation_errors() -> None:
    with pytest.raises(ValueError, match="rectangular"):
        mt.tensor([[1.0, 2.0], [3.0]])
    with pytest.raises(TypeError):
        mt.tensor("hello")
    with pytest.raises(TypeError):
        mt.tensor([1 + 2j])
    with pytest.raises(TypeError, match="dtype"):
        mt.zeros(2, dtype="int32")
    with pytest.raises(TypeError, match="dtype"):
        mt.zeros(2, dtype=np.int32)
    with pytest.raises(ValueError, match="negative"):
        mt.zeros(2, -1)
    with pytest.raises(TypeError):
        mt.zeros(2.5)
    with pytest.raises(ValueError, match="at most 8"):
        mt.zeros(*(1,) * 9)
    with pytest.raises(TypeError, match="internal"):
        mt.Tensor([1.0])


@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=0, max_size=20))
def test_tensor_from_python_floats(values: list[float]) -> None:
    assert mt.tensor(values).tolist() == values
