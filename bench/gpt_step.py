"""Where the GPT example's training step spends its GPU time, kernel by kernel, in both libraries.

    python bench/gpt_step.py --layers 6 --width 384 --heads 6 --context 256 --batch-size 64
    python bench/gpt_step.py ... --precisions float32,tf32   # and TF32 products in both libraries
    python bench/gpt_step.py ... --graph         # and minitensor's step as one CUDA graph
    python bench/gpt_step.py ... --no-torch      # minitensor alone
    python bench/gpt_step.py ... --unpacked      # and its self-attention without the packed node

The model, the batches and the step are examples/train_gpt.py's (GPT,
make_train_step; torch_gpt, make_torch_train_step for torch's twin): zero_grad,
forward, cross-entropy, backward, clip_grad_norm_(1.0), AdamW. For each
library:

1. --warmup steps (first-time work: the autotuner's timing, allocation);
2. --steps steps timed with the host's clock, each ending with loss.item()
   (a wait for the step's kernels): the step's wall time, host and GPU
   together, and tokens/s (examples/train_gpt.py's loop reads the loss every
   tenth step instead, so there the host queues a step while the GPU runs
   the one before);
3. --profile-steps more under torch.profiler with CUDA activity. CUPTI
   records every kernel, memset and memcpy of the process, minitensor's too,
   so the same profiler measures both libraries (one session each).

It prints, per library, a table of GPU time per step by kernel (name, launches
per step, milliseconds per step, share of the library's kernel time), then
the summary: wall ms per step, the sum of the kernel times per step, their
difference (the time the GPU waits for the host: launch overhead, Python,
synchronization) and the launches per step.

Without a CUDA device (the emulator build) there is nothing for CUPTI to see:
the profile is skipped with a message, and minitensor's step is timed and its
launches per step counted by the emulator (kernels.launch_count) instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import minitensor as mt  # noqa: E402
from minitensor import _lib  # noqa: E402

# The kinds of GPU activity in torch.profiler's trace that take GPU time.
GPU_CATEGORIES = ("kernel", "gpu_memset", "gpu_memcpy")


def load_example() -> Any:
    """examples/train_gpt.py, loaded by path (an example, not part of the package)."""
    spec = importlib.util.spec_from_file_location("train_gpt", REPO / "examples" / "train_gpt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def torch_or_none() -> Optional[Any]:
    """torch, when it is importable and sees a CUDA device; else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def short_name(name: str) -> str:
    """A kernel's name without its parameter list and return type (the template
    arguments stay: they tell the instantiations apart)."""
    name = re.sub(r"^void ", "", name)
    cut, depth = len(name), 0
    for i, c in enumerate(name):  # the last '(' outside <...> and (...) opens the parameter list
        if c in "<(":
            if c == "(" and depth == 0 and i > 0:
                cut = i
            depth += 1
        elif c in ">)":
            depth -= 1
    return name[:cut]


def gpu_activity(trace_file: str) -> dict[str, tuple[int, float]]:
    """{kernel name: (count, total microseconds)} of a chrome trace that
    torch.profiler exported: its events of GPU_CATEGORIES."""
    with open(trace_file) as f:
        events = json.load(f)["traceEvents"]
    table: dict[str, tuple[int, float]] = {}
    categories: dict[str, int] = {}
    for e in events:
        categories[str(e.get("cat"))] = categories.get(str(e.get("cat")), 0) + 1
        if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES:
            name = short_name(e["name"]) if e["cat"] == "kernel" else f"[{e['cat']}] {e['name']}"
            count, total = table.get(name, (0, 0.0))
            table[name] = (count + 1, total + float(e["dur"]))
    if not table:
        raise RuntimeError(f"the profiler's trace holds no GPU activity ({', '.join(GPU_CATEGORIES)}); "
                           f"its events by category: {categories}")
    return table


