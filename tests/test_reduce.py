"""Reductions, softmax and logsumexp against NumPy, on strided views and on
the lengths where reduction kernels break (1, 31, 32, 33, 1023, 1025, 5000)."""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitensor as mt
from helpers import assert_close, pair, random_array, strided_views

AWKWARD_LENGTHS = [1, 31, 32, 33, 1023, 1025, 5000]

REDUCTIONS: dict[str, tuple[Callable, Callable]] = {
    "sum": (lambda t, d, k: t.sum(d, k), lambda a, d, k: np.sum(a, axis=d, keepdims=k)),
    "mean": (lambda t, d, k: t.mean(d, k), lambda a, d, k: np.mean(a, axis=d, keepdims=k)),
    "prod": (lambda t, d, k: t.prod(d, k), lambda a, d, k: np.prod(a, axis=d, keepdims=k)),
    "max": (lambda t, d, k: t.amax(d, k), lambda a, d, k: np.max(a, axis=d, keepdims=k)),
    "min": (lambda t, d, k: t.amin(d, k), lambda a, d, k: np.min(a, axis=d, keepdims=k)),
    "argmax": (lambda t, d, k: t.argmax(d, k), lambda a, d, k: _np_arg(np.argmax, a, d, k)),
    "argmin": (lambda t, d, k: t.argmin(d, k), lambda a, d, k: _np_arg(np.argmin, a, d, k)),
}


def _np_arg(fn: Callable, a: np.ndarray, dim: Any, keepdim: bool) -> np.ndarray:
    if dim is None:
        r = np.asarray(fn(a))
        return r.reshape((1,) * a.ndim) if keepdim else r
    return fn(a, axis=dim, keepdims=keepdim)


def _terms(shape: tuple[int, ...], dim: Any) -> int:
    if dim is None:
        return int(np.prod(shape))
    dims = dim if isinstance(dim, tuple) else (dim,)
    return int(np.prod([shape[d] for d in dims]))


@st.composite
def view_and_dim(draw: Any, name: str) -> tuple[mt.Tensor, np.ndarray, Any, bool]:
    needs_elements = name not in ("sum", "mean", "prod")
    low, high = (0.5, 1.5) if name == "prod" else (None, None)
    t, a = draw(strided_views(low=low, high=high, allow_empty=not needs_elements))
    keepdim = draw(st.booleans())
    choices = ["none"] + (["int"] if a.ndim else []) + (["tuple"] if a.ndim and name not in ("argmax", "argmin") else [])
    kind = draw(st.sampled_from(choices))
    if kind == "none":
        dim = None
    elif kind == "int":
        dim = draw(st.integers(-a.ndim, a.ndim - 1))
    else:
        dims = draw(st.lists(st.integers(0, a.ndim - 1), min_size=1, max_size=a.ndim, unique=True))
        dim = tuple(d - a.ndim if draw(st.booleans()) else d for d in dims)
    return t, a, dim, keepdim


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@given(data=st.data())
def test_reductions_on_strided_views(name: str, data: st.DataObject) -> None:
    fn, ref = REDUCTIONS[name]
    t, a, dim, keepdim = data.draw(view_and_dim(name))
    np_dim = dim if not isinstance(dim, tuple) else tuple(d % a.ndim for d in dim)
    with warnings.catch_warnings():  # NumPy warns about the mean of an empty slice
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.asarray(ref(a, np_dim, keepdim), dtype=np.float64)
    got = fn(t, dim, keepdim)
    if name in ("argmax", "argmin"):
        np.testing.assert_array_equal(got.numpy(), expected)
        assert got.dtype is mt.int64
    else:
        assert_close(got, expected, t.dtype, n=_terms(a.shape, np_dim))


