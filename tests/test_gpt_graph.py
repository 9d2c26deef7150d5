"""The GPT demo's --graph (examples/train_gpt.py): its whole training step,
forward, backward, clipping and AdamW's capturable update, captured once and
replayed, gives the losses and parameters of the same steps run eagerly; and
the gather under it (the embeddings) checks its ids once, before the capture,
which it refuses to wait for. On the emulator a replay runs the recorded
launches again, so this runs without a GPU (a tiny model: a few seconds).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import minitensor as mt

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_gpt.py"
VOCAB, CONTEXT, BATCH = 11, 6, 3


@pytest.fixture(scope="module")
def gpt() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_gpt", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def batches(count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [(rng.integers(0, VOCAB, (BATCH, CONTEXT)), rng.integers(0, VOCAB, (BATCH, CONTEXT)))
            for _ in range(count)]


def model_and_step(gpt: ModuleType) -> tuple[mt.nn.Module, object]:
    mt.manual_seed(0)
    model = gpt.GPT(VOCAB, CONTEXT, width=8, heads=2, layers=1)
    optimizer = mt.optim.AdamW(model.parameters(), lr=1e-2, capturable=True)
    return model, gpt.make_train_step(model, optimizer)


def test_graphed_gpt_steps_match_eager_steps(gpt: ModuleType) -> None:
    if mt.kernels.get_policy() != "fast":
        pytest.skip("the teaching chain's cross-entropy checks its targets on the device at every call, "
                    "which a capture refuses (tests/test_graphs.py)")
    data = batches(6)
    eager, eager_step = model_and_step(gpt)
    eager_losses = [eager_step(mt.tensor(x), mt.tensor(y)).item() for x, y in data]
    graphed, graphed_step = model_and_step(gpt)
    step = gpt.GraphedStep(graphed_step, BATCH, CONTEXT, VOCAB)
    graph_losses = [step(x, y).item() for x, y in data]  # 2 eager, the capture, then 4 replays
    assert step.graph is not None and step.eager_steps == 2
    np.testing.assert_allclose(graph_losses, eager_losses, rtol=1e-5, atol=1e-6)
    for (name, pe), pg in zip(eager.named_parameters(), graphed.parameters()):
        np.testing.assert_allclose(pg.numpy(), pe.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    with pytest.raises(ValueError, match=r"ids .* in \[0, 11\)"):
        step(np.full((BATCH, CONTEXT), VOCAB), data[0][1])  # checked on the host before a replay


def test_a_gather_under_capture_takes_only_ids_checked_before() -> None:
    weight = mt.randn(5, 3)
    ids = mt.tensor(np.array([[0, 4, 2]]))
    rows = ids.reshape(-1, 1).expand(-1, 3)
    with pytest.raises(mt.InvalidArgumentError, match=r"gather\(\).*run the step once before capturing"):
        with mt.cuda.graph(mt.cuda.CUDAGraph()):
            weight.gather(0, rows)
    expected = weight.numpy()[[0, 4, 2]]
    np.testing.assert_array_equal(weight.gather(0, rows).numpy(), expected)  # checked now
    graph = mt.cuda.CUDAGraph()
    with mt.cuda.graph(graph):
        out = weight.gather(0, rows)  # the same view, unchanged since: not checked again
    graph.replay()
    np.testing.assert_array_equal(out.numpy(), expected)
    # A bad id written in between replays is not checked (the documented
    # exception): the kernel gathers 0 for it, never memory outside weight.
    ids.copy_(mt.tensor(np.array([[1, 9, -3]])))
    graph.replay()
    np.testing.assert_array_equal(out.numpy(), np.stack([weight.numpy()[1], np.zeros(3), np.zeros(3)]))
    # Outside a capture the write is seen, and the ids checked again.
    with pytest.raises(mt.InvalidArgumentError, match="index 9 out of range"):
        weight.gather(0, rows)


def test_scatter_add_checks_again_after_a_write() -> None:
    out = mt.zeros(4)
    index = mt.tensor(np.array([0, 3, 3]))
    out.scatter_add_(0, index, mt.ones(3))
    np.testing.assert_array_equal(out.numpy(), [1, 0, 0, 2])
    index.copy_(mt.tensor(np.array([0, 4, 1])))
    with pytest.raises(mt.InvalidArgumentError, match="index 4 out of range"):
        out.scatter_add_(0, index, mt.ones(3))
    np.testing.assert_array_equal(out.numpy(), [1, 0, 0, 2])  # a refused call leaves out untouched
