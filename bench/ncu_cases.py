#!/usr/bin/env python3
"""bench/ncu_cases.py: the kernels that matter, once each, for Nsight Compute.

    ncu --nvtx --nvtx-include "profile/" --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section Occupancy --section LaunchStats \
        python3 bench/ncu_cases.py [CASE ...]

Everything runs once outside the NVTX range "profile" (warm-up, the
autotuner's sweep), then once inside it, so ncu profiles exactly one launch
of each case: minitensor's and torch's kernels for the same operation, side
by side. CASE names (default: all): matmul4096, matmul1024, sum_last, sum_first,
sum_all, softmax, add, add_row, add_t, transpose, conv3x3, conv_dw, conv_digits,
sdpa_causal, max_dim, tf32_4096 (the forward and backward cases run the
whole forward + backward, so every kernel of it is profiled once).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("MINITENSOR_BACKEND", "cuda")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import minitensor as mt  # noqa: E402


def to_mt(t: torch.Tensor) -> mt.Tensor:
    """A minitensor copy of a float32 torch tensor (device to device)."""
    t = t.contiguous()  # held until the copy is done
    return mt.kernels.from_device_pointer(t.data_ptr(), tuple(t.shape), mt.float32)


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    wanted = set(sys.argv[1:])
    big: dict = {}

    def matrices() -> tuple:
        """The 16384^2 inputs, made on first use only."""
        if not big:
            s = 16384
            A, B, r = torch.randn(s, s, device="cuda"), torch.randn(s, s, device="cuda"), torch.randn(s, device="cuda")
            big["t"] = (A, B, r)
            big["m"] = (to_mt(A), to_mt(B), to_mt(r))
        return big["t"], big["m"]

    def matmul(n: int) -> list:
        A, B = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        mA, mB = to_mt(A), to_mt(B)
        return [lambda: mA @ mB, lambda: A @ B]

    def pair(mt_op, torch_op):
        def make() -> list:
            (A, B, r), (mA, mB, mr) = matrices()
            return [lambda: mt_op(mA, mB, mr), lambda: torch_op(A, B, r)]
        return make

    def grad_pair(shapes: list, mt_fn, torch_fn):
        """Forward + backward of the same function on both sides."""
        def make() -> list:
            ts = [torch.randn(*sh, device="cuda") for sh in shapes]
            ms = [to_mt(t).requires_grad_() for t in ts]
            for t in ts:
                t.requires_grad_()

            def run_mt() -> None:
                mt_fn(*ms).sum().backward()

            def run_torch() -> None:
                torch_fn(*ts).sum().backward()
            return [run_mt, run_torch]
        return make

    F, tF = mt.nn.functional, torch.nn.functional

    def tf32(n: int) -> list:
        A, B = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        mA, mB = to_mt(A), to_mt(B)

        def run_torch():
            torch.backends.cuda.matmul.allow_tf32 = True
            A @ B
            torch.backends.cuda.matmul.allow_tf32 = False
        return [lambda: mt.kernels.matmul(mA, mB, "tf32"), run_torch]

    cases = {
        "conv3x3": grad_pair([(256, 64, 32, 32), (64, 64, 3, 3)],
                             lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: tF.conv2d(x, w, padding=1)),
        "conv_dw": grad_pair([(32, 128, 56, 56), (128, 1, 3, 3)],
                             lambda x, w: F.conv2d(x, w, padding=1, groups=128),
                             lambda x, w: tF.conv2d(x, w, padding=1, groups=128)),
        "conv_digits": grad_pair([(512, 1, 8, 8), (32, 1, 3, 3)],
                                 lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: tF.conv2d(x, w, padding=1)),
        "sdpa_causal": grad_pair([(16, 12, 1024, 64)] * 3,
                                 lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                 lambda q, k, v: tF.scaled_dot_product_attention(q, k, v, is_causal=True)),
        "max_dim": pair(lambda A, B, r: A.max(dim=1), lambda A, B, r: A.max(dim=1)),
        "tf32_4096": lambda: tf32(4096),
        "matmul4096": lambda: matmul(4096),
        "matmul1024": lambda: matmul(1024),
        "sum_last": pair(lambda A, B, r: A.sum(dim=1), lambda A, B, r: A.sum(dim=1)),
        "sum_first": pair(lambda A, B, r: A.sum(dim=0), lambda A, B, r: A.sum(dim=0)),
        "sum_all": pair(lambda A, B, r: A.sum(), lambda A, B, r: A.sum()),
        "softmax": pair(lambda A, B, r: A.softmax(-1), lambda A, B, r: torch.softmax(A, -1)),
        "add": pair(lambda A, B, r: A + B, lambda A, B, r: A + B),
        "add_row": pair(lambda A, B, r: A + r, lambda A, B, r: A + r),
        "add_t": pair(lambda A, B, r: A + B.T, lambda A, B, r: A + B.T),
        "transpose": pair(lambda A, B, r: A.T.contiguous(), lambda A, B, r: A.T.contiguous()),
    }
    for name, make in cases.items():
        if wanted and name not in wanted:
            continue
        fns = make()
        for fn in fns:
            fn()  # warm-up (and the autotuner's sweep) outside the range
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("profile")
        for fn in fns:
            fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        print("profiled", name, flush=True)


if __name__ == "__main__":
    main()
