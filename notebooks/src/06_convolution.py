# %% [markdown]
# # 6. Convolution as a matmul (im2col), and in tiles
#
# A 2-D convolution slides a small kernel over an image and, at each
# position, takes the dot product of the kernel with the window under it.
# Written as loops that is six nested loops; minitensor instead *copies every
# window into a column* of a matrix (im2col), after which the whole
# convolution is one matmul, the kernel this library spends most care on.
# This notebook draws the windows, shows that the copy is a single strided
# copy of a view, checks the matmul against the loops, draws the next rungs
# (a direct convolution that keeps tiles of the input in shared memory, and
# the implicit GEMM that runs im2col's matmul on tiles gathered from the
# image), and looks at what the backward pass must do where windows overlap.

# %%
# Make the repository's minitensor importable when the notebook runs from notebooks/.
import gzip
import sys
from pathlib import Path

repo = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "minitensor" / "__init__.py").is_file())
sys.path.insert(0, str(repo))

import matplotlib.pyplot as plt
import numpy as np

import minitensor as mt
import minitensor.nn.functional as F

plt.rcParams.update({"figure.dpi": 100, "font.size": 10})
print("backend:", mt.backend())

# %% [markdown]
# ## An image and a kernel
# One 8x8 handwritten digit from `data/digits.csv.gz`, as an (N, C, H, W) =
# (1, 1, 8, 8) tensor, and a 3x3 kernel that responds to vertical edges.

# %%
with gzip.open(repo / "data" / "digits.csv.gz", "rt") as f:
    row = np.array(f.readline().split(","), dtype=np.float32)
image = mt.tensor(row[:64].reshape(1, 1, 8, 8) / 16.0)
edge = mt.tensor([[[[1.0, 0.0, -1.0], [2.0, 0.0, -2.0], [1.0, 0.0, -1.0]]]])  # (C_out, C_in, 3, 3)
out = F.conv2d(image, edge, padding=1)
fig, axes = plt.subplots(1, 2, figsize=(6, 3))
axes[0].imshow(image[0, 0].numpy(), cmap="gray_r")
axes[0].set_title(f"digit {int(row[64])}")
axes[1].imshow(out[0, 0].numpy(), cmap="coolwarm")
axes[1].set_title("conv2d with a vertical-edge kernel")
for ax in axes:
    ax.axis("off")
plt.show()

# %% [markdown]
# ## The windows are a view
# With padding 1 the image becomes a 10x10 plane. Window (y, x) starts at
# row y and column x of it; tap (i, j) of that window is element
# (y + i, x + j). So the six-dimensional tensor of all windows,
# indexed [n, c, i, j, y, x], needs no new memory: it is a *view* of the padded
# plane whose strides step one row for i **and** for y, one column for j
# **and** for x. The windows overlap, so the view visits most elements
# several times; that is allowed for reading.

# %%
padded = mt.zeros(1, 1, 10, 10)
padded[:, :, 1:9, 1:9] = image
n, c, h, w = padded.stride()
print("strides of the padded plane:", padded.stride())
print("strides of the window view [n, c, i, j, y, x]:", (n, c, h, w, h, w))

# %% [markdown]
# `autograd.Im2Col` (what `F.conv2d` calls under the teaching policy; the
# implicit-GEMM rung gathers the same windows tile by tile instead) pads and
# then makes exactly this view contiguous: **one** copy kernel, the strided
# map of notebook 2 reading through the view. Below, the 9 taps of the windows, each an 8x8 plane: tap
# (i, j) is the padded image shifted by (i, j).

# %%
cols = mt.autograd.Im2Col.apply(image, (3, 3), (1, 1), (1, 1), (1, 1))
print("windows:", cols.shape, "(N, C, KH, KW, OH, OW)")
fig, axes = plt.subplots(3, 3, figsize=(5, 5))
for i in range(3):
    for j in range(3):
        axes[i, j].imshow(cols[0, 0, i, j].numpy(), cmap="gray_r", vmin=0, vmax=1)
        axes[i, j].set_title(f"tap ({i}, {j})", fontsize=8)
        axes[i, j].axis("off")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The convolution is one matmul
# Flattened, the windows are a (C * KH * KW, OH * OW) = (9, 64) matrix: one
# column per output position. The kernel flattened is a (C_out, 9) matrix,
# and their product is every output at once. The same numbers as six nested
# loops in NumPy:

# %%
matrix = cols.reshape(9, 64)
as_matmul = (edge.reshape(1, 9) @ matrix).reshape(8, 8)
x = np.pad(image[0, 0].numpy(), 1)
k = edge[0, 0].numpy()
loops = np.zeros((8, 8), dtype=np.float32)
for y in range(8):
    for xx in range(8):
        for i in range(3):
            for j in range(3):
                loops[y, xx] += x[y + i, xx + j] * k[i, j]
print("matmul vs loops, largest difference:", float(np.abs(as_matmul.numpy() - loops).max()))
print("matmul vs F.conv2d:", float((as_matmul - out[0, 0]).abs().max()))
plt.figure(figsize=(7, 1.8))
plt.imshow(matrix.numpy(), cmap="gray_r", aspect="auto")
plt.title("im2col: 9 rows (taps) x 64 columns (windows)")
plt.xlabel("output position")
plt.ylabel("tap")
plt.show()

# %% [markdown]
# The price is memory: each input element is copied once per window that
# contains it, up to KH * KW = 9 times here. For a real layer the windows of
# a batch are far larger than the batch; the next rung of this ladder, below,
# keeps tiles of the input in shared memory instead and copies no window.

# %%
batch = mt.randn(32, 16, 28, 28)
windows = mt.autograd.Im2Col.apply(batch, (3, 3), (1, 1), (1, 1), (1, 1))
print(f"input {batch.numel() * 4 / 1e6:.1f} MB, windows {windows.numel() * 4 / 1e6:.1f} MB")

# %% [markdown]
# ## The tiled rung: one block, one output tile, one input patch
# `mt.kernels.conv2d(..., algo="tiled")` runs `src/conv.cu`: a block of
# 16 x 16 threads computes a 16 x 16 tile of one output channel, one pixel
# per thread. For each input channel, the block first copies into shared
# memory the input *patch* its tile reads: the tile's windows together,
# (16 - 1) * stride + (K - 1) * dilation + 1 elements per side (the tile
# plus its *halo*). Neighbouring windows overlap, so the block reads each
# input element from global memory once, however many of its windows
# contain it. Where the patch leaves the image (the padding, or past an
# edge) the block writes zeros, the value zero padding means, so the sum
# needs no bounds test. A `__syncthreads()` makes the patch complete before
# any thread reads it (each reads what others copied); a second keeps the
# next channel's copy from overwriting it while a slow thread still reads.
#
# Below, a 24 x 24 image, a 3 x 3 kernel, stride 1 and padding 1: the
# output is 24 x 24, so 2 x 2 tiles, and a patch is 15 + 2 + 1 = 18
# elements a side. Tile (0, 0)'s patch (red) starts one row and column
# above and left of the image, in the padding, which the block fills with
# zeros. Tile (1, 1) (blue) has only 8 x 8 real outputs, but its block
# copies the patch of a whole tile: past the image's edge it writes zeros,
# and its spare threads compute nothing. The dots are where each real
# output's window starts; the patch adds the halo of K - 1 = 2 beyond them.

# %%
from matplotlib.patches import Rectangle

