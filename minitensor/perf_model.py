"""The performance model of the tile configurations, as a public module.

The model lives in the ops layer (``minitensor/ops/perf_model*.py``) beside
the autotuner it serves; this module is the part a benchmark, a notebook or
a user calls: the roofline of a configuration, a learned model trained on
measurements, and the choice of a configuration from either.

    import minitensor.perf_model as pm
    device, measured = pm.read_measurements(data)       # a bench/perf_model.py file
    model = pm.train_on(device, measured, data["configs"])
    pm.choose(model, pm.MatmulProblem(1024, 1024, 1024), configs)

See docs/performance.md ("A performance model instead of a sweep").
"""

from __future__ import annotations

from pathlib import Path

from . import _lib
from .ops import autotune
from .ops.perf_model import (
    MAX_DISTANCE,
    Choice,
    ConvProblem,
    LearnedModel,
    MatmulProblem,
    Measured,
    TileConfig,
    choose,
    choose_roofline,
    load,
    model_path,
    parse_config,
    read_measurements,
    roofline_s,
    save,
    train_from_autotune_cache,
    train_on,
)

__all__ = [
    "MAX_DISTANCE", "Choice", "ConvProblem", "LearnedModel", "MatmulProblem", "Measured", "TileConfig",
    "cache_dir", "choose", "choose_roofline", "device_key", "load", "model_path", "parse_config",
    "read_measurements", "roofline_s", "save", "train_from_autotune_cache", "train_on",
]


def device_key() -> str:
    """The key of the current device ("<name>|sm_90|132sm"), under which the
    autotuner and the model keep their files."""
    return _lib.device_key()


def cache_dir() -> Path:
    """The folder of the autotuner's cache (MINITENSOR_CACHE_DIR or the
    default); the learned model of each device is saved beside it."""
    return autotune.cache_path().parent
