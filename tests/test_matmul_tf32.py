"""The tensor-core rungs (src/matmul_tf32.cu, "tf32_simple",
src/matmul_tf32_pipelined.cu, "tf32_pipelined", src/matmul_tf32_mma.cu,
"tf32_mma", and src/matmul_tf32_wgmma.cu with src/matmul_tf32_wgmma_mn.cu,
"tf32_wgmma", between which "tf32" chooses) and torch's switch for them, mt.backends.cuda.matmul.allow_tf32, on
both backends (the emulator runs the same kernels through its own WMMA
fragments, mma.sync, ldmatrix and wgmma twins and cp.async copies; the wgmma
rung needs an H100 on the GPU).

Inputs that are TF32 already make the products exact, so the result must
match float64's as closely as any float32 product; random inputs lose up to
2^-11 of each input, which bounds the error; the switch must be off by
default and change nothing for float64.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import minitensor as mt
from minitensor import _lib
from tests.helpers import assert_close


@pytest.fixture(autouse=True)
def tf32_off() -> Iterator[None]:
    yield
    mt.backends.cuda.matmul.allow_tf32 = False


def to_tf32(x: np.ndarray) -> np.ndarray:
    """x rounded to TF32 (10 bits of mantissa, ties away from zero), as the kernel rounds."""
    bits = x.astype(np.float32).view(np.uint32)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = np.where(finite, (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000), bits)
    return rounded.astype(np.uint32).view(np.float32)


SHAPES = [((1, 1), (1, 1)), ((65, 33), (33, 70)), ((7, 129), (129, 3)), ((3, 64, 16), (16, 64)),
          ((2, 1, 9, 8), (3, 8, 5)), ((5, 0), (0, 4)), ((0, 3), (3, 2))]


RUNGS = ["tf32", "tf32_simple", "tf32_pipelined", "tf32_wgmma", "tf32_tma"]


@pytest.mark.parametrize("rung", RUNGS)
@pytest.mark.parametrize("a_shape,b_shape", SHAPES)
def test_tf32_inputs_give_float32_results(a_shape: Any, b_shape: Any, rung: str) -> None:
    rng = np.random.default_rng(0)
    a = to_tf32(rng.standard_normal(a_shape))
    b = to_tf32(rng.standard_normal(b_shape))
    got = mt.kernels.matmul(mt.tensor(a), mt.tensor(b), rung).numpy()
    assert_close(got, a.astype(np.float64) @ b.astype(np.float64), mt.float32, n=a_shape[-1])


@pytest.mark.parametrize("rung", RUNGS)
@pytest.mark.parametrize("a_shape,b_shape", SHAPES[:5] + [((130, 50), (50, 67))])
def test_random_inputs_are_within_tf32_rounding(a_shape: Any, b_shape: Any, rung: str) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(a_shape).astype(np.float32), rng.standard_normal(b_shape).astype(np.float32)
    got = mt.kernels.matmul(mt.tensor(a), mt.tensor(b), rung).numpy()
    exact = a.astype(np.float64) @ b.astype(np.float64)
    # Each input off by at most 2^-11 relative: a product by 2^-10, plus float sums. The
    # wgmma and TMA rungs truncate (each input off by less than 2^-10): twice that.
    terms = 2.0**-9 if rung in ("tf32_wgmma", "tf32_tma") else 2.0**-10
    bound = terms * (np.abs(a).astype(np.float64) @ np.abs(b)) + 1e-5 * (1 + np.abs(exact))
    assert np.all(np.abs(got - exact) <= bound)


def test_tf32_runs_the_mma_rung() -> None:
    rng = np.random.default_rng(5)
    a = to_tf32(rng.standard_normal((2, 70, 45)))
    b = to_tf32(rng.standard_normal((45, 130)))
    ta, tb = mt.tensor(a), mt.tensor(b)
    got = mt.kernels.matmul(ta, tb, "tf32").numpy()
    np.testing.assert_array_equal(got, mt.kernels.matmul(ta, tb, "tf32_mma").numpy())
    assert_close(got, a.astype(np.float64) @ b, mt.float32, n=45)


@pytest.mark.parametrize("k", [40, 260])
def test_weight_gradient_layout_is_read_in_place(k: int) -> None:
    """dW = dz.T @ x: a a column-major view, b row-major. The wgmma rung reads
    both in place through its transposing stages (src/matmul_tf32_wgmma_mn.cu),
    K split in slices where the product has few tiles (K = 260 on an emulator
    of two SMs or more); "tf32" takes that kernel from 2^30 multiply-adds
    only, the mma.sync rung here."""
    rng = np.random.default_rng(6)
    dz = to_tf32(rng.standard_normal((k, 36)))
    x = to_tf32(rng.standard_normal((k, 20)))
    a, b = mt.tensor(dz).t(), mt.tensor(x)
    want = dz.T.astype(np.float64) @ x
    for rung, kernel in (("tf32_wgmma", "matmul_tf32_wgmma_mn"), ("tf32", "matmul_tf32_mma")):
        _lib.reset_launch_counts()
        assert_close(mt.kernels.matmul(a, b, rung).numpy(), want, mt.float32, n=k)
        assert _lib.launch_count(kernel) != 0  # -1 on the CUDA build: not counted


def test_strided_views_and_vectors() -> None:
    rng = np.random.default_rng(2)
    base = to_tf32(rng.standard_normal((40, 50)))
    a = mt.tensor(base).t()[::2]           # (25, 40), not contiguous
    b = mt.tensor(base)[:, 1::3]           # (40, 17)
    v = mt.tensor(to_tf32(rng.standard_normal(40)))
    mt.backends.cuda.matmul.allow_tf32 = True
    assert_close((a @ b).numpy(), a.numpy().astype(np.float64) @ b.numpy(), mt.float32, n=40)
    assert_close((a @ v).numpy(), a.numpy().astype(np.float64) @ v.numpy(), mt.float32, n=40)


def test_the_switch_is_off_by_default_and_routes_float32_only() -> None:
    assert mt.backends.cuda.matmul.allow_tf32 is False
    assert mt.get_float32_matmul_precision() == "highest"
    rng = np.random.default_rng(3)
    a = mt.tensor(rng.standard_normal((33, 70)).astype(np.float32))
    b = mt.tensor(rng.standard_normal((70, 20)).astype(np.float32))
    exact = (a @ b).numpy()
    np.testing.assert_array_equal(exact, mt.kernels.matmul(a, b).numpy())
    mt.set_float32_matmul_precision("high")
    assert mt.backends.cuda.matmul.allow_tf32 is True
    np.testing.assert_array_equal((a @ b).numpy(), mt.kernels.matmul(a, b, "tf32").numpy())
    assert not np.array_equal((a @ b).numpy(), exact)  # 70 random products: TF32 differs somewhere
    a64, b64 = a.double(), b.double()
    np.testing.assert_array_equal((a64 @ b64).numpy(), mt.kernels.matmul(a64, b64).numpy())
    mt.set_float32_matmul_precision("highest")
    assert mt.backends.cuda.matmul.allow_tf32 is False


def test_gradients_use_the_switch_too() -> None:
    rng = np.random.default_rng(4)
    a = to_tf32(rng.standard_normal((9, 8)))
    b = to_tf32(rng.standard_normal((8, 5)))
    mt.backends.cuda.matmul.allow_tf32 = True
    ta, tb = mt.tensor(a, requires_grad=True), mt.tensor(b, requires_grad=True)
    (ta @ tb).sum().backward()
    assert_close(ta.grad.numpy(), np.ones((9, 5)) @ b.T.astype(np.float64), mt.float32, n=5)
    assert_close(tb.grad.numpy(), a.T.astype(np.float64) @ np.ones((9, 5)), mt.float32, n=9)


def test_wrong_uses_are_refused() -> None:
    with pytest.raises(TypeError, match="True or False"):
        mt.backends.cuda.matmul.allow_tf32 = 1  # type: ignore[assignment]
    with pytest.raises(ValueError, match="highest"):
        mt.set_float32_matmul_precision("low")
    with pytest.raises(mt.DTypeError, match="float32"):
        mt.kernels.matmul(mt.ones(2, 2, dtype=mt.float64), mt.ones(2, 2, dtype=mt.float64), "tf32")
    with pytest.raises(ValueError, match="config"):
        mt.kernels.matmul(mt.ones(2, 2), mt.ones(2, 2), "tf32", config=0)
    with pytest.raises(mt.DTypeError, match="float32"):
        mt.kernels.matmul(mt.ones(2, 2, dtype=mt.float64), mt.ones(2, 2, dtype=mt.float64), "tf32_simple")
    with pytest.raises(ValueError, match="tf32_simple"):
        mt.kernels.matmul(mt.ones(2, 2), mt.ones(2, 2), "tf32_fast")
