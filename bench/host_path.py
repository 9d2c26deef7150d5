"""Where the host time of a small op goes: Python calls counted, microseconds timed.

    python bench/host_path.py                  # counts, then the timings (minitensor and torch)
    python bench/host_path.py --counts-only    # counts only: machine-independent, a second or two
    python bench/host_path.py --list "a + b"   # every Python call of one case, in order

`a + b` on 16 float32 elements costs its host path and nothing else: the
kernel is a few hundred nanoseconds on a GPU. Two measures of that path:

**Python calls** (sys.setprofile): every Python function the case enters,
with the files they live in. A count does not depend on the machine, so
tests/test_host_path.py holds each case to its target; `--list` shows the
road call by call. The cases:

    a + b                  two float32 tensors of 16 elements, no gradient
    a + b (requires_grad)  the same with a recorded node
    a * 2.0                a tensor and a number (the map kernel)
    tiny backward          (w * 2).sum().backward(), w of 16 elements
    MLP Adam step          zero_grad, forward, cross-entropy, backward, Adam's
                           step of a 784-H-H-10 MLP (H = 32 here: the count
                           does not depend on the sizes), under the fast policy

**Microseconds per call** of `a + b` and of one layer at a time below it
(mt.kernels.add is the op without the Tensor and autograd layers), and
torch's `a + b` on the GPU beside it when torch and a GPU are there:

    Tensor a + b                  the whole road
    Tensor a + b (requires_grad)  and the node autograd records
    no_grad a + b                 inside no_grad()
    kernels.add(a, b)             promotion, broadcasting, the output's allocation
    kernels.add(a, b, out=out)    the binding: descriptors, the op table, the status
    mt.empty(16) + free           one allocation and free, and the Tensor around it
    MLP Adam step (H = 2048)      the whole step, per step (--hidden)
    torch ...                     the same cases in torch, when importable (GPU)

Each number is the median over --repeats loops of --loops calls, in
microseconds per call, after a warm-up; each loop ends with a synchronize.
On the emulator a launch runs the kernel on the CPU, so only the counts
and the layers without a kernel mean much there; on a GPU both do.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import minitensor as mt  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from minitensor import nn, optim  # noqa: E402

# ---- counting Python calls -----------------------------------------------------------


def python_calls(fn: Callable[[], Any]) -> list[tuple[str, str]]:
    """(file, function) of every Python function entered while fn() runs, in
    order, fn itself left out. Freeing what fn dropped (a Storage's __del__)
    is part of the case: it runs within the call."""
    calls: list[tuple[str, str]] = []
    top = fn.__code__

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is not top:
            calls.append((_short(frame.f_code.co_filename), frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def _short(filename: str) -> str:
    """A file's path relative to the repository (others as they are)."""
    try:
        return str(Path(filename).resolve().relative_to(REPO))
    except ValueError:
        return filename


def count(fn: Callable[[], Any], warmup: int = 3) -> tuple[int, int]:
    """(Python calls, distinct files) of fn(), after warmup runs (first-time
    work, such as building a descriptor or reading the op tables, is not the
    common call's)."""
    for _ in range(warmup):
        fn()
    calls = python_calls(fn)
    return len(calls), len({f for f, _ in calls})


def mlp(hidden: int, seed: int = 0) -> tuple[nn.Module, optim.Optimizer, mt.Tensor, mt.Tensor]:
    """A 784-hidden-hidden-10 MLP, its Adam and a batch of 64 (the training step's parts)."""
    mt.manual_seed(seed)
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, 10))
    opt = optim.Adam(model.parameters(), lr=1e-3)
    x = mt.randn(64, 784)
    y = mt.randint(0, 10, (64,))
    return model, opt, x, y


def train_step(model: nn.Module, opt: optim.Optimizer, x: mt.Tensor, y: mt.Tensor) -> mt.Tensor:
    """One step: zero_grad, forward, cross-entropy, backward, the optimizer's step."""
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def count_cases() -> dict[str, Callable[[], Any]]:
    """The counted cases, by name (see the module's docstring)."""
    a, b = mt.randn(16), mt.randn(16)
    w = mt.randn(16, requires_grad=True)
    model, opt, x, y = mlp(32)

    def tiny_backward() -> None:
        (w * 2).sum().backward()

    def mlp_step() -> None:
        with mt.kernels.policy("fast"):
            train_step(model, opt, x, y)

    return {
        "a + b": lambda: a + b,
        "a + b (requires_grad)": lambda: w + a,
        "a * 2.0": lambda: a * 2.0,
        "tiny backward": tiny_backward,
        "MLP Adam step": mlp_step,
    }


