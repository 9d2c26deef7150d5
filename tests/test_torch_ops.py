"""minitensor's kernels as torch custom ops (minitensor/torch_ops/), against torch's own ops.

Skipped, with the reason, where torch is not installed (CI has none; the
GPU machine has it). The tensors live where minitensor's backend computes:
torch CPU tensors under the emulator, CUDA tensors on the CUDA build.

- every op, forward and backward, through ``torch.library.opcheck`` (the
  schema, the autograd registration, the fake against the real output, and
  a trace through AOTAutograd with dynamic shapes);
- each op's values against torch's op on the same inputs (contiguous and
  strided views, sizes off the tiles, size-1 dims), within the tolerance
  of tests/helpers.py, and ``torch.autograd.gradcheck`` of each in float64;
- no copy on the way in or out, and no registration left behind;
- torch.compile (fullgraph) keeps each op one opaque node, forward and backward;
- a small torch model whose layers run minitensor's ops trains with torch's
  autograd and optimizer, and its loss curve matches the same model on
  torch's own ops (same initial weights, same data, 30 steps): within
  1e-9 relative in float64 and 1e-4 in float32 (test_training_matches_torch).
"""

from __future__ import annotations

import gc
import math
import subprocess
import sys
from typing import Any, Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (minitensor does not depend on it; "
                                            "the GPU machine has it)")

import minitensor as mt  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from minitensor import _foreign  # noqa: E402
from helpers import assert_close  # noqa: E402

if mt.backend() == "cuda" and not torch.cuda.is_available():
    pytest.skip("minitensor runs on the GPU but this torch has no CUDA", allow_module_level=True)

import minitensor.torch_ops as mtops  # noqa: E402
from minitensor.torch_ops import _bridge  # noqa: E402

DEVICE = "cuda" if mt.backend() == "cuda" else "cpu"
DTYPES = [torch.float32, torch.float64]
NAMES = {torch.float32: "float32", torch.float64: "float64"}


def rand(*shape: int, dtype: Any = torch.float64, seed: int = 0, grad: bool = False) -> Any:
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype=dtype, device=DEVICE)
    return t.requires_grad_(grad)


def close(got: Any, ref: Any, dtype: Any, n: int = 1) -> None:
    """got (from minitensor's op) matches torch's float64 result within tests/helpers.py's tolerance."""
    assert got.dtype == dtype and tuple(got.shape) == tuple(ref.shape), (got.dtype, got.shape, ref.shape)
    assert_close(got.detach().cpu().double().numpy(), ref.detach().cpu().double().numpy(), NAMES[dtype], n)


# ---- every op through torch.library.opcheck ---------------------------------------------------

def _opcheck_cases() -> list[tuple[str, Callable[[], tuple[Any, tuple[Any, ...]]]]]:
    ops = torch.ops.minitensor
    x2, w = rand(5, 7, grad=True), rand(7, 3, grad=True)
    return [
        ("matmul", lambda: (ops.matmul.default, (rand(5, 7, grad=True), rand(7, 3, grad=True)))),
        ("matmul batched, broadcast", lambda: (ops.matmul.default, (rand(2, 1, 4, 3, grad=True),
                                                                     rand(3, 3, 5, grad=True)))),
        ("matmul 1-D", lambda: (ops.matmul.default, (rand(7, grad=True), rand(2, 7, 3, grad=True)))),
        ("matmul transposed view", lambda: (ops.matmul.default, (rand(7, 5, grad=True).mT, rand(3, 7).mT))),
        ("softmax", lambda: (ops.softmax.default, (rand(4, 9, grad=True), 1, False))),
        ("log_softmax dim 0", lambda: (ops.softmax.default, (rand(4, 9, grad=True), 0, True))),
        ("softmax_backward", lambda: (ops.softmax_backward.default, (rand(4, 9), torch.softmax(rand(4, 9), -1),
                                                                       -1, False))),
        ("layer_norm", lambda: (ops.layer_norm.default, (rand(3, 4, 6, grad=True), [6], rand(6, grad=True),
                                                         rand(6, grad=True), 1e-5))),
        ("layer_norm 2 dims, no affine", lambda: (ops.layer_norm.default, (rand(3, 4, 6, grad=True), [4, 6],
                                                                            None, None, 1e-5))),
        ("sdpa", lambda: (ops.sdpa.default, (rand(2, 5, 8, grad=True), rand(2, 7, 8, grad=True),
                                             rand(2, 7, 4, grad=True), False, 0.3))),
        ("sdpa causal, heads", lambda: (ops.sdpa.default, (rand(2, 2, 5, 8, grad=True), rand(2, 2, 5, 8, grad=True),
                                                           rand(2, 2, 5, 8, grad=True), True, 0.35))),
        ("conv2d", lambda: (ops.conv2d.default, (rand(2, 4, 6, 5, grad=True), rand(6, 2, 3, 3, grad=True),
                                                 rand(6, grad=True), [1, 1], [1, 1], [1, 1], 2))),
        ("conv2d stride, dilation, no bias", lambda: (ops.conv2d.default, (rand(1, 3, 7, 7, grad=True),
                                                                            rand(4, 3, 2, 3, grad=True), None,
                                                                            [2, 1], [0, 1], [2, 1], 1))),
        ("conv2d_backward", lambda: (ops.conv2d_backward.default, (rand(2, 4, 6, 5), rand(2, 4, 6, 5),
                                                                   rand(4, 4, 3, 3), [1, 1], [1, 1], [1, 1], 1,
                                                                   True, True, False))),
    ]


