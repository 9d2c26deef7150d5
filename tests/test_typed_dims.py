"""Typed dimensions (src/typed_dims.h) and the matmul rung written with them
(blocktile_2d_typed, src/matmul_blocktile_2d_typed.cu).

- the compilers REFUSE the index mistakes of tests/typed_dims/mistakes.cu
  (the host C++ compiler always, nvcc where there is one), each with the
  diagnostic that names it, and accept the same file without them;
- the header computes what it says (tests/typed_dims/check.cu, run on the host);
- a kernel compiled at run time includes it (NVRTC on a GPU, the host
  compiler on the emulator) and writes a folded "K8 x K" layout;
- the typed rung gives the original rung's products bit for bit.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import minitensor as mt
from minitensor.cuda import _nvrtc, compiler
from tests.helpers import assert_close

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "typed_dims"
CXX = os.environ.get("CXX", "g++")
NVCC = shutil.which("nvcc") or next((p for p in ["/usr/local/cuda/bin/nvcc"] if Path(p).exists()), None)

# Each mistake of mistakes.cu, and what each compiler says about it.
MISTAKES = {
    1: ("a row compared with the column count",
        r"no match for .operator<. \(operand types are .I. and .J.\)",
        r'no operator "<" matches these operands\s+operand types are: I < J'),
    2: ("a row used as a position along K",
        r"no match for .operator\+. \(operand types are .K. and .I.\)",
        r'no operator "\+" matches these operands\s+operand types are: K \+ I'),
    3: ("A subscripted by a dimension it does not have",
        r"the subscript has no coordinate of one of the view's dimensions",
        r"the subscript has no coordinate of one of the view's dimensions"),
    4: ("a plain int as a subscript",
        r"subscripted by typed coordinates \(I\{3\}\), not by plain integers",
        r"subscripted by typed coordinates \(I\{3\}\), not by plain integers"),
    5: ("an index made silently from an int",
        r"conversion from .int. to non-scalar type .const I. requested",
        r'no suitable constructor exists to convert from "int" to "I"'),
}


def compile_cases(compiler_name: str, mistake: int) -> subprocess.CompletedProcess:
    """Compiles mistakes.cu with -DMISTAKE=mistake (0: none) by the host compiler or nvcc."""
    source = str(CASES / "mistakes.cu")
    if compiler_name == "host":
        cmd = [CXX, "-std=c++17", "-fsyntax-only", f"-I{ROOT / 'src'}", "-x", "c++", f"-DMISTAKE={mistake}", source]
    else:
        cmd = [NVCC, "-std=c++17", f"-I{ROOT / 'src'}", "-arch=sm_90", "-c", "-o", os.devnull,
               f"-DMISTAKE={mistake}", source]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


COMPILERS = ["host", pytest.param("nvcc", marks=pytest.mark.skipif(NVCC is None, reason="no nvcc here"))]


@pytest.mark.parametrize("compiler_name", COMPILERS)
def test_the_correct_indices_compile(compiler_name: str) -> None:
    result = compile_cases(compiler_name, 0)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("compiler_name", COMPILERS)
@pytest.mark.parametrize("mistake", sorted(MISTAKES), ids=[MISTAKES[m][0].replace(" ", "_") for m in sorted(MISTAKES)])
def test_the_compiler_refuses_an_index_mistake(compiler_name: str, mistake: int) -> None:
    what, host_says, nvcc_says = MISTAKES[mistake]
    result = compile_cases(compiler_name, mistake)
    assert result.returncode != 0, f"{what}: compiled, but the types should refuse it"
    expected = host_says if compiler_name == "host" else nvcc_says
    assert re.search(expected, result.stderr), \
        f"{what}: expected /{expected}/ in the compiler's errors:\n{result.stderr[-3000:]}"


def test_the_header_computes_what_it_says(tmp_path: Path) -> None:
    exe = tmp_path / "check"
    subprocess.run([CXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'src'}", "-x", "c++",
                    str(CASES / "check.cu"), "-o", str(exe)], check=True, capture_output=True, text=True, timeout=120)
    result = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout.startswith("ok"), result.stdout


# x (M, K) written into the interleaved layout (K/8, M, 8) of a vectorised
# kernel: out's view folds K, and a plain K coordinate is folded for it.
INTERLEAVE = r'''
#include "typed_dims.h"

TD_DIMENSION(I);
TD_DIMENSION(K);

extern "C" __global__ void interleave(float *out, const float *x, long long rows, long long cols)
{
    const I end_i(rows);
    const K end_k(cols);
    const auto X = td::view(x, td::Stride<I>{cols}, td::Stride<K>{1});
    const auto Out = td::view(out, td::Stride<td::Fold<K, 8>>{8 * rows, 1}, td::Stride<I>{8});
    const I i(blockIdx.y);
    for (K k((long long)blockIdx.x * blockDim.x + threadIdx.x); k < end_k; k += (long long)gridDim.x * blockDim.x)
        Out(i, k) = X(k, i);  // any order: subscripts are by dimension
}
'''


@pytest.fixture()
def kernel_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of this test's own, never the user's."""
    monkeypatch.setenv("MINITENSOR_KERNEL_CACHE", str(tmp_path / "kernels"))
    return tmp_path / "kernels"


@pytest.mark.parametrize("rows,cols", [(3, 16), (5, 40)])
def test_a_run_time_compiled_kernel_writes_a_folded_layout(kernel_cache: Path, rows: int, cols: int) -> None:
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    out = mt.zeros(cols // 8, rows, 8)
    kernel = mt.cuda.compile(INTERLEAVE, name="interleave")
    kernel(grid=(1, rows), block=32, args=(out, mt.tensor(x), rows, cols))
    want = x.reshape(rows, cols // 8, 8).transpose(1, 0, 2)
    np.testing.assert_array_equal(out.numpy(), want)


def test_nvrtc_compiles_the_header_without_a_gpu() -> None:
    try:
        _nvrtc.nvrtc()
    except mt.CompileError as e:
        pytest.skip(str(e))
    options = [*_nvrtc.BASE_OPTIONS, f"-I{Path(compiler._lib.REPO_ROOT) / 'src'}", f"-I{_nvrtc.rtc_include_dir()}",
               "--gpu-architecture=compute_90"]
    _, mangled, _ = _nvrtc.compile_source(INTERLEAVE, "interleave.cu", "interleave", options, "ptx")
    assert mangled == "interleave"


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
@pytest.mark.parametrize("m,n,k,transposed", [(1, 1, 1, False), (130, 7, 9, True), (33, 129, 20, False)])
def test_the_typed_rung_gives_the_original_rungs_products(dtype: mt.DType, m: int, n: int, k: int,
                                                          transposed: bool) -> None:
    rng = np.random.default_rng(m * n + k)
    np_dtype = np.float32 if dtype is mt.float32 else np.float64
    a = mt.tensor(rng.standard_normal((m, k)).astype(np_dtype))
    b_data = rng.standard_normal((n, k) if transposed else (k, n)).astype(np_dtype)
    b = mt.tensor(b_data).t() if transposed else mt.tensor(b_data)
    typed = mt.kernels.matmul(a, b, "blocktile_2d_typed")
    original = mt.kernels.matmul(a, b, "blocktile_2d")
    np.testing.assert_array_equal(typed.numpy(), original.numpy())
    assert_close(typed, a.numpy().astype(np.float64) @ b.numpy().astype(np.float64), dtype, n=k)