# ---- timing ------------------------------------------------------------------------


def per_call_us(fn: Callable[[], object], sync: Callable[[], None], loops: int, repeats: int) -> float:
    for _ in range(min(loops, 200)):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        sync()
        times.append((time.perf_counter() - start) / loops)
    return statistics.median(times) * 1e6


def minitensor_timings(hidden: int) -> list[tuple[str, Callable[[], object], int]]:
    """(case, fn, loops divisor) for minitensor: the layers of `a + b`, and the MLP step."""
    a, b = mt.randn(16), mt.randn(16)
    w = mt.randn(16, requires_grad=True)
    out = mt.empty_like(a)
    model, opt, x, y = mlp(hidden)

    def no_grad_add() -> object:
        with mt.no_grad():
            return a + b

    return [
        ("Tensor a + b", lambda: a + b, 1),
        ("Tensor a + b (requires_grad)", lambda: w + a, 1),
        ("no_grad a + b", no_grad_add, 1),
        ("kernels.add(a, b)", lambda: mt.kernels.add(a, b), 1),
        ("kernels.add(a, b, out=out)", lambda: mt.kernels.add(a, b, out=out), 1),
        ("mt.empty(16) + free", lambda: mt.empty(16), 1),
        (f"MLP Adam step (H = {hidden})", lambda: train_step(model, opt, x, y), 100),
    ]


def torch_timings(hidden: int) -> dict[str, tuple[Callable[[], object], Callable[[], None]]]:
    """The same cases in torch on the GPU, by minitensor's case name; {} without torch or a GPU."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    ta, tb = torch.randn(16, device="cuda"), torch.randn(16, device="cuda")
    tw = torch.randn(16, device="cuda", requires_grad=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                                torch.nn.ReLU(), torch.nn.Linear(hidden, 10)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(64, 784, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    def no_grad_add() -> object:
        with torch.no_grad():
            return ta + tb

    sync = torch.cuda.synchronize
    return {
        "Tensor a + b": (lambda: ta + tb, sync),
        "Tensor a + b (requires_grad)": (lambda: tw + ta, sync),
        "no_grad a + b": (no_grad_add, sync),
        "mt.empty(16) + free": (lambda: torch.empty(16, device="cuda"), sync),
        f"MLP Adam step (H = {hidden})": (step, sync),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--hidden", type=int, default=2048, help="the MLP's hidden width for the timed step")
    parser.add_argument("--counts-only", action="store_true", help="only the Python call counts")
    parser.add_argument("--list", metavar="CASE", help="print every Python call of one counted case")
    args = parser.parse_args()

    cases = count_cases()
    if args.list:
        fn = cases[args.list]
        count(fn)
        for i, (filename, name) in enumerate(python_calls(fn), 1):
            print(f"{i:4d}  {filename}  {name}")
        return

    print(f"backend {mt.backend()}; Python calls per case (sys.setprofile, after a warm-up)")
    print("| case | Python calls | files |\n| --- | ---: | ---: |")
    for name, fn in cases.items():
        calls, files = count(fn)
        print(f"| {name} | {calls} | {files} |")
    if args.counts_only:
        return

    theirs = torch_timings(args.hidden)
    print(f"\nmicroseconds per call (median of {args.repeats} x {args.loops}; the MLP step: of "
          f"{args.repeats} x {max(args.loops // 100, 1)})")
    print("| case | minitensor us | torch us |\n| --- | ---: | ---: |")
    for name, fn, divisor in minitensor_timings(args.hidden):
        loops = max(args.loops // divisor, 1)
        ours = per_call_us(fn, mt.synchronize, loops, args.repeats)
        torch_us = "" if name not in theirs else f"{per_call_us(*theirs[name], loops, args.repeats):.2f}"
        print(f"| {name} | {ours:.2f} | {torch_us} |")


if __name__ == "__main__":
    main()
