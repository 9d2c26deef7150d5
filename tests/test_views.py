"""Views share storage and match NumPy; indexing, setitem, copies, joins,
gather and scatter_add."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitensor as mt
from helpers import assert_close, dtypes, pair, random_array, seeds, shapes, strided_views


def shares_storage(a: mt.Tensor, b: mt.Tensor) -> bool:
    return a._storage is b._storage


@given(data=st.data())
def test_strided_views_match_numpy(data: st.DataObject) -> None:
    t, a = data.draw(strided_views())
    assert t.shape == a.shape
    np.testing.assert_array_equal(t.numpy(), a.astype(t.dtype.np_dtype))
    assert_close(t.contiguous(), a, t.dtype)
    assert t.contiguous().is_contiguous()
    assert t.is_contiguous() == (t.contiguous() is t)


@given(data=st.data())
def test_reshape_and_view(data: st.DataObject) -> None:
    t, a = data.draw(strided_views())
    n = a.size
    if n == 0:
        shape = data.draw(st.sampled_from([(0,), (0, 3), (2, 0, 1)]))
    else:
        d1 = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
        d2 = data.draw(st.sampled_from([d for d in range(1, n // d1 + 1) if (n // d1) % d == 0]))
        shape = data.draw(st.sampled_from([(n,), (d1, n // d1), (d1, d2, n // (d1 * d2))]))
    expected = a.reshape(shape).astype(t.dtype.np_dtype)
    r = t.reshape(*shape)
    np.testing.assert_array_equal(r.numpy(), expected)
    if n:
        assert t.reshape(-1, *shape[1:]).shape == shape
    try:
        v = t.view(shape)
    except ValueError as e:
        assert "reshape" in str(e)  # the message says what to do instead
        assert not shares_storage(r, t)  # reshape had to copy
    else:
        assert shares_storage(v, t) and shares_storage(r, t)  # no copy when a view works
        np.testing.assert_array_equal(v.numpy(), expected)


def test_view_shares_storage_and_writes_through() -> None:
    base = mt.zeros(4, 6)
    v = base.view(2, 12)
    v[1, 2] = 5.0
    assert base[2, 2].item() == 5.0
    p = base.permute(1, 0)
    p[0, 3] = 7.0
    assert base[3, 0].item() == 7.0
    assert shares_storage(base.T, base) and shares_storage(base[1:3], base)
    assert shares_storage(base.unsqueeze(0).expand(3, 4, 6), base)


def test_view_needs_compatible_strides() -> None:
    t = mt.zeros(4, 6).T  # (6, 4), strides (1, 6)
    with pytest.raises(ValueError, match=r"\(6, 4\)") as info:
        t.view(24)
    assert "reshape" in str(info.value)
    assert isinstance(info.value, RuntimeError)  # torch raises RuntimeError
    r = t.reshape(24)
    assert r.is_contiguous() and not shares_storage(r, t)
    assert mt.zeros(4, 6)[:, :3].view(4, 3).shape == (4, 3)
    assert mt.zeros(4, 6).T.view(2, 3, 4).strides == (3, 1, 6)


def test_view_of_split_and_merged_chunks() -> None:
    base = mt.arange(24).reshape(2, 3, 4)
    a = np.arange(24.0).reshape(2, 3, 4)
    v = base.permute(1, 0, 2)  # (3, 2, 4): no view to (3, 8) exists, reshape copies
    np.testing.assert_array_equal(v.reshape(3, 8).numpy(), a.transpose(1, 0, 2).reshape(3, 8))
    w = base[:, :, ::2]  # (2, 3, 2) strides (12, 4, 2)
    assert shares_storage(w.view(6, 2), base)
    np.testing.assert_array_equal(w.view(6, 2).numpy(), a[:, :, ::2].reshape(6, 2))
    e = mt.ones(3, 1).expand(3, 4)
    assert e.view(3, 2, 2).strides == (1, 0, 0)
    assert mt.tensor(5.0).view(1, 1).shape == (1, 1)
    assert mt.ones(1, 1).view(()).shape == ()


def test_permute_transpose_squeeze_unsqueeze_flatten() -> None:
    a = np.arange(24.0).reshape(2, 3, 4)
    t = mt.tensor(a)
    np.testing.assert_array_equal(t.permute(2, 0, 1).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(t.permute((1, 2, 0)).numpy(), a.transpose(1, 2, 0))
    np.testing.assert_array_equal(t.transpose(0, -1).numpy(), a.swapaxes(0, 2))
    assert t.unsqueeze(0).shape == (1, 2, 3, 4) and t.unsqueeze(-1).shape == (2, 3, 4, 1)
    assert t.unsqueeze(1).shape == (2, 1, 3, 4)
    assert t.unsqueeze(1).squeeze().shape == (2, 3, 4)
    s = mt.zeros(1, 3, 1)
    assert s.squeeze().shape == (3,) and s.squeeze(0).shape == (3, 1)
    assert s.squeeze(1).shape == (1, 3, 1) and s.squeeze((0, 2)).shape == (3,)
    assert t.flatten().shape == (24,) and t.flatten(1).shape == (2, 12)
    assert t.flatten(0, 1).shape == (6, 4)
    assert mt.tensor(1.0).flatten().shape == (1,)
    assert mt.tensor(1.0).unsqueeze(0).shape == (1,)


def test_expand() -> None:
    t = mt.tensor([[1.0], [2.0]])
    e = t.expand(2, 3)
    assert e.strides == (1, 0) and e.tolist() == [[1.0] * 3, [2.0] * 3]
    assert t.expand(4, -1, 3).shape == (4, 2, 3)
    assert t.expand((2, 2)).shape == (2, 2)
    assert t.expand_as(mt.zeros(5, 2, 4)).shape == (5, 2, 4)


def test_basic_indexing_like_numpy() -> None:
    a = np.arange(60.0).reshape(3, 4, 5)
    t = mt.tensor(a)
    keys = [
        0, -1, (1, 2), (slice(None), 1), (Ellipsis, 0), (1, Ellipsis, -2), (None, 0),
        (slice(1, None), None, slice(None, None, 2)), slice(0, 3, 2), (slice(None), slice(1, 3), 4),
        (Ellipsis, None), (2, 3, 4), slice(5, 10), (slice(None), slice(3, 1)), np.int64(1),
        (0, slice(None, None, 3), slice(-2, None)),
    ]
    for key in keys:
        got = t[key]
        expected = a[key]
        assert got.shape == expected.shape, key
        np.testing.assert_array_equal(got.numpy(), expected)
        assert shares_storage(got, t)


@given(data=st.data())
def test_setitem_matches_numpy(data: st.DataObject) -> None:
    dtype = data.draw(dtypes)
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1))
    a = random_array(data.draw(seeds), shape, dtype).astype(np.float64)
    t = mt.tensor(a.astype(dtype.np_dtype))
    key = tuple(
        slice(data.draw(st.integers(0, n)), None, data.draw(st.integers(1, 2))) for n in shape
    )
    if data.draw(st.booleans()):
        value = data.draw(st.floats(-5, 5, width=32))
        t[key] = value
        a[key] = value
    else:
        target = a[key].shape
        vshape = tuple(1 if data.draw(st.booleans()) else n for n in target)
        v = random_array(data.draw(seeds), vshape, dtype)
        t[key] = mt.tensor(v)
        a[key] = v.astype(np.float64)
    assert_close(t, a, dtype)


def test_setitem_with_overlapping_source() -> None:
    t = mt.arange(6.0)
    t[1:] = t[:-1]
    assert t.tolist() == [0.0, 0.0, 1.0, 2.0, 3.0, 4.0]
    m = mt.arange(9.0).reshape(3, 3)
    m[...] = m.T
    assert m.tolist() == [[0.0, 3.0, 6.0], [1.0, 4.0, 7.0], [2.0, 5.0, 8.0]]
    m[0] = mt.tensor([1.0, 2.0, 3.0], dtype=mt.float64)  # cast to the destination dtype
    assert m.dtype is mt.float32 and m[0].tolist() == [1.0, 2.0, 3.0]


def test_cannot_write_into_an_expanded_view() -> None:
    e = mt.zeros(3, 1).expand(3, 4)
    with pytest.raises(RuntimeError, match=r"shape \(4,\) with strides \(0,\)"):
        e[0] = 1.0
    with pytest.raises(RuntimeError, match="clone"):
        e.fill_(2.0)


def test_setitem_shape_mismatch_leaves_the_tensor_unchanged() -> None:
    t = mt.zeros(2, 3)
    with pytest.raises(ValueError, match=r"\(2,\).*\(2, 3\)"):
        t[:, :] = mt.ones(2)
    assert t.tolist() == [[0.0] * 3] * 2


def test_numpy_of_a_sparse_view_of_a_big_storage() -> None:
    base = mt.arange(10000)
    v = base[::1000]
    assert v.tolist() == [float(i) for i in range(0, 10000, 1000)]
    assert base[5:7].numpy().tolist() == [5.0, 6.0]


def test_cat_and_stack() -> None:
    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(6.0, 12.0).reshape(2, 3)
    ta, tb = mt.tensor(a), mt.tensor(b)
    np.testing.assert_array_equal(mt.cat([ta, tb]).numpy(), np.concatenate([a, b]))
    np.testing.assert_array_equal(mt.cat([ta, tb.T.T], dim=-1).numpy(), np.concatenate([a, b], -1))
    np.testing.assert_array_equal(mt.cat([ta.T, tb.T], 0).numpy(), np.concatenate([a.T, b.T], 0))
    np.testing.assert_array_equal(mt.stack([ta, tb]).numpy(), np.stack([a, b]))
    np.testing.assert_array_equal(mt.stack([ta, tb], dim=2).numpy(), np.stack([a, b], 2))
    assert mt.cat([ta, mt.zeros(0, 3)]).shape == (2, 3)
    assert mt.cat([ta, tb.double()]).dtype is mt.float64
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        mt.cat([ta, tb.T])
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        mt.stack([ta, tb.T])


@given(dtype=dtypes, seed=seeds, rows=st.integers(1, 5), cols=st.integers(1, 6),
       k=st.integers(1, 7))
def test_gather_and_scatter_add(dtype: mt.DType, seed: int, rows: int, cols: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    t, a = pair(random_array(seed, (rows, cols), dtype), dtype)
    idx = rng.integers(0, cols, size=(rows, k))
    g = t.gather(1, mt.tensor(idx))
    assert_close(g, np.take_along_axis(a, idx, axis=1), dtype)
    idx0 = rng.integers(0, rows, size=(k, cols))
    assert_close(mt.gather(t, 0, mt.tensor(idx0)), np.take_along_axis(a, idx0, axis=0), dtype)
    # scatter_add: repeated indices add up
    src = random_array(seed + 1, (rows, k), dtype)
    expected = a.copy()
    for i in range(rows):
        for j in range(k):
            expected[i, idx[i, j]] += src[i, j]
    out = t.scatter_add(1, mt.tensor(idx), mt.tensor(src))
    assert_close(out, expected, dtype, n=k)
    assert_close(t, a, dtype)  # out of place
    t.scatter_add_(1, mt.tensor(idx), mt.tensor(src))
    assert_close(t, expected, dtype, n=k)


def test_gather_index_out_of_range_is_an_error() -> None:
    t = mt.zeros(2, 3)
    with pytest.raises(mt.MinitensorError):
        t.gather(1, mt.tensor([[0.0], [3.0]]))
    out = mt.zeros(2, 3)
    with pytest.raises(mt.MinitensorError):
        out.scatter_add_(1, mt.tensor([[0.0], [5.0]]), mt.ones(2, 1))
    assert out.tolist() == [[0.0] * 3] * 2  # never half-written


def test_clone_and_detach() -> None:
    t = mt.tensor([1.0, 2.0], requires_grad=True)
    c = t.clone()
    assert not shares_storage(c, t)
    d = t.detach()
    assert shares_storage(d, t) and not d.requires_grad
