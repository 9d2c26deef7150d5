"""The typed-dimension rung (blocktile_2d_typed, src/matmul_blocktile_2d_typed.cu)
against the rung it rewrites (blocktile_2d): time and machine code.

    python3 bench/typed_dims.py --out DIR            # on the GPU machine (needs torch)
    python3 bench/typed_dims.py --sass FILE.sass     # instruction counts only

Timing: for each shape, the two rungs alternate (ABAB...) so that clock and
thermal drift fall on both, each call timed with CUDA events after warm-up;
the table gives each one's median and typed / original (target: within 3%).
Each typed result must equal the original's bit for bit (the same sums in the
same order) and match torch (TF32 off).

Machine code: the SASS of both kernels (`cuobjdump -sass` of the library, or
a listing given with --sass, e.g. nvdisasm of `nvcc -cubin`), counted per
kernel instantiation: all instructions, and the FFMA/DFMA, shared-memory
loads (LDS) and integer ones, which is where index arithmetic would show.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

KERNELS = ("matmul_blocktile_2d", "matmul_blocktile_2d_typed")
# A function's header in cuobjdump's listing ("Function : _Z...") or nvdisasm's (".text._Z...:").
FUNCTION = re.compile(r"^\s*(?:Function : (\S+)|\.text\.(\S+):)\s*$")
# An instruction: "/*0040*/   @!P1 IMAD.WIDE R2, ... ;"
INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_.]*)")
INTEGER_OPS = ("IMAD", "IADD3", "LEA", "SHF", "LOP3", "ISETP", "IABS", "I2F", "SEL", "VIADD", "IMNMX", "UIADD3",
               "UIMAD", "ULEA", "USHF", "ULOP3", "UISETP", "UMOV", "MOV", "PRMT")


def kernel_of(mangled: str) -> str | None:
    """'matmul_blocktile_2d_typed<float>' for a mangled instantiation of one of KERNELS, else None."""
    for name in sorted(KERNELS, key=len, reverse=True):
        tag = f"{len(name)}{name}I"
        if tag in mangled:
            rest = mangled.split(tag, 1)[1]
            return f"{name}<{ {'f': 'float', 'd': 'double'}.get(rest[:1], rest[:1]) }>"
    return None


def count_sass(listing: str) -> dict[str, dict[str, int]]:
    """Instruction counts of each instantiation of KERNELS in a SASS listing."""
    counts: dict[str, collections.Counter] = {}
    current = None
    for line in listing.splitlines():
        header = FUNCTION.match(line)
        if header:
            current = kernel_of(header.group(1) or header.group(2))
            if current:
                counts.setdefault(current, collections.Counter())
            continue
        m = INSTRUCTION.match(line) if current else None
        if m:
            op = m.group(1).split(".")[0]
            counts[current][op] += 1
            # Instructions from the first barrier to the second: one K-step's compute.
            if op == "BAR":
                counts[current]["_bars"] += 1
            elif counts[current]["_bars"] == 1:
                counts[current]["_between"] += 1
    table = {}
    for kernel, ops in sorted(counts.items()):
        between = ops.pop("_between", 0)
        ops.pop("_bars", None)
        total = sum(ops.values())
        table[kernel] = {
            "total": total,
            "without NOP": total - ops["NOP"],
            "FFMA/DFMA": ops["FFMA"] + ops["DFMA"],
            "LDS": ops["LDS"],
            "LDG": ops["LDG"],
            "integer": sum(ops[o] for o in INTEGER_OPS),
            "branches": ops["BRA"],
            "between barriers": between,
        }
    return table


def sass_markdown(table: dict[str, dict[str, int]]) -> str:
    cols = ["total", "without NOP", "FFMA/DFMA", "LDS", "LDG", "integer", "branches", "between barriers"]
    lines = ["| kernel | " + " | ".join(cols) + " |", "| --- |" + " ---: |" * len(cols)]
    lines += [f"| {k} | " + " | ".join(str(v[c]) for c in cols) + " |" for k, v in table.items()]
    return "\n".join(lines)


def kernel_sections(listing: str) -> str:
    """The lines of a SASS listing that belong to instantiations of KERNELS."""
    keep, out = False, []
    for line in listing.splitlines():
        header = FUNCTION.match(line)
        if header:
            keep = kernel_of(header.group(1) or header.group(2)) is not None
        if keep:
            out.append(line)
    return "\n".join(out) + "\n"


def library_sass() -> str:
    """cuobjdump -sass of the two kernels' sm_90 code in the CUDA build's library: the four
    instantiations named (-fun), or, where that fails, the whole listing cut down to them."""
    tool = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    lib = Path(__file__).resolve().parent.parent / "build" / "libminitensor_cuda.so"
    mangled = [f"_Z{len(k)}{k}I{t}16Blocktile2dTilesEv9mt_tensorS1_S1_ll" for k in KERNELS for t in "fd"]
    named = subprocess.run([tool, "-sass", "-arch", "sm_90", "-fun", ",".join(mangled), str(lib)],
                           capture_output=True, text=True, timeout=20)
    if named.returncode == 0 and len(count_sass(named.stdout)) == 4:
        return kernel_sections(named.stdout)
    whole = subprocess.run([tool, "-sass", "-arch", "sm_90", str(lib)], check=True, capture_output=True, text=True,
                           timeout=30)
    return kernel_sections(whole.stdout)


def time_rungs(repeats: int) -> list[dict]:
    """Median times of both rungs on the shapes of the comparison."""
    import torch

    import minitensor as mt

    torch.backends.cuda.matmul.allow_tf32 = False
    shapes = [(1024, 1024, 1024, "float32"), (2048, 2048, 2048, "float32"), (4096, 4096, 4096, "float32"),
              (1000, 1500, 700, "float32"), (1024, 1024, 1024, "float64")]
    start, end = mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True)
    rows = []
    for m, n, k, dtype in shapes:
        tdt = getattr(torch, dtype)
        a = torch.randn(m, k, device="cuda", dtype=tdt)
        b = torch.randn(k, n, device="cuda", dtype=tdt)
        torch.cuda.synchronize()  # the inputs exist before minitensor's stream reads them
        ma, mb = mt.from_dlpack(a), mt.from_dlpack(b)
        outs = {algo: mt.empty(m, n, dtype=getattr(mt, dtype)) for algo in ("blocktile_2d", "blocktile_2d_typed")}
        runs = {algo: (lambda algo=algo: mt.kernels.matmul(ma, mb, algo, out=outs[algo])) for algo in outs}
        for run in runs.values():
            run()
        mt.cuda.synchronize()
        got = {algo: torch.from_dlpack(out) for algo, out in outs.items()}
        if not torch.equal(got["blocktile_2d"], got["blocktile_2d_typed"]):
            raise SystemExit(f"{m}x{n}x{k} {dtype}: the typed rung's result differs from blocktile_2d's")
        err = (got["blocktile_2d_typed"] - a @ b).abs().max().item()
        if err > (1e-3 if dtype == "float32" else 1e-9) * k ** 0.5:
            raise SystemExit(f"{m}x{n}x{k} {dtype}: max error {err:.3g} against torch")
        for _ in range(3):  # warm-up
            for run in runs.values():
                run()
        times = {algo: [] for algo in runs}
        for _ in range(repeats):
            for algo, run in runs.items():
                start.record()
                run()
                end.record()
                end.synchronize()
                times[algo].append(start.elapsed_time(end))
        med = {algo: statistics.median(t) for algo, t in times.items()}
        rows.append({"shape": f"{m}x{n}x{k}", "dtype": dtype, "blocktile_2d_ms": med["blocktile_2d"],
                     "typed_ms": med["blocktile_2d_typed"],
                     "typed_over_original": med["blocktile_2d_typed"] / med["blocktile_2d"]})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder for timing.md, sass.md and typed_dims.json")
    parser.add_argument("--sass", type=Path, help="count this SASS listing instead of the library's; no timing")
    parser.add_argument("--repeats", type=int, default=15, help="timed calls per rung and shape")
    args = parser.parse_args()
    result: dict = {}
    if args.sass:
        result["sass"] = count_sass(args.sass.read_text())
    else:
        import minitensor as mt

        import torch

        result["device"] = torch.cuda.get_device_name()
        result["timing"] = time_rungs(args.repeats)
        listing = library_sass()
        result["sass"] = count_sass(listing)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "kernels.sass").write_text(listing)
        print(f"device: {result['device']}; minitensor backend {mt.backend()}")
        lines = ["| shape (M x N x K) | dtype | blocktile_2d ms | blocktile_2d_typed ms | typed / original |",
                 "| --- | --- | ---: | ---: | ---: |"]
        lines += [f"| {r['shape']} | {r['dtype']} | {r['blocktile_2d_ms']:.3f} | {r['typed_ms']:.3f} | "
                  f"{r['typed_over_original']:.3f} |" for r in result["timing"]]
        print("\n".join(lines))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "timing.md").write_text("\n".join(lines) + "\n")
    print(sass_markdown(result["sass"]))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "sass.md").write_text(sass_markdown(result["sass"]) + "\n")
        (args.out / "typed_dims.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
