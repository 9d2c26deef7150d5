# %% [markdown]
# # 7. Attention, tile by tile: the online softmax
#
# Attention turns queries, keys and values into `softmax(q k^T / sqrt(d)) v`.
# The naive rung computes it one op at a time and writes the L x S matrix
# of scores to memory between them; the fused rung (`src/masked_softmax.cu`,
# what `F.scaled_dot_product_attention` runs) does the scale, the mask and
# the softmax in one kernel, but still writes the scores. The flash rung (`src/attention.cu`,
# `mt.kernels.attention(q, k, v, "flash")`) reads the keys in tiles and never
# stores a score. What makes that possible is the *online softmax*: a
# softmax computed in one pass, with a running maximum and a running sum.
# This notebook draws the scores, replays the online softmax tile by tile,
# shows which tiles a causal block can skip, draws how the warp rung
# (`src/attention_warp.cu`) shares a block's scores among its threads, and how
# the tiled rung (`src/attention_tiled.cu`) stages K and V and masks only
# the tiles that need it.

# %%
# Make the repository's minitensor importable when the notebook runs from notebooks/.
import math
import sys
from pathlib import Path

repo = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "minitensor" / "__init__.py").is_file())
sys.path.insert(0, str(repo))

import matplotlib.pyplot as plt
import numpy as np

import minitensor as mt

plt.rcParams.update({"figure.dpi": 100, "font.size": 10})
print("backend:", mt.backend())

# %% [markdown]
# ## The naive rung: scores, mask, weights
# Eight queries and eight keys of dimension 4. With the causal mask, query i
# may only look at keys 0..i: the masked scores become -inf, whose weight
# exp(-inf) is 0.

# %%
rng = np.random.default_rng(0)
L, D = 8, 4
q, k, v = (rng.standard_normal((1, L, D)).astype(np.float32) for _ in range(3))
tq, tk, tv = mt.tensor(q), mt.tensor(k), mt.tensor(v)
scores = (tq @ tk.transpose(-2, -1)) / math.sqrt(D)
causal = mt.tensor(np.tril(np.ones((L, L), dtype=bool)))
weights = scores.masked_fill(~causal, float("-inf")).softmax(-1)
fig, axes = plt.subplots(1, 3, figsize=(10, 3.2))
for ax, data, title in zip(axes, (scores[0].numpy(), causal.numpy(), weights[0].numpy()),
                           ("scores q k^T / sqrt(d)", "causal mask (True: allowed)", "weights: masked softmax")):
    ax.imshow(data, cmap="viridis")
    ax.set_title(title)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The online softmax
# A softmax needs the row's maximum (so that exp never overflows) before it
# can sum. Reading the keys in tiles, we only know the maximum *so far*, m.
# Keep it, and the sum l of exp(score - m) so far, and the output o
# accumulated with those weights. When a new tile brings a larger maximum
# m', everything summed so far was scaled by exp(-m) where it should have
# been exp(-m'): multiply l and o by exp(m - m') and go on. After the last
# tile, o / l is the exact result. Below, query 7 (which sees every key) with
# tiles of 2 keys: the running maximum only rises, and each rise rescales
# the sum.

# %%
def online_softmax_row(s, values, tile):
    m, l, o = -np.inf, 0.0, np.zeros(values.shape[1])
    history = []
    for start in range(0, len(s), tile):
        block = s[start:start + tile]
        m_new = max(m, block.max())
        rescale = np.exp(m - m_new)          # 0 on the first tile (m = -inf)
        p = np.exp(block - m_new)
        l = l * rescale + p.sum()
        o = o * rescale + p @ values[start:start + tile]
        m = m_new
        history.append((start + tile, m, l))
    return o / l, history


row = scores[0, 7].numpy().astype(np.float64)
out, history = online_softmax_row(row, v[0].astype(np.float64), tile=2)
exact = weights[0, 7].numpy() @ v[0]
print("online softmax, tile by tile:", np.round(out, 5))
print("softmax, then the product:   ", np.round(exact, 5))
seen, ms, ls = zip(*history)
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(seen, ms, "o-", label="running max m")
ax.plot(seen, ls, "o-", label="running sum l")
ax.set_xlabel("keys read")
ax.legend()
plt.show()

# %% [markdown]
# ## The kernel does the same, 64 queries at a time
# In `src/attention.cu` a block holds 64 queries (one thread each, the
# query row and its output in registers) and reads the keys 32 at a time:
# the whole block copies a tile of K and V into shared memory, waits at a
# barrier, then each thread scores its query against the tile and updates
# its m, l and output as above. With the causal mask, the block of queries
# 0..63 needs no key past 63: the tiles above the diagonal are never read.
# Below, for 256 queries and keys: which (query block, key tile) pairs the
# kernel visits.

