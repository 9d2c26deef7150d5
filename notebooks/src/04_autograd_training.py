# %% [markdown]
# # 4. Autograd and training
#
# Every differentiable operation on a tensor that requires a gradient
# records a node of a graph: the result's `grad_fn` is an instance of a
# `Function` subclass (`minitensor/autograd.py`), and the node keeps its
# inputs. `backward()` walks that graph from the result back to the leaves
# and calls each node's `backward` once, on the library's own kernels.
#
# This notebook draws the graph of a small expression by walking `grad_fn`,
# checks its gradients against finite differences, and trains a small model.

# %%
# Make the repository's minitensor importable when the notebook runs from notebooks/.
import sys
import time
from pathlib import Path

repo = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "minitensor" / "__init__.py").is_file())
sys.path.insert(0, str(repo))

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyBboxPatch

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import autograd, nn, optim

plt.rcParams.update({"figure.dpi": 100, "font.size": 10})
mt.manual_seed(0)
print("backend:", mt.backend())

# %% [markdown]
# ## The graph of an expression
# One neuron with a squared-error-like loss: `x` is a batch of 3 inputs with
# 2 features, `w` a weight column, `b` a bias broadcast over the batch.

# %%
x = mt.tensor([[0.5, -1.0], [1.5, 0.25], [-0.5, 2.0]], dtype=mt.float64)  # data: no gradient
w = mt.tensor([[0.3], [-0.2]], dtype=mt.float64, requires_grad=True)
b = mt.tensor([0.1], dtype=mt.float64, requires_grad=True)

z = x @ w + b          # (3, 1): MatMul, then Add (b broadcast over the batch)
h = z.tanh()           # (3, 1)
loss = (h * h).mean()  # a scalar: Mul (h with itself), then Mean
print("loss =", loss.item(), " loss.grad_fn:", type(loss.grad_fn).__name__)
print("w is a leaf:", w.grad_fn is None, " z.grad_fn:", type(z.grad_fn).__name__)

# %% [markdown]
# `graph_of` walks the graph exactly as `backward` reaches it: from
# `loss.grad_fn` through each node's `inputs`. A tensor input with a
# `grad_fn` leads to another node; one without is a leaf (a parameter if it
# requires a gradient, else a constant such as the data). The numbers on the
# nodes are the order in which `backward` calls them: the library's own
# ordering function, `autograd.topological_order`, which runs a node once
# every node that consumes its result has run (its gradient is complete) and,
# among the nodes ready, the one recorded last first, as torch's engine does
# (written as loops: a recursive walk would hit Python's recursion limit on a
# deep graph).

# %%
def graph_of(root, names):
    """Nodes, leaves and edges reachable from root.grad_fn (edges: (source, node, tensor))."""
    nodes, leaves, edges = {}, {}, []
    stack = [root.grad_fn]
    while stack:
        node = stack.pop()
        if id(node) in nodes:
            continue
        nodes[id(node)] = node
        for t in node.inputs:
            if not mt.is_tensor(t):
                continue  # a Python number or an option (a dim, keepdim)
            if t.grad_fn is not None:
                edges.append((id(t.grad_fn), id(node), t))
                stack.append(t.grad_fn)
            else:
                leaves[id(t)] = names.get(id(t), "const")
                edges.append((id(t), id(node), t))
    return nodes, leaves, edges


def draw_graph(root, names, title):
    nodes, leaves, edges = graph_of(root, names)
    order = {id(n): k + 1 for k, n in enumerate(autograd.topological_order(root.grad_fn))}
    depth = {key: 0 for key in leaves}           # a node's column: longest path from a leaf
    for _ in range(len(nodes) + 1):
        for src, dst, _t in edges:
            depth[dst] = max(depth.get(dst, 0), depth.get(src, 0) + 1)
    for key in leaves:                           # a leaf sits just before its first consumer
        depth[key] = min(depth[dst] for src, dst, _t in edges if src == key) - 1
    columns = {}
    for key in list(nodes) + list(leaves):
        columns.setdefault(depth[key], []).append(key)
    step_x, step_y = 2.5, 1.5
    pos = {}
    for col, keys in columns.items():
        keys.sort(key=lambda k: k in leaves)     # the node first, then the leaves beside it
        for row, key in enumerate(keys):
            pos[key] = (step_x * col, -step_y * row)

    width = step_x * (max(columns) + 1) + 1.5
    fig, ax = plt.subplots(figsize=(width, 3.6))
    half = 0.8
    seen = {}
    for src, dst, t in edges:
        (x0, y0), (x1, y1) = pos[src], pos[dst]
        repeat = seen.get((src, dst), 0)
        seen[(src, dst)] = repeat + 1
        ax.annotate("", xy=(x1 - half, y1), xytext=(x0 + half, y0),
                    arrowprops=dict(arrowstyle="-|>", color="#555555", lw=1.2,
                                    connectionstyle=f"arc3,rad={0.45 * repeat}"))
        label_y = (y0 + y1) / 2 + (0.15 if repeat == 0 else -0.55)
        ax.text((x0 + x1) / 2, label_y, str(t.shape), ha="center", fontsize=9, color="#333333")
    for key, (px, py) in pos.items():
        if key in leaves:
            tensor = next(t for s_, _, t in edges if s_ == key)
            label = f"{leaves[key]}\n{tuple(tensor.shape)}"
            colour = "#c7e9c0" if tensor.requires_grad else "#e6e6e6"
            label += "\nrequires_grad" if tensor.requires_grad else "\nno gradient"
        else:
            label, colour = f"{type(nodes[key]).__name__}\nbackward #{order[key]}", "#c6dbef"
        ax.add_patch(FancyBboxPatch((px - half, py - 0.45), 2 * half, 0.9, boxstyle="round,pad=0.05",
                                    facecolor=colour, edgecolor="black"))
        ax.text(px, py, label, ha="center", va="center", fontsize=10)
    rx, ry = pos[id(root.grad_fn)]
    ax.annotate("loss", xy=(rx + half + 0.05, ry), xytext=(rx + half + 0.9, ry), va="center", fontsize=11,
                arrowprops=dict(arrowstyle="<|-", color="black"))
    lowest = min(py for _, py in pos.values())
    ax.set_xlim(-half - 0.3, step_x * max(columns) + half + 1.4)
    ax.set_ylim(lowest - 0.8, 0.8)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, loc="left")
    fig.tight_layout()
    plt.show()


