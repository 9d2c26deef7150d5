"""perf_model: predicts a kernel configuration's time, so that a choice needs no sweep.

The autotuner (autotune.py) times every tile configuration of the matmul
rungs on the first product of a shape class. This module predicts those
times instead, in two layers:

1. **The roofline** (``roofline_s``), from first principles. A configuration
   of a GEMM-shaped kernel (block tile BM x BN x BK, warp tile, stages,
   threads) on a problem (M, N, K, batches, dtype) on a device (SMs, FMA
   lanes, clock, memory bandwidth, shared memory and registers per SM):
   - *wave quantization*: ceil(M / BM) * ceil(N / BN) * batches blocks run in
     waves of SMs x (blocks an SM holds); the last wave may leave SMs idle;
   - *padding*: a block computes its whole tile, so a shape off the tile
     grid pays for the padding's multiply-adds;
   - *occupancy*: the blocks an SM holds, from the block's shared memory
     (stages x BK x (BM + BN) elements), its registers (the accumulators,
     the fragments, a fixed overhead) and its threads; the blocks held hide
     each other's barriers and global-memory latency;
   - *the inner loop*: per k a thread does (WM / 8) x (WN / 4) FMAs and
     a few 16-byte shared-memory loads for its fragments, all through the
     same issue slots (one warp instruction a cycle per scheduler); the
     warp's WM + WN elements per k also pass the shared-memory banks (128
     bytes a cycle); the slower of the two sets the pace;
   - *memory*: every block loads (BM + BN) x K elements (through L2), and
     DRAM sees at least the operands and the result once.
   Time = launch + max(compute, memory): the roofline, with the
   configuration's effects in both terms. The convolution's rungs are
   GEMMs too (perf_model_conv below): implicit GEMM, im2col + a matmul,
   and the tiled rung, which does one multiply-add per shared-memory load.
2. **The learned model** (``LearnedModel``): a gradient-boosted tree
   (perf_model_tree.py, NumPy) fitted to log(measured / roofline) on the
   autotuner's own measurements, with features of the problem, the
   configuration and the roofline's terms; saved per device beside the
   autotuner's cache (``model_path``).

Selection (``choose``): the configuration of least predicted time, with an
*unsure* verdict -- fall back to the sweep -- when no model was trained for
this device, when the problem is far from every trained problem (its
log2 (M, N, K, batches) more than ``MAX_DISTANCE`` from the nearest, or a
dtype or kind of problem the model never saw), or when ``margin`` > 0 and the
runner-up is predicted within that fraction of the winner.

A configuration is described by the name the library gives it
(``_lib.matmul_config_name``: "128x128x16 warp 64x32 (256 threads, 2
blocks/SM)", "pipelined 128x128x8 warp 64x32, 4 stages (...)"), parsed by
``parse_config``: the model reads the same description the autotuner lists,
so a configuration added to the C tables is described without code here.
"""

from __future__ import annotations

import json
import os
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from .perf_model_conv import ConvProblem, conv_roofline
from .perf_model_roofline import (  # noqa: F401 - parse_config, device_from_key: part of the API
    KNOWN_DEVICES,
    Device,
    MatmulProblem,
    Roofline,
    TileConfig,
    device_from_key,
    gemm_roofline,
    parse_config,
)
from .perf_model_tree import Booster

# ---- the roofline of any problem ----------------------------------------------------------------


def roofline_s(problem: Any, config: Any, device: Device) -> Roofline:
    """The roofline of one configuration (a TileConfig, or a conv rung's name)
    on one problem (MatmulProblem or perf_model_conv.ConvProblem)."""
    if isinstance(problem, ConvProblem):
        return conv_roofline(problem, config, device)
    r = split_k_roofline(problem, config, device)
    copy = operand_copies_s(problem, device)
    return replace(r, time=r.time + copy, memory=r.memory + copy) if copy else r


