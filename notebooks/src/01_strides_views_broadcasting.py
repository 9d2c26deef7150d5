# %% [markdown]
# # 1. Strides, views and broadcasting
#
# A minitensor `Tensor` is a window onto a block of device memory (its
# *storage*): a **shape**, **strides** (how many elements to step in storage
# for +1 along each dim) and a **storage offset** (where element `(0, 0, ...)`
# lives). The element at multi-index `(i0, i1, ...)` is at
#
#     position = offset + i0 * strides[0] + i1 * strides[1] + ...
#
# which is `index_to_position` in `src/indexing.h`, the function every strided
# kernel calls. Views (`transpose`, `permute`, slicing, `expand`, ...) only
# compute a new shape, strides and offset over the *same* storage; nothing is
# copied. This notebook draws what each view does, using the library's real
# tensors: every picture is checked against the values the library returns.
#
# Runs on the CPU emulator or a GPU (`mt.backend()` says which).

# %%
# Make the repository's minitensor importable when the notebook runs from notebooks/.
import sys
from pathlib import Path

repo = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "minitensor" / "__init__.py").is_file())
sys.path.insert(0, str(repo))

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

import minitensor as mt

plt.rcParams.update({"figure.dpi": 100, "font.size": 10})
print("backend:", mt.backend())

# %% [markdown]
# ### Drawing helpers
# `draw_view(t, base)` draws the storage of `base` (a contiguous tensor that
# owns the memory) as a 1-D strip, and the view `t` as its logical grid. Each
# storage slot has its own colour; a grid cell takes the colour of the slot it
# reads, and shows the slot's position under its value. Slots the view never
# reads are grey. The positions come from the view's own `strides` and
# `storage_offset()`, and the helper asserts that the storage value at each
# position is the value `t.numpy()` returns, so the picture is what the
# library does. (Skip this cell on a first reading.)

# %%
SLOT_COLOURS = plt.get_cmap("tab20")


def positions(t):
    """Storage position of every element of t, in t's shape: offset + sum(i_k * stride_k)."""
    index = np.indices(t.shape).reshape(t.ndim, -1).T  # every multi-index, row-major
    pos = t.storage_offset() + index @ np.array(t.strides, dtype=np.int64)
    return pos.reshape(t.shape)


def slot_colour(p):
    return SLOT_COLOURS(p % 20)


def ink(colour):
    """Black text on light cells, white on dark ones."""
    r, g, b = plt.matplotlib.colors.to_rgb(colour)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def draw_cells(ax, values, pos, used=None, title=""):
    """A 2-D grid of cells: value on top, storage position below, coloured by position."""
    rows, cols = values.shape
    for i in range(rows):
        for j in range(cols):
            p = int(pos[i, j])
            colour = slot_colour(p) if used is None or p in used else "#e6e6e6"
            ax.add_patch(Rectangle((j, rows - 1 - i), 1, 1, facecolor=colour, edgecolor="black"))
            ax.text(j + 0.5, rows - 1 - i + 0.6, f"{values[i, j]:g}", ha="center", va="center",
                    fontsize=11, color=ink(colour))
            ax.text(j + 0.5, rows - 1 - i + 0.22, f"@{p}", ha="center", va="center", fontsize=8,
                    color=ink(colour))
    ax.set_xlim(-0.05, cols + 0.05)
    ax.set_ylim(-0.05, rows + 0.05)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=10, loc="left")


def draw_view(t, base, title, base_name):
    """Draws view t of base's storage; base_name names base in the title."""
    storage = base.numpy().ravel()
    pos = positions(t)
    values = t.numpy()
    # The picture must be the library's answer: storage[position] == the view's value.
    assert np.array_equal(storage[pos], values), "positions disagree with the library"
    # Same storage, no copy: the view's first element lies inside base's memory.
    shares = t.data_ptr() - t.storage_offset() * t.element_size() == base.data_ptr()

    grid_values = values.reshape(1, -1) if t.ndim == 1 else values
    grid_pos = pos.reshape(1, -1) if t.ndim == 1 else pos
    fig, (ax_strip, ax_grid) = plt.subplots(
        2, 1, figsize=(max(6, 0.62 * storage.size), 1.2 + 0.75 * grid_values.shape[0]),
        gridspec_kw={"height_ratios": [1, grid_values.shape[0]]},
    )
    used = set(pos.ravel().tolist())
    draw_cells(ax_strip, storage.reshape(1, -1), np.arange(storage.size).reshape(1, -1), used,
               f"storage of {base_name} ({storage.size} slots: value, @position); grey: not read by the view")
    draw_cells(ax_grid, grid_values, grid_pos, None,
               f"{title}: shape {t.shape}, strides {t.strides}, offset {t.storage_offset()}, "
               f"contiguous {t.is_contiguous()}, reads {base_name}'s storage {shares}")
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ## A contiguous tensor
# `mt.arange(12).reshape(3, 4)` stores its 12 values in row-major order: the
# last dim is the fastest, so its stride is 1, and one row further is 4
# elements further. Each value here equals its storage position, which makes
# the pictures easy to read.

