"""The everyday API a PyTorch user reaches for (issue: integer and boolean tensors,
full indexing, and the everyday API), the part that needs no new dtype: clamp,
var/std, eye, broadcast_shapes/broadcast_tensors, allclose, Tensor.data, the
device spellings (.to(device), .cpu(), .cuda()) and the loss modules. Values
against NumPy (strided views, empty and size-1 dims), gradients against finite
differences and torch's documented rules."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from gradcheck import gradcheck
from helpers import assert_close, random_array
from minitensor import nn


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
def test_clamp_matches_numpy_with_nan_and_tensor_bounds(dtype: mt.DType) -> None:
    a = random_array(1, (4, 6), dtype) * 3
    a[0, 0] = np.nan
    t = mt.tensor(a).T  # a strided view
    np.testing.assert_array_equal(t.clamp(-1.0, 2.0).numpy(), np.clip(a.T, -1.0, 2.0))
    np.testing.assert_array_equal(mt.clamp(t, min=0.5).numpy(), np.maximum(a.T, 0.5))
    np.testing.assert_array_equal(t.clip(max=-0.5).numpy(), np.minimum(a.T, -0.5))
    lo = random_array(2, (4,), dtype) - 1  # broadcast along the rows of t (6, 4)
    np.testing.assert_array_equal(t.clamp(mt.tensor(lo), 1.0).numpy(), np.clip(a.T, lo, 1.0))
    # min > max: every element becomes max, as torch's min(max(x, lo), hi).
    assert mt.tensor([0.0, 5.0]).clamp(3.0, 1.0).tolist() == [1.0, 1.0]
    assert mt.zeros(0, 3).clamp(0, 1).shape == (0, 3)
    with pytest.raises(ValueError, match="at least one of min and max"):
        t.clamp()


def test_clamp_gradient_passes_inside_the_bounds_and_at_them() -> None:
    x = mt.tensor([-2.0, -1.0, 0.0, 1.0, 2.0], dtype=mt.float64, requires_grad=True)
    x.clamp(-1.0, 1.0).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]  # torch's: 1 where min <= x <= max
    gradcheck(lambda m, x: x.clamp(-0.5, 0.5), [np.array([-0.9, -0.2, 0.3, 0.8])])


@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), ((0, 1), False), (-1, False)])
def test_var_and_std_match_numpy(dim, keepdim) -> None:
    a = random_array(3, (5, 7), mt.float64)
    t = mt.tensor(a)[:, ::1].T.T  # same values through views
    axis = dim if dim is None or isinstance(dim, int) else tuple(dim)
    for correction in (1, 0):
        assert_close(t.var(dim, keepdim=keepdim, correction=correction),
                     a.var(axis=axis, ddof=correction, keepdims=keepdim), mt.float64, n=35)
        assert_close(mt.std(t, dim, keepdim=keepdim, correction=correction),
                     a.std(axis=axis, ddof=correction, keepdims=keepdim), mt.float64, n=35)
    assert_close(t.var(0, unbiased=False), a.var(axis=0), mt.float64, n=5)
    gradcheck(lambda m, x: x.var(1), [a])


def test_var_of_too_few_elements_is_nan_as_torch() -> None:
    assert np.isnan(mt.tensor([3.0]).var().item())  # 0 / 0
    assert mt.tensor([1.0, 2.0]).var(correction=3).item() == np.inf  # a positive sum over max(0, N - c) = 0
    with pytest.raises(ValueError, match="unbiased or correction"):
        mt.ones(3).var(unbiased=True, correction=1)


def test_eye() -> None:
    np.testing.assert_array_equal(mt.eye(3).numpy(), np.eye(3))
    np.testing.assert_array_equal(mt.eye(2, 5, dtype=mt.float64).numpy(), np.eye(2, 5))
    np.testing.assert_array_equal(mt.eye(4, 1).numpy(), np.eye(4, 1))
    assert mt.eye(0).shape == (0, 0) and mt.eye(3, 0).shape == (3, 0)
    assert mt.eye(2, requires_grad=True).requires_grad
    with pytest.raises(ValueError, match="n must be a whole number >= 0"):
        mt.eye(-1)


def test_broadcast_shapes_and_tensors() -> None:
    assert mt.broadcast_shapes((2, 1), (3,), 1) == np.broadcast_shapes((2, 1), (3,), 1)
    assert mt.broadcast_shapes() == ()
    a, b = mt.broadcast_tensors(mt.ones(2, 1), mt.tensor([1.0, 2.0, 3.0]))
    assert a.shape == b.shape == (2, 3) and b.stride() == (0, 1)  # views, no copy
    assert b.tolist() == [[1.0, 2.0, 3.0]] * 2
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        mt.broadcast_shapes((2,), (3,))


def test_allclose_as_torch() -> None:
    a = mt.tensor([1.0, np.inf, -np.inf, 0.0])
    assert mt.allclose(a, mt.tensor([1.0 + 1e-9, np.inf, -np.inf, 1e-9]))
    assert not mt.allclose(a, mt.tensor([1.0, np.inf, np.inf, 0.0]))
    assert not mt.allclose(mt.tensor([np.nan]), mt.tensor([np.nan]))
    assert mt.allclose(mt.tensor([np.nan, 1.0]), mt.tensor([np.nan, 1.0]), equal_nan=True)
    assert mt.allclose(mt.tensor([1.0, 1.05]), 1.0, rtol=0.1)
    assert mt.allclose(mt.zeros(0), mt.zeros(0))
    x = mt.ones(3, requires_grad=True)
    assert mt.allclose(x * 2, mt.full((3,), 2.0)) is True


def test_data_is_a_view_outside_autograd_and_can_be_replaced() -> None:
    p = mt.ones(3, requires_grad=True)
    d = p.data
    assert not d.requires_grad and d.data_ptr() == p.data_ptr()
    d.mul_(2.0)  # not recorded; seen through p
    assert p.tolist() == [2.0, 2.0, 2.0]
    p.data = mt.zeros(2, 2, dtype=mt.float64)
    assert p.shape == (2, 2) and p.dtype is mt.float64 and p.requires_grad
    with pytest.raises(TypeError, match="data must be set to a Tensor"):
        p.data = [1.0]


def test_device_spellings() -> None:
    t = mt.ones(2)
    here = t.device
    assert t.to(here) is t and t.to(device=here) is t
    assert t.to(here, mt.float64).dtype is mt.float64
    assert t.to(mt.zeros(1, dtype=mt.float64)).dtype is mt.float64
    if here == "cpu-emulator":
        assert t.cpu() is t and t.to("cpu") is t
        with pytest.raises(RuntimeError, match="keeps every tensor on cpu-emulator; it cannot move one to cuda"):
            t.cuda()
    else:
        assert t.cuda() is t and t.to("cuda:0") is t
        with pytest.raises(RuntimeError, match=r"cannot move one to cpu \(a host copy is .numpy\(\)\)"):
            t.cpu()
    with pytest.raises(TypeError):  # a string that names no device is read as a dtype, as before
        t.to("tpu")
    with pytest.raises(TypeError, match="unexpected keyword"):
        t.to(non_blocking=True)


def test_loss_modules() -> None:
    x = random_array(4, (3, 5), mt.float64)
    y = random_array(5, (3, 5), mt.float64)
    assert_close(nn.MSELoss()(mt.tensor(x), mt.tensor(y)), ((x - y) ** 2).mean(), mt.float64, n=15)
    assert_close(nn.MSELoss(reduction="sum")(mt.tensor(x), mt.tensor(y)), ((x - y) ** 2).sum(), mt.float64, n=15)
    logits = mt.tensor(x, requires_grad=True)
    loss = nn.CrossEntropyLoss()(logits, [0, 4, 2])
    assert_close(loss, F.cross_entropy(mt.tensor(x), [0, 4, 2]), mt.float64, n=5)
    loss.backward()
    assert logits.grad.shape == (3, 5)
    assert nn.CrossEntropyLoss(reduction="none")(mt.tensor(x), [0, 1, 2]).shape == (3,)


def test_assignment_drops_the_leading_ones_the_view_lacks_as_numpy_does() -> None:
    z, ref = mt.zeros(3, 2), np.zeros((3, 2), dtype=np.float32)
    value = np.arange(6, dtype=np.float32).reshape(1, 3, 2)
    z[...] = mt.tensor(value)
    ref[...] = value
    np.testing.assert_array_equal(z.numpy(), ref)
    z[0] = mt.full((1, 1, 2), 5.0)
    ref[0] = np.full((1, 1, 2), 5.0)
    np.testing.assert_array_equal(z.numpy(), ref)
    with pytest.raises(ValueError, match="broadcast"):
        z[...] = mt.ones(2, 3, 2)  # a leading 2 is not dropped (NumPy refuses it too)
    leaf = mt.ones(1, 3, 2, requires_grad=True)
    target = mt.zeros(3, 2, requires_grad=True) * 1.0
    target[...] = leaf * 2.0
    target.sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), np.full((1, 3, 2), 2.0))


def test_isclose_all_any_as_numpy() -> None:
    a = np.array([[1.0, np.nan, np.inf, 2.0], [0.0, -np.inf, 1e-9, 5.0]], dtype=np.float32)
    b = np.array([[1.0 + 1e-7, np.nan, np.inf, 2.1], [-0.0, np.inf, 0.0, 5.0]], dtype=np.float32)
    for equal_nan in (False, True):
        got = mt.isclose(mt.tensor(a), mt.tensor(b), equal_nan=equal_nan).numpy()
        np.testing.assert_array_equal(got, np.isclose(a, b, equal_nan=equal_nan).astype(np.float32))
    np.testing.assert_array_equal(mt.tensor(a).isclose(2.0).numpy(), np.isclose(a, 2.0).astype(np.float32))
    assert mt.tensor(a)[:, :1].allclose(mt.tensor(b)[:, :1]) and not mt.allclose(mt.tensor(a), mt.tensor(b))
    x = np.array([[1.0, 0.0, np.nan], [2.0, 3.0, 4.0]], dtype=np.float32)
    t = mt.tensor(x).t()  # a strided view
    for dim in (None, 0, 1):
        for keepdim in (False, True):
            if dim is None and keepdim:
                continue
            np.testing.assert_array_equal(t.all(dim, keepdim).numpy(), np.all(x.T, axis=dim, keepdims=keepdim))
            np.testing.assert_array_equal(mt.any(t, dim, keepdim).numpy(), np.any(x.T, axis=dim, keepdims=keepdim))
    assert mt.all(mt.zeros(0)).item() == 1.0 and mt.any(mt.zeros(2, 0), dim=1).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="rtol"):
        mt.isclose(mt.ones(2), mt.ones(2), rtol=-1.0)
    with pytest.raises(TypeError):
        mt.all([1.0, 2.0])


def test_randint_and_randperm_as_torch() -> None:
    mt.manual_seed(3)
    r = mt.randint(10, (1000,)).numpy()
    assert r.dtype == np.int64 and r.min() >= 0 and r.max() <= 9
    assert set(np.unique(r)) == set(range(10))
    r = mt.randint(-3, 4, (5, 6)).numpy()
    assert r.shape == (5, 6) and r.min() >= -3 and r.max() <= 3
    p = mt.randperm(50).numpy()
    np.testing.assert_array_equal(np.sort(p), np.arange(50))
    assert mt.randperm(0).shape == (0,) and mt.randint(5, (0, 3)).shape == (0, 3)
    mt.manual_seed(3)
    again = mt.randint(10, (1000,)).numpy()
    mt.manual_seed(3)
    np.testing.assert_array_equal(mt.randint(10, (1000,)).numpy(), again)  # the package's generator
    assert mt.randperm(5, dtype=mt.float64).dtype is mt.float64
    with pytest.raises(ValueError, match="below"):
        mt.randint(4, 4, (2,))
    with pytest.raises(ValueError, match="float64"):
        mt.randint(0, 2**25, (2,), dtype=mt.float32)  # not every value would be exact
    assert mt.randint(0, 2**40, (2,)).dtype is mt.int64
    with pytest.raises(TypeError, match="int"):
        mt.randint(0.5, 3, (2,))
    with pytest.raises(ValueError, match="n must be"):
        mt.randperm(-1)


INDEX_KEYS = [
    [1, 0], np.array([[1, -1], [0, 1]]), (slice(None), [2, 0, 2]), (Ellipsis, [3, 3, 0]), [],
    np.array([True, False]), (slice(None), np.array([[True, False, True, False]] * 3)),
    (Ellipsis, np.array([False] * 4)), (slice(None), [], slice(None)),
]


@pytest.mark.parametrize("key", INDEX_KEYS, ids=range(len(INDEX_KEYS)))
def test_an_index_array_or_mask_selects_as_numpy(key) -> None:
    x = random_array(0, (2, 3, 4), mt.float64)
    for t in (mt.tensor(x), mt.tensor(x.transpose(2, 0, 1).copy()).permute(1, 2, 0)):  # contiguous, strided
        np.testing.assert_array_equal(t[key].numpy(), x[key])


def test_an_index_array_passes_gradients_back_to_the_rows_it_read() -> None:
    x = random_array(1, (4, 3), mt.float64)
    gradcheck(lambda m, t: t[[2, 0, 2, -1]] * 3.0, [x])
    gradcheck(lambda m, t: t[:, np.array([True, False, True])], [x])


@pytest.mark.parametrize("key,error,match", [
    ([4], IndexError, "out of bounds for dimension 0 with size 4"),
    (([0, 1], [0, 1, 2]), IndexError, "could not be broadcast together with shapes \\[2\\], \\[3\\]"),
    (([0], [3]), IndexError, "out of bounds for dimension 1 with size 3"),
    ([1.5], IndexError, "integer"),
    (np.array([True]), IndexError, "mask's shape"),
])
def test_index_arrays_out_of_reach_are_refused(key, error, match) -> None:
    with pytest.raises(error, match=match):
        mt.zeros(4, 3)[key]


def test_a_float_tensor_index_is_refused_as_in_torch() -> None:
    t = mt.arange(6.0)
    with pytest.raises(IndexError, match="int64 or bool"):
        t[(t > 2).float()]  # a float 0/1 mask and float indices look the same
    with pytest.raises(IndexError, match="int64 or bool"):
        t[(t > 2).double()] = 0.0
    t[t > 2] = 0.0  # a bool mask writes
    assert t.tolist() == [0.0, 1.0, 2.0, 0.0, 0.0, 0.0]


WRITE_CASES = [
    ([1], 5.0), ((slice(None), [2, 0]), -1.0), ((Ellipsis, np.array([True, False, True, False])), 7.0),
    (np.array([[True, False, True], [False, False, True]]), 9.0),
    ([0, 1], np.arange(12.0).reshape(3, 4)), ((slice(None), [0]), np.ones((2, 1, 4))),
    ((Ellipsis, [3, -2]), np.array([10.0, 20.0])), ([], 1.0),
]


@pytest.mark.parametrize("key,value", WRITE_CASES, ids=range(len(WRITE_CASES)))
def test_writes_through_an_index_array_as_numpy(key, value) -> None:
    x = random_array(2, (2, 3, 4), mt.float64)
    ref = x.copy()
    ref[key] = value
    base = mt.tensor(x.transpose(2, 0, 1).copy())
    for t in (mt.tensor(x), base.permute(1, 2, 0)):  # a contiguous tensor, and a view that writes into base
        t[key] = mt.tensor(value) if isinstance(value, np.ndarray) else value
        np.testing.assert_array_equal(t.numpy(), ref)
    np.testing.assert_array_equal(base.numpy(), ref.transpose(2, 0, 1))


def test_an_augmented_assignment_through_an_index_array() -> None:
    x = random_array(3, (5, 2), mt.float64)
    t, ref = mt.tensor(x), x.copy()
    t[[4, 0]] += 100.0
    ref[[4, 0]] += 100.0
    np.testing.assert_array_equal(t.numpy(), ref)
    with pytest.raises(IndexError, match="repeated indices"):
        t[[1, 1]] = 0.0
    with pytest.raises(RuntimeError, match="leaf"):
        mt.ones(3, requires_grad=True)[[0]] = 2.0


def test_a_write_through_an_index_array_is_differentiable() -> None:
    x = random_array(4, (4, 3), mt.float64)
    v = random_array(5, (2, 3), mt.float64)

    def fn(m, a, b):
        y = a * 2.0
        y[[3, 1]] = b * b
        return y

    gradcheck(fn, [x, v])


@pytest.mark.parametrize("key", [slice(None, None, -1), (slice(None), slice(None, None, -2)),
                                 (Ellipsis, slice(2, 0, -1)), (Ellipsis, slice(None, None, -3)),
                                 slice(5, None, -1)], ids=range(5))
def test_a_negative_step_reads_and_writes_as_numpy(key) -> None:
    x = random_array(6, (2, 3, 4), mt.float64)
    t = mt.tensor(x)
    np.testing.assert_array_equal(t[key].numpy(), x[key])  # a copy (no negative strides), same values
    ref = x.copy()
    ref[key] = -1.0
    t[key] = -1.0
    np.testing.assert_array_equal(t.numpy(), ref)
    gradcheck(lambda m, a: a[key] * 2.0, [x])


@pytest.mark.parametrize("key", [[0, 1], np.array([True, True, False, False]), slice(1, None, -1)],
                         ids=["index", "mask", "negative step"])
def test_a_write_into_the_source_of_an_index_read_keeps_its_backward(key) -> None:
    """The read's backward needs only the source's shape, as torch's: a later
    write into the source (here of the rows not read) is no error."""
    x = mt.ones(4, requires_grad=True, dtype=mt.float64)
    z = x * 1.0
    y = z[key]
    z[2] = 5.0
    (y * 3).sum().backward()
    want = np.zeros(4)
    want[np.arange(4)[key]] = 3.0
    np.testing.assert_array_equal(x.grad.numpy(), want)


@pytest.mark.parametrize("key", [[0, 2], np.array([True, False, True, False]), slice(2, None, -2)],
                         ids=["index", "mask", "negative step"])
def test_a_write_through_an_index_array_drops_the_values_leading_ones(key) -> None:
    t = mt.zeros(4, 3, dtype=mt.float64)
    ref = np.zeros((4, 3))
    value = random_array(7, (1, 1, 2, 3), mt.float64)
    t[key] = mt.tensor(value)
    ref[key] = value  # NumPy drops the leading ones too
    np.testing.assert_array_equal(t.numpy(), ref)
    t[key] = mt.ones(1, 3, dtype=mt.float64)  # ones, then a broadcast
    ref[key] = np.ones((1, 3))
    np.testing.assert_array_equal(t.numpy(), ref)
    with pytest.raises(mt.ShapeError):
        t[key] = mt.ones(2, 2, 3, dtype=mt.float64)  # a leading 2 is not dropped


@pytest.mark.parametrize("key", [[], np.zeros(4, dtype=bool), slice(0, 0, -1)],
                         ids=["index", "mask", "negative step"])
def test_a_value_written_into_an_empty_selection_gets_a_zero_gradient(key) -> None:
    """As an empty basic slice, and torch: the value is in the graph, its
    gradient zeros; the tensor keeps its values (-0.0 too)."""
    x = mt.tensor([1.0, -0.0, 2.0, 3.0], dtype=mt.float64, requires_grad=True)
    v = mt.tensor([7.0], dtype=mt.float64, requires_grad=True)
    y = x * 1.0
    y[key] = v
    assert np.signbit(y.numpy()[1]) and y.numpy().tolist() == [1.0, 0.0, 2.0, 3.0]
    (y * 2.0).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), [0.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0] * 4)
    w = mt.tensor([7.0], dtype=mt.float64, requires_grad=True)
    z = x * 1.0
    z[1:1] = w  # the basic empty slice it must agree with
    (z * 2.0).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), v.grad.numpy())


def test_index_paths_refuse_huge_expanded_tensors_before_allocating() -> None:
    huge = mt.ones(1, 1).expand(2**43, 3)  # found by test_fuzz: NumPy was asked for 64 TiB of row numbers
    with pytest.raises(mt.OutOfMemoryError, match="negative-step"):
        huge[::-1]
    with pytest.raises(mt.MinitensorError, match="write"):
        huge[[0]] = 1.0  # an expanded view is not writable: refused before any table is built
    assert huge[[0, -1]].shape == (2, 3)
