"""autotune: chooses the tile configuration of the matmul, of the fused matmul
epilogue and of the implicit-GEMM convolution by measurement, and remembers it.

The fastest matmul kernels (warptile, src/matmul_warptile.cu, and pipelined,
src/matmul_pipelined.cu) come in several tile configurations, numbered
together (``_lib.matmul_config_count()``, named by
``_lib.matmul_config_name(i)``): big 128 x 128 tiles do the most work per byte
loaded, small 64 x 64 tiles give a small product enough blocks to fill the GPU,
and which one wins depends on the GPU and on the shape. So the first product of
a *shape class* on a device times every configuration on the operands it was
given, keeps the fastest, and stores the choice in a JSON file; later products
of that class, in this process or any later one, read it without timing
anything.

- Shape class: the dtype, whether each operand is a transposed view, and M, N,
  K and the number of batches, each rounded up to a power of two (a 1000 x
  1000 product shares the choice of a 1024 x 1024 one).
- Cache file: ``$MINITENSOR_CACHE_DIR/autotune.json`` if that variable is set,
  else ``$XDG_CACHE_HOME/minitensor/autotune.json``, else
  ``~/.cache/minitensor/autotune.json``. Its entries are keyed by the device
  (name, compute capability, SM count, memory). A file that cannot be read or
  parsed is ignored with a warning (and replaced at the next save), never an
  error.
- The fused epilogue (``mt_matmul_epilogue``, ops.linear_fused) runs the same
  configurations: it is tuned the same way, timing the fused kernel itself,
  under the key ``"epilogue " + shape class``. The implicit-GEMM convolution
  (src/conv_implicit_gemm.cu) has configurations of its own, tuned per exact
  shape for each of its three products (``"conv2d forward ..."``,
  ``"conv2d input_grad ..."``, ``"conv2d weight_grad ..."``).
- Under the ``teaching`` kernel policy (``minitensor.kernels.set_policy``) the
  default product is the tiled kernel, which has no configurations: nothing is
  timed, and every product passes -1.
- ``MINITENSOR_AUTOTUNE=0`` turns tuning off: every product uses the library's
  fixed choice (config -1, picked from the shape in C). The emulator never
  sweeps (its timings say nothing about a GPU), and neither do products
  smaller than ``MIN_WORK`` multiply-adds, where timing costs more than any
  gain. ``MINITENSOR_AUTOTUNE=force`` sweeps even there: that is how the tests
  exercise the logic on the emulator, with a fake timer (``set_timer``).
  The variable is read at the first product and kept (again after ``reset()``).

Example (on a GPU)::

    import numpy as np
    import minitensor as mt
    from minitensor.ops import autotune
    a = mt.tensor(np.random.rand(2048, 2048).astype(np.float32))
    c = a @ a              # first time: times every configuration, caches the winner
    c = a @ a              # later: the cached choice, no timing
    print(autotune.cache_path(), autotune.stats())
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Optional

from .. import _lib
from . import perf_model

# Products with fewer multiply-adds (M * N * K * batches) are not tuned.
MIN_WORK = 1 << 24

# Timed runs per configuration, after one warm-up run (the minimum is kept).
REPEATS = 3

# 2: the pipelined rung's configurations joined warptile's. A cache of an
# older version chose among fewer configurations: it is dropped (silently)
# and the shapes are timed again. 3: warptile's prefetching configurations
# (8-11) joined, and pipelined's numbers moved up by four. 4: the split-K
# configurations (12, 13) cut K into as many slices as fill the GPU (2-16),
# not always two: a shape class timed before may now choose them.
CACHE_VERSION = 4

# A timer takes a callable that runs one product with a given config and
# returns seconds per run. Tests install a fake one with set_timer().
Timer = Callable[[Callable[[], None], int], float]

_timer: Optional[Timer] = None
# The cache in memory: {device key: {shape class: entry}}, loaded on first use.
_memory: Optional[dict[str, dict[str, Any]]] = None
_sweeps = 0  # how many sweeps this process has run (see stats())


def _mode() -> str:
    """'off', 'on' or 'force', from MINITENSOR_AUTOTUNE: read on the first
    product and kept (every matmul asks, and reading the environment is three
    Python calls), read again after reset()."""
    global _mode_value
    if _mode_value is None:
        value = os.environ.get("MINITENSOR_AUTOTUNE", "1").strip().lower()
        if value in ("0", "off", "false", "no"):
            _mode_value = "off"
        elif value == "force":
            _mode_value = "force"
        else:
            _mode_value = "on"
    return _mode_value


_mode_value: Optional[str] = None


def cache_path() -> Path:
    """Where the choices are stored (see the module docstring)."""
    override = os.environ.get("MINITENSOR_CACHE_DIR")
    if override:
        base = Path(override)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "minitensor"
    return base / "autotune.json"


def set_timer(timer: Optional[Timer]) -> None:
    """Replaces how a configuration is timed (None: the real GPU timer)."""
    global _timer
    _timer = timer


def reset() -> None:
    """Forgets the in-memory cache and the sweep count (the file stays), and
    reads MINITENSOR_AUTOTUNE again on the next product."""
    global _memory, _sweeps, _mode_value
    _memory = None
    _sweeps = 0
    _mode_value = None


def stats() -> dict[str, Any]:
    """Sweeps run in this process and the cache file in use."""
    return {"sweeps": _sweeps, "cache_file": str(cache_path())}


def _gpu_timer(run: Callable[[], None], config: int) -> float:
    """Seconds per run of `run`: a warm-up, then the best of REPEATS timings,
    each of enough back-to-back runs (about 2 ms) that the host's launch
    overhead and the synchronizations around them hardly count."""
    run()
    _lib.synchronize()
    start = time.perf_counter()
    run()
    _lib.synchronize()
    runs = int(min(50, max(1, 2e-3 / max(time.perf_counter() - start, 1e-6))))
    best = math.inf
    for _ in range(REPEATS):
        _lib.synchronize()
        start = time.perf_counter()
        for _ in range(runs):
            run()
        _lib.synchronize()
        best = min(best, (time.perf_counter() - start) / runs)
    return best


_device_keys: dict[int, str] = {}  # device index -> mt_device_key


def _device_key() -> str:
    """The device's key (name, compute capability, SM count), asked of the
    library once per device index."""
    index = _lib.get_device()
    key = _device_keys.get(index)
    if key is None:
        key = _device_keys[index] = _lib.device_key()
    return key


def _pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _transposed(t: Any) -> bool:
    rows, cols = t.shape[-2], t.shape[-1]
    return rows > 1 and cols > 1 and t.strides[-2] == 1 and t.strides[-1] != 1


def shape_class(a: Any, b: Any) -> str:
    """The key under which a product of a (..., M, K) and b (..., K, N) is tuned."""
    m, k = a.shape[-2], a.shape[-1]
    n = b.shape[-1]
    batches = 1
    for size in a.shape[:-2]:
        batches *= size
    layout = ("T" if _transposed(a) else "N") + ("T" if _transposed(b) else "N")
    return f"{a.dtype.name} {layout} M{_pow2(m)} N{_pow2(n)} K{_pow2(k)} B{_pow2(batches)}"


# ---- the cache file ----------------------------------------------------------------------


def _read_file(quiet: bool = False) -> tuple[dict[str, dict[str, Any]], bool]:
    """The devices' entries of the cache file, and whether a save may replace
    the file: ({}, True) (with a warning unless quiet) if it is unusable or
    of an older version, ({}, False) if a newer minitensor wrote it."""
    path = cache_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}, True
    except OSError as e:
        if not quiet:
            warnings.warn(f"minitensor.autotune: cannot read the cache file {path}: {e}; ignoring it", stacklevel=3)
        return {}, True
    try:
        data = json.loads(text)
        version = data.get("version") if isinstance(data, dict) else None
        if isinstance(version, int) and not isinstance(version, bool) and 0 < version < CACHE_VERSION:
            return {}, True
        if isinstance(version, int) and not isinstance(version, bool) and version > CACHE_VERSION:
            if not quiet:
                warnings.warn(
                    f"minitensor.autotune: the cache file {path} was written by a newer minitensor (cache "
                    f"version {version}, this one reads {CACHE_VERSION}); its choices are not used, and it "
                    f"is left as it is (set MINITENSOR_CACHE_DIR to keep this version's choices elsewhere)",
                    stacklevel=3,
                )
            return {}, False
        if not isinstance(data, dict) or version != CACHE_VERSION:
            raise ValueError(f"not a version-{CACHE_VERSION} autotune cache")
        devices = data["devices"]
        if not isinstance(devices, dict) or not all(isinstance(v, dict) for v in devices.values()):
            raise ValueError("'devices' is not a table of tables")
        return devices, True
    except (ValueError, KeyError, TypeError) as e:
        if not quiet:
            warnings.warn(
                f"minitensor.autotune: ignoring the corrupt cache file {path} ({e}); "
                f"it will be replaced by the next tuning result",
                stacklevel=3,
            )
        return {}, True


def _write_file(device: str, key: str, entry: dict[str, Any]) -> None:
    """Adds one entry to the file: re-read (another process may have added
    entries), merge, and replace the file atomically."""
    path = cache_path()
    devices, writable = _read_file(quiet=True)
    if not writable:
        return
    devices.setdefault(device, {})[key] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".autotune-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump({"version": CACHE_VERSION, "devices": devices}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as e:
        warnings.warn(f"minitensor.autotune: cannot write the cache file {path}: {e}", stacklevel=3)


def _cache() -> dict[str, dict[str, Any]]:
    global _memory
    if _memory is None:
        _memory, _ = _read_file()
    return _memory


# ---- choosing ------------------------------------------------------------------------------


def _sweep(count: int, run: Callable[[int], None], name: Callable[[int], str]) -> dict[str, Any]:
    """Times run(config) for every config below count; returns the cache entry."""
    global _sweeps
    _sweeps += 1
    timer = _timer or _gpu_timer
    if timer is _gpu_timer:
        # Bring the GPU out of idle clocks before the first configuration is
        # timed, so that it is not judged at a lower clock than the others.
        for _ in range(3):
            run(-1)
    times: list[Optional[float]] = []
    for config in range(count):
        try:
            times.append(float(timer(lambda config=config: run(config), config)))
        except _lib.MinitensorError:
            times.append(None)  # a configuration that cannot run here never wins
    timed = [(t, c) for c, t in enumerate(times) if t is not None and math.isfinite(t)]
    if not timed:
        return {"config": -1, "name": "library default", "ms": times}
    best_time, best = min(timed)
    return {
        "config": best,
        "name": name(best),
        "ms": [None if t is None else round(t * 1e3, 4) for t in times],
    }


def _tunable(work: int) -> bool:
    """Whether a kernel of `work` multiply-adds is tuned at all: the mode allows
    it, the product is big enough (unless forced), the fast policy, the GPU."""
    mode = _mode()
    if mode == "off":
        return False
    if mode != "force" and work < MIN_WORK:  # first: a small product asks nothing else
        return False
    if _lib.get_kernel_policy() != "fast":
        # The teaching policy keeps the library's fixed kernels (its default
        # product is the tiled kernel, which has no configurations at all).
        return False
    return mode == "force" or _lib.backend_name() == "cuda"


def _choose(key: str, count: int, run: Callable[[int], None], name: Callable[[int], str],
            predict: Optional[Callable[[], Optional[dict[str, Any]]]] = None,
            problem: Optional[Callable[[], dict[str, Any]]] = None) -> int:
    """The configuration cached for key on this device; else the performance
    model's pick (predict(), when it has a model of this device and is sure);
    else a fresh sweep of run(0) .. run(count - 1). The choice is cached (and
    saved); a sweep's entry keeps the exact problem, for the model to train on."""
    device = _device_key()
    table = _cache().setdefault(device, {})
    entry = table.get(key)
    if entry is not None:
        config = entry.get("config") if isinstance(entry, dict) else None
        if isinstance(config, int) and not isinstance(config, bool) and -1 <= config < count:
            return config
        # A stale or mangled entry (fewer configurations now): tune again.
    entry = predict() if predict is not None else None
    if entry is None:  # no model of this device, or it is unsure: time them all
        entry = _sweep(count, run, name)
        if problem is not None:
            entry["problem"] = problem()
    table[key] = entry
    _write_file(device, key, entry)
    return int(entry["config"])


