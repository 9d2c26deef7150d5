"""Every rung of the kernel ladders gives the library's answer (against NumPy).

The matmul rungs also run in tests/test_matmul.py; here each ladder gets the
shapes that reach its fast paths: matmul operands whose rows are a whole
number of 16-byte Packs (row-major and transposed, partial and whole
128 x 128 tiles, every warptile configuration), reductions along every dim
with each rung (mt_reduce_variant), and transposed copies with each rung of
the transpose ladder (mt_copy_variant), next to the fast paths of mt_map and
mt_zip that use them (A.T.contiguous(), A + B.T, A + row). The rungs are run
through the public minitensor.kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import minitensor as mt
from helpers import assert_close, pair, random_array

DTYPES = [mt.float32, mt.float64]


def layout(t: Any, a: np.ndarray, transposed: bool) -> tuple[Any, np.ndarray]:
    """t and a, or the same matrix as a transposed view of a row-major copy."""
    if not transposed:
        return t, a
    return t.transpose(-2, -1).contiguous().transpose(-2, -1), a


@pytest.mark.parametrize("algo", mt.kernels.algorithms("matmul"))
@pytest.mark.parametrize("m, k, n", [(132, 36, 68), (128, 128, 128), (4, 20, 260), (33, 12, 8)])
@pytest.mark.parametrize("ta_t, tb_t", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_rungs_on_pack_friendly_shapes(algo: str, m: int, k: int, n: int, ta_t: bool, tb_t: bool) -> None:
    for dtype in DTYPES:
        ta, a = pair(random_array(m * k, (m, k), dtype), dtype)
        tb, b = pair(random_array(k * n, (k, n), dtype), dtype)
        ta, a = layout(ta, a, ta_t)
        tb, b = layout(tb, b, tb_t)
        assert_close(mt.kernels.matmul(ta, tb, algo), a @ b, dtype, n=k)


@pytest.mark.parametrize("config", range(len(mt.kernels.matmul_configs())))
def test_every_tile_config(config: int) -> None:
    rung = mt.kernels.matmul_config_rung(config)
    for dtype in DTYPES:
        ta, a = pair(random_array(1, (2, 68, 36), dtype), dtype)
        tb, b = pair(random_array(2, (36, 132), dtype), dtype)
        out = mt.empty(2, 68, 132, dtype=dtype)
        mt.kernels.matmul(ta, tb.unsqueeze(0).expand(2, 36, 132), rung, config, out=out)
        assert_close(out, np.matmul(a, b), dtype, n=36)


def test_matmul_config_errors() -> None:
    ta = mt.ones(3, 3)
    out = mt.empty(3, 3)
    with pytest.raises(ValueError):
        mt.kernels.matmul(ta, ta, "tiled", 0, out=out)
    with pytest.raises(ValueError):
        mt.kernels.matmul(ta, ta, "default", len(mt.kernels.matmul_configs()), out=out)
    with pytest.raises(ValueError):
        mt.kernels.matmul(ta, ta, "warptile", -1, out=out)
    assert "x" in mt.kernels.matmul_configs()[0]
    rungs = [mt.kernels.matmul_config_rung(i) for i in range(len(mt.kernels.matmul_configs()))]
    assert rungs == sorted(rungs, key=("warptile", "pipelined").index) and set(rungs) == {"warptile", "pipelined"}
    with pytest.raises(ValueError, match="belongs to the pipelined rung, not to algo 'warptile'"):
        mt.kernels.matmul(ta, ta, "warptile", rungs.index("pipelined"), out=out)
    with pytest.raises(ValueError, match="belongs to the warptile rung, not to algo 'pipelined'"):
        mt.kernels.matmul(ta, ta, "pipelined", 0, out=out)


REDUCE_CASES = [((7, 1025), 1), ((1025, 7), 0), ((3, 33, 64), 1), ((64, 5, 3), 0), ((2, 3, 128), 2)]


@pytest.mark.parametrize("algo", mt.kernels.algorithms("reduce"))
@pytest.mark.parametrize("op", mt.kernels.reduce_ops())
@pytest.mark.parametrize("shape, dim", REDUCE_CASES)
def test_reduce_rungs(algo: str, op: str, shape: tuple[int, ...], dim: int) -> None:
    for dtype in DTYPES + [mt.int64]:
        if dtype is mt.int64:  # exact sums; a product wraps around as NumPy's does
            x = np.random.default_rng(len(shape) + dim).integers(-9, 10, shape)
            tx = mt.tensor(x)
        else:
            low, high = (0.95, 1.05) if op == "prod" else (None, None)  # a product of 1025 stays finite
            tx, x = pair(random_array(len(shape) + dim, shape, dtype, low, high), dtype)
        out_shape = tuple(1 if d == dim else s for d, s in enumerate(shape))
        out_dtype = mt.int64 if op in ("argmax", "argmin") else dtype  # indices are int64
        out = mt.empty(*out_shape, dtype=out_dtype)
        mt.kernels.reduce(tx, op, dim, algo, keepdim=True, out=out)
        reference = {
            "sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min,
            "argmax": np.argmax, "argmin": np.argmin,
        }[op](x, axis=dim)
        reference = np.asarray(reference).reshape(out_shape)
        assert_close(out, reference, out_dtype, n=shape[dim])


def test_reduce_strided_input_every_rung() -> None:
    tx, x = pair(random_array(3, (40, 70), mt.float32), mt.float32)
    tx, x = tx.T, x.T  # (70, 40), reduced over dim 1: a strided row
    for algo in mt.kernels.algorithms("reduce"):
        out = mt.empty(70, 1)
        mt.kernels.reduce(tx, "sum", 1, algo, keepdim=True, out=out)
        assert_close(out, x.sum(axis=1, keepdims=True), mt.float32, n=40)


def test_reduce_unknown_algo() -> None:
    with pytest.raises(ValueError):
        mt.kernels.reduce(mt.ones(2, 3), "sum", 1, "quantum", keepdim=True, out=mt.empty(2, 1))


@pytest.mark.parametrize("algo", mt.kernels.algorithms("copy"))
@pytest.mark.parametrize("shape", [(33, 65), (2, 40, 70), (64, 64), (1, 5)])
def test_copy_rungs_transpose(algo: str, shape: tuple[int, ...]) -> None:
    for dtype in DTYPES:
        tx, x = pair(random_array(7, shape, dtype), dtype)
        view = tx.transpose(-2, -1)
        out = mt.empty(*view.shape, dtype=dtype)
        mt.kernels.copy(view, algo, out=out)
        assert_close(out, np.swapaxes(x, -2, -1), dtype)
        # and through the library's own copy
        assert_close(view.contiguous(), np.swapaxes(x, -2, -1), dtype)


def test_zip_fast_paths() -> None:
    for dtype in DTYPES:
        ta, a = pair(random_array(1, (33, 64), dtype), dtype)
        tb, b = pair(random_array(2, (64, 33), dtype), dtype)
        tr, r = pair(random_array(3, (64,), dtype), dtype)
        assert_close(ta + tb.T, a + b.T, dtype)
        assert_close(tb.T - ta, b.T - a, dtype)
        assert_close(ta - tr, a - r, dtype)
        assert_close(tr / (ta * ta + 1), r / (a * a + 1), dtype)
        assert_close(ta * 3.0 + ta, a * 3.0 + a, dtype)
