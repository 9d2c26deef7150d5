"""The matmul autotuner (minitensor/ops/autotune.py), on any backend.

The emulator never sweeps on its own, so these tests force the tuning logic
with MINITENSOR_AUTOTUNE=force and a fake timer that makes one configuration
the fastest: the sweep, the choice passed to the engine, the JSON cache (read
back by a second process without sweeping), a corrupt cache file (a warning,
not a crash) and MINITENSOR_AUTOTUNE=0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import minitensor as mt
from minitensor import _lib
from minitensor.ops import autotune

ROOT = Path(__file__).resolve().parent.parent


def fake_timer(winner: int) -> Callable[[Callable[[], None], int], float]:
    """A timer that runs each configuration once (so a broken one would show)
    and reports `winner` as the fastest."""

    def timer(run: Callable[[], None], config: int) -> float:
        run()
        return 0.001 if config == winner else 0.002 + 0.0001 * config

    return timer


@pytest.fixture
def tuning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private cache directory, tuning forced on, fresh in-memory state, and
    the fast kernel policy (under "teaching" nothing is tuned:
    tests/test_kernel_policy.py)."""
    monkeypatch.setenv("MINITENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MINITENSOR_AUTOTUNE", "force")
    monkeypatch.setenv("MINITENSOR_KERNELS", "fast")  # for the second processes some tests start
    autotune.reset()
    with mt.kernels.policy("fast"):
        yield tmp_path
    autotune.set_timer(None)
    autotune.reset()


def operands(m: int = 9, k: int = 12, n: int = 10) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return mt.tensor(a), mt.tensor(b), a, b


def winner_for_test() -> int:
    """A configuration that is not the library's usual first choice."""
    return _lib.matmul_config_count() - 1


def test_sweep_picks_the_fastest_and_caches_it(tuning: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    winner = winner_for_test()
    autotune.set_timer(fake_timer(winner))
    used: list[int] = []
    real_matmul = _lib.matmul

    def spy(out: Any, a: Any, b: Any, algo: str = "default", config: int = -1) -> None:
        used.append(config)
        real_matmul(out, a, b, algo, config)

    monkeypatch.setattr(_lib, "matmul", spy)
    ta, tb, a, b = operands()
    np.testing.assert_allclose((ta @ tb).numpy(), a @ b, rtol=1e-5, atol=1e-5)
    assert autotune.stats()["sweeps"] == 1
    # The sweep ran every configuration, then the product used the winner.
    assert used == list(range(_lib.matmul_config_count())) + [winner]

    data = json.loads((tuning / "autotune.json").read_text())
    assert data["version"] == autotune.CACHE_VERSION
    (entries,) = data["devices"].values()
    (entry,) = entries.values()
    assert entry["config"] == winner
    assert entry["name"] == _lib.matmul_config_name(winner)

    # The same shape class again (10 -> 16 like 9 -> 16): no new sweep.
    used.clear()
    ta2, tb2, a2, b2 = operands(m=10, k=11, n=12)
    np.testing.assert_allclose((ta2 @ tb2).numpy(), a2 @ b2, rtol=1e-5, atol=1e-5)
    assert autotune.stats()["sweeps"] == 1
    assert used == [winner]


def test_a_second_process_reads_the_cache_without_sweeping(tuning: Path) -> None:
    winner = winner_for_test()
    autotune.set_timer(fake_timer(winner))
    ta, tb, _, _ = operands()
    ta @ tb
    assert autotune.stats()["sweeps"] == 1

    script = textwrap.dedent(
        """
        import json
        import numpy as np
        import minitensor as mt
        from minitensor.ops import autotune

        def no_timing(run, config):
            raise AssertionError("the second process swept instead of reading the cache")

        autotune.set_timer(no_timing)
        rng = np.random.default_rng(0)
        a = mt.tensor(rng.standard_normal((9, 12)).astype(np.float32))
        b = mt.tensor(rng.standard_normal((12, 10)).astype(np.float32))
        out = a @ b
        config = autotune.matmul_config(out, a, b)
        print(json.dumps({"sweeps": autotune.stats()["sweeps"], "config": config}))
        """
    )
    env = dict(os.environ)
    env["MINITENSOR_BACKEND"] = _lib.backend_name()
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"sweeps": 0, "config": winner}


def test_a_corrupt_cache_file_is_ignored_with_a_warning(tuning: Path) -> None:
    (tuning / "autotune.json").write_text("{ this is not json")
    winner = winner_for_test()
    autotune.set_timer(fake_timer(winner))
    ta, tb, a, b = operands()
    with pytest.warns(UserWarning, match="corrupt cache file"):
        c = ta @ tb
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-5)
    assert autotune.stats()["sweeps"] == 1
    # The next save replaced it with a valid file.
    assert json.loads((tuning / "autotune.json").read_text())["version"] == autotune.CACHE_VERSION


