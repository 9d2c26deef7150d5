"""perf_model_conv: the roofline of the convolution's forward rungs (perf_model.py's model).

A convolution of x (N, C, H, W) by w (C_out, C / groups, KH, KW) is, per
group, a matrix product: M = C_out / groups output channels, columns = the
N x OH x OW output pixels, K = C / groups x KH x KW window elements. The
three forward rungs (``mt.kernels.conv2d(algo=...)``) differ in how they
feed that product:

- ``implicit_gemm`` (src/conv_implicit_gemm.cu): warptile's register tiling,
  the windows gathered into shared memory tile by tile (never written);
  a 128 x 128 x 16 tile, or 64 x 128 when a group has at most 64 rows;
- ``im2col``: the windows copied into a (N, C KH KW, OH OW) tensor, written
  and read back once, then a batched matmul with the library's own tile
  (the biggest tile that still gives every SM a block);
- ``tiled`` (src/conv.cu): a block per 16 x 16 output tile of one channel,
  one multiply-add per shared-memory load (no register tiling), so the
  shared-memory banks (32 loads a cycle against 128 FMA lanes) set its pace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .perf_model_roofline import Device, MatmulProblem, Roofline, TileConfig, gemm_roofline

IGEMM_WIDE = TileConfig("implicit_gemm", 128, 128, 16, 64, 32, 2, 256, 1)
IGEMM_NARROW = TileConfig("implicit_gemm", 64, 128, 16, 32, 64, 2, 128, 3)
# The library's default matmul tiles (src/matmul_warptile.cu, warptile_default_config).
_DEFAULT_TILES = (TileConfig("warptile", 256, 128, 8, 64, 64, 2, 256, 1),
                  TileConfig("warptile", 128, 128, 16, 64, 32, 2, 256, 1),
                  TileConfig("warptile", 128, 64, 16, 64, 32, 2, 128, 0),
                  TileConfig("warptile", 64, 64, 16, 32, 32, 2, 128, 0))
CONV_RUNGS = ("im2col", "tiled", "implicit_gemm")


@dataclass(frozen=True)
class ConvProblem:
    """conv2d(x (n, c_in, h, w), weight (c_out, c_in / groups, *kernel))."""

    n: int
    c_in: int
    h: int
    w: int
    c_out: int
    kernel: tuple[int, int] = (3, 3)
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    dtype: str = "float32"

    @property
    def itemsize(self) -> int:
        return 8 if self.dtype == "float64" else 4

    def out_hw(self) -> tuple[int, int]:
        return tuple(  # type: ignore[return-value]
            (size + 2 * p - d * (k - 1) - 1) // s + 1
            for size, k, s, p, d in zip((self.h, self.w), self.kernel, self.stride, self.padding, self.dilation))

    def gemm(self) -> tuple[int, int, int, int]:
        """(M, N, K, batches) of the product per group: batches = groups."""
        oh, ow = self.out_hw()
        k = self.c_in // self.groups * self.kernel[0] * self.kernel[1]
        return max(1, self.c_out // self.groups), max(1, self.n * oh * ow), max(1, k), self.groups

    def key(self) -> tuple[float, ...]:
        return tuple(math.log2(s) for s in self.gemm())

    def category(self) -> str:
        return f"conv {self.dtype}"


def default_tile(m: int, n: int, batches: int, itemsize: int, device: Device) -> TileConfig:
    """The tile the library takes without a tuned choice: the biggest that gives every SM a block."""
    for tile in _DEFAULT_TILES:
        if tile.bm == 256 and itemsize != 4:
            continue
        if math.ceil(m / tile.bm) * math.ceil(n / tile.bn) * batches >= device.sms or tile is _DEFAULT_TILES[-1]:
            return tile
    return _DEFAULT_TILES[-1]


def conv_roofline(problem: ConvProblem, rung: str, device: Device) -> Roofline:
    """The predicted time of one forward rung on the problem."""
    m, n, k, groups = problem.gemm()
    size = problem.itemsize
    oh, ow = problem.out_hw()
    in_bytes = problem.n * problem.c_in * problem.h * problem.w * size
    out_bytes = problem.n * problem.c_out * oh * ow * size
    if rung == "implicit_gemm":
        tile = IGEMM_NARROW if m <= IGEMM_NARROW.bm else IGEMM_WIDE
        r = gemm_roofline(m, n, k, groups, size, tile, device)
        # DRAM sees the input (not the windows) and the output once.
        memory = max(r.memory, (in_bytes + out_bytes) / device.dram_bytes_s)
        return Roofline(device.launch_s + max(r.compute, memory), r.compute, memory, r.waves, r.last_wave_fill,
                        r.padding, r.occupancy)
    if rung == "im2col":
        # The column matrix (N, groups K, OH OW) written once and read back by the product.
        cols = problem.n * groups * k * oh * ow * size
        copy = (in_bytes + cols) / device.dram_bytes_s + device.launch_s
        tile = default_tile(m, oh * ow, problem.n * groups, size, device)
        product = MatmulProblem(m, oh * ow, k, problem.n * groups, problem.dtype)
        r = gemm_roofline(product.m, product.n, product.k, product.batches, size, tile, device)
        return Roofline(copy + r.time, r.compute, r.memory + copy, r.waves, r.last_wave_fill, r.padding,
                        r.occupancy)
    if rung == "tiled":
        tiles = problem.n * problem.c_out * math.ceil(oh / 16) * math.ceil(ow / 16)
        slots = device.sms * max(1, device.threads_per_sm // 256)
        waves = max(1, math.ceil(tiles / slots))
        # Each of a block's 256 outputs: K multiply-adds, each with a load from
        # shared memory; a wave runs at the banks' 32 loads a cycle per SM.
        per_block = 256 * k
        loads_per_cycle = 32 / (size // 4 if size > 4 else 1)
        compute = waves * (slots // device.sms) * per_block / loads_per_cycle / device.clock_hz
        patch = (16 * problem.stride[0] + problem.kernel[0]) * (16 * problem.stride[1] + problem.kernel[1])
        l2 = tiles * patch * (problem.c_in // problem.groups) * size
        memory = max(l2 / device.l2_bytes_s, (in_bytes + out_bytes) / device.dram_bytes_s)
        padding = math.ceil(oh / 16) * 16 * math.ceil(ow / 16) * 16 / (oh * ow)
        return Roofline(device.launch_s + max(compute, memory), compute, memory, waves,
                        (tiles % slots) / slots if tiles % slots else 1.0, padding, slots // device.sms)
    raise ValueError(f"perf_model: unknown convolution rung {rung!r}; one of {CONV_RUNGS}")