# %%
a = mt.arange(12).reshape(3, 4)
print(a.shape, a.strides, a.storage_offset())
draw_view(a, a, "a", "a")

# %% [markdown]
# ## Transpose and permute: swap the strides
# `a.T` (or `a.transpose(0, 1)`, `a.permute(1, 0)`) swaps the shape *and the
# strides*: one step along the new rows is one step in storage, one step
# along the new columns is 4. The colours show the same slots read in a
# different order. The result is no longer contiguous: its elements in
# row-major order are not consecutive in memory.

# %%
at = a.T
draw_view(at, a, "a.T", "a")

# A 3-D permute does the same to three dims: dim i of the result is dim dims[i] of the input.
c = mt.arange(24).reshape(2, 3, 4)
p = c.permute(2, 0, 1)
print("c:", c.shape, c.strides, "  c.permute(2, 0, 1):", p.shape, p.strides)

# %% [markdown]
# ## Slicing: move the offset, scale the strides
# `a[r0:r1:rs, c0:c1:cs]` starts at element `(r0, c0)` (the offset grows by
# `r0 * strides[0] + c0 * strides[1]`) and multiplies each stride by its step.
# An integer index removes a dim and only moves the offset.

# %%
s = a[::2, 1::2]  # rows 0 and 2, columns 1 and 3
draw_view(s, a, "a[::2, 1::2]", "a")
row = a[1]
print("a[1]:", row.shape, row.strides, "offset", row.storage_offset())
col = a[:, 2]
print("a[:, 2]:", col.shape, col.strides, "offset", col.storage_offset())

# %% [markdown]
# ## Expand: stride 0 repeats an element
# `expand` turns a dim of size 1 into any size by giving it **stride 0**:
# every index along it lands on the same slot. Three rows are shown but only
# four numbers are stored. (An expanded tensor can be read but not written:
# several of its elements share one address.)

# %%
v = mt.tensor([10.0, 20.0, 30.0, 40.0])
e = v.unsqueeze(0).expand(3, 4)
draw_view(e, v, "v.unsqueeze(0).expand(3, 4)", "v")

# %% [markdown]
# ## `contiguous()` copies; views never do
# `mt.memory_in_use()` counts the bytes of device memory the library has
# allocated. Making a view allocates nothing. `contiguous()` of a
# non-contiguous view allocates a new storage and runs the **map kernel with
# the copy op** (`map_strided` in `src/map.cu`): one thread per output element
# reads the input through its strides and writes the output in row-major
# order. On an already contiguous tensor, `contiguous()` returns the tensor
# itself.

# %%
before = mt.memory_in_use()
views = [a.T, a[::2, 1::2], a.permute(1, 0)[1:], v.unsqueeze(0).expand(1000, 4)]
print("bytes allocated by 4 views:", mt.memory_in_use() - before)

before = mt.memory_in_use()
atc = a.T.contiguous()
print("bytes allocated by a.T.contiguous():", mt.memory_in_use() - before, "= 12 elements x 4 bytes")
print("a.contiguous() is a:", a.contiguous() is a)
print("the copy's memory is a's:", atc.data_ptr() == a.data_ptr())
draw_view(atc, atc, "a.T.contiguous()", "the copy")

# %% [markdown]
# The copy holds the values of `a.T` in row-major order in a storage of its
# own, with strides `(3, 1)`: value 4 now sits at position 1, so the colours
# (which follow positions) differ from those in the pictures of `a`.
#
# ## Broadcasting: `broadcast_index`
# `x + y` with shapes `(3, 1)` and `(4,)` gives shape `(3, 4)` (NumPy rules:
# align shapes on the right; a size-1 or missing dim repeats). The zip kernel
# (`zip_strided` in `src/zip.cu`) gives one thread to each output element. The
# thread turns its ordinal into an output index with `to_index`, maps that
# index into each input with `broadcast_index`, and reads each input through
# its own strides:
#
# ```c
# to_index(i, out.shape, out.ndim, out_index);
# broadcast_index(out_index, out.ndim, a.shape, a.ndim, a_index);
# broadcast_index(out_index, out.ndim, b.shape, b.ndim, b_index);
# ```
#
# The next cell has the two helpers in Python, line by line as in
# `src/indexing.h` (in a student's copy: your own transcription, once the
# task `indexing` is done); the cell after it checks that, for every output
# element, they name the input elements whose sum the library computed.

# %%
# TASK(indexing) BEGIN
def to_index(ordinal, shape):
    """src/indexing.h to_index: ordinal -> multi-index (row-major, last dim fastest)."""
    index = [0] * len(shape)
    for d in range(len(shape) - 1, -1, -1):
        index[d] = ordinal % shape[d]
        ordinal //= shape[d]
    return tuple(index)


def broadcast_index(big_index, shape):
    """src/indexing.h broadcast_index: index into the output -> index into an input of `shape`."""
    lead = len(big_index) - len(shape)
    return tuple(0 if shape[d] == 1 else big_index[d + lead] for d in range(len(shape)))
