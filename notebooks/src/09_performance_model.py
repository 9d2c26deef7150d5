# %% [markdown]
# # 9. A performance model: choosing a kernel's configuration without timing it
#
# The fast matmul rungs come in several *tile configurations*: a block
# computes a 128 x 128 tile, or 64 x 64, or 256 x 128; with two stages of
# shared memory or four. Which one wins depends on the shape and on the GPU,
# so the autotuner (`minitensor/ops/autotune.py`) times every configuration
# the first time it meets a shape, a *sweep*. This notebook builds what
# replaces the sweep (`minitensor/ops/perf_model.py`):
#
# 1. a **roofline** from first principles: how many multiply-adds and how
#    many bytes a configuration costs, and how its blocks fill the SMs;
# 2. a **learned model**, a gradient-boosted tree that corrects the
#    roofline, trained on measurements of every configuration on an H100
#    (`data/perf_model/`, collected by `bench/perf_model.py collect`).
#
# Everything here runs on the committed measurements: no GPU needed.

# %%
# Make the repository's minitensor importable when the notebook runs from notebooks/.
import json
import sys
from pathlib import Path

repo = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "minitensor" / "__init__.py").is_file())
sys.path.insert(0, str(repo))

import matplotlib.pyplot as plt
import numpy as np

import minitensor as mt
import minitensor.perf_model as pm

plt.rcParams.update({"figure.dpi": 100, "font.size": 10})
path = sorted((repo / "data" / "perf_model").glob("*.json"))[-1]
data = json.loads(path.read_text())
device, measured = pm.read_measurements(data)
print("measurements:", path.name, "-", data["device"]["key"])
print(f"{sum(m.kind == 'matmul' for m in measured)} matmul problems x {len(data['configs']['matmul'])} configurations, "
      f"{sum(m.kind == 'conv' for m in measured)} convolutions x {len(data['configs']['conv'])} rungs")
print(f"the device as the model sees it: {device.sms} SMs at {device.clock_hz / 1e9:.2f} GHz, "
      f"{device.peak_flops(4) / 1e12:.1f} FP32 TFLOP/s, {device.peak_flops(8) / 1e12:.1f} FP64, "
      f"{device.dram_bytes_s / 1e12:.2f} TB/s")

# %% [markdown]
# ## The roofline
# A kernel that does F floating-point operations and must move at least B
# bytes between DRAM and the chip cannot take less than F / peak FLOP/s, nor
# less than B / bandwidth. Plotted against the *arithmetic intensity* F / B,
# the best rate a kernel can reach is a roof: a slope (memory-bound) rising
# to a flat ceiling (compute-bound). Below, each measured problem appears
# once per rung at the rate of that rung's best configuration.

# %%
def flops_and_bytes(problem):
    """FLOPs of the problem (2 per multiply-add) and the least DRAM bytes (operands and result once)."""
    if isinstance(problem, pm.MatmulProblem):
        m, n, k, b = problem.m, problem.n, problem.k, problem.batches
        return 2 * m * n * k * b, (m * k + k * n + m * n) * b * problem.itemsize
    m, n, k, groups = problem.gemm()
    oh, ow = problem.out_hw()
    moved = problem.n * problem.c_in * problem.h * problem.w + problem.c_out * k + problem.n * problem.c_out * oh * ow
    return 2 * m * n * k * groups, moved * problem.itemsize


def rung_of(config):
    return config.rung if isinstance(config, pm.TileConfig) else config


fig, ax = plt.subplots(figsize=(8, 5))
intensity = np.logspace(-1, 4, 200)
for itemsize, style in ((4, "-"), (8, "--")):
    roof = np.minimum(device.peak_flops(itemsize), intensity * device.dram_bytes_s) / 1e12
    ax.plot(intensity, roof, "k" + style, lw=1, label=f"roof, float{itemsize * 8}")
markers = {"warptile": "o", "pipelined": "s", "implicit_gemm": "^", "im2col": "v", "tiled": "x"}
for rung, marker in markers.items():
    xs, ys = [], []
    for m in measured:
        times = [t for c, t in zip(m.configs, m.seconds) if t is not None and rung_of(c) == rung]
        if times:
            f, b = flops_and_bytes(m.problem)
            xs.append(f / b)
            ys.append(f / min(times) / 1e12)
    if xs:
        ax.scatter(xs, ys, marker=marker, s=18, alpha=0.7, label=f"{rung} ({len(xs)})")
ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP per DRAM byte)",
       ylabel="TFLOP/s (best configuration of the rung)", title=f"measured on {device.name}")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# Small problems sit far below the roof: they have too few tiles to fill