@pytest.mark.parametrize("name,case", _opcheck_cases(), ids=[name for name, _ in _opcheck_cases()])
def test_opcheck(name: str, case: Callable[[], tuple[Any, tuple[Any, ...]]]) -> None:
    if not hasattr(torch.library, "opcheck"):
        pytest.skip(f"torch {torch.__version__} has no torch.library.opcheck (2.4 and later have)")
    op, args = case()
    results = torch.library.opcheck(op, args)
    assert results and all(v == "SUCCESS" for v in results.values()), results


# ---- values against torch's ops ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
@pytest.mark.parametrize("a_shape,b_shape", [((33, 65), (65, 7)), ((1, 1), (1, 1)), ((3, 1, 17, 31), (4, 31, 9)),
                                             ((31,), (31, 5)), ((2, 9, 31), (31,)), ((0, 4), (4, 3))])
def test_matmul_matches_torch(dtype: Any, a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    a, b = rand(*a_shape, dtype=dtype, seed=1), rand(*b_shape, dtype=dtype, seed=2)
    close(mtops.matmul(a, b), torch.matmul(a.double(), b.double()), dtype, a_shape[-1])
    # Strided views reach the kernels as they are: a transposed operand, a sliced one.
    at, bt = rand(*a_shape[::-1], dtype=dtype, seed=3), rand(*b_shape, 2, dtype=dtype, seed=4)[..., 1]
    a2 = at.permute(*reversed(range(at.ndim)))
    close(mtops.matmul(a2, bt), torch.matmul(a2.double(), bt.double()), dtype, a_shape[-1])


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
@pytest.mark.parametrize("shape,dim", [((4, 33), -1), ((5, 1025), 1), ((6, 3, 7), 0), ((1,), 0), ((3, 0), 0)])
def test_softmax_matches_torch(dtype: Any, shape: tuple[int, ...], dim: int) -> None:
    x = rand(*shape, dtype=dtype, seed=5) * 3
    n = shape[dim] if shape else 1
    close(mtops.softmax(x, dim), torch.softmax(x.double(), dim), dtype, n)
    close(mtops.log_softmax(x, dim), torch.log_softmax(x.double(), dim), dtype, n)
    xt = x.mT if x.ndim == 2 else x  # a transposed view
    close(mtops.softmax(xt, 0), torch.softmax(xt.double(), 0), dtype, xt.shape[0])


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
@pytest.mark.parametrize("shape,normalized,affine", [((4, 33), (33,), True), ((2, 3, 5, 7), (5, 7), True),
                                                     ((3, 1), (1,), False), ((65,), (65,), True)])
def test_layer_norm_matches_torch(dtype: Any, shape: tuple[int, ...], normalized: tuple[int, ...],
                                  affine: bool) -> None:
    x = rand(*shape, dtype=dtype, seed=6) * 2 + 1
    w = rand(*normalized, dtype=dtype, seed=7) if affine else None
    b = rand(*normalized, dtype=dtype, seed=8) if affine else None
    ref = F.layer_norm(x.double(), normalized, None if w is None else w.double(), None if b is None else b.double())
    close(mtops.layer_norm(x, normalized, w, b), ref, dtype, math.prod(normalized))
    xs = rand(*shape[:-1], shape[-1] * 2, dtype=dtype, seed=9)[..., 1::2]  # a strided view
    ref = F.layer_norm(xs.double(), normalized, None if w is None else w.double(), None if b is None else b.double())
    close(mtops.layer_norm(xs, normalized, w, b), ref, dtype, math.prod(normalized))


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
@pytest.mark.parametrize("q_shape,s,ev,causal", [((2, 5, 8), 7, 4, False), ((1, 2, 9, 16), 9, 16, True),
                                                 ((2, 3, 5, 32), 6, 32, True), ((1, 1, 1), 1, 1, False),
                                                 ((3, 4, 64), 3, 64, False)])
def test_sdpa_matches_torch(dtype: Any, q_shape: tuple[int, ...], s: int, ev: int, causal: bool) -> None:
    q = rand(*q_shape, dtype=dtype, seed=9)
    k = rand(*q_shape[:-2], s, q_shape[-1], dtype=dtype, seed=10)
    v = rand(*q_shape[:-2], s, ev, dtype=dtype, seed=11)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    close(mtops.scaled_dot_product_attention(q, k, v, is_causal=causal), ref, dtype, s * q_shape[-1])
    # heads as a permuted view of (B, L, H, E), as a transformer makes them
    if len(q_shape) == 4:
        qp = q.transpose(1, 2).contiguous().transpose(1, 2)
        close(mtops.scaled_dot_product_attention(qp, k, v, is_causal=causal, scale=0.5),
              F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal, scale=0.5),
              dtype, s * q_shape[-1])


