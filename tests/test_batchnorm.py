"""F.batch_norm, nn.BatchNorm1d and nn.BatchNorm2d against a float64 NumPy
reference of torch's definition: the forward in training and evaluation, the
gradients (closed form against NumPy, and against finite differences), the
running statistics (momentum, momentum=None, track_running_stats=False), the
buffers in state_dict and through mt.save / mt.load, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from gradcheck import gradcheck
from helpers import DTYPES, assert_close, random_array
from minitensor import nn


def reference(x, weight, bias, eps=1e-5):
    """torch's training-mode batch norm in float64: out, batch mean, biased and unbiased var."""
    dims = (0,) + tuple(range(2, x.ndim))
    keep = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    mean = x.mean(dims)
    var = x.var(dims)
    out = (x - mean.reshape(keep)) / np.sqrt(var.reshape(keep) + eps)
    out = out * weight.reshape(keep) + bias.reshape(keep)
    count = x.size // x.shape[1]
    return out, mean, var, var * count / (count - 1)


def reference_grads(x, weight, g, eps=1e-5):
    """dL/dx, dL/dweight, dL/dbias of sum(g * batch_norm(x)) in float64, the textbook formula."""
    dims = (0,) + tuple(range(2, x.ndim))
    keep = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    mean = x.mean(dims, keepdims=True)
    rstd = 1 / np.sqrt(x.var(dims, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    gxhat = g * weight.reshape(keep)
    dx = rstd * (gxhat - gxhat.mean(dims, keepdims=True) - xhat * (gxhat * xhat).mean(dims, keepdims=True))
    return dx, (g * xhat).sum(dims), g.sum(dims)


@pytest.mark.parametrize("dtype", DTYPES)
# The last five for the kernels (src/batchnorm.cu): many samples (a channel's
# planes split over several blocks), planes of Pack multiples (16 values) and
# not, S = 1 (BatchNorm1d's (N, C)) with many rows, a long plane.
@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (2, 1, 1, 3), (7, 2, 33, 1), (3, 5),
                                   (64, 3, 9, 7), (33, 2, 4, 4), (5, 70, 2, 2), (300, 4), (2, 3, 1, 257)])
def test_training_forward_and_gradients_match_numpy(dtype, shape):
    x = random_array(1, shape, dtype) * 2 + 1
    w, b = random_array(2, shape[1:2], dtype), random_array(3, shape[1:2], dtype)
    g = random_array(4, shape, dtype)
    xt = mt.tensor(x, requires_grad=True)
    wt, bt = mt.tensor(w, requires_grad=True), mt.tensor(b, requires_grad=True)
    rm, rv = mt.zeros(shape[1], dtype=dtype), mt.ones(shape[1], dtype=dtype)
    out = F.batch_norm(xt, rm, rv, wt, bt, training=True, momentum=0.25)
    (out * mt.tensor(g)).sum().backward()
    count = x.size // shape[1]
    ref, mean, _, unbiased = reference(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64))
    assert_close(out, ref, dtype, count)
    assert_close(rm, 0.25 * mean, dtype, count)
    assert_close(rv, 0.75 + 0.25 * unbiased, dtype, count)
    dx, dw, db = reference_grads(x.astype(np.float64), w.astype(np.float64), g.astype(np.float64))
    assert_close(xt.grad, dx, dtype, count)
    assert_close(wt.grad, dw, dtype, count)
    assert_close(bt.grad, db, dtype, count)


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((3, 2, 2, 3)), rng.standard_normal(2), rng.standard_normal(2)
    gradcheck(lambda m, x, w, b: F.batch_norm(x, None, None, w, b, training=True), [x, w, b])
    # evaluation: the running statistics are constants, x, weight and bias get gradients
    rm, rv = mt.tensor(rng.standard_normal(2)), mt.tensor(rng.uniform(0.5, 2.0, 2))
    gradcheck(lambda m, x, w, b: F.batch_norm(x, rm, rv, w, b, training=False), [x, w, b])
    # without weight and bias, and through a strided (transposed) input
    leaf = mt.tensor(x.transpose(0, 1, 3, 2).copy(), requires_grad=True)
    gradcheck(lambda m, x: F.batch_norm(x.transpose(2, 3), None, None, training=True),
              [x.transpose(0, 1, 3, 2)], leaves=[leaf])


def test_evaluation_uses_the_running_statistics():
    x = random_array(5, (4, 3, 2, 2), mt.float32)
    rm, rv = random_array(6, (3,), mt.float32), random_array(7, (3,), mt.float32, 0.5, 2.0)
    w, b = random_array(8, (3,), mt.float32), random_array(9, (3,), mt.float32)
    out = F.batch_norm(mt.tensor(x), mt.tensor(rm), mt.tensor(rv), mt.tensor(w), mt.tensor(b), training=False)
    keep = (1, 3, 1, 1)
    ref = (x - rm.reshape(keep)) / np.sqrt(rv.reshape(keep) + 1e-5) * w.reshape(keep) + b.reshape(keep)
    assert_close(out, ref.astype(np.float64), mt.float32)