def _product_work(out: Any, a: Any, b: Any) -> int:
    """M * N * K times the batches of out = a @ b."""
    work = a.shape[-2] * a.shape[-1] * b.shape[-1]
    for size in out.shape[:-2]:
        work *= size
    return work


def matmul_config(out: Any, a: Any, b: Any) -> int:
    """The configuration for out = a @ b (tensors as ops.matmul passes them to
    the engine): a cached choice, a fresh sweep, or -1 (the library's choice)."""
    if not _tunable(_product_work(out, a, b)):
        return -1
    count = _lib.matmul_config_count()
    # Both only on a cache miss: a cached choice costs no more than before.
    names = lambda: [_lib.matmul_config_name(i) for i in range(count)]  # noqa: E731
    return _choose(shape_class(a, b), count, lambda config: _lib.matmul(out, a, b, "default", config),
                   _lib.matmul_config_name,
                   predict=lambda: perf_model.matmul_entry(cache_path().parent, _device_key(), a, b, names()),
                   problem=lambda: dataclasses.asdict(perf_model.matmul_problem(a, b)))


def epilogue_config(out: Any, a: Any, b: Any, run: Callable[[int], None]) -> int:
    """The configuration for the fused product out = act(a @ b + bias) +
    residual (ops.linear_fused): tuned as the plain product is, over the same
    configurations (warptile's and pipelined's: both take the epilogue), but
    by timing run(config), the fused kernel itself, under a key of its own."""
    if not _tunable(_product_work(out, a, b)):
        return -1
    return _choose("epilogue " + shape_class(a, b), _lib.matmul_epilogue_config_count(), run,
                   _lib.matmul_config_name)