@pytest.mark.parametrize("length", AWKWARD_LENGTHS)
@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
def test_reduce_awkward_lengths(length: int, dtype: mt.DType) -> None:
    rows = 3
    t, a = pair(random_array(length, (rows, length), dtype), dtype)
    n = length
    assert_close(t.sum(1), a.sum(1), dtype, n=n)
    assert_close(t.sum(0), a.sum(0), dtype, n=rows)
    assert_close(t.sum(), a.sum(), dtype, n=rows * n)
    assert_close(t.mean(-1, keepdim=True), a.mean(-1, keepdims=True), dtype, n=n)
    assert_close(t.max(1).values, a.max(1), dtype)
    np.testing.assert_array_equal(t.max(1).indices.numpy(), a.argmax(1))
    assert_close(t.min(), a.min(), dtype)
    np.testing.assert_array_equal(t.argmax(1).numpy(), a.argmax(1))
    np.testing.assert_array_equal(t.argmin(1).numpy(), a.argmin(1))
    np.testing.assert_array_equal(t.argmax().numpy(), a.argmax())
    # the reduced dim not last: a transposed view
    assert_close(t.T.sum(0), a.sum(1), dtype, n=n)
    assert_close(t.T.max(0).values, a.max(1), dtype)


# Apart from the reductions above: the course grades softmax_rows as a task of
# its own (course/tasks.toml selects by name).
@pytest.mark.parametrize("length", AWKWARD_LENGTHS)
@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
def test_softmax_awkward_lengths(length: int, dtype: mt.DType) -> None:
    t, a = pair(random_array(length, (3, length), dtype), dtype)
    assert_close(mt.softmax(t, 1), _np_softmax(a, 1), dtype, n=length)


def test_argmax_first_of_ties() -> None:
    t = mt.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    assert t.argmax(1).tolist() == [1, 0]
    assert t.argmin(1).tolist() == [3, 0]
    assert t.argmax().item() == 1
    assert mt.ones(3, 4).expand(2, 3, 4).argmax().item() == 0


def test_reduce_keepdim_shapes() -> None:
    t = mt.ones(2, 3, 4)
    assert t.sum().shape == ()
    assert t.sum(keepdim=True).shape == (1, 1, 1)
    assert t.sum(1).shape == (2, 4)
    assert t.sum(-1, keepdim=True).shape == (2, 3, 1)
    assert t.sum((0, 2)).shape == (3,)
    assert t.sum((0, -1), keepdim=True).shape == (1, 3, 1)
    assert t.mean((0, 1, 2)).item() == 1.0
    assert t.argmax(2).shape == (2, 3)
    assert t.argmax(keepdim=True).shape == (1, 1, 1)
    assert mt.sum(t, 0).shape == (3, 4) and mt.max(t, 1).values.shape == (2, 4)


def test_reductions_of_empty_dims() -> None:
    e = mt.zeros(0, 3)
    assert e.sum().item() == 0.0
    assert e.sum(0).tolist() == [0.0, 0.0, 0.0]
    assert e.prod(0).tolist() == [1.0, 1.0, 1.0]
    assert e.sum(1).shape == (0,)
    assert np.isnan(e.mean().item())
    with pytest.raises(IndexError, match=r"\(0, 3\)"):
        e.max(0)
    with pytest.raises(IndexError):
        e.argmax()
    assert e.max(1).values.shape == (0,)


def test_zero_dim_reductions() -> None:
    s = mt.tensor(2.5)
    assert s.sum().item() == 2.5 and s.max(0).values.item() == 2.5 and s.sum(-1).item() == 2.5
    assert s.argmax().item() == 0.0
    assert s.mean().item() == 2.5


def _np_softmax(a: np.ndarray, dim: int) -> np.ndarray:
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _np_logsumexp(a: np.ndarray, dim: Any, keepdim: bool) -> np.ndarray:
    m = np.max(a, axis=dim, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)
    r = np.log(np.sum(np.exp(a - m), axis=dim, keepdims=True)) + m
    return r if keepdim else np.squeeze(r, axis=dim)