@pytest.mark.parametrize("dtype", DTYPES, ids=NAMES.get)
@pytest.mark.parametrize("x_shape,w_shape,kw", [
    ((2, 3, 9, 10), (5, 3, 3, 3), dict(padding=1)),
    ((1, 4, 8, 8), (4, 1, 3, 3), dict(padding=1, groups=4)),  # depthwise: the tiled rung
    ((2, 4, 11, 7), (6, 2, 3, 2), dict(stride=2, dilation=(2, 1), groups=2)),
    ((1, 1, 5, 5), (1, 1, 1, 1), dict()),
])
def test_conv2d_matches_torch(dtype: Any, x_shape: tuple[int, ...], w_shape: tuple[int, ...],
                              kw: dict[str, Any]) -> None:
    x, w, b = rand(*x_shape, dtype=dtype, seed=12), rand(*w_shape, dtype=dtype, seed=13), \
        rand(w_shape[0], dtype=dtype, seed=14)
    n = w_shape[1] * w_shape[2] * w_shape[3]
    close(mtops.conv2d(x, w, b, **kw), F.conv2d(x.double(), w.double(), b.double(), **kw), dtype, n)
    xs = rand(x_shape[0], x_shape[1], x_shape[2] + 2, x_shape[3] * 2, dtype=dtype, seed=15)[:, :, 1:-1, ::2]
    close(mtops.conv2d(xs, w, None, **kw), F.conv2d(xs.double(), w.double(), None, **kw), dtype, n)


# ---- gradients: gradcheck in float64 -------------------------------------------------------------

