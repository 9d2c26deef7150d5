"""Elementwise ops against NumPy: unary maps, binary zips with broadcasting,
scalars on either side, comparisons and dtype promotion, on strided views."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import _lib
from minitensor._array import to_numpy
from helpers import (
    assert_close,
    broadcastable_shapes,
    dtypes,
    pair,
    random_array,
    seeds,
    strided_views,
)

_erf = np.vectorize(math.erf, otypes=[np.float64])
_K, _C = math.sqrt(2.0 / math.pi), 0.044715  # the tanh GELU's constants


def _phi(a: np.ndarray) -> np.ndarray:
    """The standard normal CDF."""
    return 0.5 * (1.0 + _erf(a / math.sqrt(2.0)))


def _gelu_tanh_grad(a: np.ndarray) -> np.ndarray:
    th = np.tanh(_K * (a + _C * a**3))
    return 0.5 * (1.0 + th) + 0.5 * a * (1.0 - th**2) * _K * (1.0 + 3.0 * _C * a**2)


def _activation_grad(op: str, s: float = 0.0, t: float = 0.0) -> Callable:
    """The gradient kernel of an activation, op + "_backward", through the ops layer."""
    return lambda g, x: to_numpy(mt.ops.activation_backward(op, g, x, s, t))


# torch's activations refuse integer tensors; so do these (a DTypeError).
FLOAT_ONLY = ("gelu", "gelu_tanh", "silu", "elu", "leaky_relu", "hardtanh")

# name -> (minitensor function, NumPy reference, input range or None for normal data)
UNARY: dict[str, tuple[Callable, Callable, Any]] = {
    "neg": (lambda t: -t, lambda a: -a, None),
    "exp": (mt.exp, np.exp, None),
    "log": (mt.log, np.log, (0.05, 5.0)),
    "relu": (mt.relu, lambda a: np.maximum(a, 0.0), None),
    "sigmoid": (mt.sigmoid, lambda a: 1.0 / (1.0 + np.exp(-a)), None),
    "tanh": (mt.tanh, np.tanh, None),
    "abs": (mt.abs, np.abs, None),
    "sqrt": (mt.sqrt, np.sqrt, (0.0, 5.0)),
    "reciprocal": (lambda t: t.reciprocal(), lambda a: 1.0 / a, (0.1, 3.0)),
    "sign": (lambda t: t.sign(), np.sign, None),
    "softplus": (F.softplus, lambda a: np.logaddexp(0.0, a), None),
    "erf": (mt.erf, np.vectorize(math.erf, otypes=[np.float64]), None),
    "gelu": (F.gelu, lambda a: a * _phi(a), None),
    "gelu_tanh": (lambda t: F.gelu(t, approximate="tanh"), lambda a: 0.5 * a * (1.0 + np.tanh(_K * (a + _C * a**3))),
                  None),
    "silu": (F.silu, lambda a: a / (1.0 + np.exp(-a)), None),
    "elu": (lambda t: F.elu(t, alpha=0.7), lambda a: np.where(a > 0, a, 0.7 * np.expm1(np.minimum(a, 0.0))), None),
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.1), lambda a: np.where(a > 0, a, 0.1 * a), None),
    "hardtanh": (lambda t: F.hardtanh(t, -0.5, 1.5), lambda a: np.clip(a, -0.5, 1.5), None),
    "copy": (lambda t: t.clone(), lambda a: a, None),
    "fill": (lambda t: t.clone().fill_(2.5), lambda a: np.full_like(a, 2.5), None),
    "add_scalar": (lambda t: t + 1.5, lambda a: a + 1.5, None),
    "mul_scalar": (lambda t: t * -2.0, lambda a: a * -2.0, None),
    "pow_scalar": (lambda t: t ** 3, lambda a: a ** 3, (-2.0, 2.0)),
    "rpow_scalar": (lambda t: 2.0 ** t, lambda a: 2.0 ** a, (-3.0, 3.0)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary_on_strided_views(name: str, data: st.DataObject) -> None:
    fn, ref, domain = UNARY[name]
    low, high = domain if domain else (None, None)
    t, a = data.draw(strided_views(low=low, high=high))
    assert_close(fn(t), ref(a), t.dtype)


def test_unary_methods_match_functions() -> None:
    t = mt.tensor([[0.5, -1.0], [2.0, 3.0]])
    for name in ("exp", "relu", "sigmoid", "tanh", "abs"):
        assert getattr(t, name)().tolist() == getattr(mt, name)(t).tolist()
    assert abs(t).tolist() == [[0.5, 1.0], [2.0, 3.0]]
    assert (+t) is t


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
def test_activations_special_values_and_empty(dtype: mt.DType) -> None:
    """The tails (no overflow in silu's or gelu's exp), NaN passing through, the
    bounds of hardtanh (gradient 0 there, as torch), and empty tensors."""
    values = np.array([-1000.0, -30.0, -1.0, 0.0, 1.0, 30.0, 1000.0, np.nan, np.inf, -np.inf])
    t = mt.tensor(values, dtype=dtype)
    with np.errstate(all="ignore"):
        for name in FLOAT_ONLY:
            fn, ref, _ = UNARY[name]
            if name in ("silu", "gelu_tanh"):  # NumPy's formula makes inf * 0 = NaN at -inf
                continue
            assert_close(fn(t), ref(values), dtype)
    assert_close(F.silu(t), [-0.0, -30.0 / (1 + np.exp(30.0)), -1 / (1 + np.e), 0.0, 1 / (1 + np.exp(-1.0)), 30.0,
                             1000.0, np.nan, np.inf, np.nan], dtype)
    # the gradient kernels alone (autograd's own rules are another task's)
    x = mt.tensor([-0.5, -0.25, 1.0, 1.5, 2.0], dtype=dtype)
    grad = mt.ops.activation_backward("hardtanh", mt.ones(5, dtype=dtype), x, -0.5, 1.5)
    assert to_numpy(grad).tolist() == [0.0, 1.0, 1.0, 0.0, 0.0]
    for name in FLOAT_ONLY:
        empty = mt.zeros(0, 3, dtype=dtype)
        assert UNARY[name][0](empty).shape == (0, 3)
        assert mt.ops.activation_backward(name, empty, empty).shape == (0, 3)
    with pytest.raises(ValueError, match="min_val"):
        F.hardtanh(t, 2.0, 1.0)
    with pytest.raises(ValueError, match="inplace"):
        F.silu(t, inplace=True)
    with pytest.raises(TypeError, match="alpha"):
        F.elu(t, alpha="1")


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 1023, 4097])
def test_contiguous_maps_around_a_pack(n: int, dtype: mt.DType) -> None:
    """The 16-byte Pack kernel (src/map.cu) on lengths around a Pack, from an
    aligned tensor and from x[1:], whose first element is not aligned (into a
    fresh out: no Packs), and into y[1:] (the same distance from a boundary as
    x[1:]: Packs after a head of single elements). Nothing outside y[1:] is
    written. On the emulator, which counts launches, the kernel is checked too:
    one launch, the Pack kernel exactly when out and in lie equally far from a
    16-byte boundary (under MINITENSOR_EMU_CHECK=full a buffer ends against a
    guard page, so where it starts depends on its size)."""
    a = np.random.default_rng(n).standard_normal(n + 1) * 3
    x = mt.tensor(a, dtype=dtype)

    def check_kernel(out: Any, src: Any) -> None:
        if n == 0 or _lib.launch_count("*") < 0:  # nothing launched; the CUDA build counts nothing
            return
        assert _lib.launch_count("*") == 1
        same_distance = out.data_ptr() % 16 == src.data_ptr() % 16
        assert _lib.launch_count("map_contiguous_vec") == int(same_distance)

    with mt.kernels.policy("fast"):
        for name in ("gelu", "gelu_tanh", "silu", "exp"):
            fn, ref, _ = UNARY[name]
            for src, want in ((x[:n], a[:n]), (x[1:], a[1:])):
                _lib.reset_launch_counts()
                got = fn(src)
                check_kernel(got, src)
                assert_close(got, ref(want), dtype)
        for dt in (dtype, mt.int64, mt.bool):
            src = x if dt == dtype else x.to(dt)
            y = mt.zeros(n + 2, dtype=dt)
            _lib.reset_launch_counts()
            y[1:n + 1] = src[1:]
            check_kernel(y[1:n + 1], src[1:])
            want = np.concatenate([[0], to_numpy(src)[1:], [0]])
            assert to_numpy(y).tolist() == want.astype(to_numpy(y).dtype).tolist()


def test_activation_modules() -> None:
    x = mt.tensor([[-2.0, -0.5, 0.0, 3.0]])
    assert_close(mt.nn.SiLU()(x), F.silu(x), mt.float32)
    assert_close(mt.nn.ELU(0.5)(x), F.elu(x, 0.5), mt.float32)
    assert_close(mt.nn.LeakyReLU(0.2)(x), [[-0.4, -0.1, 0.0, 3.0]], mt.float32)
    assert_close(mt.nn.Hardtanh(-1.0, 2.0)(x), [[-1.0, -0.5, 0.0, 2.0]], mt.float32)
    assert "negative_slope=0.2" in repr(mt.nn.LeakyReLU(0.2))
    with pytest.raises(ValueError, match="min_val"):
        mt.nn.Hardtanh(1.0, -1.0)


def test_unary_special_values() -> None:
    t = mt.tensor([0.0, -1.0, np.inf, -np.inf, np.nan], dtype=mt.float64)
    assert_close(mt.exp(t), np.exp([0.0, -1.0, np.inf, -np.inf, np.nan]), mt.float64)
    with np.errstate(all="ignore"):
        assert_close(mt.log(t), np.log([0.0, -1.0, np.inf, -np.inf, np.nan]), mt.float64)
    assert_close(mt.sigmoid(mt.tensor([-1000.0, 1000.0])), [0.0, 1.0], mt.float32)
    # log(1 + exp(x)) written naively overflows at x = 1000 (exp is inf) and
    # loses everything at x = -1000; softplus's kernel does neither.
    assert_close(F.softplus(mt.tensor([-1000.0, 0.0, 1000.0])), [0.0, np.log(2.0), 1000.0], mt.float32)
    with pytest.raises(ValueError, match="beta=2"):
        F.softplus(mt.ones(2), beta=2)
    assert_close(mt.relu(t), [0.0, 0.0, np.inf, 0.0, np.nan], mt.float64)


BINARY: dict[str, tuple[Callable, Callable]] = {
    "add": (lambda x, y: x + y, np.add),
    "sub": (lambda x, y: x - y, np.subtract),
    "mul": (lambda x, y: x * y, np.multiply),
    "div": (lambda x, y: x / y, np.divide),
    "maximum": (mt.maximum, np.maximum),
    "minimum": (mt.minimum, np.minimum),
    "lt": (lambda x, y: x < y, np.less),
    "le": (lambda x, y: x <= y, np.less_equal),
    "gt": (lambda x, y: x > y, np.greater),
    "ge": (lambda x, y: x >= y, np.greater_equal),
    "eq": (lambda x, y: x == y, np.equal),
    "ne": (lambda x, y: x != y, np.not_equal),
    "pow": (lambda x, y: x ** y, np.power),
    "floor_divide": (lambda x, y: x // y, np.floor_divide),
    "remainder": (lambda x, y: x % y, np.remainder),
    "relu_backward": (lambda g, x: to_numpy(mt.ops.relu_backward(g, x)), lambda g, x: np.where(x > 0, g, 0.0)),
    "gelu_backward": (_activation_grad("gelu"),
                      lambda g, x: g * (_phi(x) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))),
    "gelu_tanh_backward": (_activation_grad("gelu_tanh"), lambda g, x: g * _gelu_tanh_grad(x)),
    "silu_backward": (_activation_grad("silu"),
                      lambda g, x: g / (1 + np.exp(-x)) * (1 + x * (1 - 1 / (1 + np.exp(-x))))),
    "elu_backward": (_activation_grad("elu", 0.7), lambda g, x: np.where(x > 0, g, g * 0.7 * np.exp(x))),
    "leaky_relu_backward": (_activation_grad("leaky_relu", 0.1), lambda g, x: np.where(x > 0, g, 0.1 * g)),
    "hardtanh_backward": (_activation_grad("hardtanh", -0.5, 1.0),
                          lambda g, x: np.where((x <= -0.5) | (x >= 1.0), 0.0, g)),
    # on masks: the bitwise ops take int64 and bool tensors only
    "bitwise_and": (lambda x, y: (x > 0) & (y > 0), lambda a, b: (a > 0) & (b > 0)),
    "bitwise_or": (lambda x, y: (x > 0) | (y > 0), lambda a, b: (a > 0) | (b > 0)),
    "bitwise_xor": (lambda x, y: (x > 0) ^ (y > 0), lambda a, b: (a > 0) ^ (b > 0)),
}


def test_every_op_of_the_library_has_a_case() -> None:
    """The op lists of src/minitensor.h are the one list of elementwise ops: the
    library reports them (names and dtype rules), the Python layers read them,
    and each has a case here, which calls it through its Python entry point."""
    assert set(UNARY) == set(mt._lib.op_names("map"))
    assert set(BINARY) == set(mt._lib.op_names("zip"))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ops_take_int64_tensors(name: str) -> None:
    """Every op takes an int64 tensor: one whose dtype rule has no int64 ("f":
    exp, erf, ...) computes in float32, as torch; the others in int64 (unless
    a float scalar promotes it)."""
    fn, ref, _ = UNARY[name]
    if name in FLOAT_ONLY:
        with pytest.raises(mt.DTypeError, match="float"):
            fn(mt.tensor([1, 2, 3]))
        return
    got = fn(mt.tensor([1, 2, 3]))
    if not mt.ops.op_takes("map", name, mt.int64):
        assert got.dtype is mt.float32
    assert_close(got, ref(np.array([1.0, 2.0, 3.0])), got.dtype)


def _operands(name: str, shape: tuple[int, ...], dtype: mt.DType, seed: int) -> np.ndarray:
    if name in ("pow",):
        return random_array(seed, shape, mt.float64, 0.2, 2.0)
    if name in ("div", "floor_divide", "remainder"):
        sign = np.where(np.random.default_rng(seed + 1).random(shape) < 0.5, -1.0, 1.0)
        return (sign * random_array(seed, shape, mt.float64, 0.2, 3.0)).astype(np.float64)
    if name in ("lt", "le", "gt", "ge", "eq", "ne", "maximum", "minimum"):
        # small integers: plenty of ties
        return np.round(random_array(seed, shape, mt.float64) * 2)
    return random_array(seed, shape, mt.float64)


def _out(name: str, dtype: mt.DType) -> mt.DType:
    """The result's dtype: bool for a comparison (and the bitwise cases, on masks), else the operands'."""
    return mt.bool if name in ("lt", "le", "gt", "ge", "eq", "ne") or name.startswith("bitwise") else dtype


@pytest.mark.parametrize("name", sorted(BINARY))
@given(shapes=broadcastable_shapes(), dtype=dtypes, seed=seeds)
def test_binary_broadcasting(name: str, shapes: tuple, dtype: mt.DType, seed: int) -> None:
    fn, ref = BINARY[name]
    ta, a = pair(_operands(name, shapes[0], dtype, seed), dtype)
    tb, b = pair(_operands(name, shapes[1], dtype, seed + 7), dtype)
    assert_close(fn(ta, tb), ref(a, b).astype(np.float64), _out(name, dtype))


@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_binary_on_strided_views(name: str, data: st.DataObject) -> None:
    fn, ref = BINARY[name]
    low, high = (0.2, 3.0) if name in ("div", "pow", "floor_divide", "remainder") else (None, None)
    t, a = data.draw(strided_views(low=low, high=high))
    # the second operand: a suffix of the view's shape with some dims set to 1
    suffix = a.shape[data.draw(st.integers(0, a.ndim)) :]
    shape = tuple(1 if data.draw(st.booleans()) else n for n in suffix)
    u, b = pair(_operands(name, shape, t.dtype, data.draw(seeds)), t.dtype)
    assert_close(fn(t, u), ref(a, b).astype(np.float64), _out(name, t.dtype))
    assert_close(fn(u, t), ref(b, a).astype(np.float64), _out(name, t.dtype))


SCALARS = [-2.5, -1, 0.0, 0.5, 3]


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "lt", "le", "gt", "ge", "eq", "ne",
                                  "maximum", "minimum"])
@given(data=st.data(), scalar=st.sampled_from(SCALARS))
def test_scalar_on_either_side(name: str, data: st.DataObject, scalar: float) -> None:
    fn, ref = BINARY[name]
    t, a = data.draw(strided_views(low=0.2, high=3.0))
    a = a.astype(t.dtype.np_dtype).astype(np.float64)
    if name in ("maximum", "minimum"):
        result, expected = fn(t, scalar), ref(a, scalar)
        assert_close(result, expected.astype(np.float64), t.dtype)
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        assert_close(fn(t, scalar), ref(a, scalar).astype(np.float64), _out(name, t.dtype))
        assert_close(fn(scalar, t), ref(scalar, a).astype(np.float64), _out(name, t.dtype))


@given(data=st.data(), exponent=st.sampled_from([0, 1, 2, 3, 0.5, -1, -2.5]))
def test_pow_scalar_exponent(data: st.DataObject, exponent: float) -> None:
    t, a = data.draw(strided_views(low=0.2, high=3.0))
    assert_close(t**exponent, a**exponent, t.dtype)


@given(data=st.data(), base=st.sampled_from([0.5, 2, 3.5]))
def test_pow_scalar_base(data: st.DataObject, base: float) -> None:
    t, a = data.draw(strided_views(low=-2.0, high=2.0))
    assert_close(base**t, base**a, t.dtype)


@given(shapes=broadcastable_shapes(), dtype=dtypes, seed=seeds)
def test_pow_tensor_tensor(shapes: tuple, dtype: mt.DType, seed: int) -> None:
    ta, a = pair(random_array(seed, shapes[0], dtype, 0.2, 3.0), dtype)
    tb, b = pair(random_array(seed + 1, shapes[1], dtype, -2.0, 2.0), dtype)
    assert_close(ta**tb, a**b, dtype)
    assert_close(ta.pow(tb), a**b, dtype)


def test_pow_of_negative_base_with_integer_exponent() -> None:
    t = mt.tensor([-2.0, -1.0, 0.0, 3.0])
    assert (t**2).tolist() == [4.0, 1.0, 0.0, 9.0]
    assert (t**3).tolist() == [-8.0, -1.0, 0.0, 27.0]


@pytest.mark.parametrize("name", ["add", "mul", "sub", "div", "maximum", "lt"])
def test_mixed_dtypes_promote_to_float64(name: str) -> None:
    fn, ref = BINARY[name]
    a32 = np.array([[0.1, 0.2, 0.3]], dtype=np.float32)
    b64 = np.array([[0.7], [1.3]], dtype=np.float64)
    expected = ref(a32.astype(np.float64), b64)
    r1 = fn(mt.tensor(a32), mt.tensor(b64))
    r2 = fn(mt.tensor(b64), mt.tensor(a32))
    out = _out(name, mt.float64)  # a comparison compares in float64 and gives bool
    assert_close(r1, expected, out)
    assert_close(r2, ref(b64, a32.astype(np.float64)), out)


def test_python_scalars_keep_the_tensor_dtype() -> None:
    t = mt.tensor([1.0, 2.0])
    assert (t + 1.5).dtype is mt.float32
    assert (2 * t).dtype is mt.float32
    assert (t / 3).dtype is mt.float32
    assert (mt.tensor([1.0], dtype=mt.float64) + np.float32(1)).dtype is mt.float64


def test_comparisons_give_bool() -> None:
    t = mt.tensor([1.0, 2.0, 3.0], dtype=mt.float64)
    r = t > 1.5
    assert r.dtype is mt.bool and r.tolist() == [False, True, True]
    assert (t == 2).tolist() == [False, True, False]
    assert (t != 2).tolist() == [True, False, True]
    assert (1.5 < t).tolist() == [False, True, True]
    assert ((t > 1.5) * t).tolist() == [0.0, 2.0, 3.0]  # a mask still multiplies straight in


def test_numpy_arrays_are_not_silently_mixed_in() -> None:
    t = mt.ones(3)
    with pytest.raises(TypeError, match=r"mt|minitensor\.tensor"):
        t + np.ones(3)
    with pytest.raises(TypeError, match=r"minitensor\.tensor"):
        np.ones(3) + t
    with pytest.raises(TypeError):
        t * "a"
    with pytest.raises(TypeError):
        mt.exp([1.0, 2.0])


def test_in_place_methods() -> None:
    t = mt.zeros(2, 3)
    v = t[0]
    v.fill_(2.0)
    assert t.tolist() == [[2.0] * 3, [0.0] * 3]
    t.add_(1.0)
    t.mul_(mt.tensor([1.0, 2.0, 3.0]))
    assert t.tolist() == [[3.0, 6.0, 9.0], [1.0, 2.0, 3.0]]
    t.sub_(1).div_(2)
    assert t.tolist() == [[1.0, 2.5, 4.0], [0.0, 0.5, 1.0]]
    t.zero_()
    assert t.tolist() == [[0.0] * 3] * 2


def test_where() -> None:
    cond = mt.tensor([[1.0, 0.0, 1.0]])
    a = mt.tensor([[np.inf], [2.0]])
    b = mt.tensor([np.nan, -1.0, 5.0])
    got = mt.where(cond, a, b).numpy()
    expected = np.where(np.array([[1.0, 0.0, 1.0]]) != 0, [[np.inf], [2.0]], [np.nan, -1.0, 5.0])
    np.testing.assert_array_equal(got, expected)
    assert mt.where(cond, 1.0, 0.0).tolist() == [[1.0, 0.0, 1.0]]
    assert mt.where(mt.tensor([0.0, 2.0]), mt.tensor([1.0, 1.0]), -1.0).tolist() == [-1.0, 1.0]


@pytest.mark.parametrize("policy", ["fast", "teaching"])
def test_where_on_views_and_mixed_dtypes(policy: str) -> None:
    """One kernel under the fast policy, the stacked gather under teaching: the
    same exact selections on strided, broadcast views with a float32 condition
    and float64 values (NaN in the condition selects a, as any non-zero)."""
    from minitensor import _lib

    rng = np.random.default_rng(8)
    c = rng.integers(0, 2, (5, 1)).astype(np.float32)
    c[0, 0] = np.nan
    a = rng.standard_normal((4, 5))
    b = rng.standard_normal(8)
    with mt.kernels.policy(policy):
        _lib.reset_launch_counts()
        got = mt.where(mt.tensor(c), mt.tensor(a).T, mt.tensor(b)[::2]).numpy()
        if policy == "fast" and _lib.launch_count("where_strided") >= 0:
            assert _lib.launch_count("where_strided") == 1
    np.testing.assert_array_equal(got, np.where(c != 0, a.T, b[::2]))


def test_empty_tensors_pass_through() -> None:
    e = mt.zeros(0, 3)
    assert (e + 1).shape == (0, 3)
    assert mt.exp(e).shape == (0, 3)
    assert (e * mt.ones(3)).shape == (0, 3)
    assert (mt.ones(2, 1) + mt.zeros(0)).shape == (2, 0)


def test_comparisons_with_lists_and_numpy_arrays_are_elementwise() -> None:
    t = mt.tensor([1.0, 2.0, 3.0])
    a = np.array([1.0, 0.0, 3.0])
    assert (t == a).tolist() == [1.0, 0.0, 1.0]
    assert (a == t).tolist() == [1.0, 0.0, 1.0]  # NumPy defers to the tensor
    assert (t != [1, 0, 3]).tolist() == [0.0, 1.0, 0.0]
    assert (t < [2, 2, 2]).tolist() == [1.0, 0.0, 0.0]
    assert (a > t).tolist() == [0.0, 0.0, 0.0]
    assert (t >= (3, 3, 3)).tolist() == [0.0, 0.0, 1.0]
    assert (t == 2).tolist() == [0.0, 1.0, 0.0]
    m = mt.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=mt.float64)
    assert (m == [1, 4]).tolist() == [[1.0, 0.0], [0.0, 1.0]]  # broadcast, in m's dtype
    with pytest.raises(mt.ShapeError, match=r"\(0,\)"):
        t != []
    assert (t == None) is False  # noqa: E711 - not a tensor operand: identity, as torch