@given(data=st.data(), log=st.booleans(), scale=st.sampled_from([1.0, 100.0, 1e4]))
def test_softmax_on_strided_views(data: st.DataObject, log: bool, scale: float) -> None:
    t, a = data.draw(strided_views(min_dims=1, allow_empty=False))
    dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
    t, a = t * scale, (a.astype(t.dtype.np_dtype) * np.float64(scale)).astype(t.dtype.np_dtype).astype(np.float64)
    expected = _np_softmax(a, dim)
    n = a.shape[dim] if a.ndim else 1
    if log:
        with np.errstate(divide="ignore"):
            ref = (a - a.max(axis=dim, keepdims=True)) - np.log(
                np.exp(a - a.max(axis=dim, keepdims=True)).sum(axis=dim, keepdims=True))
        assert_close(mt.log_softmax(t, dim), ref, t.dtype, n=n)
        assert_close(t.log_softmax(dim), ref, t.dtype, n=n)
    else:
        assert_close(mt.softmax(t, dim), expected, t.dtype, n=n)


def test_softmax_is_stable_for_large_inputs() -> None:
    t = mt.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]])
    ref = _np_softmax(np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]]), 1)
    assert_close(mt.softmax(t, 1), ref, mt.float32)
    assert np.isfinite(mt.log_softmax(t, 1).numpy()).all()
    assert_close(mt.softmax(mt.tensor(3.0), 0), 1.0, mt.float32)


@given(data=st.data(), keepdim=st.booleans(), scale=st.sampled_from([1.0, 1e3, 1e5]))
def test_logsumexp_on_strided_views(data: st.DataObject, keepdim: bool, scale: float) -> None:
    t, a = data.draw(strided_views(min_dims=1, allow_empty=False))
    dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
    t, a = t * scale, (a.astype(t.dtype.np_dtype) * np.float64(scale)).astype(t.dtype.np_dtype).astype(np.float64)
    expected = _np_logsumexp(a, dim % a.ndim, keepdim)
    assert_close(mt.logsumexp(t, dim, keepdim=keepdim), expected, t.dtype, n=a.shape[dim])


def test_logsumexp_kernel_matches_the_chain_of_teaching_kernels() -> None:
    """One kernel per row under the fast policy; under teaching the chain of
    reductions the students write: the same values, a row of -inf included."""
    a = random_array(31, (5, 300), mt.float64) * 30
    a[1] = -np.inf
    a[2, 7] = np.inf
    t = mt.tensor(a)
    results = []
    for policy in ("fast", "teaching"):
        with mt.kernels.policy(policy):
            results.append([mt.logsumexp(t, 1).numpy(), mt.logsumexp(t.T, 0).numpy(), mt.logsumexp(t, 0).numpy()])
    for fast, teaching in zip(*results):
        np.testing.assert_allclose(fast, teaching, rtol=1e-12)


def test_logsumexp_extremes() -> None:
    t = mt.tensor([[-np.inf, -np.inf], [np.inf, 1.0], [1e30, 1e30], [0.0, -np.inf]], dtype=mt.float64)
    got = mt.logsumexp(t, 1).numpy()
    assert got[0] == -np.inf and got[1] == np.inf
    assert np.isclose(got[2], 1e30 + np.log(2))
    assert got[3] == 0.0
    assert mt.logsumexp(mt.ones(2, 3), (0, 1)).shape == ()


def test_max_and_min_over_a_dim_return_values_and_indices_as_torch() -> None:
    t = mt.tensor([[1.0, 5.0, 5.0], [7.0, 0.0, 2.0]])
    v, i = t.max(dim=1)  # batch size 2: must not unpack rows
    assert v.tolist() == [5.0, 7.0] and i.tolist() == [1.0, 0.0]
    r = mt.min(t, 0, keepdim=True)
    assert type(r).__name__ == "min" and r.values.tolist() == [[1.0, 0.0, 2.0]]
    assert r.indices.tolist() == [[0.0, 1.0, 1.0]]
    assert isinstance(t.max(), mt.Tensor) and t.max().item() == 7.0
    assert isinstance(t.max(dim=(0, 1)), mt.Tensor)  # a tuple of dims: values only (amax)
    assert t.amax(1).tolist() == [5.0, 7.0] and mt.amin(t, 0).tolist() == [1.0, 0.0, 2.0]
    assert isinstance(mt.return_types.max(v, i), tuple)