GRADCHECKS: dict[str, Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]] = {
    "matmul": lambda: (mtops.matmul, (rand(4, 5, grad=True), rand(5, 3, grad=True))),
    "matmul batched, broadcast, 1-D": lambda: (lambda a, b, c: mtops.matmul(mtops.matmul(a, b), c),
                                               (rand(2, 1, 3, 4, grad=True), rand(3, 4, 2, grad=True),
                                                rand(2, grad=True))),
    "linear over a batch of rows": lambda: (mtops.linear, (rand(2, 3, 4, grad=True), rand(5, 4, grad=True),
                                                           rand(5, grad=True))),
    "softmax": lambda: (lambda x: mtops.softmax(x, 1), (rand(3, 6, grad=True),)),
    "log_softmax": lambda: (lambda x: mtops.log_softmax(x, 0), (rand(3, 6, grad=True),)),
    "layer_norm": lambda: (lambda x, w, b: mtops.layer_norm(x, (2, 5), w, b),
                           (rand(3, 2, 5, grad=True), rand(2, 5, grad=True), rand(2, 5, grad=True))),
    "layer_norm weight only": lambda: (lambda x, w: mtops.layer_norm(x, 5, w),
                                       (rand(4, 5, grad=True), rand(5, grad=True))),
    "sdpa flash": lambda: (lambda q, k, v: mtops.scaled_dot_product_attention(q, k, v),
                           (rand(2, 4, 6, grad=True), rand(2, 5, 6, grad=True), rand(2, 5, 3, grad=True))),
    "sdpa causal, warp rung": lambda: (lambda q, k, v: mtops.scaled_dot_product_attention(q, k, v, is_causal=True),
                                       (rand(1, 2, 3, 32, grad=True), rand(1, 2, 4, 32, grad=True),
                                        rand(1, 2, 4, 32, grad=True))),
    "conv2d": lambda: (lambda x, w, b: mtops.conv2d(x, w, b, padding=1),
                       (rand(2, 2, 4, 5, grad=True), rand(3, 2, 3, 3, grad=True), rand(3, grad=True))),
    "conv2d groups, stride": lambda: (lambda x, w: mtops.conv2d(x, w, None, stride=2, groups=2),
                                      (rand(1, 4, 5, 5, grad=True), rand(2, 2, 2, 2, grad=True))),
    "conv2d depthwise": lambda: (lambda x, w: mtops.conv2d(x, w, None, padding=1, groups=3),
                                 (rand(1, 3, 4, 4, grad=True), rand(3, 1, 3, 3, grad=True))),
}


@pytest.mark.parametrize("name", sorted(GRADCHECKS))
def test_gradcheck(name: str) -> None:
    fn, inputs = GRADCHECKS[name]()
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)


def test_only_the_gradients_asked_for_are_computed() -> None:
    x, w = rand(3, 4), rand(5, 4, grad=True)
    (mtops.linear(x, w) ** 2).sum().backward()
    assert x.grad is None and w.grad is not None
    close(w.grad, (2 * (x @ w.T)).T @ x, torch.float64, 4)
    img, k = rand(1, 2, 5, 5, grad=True), rand(3, 2, 3, 3)
    mtops.conv2d(img, k, rand(3, grad=False)).sum().backward()
    assert img.grad is not None and k.grad is None


# ---- no copy, nothing left registered ------------------------------------------------------------

def test_tensors_cross_without_a_copy() -> None:
    t = rand(6, 8).mT[1:]  # a strided view with an offset
    a = _bridge.to_array(t)
    assert a.data_ptr() == t.data_ptr() and a.shape == tuple(t.shape) and a.strides == t.stride()
    back = _bridge.to_torch(a)
    assert back.data_ptr() == t.data_ptr() and back.stride() == t.stride()
    t.fill_(2.5)  # a write through one is seen through the other
    assert back.eq(2.5).all()
    # minitensor's own DLPack both ways: kDLCPU (1) under the emulator, kDLCUDA (2) on the CUDA build
    m = mt.from_dlpack(t)
    assert m.data_ptr() == t.data_ptr() and m.__dlpack_device__()[0] == (2 if DEVICE == "cuda" else 1)
    assert torch.from_dlpack(m).data_ptr() == t.data_ptr() and torch.from_dlpack(m).device.type == DEVICE


def test_an_op_leaves_no_registration_behind() -> None:
    gc.collect()
    before = _foreign.registered_regions()
    a, b = rand(4, 5, grad=True), rand(5, 6, grad=True)
    out = mtops.softmax(mtops.matmul(a, b), -1)
    out.sum().backward()
    del out, a, b
    gc.collect()
    assert _foreign.registered_regions() == before


def test_import_minitensor_does_not_import_torch() -> None:
    code = "import sys, minitensor; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


# ---- errors that name the problem -----------------------------------------------------------------

