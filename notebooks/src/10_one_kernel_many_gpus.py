# %% [markdown]
# # 10. One kernel over several GPUs: an all-reduce ladder
#
# `minitensor.distributed` usually runs one process per GPU, and NCCL moves
# the data between them. This notebook takes the other path: **one** process
# drives every GPU, enables *peer access* between each pair, and launches the
# same kernel on each of them. Every launch gets a descriptor with every
# GPU's pointer to its part of the tensor, so the kernel on GPU 0 simply
# loads from GPU 3's memory (over NVLink, on a real machine).
#
# On that we build an all-reduce (every GPU ends with the sum of all GPUs'
# buffers) four ways, a ladder like the matmul one: **naive**, **ring**,
# **oneshot**, **twoshot**. The notebook runs on the emulator, which can
# pretend to have several devices; the same code runs on GPUs.

# %%
# Make the repository's minitensor importable when the notebook runs from notebooks/.
import sys
from pathlib import Path

repo = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "minitensor" / "__init__.py").is_file())
sys.path.insert(0, str(repo))

import matplotlib.pyplot as plt
import numpy as np

import minitensor as mt
from minitensor.distributed import PeerGroup, device_count, emulate_devices

plt.rcParams.update({"figure.dpi": 100, "font.size": 10})
print("backend:", mt.backend())
if mt.backend() == "emulator":
    emulate_devices(4)  # or MINITENSOR_EMU_DEVICES=4 before the library loads
print("devices:", device_count())

# %% [markdown]
# ## A group, and peer access
# `PeerGroup(devices)` calls `cudaDeviceEnablePeerAccess` for every ordered
# pair (device 0 may read device 1, device 1 may read device 0, ...), each
# call checked. Where two GPUs cannot reach each other (no NVLink, no PCIe
# peer path) the group is refused with a message naming the pair. The
# emulator can play that machine too:

# %%
if mt.backend() == "emulator":
    emulate_devices(2, peer_access=False)
    try:
        PeerGroup()
    except mt.MinitensorError as e:
        print(str(e)[:200], "...")
    emulate_devices(4)

# %% [markdown]
# ## The ladder, checked against a plain sum
# Each rank holds its part; `all_reduce` replaces every part by the sum, in
# place. Each rung sums in its own order, but every rank of one rung ends
# with the same bits (a data-parallel model whose replicas drift apart by
# rounding would be a bug).

# %%
group = PeerGroup()
n = group.world_size
rng = np.random.default_rng(0)
parts = [rng.standard_normal(10_000).astype(np.float32) for _ in range(n)]
exact = sum(p.astype(np.float64) for p in parts)
for rung in ["naive", "ring", "oneshot", "twoshot"]:
    tensors = [mt.tensor(p) for p in parts]
    group.all_reduce(tensors, rung=rung)
    got = [t.numpy() for t in tensors]
    same = all(np.array_equal(g, got[0]) for g in got)
    print(f"{rung:8s} max error vs float64 sum {np.max(np.abs(got[0] - exact)):.2e}, every rank the same bits: {same}")

# %% [markdown]
# ## What each rung does
# With `N` GPUs and `S` bytes per GPU:
#
# | rung | plan | bytes each GPU reads from peers | barriers |
# | --- | --- | ---: | ---: |
# | naive | every GPU reads every peer's buffer, 4-byte loads, sums | (N-1) S | 1 |
# | oneshot | the same plan, 16-byte loads from every peer before the adds | (N-1) S | 1 |
# | twoshot | reduce my 1/N from everyone, barrier, fetch the other N-1 reduced parts | 2 (N-1)/N S | 2 |
# | ring | N-1 steps of "add my part to the left neighbour's partial sum", then N-1 steps of "copy from the left" | 2 (N-1)/N S | 2 (N-1) |
#
# 2 (N-1)/N S is the least any all-reduce can move (each GPU must receive
# the other ranks' share of every element, and send its own). The ring moves
# that much over one link; twoshot moves it over all links at once, which
# needs every pair connected (NVSwitch gives each pair full bandwidth).
# Naive and oneshot move more, but pay only one barrier: for small buffers
# the barrier is all that counts. Here is the ring's code, from
# src/dist/p2p_ring.cu:

# %%
ring_src = (repo / "src" / "dist" / "p2p_ring.cu").read_text()
start = ring_src.index("template <typename T>\n__global__ void p2p_ring_kernel")
print(ring_src[start:ring_src.index("mt_status p2p_launch_ring")])

# %% [markdown]
# ## The barrier across GPUs
# Two kernels on two GPUs cannot call `__syncthreads()` together: they meet
# through memory. Each rank owns a small array of flags in its memory; to
# pass barrier number `v`, block `b` of rank `s` stores `v` into slot
# `[b][s]` of **every** rank's flags, then waits until its own slots
# `[b][0..N-1]` all hold at least `v`. The details matter, and each is a
# classic bug:
#
# - the numbers only grow (the host carries the count from call to call), so
#   no flag is reset and a slow rank cannot miss a signal: wait for `>= v`;
# - the store is a **release at system scope** (`st.release.sys`) and the
#   wait an **acquire at system scope** (`ld.acquire.sys`): otherwise the
#   data written before the barrier may reach the peer *after* the flag,
#   and the peer reads stale values. `__threadfence()` orders only for this
#   GPU's threads; `__threadfence_system()` is the fence that covers peers;
# - one thread signals every peer *before* waiting for any, or two ranks can
#   each wait for a signal the other has not sent;
# - every block that the barrier waits for must be running: a kernel has at
#   most one block per SM (`kP2PMaxBlocks`), or a block spinning on an SM
#   could wait forever for a block that needs that SM.

# %%
internal = (repo / "src" / "dist" / "p2p_internal.h").read_text()
start = internal.index("MT_DEVICE void p2p_barrier")
print(internal[start:internal.index("/* 16 bytes of T")])

# %% [markdown]
# ### How the emulator runs it
# The emulator normally runs a launch to its end before the next one starts,
# a few blocks at a time. Rank 0's kernel would then wait at its first
# barrier for rank 1's kernel, which has not been launched: a deadlock. So
# the host code launches the ranks' kernels inside a *launch group*
# (`mt_emu::begin_launch_group` / `end_launch_group`, src/emu/emu_group.cpp):
# the launches are held, and the group runs every block of every device at
# once, each on an OS thread of its own (co-resident, as on the GPU).
# Waiting yields the CPU, and a barrier that a rank never reaches fails
# with an error after `MINITENSOR_EMU_WAIT` seconds instead of hanging.

# %% [markdown]
# ## Where each rung should win: a latency-bandwidth model
# Time ~ barriers x `alpha` + bytes read x `1/beta`. The numbers below are
# assumptions for an NVLink/NVSwitch machine (a barrier a few microseconds,
# about 150 GB/s that one GPU pulls from its peers with plain loads), only
# to show the shape; `bench/p2p_allreduce.py` measures the real curves
# against NCCL's all-reduce, and docs/distributed.md has the results.

# %%
alpha_us, beta_gbs = 3.0, 150.0
sizes = 2.0 ** np.arange(10, 29)  # 1 KiB .. 256 MiB
plans = {  # rung: (barriers, bytes read per byte of buffer), for N GPUs
    "oneshot": lambda N: (1, N - 1),
    "twoshot": lambda N: (2, 2 * (N - 1) / N),
    "ring": lambda N: (2 * (N - 1), 2 * (N - 1) / N),
}
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
for ax, N in zip(axes, [2, 8]):
    for rung, plan in plans.items():
        barriers, factor = plan(N)
        t_us = barriers * alpha_us + sizes * factor / (beta_gbs * 1e3)
        busbw = sizes / (t_us * 1e-6) / 1e9 * 2 * (N - 1) / N
        ax.plot(sizes, busbw, label=rung)
    ax.set_xscale("log", base=2)
    ax.set_title(f"model, {N} GPUs")
    ax.set_xlabel("bytes per GPU")
axes[0].set_ylabel("busbw (GB/s)")
axes[0].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# With two GPUs oneshot and twoshot read the same amount (N-1 = 2(N-1)/N =
# 1) and oneshot wins everywhere; with more GPUs oneshot reads N/2 times
# more and loses once the bytes outweigh the barrier. The ring is never the
# fastest here: on a switch every pair talks at once, so twoshot moves the
# ring's bytes with two barriers. That is why `rung="auto"` picks oneshot up
# to `oneshot_max_bytes()` and twoshot above.

# %%
group.close()
if mt.backend() == "emulator":
    emulate_devices(1)
