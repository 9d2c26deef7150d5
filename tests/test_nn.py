"""minitensor.nn and minitensor.optim: modules, losses, saving, optimizers, a training run."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from gradcheck import gradcheck
from helpers import assert_close
from minitensor import nn


def log_softmax_np(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


# ---- Module ----------------------------------------------------------------------------------


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
        self.head = nn.Linear(4, 2, bias=False)
        self.drop = nn.Dropout(0.5)
        self.register_buffer("scale", mt.full((2,), 2.0))

    def forward(self, x):
        return self.head(self.drop(self.body(x))) * self.scale


def test_module_registers_parameters_buffers_and_children():
    net = Net()
    names = [name for name, _ in net.named_parameters()]
    assert names == ["body.0.weight", "body.0.bias", "head.weight"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf for p in net.parameters())
    assert [name for name, _ in net.named_buffers()] == ["scale"]
    assert [type(m).__name__ for m in net.children()] == ["Sequential", "Linear", "Dropout"]
    assert [name for name, _ in net.named_modules()] == ["", "body", "body.0", "body.1", "head", "drop"]
    assert net.head.bias is None
    assert list(net.state_dict()) == ["body.0.weight", "body.0.bias", "head.weight", "scale"]
    with pytest.raises(TypeError, match="nn.Parameter"):
        net.head.weight = mt.zeros(2, 4)
    assert "Linear(in_features=3, out_features=4, bias=True)" in repr(net)


def test_train_eval_zero_grad_and_requires_grad_():
    net = Net()
    assert net.training and net.drop.training
    assert net.eval() is net and not net.drop.training and not net.body[1].training
    net.train()
    assert net.drop.training
    net(mt.randn(5, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not net(mt.randn(5, 3)).requires_grad


def test_linear_matches_numpy_and_is_initialized_like_torch():
    mt.manual_seed(0)
    layer = nn.Linear(50, 30)
    w, b = layer.weight.numpy(), layer.bias.numpy()
    assert w.shape == (30, 50) and b.shape == (30,)
    bound = 1 / math.sqrt(50)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.9 * bound  # uniform over the whole range, not a narrow one
    x = np.random.default_rng(1).standard_normal((7, 50)).astype(np.float32)
    assert_close(layer(mt.tensor(x)), x.astype(np.float64) @ w.T + b, mt.float32, n=50)
    mt.manual_seed(0)
    assert np.array_equal(nn.Linear(50, 30).weight.numpy(), w)  # the seed repeats the init


def test_linear_chain_matches_numpy():
    # F.linear with a bias takes the fused kernel under the fast policy; the
    # course's chain (the layers_optim task) is checked on its own.
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 7, 50), (30, 50), (30,)))
    assert_close(F.linear_chain(mt.tensor(x), mt.tensor(w), mt.tensor(b)), x.astype(np.float64) @ w.T + b,
                 mt.float32, n=50)
    assert_close(F.linear_chain(mt.tensor(x), mt.tensor(w)), x.astype(np.float64) @ w.T, mt.float32, n=50)


def test_state_dict_round_trip_through_npz(tmp_path):
    mt.manual_seed(1)
    net = Net().eval()
    x = mt.randn(4, 3)
    path = net.save(tmp_path / "net")
    assert path.endswith("net.npz")
    with np.load(path) as data:
        assert sorted(data.files) == ["body.0.bias", "body.0.weight", "head.weight", "minitensor.json", "scale"]
    mt.manual_seed(2)
    fresh = Net().eval()
    fresh.scale.fill_(0.0)
    assert not np.allclose(fresh(x).numpy(), net(x).numpy())
    assert fresh.load(path) is fresh
    assert np.array_equal(fresh(x).numpy(), net(x).numpy())
    assert fresh.scale.tolist() == [2.0, 2.0]


def test_load_state_dict_checks_names_and_shapes():
    net = Net()
    state = {name: t.numpy() for name, t in net.state_dict().items()}
    before = net.head.weight.numpy()
    with pytest.raises(RuntimeError, match=r"missing keys \['scale'\]"):
        net.load_state_dict({k: v for k, v in state.items() if k != "scale"})
    with pytest.raises(RuntimeError, match="unexpected keys.*extra"):
        net.load_state_dict({**state, "extra": np.zeros(1)})
    bad = dict(state, **{"head.weight": np.zeros((4, 2), np.float32), "body.0.bias": np.zeros(4, np.float32)})
    with pytest.raises(RuntimeError, match=r"head.weight.*\(4, 2\).*\(2, 4\)"):
        net.load_state_dict(bad)
    assert np.array_equal(net.body[0].bias.numpy(), state["body.0.bias"])  # nothing half-loaded
    assert np.array_equal(net.head.weight.numpy(), before)
    result = net.load_state_dict({"head.weight": np.ones((2, 4))}, strict=False)
    assert net.head.weight.tolist() == [[1.0] * 4] * 2 and "scale" in result.missing_keys


def test_to_float64():
    net = Net().to(mt.float64)
    assert all(p.dtype is mt.float64 for p in net.parameters()) and net.scale.dtype is mt.float64
    assert net.eval()(mt.randn(2, 3, dtype=mt.float64)).dtype is mt.float64


# ---- layers ------------------------------------------------------------------------------------


def test_activations():
    x = mt.tensor([-2.0, 0.5])
    assert_close(nn.ReLU()(x), [0.0, 0.5], mt.float32)
    assert_close(nn.Tanh()(x), np.tanh([-2.0, 0.5]), mt.float32)
    assert_close(nn.Sigmoid()(x), 1 / (1 + np.exp([2.0, -0.5])), mt.float32)
    assert_close(F.relu(x), [0.0, 0.5], mt.float32)


def test_dropout():
    x = mt.ones(2000)
    drop = nn.Dropout(0.25)
    mt.manual_seed(3)
    y = drop(x).numpy()
    assert set(np.unique(y)) == {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.05
    mt.manual_seed(3)
    assert np.array_equal(drop(x).numpy(), y)  # the seed repeats the mask
    assert drop.eval()(x) is x
    assert F.dropout(x, 0.0) is x and F.dropout(x, 0.9, training=False) is x
    w = mt.ones(8, requires_grad=True)
    F.dropout(w, 1.0).sum().backward()
    assert w.grad.tolist() == [0.0] * 8
    w.grad = None
    mt.manual_seed(4)
    out = F.dropout(w, 0.5)
    out.sum().backward()
    assert np.array_equal(w.grad.numpy(), out.detach().numpy())  # grad = mask / (1 - p)
    with pytest.raises(ValueError, match="1.5"):
        nn.Dropout(1.5)


def test_layer_norm_matches_numpy_and_its_gradient_checks():
    x = np.random.default_rng(5).standard_normal((3, 2, 4))
    norm = nn.LayerNorm(4, dtype=mt.float64)
    mean = x.mean(-1, keepdims=True)
    ref = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    assert_close(norm(mt.tensor(x)), ref, mt.float64, n=4)
    assert [n for n, _ in norm.named_parameters()] == ["weight", "bias"]
    shape = (2, 4)
    w, b = np.random.default_rng(6).standard_normal((2, *shape))
    gradcheck(lambda m, x, w, b: F.layer_norm(x, shape, w, b), [x, w, b])
    with pytest.raises(ValueError, match=r"\(3, 2, 4\).*\(3,\)"):
        nn.LayerNorm(3)(mt.tensor(x))


def test_embedding_gathers_rows_and_accumulates_repeated_indices():
    mt.manual_seed(7)
    emb = nn.Embedding(5, 3)
    table = emb.weight.numpy()
    idx = np.array([[0, 4, 4], [2, 0, 4]])
    out = emb(idx)
    assert out.shape == (2, 3, 3)
    assert np.array_equal(out.numpy(), table[idx])
    assert np.array_equal(emb([1, 2]).numpy(), table[[1, 2]])
    assert np.array_equal(emb(mt.tensor([3.0])).numpy(), table[[3]])
    out.sum().backward()
    counts = np.bincount(idx.reshape(-1), minlength=5)[:, None] * np.ones((1, 3))
    assert np.array_equal(emb.weight.grad.numpy(), counts)
    with pytest.raises(TypeError, match="whole numbers"):
        emb(np.array([0.5]))


@pytest.mark.parametrize("padding_idx", [1, -4])
def test_embedding_padding_idx_starts_at_zero_and_gets_no_gradient(padding_idx):
    """As torch: row padding_idx (negative from the end) is zeros at first, is
    read as it is, and gets no gradient; the other rows accumulate as before."""
    emb = nn.Embedding(5, 3, padding_idx=padding_idx, dtype=mt.float64)
    assert emb.padding_idx == 1 and "padding_idx=1" in repr(emb)
    assert emb.weight.numpy()[1].tolist() == [0.0, 0.0, 0.0]
    with mt.no_grad():
        emb.weight[1] = 2.0  # a padding row changed by hand is read as it is
    idx = np.array([[1, 4, 1], [2, 0, 4]])
    out = emb(idx)
    np.testing.assert_array_equal(out.numpy(), emb.weight.numpy()[idx])
    (out * mt.tensor(np.arange(18.0).reshape(2, 3, 3))).sum().backward()
    want = np.zeros((5, 3))
    np.add.at(want, idx.reshape(-1), np.arange(18.0).reshape(6, 3))
    want[1] = 0.0
    np.testing.assert_array_equal(emb.weight.grad.numpy(), want)
    w = mt.tensor(np.ones((5, 3)), requires_grad=True)
    F.embedding(mt.tensor([1, 3]), w, padding_idx=padding_idx).sum().backward()
    assert w.grad.numpy().sum(1).tolist() == [0.0, 0.0, 0.0, 3.0, 0.0]
    for bad in (5, -6):
        with pytest.raises(ValueError, match="padding_idx"):
            nn.Embedding(5, 3, padding_idx=bad)


# ---- losses --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["list", "numpy", "tensor"])
def test_cross_entropy_value_and_gradient(kind):
    logits_np = np.random.default_rng(8).standard_normal((4, 5)) * 3
    targets = [1, 0, 4, 4]
    given = {"list": targets, "numpy": np.array(targets, dtype=np.int32),
             "tensor": mt.tensor(targets)}[kind]
    logits = mt.tensor(logits_np, requires_grad=True)
    loss = F.cross_entropy(logits, given)
    ref = -log_softmax_np(logits_np)[np.arange(4), targets]
    assert loss.shape == ()
    assert_close(loss, ref.mean(), mt.float64, n=5)
    loss.backward()
    softmax = np.exp(log_softmax_np(logits_np))
    assert_close(logits.grad, (softmax - np.eye(5)[targets]) / 4, mt.float64, n=5)
    assert_close(F.cross_entropy(logits, given, reduction="sum"), ref.sum(), mt.float64, n=5)
    assert_close(F.cross_entropy(logits, given, reduction="none"), ref, mt.float64, n=5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_kernel_and_chain_agree(reduction):
    """The fused kernels (the default under the fast policy) against the chain of
    ops (the course's task, what the teaching policy runs), values and gradients,
    on logits of awkward widths and a transposed view."""
    rng = np.random.default_rng(21)
    for shape in [(5, 3), (7, 1000), (1, 1), (4, 33)]:
        x = rng.standard_normal(shape) * 4
        targets = rng.integers(0, shape[1], shape[0])
        g = rng.standard_normal(shape[0]) if reduction == "none" else 0.7
        results = []
        for fused in (True, False):
            logits = mt.tensor(x, requires_grad=True)
            index = mt.tensor(targets.astype(np.float64))
            loss = (F.cross_entropy(logits, targets, reduction) if fused
                    else F.cross_entropy_chain(logits, index, reduction))
            (loss * mt.tensor(g)).sum().backward()
            results.append((loss.numpy(), logits.grad.numpy()))
        assert_close(results[0][0], results[1][0], mt.float64, n=shape[1])
        assert_close(results[0][1], results[1][1], mt.float64, n=shape[1])
    xt = mt.tensor(rng.standard_normal((6, 4))).T  # (4, 6), not contiguous
    assert_close(F.cross_entropy(xt, [0, 5, 2, 3], reduction),
                 F.cross_entropy_chain(xt, mt.tensor([0.0, 5.0, 2.0, 3.0], dtype=mt.float64), reduction),
                 mt.float64, n=6)


def test_cross_entropy_is_two_launches_and_checks_tensor_targets():
    from minitensor import _lib

    logits = mt.randn(8, 10, requires_grad=True)
    with pytest.raises(mt.InvalidArgumentError, match="index 10 out of range"):
        F.cross_entropy(logits, mt.tensor([0.0] * 7 + [10.0]))
    if _lib.launch_count("cross_entropy_forward_rows") < 0:
        return  # the CUDA build counts no launches
    # Tensor targets are checked on the device once, until they are written to.
    targets = mt.tensor([float(i) for i in range(8)])
    with mt.kernels.policy("fast"):
        _lib.reset_launch_counts()
        F.cross_entropy(logits, targets)
        F.cross_entropy(logits, targets)
        assert _lib.launch_count("find_bad_index") == 1
        targets[3] = 10.0
        with pytest.raises(mt.InvalidArgumentError, match="index 10 out of range"):
            F.cross_entropy(logits, targets)
    with mt.kernels.policy("fast"):
        _lib.reset_launch_counts()
        loss = F.cross_entropy(logits, list(range(8)), reduction="none")
        loss.sum().backward()
        assert _lib.launch_count("cross_entropy_forward_rows") == 1
        assert _lib.launch_count("cross_entropy_backward_rows") == 1


def test_cross_entropy_is_stable_for_huge_logits():
    logits = mt.tensor([[1e4, 0.0, -1e4]], requires_grad=True)
    loss = F.cross_entropy(logits, [1])
    loss.backward()
    assert_close(loss, 1e4, mt.float32)
    assert_close(logits.grad, [[1.0, -1.0, 0.0]], mt.float32)


@pytest.mark.parametrize("policy", ["fast", "teaching"])
def test_cross_entropy_of_an_infinite_logit_is_torchs(policy):
    """A +inf logit makes its row's log_softmax NaN (inf - inf), so torch's loss
    and gradient are NaN whatever the target; -inf logits are ordinary (a
    target at -inf costs inf). Both policies, and log_softmax, agree."""
    inf = float("inf")
    with mt.kernels.policy(policy):
        for target in (0, 1):
            logits = mt.tensor([[inf, 0.0, 1.0], [0.5, -inf, 1.0]], dtype=mt.float64, requires_grad=True)
            loss = F.cross_entropy(logits, [target, 1], reduction="none")
            loss.sum().backward()
            values = loss.numpy()
            assert np.isnan(values[0]) and values[1] == inf, values
            assert np.isnan(logits.grad.numpy()[0]).all()
            assert np.isnan(F.log_softmax(logits, dim=1).numpy()[0]).all()
        assert np.isnan(F.cross_entropy(mt.tensor([[inf, 0.0]]), [1]).item())


def _torch_cross_entropy_np(x, t, reduction, weight, ignore_index, eps):
    """torch's formulas (LossNLL.cpp) in NumPy: x (M, C), t (M,)."""
    logp = x - x.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    classes = x.shape[1]
    w = np.ones(classes) if weight is None else weight
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    wt = w[safe] * keep
    nll = np.where(keep, -logp[np.arange(len(t)), safe], 0.0) * wt
    smooth = np.where(keep, -(logp * w).sum(1), 0.0)
    if reduction == "sum":
        nll, smooth = nll.sum(), smooth.sum()
    elif reduction == "mean":
        nll, smooth = nll.sum() / wt.sum(), smooth.sum() / wt.sum()
    return (1 - eps) * nll + smooth * eps / classes


@pytest.mark.parametrize("policy", ["fast", "teaching"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_weight_ignore_index_label_smoothing_and_extra_dims(policy, reduction):
    rng = np.random.default_rng(5)
    n, classes, d1, d2 = 3, 4, 2, 5
    x = rng.standard_normal((n, classes, d1, d2))
    t = rng.integers(0, classes, (n, d1, d2))
    t[0, 1, 2] = t[2, 0, 0] = -100
    w = rng.uniform(0.5, 2.0, classes)
    flat_x, flat_t = np.moveaxis(x, 1, -1).reshape(-1, classes), t.reshape(-1)
    with mt.kernels.policy(policy):
        for weight, eps in ((None, 0.0), (w, 0.0), (None, 0.2), (w, 0.1)):
            want = _torch_cross_entropy_np(flat_x, flat_t, reduction, weight, -100, eps)
            if reduction == "none":
                want = want.reshape(n, d1, d2)
            for targets in (t, mt.tensor(t)):
                logits = mt.tensor(x, requires_grad=True)
                loss = F.cross_entropy(logits, targets, reduction, weight=None if weight is None else mt.tensor(w),
                                       label_smoothing=eps)
                assert_close(loss, want, mt.float64, n=classes)
                (loss * mt.tensor(np.ones(np.shape(want)))).sum().backward()
                assert np.isfinite(logits.grad.numpy()).all()
        # the gradient against finite differences, on the 2-D form with an ignored row
        x2, t2 = rng.standard_normal((4, 3)), np.array([2, -100, 0, 1])
        loss_module = nn.CrossEntropyLoss(mt.tensor(w[:3]), reduction=reduction, label_smoothing=0.1)
        logits = mt.tensor(x2, requires_grad=True)
        loss = loss_module(logits, t2)
        assert_close(loss, _torch_cross_entropy_np(x2, t2, reduction, w[:3], -100, 0.1), mt.float64, n=3)
        loss.sum().backward()
        h, grad = 1e-6, np.zeros_like(x2)
        for i in np.ndindex(*x2.shape):
            up, down = x2.copy(), x2.copy()
            up[i] += h
            down[i] -= h
            grad[i] = (_torch_cross_entropy_np(up, t2, reduction, w[:3], -100, 0.1).sum()
                       - _torch_cross_entropy_np(down, t2, reduction, w[:3], -100, 0.1).sum()) / (2 * h)
        np.testing.assert_allclose(logits.grad.numpy(), grad, rtol=1e-5, atol=1e-7)
        assert logits.grad.numpy()[1].tolist() == [0.0, 0.0, 0.0]  # the ignored row
    with pytest.raises(IndexError, match="target 7 is out of range"):
        F.cross_entropy(mt.zeros(2, 4), mt.tensor([7, -100]))
    with pytest.raises(mt.MinitensorError, match="out of range"):
        F.cross_entropy(mt.zeros(2, 4), mt.tensor([7, 1]))  # no ignored target: the kernels' own check
    assert np.isnan(F.cross_entropy(mt.zeros(2, 4), [-100, -100]).item())  # every target ignored: 0 / 0, as torch
    assert F.cross_entropy(mt.zeros(2, 4), [1, 5], ignore_index=5).item() == pytest.approx(np.log(4))
    with pytest.raises(ValueError, match="weight must be"):
        F.cross_entropy(mt.zeros(2, 4), [1, 2], weight=mt.ones(3))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(mt.zeros(2, 4), [1, 2], label_smoothing=1.5)


def test_cross_entropy_rejects_bad_targets():
    logits = mt.zeros(3, 4)
    with pytest.raises(TypeError, match="class indices"):
        F.cross_entropy(logits, np.array([0.0, 1.0, 2.0]))
    with pytest.raises(IndexError, match="target 4 is out of range for 4 classes"):
        F.cross_entropy(logits, [0, 4, 1])
    with pytest.raises(ValueError, match=r"\(2,\).*batch of 3"):
        F.cross_entropy(logits, [0, 1])
    with pytest.raises(ValueError, match=r"\(N, C\).*\(4,\)"):
        F.cross_entropy(mt.zeros(4), [0])
    with pytest.raises(mt.MinitensorError):
        F.cross_entropy(logits, mt.tensor([0.0, 9.0, 1.0]))  # checked by the gather kernel


def test_mse_loss():
    a = mt.tensor([1.0, 2.0, 4.0], requires_grad=True)
    b = mt.tensor([1.5, 2.0, 3.0])
    loss = F.mse_loss(a, b)
    assert_close(loss, (0.25 + 0 + 1) / 3, mt.float32)
    loss.backward()
    assert_close(a.grad, [-1.0 / 3, 0.0, 2.0 / 3], mt.float32)
    assert_close(F.mse_loss(a, b, reduction="sum"), 1.25, mt.float32)
    with pytest.warns(UserWarning, match="broadcast"):
        F.mse_loss(a, mt.zeros(3, 1))


def test_functional_softmax():
    x = mt.tensor([[1.0, 2.0, 3.0]])
    assert_close(F.softmax(x, 1), np.exp(log_softmax_np(np.array([[1.0, 2.0, 3.0]]))), mt.float32)
    assert_close(F.log_softmax(x, 1), log_softmax_np(np.array([[1.0, 2.0, 3.0]])), mt.float32)


# ---- optimizers ------------------------------------------------------------------------------------

P0 = np.array([1.0, -2.0, 0.5])
GRADS = [np.array([0.5, -1.0, 2.0]), np.array([-0.3, 0.2, 1.0]), np.array([1.0, 1.0, -1.0])]


def run_optimizer(make, steps=3):
    """Parameter values after each step with the gradients GRADS (float64)."""
    p = nn.Parameter(mt.tensor(P0))
    opt = make([p])
    ptr = p.data_ptr()
    history = []
    for g in GRADS[:steps]:
        opt.zero_grad()
        (p * mt.tensor(g)).sum().backward()  # d/dp = g
        opt.step()
        history.append(p.numpy())
    assert p.data_ptr() == ptr and p.is_leaf  # updated in place
    return history


# fused=False runs the chain of ops (the course's task layers_optim), True the kernel.
@pytest.mark.parametrize("fused", [False, True])
def test_sgd_plain_momentum_and_weight_decay(fused):
    history = run_optimizer(lambda ps: mt.optim.SGD(ps, lr=0.1, fused=fused))
    assert_close(history[-1], P0 - 0.1 * sum(GRADS), mt.float64)
    history = run_optimizer(lambda ps: mt.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01, fused=fused))
    p, buf = P0.copy(), None
    for g, got in zip(GRADS, history):
        d = g + 0.01 * p
        buf = d if buf is None else 0.9 * buf + d
        p = p - 0.1 * buf
        assert_close(got, p, mt.float64)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adam_matches_the_formula(weight_decay, fused):
    history = run_optimizer(lambda ps: mt.optim.Adam(ps, lr=0.01, betas=(0.8, 0.9), eps=1e-6,
                                                     weight_decay=weight_decay, fused=fused))
    p, m, v = P0.copy(), 0.0, 0.0
    for t, (g, got) in enumerate(zip(GRADS, history), start=1):
        g = g + weight_decay * p
        m = 0.8 * m + 0.2 * g
        v = 0.9 * v + 0.1 * g * g
        p = p - 0.01 / (1 - 0.8**t) * m / (np.sqrt(v) / np.sqrt(1 - 0.9**t) + 1e-6)
        assert_close(got, p, mt.float64)


@pytest.mark.parametrize("fused", [False, True])
def test_adamw_decays_the_parameter_not_the_gradient(fused):
    history = run_optimizer(lambda ps: mt.optim.AdamW(ps, lr=0.01, betas=(0.8, 0.9), eps=1e-6,
                                                      weight_decay=0.1, fused=fused))
    p, m, v = P0.copy(), 0.0, 0.0
    for t, (g, got) in enumerate(zip(GRADS, history), start=1):
        p = p * (1 - 0.01 * 0.1)
        m = 0.8 * m + 0.2 * g
        v = 0.9 * v + 0.1 * g * g
        p = p - 0.01 / (1 - 0.8**t) * m / (np.sqrt(v) / np.sqrt(1 - 0.9**t) + 1e-6)
        assert_close(got, p, mt.float64)


@pytest.mark.parametrize("make", [
    lambda ps, f: mt.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01, fused=f),
    lambda ps, f: mt.optim.Adam(ps, lr=0.01, weight_decay=0.01, fused=f),
    lambda ps, f: mt.optim.AdamW(ps, lr=0.01, fused=f),
], ids=["sgd", "adam", "adamw"])
def test_fused_and_chained_updates_agree_on_random_parameters(make):
    rng = np.random.default_rng(11)
    shapes = [(33, 17), (5,), (1, 1), (0, 3), (300,)]
    values = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(4)]
    results = []
    for fused in (False, True):
        params = [nn.Parameter(mt.tensor(v)) for v in values]
        opt = make(params, fused)
        for step in grads:
            for p, g in zip(params, step):
                p.grad = mt.tensor(g)
            opt.step()
        results.append([p.numpy() for p in params])
    for chained, fused in zip(*results):
        assert_close(fused, chained, mt.float32, n=8)


