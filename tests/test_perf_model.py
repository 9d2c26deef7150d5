"""The performance model (minitensor/ops/perf_model*.py), on any backend.

The roofline's monotonic properties (more work or a slower device never
predicts less time; a shape off the tile grid or an extra wave costs time),
the configuration names it parses, the boosted tree, the learned model's
save and load per device, the selection and its fallback to a sweep, what
the autotuner asks (perf_model.matmul_entry: trained on cache entries as its
sweeps write them, with synthetic times, on the emulator as on a GPU), and a
model trained on the committed H100 measurements
(data/perf_model/) choosing better than a random configuration on held-out
problems.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import minitensor as mt
from minitensor import _lib
from minitensor.ops import perf_model as pm
from minitensor.ops.perf_model_conv import CONV_RUNGS, ConvProblem
from minitensor.ops.perf_model_tree import Booster

ROOT = Path(__file__).resolve().parent.parent
H100_KEY = "NVIDIA H100 80GB HBM3|sm_90|132sm"
H100 = pm.device_from_key(H100_KEY)


def library_configs() -> list[pm.TileConfig]:
    return [pm.parse_config(name) for name in mt.kernels.matmul_configs()]


# ---- the roofline ------------------------------------------------------------------------------


def test_every_library_configuration_name_parses_into_a_consistent_tile() -> None:
    for name, cfg in zip(mt.kernels.matmul_configs(), library_configs()):
        assert cfg.rung == mt.kernels.matmul_config_rung(mt.kernels.matmul_configs().index(name))
        assert (cfg.bm // cfg.wm) * (cfg.bn // cfg.wn) * 32 == cfg.threads, name
        assert cfg.stages >= 2
    with pytest.raises(ValueError, match="cannot read"):
        pm.parse_config("a tile of some kind")


@pytest.mark.parametrize("cfg", library_configs(), ids=lambda c: f"{c.rung}-{c.bm}x{c.bn}x{c.bk}-s{c.stages}")
def test_the_roofline_never_predicts_less_time_for_more_work(cfg: pm.TileConfig) -> None:
    for m, n, k in ((64, 64, 64), (1000, 1000, 1000), (4096, 512, 2048)):
        base = pm.roofline_s(pm.MatmulProblem(m, n, k), cfg, H100).time
        for bigger in ((2 * m, n, k), (m, 2 * n, k), (m, n, 2 * k), (m, n, k, 4)):
            assert pm.roofline_s(pm.MatmulProblem(*bigger), cfg, H100).time >= base, (bigger, cfg)
        assert pm.roofline_s(pm.MatmulProblem(m, n, k, dtype="float64"), cfg, H100).time >= base


def test_a_slower_device_never_predicts_less_time() -> None:
    slower = (replace(H100, dram_bytes_s=H100.dram_bytes_s / 2, l2_bytes_s=H100.l2_bytes_s / 2),
              replace(H100, clock_hz=H100.clock_hz / 2), replace(H100, sms=H100.sms // 2))
    for cfg in library_configs():
        for shape in ((256, 256, 256), (8192, 8192, 64), (4096, 4096, 4096)):
            base = pm.roofline_s(pm.MatmulProblem(*shape), cfg, H100).time
            for device in slower:
                assert pm.roofline_s(pm.MatmulProblem(*shape), cfg, device).time >= base


def test_padding_and_an_extra_wave_cost_time() -> None:
    cfg = pm.parse_config("128x128x16 warp 64x32 (256 threads, 1 block/SM)")
    on_grid = pm.roofline_s(pm.MatmulProblem(1024, 1024, 1024), cfg, H100)
    off_grid = pm.roofline_s(pm.MatmulProblem(1025, 1024, 1024), cfg, H100)
    assert on_grid.padding == 1.0 and off_grid.padding > 1.0
    # One row more is a row of tiles more: never less time, though free while
    # the tiles still fit in the same wave (64 and 72 tiles on 264 slots).
    assert off_grid.time >= on_grid.time and off_grid.waves == on_grid.waves == 1
    # Exactly the slots of one wave, then one tile more: a second (almost empty) wave.
    slots = H100.sms * on_grid.occupancy
    one_wave = pm.roofline_s(pm.MatmulProblem(128 * slots, 128, 1024), cfg, H100)
    two_waves = pm.roofline_s(pm.MatmulProblem(128 * (slots + 1), 128, 1024), cfg, H100)
    assert (one_wave.waves, two_waves.waves) == (1, 2)
    assert two_waves.time > 1.5 * one_wave.time


def test_a_small_product_prefers_small_tiles_and_a_big_one_is_near_the_peak() -> None:
    configs = library_configs()
    small = configs[pm.choose_roofline(pm.MatmulProblem(256, 256, 256), configs, H100)]
    assert small.bm * small.bn <= 64 * 128  # 4 tiles of 128 x 128 would leave 128 SMs idle
    big = pm.MatmulProblem(8192, 8192, 8192)
    best = min(pm.roofline_s(big, c, H100).time for c in configs)
    assert 0.5 < 2 * 8192**3 / best / H100.peak_flops(4) <= 1.0


def test_the_device_comes_from_the_runtime_properties_or_the_table() -> None:
    assert (H100.sms, H100.fp32_lanes) == (132, 128)
    reported = pm.device_from_key(H100_KEY, {"clockRate": 1_755_000, "memoryClockRate": 2_619_000,
                                             "memoryBusWidth": 5120})
    assert reported.clock_hz == pytest.approx(1.755e9)
    assert reported.dram_bytes_s == pytest.approx(3.35e12, rel=0.01)
    unknown = pm.device_from_key("Some Future GPU|sm_90|100sm")
    assert unknown.sms == 100 and unknown.peak_flops(4) > 0
    emulator = pm.device_from_key(_lib.device_key()) if _lib.backend_name() == "emulator" else None
    assert emulator is None or emulator.name == "minitensor CPU emulator"


def test_the_conv_rungs_have_a_roofline() -> None:
    problem = ConvProblem(64, 64, 32, 32, 64)
    times = {rung: pm.roofline_s(problem, rung, H100).time for rung in CONV_RUNGS}
    assert all(t > 0 and math.isfinite(t) for t in times.values())
    # The tiled rung does one multiply-add per shared-memory load: slower than implicit GEMM on a dense layer.
    assert times["implicit_gemm"] < times["tiled"]
    assert pm.roofline_s(ConvProblem(128, 64, 32, 32, 64), "implicit_gemm", H100).time > times["implicit_gemm"]
    with pytest.raises(ValueError, match="unknown convolution rung"):
        pm.roofline_s(problem, "winograd", H100)


# ---- the boosted tree and the learned model ---------------------------------------------------------


def test_the_booster_fits_better_than_the_mean_and_round_trips() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, (600, 4))
    y = np.sin(x[:, 0]) + (x[:, 1] > 5) + 0.05 * rng.standard_normal(600)
    booster = Booster(trees=60, depth=3).fit(x[:500], y[:500])
    error = np.mean((booster.predict(x[500:]) - y[500:]) ** 2)
    assert error < 0.2 * np.var(y[500:])
    again = Booster.from_dict(json.loads(json.dumps(booster.to_dict())))
    np.testing.assert_array_equal(again.predict(x[500:]), booster.predict(x[500:]))
    with pytest.raises(ValueError, match="Booster.fit"):
        Booster().fit(np.zeros((3, 2)), np.zeros(4))


def synthetic_seconds(problem: pm.MatmulProblem, cfg: pm.TileConfig, rng: np.random.Generator) -> float:
    """A "GPU" the roofline does not know: pipelined tiles pay off only on a
    long K, and 1-block-per-SM tiles run 15% slower; 2% noise."""
    t = pm.roofline_s(problem, cfg, H100).time
    if cfg.rung == "pipelined":
        t *= 0.7 if problem.k >= 1024 else 1.4
    if cfg.min_blocks == 1:
        t *= 1.15
    return t * float(rng.lognormal(0, 0.02))


def synthetic_problems(rng: np.random.Generator, count: int) -> list[pm.MatmulProblem]:
    return [pm.MatmulProblem(*(int(2 ** rng.uniform(6, 12)) for _ in range(3))) for _ in range(count)]


@pytest.fixture(scope="module")
def synthetic_model() -> pm.LearnedModel:
    rng = np.random.default_rng(1)
    configs = library_configs()
    rows = [(p, c, synthetic_seconds(p, c, rng)) for p in synthetic_problems(rng, 120) for c in configs]
    return pm.LearnedModel.train(H100, rows, {"matmul": list(mt.kernels.matmul_configs())}, trees=120)


def regret(problem: pm.MatmulProblem, pick: int, times: list[float]) -> float:
    return times[pick] / min(times)


def test_the_learned_model_beats_the_roofline_and_a_random_pick_on_synthetic_measurements(
        synthetic_model: pm.LearnedModel) -> None:
    rng = np.random.default_rng(2)
    configs = library_configs()
    learned, roofline, random_pick = [], [], []
    for problem in synthetic_problems(rng, 40):
        times = [synthetic_seconds(problem, c, rng) for c in configs]
        learned.append(regret(problem, int(np.argmin(synthetic_model.predict_s(problem, configs))), times))
        roofline.append(regret(problem, pm.choose_roofline(problem, configs, H100), times))
        random_pick.append(float(np.mean([t / min(times) for t in times])))
    assert np.median(learned) < np.median(random_pick)
    assert np.median(learned) <= np.median(roofline)
    assert np.median(learned) < 1.05


def test_choose_falls_back_to_a_sweep_when_unsure(synthetic_model: pm.LearnedModel) -> None:
    configs = library_configs()
    near = pm.MatmulProblem(700, 900, 1100)
    choice = pm.choose(synthetic_model, near, configs)
    assert choice.config is not None and choice.reason == "predicted"
    assert choice.predicted_s == pytest.approx(float(min(synthetic_model.predict_s(near, configs))))
    assert pm.choose(None, near, configs).config is None  # no model for the device
    far = pm.choose(synthetic_model, pm.MatmulProblem(1 << 20, 2, 3), configs)
    assert far.config is None and "far from the training data" in far.reason
    unseen = pm.choose(synthetic_model, pm.MatmulProblem(700, 900, 1100, dtype="float64"), configs)
    assert unseen.config is None  # no float64 problem was trained on
    close = pm.choose(synthetic_model, near, configs, margin=10.0)  # every runner-up is "close"
    assert close.config is None and "within" in close.reason


def test_a_model_is_saved_and_loaded_per_device(tmp_path: Path, synthetic_model: pm.LearnedModel) -> None:
    other_key = "NVIDIA H200|sm_90|132sm"
    path = pm.save(synthetic_model, tmp_path, H100_KEY)
    assert path.parent == tmp_path / "perf_model" and path.suffix == ".json"
    pm.forget()
    assert pm.load(tmp_path, other_key) is None  # trained on the H100 only
    loaded = pm.load(tmp_path, H100_KEY)
    assert loaded is not None and loaded.configs == synthetic_model.configs
    problem = pm.MatmulProblem(512, 768, 1024)
    np.testing.assert_allclose(loaded.predict_s(problem, library_configs()),
                               synthetic_model.predict_s(problem, library_configs()), rtol=1e-12)
    pm.model_path(tmp_path, other_key).write_text("{ not json")
    pm.forget()
    assert pm.load(tmp_path, other_key) is None  # unreadable: the autotuner sweeps
    pm.forget()


# ---- what the autotuner asks (perf_model.matmul_entry), on any backend ------------------------------------


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv("MINITENSOR_PERF_MODEL", raising=False)
    pm.forget()
    yield tmp_path
    pm.forget()


def sweep_entries(shapes: list[tuple[int, int, int]], rng: np.random.Generator) -> dict[str, Any]:
    """Cache entries as the autotuner's sweeps write them: every configuration's
    ms and the exact problem (the synthetic GPU's times)."""
    configs = library_configs()
    entries = {}
    for m, n, k in shapes:
        problem = pm.MatmulProblem(m, n, k)
        entries[f"float32 NN M{m} N{n} K{k} B1"] = {
            "config": 0, "name": "", "problem": problem.__dict__,
            "ms": [round(synthetic_seconds(problem, c, rng) * 1e3, 6) for c in configs]}
    return entries


def test_the_model_trains_on_the_autotuners_sweeps_then_chooses_for_it(cache_dir: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    key = _lib.device_key()  # the emulator's own key on the emulator: the model runs there as anywhere
    names = list(mt.kernels.matmul_configs())
    shapes = [tuple(int(2 ** rng.uniform(5, 9)) for _ in range(3)) for _ in range(40)]
    cache_file = cache_dir / "autotune.json"
    cache_file.write_text(json.dumps({"version": 2, "devices": {key: sweep_entries(shapes, rng)}}))
    a, b = mt.randn(60, 50), mt.randn(50, 70)
    assert pm.matmul_entry(cache_dir, key, a, b, names) is None  # no model yet: sweep

    saved = pm.train_from_autotune_cache(cache_file, key, names)
    assert saved == pm.model_path(cache_dir, key) and saved.is_file()
    entry = pm.matmul_entry(cache_dir, key, a, b, names)
    assert entry is not None and entry["by"] == "perf_model" and entry["predicted_ms"] > 0
    assert entry["name"] == names[entry["config"]]
    # The product runs with the chosen configuration.
    out = mt.kernels.matmul(a, b, mt.kernels.matmul_config_rung(entry["config"]), entry["config"])
    np.testing.assert_allclose(out.numpy(), a.numpy() @ b.numpy(), rtol=1e-4, atol=1e-4)

    far_a, far_b = mt.randn(3, 2), mt.randn(2, 5)  # far below every trained shape (32 and up)
    assert pm.matmul_entry(cache_dir, key, far_a, far_b, names) is None
    assert pm.matmul_entry(cache_dir, key, a, b, names[:-1]) is None  # trained on another list of configurations
    monkeypatch.setenv("MINITENSOR_PERF_MODEL", "0")
    assert pm.matmul_entry(cache_dir, key, a, b, names) is None


def test_the_problem_of_a_product_reads_the_layout_and_the_batches() -> None:
    a, b = mt.randn(4, 30, 20), mt.randn(4, 40, 20).transpose(-1, -2)
    assert pm.matmul_problem(a, b) == pm.MatmulProblem(30, 40, 20, 4, "float32", "NT")
    at = mt.randn(20, 30, dtype=mt.float64).t()
    assert pm.matmul_problem(at, mt.randn(20, 10, dtype=mt.float64)) == pm.MatmulProblem(30, 10, 20, 1, "float64", "TN")


def test_without_sweeps_that_kept_their_problem_there_is_nothing_to_train_on(cache_dir: Path) -> None:
    cache_file = cache_dir / "autotune.json"
    old_entry = {"config": 3, "name": "x", "ms": [1.0] * _lib.matmul_config_count()}  # no "problem"
    cache_file.write_text(json.dumps({"version": 2, "devices": {_lib.device_key(): {"k": old_entry}}}))
    assert pm.train_from_autotune_cache(cache_file, _lib.device_key(), list(mt.kernels.matmul_configs())) is None


# ---- the committed H100 measurements -------------------------------------------------------------------


def committed_measurements() -> list[Path]:
    return sorted((ROOT / "data" / "perf_model").glob("*.json"))


@pytest.mark.parametrize("path", committed_measurements(), ids=lambda p: p.name)
def test_a_model_trained_on_the_measurements_beats_a_random_pick_on_held_out_problems(path: Path) -> None:
    data = json.loads(path.read_text())
    device, measured = pm.read_measurements(data)
    order = np.random.default_rng(0).permutation(len(measured))
    held_out = {int(i) for i in order[::4]}
    model = pm.train_on(device, [m for i, m in enumerate(measured) if i not in held_out], data["configs"],
                        trees=150)
    learned, random_pick = [], []
    for m in (measured[i] for i in sorted(held_out)):
        valid = [i for i, t in enumerate(m.seconds) if t is not None]
        times = np.array([m.seconds[i] for i in valid])
        pick = int(np.argmin(model.predict_s(m.problem, [m.configs[i] for i in valid])))
        learned.append(times[pick] / times.min())
        random_pick.append(float(np.mean(times / times.min())))  # the expected regret of a random configuration
    assert len(learned) >= 10
    assert np.median(learned) < np.median(random_pick)
    assert np.mean(learned) < np.mean(random_pick)


def test_the_autotuner_takes_the_models_pick_without_a_sweep_and_sweeps_where_it_is_unsure(
        cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ops/autotune.py asks the model first: with a model of this device a
    product near its training shapes runs the predicted configuration and no
    sweep; a product far from them is swept as before, and that sweep's entry
    keeps the exact problem for the next training."""
    from minitensor.ops import autotune

    rng = np.random.default_rng(5)
    key = _lib.device_key()
    names = list(mt.kernels.matmul_configs())
    shapes = [tuple(int(2 ** rng.uniform(5, 9)) for _ in range(3)) for _ in range(40)]
    cache_file = cache_dir / "autotune.json"
    cache_file.write_text(json.dumps({"version": 2, "devices": {key: sweep_entries(shapes, rng)}}))
    assert pm.train_from_autotune_cache(cache_file, key, names) is not None
    cache_file.unlink()  # the autotuner starts with no choices, only the model
    monkeypatch.setenv("MINITENSOR_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("MINITENSOR_AUTOTUNE", "force")
    autotune.reset()
    try:
        with mt.kernels.policy("fast"):
            a, b = mt.randn(60, 50), mt.randn(50, 70)
            expected = pm.matmul_entry(cache_dir, key, a, b, names)
            assert expected is not None
            np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-4, atol=1e-4)
            assert autotune.stats()["sweeps"] == 0
            (entry,) = json.loads(cache_file.read_text())["devices"][key].values()
            assert entry["by"] == "perf_model" and entry["config"] == expected["config"]

            far_a, far_b = mt.randn(3, 2), mt.randn(2, 5)  # far from every trained shape: unsure
            np.testing.assert_allclose((far_a @ far_b).numpy(), far_a.numpy() @ far_b.numpy(), rtol=1e-4, atol=1e-4)
            assert autotune.stats()["sweeps"] == 1
            entries = json.loads(cache_file.read_text())["devices"][key].values()
            swept = [e for e in entries if "by" not in e]
            assert len(swept) == 1 and swept[0]["problem"] == dataclasses.asdict(pm.matmul_problem(far_a, far_b))
    finally:
        autotune.reset()