def conv_config(product: str, x_shape: tuple[int, ...], weight_shape: tuple[int, ...], dtype: Any,
                params: tuple[Any, ...], run: Callable[[int], None], rung: str = "conv2d") -> int:
    """The implicit-GEMM tile configuration for one of a convolution's products
    (product: "forward", "input_grad" or "weight_grad"; ops.conv2d_igemm*), by
    timing run(config) on the first call of each exact shape: a network has few
    of them, and a layer runs every step. params: stride, padding, dilation and
    groups, part of the key. rung "conv2d_tf32": the TF32 rung's configurations
    (ops.conv2d_tf32*), under keys of their own."""
    n, c, h, w = x_shape
    c_out, c_group, kh, kw = weight_shape
    stride, padding, dilation, groups = params
    if min(stride) < 1:  # refused by the kernel, with the message that says why
        return -1
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if oh < 1 or ow < 1 or not _tunable(n * oh * ow * c_out * c_group * kh * kw):
        return -1
    key = (f"{rung} {product} {dtype.name} x{n}x{c}x{h}x{w} w{c_out}x{c_group}x{kh}x{kw} "
           f"s{stride[0]}x{stride[1]} p{padding[0]}x{padding[1]} d{dilation[0]}x{dilation[1]} g{groups}")
    if rung == "conv2d_tf32":
        return _choose(key, _lib.conv2d_tf32_config_count(), run, _lib.conv2d_tf32_config_name)
    return _choose(key, _lib.conv2d_igemm_config_count(), run, _lib.conv2d_igemm_config_name)