def test_many_short_rows_reduce_right_with_one_warp_per_row() -> None:
    """Thousands of contiguous rows of 256 to 2048 elements: the shape mt_reduce
    gives to the warp_rows rung once there are as many rows as the GPU holds
    warps (src/reduce.cu); every op against NumPy, and the rung by name."""
    a = np.random.default_rng(12).standard_normal((4096, 300)).astype(np.float32)
    t = mt.tensor(a)
    assert_close(t.sum(1), a.astype(np.float64).sum(1), mt.float32, n=300)  # the default, whichever rung
    got = mt.kernels.reduce(t, "sum", 1, "warp_rows")  # the rung by name, on any machine
    assert_close(got, a.astype(np.float64).sum(1), mt.float32, n=300)
    np.testing.assert_array_equal(mt.kernels.reduce(t, "max", 1, "warp_rows").numpy(), a.max(1))
    np.testing.assert_array_equal(mt.kernels.reduce(t, "argmin", 1, "warp_rows").numpy(), a.argmin(1))
    for length in (1, 7, 32, 33):  # rows shorter than a warp's loads: several rows a warp
        b = a[:1000, :length]
        assert_close(mt.kernels.reduce(mt.tensor(b), "sum", 1, "warp_rows"), b.astype(np.float64).sum(1),
                     mt.float32, n=length)
        np.testing.assert_array_equal(mt.kernels.reduce(mt.tensor(b), "argmax", 1, "warp_rows").numpy(),
                                      b.argmax(1))


@pytest.mark.parametrize("op", ["max", "min"])
@given(data=st.data(), keepdim=st.booleans())
def test_max_and_min_with_indices_on_strided_views(op: str, data: st.DataObject, keepdim: bool) -> None:
    """max(dim)/min(dim): values and int64 indices from one pass, against NumPy's
    max and argmax (the first of equal values), on views of any layout, ties
    from whole numbers, a NaN or two (the first NaN wins)."""
    t, a = data.draw(strided_views(min_dims=1, allow_empty=False))
    a = np.round(a * 2)  # whole numbers: ties
    if a.size > 1 and data.draw(st.booleans()):
        a.flat[data.draw(st.integers(0, a.size - 1))] = np.nan
    t = mt.tensor(a.astype(t.dtype.np_dtype))
    dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
    values, indices = getattr(t, op)(dim, keepdim)
    np_values = (np.max if op == "max" else np.min)(a, axis=dim, keepdims=keepdim)
    np_indices = _np_arg(np.argmax if op == "max" else np.argmin, a, dim, keepdim)
    assert indices.dtype is mt.int64 and values.dtype is t.dtype
    np.testing.assert_array_equal(values.numpy(), np_values)
    np.testing.assert_array_equal(indices.numpy(), np_indices)


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64, mt.int64, mt.bool])
@pytest.mark.parametrize("shape, dim", [((3, 1), 1), ((1, 7), 1), ((5, 2), 0), ((2, 3, 1025), 2),
                                        ((4, 5000), 1), ((1025, 3), 0), ((2, 0, 3), 2), ((9000, 5), 1)])
