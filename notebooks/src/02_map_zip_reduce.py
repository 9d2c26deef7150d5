# %% [markdown]
# # 2. Map, zip and reduce: which thread does what
#
# The elementwise kernels (`src/map.cu`, `src/zip.cu`) give each output
# element to one CUDA thread. The reductions (`src/reduce.cu`) give each
# output element to one *block*, whose threads first add up slices of the
# input and then combine their partial results in a shared-memory tree.
# This notebook draws both, from the kernels' own launch geometry and loops,
# on the library's real inputs and results.

# %%
# Make the repository's minitensor importable when the notebook runs from notebooks/.
import re
import sys
from pathlib import Path

repo = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "minitensor" / "__init__.py").is_file())
sys.path.insert(0, str(repo))

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

import minitensor as mt

plt.rcParams.update({"figure.dpi": 100, "font.size": 10})
mt.manual_seed(0)
print("backend:", mt.backend())

# %% [markdown]
# ## The launch of an elementwise kernel
# `launch_map` in `src/map.cu` launches `grid_size(n, kBlockSize)` blocks of
# `kBlockSize` threads, both defined in `src/launch.h`. The cell below
# reads the two constants from that file, so this notebook follows the
# source if they change, and transcribes `grid_size`:

# %%
launch_h = (repo / "src" / "launch.h").read_text()
kBlockSize = int(re.search(r"constexpr int kBlockSize = (\d+);", launch_h).group(1))
kMaxGridBlocks = int(re.search(r"constexpr int64_t kMaxGridBlocks = (\d+);", launch_h).group(1))
print(f"kBlockSize = {kBlockSize}, kMaxGridBlocks = {kMaxGridBlocks}")


def grid_size(n, block, max_blocks=kMaxGridBlocks):
    """src/launch.h grid_size: blocks for n items, at least 1, at most max_blocks."""
    blocks = (n + block - 1) // block
    return min(max(blocks, 1), max_blocks)


# %% [markdown]
# Every map and zip kernel walks its elements with the same **grid-stride
# loop** (here `map_contiguous` in `src/map.cu`):
#
# ```c
# const int64_t step = (int64_t)gridDim.x * blockDim.x;
# for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
#     out[i] = (TOut)op(in[i]);
# ```
#
# So thread `threadIdx.x` of block `blockIdx.x` handles the ordinals
# `g, g + step, g + 2*step, ...` with `g = blockIdx.x * blockDim.x + threadIdx.x`.
# Inverting that: element `i` is handled by global thread `i % step`, in
# iteration `i // step` of its loop. `who_computes` applies exactly this to
# every element of an output. (For a contiguous tensor whose data is 16-byte
# aligned, as a fresh one is, `mt_map` actually launches `map_contiguous_vec`:
# one `Pack` of 4 floats a thread and no loop, so each thread moves 16 bytes
# and the grid, of 128-thread blocks, is sized for `n / 4` packs. The loop
# below is the one of `map_contiguous`, which runs for views that lie at
# different distances from a 16-byte boundary, and for casts.)

# %%
def who_computes(n, block=kBlockSize, max_blocks=kMaxGridBlocks):
    """(block, thread, loop iteration) of each ordinal 0..n-1, from the kernel's loop."""
    grid = grid_size(n, block, max_blocks)
    step = grid * block
    i = np.arange(n)
    g = i % step
    return g // block, g % block, i // step, grid


x = mt.randn(30, 40)
y = x.relu()  # contiguous and aligned: map_contiguous_vec runs; below, map_contiguous's geometry
blk, thr, it, grid = who_computes(y.numel())
print(f"y = x.relu() through map_contiguous: {y.numel()} elements, grid = {grid} blocks x {kBlockSize} threads = "
      f"{grid * kBlockSize} threads; {grid * kBlockSize - y.numel()} threads of the last block find no element")
print("the largest loop iteration:", it.max(), "(each thread handles at most one element)")
assert np.array_equal(y.numpy(), np.maximum(x.numpy(), 0))

# %%
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.4))
block_colours = plt.get_cmap("tab10")
rgb = block_colours(blk.reshape(y.shape) % 10)
ax0.imshow(rgb, interpolation="nearest")
for b in range(grid):
    rows, cols = np.nonzero(blk.reshape(y.shape) == b)
    ax0.text(cols.mean(), rows.mean(), f"block {b}", ha="center", va="center", fontsize=11,
             bbox=dict(facecolor="white", alpha=0.85, edgecolor="none"))
