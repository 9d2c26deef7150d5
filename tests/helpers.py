"""Shared test helpers: the one tolerance policy and the hypothesis strategies.

Tolerance (``assert_close``): every result is compared with a float64 NumPy
reference as ``|got - ref| <= atol + rtol * |ref|``, with

    float32: atol = 1e-5,  rtol = 1e-4
    float64: atol = 1e-12, rtol = 1e-10

both multiplied by sqrt(n) for a result that accumulates n terms (a sum, a
matmul's inner dim, a softmax row), because rounding errors of a sum grow
with its length. NaN must match NaN and infinities must match exactly.
int64 and bool results must be exact (compared as they are, not as floats).

Strategies build awkward inputs by default: shapes with 0- and 1-sized dims,
broadcastable pairs, and strided views (permuted, sliced with steps, indexed
with an offset, expanded with stride 0) made the same way in minitensor and
in NumPy.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitensor as mt

TOLERANCES = {
    "float32": (1e-5, 1e-4),  # (atol, rtol)
    "float64": (1e-12, 1e-10),
    "int64": (0.0, 0.0),
    "bool": (0.0, 0.0),
}

DTYPES = [mt.float32, mt.float64]


def tolerance(dtype: Any, n: int = 1) -> tuple[float, float]:
    """(atol, rtol) for a result of dtype that accumulates n terms."""
    atol, rtol = TOLERANCES[mt._dtype.to_dtype(dtype).name]
    scale = math.sqrt(max(n, 1))
    return atol * scale, rtol * scale


def assert_close(got: Any, ref: Any, dtype: Any, n: int = 1) -> None:
    """got (a Tensor or array) matches the float64 reference ref within tolerance(dtype, n)."""
    if isinstance(got, mt.Tensor):
        assert got.dtype is mt._dtype.to_dtype(dtype), f"dtype {got.dtype}, expected {dtype}"
        got = got.numpy()
    if not mt._dtype.to_dtype(dtype).is_floating_point:
        got, ref = np.asarray(got), np.asarray(ref)
        assert got.shape == ref.shape, f"shape {got.shape}, expected {ref.shape}"
        np.testing.assert_array_equal(got, ref.astype(got.dtype))
        return
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, f"shape {got.shape}, expected {ref.shape}"
    atol, rtol = tolerance(dtype, n)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)


def np_dtype(dtype: Any) -> np.dtype:
    return mt._dtype.to_dtype(dtype).np_dtype


# ---- data -----------------------------------------------------------------------


def random_array(seed: int, shape: tuple[int, ...], dtype: Any, low: Optional[float] = None,
                 high: Optional[float] = None) -> np.ndarray:
    """Random values of dtype (normal, or uniform in [low, high))."""
    rng = np.random.default_rng(seed)
    if low is None:
        values = rng.standard_normal(shape)
    else:
        values = rng.uniform(low, high, shape)
    return np.asarray(values).astype(np_dtype(dtype))


def pair(array: np.ndarray, dtype: Any) -> tuple[mt.Tensor, np.ndarray]:
    """A tensor of array, and array in float64 (the reference's input)."""
    array = array.astype(np_dtype(dtype))
    return mt.tensor(array), array.astype(np.float64)


# ---- strategies ------------------------------------------------------------------

dtypes = st.sampled_from(DTYPES)
seeds = st.integers(0, 2**31 - 1)


def shapes(min_dims: int = 0, max_dims: int = 4, min_side: int = 0, max_side: int = 5) -> st.SearchStrategy:
    """Shapes including 0- and 1-sized dims."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def broadcastable_shapes(max_dims: int = 4, max_side: int = 4, min_side: int = 0) -> st.SearchStrategy:
    """A pair of shapes that broadcast together (NumPy rules)."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=2, min_dims=0, max_dims=max_dims, min_side=min_side, max_side=max_side
    ).map(lambda r: r.input_shapes)