# %%
blocks, tiles = 256 // 64, 256 // 32
visits = np.array([[tile * 32 < (block + 1) * 64 for tile in range(tiles)] for block in range(blocks)])
plt.figure(figsize=(6, 3))
plt.imshow(visits, cmap="Greens", vmin=0, vmax=1.5)
plt.xlabel("key tile (32 keys)")
plt.ylabel("query block (64 queries)")
plt.title(f"causal: {visits.sum()} of {visits.size} tiles read")
plt.show()

# %% [markdown]
# The three rungs give the same numbers; the flash rung writes no score,
# which is the point when L and S are long. On the H100 its forward, with
# the head dim known at compile time, comes close to torch's fused kernel
# at length 1024 and 2048 (and beats it with the causal mask); its
# backward, one thread per key row, is slower than the fused-softmax
# rung's: docs/performance.md has all three against torch.

# %%
big = [mt.tensor(rng.standard_normal((4, 300, 32)).astype(np.float32)) for _ in range(3)]
naive = mt.kernels.attention(*big, "naive", causal=True)
fused = mt.kernels.attention(*big, "masked_softmax", causal=True)
flash = mt.kernels.attention(*big, "flash", causal=True)
print("largest difference, fused vs naive:", float((fused - naive).abs().max()))
print("largest difference, flash vs naive:", float((flash - naive).abs().max()))
print(f"scores the naive rung writes: {4 * 300 * 300 * 4 / 1e6:.2f} MB; the flash rung: 0")

# %% [markdown]
# ## The warp rung: a query row over 8 lanes
# In the flash rung each thread owns a query row and reads, per key, the D
# values of a K row from shared memory for D multiply-adds: one load per
# multiply-add, and a head dim of at most 64, or the row and its output no
# longer fit in a thread's registers. The warp rung (`src/attention_warp.cu`,
# `mt.kernels.attention(..., "warp")`, what `F.scaled_dot_product_attention`
# runs under the fast kernel policy for head dims 32 and 128, and for the
# backward at 64, when no mask tensor or dropout is asked for) treats each step as a small matrix
# product, as the matmul ladder's register-tiled rungs do. A block of 128
# threads, 16 x 8 of them as (ty, tx), takes 64 queries and tiles of BC keys
# (64, or 32 for a head dim of 128 or float64): thread (ty, tx) computes the
# scores S[ty + 16 i][tx + 8 j] for i < 4 and j < BC / 8, reading 4 values
# of a Q row and of a K row per 16-byte load, so that a load feeds 4 *
# BC / 8 multiply-adds instead of one.
#
# Which thread computes which score of the block's 64 x 64 tile (left), and
# which warp (right): thread (ty, tx) is lane 8 * (ty % 4) + tx of warp
# ty // 4, so the 8 threads of a query row are 8 consecutive lanes of one
# warp. The online softmax's row maximum and row sum then take 3 shuffles
# within the warp, and the warp that owns a row owns all of it: no barrier
# between warps for the softmax (FlashAttention-2's split: queries across
# warps, never keys). For P V, the weights P of a warp's own rows go
# through shared memory, and thread (ty, tx) accumulates the outputs
# O[ty + 16 i][4 tx + 32 g + 0..3]: the 8 lanes of a row read 8 consecutive
# 16-byte pieces of a V row.

