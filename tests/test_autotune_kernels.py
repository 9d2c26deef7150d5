"""The autotuner's other kernels (minitensor/ops/autotune.py): the fused matmul
epilogue (F.linear_act, tuned over the matmul's configurations, warptile's and
pipelined's, by timing the fused kernel itself) and the implicit-GEMM convolution (each of its three
products tuned per exact shape), forced on the emulator with a fake timer as
tests/test_autotune.py does for the plain matmul: every configuration runs
during the sweep, the winner is used and cached, and the results match the
reference whichever configuration runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from helpers import assert_close
from minitensor import _lib
from minitensor.ops import autotune


def last_wins(count: int) -> Callable[[Callable[[], None], int], float]:
    """A timer that runs each configuration once and reports the last of
    `count` as the fastest (not the library's own choice for small shapes)."""

    def timer(run: Callable[[], None], config: int) -> float:
        run()
        return 0.001 if config == count - 1 else 0.002 + 0.0001 * config

    return timer


@pytest.fixture
def tuning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private cache directory, tuning forced on, fresh in-memory state, the
    fast kernel policy."""
    monkeypatch.setenv("MINITENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MINITENSOR_AUTOTUNE", "force")
    autotune.reset()
    with mt.kernels.policy("fast"):
        yield tmp_path
    autotune.set_timer(None)
    autotune.reset()


def cache_entries(directory: Path) -> dict[str, Any]:
    (entries,) = json.loads((directory / "autotune.json").read_text())["devices"].values()
    return entries


def spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Records the config of every call of _lib.<name> (its last argument)."""
    used: list[int] = []
    real = getattr(_lib, name)

    def wrapper(*args: Any) -> None:
        used.append(args[-1])
        real(*args)

    monkeypatch.setattr(_lib, name, wrapper)
    return used


def test_fused_linear_is_tuned_over_the_matmul_configurations(tuning: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    count = _lib.matmul_epilogue_config_count()
    assert count == _lib.matmul_config_count()  # warptile's and pipelined's: both take the epilogue
    assert mt.kernels.matmul_config_rung(count - 1) == "pipelined"
    autotune.set_timer(last_wins(count))
    used = spy(monkeypatch, "matmul_epilogue")
    rng = np.random.default_rng(0)
    x, w, b, r = (rng.standard_normal(s).astype(np.float32) for s in ((2, 33, 20), (18, 20), (18,), (2, 33, 18)))
    got = F.linear_act(mt.tensor(x), mt.tensor(w), mt.tensor(b), "relu", mt.tensor(r))
    assert_close(got.numpy(), np.maximum(x.astype(np.float64) @ w.T + b, 0.0) + r, np.float32, n=20)
    # The sweep ran every configuration (each writes the full result), then the winner.
    assert used == list(range(count)) + [count - 1]
    (key,) = [k for k in cache_entries(tuning) if k.startswith("epilogue ")]
    assert key == "epilogue " + autotune.shape_class(mt.randn(66, 20), mt.randn(18, 20).T)
    assert cache_entries(tuning)[key]["config"] == count - 1
    # Again: the cached choice, no sweep.
    used.clear()
    F.linear_act(mt.tensor(x), mt.tensor(w), mt.tensor(b), "relu", mt.tensor(r))
    assert used == [count - 1]


@pytest.mark.parametrize("groups, stride, padding", [(1, 1, 1), (2, 2, 0)])
def test_each_convolution_product_is_tuned_and_matches_im2col(tuning: Path, monkeypatch: pytest.MonkeyPatch,
                                                              groups: int, stride: int, padding: int) -> None:
    count = _lib.conv2d_igemm_config_count()
    assert count >= 4 and len({_lib.conv2d_igemm_config_name(i) for i in range(count)}) == count
    autotune.set_timer(last_wins(count))
    # The implicit GEMM's own tiles here: its race with the Winograd rung (autotune.conv_algo,
    # which would take this 3x3 at stride 1) is tests/test_conv_winograd.py's.
    monkeypatch.setattr(autotune, "conv_algo", lambda *args: 0)
    calls = {name: spy(monkeypatch, name) for name in ("conv2d_igemm", "conv2d_igemm_input_grad",
                                                       "conv2d_igemm_weight_grad")}
    rng = np.random.default_rng(1)
    # 16 input channels a group: the input gradient runs on the implicit GEMM
    # too (ops.conv2d_grad_rungs leaves fewer to im2col).
    c = 16 * groups
    x0 = rng.standard_normal((2, c, 9, 10)).astype(np.float32)
    w0 = rng.standard_normal((6, c // groups, 3, 3)).astype(np.float32)
    results = []
    for algo in ("implicit_gemm", "im2col"):
        x, w = mt.tensor(x0, requires_grad=True), mt.tensor(w0, requires_grad=True)
        y = mt.kernels.conv2d(x, w, None, stride, padding, 1, groups, algo=algo)
        (y * y).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy(), w.grad.numpy()))
    for got, want in zip(*results):
        assert_close(got, want, np.float32, n=2 * 16 * 9 * 10)
    for used in calls.values():
        assert used == list(range(count)) + [count - 1]
    keys = sorted(k.split()[1] for k in cache_entries(tuning) if k.startswith("conv2d "))
    assert keys == ["forward", "input_grad", "weight_grad"]
    assert all(e["config"] == count - 1 for k, e in cache_entries(tuning).items() if k.startswith("conv2d "))


def test_teaching_and_tuning_off_leave_the_library_choice(tuning: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_timing(run: Callable[[], None], config: int) -> float:
        raise AssertionError("swept where nothing is tuned")

    autotune.set_timer(no_timing)
    used = spy(monkeypatch, "conv2d_igemm")
    x, w = mt.randn(1, 2, 6, 6), mt.randn(3, 2, 3, 3)
    with mt.kernels.policy("teaching"):
        mt.kernels.conv2d(x, w, None, 1, 1, 1, 1, algo="implicit_gemm")
    monkeypatch.setenv("MINITENSOR_AUTOTUNE", "0")
    autotune.reset()
    mt.kernels.conv2d(x, w, None, 1, 1, 1, 1, algo="implicit_gemm")
    assert used == [-1, -1]
    assert autotune.stats()["sweeps"] == 0


def test_an_unknown_config_is_refused_by_name() -> None:
    x, w = mt.randn(1, 2, 6, 6), mt.randn(3, 2, 3, 3)
    out = mt.empty(1, 3, 4, 4)
    with pytest.raises(mt.InvalidArgumentError, match="mt_conv2d_igemm: unknown implicit-GEMM config 99"):
        _lib.conv2d_igemm(out, x, w, None, (1, 1), (0, 0), (1, 1), 1, 99)
    with pytest.raises(ValueError, match="no implicit-GEMM config"):
        _lib.conv2d_igemm_config_name(_lib.conv2d_igemm_config_count())