def split_count(m: int, n: int, k: int, itemsize: int, config: Any, device: Device) -> int:
    """The slices a fill-the-GPU split-K configuration cuts K into, as
    src/matmul_warptile.cu's split_count: doubling from 1 while the grid fills
    less than 90% of the block slots (SMs x the config's blocks an SM), K
    stays a multiple of the slices' 16 bytes and slices stay 64 or longer, up
    to 16."""
    tiles = math.ceil(m / config.bm) * math.ceil(n / config.bn)
    slots = device.sms * max(config.min_blocks, 1)
    width = 16 // itemsize
    splits = 1
    while splits < 16 and 10 * tiles * splits < 9 * slots and k % (2 * splits * width) == 0 and k // (2 * splits) >= 64:
        splits *= 2
    return splits


def split_k_roofline(problem: MatmulProblem, config: Any, device: Device) -> Roofline:
    """gemm_roofline, for a split-K configuration (src/matmul_warptile.cu,
    launch_warptile_split) as it runs: for one product (no batch dims), S
    products of K / S with S from split_count, then one pass that reads the S
    partials and writes out; elsewhere (S = 1) the tile unsplit."""
    m, n, k, batches, itemsize = problem.m, problem.n, problem.k, problem.batches, problem.itemsize
    splits = split_count(m, n, k, itemsize, config, device) if config.splits == 0 and batches == 1 else 1
    if splits == 1:
        return gemm_roofline(m, n, k, batches, itemsize, config, device)
    r = gemm_roofline(m, n, k // splits, splits, itemsize, config, device)
    passes = (splits + 1) * m * n * itemsize * 2 / device.l2_bytes_s + device.launch_s
    return replace(r, time=r.time + passes, memory=r.memory + passes)


def operand_copies_s(problem: MatmulProblem, device: Device) -> float:
    """The copies mt_matmul makes before the product (src/matmul.cu,
    prepare_operand): an operand whose rows are not 16-byte aligned, or a
    transposed float64 one, is first copied to a contiguous buffer."""
    total = 0.0
    lead = {"A": problem.m if problem.layout[0] == "T" else problem.k,
            "B": problem.k if problem.layout[1] == "T" else problem.n}
    sizes = {"A": problem.m * problem.k, "B": problem.k * problem.n}
    for i, operand in enumerate("AB"):
        transposed = problem.layout[i] == "T"
        if (transposed and problem.itemsize != 4) or (lead[operand] * problem.itemsize) % 16:
            total += 2 * sizes[operand] * problem.batches * problem.itemsize / device.dram_bytes_s + device.launch_s
    return total


# ---- features and the learned model -------------------------------------------------------------

RUNGS = ("warptile", "pipelined", "im2col", "tiled", "implicit_gemm")
FEATURES = ("log2_m", "log2_n", "log2_k", "log2_batches", "itemsize", "a_trans", "b_trans",
            "rung", "bm", "bn", "bk", "wm", "wn", "stages", "threads", "min_blocks",
            "log_roofline", "log_compute", "log_memory", "waves", "last_wave_fill", "padding", "occupancy",
            "log2_tiles", "kernel", "stride", "log2_groups")


def config_fields(config: Any) -> tuple[float, ...]:
    """The configuration's part of the features (a conv rung: its name's index, no tile)."""
    if isinstance(config, TileConfig):
        return (RUNGS.index(config.rung), config.bm, config.bn, config.bk, config.wm, config.wn, config.stages,
                config.threads, config.min_blocks)
    return (RUNGS.index(config), 0, 0, 0, 0, 0, 0, 0, 0)


def features(problem: Any, config: Any, device: Device) -> list[float]:
    """One row of the learned model's input, in the order of FEATURES."""
    r = roofline_s(problem, config, device)
    if isinstance(problem, MatmulProblem):
        m, n, k, batches = problem.m, problem.n, problem.k, problem.batches
        conv = (0.0, 0.0, 0.0)
        layout = problem.layout
    else:
        m, n, k, batches = problem.gemm()
        conv = (float(problem.kernel[0]), float(problem.stride[0]), math.log2(problem.groups))
        layout = "NN"
    # Output tiles (a conv rung's counted in 64 x 64 tiles: a size, not its grid).
    bm, bn = (config.bm, config.bn) if isinstance(config, TileConfig) else (64, 64)
    tiles = math.ceil(m / bm) * math.ceil(n / bn) * batches
    return [math.log2(m), math.log2(n), math.log2(k), math.log2(batches), problem.itemsize,
            float(layout[0] == "T"), float(layout[1] == "T"), *config_fields(config),
            math.log(r.time), math.log(max(r.compute, 1e-9)), math.log(max(r.memory, 1e-9)), r.waves,
            r.last_wave_fill, r.padding, r.occupancy, math.log2(max(1, tiles)), *conv]


# The learned model is unsure beyond this distance (in log2 units of M, N, K,
# batches together) from the nearest problem it was trained on.
MAX_DISTANCE = 2.0


class LearnedModel:
    """The roofline corrected by a boosted tree: time = roofline x exp(tree(features))."""

    def __init__(self, device: Device, booster: Booster, seen: dict[str, list[list[float]]],
                 configs: dict[str, list[str]]) -> None:
        self.device = device
        self.booster = booster
        self.seen = seen  # category ("matmul float32", "conv float32") -> the trained problems' keys
        self.configs = configs  # "matmul" / "conv" -> the configuration names it was trained with

    @classmethod
    def train(cls, device: Device, rows: Sequence[tuple[Any, Any, float]], configs: dict[str, list[str]],
              **booster_args: Any) -> "LearnedModel":
        """Fits on (problem, config, measured seconds) rows."""
        if not rows:
            raise ValueError("perf_model: no measurements to train on")
        x = np.array([features(p, c, device) for p, c, _ in rows])
        y = np.array([math.log(t) for _, _, t in rows]) - x[:, FEATURES.index("log_roofline")]
        seen: dict[str, list[list[float]]] = {}
        for problem, _, _ in rows:
            keys = seen.setdefault(problem.category(), [])
            if list(problem.key()) not in keys:
                keys.append(list(problem.key()))
        return cls(device, Booster(**booster_args).fit(x, y), seen, configs)

    def predict_s(self, problem: Any, configs: Sequence[Any]) -> np.ndarray:
        """Predicted seconds of each configuration on the problem."""
        x = np.array([features(problem, c, self.device) for c in configs])
        return np.exp(x[:, FEATURES.index("log_roofline")] + self.booster.predict(x))

    def distance(self, problem: Any) -> float:
        """log2 distance from the problem to the nearest trained one of its
        category (kind and dtype); infinite if none."""
        keys = self.seen.get(problem.category())
        if not keys:
            return math.inf
        return float(np.min(np.linalg.norm(np.array(keys) - np.array(problem.key()), axis=1)))

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "device": self.device.__dict__, "features": list(FEATURES), "seen": self.seen,
                "configs": self.configs, "booster": self.booster.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LearnedModel":
        if data.get("version") != 1 or data.get("features") != list(FEATURES):
            raise ValueError("perf_model: a model file of another version (its features differ)")
        return cls(Device(**data["device"]), Booster.from_dict(data["booster"]), data["seen"], data["configs"])


# ---- choosing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    """The model's pick: config is an index into the candidates, or None when
    unsure (then `reason` says why, and the caller sweeps)."""

    config: Optional[int]
    predicted_s: Optional[float]
    reason: str


def choose(model: Optional[LearnedModel], problem: Any, configs: Sequence[Any], margin: float = 0.0,
           max_distance: float = MAX_DISTANCE) -> Choice:
    """The configuration of least predicted time, or None (sweep) when unsure:
    no model, a problem farther than max_distance from the trained ones, or
    (margin > 0) a runner-up predicted within margin of the winner."""
    if model is None:
        return Choice(None, None, "no model for this device")
    distance = model.distance(problem)
    if distance > max_distance:
        return Choice(None, None, f"far from the training data (log2 distance {distance:.2f} > {max_distance})")
    times = model.predict_s(problem, configs)
    order = np.argsort(times)
    if margin > 0 and len(times) > 1 and times[order[1]] <= times[order[0]] * (1 + margin):
        return Choice(None, float(times[order[0]]), f"top two within {margin:.0%}")
    return Choice(int(order[0]), float(times[order[0]]), "predicted")


def choose_roofline(problem: Any, configs: Sequence[Any], device: Device) -> int:
    """The configuration of least roofline time (the baseline: no training)."""
    return int(np.argmin([roofline_s(problem, c, device).time for c in configs]))


# ---- per device, beside the autotuner's cache ------------------------------------------------------


def model_path(cache_dir: Path, device_key: str) -> Path:
    """The model file of a device: <cache dir>/perf_model/<device key, made a file name>.json."""
    slug = re.sub(r"[^A-Za-z0-9]+", "_", device_key).strip("_")
    return cache_dir / "perf_model" / f"{slug}.json"


def save(model: LearnedModel, cache_dir: Path, device_key: str) -> Path:
    path = model_path(cache_dir, device_key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(model.to_dict()))
    return path


_loaded: dict[str, Optional[LearnedModel]] = {}


def load(cache_dir: Path, device_key: str) -> Optional[LearnedModel]:
    """The device's saved model, or None (no file, or one that cannot be read:
    the caller sweeps); read once per process and device (forget())."""
    path = model_path(cache_dir, device_key)
    if str(path) not in _loaded:
        try:
            _loaded[str(path)] = LearnedModel.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            _loaded[str(path)] = None
    return _loaded[str(path)]


def forget() -> None:
    """Drops the models read so far (the next load reads the file again)."""
    _loaded.clear()


# ---- what the autotuner asks before it sweeps ---------------------------------------------------------------
#
# The hook (autotune.py, where a shape class has no cache entry yet): ask
# matmul_entry first; sweep only if it returns None, and keep the sweep's
# problem in its entry (entry["problem"] = matmul_problem(a, b).__dict__) so
# that train_from_autotune_cache can train on it.

# Set to a fraction (0.03: 3%) to sweep also when the runner-up is predicted that close to the winner.
SWEEP_MARGIN = 0.0


def _transposed(t: Any) -> bool:
    rows, cols = t.shape[-2], t.shape[-1]
    return rows > 1 and cols > 1 and t.strides[-2] == 1 and t.strides[-1] != 1


def matmul_problem(a: Any, b: Any) -> MatmulProblem:
    """The problem of a (..., M, K) @ b (..., K, N) as ops.matmul hands it to the engine."""
    batches = 1
    for size in a.shape[:-2]:
        batches *= size
    layout = ("T" if _transposed(a) else "N") + ("T" if _transposed(b) else "N")
    return MatmulProblem(a.shape[-2], b.shape[-1], a.shape[-1], batches, a.dtype.name, layout)


def matmul_entry(cache_dir: Path, device_key: str, a: Any, b: Any, names: Sequence[str]) -> Optional[dict[str, Any]]:
    """The autotuner's cache entry for a @ b chosen by the device's learned model
    (configurations `names`, the library's list), or None -- sweep -- when no
    model was saved for the device, it was trained on another list of
    configurations, MINITENSOR_PERF_MODEL=0, or choose() is unsure."""
    if os.environ.get("MINITENSOR_PERF_MODEL", "1").strip().lower() in ("0", "off", "false", "no"):
        return None
    model = load(cache_dir, device_key)
    if model is None or model.configs.get("matmul") != list(names):
        return None
    choice = choose(model, matmul_problem(a, b), [parse_config(n) for n in names], margin=SWEEP_MARGIN)
    if choice.config is None:
        return None
    return {"config": choice.config, "name": names[choice.config], "by": "perf_model",
            "predicted_ms": round(choice.predicted_s * 1e3, 4)}


def rows_from_autotune_cache(devices: dict[str, dict[str, Any]], device_key: str,
                             names: Sequence[str]) -> list[tuple[Any, Any, float]]:
    """Training rows (problem, config, seconds) from the autotuner's sweeps of
    one device: the cache entries that kept their problem and every config's ms."""
    rows = []
    configs = [parse_config(n) for n in names]
    for entry in devices.get(device_key, {}).values():
        problem, times = entry.get("problem"), entry.get("ms")
        if not isinstance(problem, dict) or not isinstance(times, list) or len(times) != len(configs):
            continue
        p = MatmulProblem(**problem)
        rows.extend((p, c, t / 1e3) for c, t in zip(configs, times) if isinstance(t, (int, float)) and t > 0)
    return rows


def train_from_autotune_cache(cache_file: Path, device_key: str, names: Sequence[str]) -> Optional[Path]:
    """Trains the device's model on the sweeps in the autotuner's cache file and
    saves it beside the file; None if no sweep kept its problem."""
    devices = json.loads(cache_file.read_text()).get("devices", {})
    rows = rows_from_autotune_cache(devices, device_key, names)
    if not rows:
        return None
    model = LearnedModel.train(device_from_key(device_key), rows, {"matmul": list(names)})
    forget()
    return save(model, cache_file.parent, device_key)


# ---- bench/perf_model.py's measurement files ----------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """One problem of a measurement file: its kind ("matmul" or "conv"), the
    configurations timed (TileConfig or a conv rung's name) and their
    seconds (None: could not run); `halves`, where the file has them, two
    independent measurements of the same (the even and the odd timed calls):
    a sweep chooses by one, and is judged by the other."""

    kind: str
    problem: Any
    configs: tuple[Any, ...]
    seconds: tuple[Optional[float], ...]
    halves: Optional[tuple[tuple[Optional[float], ...], tuple[Optional[float], ...]]] = None


def read_measurements(data: dict[str, Any]) -> tuple[Device, list[Measured]]:
    """The device and the problems of a bench/perf_model.py measurement file (parsed JSON)."""
    device = device_from_key(data["device"]["key"], data["device"])
    matmul_configs = tuple(parse_config(n) for n in data["configs"]["matmul"])
    conv_configs = tuple(data["configs"]["conv"])
    out = []
    for row in data.get("matmul", []):
        problem = MatmulProblem(row["m"], row["n"], row["k"], row["batches"], row["dtype"], row["layout"])
        out.append(Measured("matmul", problem, matmul_configs, tuple(_seconds(t) for t in row["ms"]), _halves(row)))
    for row in data.get("conv", []):
        problem = ConvProblem(row["n"], row["c_in"], row["h"], row["w"], row["c_out"], tuple(row["kernel"]),
                              tuple(row["stride"]), tuple(row["padding"]), tuple(row["dilation"]), row["groups"],
                              row["dtype"])
        out.append(Measured("conv", problem, conv_configs, tuple(_seconds(t) for t in row["ms"]), _halves(row)))
    return device, out


def _halves(row: dict[str, Any]) -> Optional[tuple[tuple[Optional[float], ...], tuple[Optional[float], ...]]]:
    if "ms_even" not in row or "ms_odd" not in row:
        return None
    return tuple(_seconds(t) for t in row["ms_even"]), tuple(_seconds(t) for t in row["ms_odd"])


def _seconds(ms: Any) -> Optional[float]:
    return float(ms) / 1e3 if isinstance(ms, (int, float)) and ms > 0 else None


def train_on(device: Device, measured: Sequence[Measured], names: dict[str, list[str]],
             **booster_args: Any) -> LearnedModel:
    """A LearnedModel fitted on every timed (problem, configuration) of `measured`."""
    rows = [(m.problem, c, t) for m in measured for c, t in zip(m.configs, m.seconds) if t is not None]
    return LearnedModel.train(device, rows, names, **booster_args)
