"""The performance model's measurements and its evaluation (minitensor/ops/perf_model.py).

    python3 bench/perf_model.py collect --out DIR       # on the GPU: time every configuration
    python3 bench/perf_model.py evaluate [--data FILE]  # anywhere: held-out regret table
    python3 bench/perf_model.py train [--data FILE]     # save the learned model for FILE's device

collect times, on a list of problems, every configuration of the two tuned
rungs: the matmul tile configurations (warptile's and pipelined's, numbered
as ``mt.kernels.matmul_configs()``) and the convolution's forward rungs
(im2col, tiled, implicit GEMM: what ``mt.kernels.conv2d(algo=...)`` runs).
Each time is the median of CUDA-event timings after a warm-up (and the
medians of the even and of the odd calls, two independent halves); the problems
come in a seeded random order and the collection stops at ``--budget``
seconds, so a cut leaves a random subset. It writes DIR/measurements.json:
the device's properties and, per problem, the milliseconds of every
configuration (null where one cannot run).

evaluate splits the problems of a measurement file into training and held
out (every ``--holdout``-th problem in a fixed shuffled order), trains the
learned model on the training part, and prints for the held-out problems the
regret of each way to choose (the chosen configuration's measured time over
the best one's): the roofline model, the learned model, the learned model
with its sweep fallback, and the sweep; then predicted against measured time.
Without ``--data`` it reads the newest committed file under
data/perf_model/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

# The configurations are chosen here, never by the autotuner (im2col's matmul
# runs the library's fixed choice): set before minitensor reads it.
os.environ.setdefault("MINITENSOR_AUTOTUNE", "0")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402

DATA_DIR = ROOT / "data" / "perf_model"


# ---- the problems ---------------------------------------------------------------------------


def matmul_problems(rng: np.random.Generator, count: int, max_work: float) -> list[dict[str, Any]]:
    """Random products: M, N, K log-uniform over [32, 8192] (most off the tile
    grid), a batch dim on one in six, a transposed operand on one in four,
    float64 on one in eight; at most max_work multiply-adds each."""
    problems = []
    while len(problems) < count:
        m, n, k = (int(round(2 ** rng.uniform(5, 13))) for _ in range(3))
        batches = int(2 ** rng.integers(1, 6)) if rng.random() < 1 / 6 else 1
        if m * n * k * batches > max_work:
            continue
        if rng.random() < 0.5:  # half the problems on multiples of 64, as layers often are
            m, n, k = (max(64, 64 * round(s / 64)) for s in (m, n, k))
        layout = str(rng.choice(["NT", "TN"])) if rng.random() < 0.25 else "NN"
        dtype = "float64" if rng.random() < 1 / 8 else "float32"
        problems.append({"m": m, "n": n, "k": k, "batches": batches, "layout": layout, "dtype": dtype})
    return problems


def conv_problems(rng: np.random.Generator, count: int, max_cols_bytes: float) -> list[dict[str, Any]]:
    """Random layers of a small ResNet: 1x1, 3x3 (and a 7x7 stem or a 5x5) convolutions,
    stride 1 or 2, a depthwise layer on one in five; im2col's column matrix at
    most max_cols_bytes (it is one of the configurations timed)."""
    problems = []
    while len(problems) < count:
        batch = int(2 ** rng.integers(2, 8))
        c_in = int(rng.choice([3, 16, 32, 64, 128, 256]))
        hw = int(rng.choice([7, 8, 14, 16, 28, 32, 56]))
        kernel = int(rng.choice([1, 3, 3, 3, 5, 7]))
        stride = int(rng.choice([1, 1, 2]))
        depthwise = c_in > 3 and rng.random() < 0.2
        c_out = c_in if depthwise else int(rng.choice([16, 32, 64, 128, 256]))
        groups = c_in if depthwise else 1
        padding = kernel // 2
        out_hw = (hw + 2 * padding - kernel) // stride + 1
        cols = batch * (c_in // groups) * groups * kernel * kernel * out_hw * out_hw * 4
        if out_hw < 1 or cols > max_cols_bytes:
            continue
        problems.append({"n": batch, "c_in": c_in, "h": hw, "w": hw, "c_out": c_out, "kernel": [kernel, kernel],
                         "stride": [stride, stride], "padding": [padding, padding], "dilation": [1, 1],
                         "groups": groups, "dtype": "float32"})
    return problems


# ---- collect (on the GPU) ---------------------------------------------------------------------


def device_properties() -> dict[str, Any]:
    """What the runtime says of the device: minitensor's key, and where cupy is
    installed, the properties a roofline needs (clocks, bus width, shared
    memory, registers); the model fills what is missing from its table."""
    import minitensor as mt
    import minitensor.perf_model as pm

    props: dict[str, Any] = {"key": pm.device_key(), "info": mt.device_info()}
    try:
        import cupy

        raw = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
        for field in ("name", "multiProcessorCount", "clockRate", "memoryClockRate", "memoryBusWidth",
                      "sharedMemPerMultiprocessor", "sharedMemPerBlockOptin", "regsPerMultiprocessor",
                      "maxThreadsPerMultiProcessor", "l2CacheSize", "totalGlobalMem", "major", "minor"):
            if field in raw:
                value = raw[field]
                props[field] = value.decode() if isinstance(value, bytes) else int(value)
    except Exception as e:  # noqa: BLE001 - cupy is optional: the table has the values
        props["cupy"] = f"unavailable ({type(e).__name__})"
    return props


def time_ms(fn: Callable[[], Any], events: tuple[Any, Any], prime: Optional[Callable[[], Any]] = None,
            target_ms: float = 12.0) -> tuple[float, float, float]:
    """CUDA-event times of fn() in ms after a warm-up: the median of several
    timings (4 to 16, about target_ms in all), and the medians of the even
    and of the odd ones (two independent measurements, for the sweep's own
    regret in evaluate). A call shorter than 50 us is timed 10 at a time
    behind prime(), a longer kernel that keeps the GPU busy while the host
    enqueues the ten: the host's launch overhead then leaves no gaps between
    them, and the time is the kernel's, not the launch's."""
    start, end = events
    fn()
    start.record()
    fn()
    end.record()
    end.synchronize()
    batch = 10 if prime is not None and start.elapsed_time(end) < 0.05 else 1
    times: list[float] = []
    while True:
        if batch > 1:
            prime()
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / batch)
        if len(times) >= (6 if batch > 1 else 16) or (len(times) >= 4 and sum(times) * batch >= target_ms):
            break
    return statistics.median(times), statistics.median(times[0::2]), statistics.median(times[1::2])


def _timed_or_none(fn: Callable[[], Any], events: tuple[Any, Any],
                   prime: Optional[Callable[[], Any]] = None) -> list[Optional[float]]:
    """[median, even median, odd median] in ms, or three None where the
    configuration cannot run this problem (the first such error of each
    kind is printed: one failing configuration does not end the collection)."""
    try:
        return [round(t, 5) for t in time_ms(fn, events, prime)]
    except Exception as e:  # noqa: BLE001 - recorded as "cannot run", never fatal
        message = f"{type(e).__name__}: {str(e)[:160]}"
        if type(e).__name__ not in _errors_seen:
            _errors_seen.add(type(e).__name__)
            print(f"  (a configuration cannot run: {message})", file=sys.stderr)
        return [None, None, None]


_errors_seen: set[str] = set()


def collect_matmul(problem: dict[str, Any], configs: int, events: tuple[Any, Any],
                   prime: Callable[[], Any]) -> list[list[Optional[float]]]:
    """Every configuration's times on the problem (mt_matmul with the
    configuration named: mt.kernels.matmul with the configuration and out=)."""
    import minitensor as mt

    dtype = getattr(mt, problem["dtype"])
    m, n, k, batches = problem["m"], problem["n"], problem["k"], problem["batches"]
    lead = (batches,) if batches > 1 else ()
    # A transposed operand is a view: the (K, M) tensor's transpose is an M x K with strides (1, M).
    a = mt.randn(*lead, k, m, dtype=dtype).transpose(-1, -2) if problem["layout"][0] == "T" else \
        mt.randn(*lead, m, k, dtype=dtype)
    b = mt.randn(*lead, n, k, dtype=dtype).transpose(-1, -2) if problem["layout"][1] == "T" else \
        mt.randn(*lead, k, n, dtype=dtype)
    out = mt.empty(*lead, m, n, dtype=dtype)
    rungs = [mt.kernels.matmul_config_rung(c) for c in range(configs)]
    return [_timed_or_none(lambda c=c: mt.kernels.matmul(a, b, rungs[c], c, out=out), events, prime)
            for c in range(configs)]


CONV_CONFIGS = ("im2col", "tiled", "implicit_gemm")


def collect_conv(problem: dict[str, Any], events: tuple[Any, Any]) -> list[list[Optional[float]]]:
    import minitensor as mt

    x = mt.randn(problem["n"], problem["c_in"], problem["h"], problem["w"])
    w = mt.randn(problem["c_out"], problem["c_in"] // problem["groups"], *problem["kernel"])
    args = (tuple(problem["stride"]), tuple(problem["padding"]), tuple(problem["dilation"]), problem["groups"])
    return [_timed_or_none(lambda algo=algo: mt.kernels.conv2d(x, w, None, *args, algo=algo), events)
            for algo in CONV_CONFIGS]


def collect(out_dir: Path, budget_s: float, seed: int, quick: bool) -> int:
    import minitensor as mt

    began = time.perf_counter()
    rng = np.random.default_rng(seed)
    if quick:  # the emulator: a few tiny problems, to check the script runs
        matmuls = matmul_problems(rng, 3, 64**3)
        convs = conv_problems(rng, 200, 4e5)[:2]
    else:
        matmuls = matmul_problems(rng, 400, 2**36)
        convs = conv_problems(rng, 250, 2**28)
    names = list(mt.kernels.matmul_configs())
    data: dict[str, Any] = {"version": 1, "device": device_properties(), "backend": mt.backend(),
                            "configs": {"matmul": names, "conv": list(CONV_CONFIGS)}, "matmul": [], "conv": []}
    events = (mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))
    # The priming kernel of time_ms (about 0.2 ms on an H100), which also
    # brings the GPU out of idle clocks before the first timing.
    side = 64 if quick else 1536
    warm, warm_out = mt.randn(side, side), mt.empty(side, side)

    def prime() -> None:
        mt.kernels.matmul(warm, warm, "warptile", 1, out=warm_out)

    for _ in range(1 if quick else 30):
        prime()
    mt.cuda.synchronize()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "measurements.json"
    # Matmul gets about two thirds of the budget, convolution the rest; the
    # file is rewritten every 20 problems, so a run cut short keeps its data.
    for kind, problems, share in (("matmul", matmuls, 0.68), ("conv", convs, 1.0)):
        for problem in problems:
            if time.perf_counter() - began > budget_s * share:
                break
            if kind == "matmul":
                ms = collect_matmul(problem, len(names), events, prime)
            else:
                ms = collect_conv(problem, events)
            data[kind].append({**problem, "ms": [t[0] for t in ms], "ms_even": [t[1] for t in ms],
                               "ms_odd": [t[2] for t in ms]})
            mt.cuda.synchronize()
            if len(data[kind]) % 20 == 0:
                path.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    elapsed = time.perf_counter() - began
    print(f"perf_model collect: {len(data['matmul'])} matmul and {len(data['conv'])} conv problems on "
          f"{data['device']['key']} in {elapsed:.1f} s -> {path}")
    for kind in ("matmul", "conv"):
        wins = [0] * len(data["configs"][kind])
        for row in data[kind]:
            timed = [(t, c) for c, t in enumerate(row["ms"]) if t is not None]
            if timed:
                wins[min(timed)[1]] += 1
        print(f"  {kind}: wins per configuration {wins}")
    return 0


# ---- train and evaluate (anywhere) --------------------------------------------------------------


def newest_data() -> Path:
    files = sorted(DATA_DIR.glob("*.json"))
    if not files:
        raise SystemExit(f"no measurement file under {DATA_DIR}; pass --data")
    return files[-1]


def split(count: int, holdout: int) -> tuple[list[int], list[int]]:
    """(training, held-out) indices: every holdout-th of a fixed shuffle."""
    order = np.random.default_rng(0).permutation(count)
    return sorted(int(i) for i in np.delete(order, np.s_[::holdout])), sorted(int(i) for i in order[::holdout])


def regrets(measured: list[Any], pick: Callable[[Any, list[int]], Optional[int]]) -> tuple[list[float], int]:
    """The regret of pick(problem, runnable configs) on each problem (None from
    pick: a sweep, regret 1 by definition), and how many sweeps it asked."""
    out, sweeps = [], 0
    for m in measured:
        valid = [i for i, t in enumerate(m.seconds) if t is not None]
        best = min(m.seconds[i] for i in valid)
        chosen = pick(m, valid)
        if chosen is None:
            sweeps += 1
            chosen = min(valid, key=lambda i: m.seconds[i])
        out.append(m.seconds[chosen] / best)
    return out, sweeps


def evaluate(path: Path, holdout: int) -> int:
    import minitensor.perf_model as pm

    data = json.loads(path.read_text())
    device, measured = pm.read_measurements(data)
    train_idx, test_idx = split(len(measured), holdout)
    began = time.perf_counter()
    model = pm.train_on(device, [measured[i] for i in train_idx], data["configs"])
    print(f"data: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} ({data['device']['key']}); "
          f"device model: {device.name}, {device.sms} SMs, {device.peak_flops(4) / 1e12:.1f} FP32 TFLOP/s, "
          f"{device.dram_bytes_s / 1e12:.2f} TB/s")
    print(f"trained on {len(train_idx)} problems in {time.perf_counter() - began:.1f} s; "
          f"{len(test_idx)} held out (every {holdout}th of a fixed shuffle)\n")

    def roofline(m: Any, valid: list[int]) -> int:
        return valid[pm.choose_roofline(m.problem, [m.configs[i] for i in valid], device)]

    def learned(m: Any, valid: list[int]) -> int:
        return valid[int(np.argmin(model.predict_s(m.problem, [m.configs[i] for i in valid])))]

    def with_fallback(m: Any, valid: list[int]) -> Optional[int]:
        choice = pm.choose(model, m.problem, [m.configs[i] for i in valid])
        return None if choice.config is None else valid[choice.config]

    print("| rung | how the configuration is chosen | median regret | worst regret | sweeps at run time |")
    print("| --- | --- | ---: | ---: | ---: |")
    for kind in ("matmul", "conv"):
        test = [measured[i] for i in test_idx if measured[i].kind == kind]
        if not test:
            continue
        r = [expected_random_regret(m) for m in test]
        print(f"| {kind} ({len(test)} problems) | a random configuration (expected regret) | {np.median(r):.3f} | "
              f"{max(r):.3f} | 0 of {len(test)} |")
        for label, pick in (("roofline model", roofline),
                            ("learned model, no sweep", learned), ("learned model, sweep when unsure", with_fallback),
                            ("sweep (times every configuration)", lambda m, v: None)):
            r, sweeps = regrets(test, pick)
            print(f"| {kind} ({len(test)} problems) | {label} | {np.median(r):.3f} | {max(r):.3f} | "
                  f"{sweeps} of {len(test)} |")
        for top in (2, 3):
            # A short sweep: time only the `top` configurations predicted fastest.
            r = []
            for m in test:
                valid = [i for i, t in enumerate(m.seconds) if t is not None]
                predicted = model.predict_s(m.problem, [m.configs[i] for i in valid])
                short = [valid[i] for i in np.argsort(predicted)[:top]]
                r.append(min(m.seconds[i] for i in short) / min(m.seconds[i] for i in valid))
            print(f"| {kind} ({len(test)} problems) | learned model, then a sweep of its {top} best predicted | "
                  f"{np.median(r):.3f} | {max(r):.3f} | {len(test)} short sweeps |")
        if all(m.halves for m in test):
            # The sweep chooses by its own (noisy) timing: by one half of the
            # timed calls, judged by the other half.
            r = [sweep_regret(m) for m in test]
            print(f"| {kind} ({len(test)} problems) | sweep, choosing by half the calls, judged by the other half | "
                  f"{np.median(r):.3f} | {max(r):.3f} | {len(test)} of {len(test)} |")
    print("\npredicted against measured time, held-out problems (every runnable configuration):")
    print("| rung | model | median abs(predicted / measured - 1) | 90th percentile |")
    print("| --- | --- | ---: | ---: |")
    for kind in ("matmul", "conv"):
        test = [measured[i] for i in test_idx if measured[i].kind == kind]
        for label in ("roofline", "learned"):
            errors = []
            for m in test:
                valid = [i for i, t in enumerate(m.seconds) if t is not None]
                configs = [m.configs[i] for i in valid]
                predicted = (model.predict_s(m.problem, configs) if label == "learned" else
                             np.array([pm.roofline_s(m.problem, c, device).time for c in configs]))
                errors.extend(abs(p / m.seconds[i] - 1) for p, i in zip(predicted, valid))
            if errors:
                print(f"| {kind} | {label} | {np.median(errors):.1%} | {np.quantile(errors, 0.9):.1%} |")
    print("\nworst held-out picks of the learned model (ms):")
    worst = sorted(((learned_regret(model, m), m) for m in (measured[i] for i in test_idx)),
                   key=lambda x: -x[0][0])[:5]
    for (reg, chosen, best), m in worst:
        print(f"  {m.kind} {m.problem}: chose {chosen} ({m.seconds[chosen] * 1e3:.3f}), best {best} "
              f"({m.seconds[best] * 1e3:.3f}): regret {reg:.3f}")
    return 0


def expected_random_regret(m: Any) -> float:
    times = np.array([t for t in m.seconds if t is not None])
    return float(np.mean(times / times.min()))


def sweep_regret(m: Any) -> float:
    first, second = m.halves
    valid = [i for i in range(len(first)) if first[i] is not None and second[i] is not None]
    chosen = min(valid, key=lambda i: first[i])
    return second[chosen] / min(second[i] for i in valid)


def learned_regret(model: Any, m: Any) -> tuple[float, int, int]:
    valid = [i for i, t in enumerate(m.seconds) if t is not None]
    chosen = valid[int(np.argmin(model.predict_s(m.problem, [m.configs[i] for i in valid])))]
    best = min(valid, key=lambda i: m.seconds[i])
    return m.seconds[chosen] / m.seconds[best], chosen, best


def train(path: Path) -> int:
    """Trains on every problem of the file and saves the model where the
    autotuner of the file's device looks for it (MINITENSOR_CACHE_DIR...)."""
    import minitensor.perf_model as pm

    data = json.loads(path.read_text())
    device, measured = pm.read_measurements(data)
    model = pm.train_on(device, measured, data["configs"])
    saved = pm.save(model, pm.cache_dir(), data["device"]["key"])
    print(f"trained on {len(measured)} problems of {data['device']['key']}: saved {saved}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("collect", help="time every configuration on the GPU")
    p.add_argument("--out", type=Path, required=True, help="folder for measurements.json")
    p.add_argument("--budget", type=float, default=40.0, help="seconds of collection at most")
    p.add_argument("--seed", type=int, default=31)
    p.add_argument("--quick", action="store_true", help="a few tiny problems (the emulator)")
    for name in ("evaluate", "train"):
        p = sub.add_parser(name)
        p.add_argument("--data", type=Path, default=None, help="a measurements.json (default: data/perf_model/)")
        p.add_argument("--holdout", type=int, default=4, help="hold out every n-th problem (evaluate)")
    args = parser.parse_args()
    if args.command == "collect":
        return collect(args.out, args.budget, args.seed, args.quick)
    data = args.data or newest_data()
    return evaluate(data, args.holdout) if args.command == "evaluate" else train(data)


if __name__ == "__main__":
    sys.exit(main())
