"""perf_model_roofline: the roofline half of the performance model (perf_model.py).

The device (``Device``: from a table of known GPUs, or the runtime's
properties), a configuration (``TileConfig``, parsed from the name the
library gives it), a matmul problem (``MatmulProblem``), and the predicted
time of a GEMM-shaped kernel from first principles (``gemm_roofline``; see
perf_model.py's docstring for what it counts).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Optional



# ---- the device -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    """What the roofline needs of a GPU. Flop rates count a multiply-add as 2."""

    name: str
    sms: int
    clock_hz: float
    fp32_lanes: int  # FP32 FMA lanes per SM
    fp64_lanes: int
    dram_bytes_s: float
    l2_bytes_s: float
    smem_per_sm: int = 228 * 1024
    regs_per_sm: int = 65536
    threads_per_sm: int = 2048
    launch_s: float = 3e-6

    def peak_flops(self, itemsize: int) -> float:
        lanes = self.fp32_lanes if itemsize <= 4 else self.fp64_lanes
        return 2.0 * lanes * self.sms * self.clock_hz


# Known devices (data sheets: boost clock, FMA lanes per SM, DRAM bandwidth;
# L2 bandwidth about 1.6x-2x DRAM's, measured by microbenchmarks). Matched by
# a substring of the device name, first match wins.
KNOWN_DEVICES: list[tuple[str, Device]] = [
    ("H100 PCIe", Device("H100 PCIe", 114, 1.755e9, 128, 64, 2.0e12, 4.5e12)),
    ("H100", Device("H100 SXM", 132, 1.98e9, 128, 64, 3.35e12, 5.5e12)),
    ("H200", Device("H200", 132, 1.98e9, 128, 64, 4.8e12, 6.0e12)),
    ("A100", Device("A100", 108, 1.41e9, 64, 32, 2.0e12, 4.0e12, smem_per_sm=164 * 1024)),
    ("L40", Device("L40S", 142, 2.52e9, 128, 2, 0.86e12, 2.0e12, smem_per_sm=100 * 1024, threads_per_sm=1536)),
    # The emulator runs a block at a time on the CPU: a "device" of its own,
    # slow and with little bandwidth; the model runs there as anywhere.
    ("emulator", Device("minitensor CPU emulator", 2, 1e9, 1, 1, 4e9, 8e9, launch_s=2e-5)),
]

# By compute capability when the name is unknown: FP32 and FP64 lanes per SM.
_LANES = {7: (64, 32), 8: (64, 32), 9: (128, 64)}


def device_from_key(key: str, props: Optional[dict[str, Any]] = None) -> Device:
    """The Device of minitensor's device key ("<name>|sm_90|132sm"), from the
    table of known devices, else from the compute capability with a guessed
    clock and bandwidth; then the properties the runtime reported (props, as
    bench/perf_model.py saves them: cupy's names) replace the table's values."""
    name, _, rest = key.partition("|")
    match = re.search(r"sm_(\d)(\d+)\|(\d+)sm", rest)
    major = int(match.group(1)) if match else 8
    sms = int(match.group(3)) if match else 80
    device = next((d for pattern, d in KNOWN_DEVICES if pattern.lower() in name.lower()), None)
    if device is None:
        lanes = _LANES.get(major, (128, 2) if major == 8 else (64, 32))
        device = Device(name, sms, 1.5e9, lanes[0], lanes[1], 1.0e12, 2.0e12)
    device = replace(device, sms=sms)
    props = props or {}
    if props.get("clockRate"):
        device = replace(device, clock_hz=props["clockRate"] * 1e3)
    if props.get("memoryClockRate") and props.get("memoryBusWidth"):
        # Double data rate: two transfers per clock of the bus's width.
        dram = 2.0 * props["memoryClockRate"] * 1e3 * props["memoryBusWidth"] / 8
        device = replace(device, dram_bytes_s=dram, l2_bytes_s=max(device.l2_bytes_s, 1.6 * dram))
    for field, prop in (("smem_per_sm", "sharedMemPerMultiprocessor"), ("regs_per_sm", "regsPerMultiprocessor"),
                        ("threads_per_sm", "maxThreadsPerMultiProcessor")):
        if props.get(prop):
            device = replace(device, **{field: int(props[prop])})
    return device


# ---- the configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class TileConfig:
    """A GEMM kernel's configuration: block tile bm x bn x bk (bk for float32;
    float64 halves it), warp tile wm x wn, stages of shared memory, threads,
    and the blocks per SM its __launch_bounds__ asks room for (0: unsaid);
    splits: the slices K is cut into (split-K: a partial product per slice,
    then a pass that adds them; 1: no split; 0: as many as fill the GPU,
    chosen per product as src/matmul_warptile.cu's split_count does)."""

    rung: str
    bm: int
    bn: int
    bk: int
    wm: int
    wn: int
    stages: int
    threads: int
    min_blocks: int = 0
    splits: int = 1


_NAME = re.compile(r"^(?:(pipelined) )?(\d+)x(\d+)x(\d+) warp (\d+)x(\d+)(?:, (\d+) stages)?"
                   r"(?:, fragments prefetched)?(?:, split K (\d+|to fill the GPU))? "
                   r"\((\d+) threads(?:, (\d+) blocks?/SM)?\)$")


def parse_config(name: str) -> TileConfig:
    """The TileConfig a matmul configuration's name describes (warptile keeps two
    stages: a tile in shared memory while the next is staged in registers)."""
    match = _NAME.match(name)
    if match is None:
        raise ValueError(f"perf_model: cannot read the matmul configuration name {name!r}")
    pipelined, bm, bn, bk, wm, wn, stages, splits, threads, blocks = match.groups()
    return TileConfig("pipelined" if pipelined else "warptile", int(bm), int(bn), int(bk), int(wm), int(wn),
                      int(stages) if stages else 2, int(threads), int(blocks) if blocks else 0,
                      (0 if splits == "to fill the GPU" else int(splits)) if splits else 1)


# ---- the roofline -----------------------------------------------------------------------------

# Latencies in cycles: a barrier with the shared-memory reads around it, and a
# global load's round trip (DRAM or L2) that a stage must cover.
BARRIER_CYCLES = 60
GLOBAL_LATENCY_CYCLES = 700
SMEM_BYTES_PER_CYCLE = 128  # 32 banks of 4 bytes


@dataclass(frozen=True)
class Roofline:
    """The terms of a prediction (seconds), kept for the learned model's features."""

    time: float
    compute: float
    memory: float
    waves: int
    last_wave_fill: float  # the last wave's blocks over the slots of a wave
    padding: float  # multiply-adds computed over those of the problem (>= 1)
    occupancy: int  # blocks an SM holds


def blocks_per_sm(cfg: TileConfig, itemsize: int, device: Device) -> int:
    """Blocks of cfg an SM holds at once: the least of what its shared memory,
    registers and threads allow (at least one: the kernel does launch)."""
    bk = cfg.bk if itemsize <= 4 else max(1, cfg.bk // 2)
    smem = cfg.stages * bk * (cfg.bm + cfg.bn + 8) * itemsize
    per_thread = cfg.bm * cfg.bn // cfg.threads  # accumulators
    words = itemsize // 4 if itemsize > 4 else 1
    regs = words * (per_thread + 2 * int(math.sqrt(per_thread)) * 2) + 32
    cap = 255 if cfg.min_blocks == 0 else min(255, device.regs_per_sm // (cfg.threads * cfg.min_blocks))
    regs = min(regs, cap)
    by_smem = device.smem_per_sm // max(smem, 1)
    by_regs = device.regs_per_sm // (regs * cfg.threads)
    by_threads = device.threads_per_sm // cfg.threads
    return max(1, min(by_smem, by_regs, by_threads, 32))


def gemm_roofline(m: int, n: int, k: int, batches: int, itemsize: int, cfg: TileConfig, device: Device,
                  inner_efficiency: float = 1.0) -> Roofline:
    """The predicted time of a GEMM-shaped kernel of configuration cfg: a block
    per BM x BN tile of each batch's M x N output, looping over K by BK."""
    bk = cfg.bk if itemsize <= 4 else max(1, cfg.bk // 2)
    tiles = math.ceil(m / cfg.bm) * math.ceil(n / cfg.bn) * batches
    k_tiles = max(1, math.ceil(k / bk))
    occupancy = blocks_per_sm(cfg, itemsize, device)
    slots = device.sms * occupancy
    waves = max(1, math.ceil(tiles / slots))
    full_waves, rest = divmod(tiles, slots)
    lanes = device.fp32_lanes if itemsize <= 4 else device.fp64_lanes
    # One k-tile of one block on a whole SM: the FMA pipes against the shared-memory banks.
    warps = cfg.threads // 32
    # Issue slots: a scheduler (4 an SM) issues one warp instruction a cycle,
    # FMAs and the rest alike. Per k a thread of a WM x WN warp tile does
    # (WM / 8) x (WN / 4) FMAs and loads its fragments with 16-byte shared
    # loads, and once per k-tile copies its share of the next tile (a global
    # load and a shared store per 16 bytes), plus a little loop arithmetic.
    fmas = (cfg.wm // 8) * (cfg.wn // 4)
    vector = 16 // itemsize
    others = (cfg.wm // 8 + cfg.wn // 4) / vector + 2 * (cfg.bm + cfg.bn) * bk / cfg.threads / vector / bk + 2
    # An FMA occupies the pipe 128 / lanes cycles (2 for float64 on an H100): the other instructions fit between.
    per_warp_k = max(fmas * 128 / lanes, fmas + others)
    issue_cycles = warps * per_warp_k * bk / 4
    smem_cycles = warps * (cfg.wm + cfg.wn) * bk * itemsize / SMEM_BYTES_PER_CYCLE
    tile_cycles = max(issue_cycles, smem_cycles) / inner_efficiency

    def wave_cycles(resident: int) -> float:
        """An SM running `resident` blocks through all their k-tiles: their
        work back to back, plus whatever latency the others cannot cover."""
        work = resident * tile_cycles
        latency = BARRIER_CYCLES + max(0.0, GLOBAL_LATENCY_CYCLES - (cfg.stages - 1) * work)
        return k_tiles * (work + max(0.0, latency - (resident - 1) * tile_cycles))

    cycles = full_waves * wave_cycles(occupancy)
    if rest:
        cycles += wave_cycles(math.ceil(rest / device.sms))
    compute = cycles / device.clock_hz
    # Memory: every block streams its A and B panels through L2; DRAM sees each operand once.
    l2_bytes = tiles * (cfg.bm + cfg.bn) * k_tiles * bk * itemsize + m * n * batches * itemsize
    dram_bytes = (m * k + k * n + m * n) * batches * itemsize
    memory = max(l2_bytes / device.l2_bytes_s, dram_bytes / device.dram_bytes_s)
    padding = (math.ceil(m / cfg.bm) * cfg.bm * math.ceil(n / cfg.bn) * cfg.bn * k_tiles * bk) / max(1, m * n * k)
    return Roofline(device.launch_s + max(compute, memory), compute, memory, waves,
                    rest / slots if rest else 1.0, padding, occupancy)


@dataclass(frozen=True)
class MatmulProblem:
    """out (batches, M, N) = a (batches, M, K) @ b (batches, K, N); layout "NN",
    "TN", "NT" or "TT" (T: that operand is a transposed view)."""

    m: int
    n: int
    k: int
    batches: int = 1
    dtype: str = "float32"
    layout: str = "NN"

    @property
    def itemsize(self) -> int:
        return 8 if self.dtype == "float64" else 4

    def key(self) -> tuple[float, ...]:
        """Where the problem lies for the distance to training data: log2 sizes."""
        return tuple(math.log2(max(1, s)) for s in (self.m, self.n, self.k, self.batches))

    def category(self) -> str:
        """Problems of one category are near each other if their sizes are (the
        layout is a feature the model learns across)."""
        return f"matmul {self.dtype}"