def test_the_fused_update_is_one_launch_and_follows_the_kernel_policy():
    from minitensor import _lib

    if _lib.launch_count("adam_step") < 0:
        pytest.skip("the CUDA build counts no launches")
    params = [nn.Parameter(mt.randn(4, 3)), nn.Parameter(mt.randn(3))]
    opt = mt.optim.Adam(params)
    per_parameter = mt.optim.Adam(params, foreach=False)
    for p in params:
        p.grad = mt.ones(*p.shape)
    with mt.kernels.policy("fast"):
        _lib.reset_launch_counts()
        opt.step()  # foreach's default under the fast policy: the whole list in one launch
        assert (_lib.launch_count("adam_step_list"), _lib.launch_count("adam_step")) == (1, 0)
        _lib.reset_launch_counts()
        per_parameter.step()
        assert (_lib.launch_count("adam_step_list"), _lib.launch_count("adam_step")) == (0, 2)  # one per parameter
    with mt.kernels.policy("teaching"):  # the default paths run the students' kernels
        _lib.reset_launch_counts()
        opt.step()
        assert (_lib.launch_count("adam_step_list"), _lib.launch_count("adam_step")) == (0, 0)


def test_fused_true_refuses_what_the_kernel_cannot_take():
    p = nn.Parameter(mt.randn(4, 6))
    view = p.T  # not contiguous; an optimizer of views is odd, but allowed with fused=False
    view.grad = mt.ones(6, 4)
    with pytest.raises(ValueError, match=r"fused=True.*shape \(6, 4\).*not contiguous"):
        mt.optim.SGD([p], lr=0.1, fused=True)._fuse(view)
    with pytest.raises(TypeError, match="fused must be None, True or False"):
        mt.optim.Adam([p], fused="yes")


