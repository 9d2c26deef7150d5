# %% [markdown]
# # 3. Tiled matrix product
#
# This notebook compares two kernels for `out = a @ b` (`a` is M x K, `b` is
# K x N), rungs 1 and 3 of a kernel ladder whose rungs each have a file,
# `src/matmul_naive.cu` and `src/matmul_tiled.cu` (rung 2,
# `matmul_coalesced`, is the naive kernel with its warps walking columns
# instead of rows; `src/matmul.cu` and `docs/kernels.md` list all seven):
#
# * `matmul_naive`: one thread per output element walks a row of A and a
#   column of B in global memory. Every element of A is read N times and
#   every element of B M times.
# * `matmul_tiled`: a block of `kTile x kTile` threads computes a
#   `kTile x kTile` tile of the output. For each `kTile`-wide strip of K the
#   threads load one tile of A and one tile of B into shared memory (one
#   element per thread), wait at `__syncthreads()`, and each thread then
#   reads a row of the A tile and a column of the B tile from fast shared
#   memory. Each element brought from global memory is used `kTile` times.
#
# This notebook draws which tiles a block loads at each step, counts the
# global-memory reads of both kernels, and times both through the library.

# %%
# Make the repository's minitensor importable when the notebook runs from notebooks/.
import re
import sys
import time
from pathlib import Path

repo = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "minitensor" / "__init__.py").is_file())
sys.path.insert(0, str(repo))

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

import minitensor as mt  # mt.kernels.matmul(a, b, algo="naive") runs one rung of the ladder

plt.rcParams.update({"figure.dpi": 100, "font.size": 10})
mt.manual_seed(0)
print("backend:", mt.backend())

matmul_h = (repo / "src" / "matmul_internal.h").read_text()
kTile = int(re.search(r"struct SimpleTiles \{\s*static constexpr int BM = (\d+);", matmul_h).group(1))
print("kTile =", kTile, "(SimpleTiles::BM, read from src/matmul_internal.h)")
print("the matmul ladder:", mt.kernels.algorithms("matmul"))

# %% [markdown]
# ## Which tiles each block loads
# The grid has `ceil(N / kTile)` blocks along x (column tiles of the output)
# and `ceil(M / kTile)` along y (row tiles). Block `(blockIdx.y, blockIdx.x)`
# owns the output tile whose rows start at `blockIdx.y * kTile` and columns at
# `blockIdx.x * kTile`. At step `k0 = 0, kTile, 2*kTile, ...` its thread
# `(ty, tx)` loads
#
# ```c
# a_tile[ty][tx] = (row < M && a_col < K) ? A(row, k0 + tx) : 0;   // row = tile row start + ty
# b_tile[ty][tx] = (b_row < K && col < N) ? B(k0 + ty, col) : 0;   // col = tile column start + tx
# ```
#
# so the block reads a `kTile x kTile` tile of A from its own row strip, and
# one of B from its own column strip, moving along K. Where a tile hangs over
# the edge of a matrix (M, N or K not a multiple of `kTile`) the thread
# stores 0, which adds nothing to the dot products.
#
# The sizes below are chosen so that every kind of edge appears:
# M = 80, K = 80, N = 56 give 3 x 2 blocks and 3 steps along K, the last
# ones partial. Drawn for the bottom-right block, which has partial tiles in
# every direction.