def test_bad_inputs_are_refused_with_a_message() -> None:
    with pytest.raises(TypeError, match=r"minitensor::matmul: a is torch.float16"):
        mtops.matmul(rand(2, 2).half(), rand(2, 2).half())
    with pytest.raises(TypeError, match="one dtype"):
        mtops.matmul(rand(2, 2, dtype=torch.float32), rand(2, 2))
    with pytest.raises(ValueError, match=r"shapes \(2, 3\) and \(4, 5\) cannot be multiplied"):
        mtops.matmul(rand(2, 3), rand(4, 5))
    with pytest.raises(ValueError, match="head dims 96"):
        mtops.scaled_dot_product_attention(rand(1, 2, 96), rand(1, 2, 96), rand(1, 2, 96))
    with pytest.raises(ValueError, match="same leading"):
        mtops.scaled_dot_product_attention(rand(2, 3, 8), rand(1, 3, 8), rand(1, 3, 8))
    with pytest.raises(ValueError, match="groups = 3 do not agree"):
        mtops.conv2d(rand(1, 4, 5, 5), rand(2, 4, 3, 3), groups=3)
    with pytest.raises(ValueError, match="normalized shape"):
        mtops.layer_norm(rand(3, 4), (5,))
    with pytest.raises(ValueError, match=r"weight has shape \(3,\), expected the normalized shape \(4,\)"):
        mtops.layer_norm(rand(3, 4), (4,), rand(3))


# ---- torch.compile: opaque ops ---------------------------------------------------------------------

def test_torch_compile_keeps_each_op_one_node() -> None:
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs: dict[str, Any] = {}

    def keep(kind: str) -> Callable[..., Any]:
        def compiler(gm: Any, example_inputs: Any) -> Any:  # keeps the graph, runs it as it is
            graphs[kind] = gm
            return make_boxed_func(gm.forward)

        return compiler

    def block(x: Any, w: Any, k: Any) -> Any:
        h = mtops.layer_norm(mtops.linear(x, w), w.shape[0])
        a = mtops.scaled_dot_product_attention(h, h, h, is_causal=True)
        img = mtops.conv2d(a.unsqueeze(1), k, padding=1)
        return mtops.log_softmax(img.flatten(1), -1).sum()

    args = (rand(2, 6, 5, grad=True), rand(8, 5, grad=True), rand(2, 1, 3, 3, grad=True))
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True,
                             backend=aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward")))
    loss = compiled(*args)
    loss.backward()
    grads = [a.grad.clone() for a in args]
    for a in args:
        a.grad = None
    eager = block(*args)
    eager.backward()
    close(loss, eager.detach(), torch.float64)
    for g, a in zip(grads, args):
        close(g, a.grad, torch.float64)
    names = {kind: [str(n.target) for n in gm.graph.nodes if n.op == "call_function"] for kind, gm in graphs.items()}
    for op in ("matmul", "layer_norm", "sdpa", "conv2d", "softmax"):
        assert f"minitensor.{op}.default" in names["forward"], names["forward"]
    for op in ("matmul", "layer_norm_backward", "sdpa_backward", "conv2d_backward", "softmax_backward"):
        assert f"minitensor.{op}.default" in names["backward"], names["backward"]


# ---- a torch model on minitensor's ops trains as on torch's ---------------------------------------

class Net(torch.nn.Module):
    """A small image classifier with one of each op: conv2d (3x3, padding 1), the
    pixels as tokens, a linear projection, layer_norm, causal self-attention,
    the mean over tokens, a linear head and log_softmax. ``ops`` is torch's
    (F) or minitensor's (mtops): the same parameters, either kernels."""

    def __init__(self, dtype: Any) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)

        def param(*shape: int, fan_in: int) -> Any:
            return torch.nn.Parameter((torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1)
                                      .div(math.sqrt(fan_in)).to(dtype=dtype, device=DEVICE))

        self.conv_w, self.conv_b = param(4, 1, 3, 3, fan_in=9), param(4, fan_in=9)
        self.proj_w, self.proj_b = param(16, 4, fan_in=4), param(16, fan_in=4)
        self.norm_w = torch.nn.Parameter(torch.ones(16, dtype=dtype, device=DEVICE))
        self.norm_b = torch.nn.Parameter(torch.zeros(16, dtype=dtype, device=DEVICE))
        self.head_w, self.head_b = param(3, 16, fan_in=16), param(3, fan_in=16)

    def forward(self, x: Any, mine: bool) -> Any:
        if mine:
            conv, linear, layer_norm = mtops.conv2d, mtops.linear, mtops.layer_norm
            attention, log_softmax = mtops.scaled_dot_product_attention, mtops.log_softmax
        else:
            conv, linear, layer_norm = F.conv2d, F.linear, F.layer_norm
            attention, log_softmax = F.scaled_dot_product_attention, F.log_softmax
        h = torch.relu(conv(x, self.conv_w, self.conv_b, padding=1))  # N, 4, 6, 6
        tokens = h.flatten(2).transpose(1, 2)  # N, 36, 4
        t = layer_norm(linear(tokens, self.proj_w, self.proj_b), (16,), self.norm_w, self.norm_b)  # N, 36, 16
        t = t + attention(t, t, t, is_causal=True)
        return log_softmax(linear(t.mean(1), self.head_w, self.head_b), dim=-1)  # N, 3


