"""What the torch custom-op call costs, against calling minitensor directly.

    python bench/torch_ops.py                 # every case, a table on stdout
    python bench/torch_ops.py --json out.json # and the numbers as JSON
    python bench/torch_ops.py --quick         # fewer loops (a smoke test)

minitensor.torch_ops runs minitensor's kernels on torch tensors: each call
goes through torch's dispatcher (``torch.ops.minitensor.*``, a Python
custom op), hands each tensor's memory to minitensor through DLPack, runs
the same minitensor op, and hands the result back. The kernels are the same
either way, so the difference between

    minitensor   the minitensor op on minitensor tensors (mt.matmul, F.softmax,
                 ...; the same memory as the torch tensors, mt.from_dlpack)
    custom op    minitensor.torch_ops on the torch tensors

is the custom op's overhead. Beside them: ``torch``, torch's own op on the
same tensors, and for each case the forward + backward of both (inputs that
require a gradient, ``y.backward(g)``: minitensor's autograd, or torch's
autograd running the custom ops' backward ops). Two parts of the overhead alone:
``DLPack round trip``, mt.from_dlpack of a torch tensor and torch.from_dlpack
of a minitensor tensor (the public spelling of what each op does per tensor),
and ``empty custom op``, a Python custom op of two tensors that does nothing
(torch's dispatch, no minitensor).

Each number is the median over --repeats loops of --loops calls, in
microseconds of host time per call, after a warm-up; each loop ends with a
synchronize, so on a GPU a case bound by its kernels reports their time and
one bound by its host path reports that (the small shapes are chosen to be
host-bound: there the difference is all overhead). On the emulator the
kernels run on the CPU, so only the differences mean much there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as TF  # noqa: E402

import minitensor as mt  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
import minitensor.torch_ops as mtops  # noqa: E402
import host_path  # noqa: E402

DEVICE = "cuda" if mt.backend() == "cuda" else "cpu"
if DEVICE == "cpu":
    torch.set_num_threads(1)  # torch's own CPU ops, beside the emulator's threads: no contention


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    mt.cuda.synchronize()


def per_call_us(fn: Callable[[], object], loops: int, repeats: int) -> float:
    """Median host microseconds per call of fn over `repeats` loops of `loops` calls
    (host_path.py's timer, each loop ending in a synchronize of both libraries)."""
    return host_path.per_call_us(fn, sync, loops, repeats)


def leaves(*tensors: Any) -> tuple[list[Any], list[Any]]:
    """Each torch tensor as a fresh leaf that requires a gradient, and the minitensor
    tensor over the same memory (another leaf of minitensor's autograd)."""
    theirs = [t.detach().clone().requires_grad_(True) for t in tensors]
    mine = [mt.from_dlpack(t.detach()).requires_grad_(True) for t in theirs]
    return theirs, mine


def cases(small: bool) -> list[tuple[str, tuple[Any, ...], Callable[..., Any], Callable[..., Any], Callable[..., Any]]]:
    """(name, torch inputs, minitensor fn, custom-op fn, torch fn) for each op at one size."""
    g = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> Any:
        return torch.randn(*shape, generator=g).to(DEVICE)

    if small and DEVICE == "cpu":  # the emulator runs the kernels on the CPU: the smallest that mean anything
        n, rows, img, seq = 8, (4, 16), (1, 2, 4, 4), (1, 1, 4, 32)
    elif small:
        n, rows, img, seq = 64, (32, 64), (4, 8, 16, 16), (2, 4, 32, 32)
    else:
        n, rows, img, seq = 1024, (4096, 1024), (32, 64, 32, 32), (8, 8, 256, 64)
    return [
        # No element, no kernel: the two columns differ by the custom op's overhead alone.
        ("softmax 4x0 (no kernel)", (rand(4, 0),), lambda x: F.softmax(x, -1), lambda x: mtops.softmax(x, -1),
         lambda x: torch.softmax(x, -1)),
        (f"matmul {n}x{n}", (rand(n, n), rand(n, n)), mt.matmul, mtops.matmul, torch.matmul),
        (f"softmax {rows[0]}x{rows[1]}", (rand(*rows),), lambda x: F.softmax(x, -1),
         lambda x: mtops.softmax(x, -1), lambda x: torch.softmax(x, -1)),
        (f"layer_norm {rows[0]}x{rows[1]}", (rand(*rows), rand(rows[1]), rand(rows[1])),
         lambda x, w, b: F.layer_norm(x, (rows[1],), w, b), lambda x, w, b: mtops.layer_norm(x, (rows[1],), w, b),
         lambda x, w, b: TF.layer_norm(x, (rows[1],), w, b)),
        ("sdpa causal " + "x".join(map(str, seq)), (rand(*seq), rand(*seq), rand(*seq)),
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         lambda q, k, v: mtops.scaled_dot_product_attention(q, k, v, is_causal=True),
         lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True)),
        ("conv2d 3x3 " + "x".join(map(str, img)), (rand(*img), rand(img[1], img[1], 3, 3), rand(img[1])),
         lambda x, w, b: F.conv2d(x, w, b, padding=1), lambda x, w, b: mtops.conv2d(x, w, b, padding=1),
         lambda x, w, b: TF.conv2d(x, w, b, padding=1)),
    ]