# The rungs a dense 3x3, stride-1 product races (ops.conv2d_igemm*): the implicit GEMM (the
# TF32 one under conv.allow_tf32), the Winograd rung, and under conv.allow_tf32 the Winograd
# rung with its 16 products on the TF32 matmul rung. With many pixels and few channels the
# TF32 products lose to float32 ones, so both race (bench/conv_winograd.py --tf32).
CONV_ALGOS = ("implicit_gemm", "winograd", "winograd_tf32")


def conv_algo(product: str, x_shape: tuple[int, ...], weight_shape: tuple[int, ...], dtype: Any,
              params: tuple[Any, ...], run: Callable[[int], Any]) -> int:
    """The index in CONV_ALGOS of the fastest rung for a forward, input gradient or weight
    gradient (product) that they all compute (ops.conv2d_winograd_fits): the first two
    rungs race, all three where product ends in " tf32" (under conv.allow_tf32). Timed by
    run(i) on the first call of each exact shape (run(-1) warms up: the implicit GEMM, which
    tunes its own tiles then); 0 wherever nothing is tuned (the teaching policy, the
    emulator, a small product)."""
    n, c, h, w = x_shape
    c_out, c_group, kh, kw = weight_shape
    if not _tunable(n * h * w * c_out * c_group * kh * kw):
        return 0
    stride, padding, dilation, groups = params
    key = (f"conv2d_algo {product} {dtype.name} x{n}x{c}x{h}x{w} w{c_out}x{c_group}x{kh}x{kw} "
           f"s{stride[0]}x{stride[1]} p{padding[0]}x{padding[1]} d{dilation[0]}x{dilation[1]} g{groups}")
    count = len(CONV_ALGOS) if product.endswith(" tf32") else 2
    return max(0, _choose(key, count, run, lambda i: CONV_ALGOS[i]))
