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
    GPT step               one training step of examples/train_gpt.py's model
                           (2 pre-LN layers; width 16 here, the count does not
                           depend on it): zero_grad, forward, cross-entropy,
                           backward, clip_grad_norm_, AdamW, fast policy
    max(dim=1)             values and int64 indices of an 8 x 16 tensor, no gradient
    argmax(dim=1)          the indices alone
    max_pool2d             F.max_pool2d(x, 2) of a (2, 3, 8, 8) tensor, no gradient

**Microseconds per call** of `a + b` and of one layer at a time below it
(mt.kernels.add is the op without the Tensor and autograd layers), and
torch's `a + b` on the GPU beside it when torch and a GPU are there:

    Tensor a + b                  the whole road
    Tensor a + b (requires_grad)  and the node autograd records
    no_grad a + b                 inside no_grad()
    kernels.add(a, b)             promotion, broadcasting, the output's allocation
    kernels.add(a, b, out=out)    the binding: descriptors, the op table, the status
    mt.empty(16) + free           one allocation and free, and the Tensor around it
    tiny backward                 (w * 2).sum().backward(), w of 16 x 16
    MLP Adam step (H = 2048)      the whole step, per step (--hidden), batch 64
    MLP step, one graph           the same MLP at batch --graph-batch (1024), the
                                  whole step (zero_grad, forward, backward, Adam
                                  with capturable=True) captured once as one CUDA
                                  graph and replayed: minitensor's mt.cuda.graph,
                                  torch's torch.cuda.graph, per replay
    torch ...                     the same cases in torch, when importable (GPU)