# %%
M, K, N = 80, 80, 56
row_tiles, col_tiles, k_steps = -(-M // kTile), -(-N // kTile), -(-K // kTile)
by, bx = row_tiles - 1, col_tiles - 1  # the block drawn
print(f"grid: {col_tiles} x {row_tiles} blocks of {kTile} x {kTile} threads; {k_steps} steps along K")

A_COL, B_COL, C_COL = "#3182bd", "#e6550d", "#31a354"


def draw_matrix(ax, rows, cols, name):
    ax.add_patch(Rectangle((0, 0), cols, rows, facecolor="white", edgecolor="black", lw=1.2))
    for r in range(kTile, rows, kTile):
        ax.plot([0, cols], [r, r], color="#bbbbbb", lw=0.8, ls="--")
    for c in range(kTile, cols, kTile):
        ax.plot([c, c], [0, rows], color="#bbbbbb", lw=0.8, ls="--")
    ax.set_xlim(-2, 3 * kTile + 2)
    ax.set_ylim(3 * kTile + 2, -2)  # row 0 at the top
    ax.set_aspect("equal")
    ax.set_xticks(sorted(set(range(0, cols, kTile)) | {cols}))
    ax.set_yticks(sorted(set(range(0, rows, kTile)) | {rows}))
    ax.tick_params(labelsize=8)
    ax.set_title(name, fontsize=10)


def draw_tile(ax, r0, c0, rows, cols, colour, alpha=0.85):
    """The kTile x kTile tile at (r0, c0): the part inside the matrix filled,
    the part outside (loaded as zeros) hatched."""
    rgb = np.array(plt.matplotlib.colors.to_rgb(colour))
    solid = alpha * rgb + (1 - alpha) * np.ones(3)  # the colour at this strength, opaque
    ax.add_patch(Rectangle((c0, r0), kTile, kTile, facecolor="white", edgecolor=colour, hatch="///", lw=1.5))
    ax.add_patch(Rectangle((c0, r0), min(kTile, cols - c0), min(kTile, rows - r0),
                           facecolor=solid, edgecolor=colour, lw=1.5))


fig, axes = plt.subplots(k_steps, 3, figsize=(12, 3.9 * k_steps))
for step in range(k_steps):
    k0 = step * kTile
    ax_a, ax_b, ax_c = axes[step]
    a_rows = f"{by * kTile}:{min(M, by * kTile + kTile)}"
    a_cols = f"{k0}:{min(K, k0 + kTile)}"
    b_cols = f"{bx * kTile}:{min(N, bx * kTile + kTile)}"
    draw_matrix(ax_a, M, K, f"A ({M} x {K}): a_tile <- A[{a_rows}, {a_cols}]")
    draw_matrix(ax_b, K, N, f"B ({K} x {N}): b_tile <- B[{a_cols}, {b_cols}]")
    draw_matrix(ax_c, M, N, f"out ({M} x {N}): acc += a_tile @ b_tile ({step + 1} of {k_steps})")
    for earlier in range(step):  # tiles used at earlier steps, faded
        draw_tile(ax_a, by * kTile, earlier * kTile, M, K, A_COL, alpha=0.2)
        draw_tile(ax_b, earlier * kTile, bx * kTile, K, N, B_COL, alpha=0.2)
    draw_tile(ax_a, by * kTile, k0, M, K, A_COL)
    draw_tile(ax_b, k0, bx * kTile, K, N, B_COL)
    draw_tile(ax_c, by * kTile, bx * kTile, M, N, C_COL, alpha=0.25 + 0.6 * (step + 1) / k_steps)
    ax_a.set_ylabel(f"step {step} (k0 = {k0})", fontsize=11)
fig.suptitle(f"block (blockIdx.y = {by}, blockIdx.x = {bx}): the tiles it loads at each step along K\n"
             f"(hatched: outside the matrix, loaded as 0; faded: loaded at an earlier step)", fontsize=11)
fig.tight_layout()
plt.show()

# %% [markdown]
# Every block of a row of blocks reads the same strip of A, and every block
# of a column of blocks the same strip of B. The whole grid at once, for
# the first step:

# %%
fig, axes = plt.subplots(1, 3, figsize=(12, 4.2))
block_colours = plt.get_cmap("tab10")
draw_matrix(axes[0], M, K, "A: the tile loaded by blocks (y, *)")
draw_matrix(axes[1], K, N, "B: the tile loaded by blocks (*, x)")
draw_matrix(axes[2], M, N, "out: the tile of each block")
for y in range(row_tiles):
    for x in range(col_tiles):
        colour = block_colours(y * col_tiles + x)
        draw_tile(axes[2], y * kTile, x * kTile, M, N, colour, alpha=0.6)
        axes[2].text(x * kTile + min(kTile, N - x * kTile) / 2, y * kTile + min(kTile, M - y * kTile) / 2,
                     f"({y},{x})", ha="center", va="center", fontsize=9)
    draw_tile(axes[0], y * kTile, 0, M, K, plt.get_cmap("Blues")(0.4 + 0.25 * y), alpha=0.7)
    axes[0].text(kTile / 2, y * kTile + min(kTile, M - y * kTile) / 2, f"blocks ({y}, *)",
                 ha="center", va="center", fontsize=9)
for x in range(col_tiles):
    draw_tile(axes[1], 0, x * kTile, K, N, plt.get_cmap("Oranges")(0.4 + 0.25 * x), alpha=0.7)
    axes[1].text(x * kTile + min(kTile, N - x * kTile) / 2, kTile / 2, f"(*, {x})", ha="center",
                 va="center", fontsize=9)
fig.suptitle("step 0: the A and B tiles loaded by the blocks (blockIdx.y, blockIdx.x)", fontsize=11)
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Your kernel against the reference, tile by tile
# `mirror_tiled` repeats the kernel's loop for all blocks at once in NumPy:
# zero-padded tiles, `acc += a_tile[ty][k] * b_tile[k][tx]` for k in order,
# in float32. `check_tiles` runs the library's `matmul_tiled` (in a
# student's copy: yours) on the same inputs, compares every output tile with
# float64 NumPy, and draws the result next to the reference. Where the output
# is wrong, the picture says where: wrong tiles only at the right or bottom
# edge point at the guards of partial tiles; wrong tiles everywhere at a
# barrier, the indexing of the tile loop, or the last, partial step along K
# (the zero fill). On the
# emulator the mirror and the kernel agree to the last bit; a GPU fuses each
# multiply-add into one FMA instruction (rounded once instead of twice), so
# there they agree to float32 rounding.

# %%
def mirror_tiled(a, b, T=kTile, pad=0.0):
    """The tile loop of matmul_tiled in NumPy; `pad` is what a thread stores outside the matrix."""
    a, b = a.astype(np.float32), b.astype(np.float32)
    m, k = a.shape
    n = b.shape[1]
    rows, cols = -(-m // T) * T, -(-n // T) * T
    acc = np.zeros((rows, cols), dtype=np.float32)  # one accumulator per thread of the grid
    for k0 in range(0, k, T):
        a_tiles = np.full((rows, T), pad, dtype=np.float32)  # out of range -> pad (0 in the kernel)
        b_tiles = np.full((T, cols), pad, dtype=np.float32)
        a_tiles[:m, :min(T, k - k0)] = a[:, k0:k0 + T]
        b_tiles[:min(T, k - k0), :n] = b[k0:k0 + T, :]
        for kk in range(T):  # for (k = 0; k < kTile; ++k) acc += a_tile[ty][k] * b_tile[k][tx];
            acc = acc + a_tiles[:, kk:kk + 1] * b_tiles[kk:kk + 1, :]
    return acc[:m, :n]


def run_tiled(a, b):
    """The library's matmul_tiled as a NumPy array, or None (with the reason) when it is not written yet."""
    try:
        return mt.kernels.matmul(a, b, algo="tiled").numpy()
    except NotImplementedError as e:
        print("matmul_tiled is not done yet:", e)
        return None


def check_tiles(got, ref, k, title, T=kTile):
    """Draws got, ref and the wrong elements tile by tile; returns the (row, col) of the wrong tiles.
    Tolerance as in the tests: |got - ref| <= sqrt(k) * (1e-5 + 1e-4 * |ref|) for a float32 dot product."""
    m, n = ref.shape
    bad = ~(np.abs(got - ref) <= np.sqrt(k) * (1e-5 + 1e-4 * np.abs(ref)))  # NaN counts as wrong
    wrong = [(ty, tx) for ty in range(-(-m // T)) for tx in range(-(-n // T))
             if bad[ty * T:(ty + 1) * T, tx * T:(tx + 1) * T].any()]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.3))
    vmax = np.abs(ref).max()
    shown = np.where(np.isfinite(got), got, np.nan)
    for ax, data, name in ((axes[0], shown, "the output checked (NaN: blank)"), (axes[1], ref, "reference (float64 NumPy)")):
        image = ax.imshow(data, cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
        ax.set_title(name)
    fig.colorbar(image, ax=axes[:2], shrink=0.8)
    axes[2].imshow(bad, cmap="Reds", vmin=0, vmax=1.5, interpolation="nearest")
    axes[2].set_title(f"wrong elements: {int(bad.sum())} of {bad.size}")
    for ax in axes:
        for r in range(0, m, T):  # the tile grid: one block's output tile per cell
            for c in range(0, n, T):
                is_wrong = (r // T, c // T) in wrong
                ax.add_patch(Rectangle((c - 0.5, r - 0.5), min(T, n - c), min(T, m - r), fill=False,
                                       edgecolor="red" if is_wrong else "#555555", lw=2.5 if is_wrong else 0.8))
        ax.set_xlabel("column")
    axes[0].set_ylabel("row")
    fig.suptitle(f"{title}: {len(wrong)} of {-(-m // T) * -(-n // T)} output tiles wrong "
                 f"(red frame: a tile with a wrong element)", fontsize=11)
    plt.show()
    if wrong:
        edge = [t for t in wrong if (t[0] + 1) * T > m or (t[1] + 1) * T > n]
        print(f"wrong tiles (blockIdx.y, blockIdx.x): {wrong}")
        print(f"{len(edge)} of them at the right or bottom edge of the output" if edge
              else "none of them is at the right or bottom edge of the output")
    else:
        print("every tile matches the reference")
    return wrong


a = mt.randn(M, K)
b = mt.randn(K, N)
ref = a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
mirror = mirror_tiled(a.numpy(), b.numpy())
out_tiled = run_tiled(a, b)
if out_tiled is not None:
    print("mirror vs library, largest difference:", np.abs(mirror - out_tiled).max())
    print("bitwise equal:", np.array_equal(mirror, out_tiled))
    check_tiles(out_tiled, ref, K, f"the library's matmul_tiled, {M} x {K} @ {K} x {N}")
err = np.abs(mt.kernels.matmul(a, b, algo="naive").numpy() - ref).max()
print(f"naive  vs float64 NumPy: largest difference {err:.2e}")

# %% [markdown]
# What a classic bug looks like in this picture: a kernel that loads
# `A(row, k0 + tx)` and `B(k0 + ty, col)` without storing the zero outside
# the matrix, so that such a thread leaves its slot of the tile as it was. On
# the emulator shared memory starts poisoned (every byte 0xFF, a NaN),
# exactly so that such a slot cannot pass as a zero; the mirror below does
# the same. Rows of A and columns of B outside the matrix only reach outputs
# that are never stored, but the last, partial step along K reaches every
# output: with K = 80 (not a multiple of 32) every tile is wrong, and with
# K = 64 the same bug passes. That is why the tests use sizes such as 31, 33
# and 65.

# %%
check_tiles(mirror_tiled(a.numpy(), b.numpy(), pad=np.nan), ref, K, f"without the zero fill, K = {K}")
a64, b64 = a.numpy()[:, :64], b.numpy()[:64, :]
check_tiles(mirror_tiled(a64, b64, pad=np.nan), a64.astype(np.float64) @ b64, 64, "without the zero fill, K = 64")

# %% [markdown]
# ## Global-memory reads: naive versus tiled
# Counting the loads each kernel issues (element reads from global memory,
# before any cache):
#
# * **naive**: each of the `M * N` threads reads K elements of A and K of B:
#   `2 * M * N * K`.
# * **tiled** with tile T: at each step every thread loads at most one
#   element of A and one of B, and only inside the matrix. Each element of A
#   is then loaded once by every block of its row of blocks
#   (`ceil(N / T)` of them), and each element of B once by every block of its
#   column of blocks (`ceil(M / T)`): `M * K * ceil(N / T) + K * N * ceil(M / T)`,
#   about `2 * n^3 / T` for n x n matrices: T times fewer.
#
# `count_loads` counts them a second way, block by block and step by step
# with the kernel's own guards, to check the formula.

# %%
def ceil_div(a, b):
    return -(-a // b)


def reads_naive(m, n, k):
    return 2 * m * n * k


def reads_tiled(m, n, k, T):
    return m * k * ceil_div(n, T) + k * n * ceil_div(m, T)


def count_loads(m, n, k, T):
    """Loads of matmul_tiled, block by block and step by step, with the kernel's guards."""
    total = 0
    for by_ in range(ceil_div(m, T)):
        for bx_ in range(ceil_div(n, T)):
            for k0 in range(0, k, T):
                ty, tx = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
                row, col = by_ * T + ty, bx_ * T + tx
                total += np.count_nonzero((row < m) & (k0 + tx < k))  # a_tile[ty][tx] from A
                total += np.count_nonzero((k0 + ty < k) & (col < n))  # b_tile[ty][tx] from B
    return total


for (m, n, k) in [(M, N, K), (33, 65, 7), (100, 100, 100)]:
    for T in (8, 16, 32):
        assert count_loads(m, n, k, T) == reads_tiled(m, n, k, T)
print("the formula matches the block-by-block count")

# %%
sizes = np.array([64, 128, 256, 512, 1024, 2048, 4096])
tiles = [8, 16, 32]
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.6))
ax0.plot(sizes, [reads_naive(n, n, n) for n in sizes], "o-", color="black", label="naive")
for T, colour in zip(tiles, ("#9ecae1", "#4292c6", "#08519c")):
    ax0.plot(sizes, [reads_tiled(n, n, n, T) for n in sizes], "s-", color=colour, label=f"tiled, T = {T}")
ax0.set_xscale("log", base=2)
ax0.set_yscale("log")
ax0.set_xlabel("n  (n x n @ n x n)")
ax0.set_ylabel("elements read from global memory")
ax0.set_title("global-memory reads")
ax0.grid(alpha=0.3, which="both")
ax0.legend()

n = 1024
labels = ["naive"] + [f"T = {T}" for T in tiles]
counts = [reads_naive(n, n, n)] + [reads_tiled(n, n, n, T) for T in tiles]
mib = [4 * c / 2**20 for c in counts]  # float32
bars = ax1.bar(labels, mib, color=["black", "#9ecae1", "#4292c6", "#08519c"])
for bar, value, count in zip(bars, mib, counts):
    ax1.text(bar.get_x() + bar.get_width() / 2, value, f"{value:,.0f} MiB\n({counts[0] / count:.0f}x fewer)"
             if count != counts[0] else f"{value:,.0f} MiB", ha="center", va="bottom", fontsize=9)
ax1.set_ylabel("MiB read (float32)")
ax1.set_ylim(0, max(mib) * 1.25)
ax1.set_title(f"n = {n}: bytes requested from global memory")
fig.tight_layout()
plt.show()

# %% [markdown]
# The library's kernel uses T = `kTile` = 32, the largest square tile with
# one output per thread: a block has `T * T` threads, and CUDA allows at most
# 1024. The two tiles take `2 * T * T * 4` bytes of shared memory
# (8 KiB in float32, 16 KiB in float64). Going further means giving each
# thread several outputs (register blocking), the next rungs of the ladder
# (see `docs/kernels.md` and `docs/performance.md`).
#
# These are counts of load requests. On a GPU the L1 and L2 caches absorb
# part of the naive kernel's repeated reads, so its real memory traffic is
# lower than the count, but every request still costs an instruction and
# cache bandwidth. What the tiles buy is measured below.
#
# ## Measured times
# Both kernels through the library, `mt.kernels.matmul(a, b, algo="naive")`
# and `algo="tiled"`: the median of several runs after a warm-up, with
# `mt.synchronize()` so that a GPU has finished before the clock stops.

# %%
def median_time(fn, repeats):
    fn()  # warm-up
    mt.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        mt.synchronize()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


backend = mt.backend()
if backend == "cuda":
    bench_sizes, repeats = [256, 512, 1024, 2048, 4096], 5
else:
    bench_sizes, repeats = [32, 64, 96, 128, 192, 256], 3
results = {"naive": [], "tiled": []} if out_tiled is not None else {"naive": []}  # tiled once it runs
for n in bench_sizes:
    a, b = mt.randn(n, n), mt.randn(n, n)
    for algo in results:
        results[algo].append(median_time(lambda: mt.kernels.matmul(a, b, algo=algo), repeats))
for i, n in enumerate(bench_sizes):
    print(f"n = {n:5d}: " + "   ".join(f"{algo} {1e3 * t[i]:9.3f} ms" for algo, t in results.items()))

# %%
fig, ax = plt.subplots(figsize=(8.5, 4.4))
for algo, colour in (("naive", "black"), ("tiled", "#08519c"))[:len(results)]:
    ms = 1e3 * np.array(results[algo])
    if backend == "cuda":
        gflops = 2 * np.array(bench_sizes, dtype=float) ** 3 / np.array(results[algo]) / 1e9
        ax.plot(bench_sizes, gflops, "o-", color=colour, label=algo)
    else:
        ax.plot(bench_sizes, ms, "o-", color=colour, label=algo)
ax.set_xscale("log", base=2)
ax.set_xticks(bench_sizes, [str(n) for n in bench_sizes])
ax.set_xlabel("n  (float32, n x n @ n x n)")
if backend == "cuda":
    ax.set_ylabel("GFLOP/s (2 n^3 / time)")
    ax.set_title(f"GPU: {mt.device_info().split(' (')[0]}")
else:
    ax.set_yscale("log")
    ax.set_ylabel("milliseconds (log scale)")
    ax.set_title("EMULATOR (CPU) times: they say nothing about GPU speed")
ax.grid(alpha=0.3, which="both")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# **On the emulator** the tiled kernel is the *slower* one, and that is
# expected: the emulator runs each CUDA thread as a coroutine on the CPU,
# has no memory hierarchy to save, and pays for every `__syncthreads()` (a
# switch through all 1024 threads of the block, twice per step along K).
# Emulator times measure the emulator (see `docs/emulator.md`).
#
# **On a GPU** (run this notebook where `mt.backend() == "cuda"`), the same
# cell plots GFLOP/s, and the tiled kernel is the faster one on large
# matrices: its threads find 31 of every 32 operands in shared memory. On an
# NVIDIA H100 this notebook measured, at n = 4096, 2.7 TFLOP/s for the naive
# kernel and 8.5 TFLOP/s for the tiled one (at n = 1024: 4.6 and 7.4). cuBLAS
# reaches about 50 TFLOP/s on the same GPU: the rest of the ladder
# (`docs/kernels.md`) closes that gap by giving each thread several outputs.

# %% [markdown]
# ## Where the ladder ends: tensor cores fed by a copy engine
#
# With TF32 allowed (`mt.backends.cuda.matmul.allow_tf32 = True`), products
# run on tensor cores. The TF32 ladder (`docs/kernels.md`) climbs the same
# way as the float one, and its last rung, `"tf32_tma"`
# (`src/matmul_tf32_tma.cu`), is the shape of cuBLAS's own Hopper kernel.
# Two ideas carry it:
#
# 1. **A copy engine.** TMA copies a whole 32 x 128 box of a matrix into
#    shared memory on one instruction of one thread, already in the layout
#    the tensor cores read, zeros past the matrix's edge. The warps that
#    multiply issue no load at all.
# 2. **Barriers that count, in place of `__syncthreads()`.** One producer
#    warpgroup fills a ring of stages; two consumer warpgroups multiply.
#    Each stage has two *mbarriers* in shared memory: `full` completes when
#    the stage's bytes have landed, `empty` when every consumer is done with
#    it. A barrier completes *phases* 0, 1, 2, ..., and a thread waits for
#    the phase of a *parity* (0 or 1). Nobody meets anybody else at a block
#    barrier in the main loop.
#
# The bookkeeping is the part a kernel gets wrong, so here it is in plain
# Python: which stage a K step uses and which parity each side waits for.
# A fresh barrier is in phase 0, and a wait for parity 1 returns at once
# (the phase "before" counts as complete): that is how the producer's first
# pass over the empty ring goes through.

# %%
stages = 4
print("step  stage  producer waits empty[stage] for parity  consumers wait full[stage] for parity")
for step in range(10):
    s, lap = step % stages, step // stages
    print(f"{step:4d}  {s:5d}  {(lap & 1) ^ 1:38d}  {lap & 1:37d}")

# %% [markdown]
# On its first lap (steps 0-3) the producer waits for parity 1 on fresh
# barriers and fills all four stages at once. From step 4 on it waits for
# the consumers' first release of the stage (parity 0), then for the second
# (parity 1), and so on; the consumers' waits are the same sequence shifted
# by one lap. The emulator keeps each barrier's arrivals, bytes and phases,
# lands a copy only when someone waits on its barrier, and fills its box with
# NaN until then, so a kernel that reads a stage too early, or hands it back
# before its products ran, gets NaN here instead of a right answer by luck.
# The rung runs on the emulator like any other (its error bound is TF32's:
# the tensor cores drop each operand's low 13 mantissa bits):

# %%
rng = np.random.default_rng(0)
a_np = rng.standard_normal((96, 200)).astype(np.float32)
w_np = rng.standard_normal((130, 200)).astype(np.float32)
exact = a_np.astype(np.float64) @ w_np.T.astype(np.float64)
terms = np.abs(a_np).astype(np.float64) @ np.abs(w_np.T).astype(np.float64)
try:
    got = mt.kernels.matmul(mt.tensor(a_np), mt.tensor(w_np).t(), algo="tf32_tma").numpy()
    print(f"max |error| / sum |terms| = {np.max(np.abs(got - exact) / terms):.2e}  (bound 2^-9 = {2.0 ** -9:.2e})")
except mt.MinitensorError as error:  # a GPU other than an H100/H200 has no TMA
    print(error)

# %% [markdown]
# Measured on an H200 at 4096^3 (`bench/tf32_gpt_shapes.py`, `x @ W.T`,
# docs/performance.md): the wgmma rung that loads its own stages with
# `cp.async` and meets at a block barrier every K step takes 0.631 ms; the
# TMA rung 0.378 ms (363 TFLOP/s), against cuBLAS's 0.360-0.369 ms. The
# multiply instructions are the same in both; what changed is who waits for
# whom.
