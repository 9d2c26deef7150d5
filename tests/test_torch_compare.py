"""The autograd graphs of tests/grad_cases.py, and nn/optim, compared with PyTorch.

Skipped (with the reason) where torch is not installed; it is on the GPU
machine. torch runs in float64 as the reference; minitensor runs in float32
and in float64, each compared with the tolerance of its dtype
(tests/helpers.py).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (it is on the GPU machine)")

import minitensor as mt  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from grad_cases import CASES, Api, values  # noqa: E402
from helpers import assert_close  # noqa: E402
from minitensor import nn  # noqa: E402

MT = Api(mt)
TORCH = Api(torch, index_dtype=torch.long)
N = 16  # the longest sum in these small graphs: the tolerance grows with sqrt(N)
DTYPES = {"float32": (mt.float32, np.float32), "float64": (mt.float64, np.float64)}
TORCH_CASES = [case for case in CASES if case.torch]


def run_torch(fn, arrays, weights):
    leaves = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out = fn(TORCH, *leaves)
    (out * torch.tensor(weights)).sum().backward()
    return out.detach().numpy(), [leaf.grad.numpy() for leaf in leaves]


def run_mt(fn, arrays, weights, dtype):
    leaves = [mt.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
    out = fn(MT, *leaves)
    (out * mt.tensor(weights)).sum().backward()
    return out, [leaf.grad for leaf in leaves]


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("case", TORCH_CASES, ids=[c.name for c in TORCH_CASES])
def test_same_values_and_gradients_as_torch(case, dtype):
    mt_dtype, np_dtype = DTYPES[dtype]
    arrays = [a.astype(np_dtype).astype(np.float64) for a in case.inputs(seed=len(case.name))]
    probe = case.fn(TORCH, *[torch.tensor(a) for a in arrays])  # for the shape of the result
    weights = np.random.default_rng(0).standard_normal(tuple(probe.shape))
    ref_out, ref_grads = run_torch(case.fn, arrays, weights)
    out, grads = run_mt(case.fn, arrays, weights, mt_dtype)
    assert out.shape == ref_out.shape
    assert_close(out.to(mt_dtype), ref_out, mt_dtype, n=N)
    for grad, ref in zip(grads, ref_grads):
        assert_close(grad, ref, mt_dtype, n=N)


def test_tie_rules_match_torch():
    data = [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]
    for reduce in (lambda t: t.max(), lambda t: t.min(), lambda t: values(t.max(dim=1)),
                   lambda t: values(t.min(dim=0))):
        a = torch.tensor(data, dtype=torch.float64, requires_grad=True)
        reduce(a).sum().backward()
        b = mt.tensor(data, dtype=mt.float64, requires_grad=True)
        reduce(b).sum().backward()
        assert b.grad.tolist() == a.grad.tolist()
    a, b = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([2.0, 2.0], requires_grad=True)
    torch.maximum(a, b).sum().backward()
    c, d = mt.tensor([1.0, 2.0], requires_grad=True), mt.tensor([2.0, 2.0], requires_grad=True)
    mt.maximum(c, d).sum().backward()
    assert c.grad.tolist() == a.grad.tolist() and d.grad.tolist() == b.grad.tolist()


def copy_linear(src: nn.Linear) -> torch.nn.Linear:
    layer = torch.nn.Linear(src.in_features, src.out_features, dtype=torch.float64)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(src.weight.numpy()))
        layer.bias.copy_(torch.tensor(src.bias.numpy()))
    return layer


def test_mlp_cross_entropy_gradients_match_torch():
    mt.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4)).to(mt.float64)
    ref = torch.nn.Sequential(copy_linear(model[0]), torch.nn.ReLU(), copy_linear(model[2]))
    x = np.random.default_rng(1).standard_normal((5, 6))
    y = np.array([0, 3, 1, 1, 2])
    loss = F.cross_entropy(model(mt.tensor(x)), y)
    loss.backward()
    ref_loss = torch.nn.functional.cross_entropy(ref(torch.tensor(x)), torch.tensor(y))
    ref_loss.backward()
    assert_close(loss, ref_loss.item(), mt.float64, n=N)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert_close(p.grad, q.grad.numpy(), mt.float64, n=N)


@pytest.mark.parametrize("name", ["sgd", "sgd_momentum", "adam", "adam_weight_decay"])
def test_optimizers_follow_torch(name):
    make = {
        "sgd": (lambda ps: mt.optim.SGD(ps, lr=0.1), lambda ps: torch.optim.SGD(ps, lr=0.1)),
        "sgd_momentum": (lambda ps: mt.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
                         lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01)),
        "adam": (lambda ps: mt.optim.Adam(ps, lr=0.01), lambda ps: torch.optim.Adam(ps, lr=0.01)),
        "adam_weight_decay": (lambda ps: mt.optim.Adam(ps, lr=0.01, betas=(0.8, 0.95), weight_decay=0.1),
                              lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.8, 0.95), weight_decay=0.1)),
    }[name]
    mt.manual_seed(2)
    model = nn.Linear(4, 3).to(mt.float64)
    ref = copy_linear(model)
    opt, ref_opt = make[0](model.parameters()), make[1](ref.parameters())
    rng = np.random.default_rng(3)
    for _ in range(5):
        x, y = rng.standard_normal((6, 4)), rng.integers(0, 3, 6)
        opt.zero_grad()
        F.cross_entropy(model(mt.tensor(x)), y).backward()
        opt.step()
        ref_opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(torch.tensor(x)), torch.tensor(y)).backward()
        ref_opt.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert_close(p, q.detach().numpy(), mt.float64, n=N)


def test_layer_norm_and_embedding_match_torch():
    x = np.random.default_rng(4).standard_normal((3, 5))
    w, b = np.random.default_rng(5).standard_normal((2, 5))
    ours = [mt.tensor(a, requires_grad=True) for a in (x, w, b)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    out = F.layer_norm(ours[0], (5,), ours[1], ours[2])
    ref = torch.nn.functional.layer_norm(theirs[0], (5,), theirs[1], theirs[2])
    weights = np.random.default_rng(6).standard_normal((3, 5))
    (out * mt.tensor(weights)).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()
    assert_close(out, ref.detach().numpy(), mt.float64, n=N)
    for a, c in zip(ours, theirs):
        assert_close(a.grad, c.grad.numpy(), mt.float64, n=N)

    table = np.random.default_rng(7).standard_normal((6, 3))
    idx = np.array([[1, 5, 1], [0, 1, 2]])
    ours_t = mt.tensor(table, requires_grad=True)
    theirs_t = torch.tensor(table, requires_grad=True)
    F.embedding(idx, ours_t).pow(2).sum().backward()
    torch.nn.functional.embedding(torch.tensor(idx), theirs_t).pow(2).sum().backward()
    assert_close(ours_t.grad, theirs_t.grad.numpy(), mt.float64, n=N)


# ---- dtypes: promotion and integer semantics, against torch ----------------------------------------

DTYPE_PAIRS = [("bool", np.array([True, False, True])), ("int64", np.array([7, -7, 3])),
               ("float32", np.array([2.5, -1.5, 0.5], np.float32)), ("float64", np.array([-3.0, 4.0, 1.5]))]
OPS = {
    "add": lambda lib, a, b: a + b, "mul": lambda lib, a, b: a * b, "truediv": lambda lib, a, b: a / b,
    "eq": lambda lib, a, b: a == b, "lt": lambda lib, a, b: a < b,
    "maximum": lambda lib, a, b: lib.maximum(a, b), "where": lambda lib, a, b: lib.where(a != 0, a, b),
}


def _pair_results(lib, op, a, b):
    return OPS[op](lib, a, b)


@pytest.mark.parametrize("op", ["add", "mul", "truediv", "eq", "lt", "maximum", "where"])
def test_two_tensor_promotion_matches_torch(op):
    for name_a, a in DTYPE_PAIRS:
        for name_b, b in DTYPE_PAIRS:
            expected = _pair_results(torch, op, torch.tensor(a), torch.tensor(b))
            got = _pair_results(mt, op, mt.tensor(a), mt.tensor(b))
            assert got.dtype.name == str(expected.dtype).replace("torch.", ""), (op, name_a, name_b)
            np.testing.assert_allclose(got.numpy().astype(np.float64), expected.numpy().astype(np.float64),
                                       rtol=1e-6, err_msg=f"{op} {name_a} {name_b}")


@pytest.mark.parametrize("scalar", [2, -3, 1.5, True])
def test_scalar_promotion_and_integer_ops_match_torch(scalar):
    for name, a in DTYPE_PAIRS:
        ta, ma = torch.tensor(a), mt.tensor(a)
        cases = [("add", lambda x: x + scalar), ("rmul", lambda x: scalar * x), ("lt", lambda x: x < scalar)]
        if name != "bool":
            cases += [("floordiv", lambda x: x // scalar), ("mod", lambda x: x % scalar)]
        if name != "bool" and not isinstance(scalar, bool):
            cases += [("rsub", lambda x: scalar - x)]
        if name == "bool" or isinstance(scalar, bool):  # torch refuses subtraction with a bool
            with pytest.raises(RuntimeError):
                scalar - ta
            with pytest.raises(mt.DTypeError, match="bool"):
                scalar - ma
        for what, fn in cases:
            expected, got = fn(ta), fn(ma)
            assert got.dtype.name == str(expected.dtype).replace("torch.", ""), (what, name, scalar)
            np.testing.assert_allclose(got.numpy().astype(np.float64), expected.numpy().astype(np.float64),
                                       rtol=1e-6, err_msg=f"{what} {name} {scalar}")


def test_integer_reductions_and_arg_reductions_match_torch():
    a = np.random.default_rng(0).integers(-5, 6, (4, 7))
    ta, ma = torch.tensor(a), mt.tensor(a)
    for fn in (lambda x: x.sum(1), lambda x: x.argmax(0), lambda x: x.max(1).indices, lambda x: (x > 0).sum(),
               lambda x: (x > 0).any(1), lambda x: x.prod(0), lambda x: x.float().argmin(1)):
        expected, got = fn(ta), fn(ma)
        assert got.dtype.name == str(expected.dtype).replace("torch.", "")
        np.testing.assert_array_equal(got.numpy(), expected.numpy())


# ---- convolution and pooling, values and gradients, against torch ------------------------------------


@pytest.mark.parametrize("stride, padding, dilation, groups", [(1, 0, 1, 1), ((2, 1), (1, 2), (1, 2), 2), (3, 1, 2, 4)])
def test_conv2d_matches_torch(stride, padding, dilation, groups):
    rng = np.random.default_rng(groups)
    x, w, b = rng.standard_normal((2, 4, 9, 8)), rng.standard_normal((8, 4 // groups, 3, 2)), rng.standard_normal(8)
    weights = None
    grads = []
    for lib, fn in ((torch, torch.nn.functional.conv2d), (mt, F.conv2d)):
        leaves = [lib.tensor(a, dtype=lib.float64, requires_grad=True) for a in (x, w, b)]
        out = fn(*leaves, stride=stride, padding=padding, dilation=dilation, groups=groups)
        if weights is None:
            weights = np.random.default_rng(9).standard_normal(tuple(out.shape))
        (out * lib.tensor(weights)).sum().backward()
        grads.append([np.asarray(out.detach().numpy())] + [leaf.grad.numpy() for leaf in leaves])
    for got, expected in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_pooling_matches_torch():
    x = np.random.default_rng(5).standard_normal((2, 3, 9, 7))
    tf = torch.nn.functional
    cases = [(lambda lib, t: tf.max_pool2d(t, 3, 2, 1) if lib is torch else F.max_pool2d(t, 3, 2, 1)),
             (lambda lib, t: tf.avg_pool2d(t, (3, 2), 1, (1, 1), count_include_pad=False) if lib is torch
              else F.avg_pool2d(t, (3, 2), 1, (1, 1), count_include_pad=False))]
    for case in cases:
        results = []
        for lib in (torch, mt):
            t = lib.tensor(x, dtype=lib.float64, requires_grad=True)
            out = case(lib, t)
            out.sum().backward()
            results.append((out.detach().numpy(), t.grad.numpy()))
        for got, expected in zip(results[1], results[0]):
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    _, torch_idx = tf.max_pool2d(torch.tensor(x), 3, 2, 1, return_indices=True)
    _, mt_idx = F.max_pool2d(mt.tensor(x), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(mt_idx.numpy(), torch_idx.numpy())


# ---- the transformer path, against torch's modules with the same weights ------------------------------


def _copy_into_torch(mt_module, torch_module):
    """torch_module's parameters set to mt_module's (the same names, as both follow torch)."""
    ours = dict(mt_module.named_parameters())
    with torch.no_grad():
        for name, p in torch_module.named_parameters():
            p.copy_(torch.tensor(ours[name].numpy(), dtype=torch.float64))


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_matches_torch(norm_first):
    mt.manual_seed(0)
    ours = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", batch_first=True,
                                      norm_first=norm_first, dtype=mt.float64)
    theirs = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", batch_first=True,
                                              norm_first=norm_first, dtype=torch.float64)
    _copy_into_torch(ours, theirs)
    x = np.random.default_rng(0).standard_normal((3, 5, 8))
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    expected = theirs(torch.tensor(x), src_mask=mask, is_causal=True)
    got = ours(mt.tensor(x), src_mask=mt.tensor(mask.numpy()), is_causal=True)
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-9, atol=1e-9)
    m_ours = nn.MultiheadAttention(8, 4, dtype=mt.float64)
    m_theirs = torch.nn.MultiheadAttention(8, 4, dtype=torch.float64)
    _copy_into_torch(m_ours, m_theirs)
    q = np.random.default_rng(1).standard_normal((5, 2, 8))
    out, w = m_ours(*(mt.tensor(q),) * 3)
    out_t, w_t = m_theirs(*(torch.tensor(q),) * 3)
    np.testing.assert_allclose(out.detach().numpy(), out_t.detach().numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(w.detach().numpy(), w_t.detach().numpy(), rtol=1e-9, atol=1e-9)
    xg = np.random.default_rng(2).standard_normal((4, 6))
    for approximate in ("none", "tanh"):
        np.testing.assert_allclose(F.gelu(mt.tensor(xg), approximate).numpy(),
                                   torch.nn.functional.gelu(torch.tensor(xg), approximate=approximate).numpy(),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("algo", ["naive", "masked_softmax", "flash"])
def test_attention_rungs_values_and_gradients_match_torch(algo):
    """Each rung of mt.kernels.attention (the flash rung's two backward kernels
    included) and F.scaled_dot_product_attention with a bool mask (one query
    masked whole) and a float mask, against torch's scaled_dot_product_attention
    in float64."""
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((2, 3, 70, 16)), rng.standard_normal((2, 3, 45, 16)), rng.standard_normal((2, 3, 45, 8))
    dout = rng.standard_normal((2, 3, 70, 8))
    for causal in (False, True):
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        expected = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
        expected.backward(torch.tensor(dout))
        ours = [mt.tensor(a, requires_grad=True) for a in (q, k, v)]
        got = mt.kernels.attention(*ours, algo, causal=causal)
        got.backward(mt.tensor(dout))
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-9, atol=1e-9)
        for mine, theirs in zip(ours, (tq, tk, tv)):
            np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-9)
    keep = rng.random((70, 45)) > 0.3
    keep[:, 0] = True
    keep[5] = False  # a query that sees no key: zero weights in torch's attention (its safe softmax)
    bias = rng.standard_normal((3, 1, 45))
    for mask in (keep, bias):
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        expected = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(mask))
        expected.backward(torch.tensor(dout))
        ours = [mt.tensor(a, requires_grad=True) for a in (q, k, v)]
        got = F.scaled_dot_product_attention(*ours, attn_mask=mt.tensor(mask))
        got.backward(mt.tensor(dout))
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-9, atol=1e-9)
        for mine, theirs in zip(ours, (tq, tk, tv)):
            np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-9)
