"""Hostile arguments at every public op, in child processes: no input may
crash the interpreter.

Hypothesis draws batches of calls (Python expressions: creation functions,
views, indexing and setitem, elementwise and in-place ops, reductions,
matmul, softmax, gather/scatter, cat/stack, nn.functional, mt.kernels, and
the zero-copy exchange with NumPy in both directions) with
huge, negative and non-int sizes, dims out of range, huge slice steps and
offsets, wrong types, NaN/inf scalars, empty and 0-d tensors and mismatched
shapes. tests/fuzz_driver.py runs each batch in a child process and reports
each call. A call passes if it returns, or raises a minitensor error,
TypeError, ValueError, IndexError, RuntimeError (or BufferError, the
DLPack protocol's own) with a message; it fails
on any other exception, on output written to stdout/stderr, and, naming the
last call started, on a signal, a non-zero exit or a hang (timeout).

Not fuzzed: mt.kernels.from_device_pointer/to_device_pointer (they take raw
addresses, as torch's do), and reductions, matmul or softmax of views of
2**40 elements and more (they would run for days, not crash).

Deterministic under CI=true (tests/conftest.py derandomizes hypothesis).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DRIVER = Path(__file__).with_name("fuzz_driver.py")
ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 120

# ---- running a batch in a child -----------------------------------------------------


def run_batch(calls: list[str], timeout_s: float = TIMEOUT_S) -> None:
    """Runs calls in one child process; fails naming the first bad call."""
    with tempfile.TemporaryDirectory() as tmp:
        calls_path = Path(tmp) / "calls.json"
        report_path = Path(tmp) / "report.jsonl"
        calls_path.write_text(json.dumps(calls))
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        try:
            proc = subprocess.run([sys.executable, str(DRIVER), str(calls_path), str(report_path)],
                                  capture_output=True, text=True, timeout=timeout_s, env=env, cwd=ROOT)
            code, hung = proc.returncode, False
        except subprocess.TimeoutExpired:
            proc, code, hung = None, None, True
        events = [json.loads(line) for line in report_path.read_text().splitlines()] \
            if report_path.exists() else []
    started = [e for e in events if "start" in e]
    last = started[-1]["start"] if started else "(before the first call)"
    if hung:
        pytest.fail(f"the child hung (over {timeout_s} s); last call started: {last}")
    if code != 0:
        tail = (proc.stderr or "")[-2000:]
        pytest.fail(f"the child died with exit code {code}; last call started: {last}\n{tail}")
    bad = []
    for e in events:
        if "end" not in e:
            continue
        call = calls[e["i"]]
        if e["output"]:
            bad.append(f"{call}: printed {e['output']!r} instead of raising")
        if e["end"] == "raised" and not e["allowed"]:
            bad.append(f"{call}: raised {e['type']}: {e['message']}")
        elif e["end"] == "raised" and not e["message"].strip():
            bad.append(f"{call}: raised {e['type']} without a message")
    assert not bad, "\n".join(bad)
    assert events and events[-1].get("done") == len(calls)


# ---- hostile arguments, as Python source ---------------------------------------------------

# No size between 2**20 and 2**40: such a tensor fits (lazily) in memory and
# takes minutes to fill; 2**43 elements fail to allocate at once.
HUGE_INTS = ["2**43", "2**62 + 1", "2**63", "2**64", "-2**63 - 1", "10**30"]
SMALL_INTS = ["0", "1", "2", "3", "-1", "-2", "-4", "5"]
sizes = st.sampled_from(SMALL_INTS[:5] + ["-1", "-3"] + HUGE_INTS)
ints = st.sampled_from(SMALL_INTS + HUGE_INTS)
dims = st.sampled_from(SMALL_INTS + ["2**63", "-2**63 - 1", "1.0", "None", "'a'", "(0, 0)", "(0, 1)", "True"])
scalars = st.sampled_from(["0.0", "1.5", "-2", "math.nan", "math.inf", "-math.inf", "1e308", "10**400",
                           "True", "None", "'x'", "[]", "[1.0, 2.0]", "np.float64(2)", "np.ones(3)",
                           "(1, 2)", "1j"])
weird = st.sampled_from(["None", "'x'", "[]", "[[1], [2, 3]]", "1.5", "object()", "np.ones(3)",
                         "{'a': 1}", "(2, -1)", "math.nan", "slice(None)"])

# Tensors of modest size: every op may compute on these.
SMALL_TENSORS = [
    "mt.tensor(1.5)", "mt.zeros(0)", "mt.zeros(0, 3)", "mt.zeros(3, 0, 2)", "mt.randn(3)",
    "mt.randn(2, 3)", "mt.randn(3, 2, dtype=mt.float64)", "mt.randn(2, 3, 4)", "mt.ones(1, 1)",
    "mt.randn(4, 5)[:, ::2]", "mt.randn(3, 4).T", "mt.ones(1).expand(3, 4)",
    "mt.tensor([math.nan, math.inf, -math.inf])", "mt.randn(2, 1, 3)", "mt.arange(6.0).view(2, 3)",
    "mt.randn(5)[4:]", "mt.zeros(2, 3, requires_grad=True)", "mt.randn(2, 3, requires_grad=True) * 1",
    "mt.arange(6).view(2, 3)", "mt.tensor([[True, False, True]])", "mt.tensor([-2**63, 2**63 - 1])",
    "mt.zeros(2, 3, dtype=mt.bool)",
]
# Views of very many elements: only for ops whose output has as many (they must
# fail to allocate, cleanly), never for reductions or matmul.
HUGE_VIEWS = ["mt.ones(1).expand(2**62 + 1)", "mt.ones(1, 1).expand(2**43, 3)",
              "mt.ones(1, dtype=mt.float64).expand(2**61)", "mt.ones(1).expand(2**40)"]
small = st.sampled_from([f"({t})" for t in SMALL_TENSORS])
any_tensor = st.sampled_from([f"({t})" for t in SMALL_TENSORS + HUGE_VIEWS])
index_tensors = st.sampled_from(["mt.zeros(2, 3)", "mt.tensor([[0.0, 1.0]])", "mt.tensor([[5.0]])",
                                 "mt.tensor([[-1.0]])", "mt.tensor([[math.nan]])", "mt.tensor([[0.5]])",
                                 "mt.zeros(0, 3)", "mt.tensor([[1e30]])", "mt.zeros(2, 3, 4)"])
operand = st.one_of(any_tensor, scalars, weird).map(lambda x: f"({x})")


def slices() -> st.SearchStrategy[str]:
    part = st.sampled_from(["None", "0", "1", "-1", "2**62", "2**63", "-2**63 - 1", "10**30", "1.5", "'a'"])
    step = st.sampled_from(["None", "1", "2", "0", "-1", "2**62", "2**63", "2**64", "1.5"])
    return st.builds(lambda a, b, c: f"slice({a}, {b}, {c})", part, part, step)


index_arrays = st.sampled_from(["[0]", "[0, -1]", "[[0], [1]]", "[]", "[5]", "[-2**63]", "[2**63 - 1]",
                                "np.array([1, 0])", "np.array([True, False])", "np.ones((2, 3), bool)",
                                "np.array([2**64 - 1], np.uint64)", "mt.tensor([0, 1])", "mt.tensor([[1], [0]])",
                                "mt.tensor([3])", "mt.tensor(1)", "mt.tensor([True])", "mt.tensor([0.0])",
                                "[0.5]", "[[0], [1, 2]]", "[mt.tensor(0)]", "['a']"])
keys = st.one_of(ints, slices(), st.sampled_from(["None", "...", "(0, 0)", "(..., 0)", "(None, 0, ...)",
                                                   "(..., ...)", "[0]", "mt.zeros(1)", "True", "1.0",
                                                   "(slice(None), 2**63)", "(0, 0, 0, 0)"]),
                 st.tuples(slices(), slices()).map(lambda t: f"({t[0]}, {t[1]})"),
                 st.tuples(index_arrays, st.one_of(index_arrays, slices(), ints, st.just("None"))).map(
                     lambda t: f"({t[0]}, {t[1]})"),
                 st.tuples(index_arrays, slices(), index_arrays).map(lambda t: f"({t[0]}, {t[1]}, {t[2]})"))


def call(template: str, **parts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.fixed_dictionaries(parts).map(lambda d: template.format(**d))


shape_args = st.lists(sizes, max_size=3).map(", ".join)
shape_tuples = st.lists(sizes, max_size=3).map(lambda parts: "(" + "".join(p + ", " for p in parts) + ")")
CREATION = st.one_of(
    call("mt.{f}({s})", f=st.sampled_from(["zeros", "ones", "empty", "rand", "randn"]), s=shape_args),
    call("mt.{f}({s})", f=st.sampled_from(["zeros", "ones", "empty"]), s=shape_tuples),
    call("mt.{f}({w})", f=st.sampled_from(["zeros", "ones", "empty", "tensor"]), w=weird),
    call("mt.full({s}, {v})", s=shape_tuples, v=scalars),
    call("mt.arange({a}, {b}, {c})", a=scalars, b=scalars, c=scalars),
    call("mt.tensor({v}, dtype={d})", v=scalars, d=st.sampled_from(["None", "mt.float64", "'x'", "int"])),
    call("{t}.new_empty({s})", t=small, s=shape_tuples),
    call("mt.{f}({t}, dtype={d})", f=st.sampled_from(["zeros_like", "ones_like", "rand_like"]), t=small,
         d=st.sampled_from(["None", "mt.float64", "'x'"])),
)
VIEWS = st.one_of(
    call("{t}.view({s})", t=any_tensor, s=shape_args),
    call("{t}.reshape({s})", t=small, s=shape_args),
    call("{t}.expand({s})", t=any_tensor, s=shape_args),
    call("{t}.permute({a}, {b})", t=small, a=dims, b=dims),
    call("{t}.transpose({a}, {b})", t=any_tensor, a=dims, b=dims),
    call("{t}.{f}({d})", t=any_tensor, f=st.sampled_from(["unsqueeze", "squeeze", "flatten", "size", "stride"]),
         d=dims),
    call("{t}.narrow({d}, {a}, {b})", t=any_tensor, d=dims, a=ints, b=ints),
    call("mt.ops.as_strided({t}, ({a},), ({b},), {c})", t=small, a=ints, b=ints, c=ints),
    call("{t}[{k}]", t=any_tensor, k=keys),
    call("{t}.__setitem__({k}, {v})", t=small, k=keys, v=operand),
    call("{t}.{f}", t=small, f=st.sampled_from(["T", "mT", "t()", "contiguous()", "clone()", "item()",
                                                "tolist()", "double()", "detach()", "__len__()"])),
)
ELEMENTWISE = st.one_of(
    call("{a} {op} {b}", a=any_tensor, b=operand, op=st.sampled_from(["+", "-", "*", "/", "**", "<", "==", "!="])),
    call("{b} {op} {a}", a=any_tensor, b=operand, op=st.sampled_from(["+", "-", "*", "/", "**", ">=", "=="])),
    call("{t}.{f}()", t=any_tensor, f=st.sampled_from(["exp", "log", "relu", "sigmoid", "tanh", "abs", "sqrt",
                                                       "reciprocal", "sign", "neg"])),
    call("mt.{f}({a}, {b})", f=st.sampled_from(["maximum", "minimum"]), a=any_tensor, b=operand),
    call("mt.where({a}, {b}, {c})", a=small, b=operand, c=operand),
    call("{t}.{f}({b})", t=small, f=st.sampled_from(["add_", "sub_", "mul_", "div_", "fill_", "copy_"]), b=operand),
    call("{t}.zero_()", t=any_tensor),
    call("{t}.to({d})", t=any_tensor, d=st.sampled_from(["mt.float64", "mt.float32", "'x'", "None"])),
)
REDUCTIONS = st.one_of(
    call("{t}.{f}({d}, {k})", t=small, f=st.sampled_from(["sum", "mean", "prod", "max", "min", "amax", "amin",
                                                          "argmax", "argmin", "logsumexp"]),
         d=dims, k=st.sampled_from(["False", "True", "'x'"])),
    call("{t}.{f}()", t=small, f=st.sampled_from(["sum", "max", "argmin", "mean"])),
    call("mt.{f}({t}, {d})", t=small, f=st.sampled_from(["softmax", "log_softmax"]), d=dims),
    call("{t}.sum().backward()", t=small),
    call("{t}.backward()", t=small),
)
MATMUL = st.one_of(
    call("mt.matmul({a}, {b})", a=small, b=st.one_of(small, weird)),
    call("({a}) @ {b}", a=st.sampled_from(HUGE_VIEWS[:1] + ["mt.ones(1, 1).expand(2**62 + 1, 1)"]), b=small),
    call("K.matmul({a}, {b}, {algo}, {c})", a=small, b=small,
         algo=st.sampled_from(["'default'", "'naive'", "'warptile'", "'nope'", "None", "3"]),
         c=st.sampled_from(["None", "0", "-1", "2**63", "'x'", "10**6"])),
)
INDEXING = st.one_of(
    call("{t}.gather({d}, {i})", t=small, d=dims, i=index_tensors),
    call("{t}.scatter_add({d}, {i}, {s})", t=small, d=dims, i=index_tensors, s=small),
    call("{t}.scatter_add_({d}, {i}, {s})", t=small, d=dims, i=index_tensors, s=small),
    call("mt.{f}([{a}, {b}], {d})", f=st.sampled_from(["cat", "stack"]), a=small, b=st.one_of(small, weird), d=dims),
    call("mt.{f}({w})", f=st.sampled_from(["cat", "stack"]), w=weird),
)
NN = st.one_of(
    call("F.{f}({t})", t=any_tensor, f=st.sampled_from(["relu", "tanh", "sigmoid"])),
    call("F.{f}({t}, {d})", t=small, f=st.sampled_from(["softmax", "log_softmax"]), d=dims),
    call("F.linear({a}, {b}, {c})", a=small, b=small, c=st.one_of(small, st.just("None"))),
    call("F.dropout({t}, {p})", t=small, p=scalars),
    call("F.layer_norm({t}, {s})", t=small, s=shape_tuples),
    call("F.cross_entropy({t}, {i})", t=small, i=st.one_of(index_tensors, weird, st.just("[0, 1]"))),
    call("F.mse_loss({a}, {b}, {r})", a=small, b=small, r=st.sampled_from(["'mean'", "'sum'", "'x'"])),
    call("F.embedding({i}, {w})", i=st.one_of(index_tensors, weird), w=small),
    call("mt.nn.{m}({a}, {b})", m=st.sampled_from(["Linear", "Embedding"]), a=ints, b=ints),
)
images = st.sampled_from(["mt.randn(2, 4, 5, 5)", "mt.randn(1, 1, 3, 3, dtype=mt.float64)", "mt.zeros(0, 2, 4, 4)",
                          "mt.randn(4, 5, 5)", "mt.ones(1, 2, 4, 4, dtype=mt.int64)", "mt.randn(1, 2, 1, 1)"])
kernels = st.sampled_from(["mt.randn(6, 4, 3, 3)", "mt.randn(6, 2, 3, 3)", "mt.randn(2, 1, 7, 7)",
                           "mt.randn(3, 2, 1, 1)", "mt.randn(2, 2, 3)", "mt.zeros(0, 4, 3, 3)"])
conv_args = st.sampled_from(["1", "2", "0", "-1", "(1, 2)", "(1,)", "2**63", "1.5", "None", "'same'"])
LAYERS = st.one_of(
    call("F.conv2d({x}, {w}, stride={a}, padding={b}, dilation={c}, groups={g})", x=images, w=kernels,
         a=conv_args, b=conv_args, c=conv_args, g=st.sampled_from(["1", "2", "3", "0", "-1", "2**63"])),
    call("F.conv1d(mt.randn(2, 3, 6), mt.randn(4, 3, {k}), stride={a}, padding={b})",
         k=st.sampled_from(["1", "3", "7"]), a=conv_args, b=conv_args),
    call("F.{f}({x}, {k}, stride={a}, padding={b})", f=st.sampled_from(["max_pool2d", "avg_pool2d"]), x=images,
         k=conv_args, a=conv_args, b=conv_args),
    call("F.scaled_dot_product_attention({q}, {k}, {v}, attn_mask={m}, is_causal={c})",
         q=st.sampled_from(["mt.randn(2, 3, 4)", "mt.randn(1, 2, 3, 4)", "mt.ones(2, 3, 4, dtype=mt.int64)",
                            "mt.randn(2, 0, 4)"]),
         k=st.sampled_from(["mt.randn(2, 5, 4)", "mt.randn(1, 3, 5, 4)", "mt.randn(2, 5, 6)", "mt.randn(5, 4)"]),
         v=st.sampled_from(["mt.randn(2, 5, 4)", "mt.randn(1, 3, 5, 2)", "mt.randn(2, 4, 4)"]),
         m=st.sampled_from(["None", "mt.ones(3, 5, dtype=mt.bool)", "mt.zeros(3, 5)", "mt.ones(3, 3, dtype=mt.bool)",
                            "mt.ones(3, 5, dtype=mt.int64)", "[[True]]"]),
         c=st.sampled_from(["False", "True"])),
    call("mt.nn.MultiheadAttention({e}, {h}, kdim={kd})(mt.randn(3, 2, 8), mt.randn(4, 2, {kw}), mt.randn(4, 2, 8),"
         " attn_mask={m}, is_causal={c})", e=st.sampled_from(["8", "6", "0"]), h=st.sampled_from(["2", "3", "-1"]),
         kd=st.sampled_from(["None", "5", "0"]), kw=st.sampled_from(["8", "5"]),
         m=st.sampled_from(["None", "mt.ones(3, 4, dtype=mt.bool)", "mt.zeros(4, 3, 4)", "mt.ones(3, 3)",
                            "mt.ones(3, 4, dtype=mt.int64)"]), c=st.sampled_from(["False", "True"])),
    call("F.cross_entropy({t}, {i}, ignore_index={g})", t=st.sampled_from(["mt.randn(3, 4)", "mt.randn(0, 4)",
                                                                          "mt.ones(3, 4, dtype=mt.int64)"]),
         i=st.sampled_from(["mt.tensor([0, 3, -100])", "mt.tensor([4, 0, 0])", "mt.tensor([-1, 0, 0])",
                            "mt.tensor([2**62, 0, 0])", "mt.tensor([True, False, True])", "mt.zeros(0, dtype=mt.int64)"]),
         g=st.sampled_from(["-100", "3", "0", "2**63", "1.5"])),
    call("F.embedding({i}, mt.randn(5, 3), padding_idx={p})",
         i=st.sampled_from(["mt.tensor([0, 4])", "mt.tensor([5])", "mt.tensor([[-1]])", "mt.tensor([True])",
                            "mt.zeros(0, dtype=mt.int64)", "[1, 2]"]),
         p=st.sampled_from(["None", "0", "-1", "5", "2**63"])),
)
KERNELS = st.one_of(
    call("K.reduce({t}, {op}, {d}, {algo})", t=small, op=st.sampled_from(["'sum'", "'argmax'", "'x'", "None"]),
         d=dims, algo=st.sampled_from(["'default'", "'interleaved'", "'warp_shuffle'", "'x'", "1"])),
    call("K.copy({t}, {algo})", t=small, algo=st.sampled_from(["'default'", "'tiled_padded'", "'x'", "None"])),
    call("K.softmax({t}, {d}, {log})", t=small, d=dims, log=st.sampled_from(["True", "False", "'x'"])),
    call("K.add({a}, {b})", a=small, b=st.one_of(small, weird)),
    call("K.algorithms({w})", w=st.sampled_from(["'matmul'", "'x'", "None", "3"])),
)
# Another library's arrays in (NumPy's: on CUDA they are refused), minitensor's out.
host_arrays = st.one_of(
    st.sampled_from(["np.zeros(3, np.float32)", "np.zeros((0, 3))", "np.arange(6.0)[::-1]", "np.arange(6)",
                     "np.zeros((1,) * 9)", "np.ones(3, np.float16)", "np.zeros(4, '>f8')",
                     "np.frombuffer(bytearray(20), np.float32, 4, 1)", "np.ones(3)[np.newaxis, :, None]",
                     "memoryview(b'abcd')", "bytearray(8)"]),
    call("np.lib.stride_tricks.as_strided(np.zeros(4, np.float32), ({a},), ({b},))",
         a=st.sampled_from(["0", "1", "3", "2**43", "2**62 + 1"]), b=st.sampled_from(["0", "2", "4", "-4", "5"])),
)
INTEROP = st.one_of(
    call("mt.{f}({x})", f=st.sampled_from(["asarray", "from_dlpack"]), x=st.one_of(host_arrays, any_tensor, weird)),
    call("{t}.__dlpack__({k})", t=any_tensor,
         # Only the protocol's special streams: a made-up handle is undefined behaviour on CUDA.
         k=st.sampled_from(["", "stream=None", "stream=0", "stream=1", "stream=2", "stream=-1", "stream='x'",
                            "max_version=(1, 0)", "max_version='x'",
                            "max_version=()", "dl_device=(2, 0)", "dl_device=None", "copy=True", "copy=False"])),
    call("{f}({t})", t=any_tensor, f=st.sampled_from(["np.asarray", "np.from_dlpack", "mt.from_dlpack"])),
    call("{t}.__dlpack_device__()", t=any_tensor),
    call("getattr({t}, {f}, None)", t=any_tensor, f=st.sampled_from(["'__array_interface__'",
                                                                      "'__cuda_array_interface__'"])),
)
FAMILIES = {"creation": CREATION, "views": VIEWS, "elementwise": ELEMENTWISE, "reductions": REDUCTIONS,
            "matmul": MATMUL, "indexing": INDEXING, "nn": NN, "layers": LAYERS, "kernels": KERNELS,
            "interop": INTEROP}

# The red team's findings, always run.
KNOWN = [
    "mt.zeros(2**62 + 1)", "mt.ones(1).expand(2**62 + 1) + 1", "mt.empty(2**62 + 2)", "mt.empty(2**64)",
    "mt.ones(1).expand(2**62 + 1).double() @ mt.ones(2**62 + 1, 1, dtype=mt.float64)",
    "mt.ones(1, 1).expand(2**62 + 1, 1) @ mt.ones(1, 1, dtype=mt.float64)",
    "mt.ones(4)[::2**63]", "mt.ones(3, 4)[::2**62]", "mt.empty(2**40)", "mt.ones(3).expand(2, -3)",
    "mt.nn.Embedding(-1, 0)", "mt.ones(2) != []", "mt.ones(2) + 10**400", "mt.arange(0, 1e300)",
    "mt.arange(0, 2**43)", "mt.arange(math.nan)", "mt.randn(2**43)", "F.dropout(mt.ones(2), None)",
    "F.embedding(mt.zeros(2), mt.ones(3))", "mt.ops.as_strided(mt.ones(3), (3,), (2**62,), 0)",
    "mt.ones(1).expand(2**62 + 1)[2**62:].sum()", "mt.ones(2, 3)[:, 2**63:]", "mt.ones(3).narrow(0, 2**63, 1)",
]


def test_known_crashes_raise_cleanly():
    run_batch(KNOWN)


# A child process costs about a second (Python and the library starting), so
# the calls come in few long batches: 8 of 150 here, 2 of 80 per family.
@settings(max_examples=int(os.environ.get("MINITENSOR_FUZZ_BATCHES", "8")), suppress_health_check=list(HealthCheck))
@given(batch=st.lists(st.one_of(*FAMILIES.values()), min_size=150, max_size=150))
def test_hostile_calls_never_crash(batch):
    run_batch(batch)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=2, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_each_family(family, data):
    run_batch(data.draw(st.lists(FAMILIES[family], min_size=80, max_size=80)))


def test_the_harness_catches_crashes_prints_and_bad_exceptions():
    crash = "__import__('os').kill(__import__('os').getpid(), 11)"
    with pytest.raises(pytest.fail.Exception, match=r"died with exit code -11; last call started: __import__"):
        run_batch(["mt.ones(2) + 1", crash, "mt.ones(3)"])
    with pytest.raises(AssertionError, match=r"print\('hello'\): printed 'hello\\n'"):
        run_batch(["print('hello')"])
    with pytest.raises(AssertionError, match=r"raised builtins.KeyError"):
        run_batch(["{}['k']"])
    with pytest.raises(pytest.fail.Exception, match=r"hung .* last call started: __import__\('time'\)"):
        run_batch(["mt.ones(1)", "__import__('time').sleep(60)"], timeout_s=5)