def test_max_with_indices_lengths_and_dtypes(dtype: mt.DType, shape: tuple, dim: int) -> None:
    """Rows of 1, 5, 1025 and 5000 elements, rows a multiple of nothing, an empty
    other dim, a reduced dim that is not the last, many short rows; every dtype."""
    rng = np.random.default_rng(sum(shape) + dim)
    a = rng.integers(-3, 4, shape)
    a = a > 0 if dtype is mt.bool else a.astype(dtype.np_dtype)
    t = mt.tensor(a)
    for op, np_value, np_arg in (("max", np.max, np.argmax), ("min", np.min, np.argmin)):
        values, indices = getattr(t, op)(dim)
        np.testing.assert_array_equal(values.numpy(), np_value(a, axis=dim))
        np.testing.assert_array_equal(indices.numpy(), np_arg(a, axis=dim))
        assert values.dtype is dtype


def test_max_with_indices_refuses_empty_dims_and_tuples() -> None:
    with pytest.raises(IndexError, match=r"\(2, 0\)"):
        mt.zeros(2, 0).max(1)
    s = mt.tensor(4.0)
    v, i = s.min(-1)
    assert v.item() == 4.0 and i.item() == 0 and i.dtype is mt.int64
    with pytest.raises(TypeError):
        mt.ops.reduce_with_indices("max", mt.ones(2, 3), (0, 1))


ROW_KERNELS = ("reduce_rows_warp", "reduce_rows_first_add", "reduce_rows_warp_rows", "reduce_rows_vectorized",
               "reduce_columns", "reduce_index_rows")


@pytest.mark.parametrize("shape, dim", [((40, 3000), 1), ((3000, 40), 0)])
def test_max_with_indices_reads_the_input_once(shape: tuple, dim: int) -> None:
    """max(dim) is one reduction launch, whichever kernel the layout and the policy
    pick, where values then indices were two (counted by the emulator)."""
    from minitensor import _lib

    if _lib.launch_count("reduce_rows_warp") < 0:
        pytest.skip("the CUDA build counts no launches")
    t = mt.tensor(random_array(7, shape, mt.float32))
    _lib.reset_launch_counts()
    values, indices = t.max(dim)
    assert sum(_lib.launch_count(k) for k in ROW_KERNELS) == 1
    np.testing.assert_array_equal(indices.numpy(), t.numpy().argmax(dim))


@pytest.mark.parametrize("value, dtype", [(-np.inf, np.float32), (np.inf, np.float64),
                                          (np.iinfo(np.int64).min, np.int64), (np.iinfo(np.int64).max, np.int64)])
@pytest.mark.parametrize("length", [7, 4096])
def test_arg_of_rows_of_the_identity_value(value: float, dtype: type, length: int) -> None:
    """A row whose every element equals a reducer's identity value (-inf for max,
    INT64_MAX for min, ...) still points at its first element: the loops that read
    a row in order let an element replace the identity even when they tie."""
    a = np.full((3, length), value, dtype=dtype)
    t = mt.tensor(a)
    for got in (t.argmax(1), t.argmin(1), t.max(1).indices, t.min(1).indices):
        np.testing.assert_array_equal(got.numpy(), np.zeros(3, dtype=np.int64))
    np.testing.assert_array_equal(t.max(1).values.numpy(), a[:, 0])


def _rows_of_packs(rng: np.random.Generator, dtype: type, rows: int, length: int, kind: str) -> np.ndarray:
    """rows x length values: whole numbers (ties), ties with NaNs, random, or all -inf."""
    if kind == "ties":
        return rng.integers(-3, 4, (rows, length)).astype(dtype)
    if kind == "nan":
        a = rng.integers(-2, 3, (rows, length)).astype(dtype)
        a[rng.random((rows, length)) < 0.01] = np.nan
        return a
    if kind == "-inf":
        return np.full((rows, length), -np.inf, dtype=dtype)
    return rng.standard_normal((rows, length)).astype(dtype)