# %%
QUERIES, KEYS = 64, 64  # a float32 block of head dim 32 or 64
owner = np.zeros((QUERIES, KEYS), dtype=int)
warp_of = np.zeros((QUERIES, KEYS), dtype=int)
for thread in range(128):
    lane = thread % 32
    ty, tx = thread // 32 * 4 + lane // 8, lane % 8  # as in the kernel
    for i in range(QUERIES // 16):
        for j in range(KEYS // 8):
            owner[ty + 16 * i, tx + 8 * j] = ty * 8 + tx
            warp_of[ty + 16 * i, tx + 8 * j] = thread // 32
mine = owner == 0
print(f"thread (0, 0) computes {mine.sum()} scores: rows {sorted({int(r) for r in np.nonzero(mine)[0]})}, "
      f"columns {sorted({int(c) for c in np.nonzero(mine)[1]})}")
print("the warps of query rows 0..19:", [int(w) for w in warp_of[:20, 0]])
fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
axes[0].imshow(np.zeros_like(owner), cmap="Greys", vmin=0, vmax=1)
for (ty, tx), color in (((0, 0), "black"), ((0, 1), "tab:red"), ((5, 3), "tab:blue")):
    rows, cols = np.nonzero(owner == ty * 8 + tx)
    axes[0].scatter(cols, rows, s=14, c=color, marker="s", label=f"thread (ty, tx) = ({ty}, {tx})")
axes[0].legend(loc="lower right", fontsize=8)
axes[0].set_title("scores S of one tile: three threads' scores")
axes[1].imshow(warp_of, cmap="Pastel1", vmin=0, vmax=8, interpolation="nearest")
axes[1].set_title("the warp of each score: whole rows per warp")
for ax in axes:
    ax.set_xlabel("key of the tile")
    ax.set_ylabel("query of the block")
plt.tight_layout()
plt.show()

# %% [markdown]
# The warp rung gives the flash rung's numbers, the causal mask included
# (head dims 32, 64 and 128 are compiled in; on the H200, causal at length
# 1024 and head dim 64, its forward runs at 0.82x the speed of torch's fused
# kernel: docs/performance.md):

# %%
for dim in (32, 64):
    q, k, v = (mt.tensor(rng.standard_normal((2, 150, dim)).astype(np.float32)) for _ in range(3))
    warp = mt.kernels.attention(q, k, v, "warp", causal=True)
    flash = mt.kernels.attention(q, k, v, "flash", causal=True)
    print(f"head dim {dim}: largest difference, warp vs flash:", float((warp - flash).abs().max()))

# %% [markdown]
# ## The tiled rung: one buffer each for K and V, masks only where needed
# The warp rung double-buffers K and V (two stages of each in shared memory,
# 105 KiB a block), so an H100 SM holds two of its blocks: two warps a
# scheduler, too few to hide the latency of a shared-memory load behind
# another warp's multiply-adds. The tiled rung (`src/attention_tiled.cu`,
# `mt.kernels.attention(..., "tiled")`) keeps the same register tiles but
# gives K and V one buffer each and staggers them, as FlashAttention does:
# V of tile t lands while the block computes S = Q K_t^T, and K of tile
# t + 1 lands while it computes O += P V_t. Each buffer is refilled as soon as
# the block is done reading it. With 70 KiB a block, three blocks share an SM.
#
# It also masks only the tiles that need it. For a causal block of queries
# q0 .. q0 + 63, a key tile wholly before q0 is seen by every query (no
# compare, no select on its scores), the tile across the diagonal is masked,
# and the tiles after the block's last query are never loaded:

# %%
LENGTH, BR, BC = 512, 64, 64
kind = np.zeros((LENGTH // BR, LENGTH // BC), dtype=int)  # 0 skipped, 1 masked, 2 plain
for b in range(LENGTH // BR):
    q0 = b * BR
    for t in range(LENGTH // BC):
        key0 = t * BC
        if key0 > q0 + BR - 1:
            kind[b, t] = 0  # after the block's last query: never loaded
        elif key0 + BC - 1 > q0:
            kind[b, t] = 1  # reaches past the first query: masked
        else:
            kind[b, t] = 2
print(f"causal, length {LENGTH}: {int((kind == 2).sum())} plain tiles, {int((kind == 1).sum())} masked, "
      f"{int((kind == 0).sum())} skipped")
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].imshow(kind, cmap="Greens", vmin=0, vmax=2)
axes[0].set_title("key tiles of each query block: white skipped, pale masked")
axes[0].set_xlabel("key tile")
axes[0].set_ylabel("query block")
steps = ["S = Q K_t^T", "softmax, P", "O += P V_t"]
loading = ["V_t", "K_t+1", "V_t+1"]
for t in range(3):
    for s, (step, load) in enumerate(zip(steps, loading)):
        x = 3 * t + s
        axes[1].barh(1, 1, left=x, color="tab:blue" if s != 1 else "tab:cyan", edgecolor="white")
        axes[1].text(x + 0.5, 1, step.replace("_t", f"_{t}"), ha="center", va="center", fontsize=6, color="white")
        axes[1].barh(0, 1, left=x, color="tab:orange", edgecolor="white")
        axes[1].text(x + 0.5, 0, load.replace("t+1", str(t + 1)).replace("_t", f"_{t}"), ha="center",
                     va="center", fontsize=7)
axes[1].set_yticks([0, 1], ["in flight (cp.async)", "computing"])
axes[1].set_xticks([])
axes[1].set_title("the staggered pipeline, three key tiles")
plt.tight_layout()
plt.show()

# %% [markdown]
# Its backward needs no atomics: a kernel per query tile computes dQ (and
# each row's D = rowsum(dO * O), which it leaves in memory), then a kernel
# per key tile computes dK and dV. Every gradient element is written once by
# one thread, so two runs give the same bits. Its numbers are the warp
# rung's, gradients included. On the H100 its forward is the faster at head
# dim 64 (0.95-1.04x torch at lengths 1024 and 2048) and its backward the
# slower (7 tile products against 5), so `F.scaled_dot_product_attention`
# pairs the tiled forward with the warp backward there (docs/performance.md):

# %%
for dim in (64, 128):
    tensors = [mt.tensor(rng.standard_normal((2, 150, dim)).astype(np.float32), requires_grad=True)
               for _ in range(3)]
    grad = mt.tensor(rng.standard_normal((2, 150, dim)).astype(np.float32))
    results = {}
    for rung in ("warp", "tiled"):
        for t in tensors:
            t.grad = None
        out = mt.kernels.attention(*tensors, rung, causal=True)
        out.backward(grad)
        results[rung] = [out.detach().numpy()] + [t.grad.numpy() for t in tensors]
    print(f"head dim {dim}: largest difference, tiled vs warp (out, dq, dk, dv):",
          [f"{np.abs(a - b).max():.1e}" for a, b in zip(results["tiled"], results["warp"])])

# %% [markdown]
# ## The mma rung: the tensor cores at float32's accuracy
# torch's float32 attention does not run on the CUDA cores: CUTLASS, under
# its memory-efficient kernel, multiplies float on tensor cores in "3xTF32"
# mode. A TF32 value keeps 10 of float32's 23 mantissa bits, so one TF32
# product is off by about 1e-3; but a float splits into a TF32 value and a
# TF32 remainder, x = big + small, and a product is then three TF32
# products, big_a big_b + big_a small_b + small_a big_b, leaving out only
# small_a small_b (about 2^-22 of the product) and the remainders' own
# rounding: a few 1e-7, float32's accuracy, on the tensor cores. The mma rung (`src/attention_mma.cu`,
# `mt.kernels.attention(..., "mma")`) does this with `mma.sync.m16n8k8`
# (`src/mma_tf32.h`). The split, in NumPy (TF32 as float32 with its low 13
# mantissa bits rounded away):

# %%
def tf32(x):
    """x rounded to TF32: nearest, ties away from zero (cvt.rna.tf32.f32)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


a, b = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
exact = a.astype(np.float64) * b
a_big, b_big = tf32(a), tf32(b)
a_small, b_small = tf32(a - a_big), tf32(b - b_big)
big = a_big.astype(np.float64)
products = {
    "float32": a * b,
    "1xTF32": big * b_big,
    "3xTF32": big * b_big + big * b_small + a_small.astype(np.float64) * b_big,
}
for name, got in products.items():
    print(f"{name:8s} 1000 products, largest relative error {np.max(np.abs(got - exact) / np.abs(exact)):.1e}")

# %% [markdown]
# Each warp takes 16 query rows. After `S = Q K^T` the scores lie in the mma
# accumulators, whose layout the PTX ISA fixes: lane (g, t) = (lane / 4,
# lane % 4) holds rows g and g + 8, columns 2t and 2t + 1 of each 8-key
# fragment. So a row belongs to the 4 lanes of one quad, and the online
# softmax's row maximum and row sum are the lane's own values and two
# shuffles. The weights P then feed `O += P V` from the same registers: an A
# fragment wants keys t and t + 4 where the lane holds 2t and 2t + 1, so the
# kernel sums the keys in the order 0, 2, 4, 6, 1, 3, 5, 7 and reads V's
# rows in that order. The lanes of one 16 x 8 fragment of scores:

# %%
lane_of = np.zeros((16, 8), dtype=int)
for lane in range(32):
    g, t = lane // 4, lane % 4
    for row in (g, g + 8):
        lane_of[row, 2 * t] = lane_of[row, 2 * t + 1] = lane
print("lanes holding row 3:", sorted(set(int(x) for x in lane_of[3])))
plt.figure(figsize=(4, 6))
plt.imshow(lane_of % 4, cmap="Pastel1", vmin=0, vmax=8)
for r in range(16):
    for c in range(8):
        plt.text(c, r, int(lane_of[r, c]), ha="center", va="center", fontsize=7)
plt.title("the lane of each score (colour: t)")
plt.xlabel("key")
plt.ylabel("query row")
plt.show()

# %% [markdown]
# Its error against float64 is float32's, as torch's is (bench/attention.py
# --accuracy prints both). Its backward (`src/attention_mma_backward.cu`) is
# the same split on the tensor cores: a kernel for dQ, then one for dK and dV
# with the keys as the rows of every product, recomputing the weights from the
# lse the forward saves. The forward's error, in float64 as above:

# %%
for dim in (64, 128):
    q, k, v = (mt.tensor(rng.standard_normal((2, 150, dim)).astype(np.float32)) for _ in range(3))
    got = mt.kernels.attention(q, k, v, "mma", causal=True).numpy()
    q64, k64, v64 = (t.numpy().astype(np.float64) for t in (q, k, v))
    s = q64 @ np.swapaxes(k64, 1, 2) / math.sqrt(dim)
    s = np.where(np.triu(np.ones((150, 150), bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = p / p.sum(-1, keepdims=True) @ v64
    error = np.abs(got - want).max() / np.abs(want).max()
    print(f"head dim {dim}: mma rung against float64, relative error {error:.1e}")
