"""In-place ops as in torch: they write into the tensor's memory (views and
parameters see the write), keep the tensor's shape, cast to its dtype, and
follow torch's autograd rules: an error on a leaf that requires grad while
gradients are recorded, recorded in the graph on any other tensor, and a
version counter that makes backward refuse a saved tensor changed since."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt


def test_augmented_assignment_updates_the_same_memory():
    a = mt.zeros(2, 3)
    view = a[0]
    ptr, before = a.data_ptr(), a
    a += 1
    a -= mt.tensor([0.5, 0.0, 0.5])
    a *= 2
    a /= mt.tensor([[1.0], [4.0]])
    assert a is before and a.data_ptr() == ptr
    assert a.tolist() == [[1.0, 2.0, 1.0], [0.25, 0.5, 0.25]]
    assert view.tolist() == [1.0, 2.0, 1.0]  # the view saw every write
    view += 10.0
    assert a[0].tolist() == [11.0, 12.0, 11.0]
    a[1] *= 4.0  # through a view and __setitem__
    assert a[1].tolist() == [1.0, 2.0, 1.0]


def test_in_place_methods_return_self_and_match_out_of_place():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4))
    y = rng.standard_normal((4,)) + 3.0
    for name, ref in (("add_", np.add), ("sub_", np.subtract), ("mul_", np.multiply), ("div_", np.divide)):
        for other, other_np in ((mt.tensor(y), y.astype(np.float32)), (2.5, 2.5)):
            t = mt.tensor(x)
            assert getattr(t, name)(other) is t
            np.testing.assert_allclose(t.numpy(), ref(x.astype(np.float32), other_np), rtol=1e-6)


def test_the_result_must_keep_the_shape_and_takes_the_dtype():
    a = mt.ones(3)
    with pytest.raises(mt.ShapeError, match=r"output with shape \(3,\) doesn't match the broadcast shape \(2, 3\)"):
        a += mt.ones(2, 3)
    assert a.tolist() == [1.0, 1.0, 1.0]  # untouched
    a += mt.tensor([0.25, 0.5, 0.75], dtype=mt.float64)  # float64 into float32: cast, as torch
    assert a.dtype is mt.float32 and a.tolist() == [1.25, 1.5, 1.75]
    e = mt.ones(1).expand(3)
    with pytest.raises(mt.MinitensorError, match=r"expanded"):
        e += 1
    with pytest.raises(TypeError):
        a += "x"
    a += a  # the same memory on both sides
    assert a.tolist() == [2.5, 3.0, 3.5]
    a[1:] += a[:2]  # overlapping views: read before writing
    assert a.tolist() == [2.5, 5.5, 6.5]


def test_manual_sgd_under_no_grad_updates_the_model():
    model = mt.nn.Linear(3, 1)
    w = model.weight
    before = w.numpy().copy()
    loss = model(mt.ones(2, 3)).sum()
    loss.backward()
    with mt.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
    assert model.weight is w and w.is_leaf and w.requires_grad
    np.testing.assert_allclose(w.numpy(), before - 0.1 * w.grad.numpy(), rtol=1e-6)


def test_in_place_on_a_leaf_that_requires_grad_raises():
    w = mt.ones(3, requires_grad=True)
    for change in (lambda: w.add_(1.0), lambda: w.mul_(mt.ones(3)), lambda: w.zero_(),
                   lambda: w.copy_(mt.zeros(3)), lambda: w.__setitem__(0, 5.0), lambda: w.fill_(2.0),
                   lambda: w.scatter_add_(0, mt.zeros(1), mt.ones(1))):
        with pytest.raises(RuntimeError, match=r"leaf Variable that requires grad .* in-place operation"):
            change()
    assert w.tolist() == [1.0, 1.0, 1.0]


def test_in_place_on_a_non_leaf_is_recorded():
    x = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y += 1
    y *= 3
    assert not y.is_leaf and type(y.grad_fn).__name__ == "InPlace"  # one kernel into y's memory
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 6.0, 6.0]
    x.grad = None
    y = x * 1
    y[1] += x[0] * 10  # a view changed in place, written back by __setitem__
    y.sum().backward()
    assert x.grad.tolist() == [11.0, 1.0, 1.0]
    x.grad = None
    y = x * 1
    y[1] = 5.0  # overwritten: no gradient to x[1]
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 1.0]
    x.grad = None
    z = mt.zeros(3)  # needs no grad; copy_ from one that does makes it part of the graph
    z.copy_(x * 3)
    assert z.requires_grad and not z.is_leaf
    (z * z).sum().backward()
    assert x.grad.tolist() == [18.0, 36.0, 54.0]
    x.grad = None
    b = mt.zeros(3)
    b.scatter_add_(0, mt.tensor([2.0, 0.0, 0.0]), x)
    b.sum().backward()
    assert b.tolist() == [5.0, 0.0, 1.0] and x.grad.tolist() == [1.0, 1.0, 1.0]


def test_the_version_counter_detects_a_saved_tensor_changed_in_place():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()  # Exp saves its result
    v = y._version
    y += 1
    assert y._version == v + 1
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*Exp"):
        y.sum().backward()
    # A change under no_grad is caught too, and through a view (the counter is shared).
    a = mt.tensor([1.0, 2.0], requires_grad=True)
    h = a * 1
    out = (h * h).sum()  # Mul saves h
    with mt.no_grad():
        h[0].fill_(7.0)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*Mul"):
        out.backward()
    # Every in-place write counts.
    t = mt.zeros(2)
    for write in (lambda: t.fill_(1.0), lambda: t.zero_(), lambda: t.copy_(mt.ones(2)),
                  lambda: t.__setitem__(0, 2.0), lambda: t.add_(1), lambda: t[1:].mul_(2)):
        before = t._version
        write()
        assert t._version == before + 1


def test_optimizers_still_update_in_place():
    for make in (lambda ps: mt.optim.SGD(ps, lr=0.1, momentum=0.9), lambda ps: mt.optim.Adam(ps, lr=0.1)):
        model = mt.nn.Linear(2, 1)
        ptr = model.weight.data_ptr()
        opt = make(model.parameters())
        before = model.weight.numpy().copy()
        model(mt.ones(4, 2)).sum().backward()
        opt.step()
        assert model.weight.data_ptr() == ptr and model.weight.is_leaf
        assert not np.allclose(model.weight.numpy(), before)


KERNELS = ("map_contiguous_vec", "map_contiguous", "map_strided", "zip_contiguous_vec", "zip_contiguous",
           "zip_strided", "zip_row_broadcast", "zip_one_value", "copy_contiguous")


def launches() -> int:
    from minitensor import _lib
    return sum(max(_lib.launch_count(k), 0) for k in KERNELS)


@pytest.mark.parametrize("op,other", [("add_", 1.5), ("sub_", [0.5, 1.0, 2.0]), ("mul_", 3.0), ("div_", 4.0)])
def test_a_recorded_in_place_op_is_one_kernel_with_torchs_gradients(op, other) -> None:
    from minitensor import _lib
    if _lib.launch_count("map_contiguous") < 0:
        pytest.skip("launch counts are the emulator's")
    x = np.array([1.0, -2.0, 3.0])
    w = mt.tensor(x, requires_grad=True)
    y = w * 2.0
    value = mt.tensor(other, dtype=mt.float64) if isinstance(other, list) else other
    _lib.reset_launch_counts()
    getattr(y, op)(value)
    assert launches() == 1  # no copy of y's old value, no copy of the result
    (y * y).sum().backward()
    expected = {"add_": 2 * (2 * x + 1.5) * 2, "sub_": 2 * (2 * x - np.array([0.5, 1.0, 2.0])) * 2,
                "mul_": 2 * (6 * x) * 6, "div_": 2 * (x / 2) * 0.5}[op]
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-6)


def test_a_tensor_added_in_place_gets_its_gradient_too() -> None:
    a = mt.tensor([1.0, 2.0], requires_grad=True)
    b = mt.tensor([[3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    y = a * 1.0
    y = y.expand(2, 2).contiguous()
    y.sub_(b)  # b broadcast-free, its gradient negated
    y.add_(y)  # x op= x: twice the gradient
    y.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [4.0, 4.0])
    np.testing.assert_allclose(b.grad.numpy(), -2.0 * np.ones((2, 2)))
