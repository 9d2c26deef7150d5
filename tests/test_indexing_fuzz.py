"""Fuzz of indexing against NumPy: random keys (ints, slices with any step,
None, ..., int index arrays as lists, NumPy arrays or int64 tensors, bool
masks) on random shapes, contiguous or strided, read and written. The
reference is NumPy's, with torch's one difference: an int beside index
arrays is a basic index (its dim removed first), so the key is applied in
two steps, the ints, then the rest. A write whose key names an element
twice must be refused (IndexError) and change nothing. Deterministic under
CI=true (tests/conftest.py); about a second (MINITENSOR_FUZZ_EXAMPLES=n for
more cases than the 60 CI runs)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitensor as mt


def torch_reference(x: np.ndarray, key: tuple) -> Any:
    """x[key] as torch reads it, written with NumPy: ints first (a view), then the
    rest, in which NumPy's placement rule is torch's."""
    first, rest = [], []
    for k in key:
        if isinstance(k, int):
            first.append(k)
        elif k is None:
            rest.append(k)
        elif k is Ellipsis:
            first.append(k)
            rest.append(k)
        else:
            width = k.ndim if isinstance(k, np.ndarray) and k.dtype == bool else 1
            first.extend([slice(None)] * width)
            rest.append(k)
    return x[tuple(first)], tuple(rest)


@st.composite
def cases(draw) -> tuple[tuple[int, ...], tuple, list[str]]:
    """A shape, a key over it, and how each index array is given (list, numpy, tensor)."""
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=3)))
    key: list[Any] = []
    forms: list[str] = []
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    kinds = draw(st.lists(st.sampled_from(["slice", "int", "array", "array", "mask", "none", "ellipsis"]),
                          min_size=1, max_size=4))
    d = 0  # the dim the next item indexes
    for kind in kinds:
        if kind == "none":
            key.append(None)
            continue
        if kind == "ellipsis":
            key.append(Ellipsis)
            break  # the rest of the dims are taken whole
        if d >= len(shape):
            break
        size = shape[d]
        if kind == "int" and size:
            key.append(int(rng.integers(-size, size)))
            d += 1
        elif kind == "array":
            index_shape = draw(st.sampled_from([(2,), (3,), (1,), (0,), (2, 1), (1, 3)]))
            key.append(rng.integers(-size, size, index_shape) if size else np.zeros((0,), np.int64))
            forms.append(draw(st.sampled_from(["list", "numpy", "tensor"])))
            d += 1
        elif kind == "mask":
            width = draw(st.integers(1, len(shape) - d))
            key.append(rng.random(shape[d:d + width]) < 0.5)
            forms.append(draw(st.sampled_from(["numpy", "tensor"])))
            d += width
        else:  # a slice (also for an int into an empty dim)
            start, stop = (draw(st.one_of(st.none(), st.integers(-5, 5))) for _ in range(2))
            key.append(slice(start, stop, draw(st.sampled_from([None, 1, 2, -1, -2, -3]))))
            d += 1
    return shape, tuple(key), forms


def as_given(key: tuple, forms: list[str]) -> tuple:
    """The key with each index array in the form drawn for it."""
    out, it = [], iter(forms)
    for k in key:
        if isinstance(k, np.ndarray):
            form = next(it)
            k = k.tolist() if form == "list" else mt.tensor(k) if form == "tensor" else k
            if isinstance(k, list) and not k:
                k = np.zeros((0,), np.int64)  # [] would be read as an empty float list by NumPy
        out.append(k)
    return tuple(out)


@settings(max_examples=int(os.environ.get("MINITENSOR_FUZZ_EXAMPLES", "60")), deadline=None)
@given(case=cases(), strided=st.booleans())
def test_indexing_reads_and_writes_as_numpy_with_torchs_rule(case, strided) -> None:
    shape, key, forms = case
    x = np.arange(float(np.prod(shape))).reshape(shape) + 0.5
    order = tuple(reversed(range(len(shape))))
    t = mt.tensor(x.transpose(order).copy()).permute(*order) if strided else mt.tensor(x)  # strided: reversed dims
    base, rest = torch_reference(x, key)
    try:
        want = base[rest]
    except IndexError:
        with pytest.raises(IndexError):
            t[as_given(key, forms)]
        return
    got = t[as_given(key, forms)]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
    ids = np.arange(x.size).reshape(shape)
    id_base, _ = torch_reference(ids, key)
    picked = id_base[rest]
    value = -np.arange(picked.size, dtype=np.float64).reshape(picked.shape) - 1.0
    repeated = len(np.unique(picked)) != picked.size
    has_array = any(isinstance(k, np.ndarray) for k in key)
    if repeated and has_array:
        with pytest.raises(IndexError, match="repeated"):
            t[as_given(key, forms)] = mt.tensor(value)
        np.testing.assert_array_equal(t.numpy(), x)
        return
    ref = x.copy()
    ref_base, _ = torch_reference(ref, key)
    if isinstance(ref_base, np.ndarray):
        ref_base[rest] = value  # a view of ref (ints and full slices only)
    else:  # ints only: one element
        ref[tuple(k for k in key if k is not None)] = value.item()
    t[as_given(key, forms)] = mt.tensor(value)
    np.testing.assert_array_equal(t.numpy(), ref)