@st.composite
def strided_views(draw: Any, dtype: Any = None, min_dims: int = 0, max_dims: int = 4,
                  low: Optional[float] = None, high: Optional[float] = None,
                  allow_empty: bool = True) -> tuple[mt.Tensor, np.ndarray]:
    """A minitensor view and the same NumPy view (float64) of one random base.

    Starting from a contiguous base, up to three transformations are applied
    to both: permute, slice with steps (an offset when it starts past 0),
    integer-index one dim (an offset, one dim less), insert a dim and expand
    it (stride 0), expand an existing size-1 dim.
    """
    dtype = draw(dtypes) if dtype is None else dtype
    min_side = 0 if allow_empty else 1
    base_shape = draw(shapes(min_dims=min_dims, max_dims=min(3, max_dims), min_side=min_side, max_side=6))
    base = random_array(draw(seeds), base_shape, dtype, low, high)
    t = mt.tensor(base)
    a = base.astype(np.float64)
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["permute", "slice", "index", "expand_new", "expand_one"]))
        if kind == "permute" and a.ndim >= 2:
            perm = draw(st.permutations(range(a.ndim)))
            t, a = t.permute(*perm), a.transpose(perm)
        elif kind == "slice" and a.ndim >= 1:
            key = []
            for size in a.shape:
                start = draw(st.integers(0, size))
                stop = draw(st.integers(start if not allow_empty else 0, size))
                if not allow_empty and stop <= start:
                    start, stop = 0, size
                step = draw(st.integers(1, 3))
                key.append(slice(start, stop, step))
            t, a = t[tuple(key)], a[tuple(key)]
        elif kind == "index" and a.ndim >= 1 and a.ndim > min_dims:
            d = draw(st.integers(0, a.ndim - 1))
            if a.shape[d] > 0:
                i = draw(st.integers(-a.shape[d], a.shape[d] - 1))
                key = (slice(None),) * d + (i,)
                t, a = t[key], a[key]
        elif kind == "expand_new" and a.ndim < max_dims:
            d = draw(st.integers(0, a.ndim))
            size = draw(st.integers(1, 3))
            t = t.unsqueeze(d)
            a = np.expand_dims(a, d)
            shape = a.shape[:d] + (size,) + a.shape[d + 1 :]
            t, a = t.expand(*shape), np.broadcast_to(a, shape)
        elif kind == "expand_one":
            ones = [d for d in range(a.ndim) if a.shape[d] == 1]
            if ones:
                d = draw(st.sampled_from(ones))
                size = draw(st.integers(1, 3))
                shape = a.shape[:d] + (size,) + a.shape[d + 1 :]
                t, a = t.expand(*shape), np.broadcast_to(a, shape)
    return t, a


def emulator_buildable() -> bool:
    """Whether this machine can build the emulator library: its host
    compiler finds Boost.Context (tools/setup.sh installs it; a GPU machine
    without network may lack it). Tests that build a fresh emulator copy of
    the repository (the course kit's) skip where it cannot."""
    global _EMULATOR_BUILDABLE
    if _EMULATOR_BUILDABLE is None:
        import os
        import shutil
        import subprocess
        import tempfile

        cxx = shutil.which("g++") or shutil.which("c++")
        # Compiled and linked: a machine may have Boost's headers without its
        # library (the H100 machine of the device tool has).
        probe = "#include <boost/context/fiber.hpp>\nint main() { return 0; }\n"
        with tempfile.TemporaryDirectory() as tmp:
            _EMULATOR_BUILDABLE = bool(cxx) and subprocess.run(
                [cxx, "-std=c++17", "-x", "c++", "-", "-o", os.path.join(tmp, "probe"), "-lboost_context"],
                input=probe, text=True, capture_output=True).returncode == 0
    return _EMULATOR_BUILDABLE


_EMULATOR_BUILDABLE: Optional[bool] = None


def all_cases() -> bool:
    """Whether to run a test's whole case list: on the GPU (the CUDA backend),
    or on the emulator under MT_TEST_ALL_CASES=1 (the variable the C tests read
    too, tests/c/tt_groups.h). Tests of kernels whose every launch the
    emulator's full checks make slow keep a few cases there and say why they
    suffice."""
    import os

    return mt.backend() == "cuda" or os.environ.get("MT_TEST_ALL_CASES", "") not in ("", "0")


# TF32 products (mt.backends.cuda.matmul / conv.allow_tf32): each operand rounded
# to 11 significant bits is off by at most 2^-11 relative, so a product by about
# 2^-10, then float sums: |got - exact| <= 2^-10 sum |terms| + 1e-5 (1 + |exact|),
# where sum |terms| is the same product of the operands' absolute values.
TF32_ATOL, TF32_RTOL, TF32_TERMS = 1e-5, 1e-5, 2.0**-10


def assert_within_tf32(got: Any, exact: np.ndarray, abs_terms: np.ndarray) -> None:
    """got (a Tensor or array) matches the float64 result exact of a TF32 product
    whose sums of |terms| are abs_terms, within the bound above."""
    if isinstance(got, mt.Tensor):
        got = got.numpy()
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == exact.shape, f"shape {got.shape}, expected {exact.shape}"
    bound = TF32_TERMS * abs_terms + TF32_ATOL + TF32_RTOL * np.abs(exact)
    worst = np.argmax(np.abs(got - exact) - bound)
    assert np.all(np.abs(got - exact) <= bound), (
        f"{np.sum(np.abs(got - exact) > bound)} elements past the TF32 bound; at flat index {worst}: "
        f"got {got.flat[worst]}, exact {exact.flat[worst]}, bound {bound.flat[worst]}")