def test_module_running_statistics_momentum_and_eval():
    layer = nn.BatchNorm2d(3, momentum=0.5)
    batches = [random_array(10 + i, (2, 3, 4, 4), mt.float64) * (i + 1) + i for i in range(3)]
    rm, rv = np.zeros(3), np.ones(3)
    for x in batches:
        layer(mt.tensor(x, dtype=mt.float32))
        _, mean, _, unbiased = reference(x, np.ones(3), np.zeros(3))
        rm, rv = 0.5 * rm + 0.5 * mean, 0.5 * rv + 0.5 * unbiased
    assert int(layer.num_batches_tracked.item()) == 3
    assert_close(layer.running_mean, rm, mt.float32, 32)
    assert_close(layer.running_var, rv, mt.float32, 32)
    layer.eval()
    x = batches[0].astype(np.float32)
    out = layer(mt.tensor(x))
    assert_close(out, (x - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5), mt.float32, 32)
    assert int(layer.num_batches_tracked.item()) == 3  # evaluation changes no statistic


def test_momentum_none_is_the_cumulative_average():
    layer = nn.BatchNorm1d(2, momentum=None)
    xs = [random_array(20 + i, (5, 2), mt.float64) + 3 * i for i in range(4)]
    for x in xs:
        layer(mt.tensor(x, dtype=mt.float32))
    means = [x.mean(0) for x in xs]
    unbiased = [x.var(0, ddof=1) for x in xs]
    assert_close(layer.running_mean, np.mean(means, 0), mt.float32, 8)
    assert_close(layer.running_var, np.mean(unbiased, 0), mt.float32, 8)


def test_without_running_statistics_eval_uses_the_batch():
    layer = nn.BatchNorm2d(2, track_running_stats=False, affine=False).eval()
    assert list(layer.state_dict()) == [] and list(layer.parameters()) == []
    x = random_array(30, (3, 2, 2, 2), mt.float32)
    ref, *_ = reference(x.astype(np.float64), np.ones(2), np.zeros(2))
    assert_close(layer(mt.tensor(x)), ref, mt.float32, 12)


def test_state_dict_save_and_load_round_trip_the_buffers(tmp_path):
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    model(mt.tensor(random_array(40, (4, 1, 5, 5), mt.float32)))
    assert list(model.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                                        "1.running_var", "1.num_batches_tracked"]
    assert model.state_dict()["1.num_batches_tracked"].dtype is mt.int64
    path = tmp_path / "model.pt"
    mt.save(model.state_dict(), path)
    fresh = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    fresh.load_state_dict(mt.load(path))
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[name].numpy(), value.numpy())
    assert int(fresh[1].num_batches_tracked.item()) == 1


def test_refusals_name_the_shapes():
    with pytest.raises(mt.DimError, match="expected 4D input, got 3D"):
        nn.BatchNorm2d(3)(mt.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="has 4 channels"):
        nn.BatchNorm2d(3)(mt.zeros(2, 4, 2, 2))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm2d(3)(mt.zeros(1, 3, 1, 1))
    with pytest.raises(ValueError, match=r"weight must be a tensor of shape \(3,\)"):
        F.batch_norm(mt.zeros(2, 3), None, None, mt.ones(4), training=True)
    with pytest.raises(ValueError, match="required when training=False"):
        F.batch_norm(mt.zeros(2, 3), None, None)
    with pytest.raises(TypeError, match="float tensor"):
        F.batch_norm(mt.zeros(2, 3, dtype=mt.int64), None, None, training=True)
    assert "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)" in repr(nn.BatchNorm2d(3))


# ---- the kernels (src/batchnorm.cu) at the shapes their launches split differently ----


def test_a_mean_far_from_zero_keeps_its_variance():
    """Values around 1000 with a spread of 1 in float32: the variance from sums
    around the channel's first value, not E[x^2] - E[x]^2 (which would lose
    every digit of it)."""
    x = (1000 + random_array(9, (16, 2, 8, 8), mt.float32)).astype(np.float32)
    out = F.batch_norm(mt.tensor(x), None, None, training=True)
    ref = reference(x.astype(np.float64), np.ones(2), np.zeros(2))[0]
    assert_close(out, ref, mt.float32, x.size // 2)


def test_non_contiguous_input_and_no_affine():
    """A transposed view (copied to (N, C, S) first) and no weight or bias."""
    x = random_array(10, (6, 5, 4, 3), mt.float32)
    xt = mt.tensor(x).transpose(2, 3)
    out = F.batch_norm(xt, None, None, training=True)
    ref = reference(np.swapaxes(x, 2, 3).astype(np.float64), np.ones(5), np.zeros(5))[0]
    assert_close(out, ref, mt.float32, x.size // 5)


def test_a_constant_channel_normalizes_to_the_bias():
    """A channel of one value: variance 0 (not a rounding's negative), so rstd
    is 1 / sqrt(eps) and every output is the bias."""
    x = np.full((4, 2, 3, 3), 7.25, np.float32)
    out = F.batch_norm(mt.tensor(x), None, None, bias=mt.tensor(np.array([0.5, -1.0], np.float32)),
                       weight=mt.ones(2), training=True)
    expected = np.broadcast_to(np.array([0.5, -1.0], np.float32).reshape(1, 2, 1, 1), x.shape)
    assert_close(out, expected, mt.float32, 36)


def test_ops_refusals_name_the_shapes():
    from minitensor import ops

    x = mt.tensor(random_array(11, (4, 3, 2, 2), mt.float32))
    with pytest.raises(mt.ShapeError, match=r"weight has shape \(4,\), expected \(3,\)"):
        ops.batch_norm(x, mt.ones(4), None, None, None, 0.1, 1e-5)
    with pytest.raises(ValueError, match="go together"):
        ops.batch_norm(x, None, None, mt.zeros(3), None, 0.1, 1e-5)
    with pytest.raises(mt.DTypeError, match="bias is float64"):
        ops.batch_norm(x, None, mt.zeros(3, dtype=mt.float64), None, None, 0.1, 1e-5)
