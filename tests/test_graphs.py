"""CUDA Graph capture and replay (mt.cuda.CUDAGraph, mt.cuda.graph), on
whichever backend runs: on the emulator the recorded launches run again at
each replay. A replay must give what running the same ops eagerly gives,
including a whole training step; what cannot be captured must raise and
leave the library working.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import _lib, nn, optim


def test_a_replay_recomputes_from_the_inputs_current_values() -> None:
    x = mt.ones(37)
    w = mt.full((37,), 2.0)
    (x * w + 1.0).relu().sum()  # warm up
    g = mt.cuda.CUDAGraph()
    with mt.cuda.graph(g):
        y = (x * w + 1.0).relu().sum()
    g.replay()
    assert y.item() == 37 * 3.0
    x.copy_(mt.full((37,), -3.0))
    g.replay()
    assert y.item() == 0.0  # relu(-3 * 2 + 1) = 0
    x.copy_(mt.arange(37, dtype=mt.float32))
    g.replay()
    assert y.item() == float(np.maximum(np.arange(37) * 2.0 + 1.0, 0).sum())


def model_and_data(seed: int) -> tuple[nn.Module, mt.Tensor, mt.Tensor]:
    mt.manual_seed(seed)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    rng = np.random.default_rng(seed)
    x = mt.tensor(rng.standard_normal((16, 20)).astype(np.float32))
    y = mt.tensor(rng.integers(0, 5, 16).astype(np.float32))
    return model, x, y


def model_and_targets(seed: int) -> tuple[nn.Module, mt.Tensor, mt.Tensor]:
    """model_and_data, with the targets the step's loss takes: class indices
    for cross-entropy under the fast policy (one kernel); under the teaching
    one the course's chain checks class indices on the device at every call,
    which a capture cannot do, so the step trains on the squared error
    against one-hot rows (made here, before any capture)."""
    model, x, y = model_and_data(seed)
    if mt.kernels.get_policy() != "fast":
        y = (y.reshape(-1, 1) == mt.arange(5.0).reshape(1, 5)).float()
    return model, x, y


def loss_of(logits: mt.Tensor, targets: mt.Tensor) -> mt.Tensor:
    if targets.ndim == 1:
        return F.cross_entropy(logits, targets)
    return F.mse_loss(logits, targets)


def train_step(model: nn.Module, opt: optim.Optimizer, x: mt.Tensor, y: mt.Tensor) -> mt.Tensor:
    opt.zero_grad()
    loss = loss_of(model(x), y)
    loss.backward()
    opt.step()
    return loss


def test_cross_entropy_of_the_teaching_chain_refuses_capture() -> None:
    if mt.kernels.get_policy() == "fast":
        pytest.skip("the fused cross-entropy checks each targets tensor once, before the capture")
    model, x, y = model_and_data(2)
    with pytest.raises(mt.CudaError, match="capturing"):
        with mt.cuda.graph(mt.cuda.CUDAGraph()):
            F.cross_entropy(model(x), y)
    assert F.cross_entropy(model(x), y).item() > 0  # and the library works on


def test_a_replayed_training_step_matches_eager_steps() -> None:
    eager, x, y = model_and_targets(0)
    graphed, _, _ = model_and_targets(0)
    opt_e = optim.SGD(eager.parameters(), lr=0.1, momentum=0.9, fused=True)
    opt_g = optim.SGD(graphed.parameters(), lr=0.1, momentum=0.9, fused=True)
    eager_losses = [train_step(eager, opt_e, x, y).item() for _ in range(6)]

    graph_losses = [train_step(graphed, opt_g, x, y).item() for _ in range(2)]  # warm-up: real steps
    g = mt.cuda.CUDAGraph()
    with mt.cuda.graph(g):
        loss = train_step(graphed, opt_g, x, y)  # recorded only
    for _ in range(4):
        g.replay()
        graph_losses.append(loss.item())
    np.testing.assert_allclose(graph_losses, eager_losses, rtol=1e-5, atol=1e-6)
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        np.testing.assert_allclose(pg.numpy(), pe.numpy(), rtol=1e-5, atol=1e-6)


def test_adam_refuses_capture_and_runs_after_a_replay() -> None:
    model, x, y = model_and_targets(1)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    train_step(model, opt, x, y)
    g = mt.cuda.CUDAGraph()
    with pytest.raises(ValueError, match="step count"):
        with mt.cuda.graph(g):
            train_step(model, opt, x, y)
    # The pattern that works: capture forward and backward, step after each replay.
    g = mt.cuda.CUDAGraph()
    opt.zero_grad()
    with mt.cuda.graph(g):
        loss = loss_of(model(x), y)
        loss.backward()
    # The gradients are the graph's: written by each replay (no memory before the first).
    losses = []
    for _ in range(3):
        g.replay()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_what_waits_for_the_device_ends_the_capture_with_an_error() -> None:
    x = mt.ones(8)
    g = mt.cuda.CUDAGraph()
    with pytest.raises(mt.CudaError, match="capturing"):
        with mt.cuda.graph(g):
            (x * 2).sum().item()
    assert not _lib.capturing()
    assert (x + 1).sum().item() == 16.0  # the library works on
    with pytest.raises(ValueError, match="nothing was captured"):
        g.replay()


def test_capture_needs_a_stream_of_its_own_and_one_at_a_time() -> None:
    with pytest.raises(ValueError, match="default stream"):
        with mt.cuda.graph(mt.cuda.CUDAGraph(), stream=mt.cuda.default_stream()):
            pass
    with pytest.raises(TypeError):
        with mt.cuda.graph("not a graph"):  # type: ignore[arg-type]
            pass
    outer = mt.cuda.CUDAGraph()
    with pytest.raises(ValueError, match="capturing a graph already"):
        with mt.cuda.graph(outer):
            with mt.cuda.graph(mt.cuda.CUDAGraph()):
                pass
    assert (mt.ones(3) * 2).sum().item() == 6.0


def test_a_graph_is_captured_once_until_reset() -> None:
    x = mt.ones(4)
    g = mt.cuda.CUDAGraph()
    with mt.cuda.graph(g):
        y = x * 3.0
    with pytest.raises(ValueError, match="reset"):
        with mt.cuda.graph(g):
            pass
    g.reset()
    with mt.cuda.graph(g):
        z = x * 4.0
    g.replay()
    assert z.sum().item() == 16.0
    del y


def test_memory_freed_during_a_capture_lives_as_long_as_the_graph() -> None:
    gc.collect()
    before = mt.memory_in_use()
    x = mt.ones(100)
    temp = mt.full((50,), 3.0)
    g = mt.cuda.CUDAGraph()
    with mt.cuda.graph(g):
        y = x * temp.sum()
        del temp  # allocated before the capture: the graph reads it at every replay
        gc.collect()
    assert mt.memory_in_use() - before == (100 + 100 + 50) * 4  # x, y and temp, kept by g
    for _ in range(2):
        g.replay()
        assert y.sum().item() == 100 * 150.0
    del g
    gc.collect()
    assert mt.memory_in_use() - before == (100 + 100) * 4  # temp went with the graph
    del x, y
    gc.collect()
    if mt.backend() == "emulator":  # a GPU's graph memory goes back to its pool on its own terms
        assert mt.memory_in_use() == before


def test_a_chained_optimizer_refuses_capture() -> None:
    model, x, y = model_and_targets(3)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=False)
    train_step(model, opt, x, y)
    with pytest.raises(ValueError, match="fused=True"):
        with mt.cuda.graph(mt.cuda.CUDAGraph()):
            train_step(model, opt, x, y)


def test_launch_counts_grow_with_replays_not_captures() -> None:
    if mt.backend() != "emulator":
        pytest.skip("launch counts are the emulator's")
    x = mt.ones(8)
    g = mt.cuda.CUDAGraph()
    with mt.cuda.graph(g):
        y = (x * 2.0).exp()
    _lib.reset_launch_counts()
    assert _lib.launch_count("map_contiguous", "") == 0 and _lib.launch_count("map_contiguous_vec", "") == 0
    g.replay()
    g.replay()
    counted = _lib.launch_count("map_contiguous_vec", "") + _lib.launch_count("map_contiguous", "")
    assert counted == 4  # two maps a replay
    np.testing.assert_allclose(y.numpy(), np.exp(2.0) * np.ones(8), rtol=1e-6)