TILE = 16
size, k, stride, pad = 24, 3, 1, 1
out_size = (size + 2 * pad - k) // stride + 1
tiles = -(-out_size // TILE)
patch = (TILE - 1) * stride + (k - 1) + 1
print(f"output {out_size} x {out_size}, {tiles} x {tiles} tiles, patch {patch} x {patch} "
      f"(+ {k} x {k} weights) = {(patch * patch + k * k) * 4} bytes of float32 shared memory a block")

fig, axes = plt.subplots(1, 2, figsize=(10, 4.8))
plane = np.random.default_rng(0).random((size, size))
axes[0].imshow(plane, cmap="gray_r", extent=(-0.5, size - 0.5, size - 0.5, -0.5))
axes[0].add_patch(Rectangle((-0.5, -0.5), size, size, fill=False, ec="black", lw=1))
for (tile_y, tile_x), color in (((0, 0), "tab:red"), ((1, 1), "tab:blue")):
    y0, x0 = tile_y * TILE * stride - pad, tile_x * TILE * stride - pad  # the patch's corner in the image
    rows = min(TILE, out_size - tile_y * TILE)
    cols = min(TILE, out_size - tile_x * TILE)
    axes[0].add_patch(Rectangle((x0 - 0.5, y0 - 0.5), patch, patch, fill=False, ec=color, lw=2,
                                label=f"patch of tile {(tile_y, tile_x)}"))
    starts = [(y0 + r * stride, x0 + c * stride) for r in range(rows) for c in range(cols)]
    axes[0].scatter([c for _, c in starts], [r for r, _ in starts], s=3, c=color)
    axes[1].add_patch(Rectangle((tile_x * TILE - 0.5, tile_y * TILE - 0.5), cols, rows, fill=False, ec=color, lw=2))
edge = tiles * TILE * stride + k
axes[0].set_xlim(-2.5, edge)
axes[0].set_ylim(edge, -2.5)
axes[0].set_title("input (one channel): the patches two blocks copy")
axes[0].legend(loc="lower left", fontsize=8)
owner = np.add.outer(np.arange(out_size) // TILE * tiles, np.arange(out_size) // TILE)
axes[1].imshow(owner, cmap="Pastel1", vmin=0, vmax=8)
axes[1].set_title(f"output {out_size} x {out_size}: 16 x 16 tiles, one block each")
plt.tight_layout()
plt.show()

# %% [markdown]
# The tiled rung computes the same convolution as im2col, and its backward
# (which reuses im2col's pieces) the same gradients:

# %%
x = mt.randn(2, 3, size, size, requires_grad=True)
weight = mt.randn(4, 3, k, k, requires_grad=True)
tiled = mt.kernels.conv2d(x, weight, stride=stride, padding=pad, algo="tiled")
im2col = mt.kernels.conv2d(x, weight, stride=stride, padding=pad, algo="im2col")
print("rungs:", mt.kernels.algorithms("conv2d"), "(F.conv2d runs 'default': implicit_gemm, im2col under teaching)")
print("tiled vs im2col, largest difference:", float((tiled - im2col).abs().max()))
tiled.sum().backward()
grad_tiled = x.grad.numpy().copy()
x.grad = None
im2col.sum().backward()
print("input gradients, largest difference:", float(np.abs(grad_tiled - x.grad.numpy()).max()))

# %% [markdown]
# ## The implicit-GEMM rung: im2col's matmul, without the matrix
# Under the fast kernel policy `F.conv2d` runs `src/conv_implicit_gemm.cu`.
# It computes the product im2col sets up, out[co, p] = sum over k of
# W[co, k] X[k, p], with the M = C_out output channels as rows, the
# N = batch * OH * OW output pixels as columns and the K = C * KH * KW taps
# as the inner dim, but it never writes X. The kernel is the matmul ladder's
# warptile rung (`src/matmul_warptile.cu`): a block computes a BM x BN tile
# of the output, BK values of K at a time, each of its warps a WM x WN piece
# of the tile. Where warptile loads a BK x BN tile of B from a matrix, this
# kernel *gathers* it from the image: column p is split into (n, oy, ox),
# row k into (c, i, j), and the element is read where that tap of that
# window lies; a tap in the padding, or a row or column past the matrix's
# end (the edge tiles), is stored in shared memory as 0, so the inner loop
# needs no bounds test. What depends only on a thread's column (its image
# and window) is worked out once, before the loop over K-tiles.
#
# The tile shapes below are read from the kernel's source. It has six (the
# autotuner times them on a GPU and keeps the fastest for each layer); without
# a tuned choice, a product of at most 64 rows (64 output channels or fewer)
# takes the 64 x 64 tile (`Igemm3`), as here. For a layer of 16 -> 32 channels, 3 x 3, on two
# 28 x 28 images: the output matrix and its block tiles (left, one block's
# warp pieces drawn), and the windows whose columns that block gathers
# (right: BN consecutive output pixels, each the window of one 3 x 3 patch).

# %%
import re

source = (repo / "src" / "conv_implicit_gemm.cu").read_text()
configs = {name: tuple(int(v) for v in args.split(","))
           for name, args in re.findall(r"using (Igemm\w+) = WarptileConfig<([\d, ]+)>;", source)}
print("tiles in src/conv_implicit_gemm.cu (BM, BN, BK, WM, WN, blocks per SM):", configs)

batch_n, c_in, c_out, k, pad, size = 2, 16, 32, 3, 1, 28
M, N, K = c_out, batch_n * size * size, c_in * k * k
assert M <= 64  # the library's choice for at most 64 rows: igemm_default_config
BM, BN, BK, WM, WN, _ = configs["Igemm3"]
grid = (-(-M // BM), -(-N // BN))
print(f"GEMM M = C_out = {M}, N = N * OH * OW = {N}, K = C * KH * KW = {K}")
print(f"tile {BM} x {BN}: {grid[0]} x {grid[1]} blocks, each {(BM // WM) * (BN // WN)} warps of a "
      f"{WM} x {WN} piece, {-(-K // BK)} K-tiles of {BK}")
print("the taps (c, i, j) of the first K-tile:", [(kk // (k * k), kk // k % k, kk % k) for kk in range(BK)])

block = 3  # the block whose tile and windows are drawn
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for bx in range(grid[1]):
    axes[0].add_patch(Rectangle((bx * BN, 0), BN, BM, fill=bx == block, fc="tab:orange",
                                alpha=0.5 if bx == block else 1.0, ec="gray"))
axes[0].add_patch(Rectangle((0, 0), N, M, fill=False, ec="black", lw=2))
for wy in range(BM // WM):
    for wx in range(BN // WN):
        axes[0].add_patch(Rectangle((block * BN + wx * WN, wy * WM), WN, WM, fill=False, ec="tab:red", lw=1))
axes[0].set_xlim(-20, grid[1] * BN + 20)
axes[0].set_ylim(BM + 4, -4)
axes[0].set_xlabel("output pixel p = (n, oy, ox)")
axes[0].set_ylabel("output channel co")
axes[0].set_title(f"output {M} x {N} (black), {grid[1]} block tiles of {BM} x {BN}", fontsize=9)
pixels = np.arange(block * BN, min((block + 1) * BN, N))
covered = np.zeros((size, size))
first = pixels[pixels // (size * size) == pixels[0] // (size * size)]
for p in first:
    oy, ox = p % (size * size) // size, p % size
    covered[max(oy - pad, 0):oy - pad + k, max(ox - pad, 0):ox - pad + k] += 1
axes[1].imshow(covered, cmap="Oranges")
axes[1].set_title(f"image {pixels[0] // (size * size)}: the windows of block {block}'s columns\n"
                  f"(taps read per pixel, over the {len(first)} windows in this image)")
axes[1].axis("off")
plt.tight_layout()
plt.show()

# %% [markdown]
# The implicit-GEMM rung gives im2col's numbers, forward and backward (its
# gradients are two more implicit GEMMs on the same kernel):

# %%
x = mt.randn(batch_n, c_in, size, size, requires_grad=True)
weight = mt.randn(c_out, c_in, k, k, requires_grad=True)
igemm = mt.kernels.conv2d(x, weight, padding=pad, algo="implicit_gemm")
im2col = mt.kernels.conv2d(x, weight, padding=pad, algo="im2col")
print("implicit_gemm vs im2col, largest difference:", float((igemm - im2col).abs().max()))
igemm.sum().backward()
grads = x.grad.numpy().copy(), weight.grad.numpy().copy()
x.grad = weight.grad = None
im2col.sum().backward()
print("input gradients, largest difference:", float(np.abs(grads[0] - x.grad.numpy()).max()))
print("weight gradients, largest difference:", float(np.abs(grads[1] - weight.grad.numpy()).max()))

# %% [markdown]
# ## The Winograd rung: fewer multiplies for a 3x3 filter
# A 3x3 filter at stride 1 makes each 2x2 block of outputs from the 4x4
# input tile under it: 36 multiplies done directly. Winograd's minimal
# filtering F(2x2, 3x3) needs 16: transform the filter (`G g G^T`) and the
# tile (`B^T d B`) into 4x4 arrays, multiply them element by element, and
# transform the product back (`A^T . A`). B, G and A hold only 0, 1, -1 and
# 1/2, so the transforms are additions. Summed over the input channels, each
# of the 16 element-wise products is a matrix product, which is how
# `src/conv_winograd.cu` runs it: three small transform kernels around one
# batched matmul (docs/kernels.md, "The Winograd rung").

# %%
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=float)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=float)
rng = np.random.default_rng(0)
d, g = rng.standard_normal((4, 4)), rng.standard_normal((3, 3))
direct = np.array([[np.sum(d[i:i + 3, j:j + 3] * g) for j in range(2)] for i in range(2)])
winograd = AT @ ((G @ g @ G.T) * (BT @ d @ BT.T)) @ AT.T
print("direct (36 multiplies):\n", direct.round(4))
print("Winograd (16 multiplies):\n", winograd.round(4))
print("largest difference:", float(np.abs(direct - winograd).max()))

# %% [markdown]
# Its gradients run the same steps backwards. The input's is a Winograd
# convolution of the output's gradient with each filter turned by 180
# degrees. The filter's follows from the chain rule through the three steps:
# a change `dY` of the outputs came from `dM = A dY A^T`, the product's
# gradient in the tile's transform is `dM * (B^T d B)`, and the filter's is
# `G^T (that) G`, summed over every tile the filter met:

# %%
dy = rng.standard_normal((2, 2))
direct_dg = np.array([[np.sum(d[i:i + 2, j:j + 2] * dy) for j in range(3)] for i in range(3)])
winograd_dg = G.T @ ((AT.T @ dy @ AT) * (BT @ d @ BT.T)) @ G
print("filter gradient, largest difference:", float(np.abs(direct_dg - winograd_dg).max()))

# %% [markdown]
# On a GPU `F.conv2d` times the Winograd rung against the implicit GEMM on
# the first call of each 3x3 stride-1 shape, for the forward and both
# gradients, and keeps the faster (`python3 bench/conv_winograd.py` prints
# both with cuDNN). On an H200 (docs/performance.md, "The runs of 2026-11-28
# late evening"), milliseconds a product:
#
# | layer | product | implicit GEMM | Winograd | cuDNN |
# | --- | --- | ---: | ---: | ---: |
# | 128 ch 28x28, N32 | forward | 0.283 | 0.192 | 0.144 |
# | | input gradient | 0.344 | 0.192 | 0.162 |
# | | weight gradient | 0.296 | 0.198 | 0.155 |
# | 256 ch 14x14, N32 | forward | 0.293 | 0.180 | 0.267 |
#
# The price is memory: the transformed tiles are four times the input and
# the output, so the rung pays where channels are many and images small. The
# emulator and the teaching policy never pick it by themselves.

# %% [markdown]
# ## Backward: overlapping windows add up
# Each input element feeds every window it lies in, so its gradient is the
# sum over those windows. `Im2Col`'s backward adds each tap's slice of the
# gradient back where it was read: 9 strided in-place additions, each
# covering all windows at once (within one tap no two windows touch the same
# element, so no two threads write one address). With a kernel of ones and a
# gradient of ones, the result counts the windows over each pixel.

# %%
x = mt.ones(1, 1, 8, 8, requires_grad=True)
F.conv2d(x, mt.ones(1, 1, 3, 3)).sum().backward()
plt.figure(figsize=(3, 3))
plt.imshow(x.grad[0, 0].numpy(), cmap="viridis")
for (r, cc), v in np.ndenumerate(x.grad[0, 0].numpy()):
    plt.text(cc, r, int(v), ha="center", va="center", color="white", fontsize=8)
plt.title("windows covering each pixel")
plt.axis("off")
plt.show()

# %% [markdown]
# ## Pooling is the same windows, reduced
# `F.max_pool2d` takes the windows (padding counts as -inf) and keeps each
# one's maximum; its backward sends the gradient to that one element.
# `F.avg_pool2d` takes the mean. With `return_indices=True` max pooling also
# says, as an int64 position in the plane, where each maximum was.

# %%
pooled, where = F.max_pool2d(image, 2, return_indices=True)
print("max_pool2d:", tuple(image.shape), "->", tuple(pooled.shape))
print("positions of the maxima (row * 8 + column):\n", where[0, 0].numpy())
fig, axes = plt.subplots(1, 2, figsize=(6, 3))
axes[0].imshow(pooled[0, 0].numpy(), cmap="gray_r")
axes[0].set_title("max_pool2d, 2x2")
axes[1].imshow(F.avg_pool2d(image, 2)[0, 0].numpy(), cmap="gray_r")
axes[1].set_title("avg_pool2d, 2x2")
for ax in axes:
    ax.axis("off")
plt.show()