# 132 SMs, and a launch costs microseconds. Large products climb towards the
# FP32 ceiling but stop short of it: the kernels issue loads, barriers and
# address arithmetic besides their FMAs. The convolutions sit lower still: a
# convolution was timed as `mt.kernels.conv2d` runs it, host path included,
# which a small layer cannot hide; among the rungs, im2col writes and reads
# every window, and the tiled rung does one multiply-add per shared-memory
# load.
#
# ## One problem, every configuration
# The roofline of a *configuration* adds what the tile changes: the blocks
# (ceil(M / BM) x ceil(N / BN)) run in waves of SMs x blocks-per-SM, the last
# wave may leave SMs idle, a shape off the tile grid computes padding, and
# how many blocks an SM holds (shared memory, registers) decides how much
# latency the others hide. Here its prediction against the measurement for
# the smallest and the largest float32 product of the data.

# %%
for i, name in enumerate(data["configs"]["matmul"]):
    print(f"configuration {i:2}: {name}")
matmuls = [m for m in measured if m.kind == "matmul" and m.problem.dtype == "float32" and m.problem.batches == 1]
work = [m.problem.m * m.problem.n * m.problem.k for m in matmuls]
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for ax, m in zip(axes, (matmuls[int(np.argmin(work))], matmuls[int(np.argmax(work))])):
    p = m.problem
    predicted = [pm.roofline_s(p, c, device) for c in m.configs]
    x = np.arange(len(m.configs))
    ax.bar(x - 0.2, [t * 1e3 for t in m.seconds], 0.4, label="measured")
    ax.bar(x + 0.2, [r.time * 1e3 for r in predicted], 0.4, label="roofline")
    ax.set_xticks(x, [str(i) for i in x])
    ax.set(title=f"{p.m} x {p.n} x {p.k} ({p.layout})", xlabel="configuration", ylabel="ms")
    ax.legend(fontsize=8)
    print(f"{p.m} x {p.n} x {p.k}: (waves, blocks an SM holds, padding) per configuration:")
    print("   ", "  ".join(f"({r.waves}, {r.occupancy}, {r.padding:.2f})" for r in predicted))
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The learned model
# The roofline ranks configurations by first principles but misses what the
# compiler and the hardware add (register spills, bank conflicts, how well
# cp.async stages overlap). The learned model keeps the roofline and fits
# the *ratio* measured / roofline with a boosted tree over features of the
# problem, the configuration and the roofline's own terms (waves, padding,
# occupancy). Train on three quarters of the problems, judge on the rest:
# the **regret** of a choice is the chosen configuration's measured time over
# the best one's (1.0: the best was chosen).

# %%
order = np.random.default_rng(0).permutation(len(measured))
held_out = set(int(i) for i in order[::4])
train = [m for i, m in enumerate(measured) if i not in held_out]
test = [m for i, m in enumerate(measured) if i in held_out]
model = pm.train_on(device, train, data["configs"], trees=150)

rows = {"random": [], "roofline": [], "learned": []}
pred, meas = [], []
for m in test:
    valid = [i for i, t in enumerate(m.seconds) if t is not None]
    times = np.array([m.seconds[i] for i in valid])
    configs = [m.configs[i] for i in valid]
    learned = model.predict_s(m.problem, configs)
    pred.extend(learned)
    meas.extend(times)
    rows["random"].append(np.mean(times / times.min()))
    rows["roofline"].append(times[pm.choose_roofline(m.problem, configs, device)] / times.min())
    rows["learned"].append(times[int(np.argmin(learned))] / times.min())
for name, r in rows.items():
    print(f"{name:>9}: median regret {np.median(r):.3f}, worst {max(r):.3f} ({len(r)} held-out problems)")

fig, ax = plt.subplots(figsize=(5, 5))
ax.loglog(np.array(meas) * 1e3, np.array(pred) * 1e3, ".", alpha=0.4)
lims = [min(meas) * 1e3 / 1.5, max(meas) * 1e3 * 1.5]
ax.plot(lims, lims, "k-", lw=1)
ax.set(xlabel="measured ms", ylabel="predicted ms (learned)", title="held-out problems, every configuration")
plt.show()

# %% [markdown]
# ## Choosing, and knowing when not to
# `pm.choose` returns the configuration of least predicted time, or *no
# choice* when the model is unsure: no model for the device, or a problem
# far from every trained one (log2 of M, N, K and the batches more than
# `pm.MAX_DISTANCE` away). Then the autotuner sweeps, as before, and the
# sweep's measurements can train the next model
# (`pm.train_from_autotune_cache`).

# %%
names = list(mt.kernels.matmul_configs())
configs = [pm.parse_config(n) for n in names]
for shape in ((1000, 1000, 1000), (4096, 4096, 4096), (3, 5, 2)):
    choice = pm.choose(model, pm.MatmulProblem(*shape), configs)
    picked = names[choice.config] if choice.config is not None else "sweep"
    print(f"{shape}: {picked} ({choice.reason})")
