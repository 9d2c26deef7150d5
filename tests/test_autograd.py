"""Autograd: every gradient rule against central finite differences, and the engine's contract.

The graphs are in tests/grad_cases.py (shared with tests/test_torch_compare.py);
the finite-difference check is tests/gradcheck.py.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import minitensor as mt
from grad_cases import CASES, case_ids
from gradcheck import gradcheck
from helpers import assert_close, broadcastable_shapes, random_array, strided_views

@pytest.mark.parametrize("case", CASES, ids=case_ids())
def test_gradient_matches_finite_differences(case):
    gradcheck(case.fn, case.inputs(seed=len(case.name)), seed=len(case.name))


BINARY = {
    "add": lambda m, x, y: x + y,
    "sub": lambda m, x, y: x - y,
    "mul": lambda m, x, y: x * y,
    "div": lambda m, x, y: x / (y.abs() + 0.5),
    "maximum": lambda m, x, y: m.maximum(x, y),
    "pow": lambda m, x, y: (x.abs() + 0.5) ** y,
}
UNARY = {
    "exp": lambda m, x: x.exp(),
    "tanh_sigmoid": lambda m, x: x.tanh() * x.sigmoid(),
    "sum_last": lambda m, x: x.sum(dim=-1),
    "mean_first": lambda m, x: x.mean(dim=0),
    "softmax_last": lambda m, x: x.softmax(-1),
    "log_abs": lambda m, x: (x.abs() + 0.5).log(),  # (no max/min: an expanded view has ties)
    "reshape": lambda m, x: x.reshape(-1) * m.arange(x.numel()).to(x.dtype),
}


@settings(max_examples=25)
@given(op=st.sampled_from(sorted(BINARY)), shapes=broadcastable_shapes(max_dims=3, max_side=3, min_side=1),
       seed=st.integers(0, 1000))
def test_broadcasting_gradients(op, shapes, seed):
    rng = np.random.default_rng(seed)
    gradcheck(BINARY[op], [rng.standard_normal(s) for s in shapes], seed=seed)


@settings(max_examples=25)
@given(op=st.sampled_from(sorted(UNARY)), view=strided_views(dtype=mt.float64, min_dims=1, allow_empty=False))
def test_gradients_on_strided_leaves(op, view):
    leaf, array = view  # permuted, sliced, indexed or expanded (stride 0) views of a random base
    assume(leaf.numel() <= 40)
    gradcheck(UNARY[op], [array], leaves=[leaf.requires_grad_()])


def test_gradient_of_a_noncontiguous_leaf():
    base = mt.tensor(np.random.default_rng(0).standard_normal((4, 3)))
    leaf = base.T[:, 1:].requires_grad_()  # a leaf with strides (1, 3) and an offset
    assert leaf.is_leaf and not leaf.is_contiguous()
    (leaf.exp() * 2.0).sum().backward()
    assert leaf.grad.shape == (3, 3)
    assert_close(leaf.grad, 2.0 * np.exp(base.numpy().T[:, 1:]), mt.float64)
    assert base.grad is None


# ---- tie rules and kinks (the conventions torch uses) ----------------------------------------


def test_max_over_everything_splits_ties_evenly():
    x = mt.tensor([[1.0, 3.0], [3.0, 2.0]], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [[0.0, 0.5], [0.5, 0.0]]
    y = mt.tensor([[1.0, 3.0, 3.0], [3.0, 0.0, 0.0]], requires_grad=True)
    y.min(dim=(0, 1)).backward()  # a tuple of dims behaves like everything (torch's amin)
    assert y.grad.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.5, 0.5]]


def test_max_over_a_dim_sends_the_gradient_to_the_first_maximum():
    x = mt.tensor([[2.0, 5.0, 5.0], [1.0, 1.0, 0.0]], requires_grad=True)
    x.max(dim=1).values.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    y = mt.tensor([[4.0, 4.0], [4.0, 9.0]], requires_grad=True)
    y.min(dim=0, keepdim=True).values.sum().backward()
    assert y.grad.tolist() == [[1.0, 1.0], [0.0, 0.0]]


def test_maximum_and_minimum_split_ties_in_half():
    a = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = mt.tensor([2.0, 2.0, 2.0], requires_grad=True)
    mt.maximum(a, b).sum().backward()
    assert a.grad.tolist() == [0.0, 0.5, 1.0] and b.grad.tolist() == [1.0, 0.5, 0.0]
    a.grad = b.grad = None
    mt.minimum(a, b).sum().backward()
    assert a.grad.tolist() == [1.0, 0.5, 0.0] and b.grad.tolist() == [0.0, 0.5, 1.0]


def test_relu_and_abs_have_zero_gradient_at_zero():
    x = mt.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    (x.relu() + x.abs()).sum().backward()
    assert x.grad.tolist() == [-1.0, 0.0, 2.0]


def test_prod_with_zeros():
    x = mt.tensor([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 4.0]], requires_grad=True)
    x.prod(dim=1).sum().backward()
    assert x.grad.tolist() == [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [8.0, 4.0, 2.0]]


def test_pow_at_zero_base_matches_torch():
    x = mt.tensor([0.0, 2.0], dtype=mt.float64, requires_grad=True)
    e = mt.tensor([2.0, 0.0], dtype=mt.float64, requires_grad=True)
    (x**e).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]  # 2 * 0**1 and 0 * 2**-1
    assert_close(e.grad, [0.0, np.log(2.0)], mt.float64)  # 0 at the zero base, not nan


def test_softmax_gradients_are_finite_for_huge_inputs():
    x = mt.tensor([[1e4, -1e4, 0.0]], requires_grad=True)
    (x.log_softmax(1)[:, 0] + x.softmax(1)[:, 1] + mt.logsumexp(x, 1)).sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


# ---- the engine ----------------------------------------------------------------------------


def test_leaves_accumulate_and_non_leaves_keep_no_grad():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    assert x.is_leaf and not y.is_leaf and y.grad_fn is not None
    y.sum().backward()
    y2 = x * x
    y2.sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]  # 3 + 2x, accumulated over two backward calls
    assert y.grad is None


def test_retain_grad_fills_a_non_leaf():
    x = mt.tensor([1.0, -2.0], requires_grad=True)
    h = x * 2.0
    h.retain_grad()
    (h * h).sum().backward()
    assert h.grad.tolist() == [4.0, -8.0]
    assert x.grad.tolist() == [8.0, -16.0]
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        mt.tensor([1.0]).retain_grad()


def test_non_scalar_backward_needs_a_gradient():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        y.backward()
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        y.backward(mt.ones(3))
    y.backward(mt.tensor([1.0, 10.0]))
    assert x.grad.tolist() == [2.0, 20.0]


def test_backward_of_a_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        (mt.ones(2) * 2.0).sum().backward()


def test_backward_twice_needs_retain_graph():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    first = np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0]))
    assert_close(x.grad, 2 * first, mt.float32)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_each_node_runs_once_in_a_diamond():
    calls = []

    class Twice(mt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, grad):
            calls.append(grad.tolist())
            return grad * 2.0

    x = mt.tensor([1.0, 1.0], requires_grad=True)
    h = Twice.apply(x)
    (h * h + h * 3.0 + h).sum().backward()  # h feeds four edges
    assert len(calls) == 1 and calls[0] == [8.0, 8.0]  # 2h + 3 + 1 at h = 2
    assert x.grad.tolist() == [16.0, 16.0]


def test_a_deep_graph_does_not_recurse():
    x = mt.tensor([0.5], requires_grad=True)
    y = x
    depth = sys.getrecursionlimit() + 200
    for _ in range(depth):
        y = y + 1.0
    y.sum().backward()
    assert x.grad.tolist() == [1.0]


def test_no_grad_context_and_decorator():
    x = mt.tensor([1.0], requires_grad=True)
    with mt.no_grad():
        y = x * 2.0
        assert not mt.is_grad_enabled()
        with mt.enable_grad():
            z = x * 2.0
    assert mt.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad

    @mt.no_grad()
    def double(t):
        return t * 2.0

    assert not double(x).requires_grad and mt.is_grad_enabled()


def test_requires_grad_propagation_detach_and_requires_grad_():
    a = mt.ones(2)
    b = mt.ones(2, requires_grad=True)
    assert not (a * 2.0).requires_grad
    assert (a * b).requires_grad
    d = (a * b).detach()
    assert not d.requires_grad and d.is_leaf
    c = a.requires_grad_()
    assert c is a and a.requires_grad and a.is_leaf
    with pytest.raises(RuntimeError, match="leaf"):
        (a * b).requires_grad_(False)


def test_views_of_a_leaf_are_not_leaves():
    x = mt.ones(2, 3, requires_grad=True)
    v = x[0]
    assert not v.is_leaf and type(v.grad_fn).__name__ == "Index"
    v.sum().backward()
    assert x.grad.tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]


def test_gradients_have_the_dtype_of_their_leaf():
    a = mt.tensor([1.0, 2.0], dtype=mt.float32, requires_grad=True)
    b = mt.tensor([3.0, 4.0], dtype=mt.float64, requires_grad=True)
    out = a * b
    assert out.dtype is mt.float64
    out.sum().backward()
    assert a.grad.dtype is mt.float32 and b.grad.dtype is mt.float64
    assert a.grad.tolist() == [3.0, 4.0] and b.grad.tolist() == [1.0, 2.0]
    c = mt.tensor([1.5], dtype=mt.float64, requires_grad=True)
    (c.float() * 2.0).sum().backward()
    assert c.grad.dtype is mt.float64 and c.grad.tolist() == [2.0]


def test_in_place_ops_on_tensors_that_require_grad_raise():
    w = mt.ones(3, requires_grad=True)
    for change in (lambda: w.add_(1.0), lambda: w.zero_(), lambda: w.copy_(mt.zeros(3)),
                   lambda: w.__setitem__(0, 5.0), lambda: w.fill_(2.0)):
        with pytest.raises(RuntimeError, match="in place"):
            change()
    with mt.no_grad():
        w.sub_(0.5)
    assert w.tolist() == [0.5, 0.5, 0.5] and w.is_leaf


def test_backward_runs_on_the_device_only(monkeypatch):
    x = mt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    loss = (x.softmax(1) @ x.T).logsumexp(0).sum()

    def no_download(*args, **kwargs):
        raise AssertionError("backward copied a tensor to the host")

    monkeypatch.setattr(mt.ops.elementwise, "to_numpy", no_download)  # the ops that read a value back
    monkeypatch.setattr(mt._storage.Storage, "download", no_download)
    loss.backward()
    monkeypatch.undo()
    assert x.grad.shape == (2, 3)


def test_graphs_are_freed_without_the_cycle_collector():
    w = mt.randn(16, 8, requires_grad=True)
    x = mt.randn(4, 16)
    gc.collect()
    gc.disable()
    try:
        in_use = []
        for _ in range(5):
            loss = (x @ w).relu().log_softmax(1).mean()
            loss.backward()
            w.grad = None
            del loss
            in_use.append(mt.memory_in_use())
    finally:
        gc.enable()
    assert in_use[1:] == in_use[:-1], in_use


def test_custom_function_with_a_non_tensor_argument():
    class Scale(mt.autograd.Function):
        @staticmethod
        def forward(ctx, x, factor):
            ctx.factor = factor
            return x * factor

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.factor, None

    x = mt.tensor([1.0, 2.0], requires_grad=True)
    Scale.apply(x, 3.0).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_unbroadcast_sums_to_the_shape():
    g = mt.tensor(np.arange(24.0).reshape(2, 3, 4))
    for shape in [(2, 3, 4), (3, 4), (1, 4), (3, 1), (2, 1, 1), ()]:
        ref = np.arange(24.0).reshape(2, 3, 4)
        lead = len(ref.shape) - len(shape)
        ref = ref.sum(axis=tuple(range(lead))) if lead else ref
        ref = ref.sum(axis=tuple(d for d, n in enumerate(shape) if n == 1), keepdims=True).reshape(shape)
        assert_close(mt.autograd.unbroadcast(g, shape), ref, mt.float64)


# ---- max(dim) and logsumexp: the rules on their one-pass kernels ---------------------------


def test_max_dim_gradient_goes_to_the_first_maximum_and_amax_splits_ties() -> None:
    """As torch: max(dim) sends the gradient to the index it returned; amax
    splits it evenly among equal values."""
    t = mt.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
    t.max(1).values.sum().backward()
    assert t.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    t.grad = None
    t.amax(1).sum().backward()
    assert t.grad.tolist() == [[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]]
    t.grad = None
    t.min(0, keepdim=True).values.sum().backward()
    assert t.grad.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]


@given(data=st.data(), keepdim=st.booleans())
def test_logsumexp_backward_on_strided_views(data: st.DataObject, keepdim: bool) -> None:
    """grad * softmax(x) along the reduced dims, one kernel (fast policy), against
    NumPy, for one dim or a tuple, on any layout (empty ones: the test below)."""
    t, a = data.draw(strided_views(min_dims=1, allow_empty=False))
    dims = tuple(sorted(set(data.draw(st.lists(st.integers(0, a.ndim - 1), min_size=1, max_size=a.ndim)))))
    dim = dims[0] if len(dims) == 1 and data.draw(st.booleans()) else dims
    x = t.detach().requires_grad_(True)
    out = mt.logsumexp(x, dim, keepdim=keepdim)
    g = random_array(3, out.shape, t.dtype)
    out.backward(mt.tensor(g))
    m = np.max(a, axis=dims, keepdims=True)
    lse = np.log(np.sum(np.exp(a - m), axis=dims, keepdims=True)) + m
    gk = g.astype(np.float64).reshape(lse.shape)
    with np.errstate(invalid="ignore"):
        expected = gk * np.exp(a - lse)
    assert_close(x.grad, expected, t.dtype)


@pytest.mark.parametrize("shape, dim", [((3, 1), 1), ((257, 5), 1), ((4, 4096), 1), ((2, 5001), -1),
                                        ((6, 7), 0), ((0, 5), 1), ((3, 0), 1), ((2, 3, 4), (0, 2))])
@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
def test_logsumexp_backward_kernel_matches_the_teaching_chain(shape: tuple, dim: Any, dtype: mt.DType) -> None:
    """The kernel (fast) and the chain sub, exp, mul (teaching) give the same gradient:
    rows long and short, several rows a block, empty rows, a row of -inf (NaN, as torch)."""
    a = random_array(5, shape, dtype) * 20
    if a.size and a.ndim == 2 and shape[1]:
        a[0] = -np.inf
    grads = []
    for policy in ("fast", "teaching"):
        with mt.kernels.policy(policy):
            x = mt.tensor(a, requires_grad=True)
            out = x.logsumexp(dim)
            out.backward(mt.ones(*out.shape, dtype=dtype))
            grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5 if dtype is mt.float32 else 1e-12, atol=1e-30)
    assert grads[0].shape == shape


def test_logsumexp_backward_is_one_kernel() -> None:
    """Under the fast policy the backward of logsumexp is one launch of its
    row kernel (contiguous rows), not the chain sub, exp, mul."""
    from minitensor import _lib

    if _lib.launch_count("logsumexp_backward_rows") < 0:
        pytest.skip("the CUDA build counts no launches")
    with mt.kernels.policy("fast"):
        x = mt.tensor(random_array(4, (33, 260), mt.float32), requires_grad=True)
        out = x.logsumexp(1)
        _lib.reset_launch_counts()
        out.backward(mt.ones(33))
        assert _lib.launch_count("logsumexp_backward_rows") == 1
        assert _lib.launch_count("logsumexp_backward_strided") == 0
        x.grad = None
        out = x.T.logsumexp(0)  # a transposed view: the strided kernel
        _lib.reset_launch_counts()
        out.backward(mt.ones(33))
        assert _lib.launch_count("logsumexp_backward_strided") == 1
