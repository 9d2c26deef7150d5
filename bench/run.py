#!/usr/bin/env python3
"""bench/run.py: minitensor against PyTorch (and CuPy) on the GPU, one command.

    python3 bench/run.py --out docs/performance.md        # on the GPU machine
    python3 bench/run.py --quick                          # fewer repeats, no file

Every case runs minitensor (the Python package, MINITENSOR_BACKEND=cuda) and
PyTorch (CuPy where it has the op) in this one process, on the same inputs
(minitensor's tensors are device-to-device copies of torch's), after checking
minitensor's output against torch's. Each timing is the median of many runs
bracketed by CUDA events, after warm-up runs. Both libraries launch on the
legacy default stream (checked below), so torch.cuda.Event times minitensor's
kernels too. matmul runs in float32 with TF32 off in torch
(torch.backends.cuda.matmul.allow_tf32 = False), as minitensor computes true
float32 products.

Bytes (for GB/s) count what each op must move at least: every input element
read once (a broadcast row vector once, not once per row) and every output
element written once. FLOP/s count 2 * M * N * K per product. "vs torch" is
torch's time over minitensor's: above 1 minitensor is faster.

Besides the benchmark cases it times every rung of the kernel ladders
(matmul, reduction, transpose copy) and every warptile configuration, and
writes docs/performance.md: the tables, the device, the date, the driver and
CUDA versions, a plot (docs/performance.png), the targets met or missed, and
the hand-written, ncu-measured analysis in bench/limits.md.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

os.environ.setdefault("MINITENSOR_BACKEND", "cuda")


REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import json  # noqa: E402

import numpy as np  # noqa: E402

# torch, CuPy and minitensor are imported by load_libraries(): --render
# (re-writing the report from a saved JSON file) needs none of them.
torch: Any = None
cupy: Any = None
mt: Any = None


def load_libraries() -> None:
    global torch, cupy, mt
    import torch as torch_module

    import minitensor as mt_module

    torch, mt = torch_module, mt_module
    try:
        import cupy as cupy_module

        cupy = cupy_module
    except Exception:  # noqa: BLE001 - CuPy is optional
        cupy = None

F32 = 4  # bytes per float32


# ---- moving data between the two libraries (same device, same process) -----------------


def to_mt(t: torch.Tensor) -> mt.Tensor:
    """A minitensor copy of a contiguous float32/float64 torch tensor (device to device)."""
    t = t.contiguous()
    dtype = mt.float32 if t.dtype == torch.float32 else mt.float64
    return mt.kernels.from_device_pointer(t.data_ptr(), tuple(t.shape), dtype)


def to_torch(x: mt.Tensor) -> torch.Tensor:
    """A torch copy of a minitensor tensor (made contiguous first)."""
    x = x.contiguous()
    dtype = torch.float32 if x.dtype is mt.float32 else torch.float64
    t = torch.empty(tuple(x.shape), dtype=dtype, device="cuda")
    mt.kernels.to_device_pointer(x, t.data_ptr())
    return t


def rel_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    """||got - ref|| / ||ref|| in float64 (NaN anywhere gives inf)."""
    got = got.double()
    ref = ref.double()
    if got.shape != ref.shape:
        return math.inf
    if torch.isnan(got).any():
        return math.inf
    denom = ref.norm().item()
    return (got - ref).norm().item() / (denom if denom > 0 else 1.0)


# ---- timing -----------------------------------------------------------------------------


# GPU cycles of busy-waiting queued before each timed region (about 1 ms).
SPIN_CYCLES = 2_000_000


def time_gpu(fn: Callable[[], Any], warmup: int, iters: int) -> float:
    """Median seconds of fn() over iters runs, each bracketed by CUDA events.

    A spin kernel of ~1 ms is queued before the start event, so that the host
    has enqueued the whole of fn()'s work (Python, allocation, launches) by
    the time the GPU reaches the start event: the events then measure the
    GPU's work, not the host's overhead, for both libraries alike. (Host
    overhead is measured on its own by the latency case.)"""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return float(np.median(times))


def iters_for(seconds_estimate: float, quick: bool) -> tuple[int, int]:
    """(warm-up, timed runs): more runs for short ops, at least 3."""
    budget = 0.05 if quick else 0.4  # seconds of timed runs per library and case
    iters = int(min(100, max(3, budget / max(seconds_estimate, 1e-6))))
    return (2 if quick else 3), iters


class Results:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, **row: Any) -> None:
        self.rows.append(row)
        self.print_row(row)

    @staticmethod
    def print_row(r: dict[str, Any]) -> None:
        rate = f"{r['mt_rate']:8.1f} {r['unit']}" if r.get("mt_rate") is not None else " " * 15
        vs = f"{r['vs_torch']:5.2f}x" if r.get("vs_torch") else "   -  "
        ok = "ok" if r["ok"] else "WRONG"
        print(f"  {r['group']:10s} {r['case']:44s} {r['mt_ms']:9.3f} ms {rate}  torch {r['torch_ms'] or float('nan'):9.3f} ms "
              f"vs torch {vs}  {ok} (err {r['err']:.1e})", flush=True)


def bench_case(res: Results, group: str, case: str, mt_fn: Callable[[], Any], torch_fn: Optional[Callable[[], Any]],
               *, bytes_moved: float = 0.0, flops: float = 0.0, tol: float = 1e-5, quick: bool = False,
               cupy_fn: Optional[Callable[[], Any]] = None, check: bool = True, target: Optional[float] = None,
               ref: Optional[torch.Tensor] = None) -> dict[str, Any]:
    """Checks mt_fn() against torch_fn() (or ref), then times both (and cupy_fn)."""
    err = 0.0
    if check:
        got = to_torch(mt_fn())
        want = ref if ref is not None else torch_fn()
        err = rel_error(got, want)
        del got
    ok = err <= tol
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    mt_fn()
    torch.cuda.synchronize()
    estimate = time.perf_counter() - t0
    warmup, iters = iters_for(estimate, quick)
    mt_s = time_gpu(mt_fn, warmup, iters)
    torch_s = time_gpu(torch_fn, warmup, iters) if torch_fn is not None else None
    cupy_s = time_gpu(cupy_fn, warmup, iters) if cupy_fn is not None else None
    if flops:
        unit, mt_rate, torch_rate = "TFLOP/s", flops / mt_s / 1e12, (flops / torch_s / 1e12 if torch_s else None)
    elif bytes_moved:
        unit, mt_rate, torch_rate = "GB/s", bytes_moved / mt_s / 1e9, (bytes_moved / torch_s / 1e9 if torch_s else None)
    else:
        unit, mt_rate, torch_rate = "", None, None
    row = dict(group=group, case=case, mt_ms=mt_s * 1e3, torch_ms=torch_s * 1e3 if torch_s else None,
               cupy_ms=cupy_s * 1e3 if cupy_s else None, unit=unit, mt_rate=mt_rate, torch_rate=torch_rate,
               vs_torch=(torch_s / mt_s) if torch_s else None, ok=ok, err=err, target=target)
    res.add(**row)
    return row


# ---- the cases --------------------------------------------------------------------------


def elementwise_cases(res: Results, quick: bool) -> None:
    n = 1 << 28
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    ma, mb = to_mt(a), to_mt(b)
    ca, cb = (cupy.from_dlpack(a), cupy.from_dlpack(b)) if cupy else (None, None)
    bench_case(res, "elementwise", "a + b (2^28)", lambda: ma + mb, lambda: a + b, bytes_moved=3 * n * F32,
               quick=quick, cupy_fn=(lambda: ca + cb) if cupy else None, target=0.95)
    bench_case(res, "elementwise", "exp(a) (2^28)", lambda: ma.exp(), lambda: a.exp(), bytes_moved=2 * n * F32,
               quick=quick, cupy_fn=(lambda: cupy.exp(ca)) if cupy else None, target=0.95, tol=1e-6)
    del a, b, ma, mb, ca, cb

    s = 16384
    A = torch.randn(s, s, device="cuda")
    B = torch.randn(s, s, device="cuda")
    r = torch.randn(s, device="cuda")
    mA, mB, mr = to_mt(A), to_mt(B), to_mt(r)
    cA, cB, cr = (cupy.from_dlpack(A), cupy.from_dlpack(B), cupy.from_dlpack(r)) if cupy else (None,) * 3
    bench_case(res, "elementwise", "A + row (16384^2, broadcast)", lambda: mA + mr, lambda: A + r,
               bytes_moved=2 * s * s * F32, quick=quick, cupy_fn=(lambda: cA + cr) if cupy else None, target=1.5)
    bench_case(res, "elementwise", "A + B.T (16384^2)", lambda: mA + mB.T, lambda: A + B.T,
               bytes_moved=3 * s * s * F32, quick=quick, cupy_fn=(lambda: cA + cB.T) if cupy else None, target=1.5)
    bench_case(res, "elementwise", "A.T.contiguous() (16384^2)", lambda: mA.T.contiguous(),
               lambda: A.T.contiguous(), bytes_moved=2 * s * s * F32, quick=quick,
               cupy_fn=(lambda: cupy.ascontiguousarray(cA.T)) if cupy else None, target=1.5)
    # The transpose ladder (mt_copy_variant), into an output allocated once.
    for algo in mt.kernels.algorithms("copy"):
        out = mt.empty(s, s)
        bench_case(res, "ladder:copy", f"A.T -> contiguous, {algo}",
                   lambda algo=algo, out=out: mt.kernels.copy(mA.T, algo, out=out), None,
                   ref=A.T.contiguous(), bytes_moved=2 * s * s * F32, quick=quick)
        del out

    # Reductions and softmax at 16384^2.
    tol_sum = 1e-5
    bench_case(res, "reduce", "A.sum(dim=1) (last dim)", lambda: mA.sum(dim=1), lambda: A.sum(dim=1),
               bytes_moved=s * s * F32, quick=quick, tol=tol_sum,
               cupy_fn=(lambda: cA.sum(axis=1)) if cupy else None, target=0.95)
    bench_case(res, "reduce", "A.sum(dim=0) (first dim)", lambda: mA.sum(dim=0), lambda: A.sum(dim=0),
               bytes_moved=s * s * F32, quick=quick, tol=tol_sum,
               cupy_fn=(lambda: cA.sum(axis=0)) if cupy else None, target=0.95)
    # The sum of 2^28 standard normals is about 2^14 while its terms' magnitudes
    # add up to about 2^27.7: any float32 order of additions errs by ~1e-5 of the
    # result (torch's own sum too), so the check is against the float64 sum,
    # with the bound of a tree of float32 additions: 2^-24 * log2(n) * sum|x| / |sum|.
    exact = A.double().sum()
    tol_all = 2.0 ** -24 * math.log2(s * s) * A.double().abs().sum().item() / abs(exact.item())
    bench_case(res, "reduce", "A.sum() (all)", lambda: mA.sum(), lambda: A.sum(), bytes_moved=s * s * F32,
               quick=quick, tol=tol_all, cupy_fn=(lambda: cA.sum()) if cupy else None, target=0.95, ref=exact)
    bench_case(res, "reduce", "A.max(dim=1) (last dim)", lambda: mA.amax(dim=1), lambda: A.amax(dim=1),
               bytes_moved=s * s * F32, quick=quick, tol=0.0,
               cupy_fn=(lambda: cA.max(axis=1)) if cupy else None, target=0.95)
    bench_case(res, "reduce", "softmax(A, dim=-1)", lambda: mA.softmax(-1), lambda: torch.softmax(A, -1),
               bytes_moved=2 * s * s * F32, quick=quick, tol=1e-5, target=1.0)
    # The reduction ladder (mt_reduce_variant), sum over the last dim.
    for algo in mt.kernels.algorithms("reduce"):
        out = mt.empty(s, 1)
        bench_case(res, "ladder:reduce", f"A.sum(dim=1), {algo}",
                   lambda algo=algo, out=out: mt.kernels.reduce(mA, "sum", 1, algo, keepdim=True, out=out), None,
                   ref=A.sum(dim=1, keepdim=True), bytes_moved=s * s * F32, quick=quick, tol=tol_sum)
        del out
    del A, B, r, mA, mB, mr, cA, cB, cr


def norm_cases(res: Results, quick: bool) -> None:
    """Layer normalization of 16384 rows of 4096 (torch measured 1.87 TB/s forward
    there): the fused kernels (src/layernorm.cu) and the composite of eight ops."""
    import minitensor.nn.functional as F

    rows, n = 16384, 4096
    gen = torch.Generator(device="cuda").manual_seed(3)
    X = torch.randn(rows, n, device="cuda", generator=gen)
    W, Bias = torch.randn(n, device="cuda", generator=gen), torch.randn(n, device="cuda", generator=gen)
    G = torch.randn(rows, n, device="cuda", generator=gen)
    mX, mW, mB, mG = to_mt(X), to_mt(W), to_mt(Bias), to_mt(G)

    def mt_forward(fn: Callable[..., Any]) -> Callable[[], Any]:
        def run() -> Any:
            with mt.no_grad():
                return fn(mX, (n,), mW, mB)
        return run

    torch_forward = lambda: torch.nn.functional.layer_norm(X, (n,), W, Bias)  # noqa: E731
    bench_case(res, "norm", "layer_norm forward, fused", mt_forward(F.layer_norm), torch_forward,
               bytes_moved=2 * rows * n * F32, quick=quick, tol=1e-5, target=1.3)
    bench_case(res, "norm", "layer_norm forward, composite (8 ops)", mt_forward(F.layer_norm_composite),
               torch_forward, bytes_moved=2 * rows * n * F32, quick=quick, tol=1e-5)

    mXg, tXg = mX.detach().requires_grad_(True), X.detach().requires_grad_(True)

    def mt_both(fn: Callable[..., Any]) -> Callable[[], Any]:
        def run() -> Any:
            mXg.grad = None
            fn(mXg, (n,), mW, mB).backward(mG)
            return mXg.grad
        return run

    def torch_both() -> Any:
        tXg.grad = None
        torch.nn.functional.layer_norm(tXg, (n,), W, Bias).backward(G)
        return tXg.grad

    # Forward and backward read x and g and write y and dx: 4 passes at the least.
    bench_case(res, "norm", "layer_norm forward + backward (dx), fused", mt_both(F.layer_norm), torch_both,
               bytes_moved=4 * rows * n * F32, quick=quick, tol=1e-4, target=1.0)
    bench_case(res, "norm", "layer_norm forward + backward (dx), composite", mt_both(F.layer_norm_composite),
               torch_both, bytes_moved=4 * rows * n * F32, quick=quick, tol=1e-4)

    # All three gradients, as a model's LayerNorm needs them: one pass over g and
    # x for dx and the parameters' partial sums, then one column sum.
    mWg, mBg = mW.detach().requires_grad_(True), mB.detach().requires_grad_(True)
    tWg, tBg = W.detach().requires_grad_(True), Bias.detach().requires_grad_(True)

    def mt_all_grads() -> Any:
        mXg.grad = mWg.grad = mBg.grad = None
        F.layer_norm(mXg, (n,), mWg, mBg).backward(mG)
        return mWg.grad

    def torch_all_grads() -> Any:
        tXg.grad = tWg.grad = tBg.grad = None
        torch.nn.functional.layer_norm(tXg, (n,), tWg, tBg).backward(G)
        return tWg.grad

    bench_case(res, "norm", "layer_norm forward + backward (dx, dweight, dbias)", mt_all_grads, torch_all_grads,
               bytes_moved=4 * rows * n * F32, quick=quick, tol=1e-4, target=1.0)
    del X, G, mX, mG, mXg, tXg, mWg, mBg, tWg, tBg

    # torch.max(dim) returns values and int64 indices: one pass over the rows.
    A = torch.randn(rows, n, device="cuda", generator=gen)
    mA = to_mt(A)
    got, want = mA.max(dim=1), A.max(dim=1)
    same = torch.equal(to_torch(got.values), want.values) and torch.equal(
        to_torch(got.indices.double()).long(), want.indices)
    row = bench_case(res, "rows", "A.max(dim=1) values and indices (16384 x 4096)", lambda: mA.max(dim=1),
                     lambda: A.max(dim=1), bytes_moved=rows * n * F32, quick=quick, check=False, target=1.0)
    if not same:
        row["ok"] = False
        print("  rows: A.max(dim=1): the values or the indices differ from torch's", flush=True)
    bench_case(res, "rows", "A.max(dim=1) values only (amax)", lambda: mA.amax(dim=1), lambda: A.amax(dim=1),
               bytes_moved=rows * n * F32, quick=quick, tol=0.0)
    # The same rows on three rungs of the reduction ladder, for the choice of
    # default: max (values) and argmax (the (value, index) pass of max(dim)).
    for algo in ("warp_shuffle", "vectorized", "warp_rows"):
        bench_case(res, "rows", f"A.amax(dim=1), rung {algo}", lambda a=algo: mt.kernels.reduce(mA, "max", 1, a),
                   lambda: A.amax(dim=1), bytes_moved=rows * n * F32, quick=quick, tol=0.0)
        row = bench_case(res, "rows", f"A.argmax(dim=1), rung {algo}",
                         lambda a=algo: mt.kernels.reduce(mA, "argmax", 1, a), lambda: A.argmax(dim=1),
                         bytes_moved=rows * n * F32, quick=quick, check=False)
        if not torch.equal(to_torch(mt.kernels.reduce(mA, "argmax", 1, algo).double()).long(), A.argmax(dim=1)):
            row["ok"] = False
            print(f"  rows: A.argmax(dim=1) on rung {algo}: the indices differ from torch's", flush=True)
    del A, mA, got, want

    # logsumexp and cross-entropy over rows of 4096 (16384 rows; torch's
    # logsumexp measured 0.62 ms here): one kernel each way, against the chain
    # of ops the teaching policy runs.
    L = torch.randn(rows, n, device="cuda", generator=gen)
    mL = to_mt(L)
    targets_np = np.random.default_rng(4).integers(0, n, rows)
    T = torch.tensor(targets_np, device="cuda")
    mT = mt.tensor(targets_np.astype(np.float32))  # class indices as minitensor holds them
    for policy in ("fast", "teaching"):
        label = "one kernel" if policy == "fast" else "chain of ops (teaching policy)"

        def mt_lse(policy: str = policy) -> Any:
            with mt.kernels.policy(policy):
                return mL.logsumexp(-1)

        bench_case(res, "rows", f"logsumexp(L, dim=-1), {label}", mt_lse, lambda: torch.logsumexp(L, -1),
                   bytes_moved=rows * n * F32, quick=quick, tol=1e-5, target=1.5 if policy == "fast" else None)
    mLg, tLg = mL.detach().requires_grad_(True), L.detach().requires_grad_(True)
    Gl = torch.randn(rows, device="cuda", generator=gen)
    mGl = to_mt(Gl)

    def mt_lse_both() -> Any:
        mLg.grad = None
        mLg.logsumexp(-1).backward(mGl)
        return mLg.grad

    def torch_lse_both() -> Any:
        tLg.grad = None
        torch.logsumexp(tLg, -1).backward(Gl)
        return tLg.grad

    # Forward reads L; backward reads L and writes its gradient: 3 passes.
    bench_case(res, "rows", "logsumexp(L, dim=-1) forward + backward", mt_lse_both, torch_lse_both,
               bytes_moved=3 * rows * n * F32, quick=quick, tol=1e-5, target=1.0)

    def mt_ce_both() -> Any:
        mLg.grad = None
        F.cross_entropy(mLg, mT).backward()
        return mLg.grad

    def torch_ce_both() -> Any:
        tLg.grad = None
        torch.nn.functional.cross_entropy(tLg, T).backward()
        return tLg.grad

    def mt_ce_forward() -> Any:
        with mt.no_grad():
            return F.cross_entropy(mL, mT)

    bench_case(res, "rows", "cross_entropy forward (mean), one kernel + mean", mt_ce_forward,
               lambda: torch.nn.functional.cross_entropy(L, T), bytes_moved=rows * n * F32, quick=quick, tol=1e-5,
               target=1.5)
    bench_case(res, "rows", "cross_entropy forward + backward, two kernels", mt_ce_both, torch_ce_both,
               bytes_moved=3 * rows * n * F32, quick=quick, tol=1e-5, target=1.5)
    del L, mL, mLg, tLg


def matmul_cases(res: Results, quick: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    tol = 1e-5
    # Issue 15's targets: 0.95x cuBLAS from 2048^3 to 8192^3, 0.9x at 1024^3 and
    # at 1000^3 (sizes off the tile grid).
    for n in (1000, 1024, 2048, 4096, 8192):
        A = torch.randn(n, n, device="cuda")
        B = torch.randn(n, n, device="cuda")
        mA, mB = to_mt(A), to_mt(B)
        cA, cB = (cupy.from_dlpack(A), cupy.from_dlpack(B)) if cupy else (None, None)
        bench_case(res, "matmul", f"{n}^3", lambda: mA @ mB, lambda: A @ B, flops=2.0 * n**3, quick=quick, tol=tol,
                   cupy_fn=(lambda: cA @ cB) if cupy else None, target=0.95 if n >= 2048 else 0.9)
        if n == 4096:
            bench_case(res, "matmul", f"A @ B.T {n}^3 (transposed operand)", lambda: mA @ mB.T, lambda: A @ B.T,
                       flops=2.0 * n**3, quick=quick, tol=tol)
    A = torch.randn(64, 512, 512, device="cuda")
    B = torch.randn(64, 512, 512, device="cuda")
    mA, mB = to_mt(A), to_mt(B)
    bench_case(res, "matmul", "batched 64 x 512^3", lambda: mA @ mB, lambda: A @ B, flops=2.0 * 64 * 512**3,
               quick=quick, tol=tol)


def matmul_ladder(res: Results, quick: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    for n in (1024, 4096):
        A = torch.randn(n, n, device="cuda")
        B = torch.randn(n, n, device="cuda")
        ref = A @ B
        mA, mB = to_mt(A), to_mt(B)
        for algo in mt.kernels.algorithms("matmul"):
            bench_case(res, "ladder:matmul", f"{n}^3 {algo}", lambda algo=algo: mt.kernels.matmul(mA, mB, algo),
                       lambda: A @ B, ref=ref, flops=2.0 * n**3, quick=quick, tol=1e-5)
        for config, name in enumerate(mt.kernels.matmul_configs()):
            out = mt.empty(n, n)
            bench_case(res, "tune:matmul", f"{n}^3 config {config}: {name}",
                       lambda config=config, out=out: mt.kernels.matmul(mA, mB, mt.kernels.matmul_config_rung(config),
                                                                        config, out=out),
                       lambda: A @ B, ref=ref, flops=2.0 * n**3, quick=quick, tol=1e-5)
            del out
        del ref


def tf32_case(res: Results, quick: bool) -> None:
    """The tensor-core rungs (the first, "tf32_simple", WMMA with cp.async
    stages, "tf32_pipelined", then the mma.sync rung "tf32" that the library
    runs where wgmma does not) against torch with TF32 on (cuBLAS TF32), and
    the error of each against float64 beside torch's; the wgmma rung and the
    library's choice with b = W.T (a transposed view, the Linear forward's
    layout); then, at 4096^3, every tile variant of the
    mma.sync rung (the sweep that picks its default). torch's TF32 is switched
    off again after."""
    rungs = (("tf32_simple", "first rung (WMMA)"), ("tf32_pipelined", "WMMA, cp.async stages"),
             ("tf32", "mma.sync, ldmatrix, swizzled stages"))
    for n in (1024, 4096):
        A = torch.randn(n, n, device="cuda")
        B = torch.randn(n, n, device="cuda")
        exact = A.double() @ B.double()
        mA, mB = to_mt(A), to_mt(B)
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            theirs = A @ B
            scale = exact.abs().max().item()
            torch_err = (theirs.double() - exact).abs().max().item() / scale

            def with_error(ours: torch.Tensor) -> None:
                note = (f"; max abs error / max abs exact: minitensor "
                        f"{(ours.double() - exact).abs().max().item() / scale:.1e}, torch {torch_err:.1e}")
                res.rows[-1]["case"] += note
                print(f"    {note[2:]}")  # the row itself was printed before this note

            for rung, label in rungs:
                bench_case(res, "tf32", f"matmul {n}^3, TF32 tensor cores, {label} (torch: TF32 on)",
                           lambda rung=rung: mt.kernels.matmul(mA, mB, rung), lambda: A @ B, ref=theirs,
                           flops=2.0 * n**3, quick=quick, tol=5e-3,
                           target=0.8 if n == 4096 and rung == "tf32" else None)
                with_error(to_torch(mt.kernels.matmul(mA, mB, rung)))
            # x @ W.T's layout (b a transposed view, K contiguous in both): the wgmma rung
            # (Hopper), mt_matmul_tf32's choice there when the product fills the GPU.
            mBt = to_mt(B.t().contiguous()).t()
            for rung, label in (("tf32_wgmma", "wgmma, b = W.T"), ("tf32", "the library's choice, b = W.T")):
                try:
                    mt.kernels.matmul(mA, mBt, rung)
                except mt.MinitensorError as error:  # the wgmma rung off Hopper
                    print(f"  {rung}: {error}")
                    continue
                bench_case(res, "tf32", f"matmul {n}^3, TF32 tensor cores, {label} (torch: TF32 on)",
                           lambda rung=rung: mt.kernels.matmul(mA, mBt, rung), lambda: A @ B, ref=theirs,
                           flops=2.0 * n**3, quick=quick, tol=5e-3,
                           target=0.8 if n == 4096 and rung == "tf32_wgmma" else None)
                with_error(to_torch(mt.kernels.matmul(mA, mBt, rung)))
            del mBt
            if n == 4096:
                out = mt.empty(n, n)
                for tile, name in enumerate(mt._lib.matmul_tf32_tile_names()):
                    bench_case(res, "tune:tf32", f"matmul {n}^3 mma.sync tile {tile}: {name}",
                               lambda tile=tile: mt._lib.matmul_tf32_tile(out, mA, mB, tile) or out,
                               lambda: A @ B, ref=theirs, flops=2.0 * n**3, quick=quick, tol=5e-3)
                    with_error(to_torch(out))
                del out
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        del exact


def latency_case(res: Results, quick: bool) -> None:
    """Host microseconds per a + b on 16-element tensors, in a long loop."""
    loops = 2000 if quick else 20000
    a = torch.randn(16, device="cuda")
    b = torch.randn(16, device="cuda")
    ma, mb = to_mt(a), to_mt(b)
    err = rel_error(to_torch(ma + mb), a + b)

    def per_op(fn: Callable[[], Any]) -> float:
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / loops

    mt_s = per_op(lambda: ma + mb)
    torch_s = per_op(lambda: a + b)
    cupy_s = None
    if cupy:
        ca, cb = cupy.from_dlpack(a), cupy.from_dlpack(b)
        cupy_s = per_op(lambda: ca + cb)
    res.add(group="latency", case=f"a + b, 16 elements, host us/op ({loops} loops)", mt_ms=mt_s * 1e3,
            torch_ms=torch_s * 1e3, cupy_ms=cupy_s * 1e3 if cupy_s else None, unit="us/op", mt_rate=mt_s * 1e6,
            torch_rate=torch_s * 1e6, vs_torch=torch_s / mt_s, ok=err <= 1e-6, err=err, target=1 / 1.5)
    # Where minitensor's time goes: the same add through each layer.
    out = ma.new_empty(ma.shape)
    layers = [("mt.kernels.add (no autograd)", lambda: mt.kernels.add(ma, mb)),
              ("mt.kernels.add into an existing out (binding + engine)",
               lambda: mt.kernels.add(ma, mb, out=out)),
              ("mt.empty(16) (allocation only)", lambda: mt.empty(16))]
    for name, fn in layers:
        s = per_op(fn)
        res.add(group="latency", case=f"  {name}, host us/op", mt_ms=s * 1e3, torch_ms=None, cupy_ms=None,
                unit="us/op", mt_rate=s * 1e6, torch_rate=None, vs_torch=None, ok=True, err=0.0, target=None)


def training_case(res: Results, quick: bool) -> None:
    """One training step (forward, backward, Adam) of the demo's MLP, batch 64."""
    steps = 30 if quick else 200
    rng = np.random.default_rng(0)
    x_np = rng.uniform(0, 16, size=(64, 64)).astype(np.float32)
    y_np = rng.integers(0, 10, size=64)
    note = "examples/train_digits.py build_model()"
    try:
        sys.path.insert(0, str(REPO / "examples"))
        from train_digits import build_model  # type: ignore

        model = build_model()
    except Exception as e:  # noqa: BLE001 - the demo may not exist yet
        from minitensor import nn

        note = f"inline MLP 64-128-10 ({type(e).__name__} importing the demo)"
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    import minitensor.nn.functional as F

    opt = mt.optim.Adam(model.parameters(), lr=3e-3)
    tmodel = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).cuda()
    topt = torch.optim.Adam(tmodel.parameters(), lr=3e-3)
    tx = torch.tensor(x_np, device="cuda")
    ty = torch.tensor(y_np, device="cuda")
    tx = (tx - tx.mean(0)) / (tx.std(0) + 1)  # the demo's Standardize layer, roughly

    def mt_step() -> float:
        x = mt.tensor(x_np)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y_np)
        loss.backward()
        opt.step()
        return loss.item()

    def torch_step() -> float:
        x = torch.tensor(x_np, device="cuda")
        x = (x - tx.mean(0)) / (tx.std(0) + 1)
        topt.zero_grad()
        loss = torch.nn.functional.cross_entropy(tmodel(x), ty)
        loss.backward()
        topt.step()
        return loss.item()

    def per_step(fn: Callable[[], float]) -> float:
        for _ in range(10):
            fn()
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        return (time.perf_counter() - start) / steps

    mt_s = per_step(mt_step)
    torch_s = per_step(torch_step)
    res.add(group="training", case=f"one step, MLP 64-128-10, batch 64 ({note})", mt_ms=mt_s * 1e3,
            torch_ms=torch_s * 1e3, cupy_ms=None, unit="", mt_rate=None, torch_rate=None, vs_torch=torch_s / mt_s,
            ok=math.isfinite(mt_step()), err=0.0, target=1.0)

    # The same step from a CUDA graph: the data in static tensors, forward and
    # backward captured once, the fused Adam step after each replay.
    sx, sy = mt.tensor(x_np), mt.tensor(y_np.astype(np.float32))
    graph, graph_loss = graphed_forward_backward(model, opt, lambda: F.cross_entropy(model(sx), sy))

    def mt_graph_step() -> float:
        graph.replay()
        opt.step()
        return graph_loss.item()  # as the eager steps, a step ends with its loss on the host

    mt_g = per_step(mt_graph_step)
    res.add(group="training", case="one step, MLP 64-128-10, batch 64, forward and backward replayed from a CUDA graph",
            mt_ms=mt_g * 1e3, torch_ms=torch_s * 1e3, cupy_ms=None, unit="", mt_rate=None, torch_rate=None,
            vs_torch=torch_s / mt_g, ok=math.isfinite(mt_graph_step()), err=0.0, target=None)