names = {id(x): "x (data)", id(w): "w", id(b): "b"}
draw_graph(loss, names, "loss = tanh(x @ w + b)**2 averaged: the graph, from loss.grad_fn back to the leaves")

# %% [markdown]
# Green boxes are leaves that require a gradient (`w`, `b`), the grey one is
# data; blue boxes are the nodes, numbered in the order `backward` runs them. `Mul` has two edges from `Tanh`: `h * h` uses `h` twice, so
# `backward` adds the two gradients it sends to `Tanh` before calling
# `Tanh.backward` (that is why each node runs once, after every node that
# consumes its result). The `Add` node's backward sums the gradient over the
# batch dim for `b`, undoing the broadcast of `(1,)` to `(3, 1)`
# (`autograd.unbroadcast`).

# %%
loss.backward()
print("dloss/dw =", w.grad.tolist())
print("dloss/db =", b.grad.tolist())

# %% [markdown]
# ## Gradients checked by finite differences
# For each element `p` of a leaf, the central difference
# `(f(p + eps) - f(p - eps)) / (2 eps)` approximates `df/dp` with an error of
# order `eps**2`. In float64 with `eps = 1e-6` it agrees with the analytic
# gradient to about 1e-9. The function is evaluated by the library (forward
# only); the analytic gradient comes from `backward`. A bigger graph this
# time, with a softmax, a matmul, a broadcast and a reduction over a dim.

# %%
def f(a, m, c):
    """A scalar from three leaves: every op here has its own backward rule."""
    scores = (a @ m + c).tanh()                # (4, 3)
    return (mt.log_softmax(scores, dim=1) * scores.softmax(dim=1)).sum(dim=1).max()


rng = np.random.default_rng(1)
arrays = [rng.standard_normal((4, 5)), rng.standard_normal((5, 3)), rng.standard_normal((3,))]
leaves = [mt.tensor(arr, requires_grad=True) for arr in arrays]  # float64 arrays stay float64
f(*leaves).backward()

eps = 1e-6
analytic, numeric, owner = [], [], []
for k, arr in enumerate(arrays):
    for idx in np.ndindex(arr.shape):
        values = []
        for sign in (+1, -1):
            shifted = [a.copy() for a in arrays]
            shifted[k][idx] += sign * eps
            values.append(f(*[mt.tensor(s) for s in shifted]).item())
        numeric.append((values[0] - values[1]) / (2 * eps))
        analytic.append(leaves[k].grad.numpy()[idx])
        owner.append("amc"[k])
analytic, numeric, owner = np.array(analytic), np.array(numeric), np.array(owner)
error = np.abs(analytic - numeric)
print(f"{len(analytic)} partial derivatives; largest difference {error.max():.2e}")
assert np.allclose(analytic, numeric, rtol=1e-6, atol=1e-8)

# %%
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.3))
colours = {"a": "#3182bd", "m": "#e6550d", "c": "#31a354"}
floor = 1e-17  # where a difference of exactly 0 is drawn on the log scale
for name, colour in colours.items():
    sel = owner == name
    ax0.scatter(numeric[sel], analytic[sel], s=28, color=colour, label=f"leaf {name} {arrays['amc'.index(name)].shape}")
    exact = sel & (error == 0)
    ax1.scatter(np.nonzero(sel & ~exact)[0], error[sel & ~exact], s=20, color=colour, label=f"leaf {name}")
    ax1.scatter(np.nonzero(exact)[0], np.full(exact.sum(), floor), s=20, facecolor="none", edgecolor=colour)