# TASK(indexing) STUB
#| def to_index(ordinal, shape):
#|     """Your src/indexing.h to_index, in Python: ordinal -> multi-index (row-major)."""
#|     raise NotImplementedError("task indexing is not done: to_index in notebooks/01_strides_views_broadcasting.ipynb")
#|
#|
#| def broadcast_index(big_index, shape):
#|     """Your src/indexing.h broadcast_index, in Python: output index -> index into an input of `shape`."""
#|     raise NotImplementedError("task indexing is not done: broadcast_index in notebooks/01_strides_views_broadcasting.ipynb")
# TASK(indexing) END

# %%
x = mt.tensor([[0.0], [10.0], [20.0]])  # (3, 1)
y = mt.tensor([1.0, 2.0, 3.0, 4.0])     # (4,)
out = x + y                             # (3, 4): mt_zip(ADD)
xn, yn, outn = x.numpy(), y.numpy(), out.numpy()

x_of = np.empty(out.shape, dtype=object)  # which element of x each output element reads
y_of = np.empty(out.shape, dtype=object)
for i in range(out.numel()):
    idx = to_index(i, out.shape)
    xi, yi = broadcast_index(idx, x.shape), broadcast_index(idx, y.shape)
    assert outn[idx] == xn[xi] + yn[yi]
    x_of[idx], y_of[idx] = xi, yi
print("every output element is x[broadcast_index(...)] + y[broadcast_index(...)]")
readers = [(r, c) for r in range(3) for c in range(4) if x_of[r, c] == (1, 0)]
print("x[1, 0] is read by the outputs", readers)

# %%
x_colours = plt.get_cmap("Blues")([0.35, 0.6, 0.85])
y_colours = plt.get_cmap("Oranges")([0.25, 0.45, 0.65, 0.85])


def cell(ax, col, row, colour, text, rows):
    ax.add_patch(Rectangle((col, rows - 1 - row), 1, 1, facecolor=colour, edgecolor="black"))
    ax.text(col + 0.5, rows - 0.5 - row, text, ha="center", va="center", fontsize=10, color=ink(colour))


fig, axes = plt.subplots(1, 5, figsize=(15, 3.0), gridspec_kw={"width_ratios": [1, 4, 4, 4, 4]})
for r in range(3):
    cell(axes[0], 0, r, x_colours[r], f"{xn[r, 0]:g}", 3)
axes[0].set_title("x  (3, 1)")
for c in range(4):
    cell(axes[1], c, 1, y_colours[c], f"{yn[c]:g}", 3)
axes[1].set_title("y  (4,)")
for r in range(3):
    for c in range(4):
        xi, yi = x_of[r, c], y_of[r, c]
        cell(axes[2], c, r, x_colours[xi[0]], f"x[{xi[0]},{xi[1]}]", 3)
        cell(axes[3], c, r, y_colours[yi[0]], f"y[{yi[0]}]", 3)
        cell(axes[4], c, r, "white", f"{outn[r, c]:g}", 3)
axes[2].set_title("element of x read by each output")
axes[3].set_title("element of y read by each output")
axes[4].set_title("out = x + y  (3, 4), from the library")
for ax, width in zip(axes, (1, 4, 4, 4, 4)):
    ax.set_xlim(-0.05, width + 0.05)
    ax.set_ylim(-0.05, 3.05)
    ax.set_aspect("equal")
    ax.axis("off")
fig.tight_layout()
plt.show()

# %% [markdown]
# Broadcasting is the same as expanding each input to the output's shape:
# a repeated dim gets stride 0, and then `index_to_position` ignores its
# index, exactly as `broadcast_index` sets it to 0.

# %%
print("x.expand(3, 4).strides =", x.expand(3, 4).strides)
print("y.expand(3, 4).strides =", y.expand(3, 4).strides)
same = (x.expand(3, 4) + y.expand(3, 4)).numpy()
assert np.array_equal(same, outn)
print("x.expand(3, 4) + y.expand(3, 4) equals x + y")

# %% [markdown]
# ## Summary
#
# | operation | shape | strides | offset | copies? |
# | --- | --- | --- | --- | --- |
# | `a = arange(12).reshape(3, 4)` | (3, 4) | (4, 1) | 0 | new tensor |
# | `a.T`, `a.permute(1, 0)` | (4, 3) | (1, 4) | 0 | no |
# | `a[::2, 1::2]` | (2, 2) | (8, 2) | 1 | no |
# | `v.unsqueeze(0).expand(3, 4)` | (3, 4) | (0, 1) | 0 | no |
# | `a.T.contiguous()` | (4, 3) | (3, 1) | 0 | yes: map kernel, copy op |
#
# The kernels read every one of these views directly through its strides,
# so a transposed or broadcast operand costs no copy. What it can cost on a
# GPU is speed: neighbouring threads then read addresses far apart
# (notebook 2 shows which thread reads what).
