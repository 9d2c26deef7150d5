"""Capturable optimizers (capturable=True): the step count lives on the
device, so a whole training step, optimizer included, captures into a CUDA
graph and replays (on the emulator too). Each must give what the eager fused
update gives, step for step; the bias corrections must use the device count.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import nn, optim

CASES = [
    (optim.Adam, {"lr": 1e-2}),
    (optim.Adam, {"lr": 1e-2, "weight_decay": 0.1}),
    (optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1}),
    (optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    (optim.SGD, {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}),
]


def model(seed: int) -> nn.Module:
    mt.manual_seed(seed)
    return nn.Sequential(nn.Linear(7, 33), nn.ReLU(), nn.Linear(33, 3))


def data() -> tuple[mt.Tensor, mt.Tensor]:
    rng = np.random.default_rng(1)
    x = mt.tensor(rng.standard_normal((9, 7)).astype(np.float32))
    y = (mt.tensor(rng.standard_normal((9, 3)).astype(np.float32)) > 0).float()
    return x, y


def step(m: nn.Module, opt: optim.Optimizer, x: mt.Tensor, y: mt.Tensor) -> mt.Tensor:
    opt.zero_grad()
    loss = F.mse_loss(m(x), y)  # one kernel chain under either policy, capturable under both
    loss.backward()
    opt.step()
    return loss


def assert_same_parameters(a: nn.Module, b: nn.Module) -> None:
    for pa, pb in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(pb.numpy(), pa.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls,kwargs", CASES, ids=lambda c: getattr(c, "__name__", str(c)))
def test_capturable_steps_equal_the_eager_fused_steps(cls: Any, kwargs: dict) -> None:
    x, y = data()
    eager, counted = model(0), model(0)
    opt_e = cls(eager.parameters(), fused=True, **kwargs)
    opt_c = cls(counted.parameters(), capturable=True, **kwargs)
    for _ in range(4):
        step(eager, opt_e, x, y)
        step(counted, opt_c, x, y)
    assert_same_parameters(eager, counted)
    for state in opt_c.state:
        assert state["step"].dtype is mt.int64 and state["step"].shape == ()
        assert state["step"].item() == 4


@pytest.mark.parametrize("cls,kwargs", CASES, ids=lambda c: getattr(c, "__name__", str(c)))
def test_a_whole_step_captured_from_the_first_replays_as_the_eager_steps(cls: Any, kwargs: dict) -> None:
    """Forward, backward and the update in one graph, captured at step 1 (the
    state exists before any step): N replays give N eager steps."""
    x, y = data()
    eager, graphed = model(2), model(2)
    opt_e = cls(eager.parameters(), fused=True, **kwargs)
    opt_g = cls(graphed.parameters(), capturable=True, **kwargs)
    eager_losses = [step(eager, opt_e, x, y).item() for _ in range(5)]
    g = mt.cuda.CUDAGraph()
    with mt.cuda.graph(g):
        loss = step(graphed, opt_g, x, y)  # recorded, not run
    graph_losses = []
    for _ in range(5):
        g.replay()
        graph_losses.append(loss.item())
    np.testing.assert_allclose(graph_losses, eager_losses, rtol=1e-5, atol=1e-6)
    assert_same_parameters(eager, graphed)
    assert opt_g.state[0]["step"].item() == 5


def test_adam_bias_correction_reads_the_device_count() -> None:
    """Set the device count to 99: the next step is step 100 of the formula,
    as the host-counted update at step=100 computes it."""
    mt.manual_seed(3)
    p_host = mt.randn(40, requires_grad=True)
    p_dev = p_host.detach().clone().requires_grad_()
    grad = mt.randn(40)
    opt_h = optim.Adam([p_host], lr=0.1, fused=True)
    opt_d = optim.Adam([p_dev], lr=0.1, capturable=True)
    opt_h.state[0]["step"] = 99
    opt_d.state[0]["step"].fill_(99)
    p_host.grad, p_dev.grad = grad.clone(), grad.clone()
    opt_h.step()
    opt_d.step()
    np.testing.assert_allclose(p_dev.numpy(), p_host.numpy(), rtol=1e-5, atol=1e-6)  # lr in float32 on the device
    assert opt_d.state[0]["step"].item() == 100
    # Step 1's bias corrections give another update: the count was read, not assumed.
    p_one = p_dev.detach().clone().requires_grad_()
    one = optim.Adam([p_one], lr=0.1, capturable=True)
    one.state[0]["exp_avg"].copy_(opt_d.state[0]["exp_avg"])
    one.state[0]["exp_avg_sq"].copy_(opt_d.state[0]["exp_avg_sq"])
    p_again = p_dev.detach().clone().requires_grad_()
    again = optim.Adam([p_again], lr=0.1, capturable=True)
    again.state[0]["exp_avg"].copy_(opt_d.state[0]["exp_avg"])
    again.state[0]["exp_avg_sq"].copy_(opt_d.state[0]["exp_avg_sq"])
    again.state[0]["step"].fill_(100)
    p_one.grad, p_again.grad = grad.clone(), grad.clone()
    one.step()
    again.step()
    assert np.abs(p_one.numpy() - p_again.numpy()).max() > 1e-4


def test_sgd_first_step_is_found_on_the_device() -> None:
    """The momentum buffer starts as the gradient at count 1, whatever the host knows."""
    p = mt.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.5, momentum=0.9, capturable=True)
    p.grad = mt.tensor([1.0, 1.0])
    opt.step()  # buffer = g = 1: p = p - 0.5
    np.testing.assert_allclose(p.numpy(), [0.5, 1.5])
    opt.step()  # buffer = 0.9 * 1 + 1 = 1.9: p = p - 0.95
    np.testing.assert_allclose(p.numpy(), [-0.45, 0.55], rtol=1e-6)


def test_capturable_refuses_what_the_fused_update_cannot_take() -> None:
    p = mt.randn(4, 4, requires_grad=True)
    with pytest.raises(ValueError, match="fused=False"):
        optim.Adam([p], capturable=True, fused=False)
    with pytest.raises(ValueError, match="contiguous float"):
        optim.SGD([mt.randn(4, 4).t().requires_grad_()], lr=0.1, capturable=True)


def test_the_c_entry_point_refuses_a_bad_step_tensor() -> None:
    p = mt.randn(8, requires_grad=True)
    p.grad = mt.randn(8)
    m, v = mt.zeros(8), mt.zeros(8)
    with pytest.raises(ValueError, match="one int64 element"):
        mt.ops.adam_step_(p, p.grad, m, v, 1e-3, (0.9, 0.999), 1e-8, 0.0, mt.zeros(2, dtype=mt.int64))
    with pytest.raises(ValueError, match="one int64 element"):
        mt.ops.adam_step_(p, p.grad, m, v, 1e-3, (0.9, 0.999), 1e-8, 0.0, mt.zeros(()))
