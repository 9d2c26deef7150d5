"""F.layer_norm on its kernels (src/layernorm.cu): values against NumPy, gradients
against finite differences and against the composite of eight ops, launches counted.

The C tests (tests/c/test_layernorm.c) check the kernels' numbers on every row
length class; these check the road from Python: normalized shapes of several
dims, non-contiguous inputs, optional weight and bias, empty tensors, errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import _lib
from gradcheck import gradcheck
from helpers import assert_close, random_array


def np_layer_norm(x: np.ndarray, k: int, w=None, b=None, eps: float = 1e-5) -> np.ndarray:
    axes = tuple(range(x.ndim - k, x.ndim))
    mean = x.mean(axes, keepdims=True)
    out = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axes, keepdims=True) + eps)
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    return out


CASES = [  # (input shape, normalized shape)
    ((3, 5), (5,)),
    ((2, 3, 33), (33,)),
    ((4, 2, 6), (2, 6)),
    ((1, 1025), (1025,)),
    ((2, 4100), (4100,)),
    ((7,), (7,)),
    ((3, 1), (1,)),
]


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("shape,normalized", CASES)
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_values_match_numpy(dtype: mt.DType, shape: tuple, normalized: tuple, affine: str) -> None:
    x = random_array(1, shape, dtype)
    w = random_array(2, normalized, dtype) if affine != "none" else None
    b = random_array(3, normalized, dtype) if affine == "both" else None
    got = F.layer_norm(mt.tensor(x), normalized, None if w is None else mt.tensor(w),
                       None if b is None else mt.tensor(b))
    n = int(np.prod(normalized))
    assert_close(got, np_layer_norm(x.astype(np.float64), len(normalized), w, b), dtype, n=n)


def test_a_non_contiguous_input_is_normalized_as_its_values() -> None:
    x = random_array(4, (6, 5), mt.float64)
    t = mt.tensor(x).T  # (5, 6), rows of stride 5
    assert not t.is_contiguous()
    assert_close(F.layer_norm(t, (6,)), np_layer_norm(x.T, 1), mt.float64, n=6)


def test_inputs_far_from_zero_keep_their_precision() -> None:
    # The variance is taken of deviations: E[x^2] - E[x]^2 would cancel here in float32.
    x = 1000.0 + random_array(5, (4, 256), mt.float32)
    got = F.layer_norm(mt.tensor(x, dtype=mt.float32), (256,)).numpy()
    ref = np_layer_norm(x.astype(np.float64), 1)
    assert np.max(np.abs(got - ref)) < 2e-3  # float32's 6e-8 x 1000 / spread 1, x a few


@pytest.mark.parametrize("shape,normalized", [((3, 4), (4,)), ((2, 3, 2), (3, 2)), ((2, 5), (5,))])
def test_gradients_match_finite_differences(shape: tuple, normalized: tuple) -> None:
    rng = np.random.default_rng(6)
    x, w, b = rng.standard_normal(shape), rng.standard_normal(normalized), rng.standard_normal(normalized)
    gradcheck(lambda m, x, w, b: m.nn.functional.layer_norm(x, normalized, w, b), [x, w, b])
    gradcheck(lambda m, x: m.nn.functional.layer_norm(x, normalized), [x])


def test_gradients_match_the_composite() -> None:
    rng = np.random.default_rng(7)
    x, w, b = rng.standard_normal((9, 300)), rng.standard_normal(300), rng.standard_normal(300)
    g = rng.standard_normal((9, 300))
    grads = []
    for fn in (F.layer_norm, F.layer_norm_composite):
        leaves = [mt.tensor(a, requires_grad=True) for a in (x, w, b)]
        (fn(*leaves[:1], (300,), *leaves[1:]) * mt.tensor(g)).sum().backward()
        grads.append([leaf.grad.numpy() for leaf in leaves])
    for got, ref in zip(*grads):
        assert_close(got, ref, mt.float64, n=300 * 9)


def test_only_the_wanted_gradients_are_computed() -> None:
    x = mt.tensor(random_array(8, (3, 4), mt.float64))
    w = mt.tensor(random_array(9, (4,), mt.float64), requires_grad=True)
    F.layer_norm(x, (4,), w).sum().backward()
    assert x.grad is None and w.grad is not None


def test_empty_inputs() -> None:
    x = mt.zeros((0, 4))
    assert F.layer_norm(x, (4,), mt.ones(4), mt.zeros(4)).shape == (0, 4)
    w = mt.ones(4, requires_grad=True)
    F.layer_norm(mt.zeros((0, 4), requires_grad=True), (4,), w).sum().backward()
    assert w.grad.tolist() == [0.0] * 4


def test_bad_arguments_name_the_shapes() -> None:
    x = mt.randn(3, 4)
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5,\)"):
        F.layer_norm(x, (5,))
    with pytest.raises(ValueError, match=r"weight has shape \(3,\), expected the normalized shape \(4,\)"):
        F.layer_norm(x, (4,), mt.ones(3))
    with pytest.raises(mt.DTypeError, match="bias is float64 but the input is float32"):
        F.layer_norm(x, (4,), None, mt.zeros(4, dtype=mt.float64))


def test_one_launch_forward_and_two_backward() -> None:
    """Forward: one kernel. Backward: one pass over g and x for dx and the
    parameters' partial sums, then one column sum of both parameters' partials."""
    if _lib.launch_count("layer_norm_rows_registers") < 0:
        pytest.skip("the CUDA build counts no launches")
    x = mt.randn(8, 64, requires_grad=True)
    w, b = mt.ones(64, requires_grad=True), mt.zeros(64, requires_grad=True)
    _lib.reset_launch_counts()
    y = F.layer_norm(x, (64,), w, b)
    assert _lib.launch_count("layer_norm_rows_registers") == 1
    g = mt.ones(8, 64)
    _lib.reset_launch_counts()
    y.backward(g)
    assert _lib.launch_count("layer_norm_backward_fused") == 1
    assert _lib.launch_count("layer_norm_column_sums") == 1
    assert _lib.launch_count("layer_norm_backward_rows") == 0


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("rows, n", [(1, 4), (3, 7), (37, 64), (5, 1028), (300, 33), (2, 8192), (1, 9000)])
def test_all_three_gradients_match_the_composite(dtype: mt.DType, rows: int, n: int) -> None:
    """dx, dweight and dbias of the one-pass kernel (16-byte loads where n is a
    multiple of the Pack, odd n, rows off the block count, rows too long for
    registers) against the composite's gradients on the same inputs."""
    x_np = random_array(rows + n, (rows, n), dtype) * 3 + 1
    w_np, b_np = random_array(1, (n,), dtype), random_array(2, (n,), dtype)
    g_np = random_array(3, (rows, n), dtype)
    grads = []
    for fn in (F.layer_norm, F.layer_norm_composite):
        x, w, b = (mt.tensor(a, requires_grad=True) for a in (x_np, w_np, b_np))
        fn(x, (n,), w, b).backward(mt.tensor(g_np))
        grads.append([x.grad, w.grad, b.grad])
    for got, ref in zip(*grads):
        assert_close(got, ref.numpy(), dtype, n=rows * n)