ax1.text(0, floor * 4, "hollow: both exactly 0 (rows that max did not select)", fontsize=8)
lim = np.abs(np.concatenate([analytic, numeric])).max() * 1.1
ax0.plot([-lim, lim], [-lim, lim], color="black", lw=0.8, label="analytic = numeric")
ax0.set_xlabel("central difference (library forward, float64)")
ax0.set_ylabel("backward()")
ax0.set_title("each partial derivative: backward vs finite differences")
ax0.legend(fontsize=8)
ax0.grid(alpha=0.3)
ax1.set_yscale("log")
ax1.axhline(1e-8, color="black", lw=0.8, ls="--", label="tolerance (atol 1e-8)")
ax1.set_xlabel("partial derivative (a, then m, then c)")
ax1.set_ylabel("|analytic - numeric|")
ax1.set_title("their difference: rounding and eps**2 truncation")
ax1.legend(fontsize=8, loc="center right")
ax1.grid(alpha=0.3, which="both")
fig.tight_layout()
plt.show()

# %% [markdown]
# `max` over the rows sends the whole gradient to the row it selected (as in
# PyTorch), so the derivatives of the other rows of `a` are exactly 0, and
# the finite differences find 0 there too. `tests/test_autograd.py` runs the
# same check on every differentiable op, on broadcast and non-contiguous
# inputs too.
#
# ## Training a small model
# Two interleaved half-moons, 200 points, classified by a multilayer
# perceptron `2 -> 16 -> 16 -> 2` with tanh, trained by Adam on the
# cross-entropy of the full batch. Every operation of the forward pass, the
# backward pass and the optimiser runs on the library's kernels.

# %%
def two_moons(n, noise, seed):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, n)
    label = rng.integers(0, 2, n)
    points = np.where(label[:, None] == 0,
                      np.stack([np.cos(t), np.sin(t)], 1),
                      np.stack([1 - np.cos(t), 0.5 - np.sin(t)], 1))
    return (points + rng.normal(0, noise, (n, 2))).astype(np.float32), label


points, labels = two_moons(200, 0.12, seed=0)
inputs = mt.tensor(points)
mt.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 2))
opt = optim.Adam(model.parameters(), lr=0.03)
print(model)

losses, accuracies = [], []
start = time.perf_counter()
for step in range(120):
    opt.zero_grad()
    logits = model(inputs)                     # (200, 2)
    loss = F.cross_entropy(logits, labels)     # labels: a NumPy integer array
    loss.backward()
    opt.step()
    losses.append(loss.item())
    accuracies.append((logits.argmax(dim=1).numpy() == labels).mean())
seconds = time.perf_counter() - start
print(f"{len(losses)} steps in {seconds:.1f} s (backend: {mt.backend()}); final loss {losses[-1]:.4f}, "
      f"training accuracy {accuracies[-1]:.3f}")
assert losses[-1] < 0.5 * losses[0]

# %%
grid_x, grid_y = np.meshgrid(np.linspace(-1.5, 2.5, 120), np.linspace(-1.0, 1.5, 90))
grid = mt.tensor(np.stack([grid_x.ravel(), grid_y.ravel()], 1).astype(np.float32))
with mt.no_grad():
    p_class1 = mt.softmax(model(grid), dim=1)[:, 1].numpy().reshape(grid_x.shape)

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.5))
ax0.plot(losses, color="black", label="cross-entropy")
ax0.set_yscale("log")
ax0.set_xlabel("step")
ax0.set_ylabel("training loss (log scale)")
ax0b = ax0.twinx()
ax0b.plot(accuracies, color="#e6550d", label="accuracy")
ax0b.set_ylabel("training accuracy", color="#e6550d")
ax0b.set_ylim(min(accuracies) - 0.05, 1.02)
ax0.set_title("loss and accuracy while training")
lines = ax0.get_lines() + ax0b.get_lines()
ax0.legend(lines, [line.get_label() for line in lines], loc="center right")
ax0.grid(alpha=0.3, which="both")
im = ax1.contourf(grid_x, grid_y, p_class1, levels=np.linspace(0, 1, 11), cmap="RdBu_r", alpha=0.75)
ax1.contour(grid_x, grid_y, p_class1, levels=[0.5], colors="black", linewidths=1.2)
for cls, colour, marker in ((0, "#08519c", "o"), (1, "#a50f15", "s")):
    sel = labels == cls
    ax1.scatter(points[sel, 0], points[sel, 1], s=16, color=colour, marker=marker,
                edgecolor="white", linewidth=0.4, label=f"class {cls}")
fig.colorbar(im, ax=ax1, label="model's P(class 1)")
ax1.set_title("the trained model: P(class 1), boundary at 0.5")
ax1.set_xlabel("feature 0")
ax1.set_ylabel("feature 1")
ax1.legend(loc="lower left", fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# The same loop, on real data (the 8x8 handwritten digits) and with
# minibatches, is `examples/train_digits.py`, which `make demo` runs.