def test_optimizer_errors_and_skipped_parameters():
    with pytest.raises(ValueError, match="empty"):
        mt.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="leaf"):
        mt.optim.Adam([mt.ones(2, requires_grad=True) * 2.0])
    with pytest.raises(TypeError, match="iterable"):
        mt.optim.SGD(mt.ones(2, requires_grad=True), lr=0.1)
    p = nn.Parameter(mt.ones(2))
    mt.optim.Adam([p]).step()  # no grad yet: nothing changes
    assert p.tolist() == [1.0, 1.0]


# ---- a training run ---------------------------------------------------------------------------------


def test_a_small_training_run_lowers_the_loss():
    rng = np.random.default_rng(9)
    centers = np.array([[2.0, 0.0], [-2.0, 1.0], [0.0, -2.0]])
    labels = rng.integers(0, 3, 96)
    points = (centers[labels] + rng.standard_normal((96, 2))).astype(np.float32)
    mt.manual_seed(9)
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = mt.optim.Adam(model.parameters(), lr=0.05)
    x = mt.tensor(points)
    start = time.perf_counter()
    losses = []
    for _ in range(40):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses
    accuracy = (model(x).argmax(dim=1).numpy() == labels).mean()
    assert accuracy > 0.85
    assert time.perf_counter() - start < 10  # about a second on the emulator