def graphed_forward_backward(model: Any, opt: Any, loss_fn: Callable[[], Any]) -> tuple[Any, Any]:
    """Warms up, then captures opt.zero_grad(), the loss and its backward into a
    CUDA graph; returns (graph, loss tensor). Adam's step stays outside (its
    bias correction needs the step count), run after each replay."""
    for _ in range(3):
        opt.zero_grad()
        loss_fn().backward()
        opt.step()
    graph = mt.cuda.CUDAGraph()
    with mt.cuda.graph(graph):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
    return graph, loss


def mlp_step_case(res: Results, quick: bool) -> None:
    """One Adam training step of an MLP 784-2048-2048-10, batch 1024 (the issue's
    case), with the fused optimizer and with the chain of ops; and Adam.step alone."""
    from minitensor import nn
    import minitensor.nn.functional as F

    steps = 10 if quick else 50
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((1024, 784)).astype(np.float32)
    y_np = rng.integers(0, 10, size=1024)
    tmodel = torch.nn.Sequential(torch.nn.Linear(784, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                                 torch.nn.ReLU(), torch.nn.Linear(2048, 10)).cuda()
    topt = torch.optim.Adam(tmodel.parameters(), lr=1e-3)
    tx, ty = torch.tensor(x_np, device="cuda"), torch.tensor(y_np, device="cuda")
    mx = mt.tensor(x_np)

    def per_step(fn: Callable[[], Any]) -> float:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / steps

    def torch_step() -> Any:
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tmodel(tx), ty).backward()
        topt.step()

    torch_s = per_step(torch_step)
    for fused in (True, False):
        model = nn.Sequential(nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
        opt = mt.optim.Adam(model.parameters(), lr=1e-3, fused=fused)

        def mt_step() -> Any:
            opt.zero_grad()
            F.cross_entropy(model(mx), y_np).backward()
            opt.step()

        mt_s = per_step(mt_step)
        res.add(group="training", case=f"Adam step, MLP 784-2048-2048-10, batch 1024, {'fused' if fused else 'chained'} "
                "Adam", mt_ms=mt_s * 1e3, torch_ms=torch_s * 1e3, cupy_ms=None, unit="", mt_rate=None,
                torch_rate=None, vs_torch=torch_s / mt_s, ok=True, err=0.0, target=1.0 if fused else None)
        # The optimizer alone: its gradients are those of the last step.
        step_s = per_step(opt.step)
        torch_step_s = per_step(topt.step)
        res.add(group="training", case=f"Adam.step alone, 5.8 M parameters, {'fused' if fused else 'chained'}",
                mt_ms=step_s * 1e3, torch_ms=torch_step_s * 1e3, cupy_ms=None, unit="", mt_rate=None,
                torch_rate=None, vs_torch=torch_step_s / step_s, ok=True, err=0.0, target=None)
        del model, opt

    # Graph replay: forward and backward captured once, the fused Adam step
    # eagerly after each replay (one launch per parameter).
    model = nn.Sequential(nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
    opt = mt.optim.Adam(model.parameters(), lr=1e-3)
    my = mt.tensor(y_np.astype(np.float32))
    graph, loss = graphed_forward_backward(model, opt, lambda: F.cross_entropy(model(mx), my))

    def replay_step() -> Any:
        graph.replay()
        opt.step()

    mt_s = per_step(replay_step)
    res.add(group="training", case="Adam step, MLP 784-2048-2048-10, batch 1024, forward and backward replayed "
            "from a CUDA graph, fused Adam after it", mt_ms=mt_s * 1e3, torch_ms=torch_s * 1e3, cupy_ms=None,
            unit="", mt_rate=None, torch_rate=None, vs_torch=torch_s / mt_s, ok=math.isfinite(loss.item()),
            err=0.0, target=1.3)
    del graph, loss, model, opt

    # The whole step in the graph: SGD with momentum (no step count), against torch's eager SGD.
    model = nn.Sequential(nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
    opt = mt.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    tsgd = torch.optim.SGD(tmodel.parameters(), lr=1e-3, momentum=0.9)

    def torch_sgd_step() -> Any:
        tsgd.zero_grad()
        torch.nn.functional.cross_entropy(tmodel(tx), ty).backward()
        tsgd.step()

    torch_sgd_s = per_step(torch_sgd_step)
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(model(mx), my).backward()
        opt.step()
    whole = mt.cuda.CUDAGraph()
    with mt.cuda.graph(whole):
        opt.zero_grad()
        loss = F.cross_entropy(model(mx), my)
        loss.backward()
        opt.step()
    mt_s = per_step(whole.replay)
    res.add(group="training", case="SGD-momentum step, MLP 784-2048-2048-10, batch 1024, the whole step replayed "
            "from a CUDA graph (torch: eager)", mt_ms=mt_s * 1e3, torch_ms=torch_sgd_s * 1e3, cupy_ms=None,
            unit="", mt_rate=None, torch_rate=None, vs_torch=torch_sgd_s / mt_s, ok=math.isfinite(loss.item()),
            err=0.0, target=None)


# ---- the report -------------------------------------------------------------------------


def versions() -> dict[str, str]:
    info = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "device": torch.cuda.get_device_name(0), "minitensor": mt.device_info(),
            "torch": torch.__version__, "torch CUDA": str(torch.version.cuda),
            "cupy": getattr(cupy, "__version__", "not installed") if cupy else "not installed",
            "python": platform.python_version()}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        info["nvidia-smi"] = smi.stdout.strip()
    except Exception as e:  # noqa: BLE001
        info["nvidia-smi"] = f"unavailable ({e})"
    return info


def fmt(v: Optional[float], digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| case | minitensor ms | rate | torch ms | torch rate | CuPy ms | vs torch | check |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        rate = "-" if r["mt_rate"] is None else f"{r['mt_rate']:.1f} {r['unit']}"
        trate = "-" if r.get("torch_rate") is None else f"{r['torch_rate']:.1f} {r['unit']}"
        vs = "-" if not r.get("vs_torch") else f"{r['vs_torch']:.2f}x"
        check = "ok" if r["ok"] else f"**WRONG** (rel. error {r['err']:.1e})"
        lines.append(f"| {r['case']} | {fmt(r['mt_ms'])} | {rate} | {fmt(r['torch_ms'])} | {trate} | "
                     f"{fmt(r.get('cupy_ms'))} | {vs} | {check} |")
    return "\n".join(lines)


def targets(rows: list[dict[str, Any]]) -> str:
    lines = ["| case | target (vs torch) | measured | met? |", "| --- | ---: | ---: | --- |"]
    for r in rows:
        if r.get("target") is None or not r.get("vs_torch"):
            continue
        if r["group"] == "latency":
            want = "time <= 1.5x torch's"
            met = r["vs_torch"] >= r["target"]
            measured = f"{r['mt_rate']:.1f} us vs {r['torch_rate']:.1f} us ({1 / r['vs_torch']:.2f}x torch's time)"
        else:
            want = f">= {r['target']:.2f}x"
            met = r["vs_torch"] >= r["target"]
            measured = f"{r['vs_torch']:.2f}x"
        lines.append(f"| {r['case']} | {want} | {measured} | {'yes' if met else '**no**'} |")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path) -> Optional[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        return f"(no plot: matplotlib unavailable: {e})"
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.5))
    ladder = [r for r in rows if r["group"] == "ladder:matmul" and r["case"].startswith("4096")]
    if ladder:
        names = [r["case"].split()[-1] for r in ladder]
        axes[0].bar(names, [r["mt_rate"] for r in ladder], color="#08519c")
        cublas = ladder[0]["torch_rate"]
        if cublas:
            axes[0].axhline(cublas, color="black", ls="--", label=f"cuBLAS (torch) {cublas:.1f}")
            axes[0].legend()
        axes[0].set_ylabel("TFLOP/s (float32)")
        axes[0].set_title("matmul ladder, 4096^3")
        axes[0].tick_params(axis="x", rotation=45)
    for ax, group, title in ((axes[1], "ladder:reduce", "reduction ladder, sum 16384^2 (last dim)"),
                             (axes[2], "ladder:copy", "transpose ladder, A.T.contiguous() 16384^2")):
        sel = [r for r in rows if r["group"] == group]
        if sel:
            ax.bar([r["case"].split(", ")[-1] for r in sel], [r["mt_rate"] for r in sel], color="#31a354")
            ax.set_ylabel("GB/s")
            ax.set_title(title)
            ax.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def write_report(rows: list[dict[str, Any]], info: dict[str, str], out: Path, seconds: float) -> None:
    png = out.with_suffix(".png")
    note = plot(rows, png)
    groups = [("Benchmark cases", lambda r: not r["group"].startswith(("ladder", "tune", "tf32"))),
              ("Matmul ladder (every rung)", lambda r: r["group"] == "ladder:matmul"),
              ("Tile configurations of warptile and pipelined (what the autotuner chooses from)", lambda r: r["group"] == "tune:matmul"),
              ("Reduction ladder (mt_reduce_variant)", lambda r: r["group"] == "ladder:reduce"),
              ("Transpose ladder (mt_copy_variant)", lambda r: r["group"] == "ladder:copy"),
              ("TF32 on tensor cores (opt-in, against torch's TF32)", lambda r: r["group"] == "tf32"),
              ("Tile variants of the mma.sync TF32 rung", lambda r: r["group"] == "tune:tf32")]
    parts = [
        "# Performance: minitensor against PyTorch",
        "",
        "Written by `python3 bench/run.py --out docs/performance.md` on the GPU machine "
        "(the numbers below are from one run; see the script's docstring for what is counted). "
        "\"vs torch\" is torch's time over minitensor's: above 1, minitensor is faster.",
        "",
        f"- The whole run took {seconds:.0f} s.",
    ]
    parts += [f"- {k}: {v}" for k, v in info.items()]
    parts += ["", f"![ladders](performance.png)" if note is None else note, ""]
    for title, keep in groups:
        sel = [r for r in rows if keep(r)]
        if sel:
            parts += [f"## {title}", "", table(sel), ""]
    parts += ["## Targets", "", targets(rows), ""]
    limits = REPO / "bench" / "limits.md"
    if limits.is_file():
        parts += [limits.read_text().strip(), ""]
    parts += [USER_KERNELS_NOTE, "", ATTENTION_NOTE, "", CONV_NOTE, "", DEMOS_NOTE, "", MULTI_GPU_NOTE, ""]
    # The sections other scripts measured (attention, convolution, pooling,
    # the before/after tables of each round) are written by hand below the
    # marker; a regenerated report keeps them as they are.
    old = out.read_text() if out.is_file() else ""
    if KEEP_MARKER in old:
        parts += [KEEP_MARKER + old.split(KEEP_MARKER, 1)[1].rstrip(), ""]
    out.write_text("\n".join(parts))
    print(f"wrote {out} and {png}")


# Everything after this line of docs/performance.md is kept by write_report.
KEEP_MARKER = "<!-- Below: sections measured by the other bench/ scripts, kept as they are when bench/run.py rewrites the report. -->"


# Measured by bench/user_kernels.py (it needs CuPy beside minitensor); kept
# here so that a regenerated report keeps them.
USER_KERNELS_NOTE = """## Run-time compiled kernels (`mt.cuda.compile`)

Measured by `python3 bench/user_kernels.py` on one H100 (NVRTC 13.0, CuPy in
the same process, two machines of the same kind on 2026-11-26; medians of 5
and 7 trials, the first trial in brackets):

| | minitensor | CuPy RawKernel |
| --- | ---: | ---: |
| compile, a source never seen | 14.1 / 19.3 ms [173 / 253 ms] | 34.8 / 48.3 ms [54 / 86 ms] |
| compile, from the disk cache (new process's view) | 0.54 ms | (its in-memory cache only) |
| compile, the same source again in the process | 0.23 ms | 0.02 ms |
| host time per launch of a one-element kernel | 9.5 / 13.7 us | 5.2 / 5.7 us |
| host time of the library's `x + y`, one element | 13.5 / 20.5 us | |

- A first compile is faster than CuPy's: NVRTC writes a cubin for sm_90
  directly and minitensor adds no headers but the two NVRTC lacks. The first
  trial of a process also loads NVRTC and initialises the driver API.
- A launch costs about twice CuPy's. What is left is Python: the argument
  block is made once per kernel and a call only stores each argument
  (2.8 us of Python on this repository's 2-core machine with the launch
  stubbed, down from 11.8 us when each call built its ctypes objects), then
  `cuLaunchKernel` through ctypes. CuPy's launcher is compiled (Cython).
- A user kernel launches faster than a library op of the same size, which
  also allocates its output and checks its descriptors."""


# Measured by bench/attention.py (it needs torch); kept here too.
ATTENTION_NOTE = """## Attention ladder (`mt.kernels.attention`) against torch's scaled_dot_product_attention

Measured by `python3 bench/attention.py` on one H100 on 2026-11-27: float32,
head dim 64, medians of 20 CUDA-event timings in ms; the last column is
torch's time over each rung's (above 1: faster than torch).

| batch x heads, length, causal | pass | naive (mt) | fused (mt) | flash (mt) | torch sdpa | naive / fused / flash vs torch |
| --- | --- | ---: | ---: | ---: | ---: | --- |
| 64, 256, False | forward | 0.232 | 0.204 | 0.185 | 0.124 | 0.54x / 0.61x / 0.67x |
| 64, 256, False | fwd + bwd | 0.941 | 0.884 | 0.794 | 0.867 | 0.92x / 0.98x / 1.09x |
| 64, 256, True | forward | 0.715 | 0.309 | 0.221 | 0.511 | 0.71x / 1.65x / 2.31x |
| 64, 256, True | fwd + bwd | 1.963 | 0.868 | 0.816 | 0.764 | 0.39x / 0.88x / 0.94x |
| 32, 1024, False | forward | 0.558 | 0.575 | 0.626 | 0.601 | 1.08x / 1.05x / 0.96x |
| 32, 1024, False | fwd + bwd | 1.601 | 1.535 | 3.118 | 1.449 | 0.91x / 0.94x / 0.46x |
| 32, 1024, True | forward | 2.289 | 0.532 | 0.652 | 0.764 | 0.33x / 1.44x / 1.17x |
| 32, 1024, True | fwd + bwd | 3.805 | 1.550 | 3.035 | 1.766 | 0.46x / 1.14x / 0.58x |
| 16, 2048, False | forward | 1.095 | 1.095 | 1.222 | 1.181 | 1.08x / 1.08x / 0.97x |
| 16, 2048, False | fwd + bwd | 2.920 | 2.747 | 5.757 | 2.635 | 0.90x / 0.96x / 0.46x |
| 16, 2048, True | forward | 6.157 | 0.879 | 1.076 | 1.421 | 0.23x / 1.62x / 1.32x |
| 16, 2048, True | fwd + bwd | 9.398 | 2.510 | 5.394 | 2.964 | 0.32x / 1.18x / 0.55x |

The flash rung's kernels know head dims 16, 32 and 64 at compile time (for
q and v alike); any other head dim is read at run time. The same run, 32 x
1024, causal:

| flash rung | head dim 64 (compile time) | head dim 63 (run time) | 63 / 64 |
| --- | ---: | ---: | ---: |
| forward | 0.584 | 6.801 | 11.65x |
| fwd + bwd | 2.916 | 28.530 | 9.78x |

- **naive** (each step one op: matmul, scale, causal mask, softmax,
  matmul) matches torch's fused forward at length 1024 and 2048 without a
  mask (1.08x), but the causal mask costs it a full pass of its own over
  the L x L scores: 0.23-0.71x.
- **fused** (`src/masked_softmax.cu`, what `F.scaled_dot_product_attention`
  runs): scale, mask and softmax read the scores once, and under the causal
  mask only the keys a query sees. At length 1024 and 2048 it is 1.05-1.62x
  torch's forward and 0.94-1.18x forward + backward; the causal case gains
  most (2.3-7x over naive). At length 256 torch's fused kernel wins (0.61-
  0.98x) except on the causal forward (1.65x). A row whose every key is
  masked gets zero weights, as in torch's attention.
- **flash** (`src/attention.cu`): one thread per query row, no tensor
  cores, no score stored. With the head dim a compile-time constant the
  rows of q, the output, and in the backward k, v, dk and dv, live in
  registers: forward 0.67-2.31x torch (the causal cases 1.17-2.31x, ahead
  of the fused rung at length 256), 9.8-11.7x faster than the same kernels
  with the head dim read at run time, whose rows the compiler must place
  in local memory (2026-11-27's first run measured those at 0.10-0.29x).
  Its backward kernels keep it at 0.46-0.58x torch forward + backward at
  length 1024 and 2048 (one thread per key row does a whole query tile's
  work; torch's backward splits it over warps and tensor cores), so
  training stays on the fused rung. What the flash rung saves is memory: no
  L x L scores (268 MB for 16 x 2048 x 2048 in float32)."""


# Measured by bench/conv.py (it needs torch); kept here too.
CONV_NOTE = """## Convolution ladder (`mt.kernels.conv2d`) against torch's conv2d

Measured by `python3 bench/conv.py` on one H100 on 2026-11-27: float32 with
TF32 off in cuDNN, medians of CUDA-event timings in ms, every rung checked
against torch first.

| layer | pass | im2col (mt) | tiled (mt) | torch | tiled vs im2col | tiled vs torch |
| --- | --- | ---: | ---: | ---: | ---: | ---: |
| stem 7x7/2 | forward | 2.595 | 2.543 | 0.473 | 1.02x | 0.19x |
| stem 7x7/2 | fwd + bwd | 6.590 | 8.148 | 1.676 | 0.81x | 0.21x |
| 3x3, 64 ch, 56x56 | forward | 2.136 | 5.094 | 0.290 | 0.42x | 0.06x |
| 3x3, 64 ch, 56x56 | fwd + bwd | 5.046 | 9.642 | 0.917 | 0.52x | 0.10x |
| 3x3, 128 ch, 28x28 | forward | 1.216 | 4.964 | 0.170 | 0.24x | 0.03x |
| 3x3, 128 ch, 28x28 | fwd + bwd | 2.979 | 7.550 | 0.512 | 0.39x | 0.07x |
| 3x3, 256 ch, 14x14 | forward | 0.779 | 5.055 | 0.272 | 0.15x | 0.05x |
| 3x3, 256 ch, 14x14 | fwd + bwd | 1.965 | 6.791 | 0.722 | 0.29x | 0.11x |
| 3x3/2, 64->128, 56x56 | forward | 0.829 | 3.766 | 0.151 | 0.22x | 0.04x |
| 3x3/2, 64->128, 56x56 | fwd + bwd | 2.263 | 5.431 | 0.789 | 0.42x | 0.15x |
| 1x1, 256->64, 28x28 | forward | 0.364 | 3.014 | 0.063 | 0.12x | 0.02x |
| 1x1, 256->64, 28x28 | fwd + bwd | 1.587 | 3.304 | 0.536 | 0.48x | 0.16x |
| depthwise 3x3, 128 ch, 56x56 | forward | 8.791 | 0.330 | 0.134 | 26.67x | 0.41x |
| depthwise 3x3, 128 ch, 56x56 | fwd + bwd | 20.669 | 15.535 | 0.702 | 1.33x | 0.05x |

- The tiled rung (one output channel a block, every input channel's patch
  staged in shared memory in turn) loses to im2col wherever there are many
  input channels: each block reloads the whole input once per output
  channel, while im2col's one large matmul reuses it from registers. Where
  each output channel reads a single input channel (depthwise), im2col's
  matmuls are tiny and the tiled rung is 27x faster forward, so `F.conv2d`
  takes it there (under the fast policy, when the patch fits in 48 KiB).
- Both trail cuDNN: im2col reaches 0.14-0.37x on the dense layers. The backward
  of both rungs is im2col's (col2im adds, window matmuls): the depthwise
  layer's forward takes 0.33 ms of its 15.5 ms forward + backward. A tiled backward, several
  output channels per block, and implicit GEMM on tensor cores are the
  rungs that would close the gap; they are not written."""


# Measured by the two demos with --torch (examples/train_gpt.py); kept here too.
DEMOS_NOTE = """## Demos on the GPU: the tiny GPT and the CNN against PyTorch

Measured on one H100 on 2026-11-26 by `python3 examples/train_gpt.py --torch`
and `python3 examples/train_digits_cnn.py` (their defaults; the same seeds
give the same losses on the emulator and the GPU):

| demo | minitensor | PyTorch (same model, batches, optimizer) | vs torch |
| --- | ---: | ---: | ---: |
| `make demo-gpt`: 2 pre-LN layers, width 32, 4 heads, context 32, batch 16 (31,891 parameters), AdamW, clipping | 26,053 tokens/s | 94,240 tokens/s | 0.28x |
| `make demo-cnn`: 15 epochs of the digits CNN | 1.6 s in all (98.33% held out) | | |

- The GPT reaches a held-out loss of 2.492 after 200 steps (4.600
  untrained; ln 83 = 4.42 is a uniform guess); torch's training loss after
  the same steps is 2.528. On the emulator the run takes about 4 minutes.
- At this size a step is a few hundred small kernels, so both libraries are
  bound by the host: what separates them is the host time per op (about
  17 us against torch's 8, the "small-op host latency" above). Since the
  fused masked-softmax rung replaced the naive one in the model's attention
  (2026-11-27), a rerun measured 23,459 tokens/s against torch's 62,612
  (0.37x; both lower than the day before on another machine of the same
  kind, so compare within a run). A CUDA graph of the step (`mt.cuda.graph`) would
  remove most of minitensor's host time, as it does for the MLP."""


MULTI_GPU_NOTE = """## Multi-GPU

All-reduce bus bandwidth over NCCL and the demo model's training throughput on
1 and 2 GPUs are measured by `bench/allreduce_bw.py` and
`examples/train_digits_ddp.py` on a machine with two GPUs; their numbers are in
[distributed.md](distributed.md#multi-gpu-results-2-x-h200-nvlink-nv18-nccl)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the report here (e.g. docs/performance.md)")
    parser.add_argument("--json", type=Path, help="also save the raw results here (for --render)")
    parser.add_argument("--render", type=Path, help="no benchmarks: re-write --out from a saved --json file")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test)")
    parser.add_argument("--only", default="", help="comma-separated groups: elementwise,norm,matmul,ladder,tf32,latency,training,mlp")
    args = parser.parse_args()

    if args.render:
        saved = json.loads(args.render.read_text())
        write_report(saved["rows"], saved["info"], args.out or REPO / "docs" / "performance.md", saved["seconds"])
        return 0

    load_libraries()
    assert mt.backend() == "cuda", f"minitensor runs on {mt.backend()}, not the GPU"
    # Both libraries must launch on the legacy default stream for the events to time minitensor.
    assert torch.cuda.current_stream().cuda_stream == 0, "torch is not on the legacy default stream"
    info = versions()
    print("\n".join(f"{k}: {v}" for k, v in info.items()), flush=True)
    res = Results()
    start = time.perf_counter()
    only = set(filter(None, args.only.split(",")))
    steps = [("elementwise", elementwise_cases), ("norm", norm_cases), ("matmul", matmul_cases),
             ("ladder", matmul_ladder), ("tf32", tf32_case),
             ("latency", latency_case), ("training", training_case), ("mlp", mlp_step_case)]
    for name, fn in steps:
        if only and name not in only:
            continue
        print(f"-- {name}", flush=True)
        fn(res, args.quick)
        torch.cuda.empty_cache()
    seconds = time.perf_counter() - start
    print(f"autotune: {mt.kernels.autotune_stats()}")
    if args.json:
        args.json.write_text(json.dumps({"rows": res.rows, "info": info, "seconds": seconds}, indent=1))
    if args.out:
        write_report(res.rows, info, args.out, seconds)
    wrong = [r["case"] for r in res.rows if not r["ok"]]
    if wrong:
        print("WRONG results:", wrong)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