def measure(small: bool, loops: int, repeats: int) -> list[dict[str, Any]]:
    rows = []
    for name, inputs, mine_fn, op_fn, torch_fn in cases(small):
        shared = [mt.from_dlpack(t) for t in inputs]  # the same memory, as minitensor tensors
        row: dict[str, Any] = {"case": name}
        with torch.no_grad(), mt.no_grad():
            row["minitensor"] = per_call_us(lambda: mine_fn(*shared), loops, repeats)
            row["custom op"] = per_call_us(lambda: op_fn(*inputs), loops, repeats)
            row["torch"] = per_call_us(lambda: torch_fn(*inputs), loops, repeats)
        theirs, mine = leaves(*inputs)
        grad = torch.ones_like(torch_fn(*inputs))
        mine_grad = mt.from_dlpack(grad)
        row["minitensor fwd+bwd"] = per_call_us(lambda: mine_fn(*mine).backward(mine_grad), loops, repeats)
        row["custom op fwd+bwd"] = per_call_us(lambda: op_fn(*theirs).backward(grad), loops, repeats)
        row["torch fwd+bwd"] = per_call_us(lambda: torch_fn(*theirs).backward(grad), loops, repeats)
        row["overhead"] = row["custom op"] - row["minitensor"]
        row["overhead fwd+bwd"] = row["custom op fwd+bwd"] - row["minitensor fwd+bwd"]
        rows.append(row)
        print(table_row(row), flush=True)  # as it comes: a run cut short keeps what it measured
    return rows


def round_trip(loops: int, repeats: int) -> float:
    """Microseconds of mt.from_dlpack(torch tensor) plus torch.from_dlpack(minitensor tensor)."""
    t = torch.randn(64, 64, device=DEVICE)
    m = mt.from_dlpack(t)
    return per_call_us(lambda: (mt.from_dlpack(t), torch.from_dlpack(m)), loops, repeats)


@torch.library.custom_op("bench_torch_ops::first", mutates_args=(), schema="(Tensor a, Tensor b) -> Tensor")
def _first(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A custom op that does nothing but return a new tensor: torch's dispatch of a
    Python custom op alone, with none of minitensor's work."""
    return a.new_empty(())


def dispatch_only(loops: int, repeats: int) -> float:
    """Microseconds of a call of a do-nothing custom op of two tensors."""
    a, b = torch.randn(8, 8, device=DEVICE), torch.randn(8, 8, device=DEVICE)
    with torch.no_grad():
        return per_call_us(lambda: _first(a, b), loops, repeats)


COLUMNS = ["minitensor", "custom op", "overhead", "torch", "minitensor fwd+bwd", "custom op fwd+bwd",
           "overhead fwd+bwd", "torch fwd+bwd"]


HEADER = "| case | " + " | ".join(COLUMNS) + " |\n| --- |" + " ---: |" * len(COLUMNS)


def table_row(row: dict[str, Any]) -> str:
    return f"| {row['case']} | " + " | ".join(f"{row[c]:.1f}" for c in COLUMNS) + " |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--loops", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="5 loops of 3 repeats, small shapes only")
    parser.add_argument("--large", action="store_true", help="also the large shapes (kernel-bound on a GPU)")
    parser.add_argument("--json", type=Path, help="write the numbers here too")
    args = parser.parse_args()
    loops, repeats = (5, 3) if args.quick else (args.loops, args.repeats)
    device = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU (emulator)"
    print(f"minitensor {mt.backend()} on {device}, torch {torch.__version__}; "
          f"microseconds per call, median of {repeats} loops of {loops}")
    result: dict[str, Any] = {"backend": mt.backend(), "device": device, "torch": torch.__version__,
                              "loops": loops, "repeats": repeats}
    result["dlpack round trip"] = round_trip(loops * 4, repeats)
    print(f"DLPack round trip (mt.from_dlpack + torch.from_dlpack): {result['dlpack round trip']:.1f} us")
    result["empty custom op"] = dispatch_only(loops * 4, repeats)
    print(f"a custom op that does nothing (torch's dispatch alone): {result['empty custom op']:.1f} us")
    print("\nsmall shapes (host-bound on a GPU):\n" + HEADER, flush=True)
    result["small"] = measure(True, loops, repeats)
    if args.large and not args.quick:
        print("\nlarge shapes:\n" + HEADER, flush=True)
        result["large"] = measure(False, max(loops // 5, 3), repeats)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