@pytest.mark.parametrize("warps", [0, 1, 2, 4, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_index_rows_kernel_against_numpy(warps: int, dtype: type) -> None:
    """The one-pass row kernel (src/reduce_index_rows.cu) by name, every group size:
    max/min with indices, amax/amin, argmax/argmin against NumPy's first maximum
    (the first NaN), on rows of 1 to 1025 Packs, row counts off the block's rows,
    rows sliced out of wider ones and batched (3 dims)."""
    rng = np.random.default_rng(warps * 7 + (dtype is np.float64))
    width = 4 if dtype is np.float32 else 2
    for c, packs in enumerate((1, 3, 32, 33, 128, 129, 257, 1025)):
        kind = ("ties", "nan", "random", "-inf")[c % 4]
        rows = (1, 3, 9, 17)[c % 4] if packs < 512 else 2
        if c % 3 == 1:  # rows sliced out of wider ones, from an aligned start
            t = mt.tensor(_rows_of_packs(rng, dtype, rows, (packs + 2) * width, kind))[:, width:(packs + 1) * width]
        elif c % 3 == 2:  # batched: three dims
            t = mt.tensor(_rows_of_packs(rng, dtype, 2 * rows, packs * width, kind).reshape(2, rows, packs * width))
        else:
            t = mt.tensor(_rows_of_packs(rng, dtype, rows, packs * width, kind))
        ref = t.numpy()
        for op in ("max", "min"):
            values, indices = mt.ops.reduce_index_rows(op, t, warps)
            np.testing.assert_array_equal(indices.numpy(), (np.argmax if op == "max" else np.argmin)(ref, -1))
            np.testing.assert_array_equal(values.numpy(), (np.max if op == "max" else np.min)(ref, -1))
            np.testing.assert_array_equal(mt.ops.reduce_index_rows("a" + op, t, warps).numpy(),
                                          (np.max if op == "max" else np.min)(ref, -1))
            np.testing.assert_array_equal(mt.ops.reduce_index_rows("arg" + op, t, warps).numpy(),
                                          (np.argmax if op == "max" else np.argmin)(ref, -1))


def test_index_rows_kernel_refuses_layouts_it_cannot_read() -> None:
    """Rows of stride 2, off 16 bytes, not whole Packs, int64, a bad group size: a
    ValueError that says what the kernel reads."""
    t = mt.tensor(np.arange(48, dtype=np.float32).reshape(4, 12))
    for bad in (t[:, ::2], t[:, 1:9], t[:, :6], t.long()):
        with pytest.raises(ValueError, match="16-byte"):
            mt.ops.reduce_index_rows("max", bad)
    with pytest.raises(ValueError, match="warps is 3"):
        mt.ops.reduce_index_rows("argmax", t, 3)
    with pytest.raises(ValueError, match="op must be"):
        mt.ops.reduce_index_rows("sum", t)


@pytest.mark.parametrize("policy", ["fast", "teaching"])
@pytest.mark.parametrize("shape", [(3, 512), (5, 4096), (2, 3, 1028), (17, 2048)])
def test_max_min_arg_over_long_rows_under_both_policies(policy: str, shape: tuple) -> None:
    """max(dim)/min(dim), amax, argmax, argmin over the last dim of rows long enough
    for the one-pass row kernel (fast policy) or first_add (teaching): the same
    results, NumPy's, with ties, a NaN and a row of -inf."""
    rng = np.random.default_rng(sum(shape))
    a = rng.integers(-3, 4, shape).astype(np.float32)
    a.reshape(-1, shape[-1])[0, 5] = np.nan
    a.reshape(-1, shape[-1])[-1] = -np.inf
    with mt.kernels.policy(policy):
        t = mt.tensor(a)
        for op, np_value, np_arg in (("max", np.max, np.argmax), ("min", np.min, np.argmin)):
            values, indices = getattr(t, op)(-1)
            np.testing.assert_array_equal(values.numpy(), np_value(a, -1))
            np.testing.assert_array_equal(indices.numpy(), np_arg(a, -1))
            np.testing.assert_array_equal(getattr(t, "a" + op)(-1).numpy(), np_value(a, -1))
            np.testing.assert_array_equal(getattr(t, "arg" + op)(-1).numpy(), np_arg(a, -1))