Each number is the median over --repeats loops of --loops calls, in
microseconds per call, after a warm-up; each loop ends with a synchronize.
On the emulator a launch runs the kernel on the CPU, so only the counts
and the layers without a kernel mean much there; on a GPU both do.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
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
    is part of the case: it runs within the call. The cyclic garbage collector
    is run before and kept off during the count, so that objects an earlier
    case left in reference cycles are not freed (and counted) inside this one."""
    calls: list[tuple[str, str]] = []
    top = fn.__code__

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is not top:
            calls.append((_short(frame.f_code.co_filename), frame.f_code.co_name))

    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
        if was_enabled:
            gc.enable()
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


def gpt_step() -> Callable[[], Any]:
    """One training step of the GPT demo's model (examples/train_gpt.py, loaded
    by path: an example, not part of the package), small enough for the emulator."""
    spec = importlib.util.spec_from_file_location("train_gpt", REPO / "examples" / "train_gpt.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    mt.manual_seed(0)
    vocab, context, batch = 11, 8, 2
    model = demo.GPT(vocab, context, width=16, heads=2, layers=2)
    optimizer = optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    train_step = demo.make_train_step(model, optimizer)
    x = mt.randint(0, vocab, (batch, context))
    y = mt.randint(0, vocab, (batch, context))

    def step() -> None:
        with mt.kernels.policy("fast"):
            train_step(x, y)

    return step


def count_cases() -> dict[str, Callable[[], Any]]:
    """The counted cases, by name (see the module's docstring)."""
    a, b = mt.randn(16), mt.randn(16)
    w = mt.randn(16, requires_grad=True)
    m, image = mt.randn(8, 16), mt.randn(2, 3, 8, 8)
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
        "GPT step": gpt_step(),
        "max(dim=1)": lambda: m.max(dim=1),
        "argmax(dim=1)": lambda: m.argmax(dim=1),
        "max_pool2d": lambda: F.max_pool2d(image, 2),
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


def graphed_step(model: Any, opt: Any, x: Any, y: Any, cross_entropy: Callable[..., Any]) -> None:
    """One whole training step (written once for both libraries): zero_grad,
    forward, cross-entropy, backward, the optimizer's step."""
    opt.zero_grad()
    cross_entropy(model(x), y).backward()
    opt.step()


def minitensor_graph_replay(hidden: int, batch: int) -> Callable[[], None]:
    """The MLP's whole step (Adam with capturable=True) captured as one graph
    after two eager steps (first-time work, such as the autotuner's timing,
    must not be captured); returns the replay."""
    model, _, _, _ = mlp(hidden)
    opt = optim.Adam(model.parameters(), lr=1e-3, capturable=True)
    x = mt.randn(batch, 784)
    y = mt.randint(0, 10, (batch,))
    with mt.kernels.policy("fast"):  # the teaching chain's cross-entropy checks targets on the device
        for _ in range(2):
            graphed_step(model, opt, x, y, F.cross_entropy)
        graph = mt.cuda.CUDAGraph()
        with mt.cuda.graph(graph):
            graphed_step(model, opt, x, y, F.cross_entropy)
    kept = (model, opt, x, y)  # the buffers the graph reads: alive as long as the replay is

    def replay() -> None:
        graph.replay()
        assert kept

    return replay


def minitensor_timings(hidden: int, batch: int) -> list[tuple[str, Callable[[], object], int]]:
    """(case, fn, loops divisor) for minitensor: the layers of `a + b`, the
    tiny backward, the MLP step eagerly and as one replayed graph."""
    a, b = mt.randn(16), mt.randn(16)
    w = mt.randn(16, requires_grad=True)
    w2 = mt.randn(16, 16, requires_grad=True)
    out = mt.empty_like(a)
    model, opt, x, y = mlp(hidden)
    replay = minitensor_graph_replay(hidden, batch)

    def no_grad_add() -> object:
        with mt.no_grad():
            return a + b

    def tiny_backward() -> None:
        (w2 * 2).sum().backward()

    return [
        ("Tensor a + b", lambda: a + b, 1),
        ("Tensor a + b (requires_grad)", lambda: w + a, 1),
        ("no_grad a + b", no_grad_add, 1),
        ("kernels.add(a, b)", lambda: mt.kernels.add(a, b), 1),
        ("kernels.add(a, b, out=out)", lambda: mt.kernels.add(a, b, out=out), 1),
        ("mt.empty(16) + free", lambda: mt.empty(16), 1),
        ("tiny backward (w * 2).sum().backward(), 16 x 16", tiny_backward, 10),
        (f"MLP Adam step (H = {hidden}, batch 64)", lambda: train_step(model, opt, x, y), 100),
        (f"MLP step, one graph (H = {hidden}, batch {batch}, capturable Adam)", replay, 100),
    ]


def torch_timings(hidden: int, batch: int) -> dict[str, tuple[Callable[[], object], Callable[[], None]]]:
    """The same cases in torch on the GPU, by minitensor's case name; {} without torch or a GPU."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    ta, tb = torch.randn(16, device="cuda"), torch.randn(16, device="cuda")
    tw = torch.randn(16, device="cuda", requires_grad=True)
    tw2 = torch.randn(16, 16, device="cuda", requires_grad=True)
    cross_entropy = torch.nn.functional.cross_entropy

    def torch_mlp() -> Any:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                                   torch.nn.ReLU(), torch.nn.Linear(hidden, 10)).cuda()

    model = torch_mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(64, 784, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")

    # The whole step as one graph, as torch's CUDA Graphs documentation
    # captures a whole network: warm-up on a side stream, then the capture,
    # with capturable Adam (its step count on the device).
    gmodel = torch_mlp()
    gopt = torch.optim.Adam(gmodel.parameters(), lr=1e-3, capturable=True)
    gx = torch.randn(batch, 784, device="cuda")
    gy = torch.randint(0, 10, (batch,), device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            graphed_step(gmodel, gopt, gx, gy, cross_entropy)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed_step(gmodel, gopt, gx, gy, cross_entropy)
    kept = (gmodel, gopt, gx, gy)  # as minitensor_graph_replay's

    def replay() -> None:
        graph.replay()
        assert kept

    def no_grad_add() -> object:
        with torch.no_grad():
            return ta + tb

    def tiny_backward() -> None:
        (tw2 * 2).sum().backward()

    sync = torch.cuda.synchronize
    return {
        "Tensor a + b": (lambda: ta + tb, sync),
        "Tensor a + b (requires_grad)": (lambda: tw + ta, sync),
        "no_grad a + b": (no_grad_add, sync),
        "mt.empty(16) + free": (lambda: torch.empty(16, device="cuda"), sync),
        "tiny backward (w * 2).sum().backward(), 16 x 16": (tiny_backward, sync),
        f"MLP Adam step (H = {hidden}, batch 64)": (lambda: graphed_step(model, opt, x, y, cross_entropy), sync),
        f"MLP step, one graph (H = {hidden}, batch {batch}, capturable Adam)": (replay, sync),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--hidden", type=int, default=2048, help="the MLP's hidden width for the timed steps")
    parser.add_argument("--graph-batch", type=int, default=1024, help="the batch of the graphed MLP step")
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

    theirs = torch_timings(args.hidden, args.graph_batch)
    print(f"\nmicroseconds per call (median of {args.repeats} loops of {args.loops} calls, "
          f"{args.loops // 10} for the tiny backward, {max(args.loops // 100, 1)} for the MLP steps); "
          f"torch / minitensor above 1: minitensor is faster")
    print("| case | minitensor us | torch us | torch / minitensor |\n| --- | ---: | ---: | ---: |")
    for name, fn, divisor in minitensor_timings(args.hidden, args.graph_batch):
        loops = max(args.loops // divisor, 1)
        ours = per_call_us(fn, mt.synchronize, loops, args.repeats)
        if name in theirs:
            torch_us = per_call_us(*theirs[name], loops, args.repeats)
            print(f"| {name} | {ours:.2f} | {torch_us:.2f} | {torch_us / ours:.2f}x |")
        else:
            print(f"| {name} | {ours:.2f} | | |")


if __name__ == "__main__":
    main()