def _losses(dtype: Any, mine: bool, steps: int) -> list[float]:
    g = torch.Generator().manual_seed(1)
    images = torch.randn(12, 1, 6, 6, generator=g, dtype=torch.float64)
    labels = (images[:, 0, :3].sum((1, 2)) > 0).long() + (images[:, 0, 3:].sum((1, 2)) > 0).long()  # 0, 1, 2
    images, labels = images.to(dtype=dtype, device=DEVICE), labels.to(DEVICE)
    net = Net(dtype)
    opt = torch.optim.Adam(net.parameters(), lr=0.02)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.nll_loss(net(images, mine), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("dtype,rtol", [(torch.float64, 1e-9), (torch.float32, 1e-4)], ids=["float64", "float32"])
def test_training_matches_torch(dtype: Any, rtol: float) -> None:
    """30 Adam steps of Net: minitensor's ops against torch's, the same start and
    data. float64 agrees to 1e-9 relative at every step; float32 to 1e-4 (the
    kernels sum in other orders, and 30 steps of Adam carry the difference on).
    Both curves fall by a third or more, so they are compared while learning."""
    torch.backends.cudnn.allow_tf32 = False  # torch's float32 convolutions in full float32, as minitensor's
    steps = 30
    theirs = _losses(dtype, False, steps)
    mine = _losses(dtype, True, steps)
    assert theirs[-1] < 0.67 * theirs[0], theirs
    np.testing.assert_allclose(mine, theirs, rtol=rtol, atol=0)


# ---- devices and streams (CUDA) ---------------------------------------------------------------------

@pytest.mark.gpu
def test_a_tensor_elsewhere_is_refused() -> None:
    """minitensor's CUDA build computes on its GPU: a CPU tensor is refused, not copied."""
    with pytest.raises(Exception, match="CPU memory"):
        mtops.softmax(torch.ones(3), 0)


@pytest.mark.gpu
def test_ops_run_on_torch_current_stream() -> None:
    """Slow torch work queued on a side stream, then a minitensor op on the same
    stream reading its result: the op must see it (it is queued after it), and
    minitensor's current stream is its own again afterwards."""
    side = torch.cuda.Stream()
    a = torch.zeros(4096, 4096, device="cuda")
    with torch.cuda.stream(side):
        for _ in range(20):
            a.add_(1.0)  # about 20 passes over 64 MiB: long enough for a missing order to show
        out = mtops.softmax(a[:2, :8], -1)
        assert torch.cuda.current_stream().cuda_stream == side.cuda_stream
    side.synchronize()
    assert a[0, 0].item() == 20.0
    torch.testing.assert_close(out, torch.full((2, 8), 1 / 8, device="cuda"))
    assert mt.cuda.current_stream().cuda_stream == 0


# ---- the docs' example --------------------------------------------------------------------------------

def test_the_docs_example() -> None:
    """docs/torch_ops.md's example (a ```py block: tests/test_docs.py runs only
    ```python blocks, and without torch) runs here, where torch is."""
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "torch_ops.md").read_text()
    blocks = page.split("```py\n")[1:]
    assert len(blocks) == 1, "docs/torch_ops.md should hold one ```py example"
    exec(compile(blocks[0].split("```")[0], "docs/torch_ops.md", "exec"), {"__name__": "docs_torch_ops"})  # noqa: S102