@pytest.mark.parametrize(
    "content",
    ['{"version": %d, "devices": []}' % autotune.CACHE_VERSION, '{"version": 999, "devices": {}}', "[1, 2]", ""],
)
def test_cache_files_of_the_wrong_shape_are_ignored(tuning: Path, content: str) -> None:
    (tuning / "autotune.json").write_text(content)
    autotune.set_timer(fake_timer(0))
    ta, tb, _, _ = operands()
    with pytest.warns(UserWarning, match="minitensor.autotune"):
        ta @ tb
    assert autotune.stats()["sweeps"] == 1


def test_a_cache_of_an_older_version_is_dropped_without_a_warning(tuning: Path) -> None:
    # Its choices were made among fewer configurations: the shapes are timed again.
    (tuning / "autotune.json").write_text('{"version": 1, "devices": {}}')
    autotune.set_timer(fake_timer(0))
    ta, tb, _, _ = operands()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ta @ tb
    assert autotune.stats()["sweeps"] == 1
    assert json.loads((tuning / "autotune.json").read_text())["version"] == autotune.CACHE_VERSION


def test_a_cache_of_a_newer_version_is_not_used_and_not_overwritten(tuning: Path) -> None:
    newer = '{"version": %d, "devices": {}}' % (autotune.CACHE_VERSION + 1)
    (tuning / "autotune.json").write_text(newer)
    autotune.set_timer(fake_timer(0))
    ta, tb, _, _ = operands()
    with pytest.warns(UserWarning, match="written by a newer minitensor"):
        ta @ tb
    assert autotune.stats()["sweeps"] == 1
    assert (tuning / "autotune.json").read_text() == newer


def test_an_entry_with_an_unknown_config_is_tuned_again(tuning: Path) -> None:
    autotune.set_timer(fake_timer(1))
    ta, tb, _, _ = operands()
    ta @ tb
    path = tuning / "autotune.json"
    data = json.loads(path.read_text())
    for entries in data["devices"].values():
        for entry in entries.values():
            entry["config"] = 10_000  # e.g. written by a build with more configurations
    path.write_text(json.dumps(data))
    autotune.reset()
    ta @ tb
    assert autotune.stats()["sweeps"] == 1
    assert autotune.matmul_config(ta @ tb, ta, tb) == 1


def test_autotune_off_uses_the_fixed_default(tuning: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINITENSOR_AUTOTUNE", "0")
    autotune.reset()  # the setting is read once, and again after reset()

    def no_timing(run: Callable[[], None], config: int) -> float:
        raise AssertionError("MINITENSOR_AUTOTUNE=0 swept")

    autotune.set_timer(no_timing)
    ta, tb, a, b = operands()
    np.testing.assert_allclose((ta @ tb).numpy(), a @ b, rtol=1e-5, atol=1e-5)
    assert autotune.matmul_config(ta @ tb, ta, tb) == -1
    assert autotune.stats()["sweeps"] == 0
    assert not (tuning / "autotune.json").exists()


def test_the_emulator_never_sweeps_on_its_own(tuning: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if _lib.backend_name() != "emulator":
        pytest.skip("checks the emulator's behaviour")
    monkeypatch.delenv("MINITENSOR_AUTOTUNE")
    autotune.reset()  # the setting is read once, and again after reset()
    ta, tb, _, _ = operands(64, 64, 64)
    assert autotune.matmul_config(ta @ tb, ta, tb) == -1
    assert autotune.stats()["sweeps"] == 0


def test_the_cache_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MINITENSOR_CACHE_DIR", str(tmp_path / "mine"))
    assert autotune.cache_path() == tmp_path / "mine" / "autotune.json"
    monkeypatch.delenv("MINITENSOR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert autotune.cache_path() == tmp_path / "xdg" / "minitensor" / "autotune.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert autotune.cache_path() == Path.home() / ".cache" / "minitensor" / "autotune.json"


def test_shape_classes() -> None:
    a = mt.tensor(np.zeros((3, 100, 60), np.float32))
    b = mt.tensor(np.zeros((3, 60, 33), np.float32))
    assert autotune.shape_class(a, b) == "float32 NN M128 N64 K64 B4"
    assert autotune.shape_class(a, b.transpose(-2, -1).contiguous().transpose(-2, -1)) == (
        "float32 NT M128 N64 K64 B4"
    )