ax0.set_title(f"blockIdx.x of the thread that computes y[r, c]\n(map_contiguous, y = x.relu(), shape {y.shape})")
ax0.set_xlabel("column c")
ax0.set_ylabel("row r")
im = ax1.imshow(thr.reshape(y.shape), cmap="viridis", interpolation="nearest")
ax1.set_title(f"threadIdx.x (0..{kBlockSize - 1}) within its block")
ax1.set_xlabel("column c")
ax1.set_ylabel("row r")
fig.colorbar(im, ax=ax1, label="threadIdx.x", shrink=0.9)
fig.tight_layout()
plt.show()

# %% [markdown]
# Threads take elements in row-major order, 256 consecutive elements per
# block. With the library's cap of 65535 blocks, the loop only comes round a
# second time for tensors of more than `65535 * 256` elements:

# %%
print(f"one element per thread up to n = {kMaxGridBlocks * kBlockSize:,}")
for n in (1_000, 1_000_000, 100_000_000):
    blocks = grid_size(n, kBlockSize)
    per_thread = -(-n // (blocks * kBlockSize))  # ceil: iterations of the loop
    print(f"n = {n:>11,}: {blocks:>6} blocks, up to {per_thread} element(s) per thread")

# %% [markdown]
# To *see* the grid-stride loop, here is the same formula for a toy launch,
# small enough to draw: blocks of 8 threads, the grid capped at 3 blocks,
# 60 elements. (The library's own launch uses the constants above; only the
# two numbers differ.) `step = 3 * 8 = 24`, so thread 5 of block 0 computes
# elements 5, 29 and 53.

# %%
toy_shape = (6, 10)
tb, tt, ti, tgrid = who_computes(60, block=8, max_blocks=3)
fig, ax = plt.subplots(figsize=(11, 4.2))
ax.imshow(block_colours(tb.reshape(toy_shape)), interpolation="nearest", alpha=0.45)
for i in range(60):
    r, c = divmod(i, toy_shape[1])
    ax.text(c, r - 0.15, f"b{tb[i]} t{tt[i]}", ha="center", va="center", fontsize=9)
    ax.text(c, r + 0.22, f"iter {ti[i]}", ha="center", va="center", fontsize=8, color="#333333")
ax.set_xticks(range(toy_shape[1]))
ax.set_yticks(range(toy_shape[0]))
ax.set_xlabel("column")
ax.set_ylabel("row")
handles = [Rectangle((0, 0), 1, 1, facecolor=block_colours(b), alpha=0.45) for b in range(tgrid)]
ax.legend(handles, [f"block {b}" for b in range(tgrid)], loc="upper left", bbox_to_anchor=(1.01, 1))
ax.set_title("toy launch (8 threads per block, at most 3 blocks): block b, thread t, loop iteration of each element")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## What a warp reads: contiguous versus transposed input
# The 32 threads of a warp run one load instruction together. When they read
# 32 neighbouring floats, the GPU serves the warp with one 128-byte
# transaction; when their addresses are far apart, with up to 32. For a
# contiguous input, `map_contiguous` reads element `i` at position `i` (and
# `map_contiguous_vec` positions `4i .. 4i + 3` with one 16-byte load). For a
# transposed input, `map_strided` reads position `ordinal_to_position(i, &in)`
# (`src/indexing.h`). Below are the positions read by the first warp of
# `x.exp()` and of `x.T.exp()`, with the number of distinct 128-byte segments
# they touch. (A simple model of the memory system, enough to see why
# `docs/performance.md` has a separate line for a transposed operand.)

# %%
def positions(t):
    """Storage position of each element of t, row-major: offset + sum(i_k * stride_k)."""
    index = np.indices(t.shape).reshape(t.ndim, -1).T
    return t.storage_offset() + index @ np.array(t.strides, dtype=np.int64)


warp = np.arange(32)
xt = x.T  # a view: shape (40, 30), strides (1, 40)
pos_contig = positions(x)[warp]
pos_trans = positions(xt)[warp]
# The positions are the library's: reading storage there gives the view's values.
assert np.array_equal(x.numpy().ravel()[pos_trans], xt.numpy().ravel()[warp])
segments = lambda pos: len(set((pos * 4) // 128))  # float32: 4 bytes

fig, ax = plt.subplots(figsize=(9, 3.8))
ax.plot(warp, pos_contig, "o-", label=f"x.exp(): contiguous, {segments(pos_contig)} segment(s)")
ax.plot(warp, pos_trans, "s-", label=f"x.T.exp(): strides {xt.strides}, {segments(pos_trans)} segments")
ax.set_xlabel("threadIdx.x in warp 0 of block 0")
ax.set_ylabel("storage position read")
ax.set_title("positions of the input read by the first warp")
ax.legend(loc="upper left")
ax.grid(alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Zip: the same geometry, several paths
# `launch_zip` in `src/zip.cu` uses the same launch and loop, and picks a
# kernel by the operands' layouts (the output is always a new, contiguous
# tensor here):
#
# * `a` and `b` contiguous **and** of the output's shape: `zip_contiguous`
#   (element `i` of each tensor at `i`), or `zip_contiguous_vec` (16-byte
#   `Pack`s) when all three are 16-byte aligned;
# * one operand of the output's shape and contiguous, the other a contiguous
#   block of the output's trailing dims repeated over the leading ones (a
#   broadcast row, `A + row`): `zip_row_broadcast`, which reads the repeated
#   operand at `i % its size`;
# * both of the output's shape, one a transposed view (`A + B.T`) and the
#   other with contiguous rows: `zip_transposed`, which stages 32 x 33 tiles
#   of the transposed operand in shared memory;
# * anything else goes to `zip_strided`, which maps each output index into
#   each input with `broadcast_index` (drawn in notebook 1).
#
# The rule, transcribed (allocations are 256-byte aligned, so a view is
# aligned when its storage offset is a multiple of 16 bytes):

# %%
def zip_path(a, b):
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    aligned = lambda t: t.storage_offset() * t.numpy().itemsize % 16 == 0

    def repeats_trailing_block(v):
        shape = tuple(v.shape)
        while shape and shape[0] == 1:
            shape = shape[1:]
        return v.is_contiguous() and len(shape) <= len(out_shape) and \
            shape == tuple(out_shape[len(out_shape) - len(shape):])

    def transposed(t):
        return t.ndim >= 2 and t.shape[-2] > 1 and t.shape[-1] > 1 and t.strides[-2] == 1 and t.strides[-1] != 1

    rows_contiguous = lambda t: t.ndim >= 2 and (t.strides[-1] == 1 or t.shape[-1] == 1)
    a_full, b_full = tuple(a.shape) == out_shape, tuple(b.shape) == out_shape
    a_dense, b_dense = a_full and a.is_contiguous(), b_full and b.is_contiguous()
    if a_dense and b_dense:
        return "zip_contiguous_vec" if aligned(a) and aligned(b) else "zip_contiguous"
    if (a_dense and repeats_trailing_block(b)) or (b_dense and repeats_trailing_block(a)):
        return "zip_row_broadcast"
    if a_full and b_full and ((transposed(b) and rows_contiguous(a)) or (transposed(a) and rows_contiguous(b))):
        return "zip_transposed"
    return "zip_strided"


m, v = mt.randn(30, 40), mt.randn(41)
cases = {"m + m": (m, m), "m + m[0]  (broadcast row)": (m, m[0]),
         "m + x.T.T  (a view, still contiguous)": (m, x.T.T), "v[1:] + v[:-1]  (unaligned: offset 1)": (v[1:], v[:-1]),
         "m + mt.randn(40, 30).T": (m, mt.randn(40, 30).T), "m + m[:, :1]  (broadcast column)": (m, m[:, :1]),
         "m[:, ::2] + m[:, 1::2]": (m[:, ::2], m[:, 1::2])}
for name, (a, b) in cases.items():
    assert np.allclose((a + b).numpy(), a.numpy() + b.numpy())
    print(f"{name:40s} -> {zip_path(a, b)}")

# %% [markdown]
# ## Reduce: one block per output, then a tree in shared memory
# `x.sum(dim=0)` of a 1-D tensor calls `mt_reduce`, which launches
# `reduce_rows_warp` (`src/reduce_ladder.cu`, the `warp_shuffle` rung of the
# reduction ladder, see `docs/kernels.md`) with one block per output element
# and `row_block_size(len)` threads: the smallest power of two that covers
# the row, at least 32, at most `kBlockSize`. The block then works in two
# phases:
#
# 1. thread `t` accumulates the elements `t, t + B, t + 2B, ...` of the row
#    in that order (`B` = threads in the block), starting from the identity
#    (0 for a sum); the kernel issues eight loads at a time before adding
#    them, but adds them in order;
# 2. `block_reduce_last_warp` (`src/block_reduce.h`) writes each thread's
#    value into `scratch[t]`, then for `stride = B/2, B/4, ..., 1`: every
#    thread with `t < stride` does `scratch[t] = scratch[t] + scratch[t + stride]`,
#    with a `__syncthreads()` after each level down to stride 32; the last
#    five levels (stride 16 to 1, the 32 values left all in warp 0) are done
#    with warp shuffles, which add the same pairs. Thread 0's value is the
#    result, which it passes to every thread of the block.
#
# These are the additions, in the same order, of `block_reduce`, the plain
# shared-memory tree (the `sequential` and `first_add` rungs use it), so all
# of them give the same bits. `mirror_reduce_rows` repeats exactly these
# steps in NumPy, in float32 and in the same order, and keeps every level.
# The input is the real tensor handed to the kernel; the last level must
# equal the library's result.

# %%
def row_block_size(length):
    """src/launch.h row_block_size."""
    block = 32
    while block < kBlockSize and block < length:
        block *= 2
    return block


def mirror_reduce_rows(row):
    """Every level of reduce_rows_warp (= block_reduce's tree) for one row (a sum), in float32."""
    row = np.asarray(row, dtype=np.float32)
    B = row_block_size(len(row))
    acc = np.zeros(B, dtype=np.float32)          # each thread starts from the identity
    for k0 in range(0, len(row), B):             # phase 1: for (k = t; k < len; k += B)
        chunk = row[k0:k0 + B]
        acc[:len(chunk)] = acc[:len(chunk)] + chunk
    levels = [("after phase 1", B, acc.copy())]
    scratch = acc.copy()
    stride = B // 2
    while stride > 0:                            # phase 2: the tree
        scratch[:stride] = scratch[:stride] + scratch[stride:2 * stride]
        levels.append((f"stride {stride}", stride, scratch.copy()))
        stride //= 2
    return B, levels


rng = np.random.default_rng(0)
x = mt.tensor(rng.integers(0, 10, size=20))      # 20 small whole numbers: easy to read
s = x.sum(dim=0)                                 # mt_reduce -> reduce_rows_warp
B, levels = mirror_reduce_rows(x.numpy())
print(f"row of {x.numel()} elements -> {B} threads; levels: {len(levels)}")
print("mirror:", levels[-1][2][0], " library:", s.item())
assert levels[-1][2][0] == s.item()

# %%
def draw_tree(row, B, levels, title):
    n_rows = len(levels) + 1
    fig, ax = plt.subplots(figsize=(0.42 * B + 2.2, 0.85 * n_rows + 0.9))
    y_of = lambda level: 1.4 * (n_rows - 1 - level)

    def box(t, level, value, colour, bold=False):
        ax.add_patch(Rectangle((t, y_of(level)), 1, 0.8, facecolor=colour, edgecolor="black", lw=0.6))
        if value is not None:
            ax.text(t + 0.5, y_of(level) + 0.4, f"{value:g}", ha="center", va="center",
                    fontsize=8.5, fontweight="bold" if bold else "normal")

    for k, v in enumerate(row):                                 # the input row
        box(k, 0, v, "#dddddd")
    ax.text(-0.3, y_of(0) + 0.4, "input row", ha="right", va="center")
    for lv, (name, active, values) in enumerate(levels, start=1):
        for t in range(B):
            if lv == 1:
                colour = "#9ecae1" if t < len(row) else "#f0f0f0"   # identity where no element
                box(t, lv, values[t], colour)
            elif t < active:
                box(t, lv, values[t], "#fdae6b", bold=(active == 1))
                for src in (t, t + active):                     # what this level read
                    ax.plot([src + 0.5, t + 0.5], [y_of(lv - 1), y_of(lv) + 0.8], color="#888888", lw=0.6)
        ax.text(-0.3, y_of(lv) + 0.4, name, ha="right", va="center")
    for k in range(len(row)):
        ax.plot([k + 0.5, k + 0.5], [y_of(0), y_of(1) + 0.8], color="#888888", lw=0.6)
    ax.set_xlim(-5.5, B + 0.2)
    ax.set_ylim(-0.2, 1.4 * n_rows - 0.5)
    ax.axis("off")
    ax.set_title(title, loc="left")
    ax.legend(handles=[Rectangle((0, 0), 1, 1, fc="#9ecae1", ec="black"),
                       Rectangle((0, 0), 1, 1, fc="#f0f0f0", ec="black"),
                       Rectangle((0, 0), 1, 1, fc="#fdae6b", ec="black")],
              labels=["scratch[t] after phase 1", "thread without an element: identity 0",
                      "scratch[t] written at this level (t < stride)"],
              loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=3, frameon=False)
    fig.tight_layout()
    plt.show()


draw_tree(x.numpy(), B, levels,
          f"x.sum(dim=0) of {x.numel()} elements: one block of {B} threads; "
          f"scratch after each level (library's result: {s.item():g})")

# %% [markdown]
# Threads 20 to 31 have no element: they keep the identity and still take
# part in the tree, because every thread of the block must reach every
# `__syncthreads()`. Each level halves the active threads; after
# `log2(32) = 5` levels, slot 0 holds the sum. (With a block of one warp,
# `block_reduce_last_warp` does all five levels by warp shuffles, register
# to register; the drawing shows the values those shuffles combine, the
# same as `block_reduce`'s `scratch` after each level.)
#
# ### A long row: phase 1 matters
# A row of 1000 random floats gets the maximum of 256 threads, so each thread
# first adds up to four elements (`t, t + 256, t + 512, t + 768`), then the
# tree takes 8 levels. The float32 mirror does the same additions in the same
# order, so its result is **bitwise equal** to the kernel's, not just close.

# %%
long_row = mt.randn(1000)
s_long = long_row.sum(dim=0)
B, levels = mirror_reduce_rows(long_row.numpy())
print(f"row of 1000 -> {B} threads; mirror {levels[-1][2][0]:.9g}, library {s_long.item():.9g}")
assert levels[-1][2][0] == np.float32(s_long.item())

values = long_row.numpy()
grid_in = np.full((4, B), np.nan, dtype=np.float32)        # [iteration, thread]
grid_in.ravel()[:values.size] = values
fig, axes = plt.subplots(1, 2, figsize=(14, 4.2), gridspec_kw={"width_ratios": [3, 2]})
cmap = plt.get_cmap("coolwarm").copy()
cmap.set_bad("#404040")
lim = np.nanmax(np.abs(grid_in))
im = axes[0].imshow(grid_in, aspect="auto", cmap=cmap, vmin=-lim, vmax=lim, interpolation="nearest")
axes[0].set_yticks(range(4), [f"k = t + {256 * r}" for r in range(4)])
axes[0].set_xlabel("thread t")
axes[0].set_title("phase 1: thread t adds elements k = t, t+256, ... of the row\n(dark grey: no element left)")
fig.colorbar(im, ax=axes[0], label="element value", pad=0.01)
jitter = np.random.default_rng(1)
for lv, (name, active, vals) in enumerate(levels):
    axes[1].scatter(lv + jitter.uniform(-0.25, 0.25, active), vals[:active], s=9, alpha=0.7)
axes[1].set_xticks(range(len(levels)), ["after\nphase 1"] + [f"s={active}" for _, active, _ in levels[1:]],
                   fontsize=8)
axes[1].set_xlabel("level (s: stride = number of active threads)")
final = levels[-1][2][0]
axes[1].scatter([len(levels) - 1], [final], marker="*", s=180, color="black", zorder=3)
axes[1].annotate(f"scratch[0] = {final:.4f}\n= the library's sum", xy=(len(levels) - 1, final),
                 xytext=(-110, 60), textcoords="offset points", va="center",
                 arrowprops=dict(arrowstyle="->"))
axes[1].axhline(0, color="black", lw=0.6)
axes[1].set_ylabel("value of scratch[t]")
axes[1].set_title("phase 2: the values in the active slots after each level")
axes[1].grid(alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Every rung of the ladder on the same row
# `mt.kernels.reduce` runs the rung of the reduction ladder you name
# (`mt.kernels.algorithms("reduce")`; `docs/kernels.md` explains and times
# each one). `first_add` and `warp_shuffle` (the default for rows, unless
# there are tens of thousands of short ones) do the mirror's additions in
# the mirror's order, so they give its bits. `interleaved` and `sequential`
# build one whole tree per block-sized chunk of the row and add up the
# chunks, `vectorized` adds four neighbouring elements at a time, and
# `warp_rows` gives each row one warp: the same sum, rounded in another
# order, so their last bits may differ. On one row they often agree by chance; over 50 rows of
# 1000 the difference shows.

# %%
mirror_sum = levels[-1][2][0]
rows = mt.randn(50, 1000)
default_sums = rows.sum(dim=1).numpy()
print("rungs:", mt.kernels.algorithms("reduce"))
for algo in mt.kernels.algorithms("reduce"):
    got = np.float32(mt.kernels.reduce(long_row, "sum", dim=0, algo=algo).item())
    same = "bitwise equal to the mirror" if got == mirror_sum else f"differs by {got - mirror_sum:+.2g}"
    sums = mt.kernels.reduce(rows, "sum", dim=1, algo=algo).numpy()
    print(f"{algo:13s} long_row: {got:.9g} ({same}); 50 rows: {np.sum(sums == default_sums):2d} bitwise "
          f"equal to the default")
    assert abs(got - mirror_sum) <= 1e-5 * np.abs(values).sum()
    assert np.allclose(sums, default_sums, rtol=1e-5, atol=1e-4)

# %% [markdown]
# ### Summing everything: two passes
# `x.sum()` with no dim calls `mt_reduce_all`, which cannot use one block per
# output (there is one output): one block alone would leave all but one of
# the GPU's multiprocessors idle. Pass 1 (`reduce_all_partials`) runs
# `min(ceil(n / 256), kMaxPartials)` blocks of 256 threads; each thread walks
# a grid-strided share of the elements and each block writes one partial
# through `block_reduce_last_warp` (the tree of `block_reduce`, its last
# five levels by warp shuffles: the same additions). Pass 2
# (`reduce_all_finish`) runs one block that reduces the partials the same
# way. Mirrored, and compared bitwise:

# %%
kMaxPartials = int(re.search(r"constexpr int64_t kMaxPartials = (\d+);",
                             (repo / "src" / "reduce.cu").read_text()).group(1))


def block_reduce(values):
    """src/block_reduce.h block_reduce (= block_reduce_last_warp) over one block's per-thread values (a sum)."""
    scratch = values.astype(np.float32)
    stride = len(scratch) // 2
    while stride > 0:
        scratch[:stride] = scratch[:stride] + scratch[stride:2 * stride]
        stride //= 2
    return scratch[0]


def mirror_reduce_all(values):
    values = np.asarray(values, dtype=np.float32).ravel()
    n = values.size
    blocks = min((n + kBlockSize - 1) // kBlockSize, kMaxPartials)
    step = blocks * kBlockSize
    acc = np.zeros(step, dtype=np.float32)        # one accumulator per thread of the grid
    for i0 in range(0, n, step):                  # for (i = global thread id; i < n; i += step)
        chunk = values[i0:i0 + step]
        acc[:chunk.size] = acc[:chunk.size] + chunk
    partials = np.array([block_reduce(acc[b * kBlockSize:(b + 1) * kBlockSize]) for b in range(blocks)])
    finish = np.zeros(kBlockSize, dtype=np.float32)
    for k0 in range(0, blocks, kBlockSize):       # pass 2: for (k = t; k < count; k += blockDim.x)
        chunk = partials[k0:k0 + kBlockSize]
        finish[:chunk.size] = finish[:chunk.size] + chunk
    return partials, block_reduce(finish)


z = mt.randn(3000)
partials, total = mirror_reduce_all(z.numpy())
print(f"{z.numel()} elements -> pass 1: {partials.size} blocks; mirror {total:.9g}, library {z.sum().item():.9g}")
assert total == np.float32(z.sum().item())

fig, ax = plt.subplots(figsize=(8, 3.2))
ax.bar(range(partials.size), partials, color="#6baed6", edgecolor="black")
ax.axhline(0, color="black", lw=0.8)
ax.set_xlabel("block of pass 1")
ax.set_ylabel("partial sum")
ax.set_title(f"pass 1 writes {partials.size} partials; pass 2 (one block) adds them: {total:.4f}")
ax.set_xticks(range(partials.size))
fig.tight_layout()
plt.show()

# %% [markdown]
# The same tree serves max, min, prod, argmax and argmin (only the identity
# and the combine differ; see the reducers in `src/reduce.h`). The fused
# softmax (`src/softmax.cu`) reduces twice per row, once for the row's
# maximum and once for the sum of the exponentials: for a contiguous row of
# up to 32768 floats, `softmax_rows_registers` keeps the row in registers and
# reduces with warp shuffles (`block_reduce_warps`); any other row goes to
# `softmax_rows`, which uses `block_reduce`.
#
# The tree order is also why a GPU sum is not bit-for-bit the sum NumPy or a
# sequential loop computes: floating-point addition is not associative, and
# each order rounds differently. The tests compare with a tolerance that
# grows with the length of the reduction (`tests/helpers.py`).