def profile_kernels(torch: Any, steps: int, run: Callable[[], None]) -> dict[str, tuple[int, float]]:
    """The GPU activity of `steps` calls of run() (each ends with a synchronize)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:  # the GPU's activity only: a small trace
        for _ in range(steps):
            run()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        return gpu_activity(path)
    finally:
        os.unlink(path)


def wall_ms(steps: int, run: Callable[[], None]) -> float:
    """Mean host milliseconds per call of run() over `steps` calls."""
    start = time.perf_counter()
    for _ in range(steps):
        run()
    return (time.perf_counter() - start) * 1e3 / steps


def print_table(library: str, table: dict[str, tuple[int, float]], steps: int, top: int) -> float:
    """Prints the kernels of one library, most GPU time first; returns the kernel ms per step."""
    total_us = sum(us for _, us in table.values())
    launches = sum(n for n, _ in table.values())
    print(f"\n{library}: GPU time per step by kernel ({len(table)} kernels, "
          f"{launches / steps:.0f} launches per step, {total_us / steps / 1e3:.3f} ms per step)")
    print(f"  {'kernel':<88} {'count':>6} {'ms':>8} {'share':>6}")
    rows = sorted(table.items(), key=lambda kv: -kv[1][1])
    for name, (count, us) in rows[:top]:
        label = name if len(name) <= 88 else name[:52] + "..." + name[-33:]  # both ends tell kernels apart
        print(f"  {label:<88} {count / steps:6.1f} {us / steps / 1e3:8.3f} {us / total_us:6.1%}")
    if len(rows) > top:
        rest = rows[top:]
        count = sum(n for _, (n, _) in rest)
        us = sum(u for _, (_, u) in rest)
        print(f"  {f'({len(rest)} more kernels)':<88} {count / steps:6.1f} {us / steps / 1e3:8.3f} "
              f"{us / total_us:6.1%}")
    return total_us / steps / 1e3


def make_steps(demo: Any, torch: Optional[Any], args: argparse.Namespace, vocab: int,
               x_np: np.ndarray, y_np: np.ndarray) -> dict[str, Callable[[], None]]:
    """One training step per library (each ends with loss.item(), as the
    example's loop), by name: minitensor's, torch's when there, and with
    --graph minitensor's as one replayed CUDA graph (the example's GraphedStep)."""
    def minitensor_step(capturable: bool) -> Any:
        mt.manual_seed(args.seed)
        model = demo.GPT(vocab, args.context, args.width, args.heads, args.layers)
        optimizer = mt.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, capturable=capturable)
        return demo.make_train_step(model, optimizer)

    steps: dict[str, Callable[[], None]] = {}
    train_step, x, y = minitensor_step(False), mt.tensor(x_np), mt.tensor(y_np)
    steps["minitensor"] = lambda: train_step(x, y).item()
    if torch is not None:
        torch.manual_seed(args.seed)
        twin = demo.torch_gpt(vocab, args.context, args.width, args.heads, args.layers)
        torch_step = demo.make_torch_train_step(twin, torch.optim.AdamW(twin.parameters(), lr=args.lr,
                                                                        weight_decay=0.01))
        tx, ty = torch.from_numpy(x_np).cuda(), torch.from_numpy(y_np).cuda()
        steps["torch"] = lambda: torch_step(tx, ty).item()
    if args.graph:  # last: a run cut short by a time limit has the two libraries' numbers already
        graphed = demo.GraphedStep(minitensor_step(True), args.batch_size, args.context, vocab)
        steps["mt graph"] = lambda: graphed(x_np, y_np).item()
    return steps


def measure(torch: Optional[Any], run: Callable[[], None], library: str,
            args: argparse.Namespace) -> tuple[float, Optional[float], float]:
    """(wall ms per step, kernel ms per step or None, launches per step) of one
    library's step, its kernel table printed on the way."""
    for _ in range(args.warmup):
        run()
    ms = wall_ms(args.steps, run)
    kernel_ms: Optional[float] = None
    launches = float("nan")
    if torch is not None:
        try:
            table = profile_kernels(torch, args.profile_steps, run)
        except RuntimeError as e:  # a profiler that sees no kernels: the timings still count
            print(f"\n{library}: no kernel profile: {e}")
        else:
            kernel_ms = print_table(library, table, args.profile_steps, args.top)
            launches = sum(n for n, _ in table.values()) / args.profile_steps
    elif _lib.launch_count("*") >= 0:  # the emulator counts launches
        _lib.reset_launch_counts()
        run()
        launches = float(_lib.launch_count("*"))
    return ms, kernel_ms, launches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--context", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=6e-3)
    parser.add_argument("--warmup", type=int, default=5, help="steps before any timing")
    parser.add_argument("--steps", type=int, default=20, help="steps timed with the host's clock")
    parser.add_argument("--profile-steps", type=int, default=5, help="steps under torch.profiler")
    parser.add_argument("--top", type=int, default=30, help="kernels listed per library (the rest summed)")
    parser.add_argument("--precisions", default="float32",
                        help="comma-separated: float32 (TF32 off in both libraries), tf32 (on in both)")
    parser.add_argument("--graph", action="store_true",
                        help="also minitensor's step as one replayed CUDA graph (train_gpt.py --graph)")
    parser.add_argument("--no-torch", action="store_true", help="minitensor alone")
    parser.add_argument("--unpacked", action="store_true",
                        help="minitensor's self-attention through MultiheadAttention's general path (narrow "
                             "views of the projection), not the packed node: an A/B of that node")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    precisions = args.precisions.split(",")
    for p in precisions:
        if p not in ("float32", "tf32"):
            parser.error(f"--precisions: {p!r} is neither float32 nor tf32")

    if args.unpacked:
        mt.nn.MultiheadAttention._packed_rung = lambda *a: None  # forward then takes the general path
    demo = load_example()
    torch = None if args.no_torch else torch_or_none()
    codes, chars = demo.load_text()
    rng = np.random.default_rng(args.seed)
    x_np, y_np = demo.batch(codes, args.batch_size, args.context, rng)  # one batch: the data does not change the time
    tokens = args.batch_size * args.context
    print(f"GPT step: {args.layers} layers, width {args.width}, {args.heads} heads, context {args.context}, "
          f"batch {args.batch_size} ({tokens} tokens); minitensor on {mt.backend()} ({mt.device_info()}), "
          f"policy {mt.kernels.get_policy()}{', self-attention unpacked' if args.unpacked else ''}")
    if torch is None:
        print("torch with a CUDA device is not here: minitensor alone, no kernel profile "
              "(CUPTI needs a GPU); launches are counted by the emulator where it runs")
    else:
        print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")

    summary: dict[tuple[str, str], tuple[float, Optional[float], float]] = {}
    for precision in precisions:
        demo.set_tf32(precision == "tf32", torch_too=torch is not None)
        print(f"\n==== {precision} ====")
        for library, run in make_steps(demo, torch, args, len(chars), x_np, y_np).items():
            summary[precision, library] = ms, _, launches = measure(torch, run, f"{library} ({precision})", args)
            print(f"{library} ({precision}): {ms:.3f} ms per step, {tokens / ms * 1e3:,.0f} tokens/s, "
                  f"{launches:.0f} launches per step")

    print(f"\n{'precision':<9} {'library':<11} {'wall ms/step':>12} {'tokens/s':>11} {'kernel ms/step':>14} "
          f"{'gap ms (host/idle)':>18} {'launches/step':>13}")
    for (precision, library), (ms, kernel_ms, launches) in summary.items():
        kernels = f"{kernel_ms:14.3f}" if kernel_ms is not None else f"{'-':>14}"
        gap = f"{ms - kernel_ms:18.3f}" if kernel_ms is not None else f"{'-':>18}"
        print(f"{precision:<9} {library:<11} {ms:12.3f} {tokens / ms * 1e3:11,.0f} {kernels} {gap} {launches:13.0f}")
    for precision in precisions:
        if (precision, "torch") in summary:
            ratio = summary[precision, "torch"][0] / summary[precision, "minitensor"][0]
            print(f"{precision}: minitensor / torch tokens/s = {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
