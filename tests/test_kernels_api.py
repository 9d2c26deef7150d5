"""minitensor.kernels, the public way to run one rung of a kernel ladder.

Every algorithm of every ladder runs through ``mt.kernels`` against NumPy, on
random inputs of sizes that are no multiple of any tile size and on
non-contiguous views (transposed, sliced with a step, with an offset,
expanded), with and without ``out=``; bad arguments raise errors that name
the algorithm list, the shapes or the dim. Last, the notebooks, benchmarks
and examples must reach the kernels through this public API only: a scan of
their imports fails on any private minitensor module.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import minitensor as mt
from helpers import assert_close, pair, random_array

K = mt.kernels
DTYPES = [mt.float32, mt.float64]
ROOT = Path(__file__).resolve().parent.parent


def views(seed: int, shape: tuple[int, int], dtype: mt.DType) -> list[tuple[str, Any, np.ndarray]]:
    """The same kind of (rows, cols) matrix as several layouts: contiguous, a
    transposed view, a view sliced with a step and an offset."""
    rows, cols = shape
    t, a = pair(random_array(seed, shape, dtype), dtype)
    tt, at = pair(random_array(seed + 1, (cols, rows), dtype), dtype)
    ts, as_ = pair(random_array(seed + 2, (rows + 1, 2 * cols + 1), dtype), dtype)
    return [
        ("contiguous", t, a),
        ("transposed", tt.T, at.T),
        ("sliced", ts[1:, 1::2], as_[1:, 1::2]),
    ]


# ---- what there is ---------------------------------------------------------------------------


def test_listings() -> None:
    assert K.LADDERS == ("matmul", "reduce", "copy", "conv2d")
    for ladder in K.LADDERS:
        names = K.algorithms(ladder)
        assert names[0] == "default" and len(names) > 2 and len(set(names)) == len(names)
        assert all(isinstance(n, str) for n in names)
    assert {"naive", "tiled", "warptile"} <= set(K.algorithms("matmul"))
    assert set(K.reduce_ops()) == {"sum", "prod", "max", "min", "argmax", "argmin"}
    configs = K.matmul_configs()
    assert len(configs) >= 1 and all("x" in c for c in configs)
    stats = K.autotune_stats()
    assert set(stats) >= {"sweeps", "cache_file"}
    K.autotune_reset()
    assert K.autotune_stats()["sweeps"] == 0


def test_kernels_is_public() -> None:
    import minitensor.kernels as kernels

    assert kernels is mt.kernels
    for name in kernels.__all__:
        assert getattr(kernels, name).__doc__ or name == "LADDERS", f"{name} has no docstring"


# ---- matmul ------------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", K.algorithms("matmul"))
def test_matmul_every_rung(algo: str) -> None:
    m, k, n = 37, 19, 45  # no multiple of any tile
    for dtype in DTYPES:
        for (na, ta, a), (nb, tb, b) in zip(views(m + k, (m, k), dtype), views(k + n, (k, n), dtype)):
            assert_close(K.matmul(ta, tb, algo), a @ b, dtype, n=k)
            out = mt.empty(m, n, dtype=dtype)
            assert K.matmul(ta, tb, algo=algo, out=out) is out, (na, nb)
            assert_close(out, a @ b, dtype, n=k)


@pytest.mark.parametrize("algo", K.algorithms("matmul"))
def test_matmul_batch_vectors_and_promotion(algo: str) -> None:
    ta, a = pair(random_array(1, (3, 1, 9, 7), mt.float32), mt.float32)
    tb, b = pair(random_array(2, (4, 7, 5), mt.float64), mt.float64)
    assert_close(K.matmul(ta, tb, algo), np.matmul(a, b), mt.float64, n=7)
    out = mt.empty(3, 4, 9, 5, dtype=mt.float64)
    assert_close(K.matmul(ta, tb, algo, out=out), np.matmul(a, b), mt.float64, n=7)
    tv, v = pair(random_array(3, (7,), mt.float32), mt.float32)
    tw, w = pair(random_array(4, (9,), mt.float32), mt.float32)
    assert_close(K.matmul(tv, tv, algo, out=mt.empty()), v @ v, mt.float32, n=7)
    assert_close(K.matmul(tw, ta, algo, out=mt.empty(3, 1, 7)), np.matmul(w, a), mt.float32, n=9)
    assert_close(K.matmul(ta, tv, algo, out=mt.empty(3, 1, 9)), np.matmul(a, v), mt.float32, n=7)
    # expanded (stride-0) batch operand, and an inner dim of 0
    te = tb[:1].expand(4, 7, 5)
    assert_close(K.matmul(ta[0, 0], te, algo), np.matmul(a[0, 0], np.broadcast_to(b[:1], (4, 7, 5))),
                 mt.float64, n=7)
    assert K.matmul(mt.ones(2, 0), mt.ones(0, 3), algo, out=mt.full((2, 3), 5.0)).tolist() == [[0.0] * 3] * 2


@pytest.mark.parametrize("config", range(len(K.matmul_configs())))
def test_matmul_every_config(config: int) -> None:
    name = K.matmul_configs()[config]
    # Under the teaching kernel policy the default product is tiled, which
    # has no configurations (tests/test_kernel_policy.py checks the refusal).
    rung = K.matmul_config_rung(config)
    algos = (rung, "default") if K.get_policy() == "fast" else (rung,)
    for dtype in DTYPES:
        for (_, ta, a), (_, tb, b) in zip(views(5, (33, 70), dtype), views(6, (70, 129), dtype)):
            for algo in algos:
                assert_close(K.matmul(ta, tb, algo, config=config), a @ b, dtype, n=70)
            out = mt.empty(33, 129, dtype=dtype)
            assert_close(K.matmul(ta, tb, rung, config=name, out=out), a @ b, dtype, n=70)


def test_matmul_bad_arguments() -> None:
    a, b = mt.ones(3, 4), mt.ones(4, 5)
    with pytest.raises(ValueError, match=r"unknown algo 'quantum'.*'naive'.*'warptile'"):
        K.matmul(a, b, "quantum")
    with pytest.raises(ValueError, match=r"\(3, 4\) and \(3, 4\)"):
        K.matmul(a, a)
    with pytest.raises(ValueError, match=r"\(3, 4\) and \(3, 4\)"):
        K.matmul(a, a, "warptile", config=0)
    with pytest.raises(ValueError, match="batch dims"):
        K.matmul(mt.ones(2, 3, 4), mt.ones(3, 4, 5), out=mt.empty(2, 3, 5))
    with pytest.raises(ValueError, match="at least 1 dim"):
        K.matmul(mt.tensor(1.0), b, config=0)
    with pytest.raises(ValueError, match="tunable rungs only"):
        K.matmul(a, b, "tiled", config=0)
    n = len(K.matmul_configs())
    with pytest.raises(ValueError, match=f"0..{n - 1}"):
        K.matmul(a, b, "warptile", config=n)
    with pytest.raises(ValueError, match="unknown config 'huge'"):
        K.matmul(a, b, "warptile", config="huge")
    with pytest.raises(ValueError, match=r"out has shape \(3, 4\), but the result has shape \(3, 5\)"):
        K.matmul(a, b, out=mt.empty(3, 4))
    with pytest.raises(TypeError, match="dtype float32, but the result has dtype float64"):
        K.matmul(a, b.double(), out=mt.empty(3, 5))
    with pytest.raises(mt.MinitensorError, match="expanded view"):
        K.matmul(a, b, out=mt.empty(1, 5).expand(3, 5))
    with pytest.raises(TypeError, match="must be a minitensor Tensor"):
        K.matmul(np.ones((3, 4)), b)


def test_matmul_out_must_not_overlap_an_input() -> None:
    a = mt.ones(4, 4)
    with pytest.raises(mt.MinitensorError):
        K.matmul(a, a, "tiled", out=a)


# ---- reduce ------------------------------------------------------------------------------------

REFERENCES = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min,
              "argmax": np.argmax, "argmin": np.argmin}


@pytest.mark.parametrize("algo", K.algorithms("reduce"))
@pytest.mark.parametrize("op", K.reduce_ops())
def test_reduce_every_rung(algo: str, op: str) -> None:
    rows, cols = 13, 1031  # rows longer than a block and no multiple of 32 or of a Pack
    for dtype in DTYPES:
        for layout, t, a in views(hash(op) % 97, (rows, cols), dtype):
            if op == "prod":
                t, a = t * 0.0 + 1.0 + t * 0.01, 1.0 + a * 0.01  # a product that stays finite
            out_dtype = mt.int64 if op in ("argmax", "argmin") else dtype  # indices are int64
            for dim in (0, 1, -1):
                ref = REFERENCES[op](a.astype(np.float64), axis=dim)
                assert_close(K.reduce(t, op, dim, algo), ref, out_dtype, n=a.shape[dim])
                kept = np.expand_dims(ref, dim)
                out = mt.empty(*kept.shape, dtype=out_dtype)
                assert K.reduce(t, op, dim=dim, algo=algo, keepdim=True, out=out) is out
                assert_close(out, kept, out_dtype, n=a.shape[dim])


@pytest.mark.parametrize("algo", K.algorithms("reduce"))
def test_reduce_3d_views_and_edges(algo: str) -> None:
    t, a = pair(random_array(9, (5, 6, 35), mt.float32), mt.float32)
    tp, ap = t.permute(2, 0, 1), a.transpose(2, 0, 1)  # (35, 5, 6), no dim contiguous at the end
    for dim in range(3):
        assert_close(K.reduce(tp, "sum", dim, algo), ap.sum(axis=dim), mt.float32, n=ap.shape[dim])
        assert_close(K.reduce(tp, "max", dim, algo, keepdim=True), ap.max(axis=dim, keepdims=True), mt.float32)
    assert_close(K.reduce(mt.tensor(2.5), "sum", 0, algo), 2.5, mt.float32)
    assert K.reduce(mt.ones(3, 0), "sum", 1, algo).tolist() == [0.0, 0.0, 0.0]
    assert K.reduce(mt.ones(3, 0), "prod", 1, algo).tolist() == [1.0, 1.0, 1.0]
    assert K.reduce(mt.ones(0, 4), "max", 1, algo).shape == (0,)


def test_reduce_bad_arguments() -> None:
    x = mt.ones(3, 4)
    with pytest.raises(ValueError, match=r"unknown algo 'quantum'.*'warp_shuffle'"):
        K.reduce(x, "sum", 1, "quantum")
    with pytest.raises(ValueError, match=r"unknown op 'mean'.*'argmax'"):
        K.reduce(x, "mean", 1)
    with pytest.raises(IndexError, match=r"dim 2 is out of range for a tensor of rank 2"):
        K.reduce(x, "sum", 2)
    with pytest.raises(IndexError, match="no identity"):
        K.reduce(mt.ones(3, 0), "max", 1)
    with pytest.raises(ValueError, match=r"out has shape \(3, 1\), but the result has shape \(3,\)"):
        K.reduce(x, "sum", 1, out=mt.empty(3, 1))
    with pytest.raises(TypeError, match="dtype float32, but the result has dtype float64"):
        K.reduce(x.double(), "sum", 1, out=mt.empty(3))
    with pytest.raises(TypeError, match="must be a minitensor Tensor"):
        K.reduce([1.0, 2.0], "sum", 0)


# ---- copy, softmax, add ------------------------------------------------------------------------


@pytest.mark.parametrize("algo", K.algorithms("copy"))
def test_copy_every_rung(algo: str) -> None:
    for dtype in DTYPES:
        for layout, t, a in views(11, (33, 65), dtype):
            got = K.copy(t, algo)
            assert got.is_contiguous() and got.dtype is dtype
            assert_close(got, a, dtype)
        t3, a3 = pair(random_array(12, (2, 40, 37), dtype), dtype)
        view = t3.transpose(-2, -1)[:, 3:, ::2]  # offset, step, transposed
        out = mt.empty(*view.shape, dtype=dtype)
        assert K.copy(view, algo=algo, out=out) is out
        assert_close(out, np.swapaxes(a3, -2, -1)[:, 3:, ::2], dtype)
        other = mt.float64 if dtype is mt.float32 else mt.float32  # the copy converts
        converted = K.copy(view, algo, out=mt.empty(*view.shape, dtype=other))
        assert_close(converted.numpy(), np.swapaxes(a3, -2, -1)[:, 3:, ::2], mt.float32)
        assert_close(K.copy(t3[0, 0, 0], algo), a3[0, 0, 0], dtype)
    assert K.copy(mt.ones(0, 3), algo).shape == (0, 3)


def test_copy_bad_arguments() -> None:
    x = mt.ones(3, 4)
    with pytest.raises(ValueError, match=r"unknown algo 'fast'.*'tiled_padded'"):
        K.copy(x, "fast")
    with pytest.raises(ValueError, match=r"out has shape \(3, 4\), but the result has shape \(4, 3\)"):
        K.copy(x.T, out=mt.empty(3, 4))
    with pytest.raises(ValueError, match="shares memory"):
        K.copy(x.T[:3, :3], out=x[:, :3])


def test_softmax() -> None:
    for dtype in DTYPES:
        for layout, t, a in views(13, (7, 300), dtype):
            for dim in (0, 1, -1):
                e = np.exp(a - a.max(axis=dim, keepdims=True))
                ref = e / e.sum(axis=dim, keepdims=True)
                assert_close(K.softmax(t, dim), ref, dtype, n=a.shape[dim])
                out = mt.empty(*a.shape, dtype=dtype)
                assert K.softmax(t, dim, log=True, out=out) is out
                assert_close(out, np.log(ref), dtype, n=a.shape[dim])
    t = mt.randn(4, 5)
    expected = mt.softmax(t, 1).numpy()
    assert K.softmax(t, 1, out=t) is t  # in place
    assert_close(t, expected, mt.float32, n=5)
    assert K.softmax(mt.tensor(3.0), 0, out=mt.empty()).item() == 1.0
    with pytest.raises(IndexError, match="rank 2"):
        K.softmax(mt.ones(2, 2), 2)
    with pytest.raises(ValueError, match=r"out has shape \(2,\)"):
        K.softmax(mt.ones(2, 2), 1, out=mt.empty(2))


def test_add() -> None:
    for dtype in DTYPES:
        (_, ta, a), (_, tb, b), (_, tc, c) = views(14, (9, 33), dtype)
        assert_close(K.add(ta, tb), a + b, dtype)
        out = mt.empty(9, 33, dtype=dtype)
        assert K.add(tb, tc, out=out) is out
        assert_close(out, b + c, dtype)
        tr, r = pair(random_array(15, (33,), mt.float64), mt.float64)
        assert_close(K.add(ta, tr, out=mt.empty(9, 33, dtype=mt.float64)), a + r, mt.float64)
    with pytest.raises(ValueError, match=r"out has shape \(3,\), but the result has shape \(2, 3\)"):
        K.add(mt.ones(2, 3), mt.ones(3), out=mt.empty(3))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        K.add(mt.ones(2, 3), mt.ones(2), out=mt.empty(2, 3))


# ---- data exchange through device addresses -------------------------------------------------------


def test_device_pointers_round_trip() -> None:
    # Copy device memory to device memory: minitensor tensors stand in for the
    # other library's (a torch tensor's data_ptr() on the GPU).
    for dtype in DTYPES:
        t, a = pair(random_array(16, (5, 7), dtype), dtype)
        x = K.from_device_pointer(t.data_ptr(), (5, 7), dtype)
        assert x.shape == (5, 7) and x.dtype is dtype and x.data_ptr() != t.data_ptr()
        assert_close(x, a, dtype)
        dst = mt.zeros(7, 5, dtype=dtype)
        K.to_device_pointer(t.T, dst.data_ptr())  # a view is made contiguous first
        assert_close(dst, a.T, dtype)
    assert K.from_device_pointer(0, (0, 3)).shape == (0, 3)
    K.to_device_pointer(mt.ones(0), 0)
    with pytest.raises(ValueError, match="non-null device address"):
        K.from_device_pointer(0, (2,))
    with pytest.raises(ValueError, match="non-null device address"):
        K.to_device_pointer(mt.ones(2), -8)


@pytest.mark.skipif(mt.backend() != "emulator", reason="host memory is device memory only on the emulator")
def test_device_pointers_to_host_memory_on_the_emulator() -> None:
    src = np.arange(12, dtype=np.float64)
    x = K.from_device_pointer(src.ctypes.data, (3, 4), mt.float64)
    assert x.tolist() == src.reshape(3, 4).tolist()
    dst = np.zeros(12, dtype=np.float32)
    K.to_device_pointer(mt.arange(12, dtype=mt.float32).reshape(3, 4).T, dst.ctypes.data)
    assert dst.tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).T.ravel().tolist()


# ---- nothing outside the package imports a private module --------------------------------------------

PUBLIC_SCANNED = [ROOT / "notebooks" / "src", ROOT / "bench", ROOT / "examples"]
PRIVATE_MODULES = {"ops", "autotune"}  # besides every name that starts with "_"


def _private(name: str) -> bool:
    return name.startswith("_") or name in PRIVATE_MODULES


def private_uses(path: Path) -> list[str]:
    """'line: what' for every import or attribute use of a private minitensor module in a file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    aliases = {"minitensor"}  # names bound to the package in this file
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "minitensor":
                    aliases.add(alias.asname or alias.name)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "minitensor" and any(_private(p) for p in parts[1:]):
                    found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "minitensor":
            parts = node.module.split(".")[1:]
            if any(_private(p) for p in parts) or (not parts and any(_private(a.name) for a in node.names)):
                names = ", ".join(a.name for a in node.names)
                found.append(f"{node.lineno}: from {node.module} import {names}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in aliases and _private(node.attr):
                found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


# Files that reach below the public API on purpose, each with its reason
# (bench/host_path.py times the layers through mt.kernels.add).
INTERNALS_ON_PURPOSE: dict[str, str] = {
    "bench/pool_host.py": "times the pooling forward's host road one layer at a time (ops, _lib, the allocation)",
    "bench/reduce_indices.py": "sweeps the warps a row of ops.reduce_index_rows, a tuning knob with no public API",
    "bench/conv_tf32.py": "sweeps the TF32 convolution rung's tile configurations (_lib.conv2d_tf32*), which have no public API",
    "bench/conv_winograd.py": "times each product of the Winograd rung and of the implicit GEMM alone (ops.conv2d_winograd*, "
                              "_lib.conv2d_igemm*) and reads the autotuner's choice, which have no public API",
    "bench/gpt_step.py": "counts a step's launches on the emulator (_lib.launch_count), which has no public API",
    "bench/tf32_gpt_shapes.py": "sweeps the TF32 matmul rung's tiles (_lib.matmul_tf32_tile), which have no public API",
}


def scanned_files() -> list[Path]:
    return sorted(p for d in PUBLIC_SCANNED for p in d.rglob("*.py")
                  if str(p.relative_to(ROOT)) not in INTERNALS_ON_PURPOSE)


def test_the_scan_finds_private_imports(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import minitensor as mt\nfrom minitensor import _lib, nn\nfrom minitensor.ops import matmul\n"
        "import minitensor.autotune\nx = mt._lib.lib()\nfrom minitensor import kernels\n"
    )
    assert [line.split(":")[0] for line in private_uses(bad)] == ["2", "3", "4", "5"]


def test_notebooks_bench_and_examples_use_the_public_api_only() -> None:
    files = scanned_files()
    assert any(p.parent.name == "src" for p in files) and any(p.parent.name == "bench" for p in files)
    offences = [f"{p.relative_to(ROOT)}:{use}" for p in files for use in private_uses(p)]
    assert not offences, "private minitensor modules used (use minitensor.kernels):\n" + "\n".join(offences)
