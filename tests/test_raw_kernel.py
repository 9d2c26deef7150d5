"""Kernels compiled at run time (minitensor.cuda.compile / RawKernel), on
whichever backend runs: NVRTC and the driver API on a GPU, minitensor/cuda/_cu2emu.py
and the host compiler on the emulator. The same sources run on both.

Each kernel is checked against NumPy, on sizes that are not a multiple of
the block, on strided views through the mt_tensor descriptor, with dynamic
shared memory above 48 KB; then the errors: compile errors with the user's
line, wrong arguments, launch limits. A test at the end compiles with NVRTC
alone (no GPU needed), where libnvrtc is found.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import minitensor as mt
from minitensor.cuda import _host_build, _nvrtc, compiler
from tests.gradcheck import gradcheck
from tests.helpers import assert_close


@pytest.fixture(autouse=True)
def kernel_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One cache folder for this file's tests, never the user's."""
    path = tmp_path_factory.getbasetemp() / "kernel-cache"
    monkeypatch.setenv("MINITENSOR_KERNEL_CACHE", str(path))
    return path


ADD = r'''
extern "C" __global__ void add(float *out, const float *x, const float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)  // the last block runs past the end
        out[i] = x[i] + y[i];
}
'''

# A scaled copy of any strided view into a contiguous output, through the
# library's descriptor and indexing.h's helpers.
STRIDED = r'''
#include "indexing.h"

extern "C" __global__ void scaled_copy(mt_tensor out, const mt_tensor in, double scale, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        int64_t index[MT_MAX_DIMS];
        to_index(i, in.shape, in.ndim, index);
        const double *src = (const double *)in.data + in.offset;
        double *dst = (double *)out.data + out.offset;
        dst[index_to_position(index, out.strides, out.ndim)] =
            scale * src[index_to_position(index, in.strides, in.ndim)];
    }
}
'''

# One block sums its part of x in dynamic shared memory: a tree reduction.
BLOCK_SUM = r'''
extern "C" __global__ void block_sum(float *sums, const float *x, int n)
{
    extern __shared__ float partial[];
    const int t = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + t;
    partial[t] = i < n ? x[i] : 0.0f;  // zero-fill past the end: the tree adds it
    __syncthreads();                    // every partial is written before any is read
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride)
            partial[t] += partial[t + stride];
        __syncthreads();                // this level is done before the next reads it
    }
    if (t == 0)
        sums[blockIdx.x] = partial[0];
}
'''


def numpy_of(t: mt.Tensor) -> np.ndarray:
    return t.numpy()


@pytest.mark.parametrize("n", [1, 255, 256, 1000])
def test_a_kernel_adds_like_numpy(n: int) -> None:
    add = mt.cuda.compile(ADD, name="add")
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x, y, out = mt.tensor(a), mt.tensor(b), mt.empty(n)
    add(grid=(n + 127) // 128, block=128, args=(out, x, y, n))
    np.testing.assert_array_equal(out.numpy(), a + b)
    assert [p.kind for p in add.params] == ["pointer", "pointer", "pointer", "number"]
    assert "const float *x" in repr(add)


@pytest.mark.parametrize("make_view", [
    lambda t: t.t(),
    lambda t: t[1::2, ::3],
    lambda t: t[0:1].expand(5, t.shape[1]),
], ids=["transposed", "sliced", "broadcast"])
def test_a_kernel_reads_strided_views_through_the_descriptor(make_view: Any) -> None:
    base = mt.tensor(np.random.default_rng(1).standard_normal((7, 9)))
    view = make_view(base)
    out = mt.empty(*view.shape, dtype=mt.float64)
    kernel = mt.cuda.compile(STRIDED, name="scaled_copy")
    kernel(grid=3, block=(32, 1, 1), args=(out, view, 2.5, view.numel()))
    np.testing.assert_allclose(out.numpy(), 2.5 * view.numpy(), rtol=0, atol=0)


@pytest.mark.parametrize("block", [32, 256, 1024])
def test_dynamic_shared_memory(block: int) -> None:
    n = 5000
    a = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    kernel = mt.cuda.compile(BLOCK_SUM, name="block_sum")
    blocks = (n + block - 1) // block
    sums = mt.empty(blocks)
    kernel(blocks, block, (sums, mt.tensor(a), n), shared_mem=block * 4)
    assert_close(sums.numpy().sum(), a.astype(np.float64).sum(), mt.float32, n=n)


def test_shared_memory_above_48_kb_is_opted_in_for_the_user() -> None:
    source = r'''
    extern "C" __global__ void last_of_big(float *out, int words)
    {
        extern __shared__ float big[];
        for (int i = threadIdx.x; i < words; i += blockDim.x)
            big[i] = (float)i;
        __syncthreads();  // every word is written before thread 0 reads the last
        if (threadIdx.x == 0)
            out[0] = big[words - 1];
    }'''
    kernel = mt.cuda.compile(source, name="last_of_big")
    words = 64 * 1024 // 4  # 64 KB
    out = mt.zeros(1)
    kernel(1, 128, (out, words), shared_mem=words * 4)
    assert out.item() == words - 1


def test_a_missing_barrier_is_caught_on_the_emulator() -> None:
    if mt.backend() != "emulator":
        pytest.skip("on a GPU a race may or may not show; the emulator's order makes it show")
    racy = BLOCK_SUM.replace("__syncthreads();  ", "/* barrier removed */").replace(
        "__syncthreads();                // this", "/* barrier removed */ // this")
    assert "__syncthreads" not in racy
    kernel = mt.cuda.compile(racy, name="block_sum")
    a = np.ones(256, dtype=np.float32)
    sums = mt.empty(1)
    try:
        kernel(1, 256, (sums, mt.tensor(a), 256), shared_mem=256 * 4)
    except mt.CudaError as e:  # MINITENSOR_EMU_CHECK=full names the race
        assert "race" in str(e) or "partial" in str(e)
    else:
        assert sums.item() != 256.0  # thread 0 read partials no thread had written yet


def test_a_template_kernel_takes_numpy_scalars_for_its_type_parameter() -> None:
    source = r'''
    template <typename T>
    __global__ void axpy(T *y, const T *x, T alpha, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
            y[i] += alpha * x[i];
    }'''
    kernel = mt.cuda.compile(source, name="axpy<double>")
    x, y = mt.arange(10, dtype=mt.float64), mt.ones(10, dtype=mt.float64)
    kernel(1, 32, (y, x, np.float64(0.5), 10))
    np.testing.assert_array_equal(y.numpy(), 1 + 0.5 * np.arange(10))
    with pytest.raises(TypeError, match="NumPy scalar"):
        kernel(1, 32, (y, x, 0.5, 10))  # T is unknown to the parser: its type must be given


def test_the_disk_cache_is_used_and_keyed_by_options(kernel_cache: Path) -> None:
    source = ADD.replace("out[i] = x[i] + y[i];", "out[i] = x[i] + y[i] + OFFSET;")
    first = mt.cuda.compile(source, name="add", options=("-DOFFSET=1.0f",))
    _host_build._memo.clear()
    _nvrtc._memo.clear()
    again = mt.cuda.compile(source, name="add", options=("-DOFFSET=1.0f",))
    assert not first.cached and again.cached
    assert any(kernel_cache.iterdir())
    other = mt.cuda.compile(source, name="add", options=("-DOFFSET=2.0f",))
    assert not other.cached
    out = mt.empty(3)
    other(1, 32, (out, mt.zeros(3), mt.zeros(3), 3))
    assert out.numpy().tolist() == [2.0, 2.0, 2.0]


def test_a_syntax_error_names_the_users_line() -> None:
    source = "extern \"C\" __global__ void broken(float *out)\n{\n    out[0] = 1.0f\n}\n"
    with pytest.raises(mt.CompileError) as info:
        mt.cuda.compile(source, name="broken")
    message = str(info.value)
    # NVRTC writes broken.cu(3) or (4), g++ broken.cu:3 or :4: the statement's line or the next.
    assert re.search(r"broken\.cu(\(|:)[34]", message), message
    assert info.value.log and info.value.log in message


def test_a_missing_kernel_name_is_a_compile_error() -> None:
    with pytest.raises(mt.CompileError, match="nothere|not declared|no __global__"):
        mt.cuda.compile(ADD, name="nothere")


def test_shared_memory_cu2emu_cannot_translate_is_an_error_on_the_emulator() -> None:
    if mt.backend() != "emulator":
        pytest.skip("NVRTC takes any declaration")
    source = "extern \"C\" __global__ void k(float *o)\n{\n    __shared__ float a[4], b[4];\n    o[0] = 0;\n}\n"
    with pytest.raises(mt.CompileError, match="k.cu:3"):
        mt.cuda.compile(source, name="k")


def test_arguments_are_checked_against_the_kernels_parameters() -> None:
    add = mt.cuda.compile(ADD, name="add")
    x = mt.ones(8)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        add(1, 32, (x, x, x))
    with pytest.raises(TypeError, match="int"):
        add(1, 32, (x, x, x, 8.0))
    with pytest.raises(OverflowError, match="does not fit"):
        add(1, 32, (x, x, x, 2**31))
    with pytest.raises(mt.DTypeError, match="float64"):
        add(1, 32, (x, x, mt.ones(8, dtype=mt.float64), 8))
    with pytest.raises(ValueError, match="non-contiguous"):
        add(1, 32, (x, mt.ones(8, 2)[:, 0], x, 8))
    with pytest.raises(TypeError, match="Tensor, an address or None"):
        add(1, 32, (x, np.ones(8, np.float32), x, 8))
    with pytest.raises(TypeError, match="tuple or list"):
        add(1, 32, x)


def test_launch_limits_are_checked() -> None:
    add = mt.cuda.compile(ADD, name="add")
    x = mt.ones(8)
    args = (x, x, x, 8)
    with pytest.raises(ValueError, match="at least 1"):
        add(0, 32, args)
    with pytest.raises(ValueError, match="threads"):
        add(1, 2048, args)
    with pytest.raises(ValueError, match="threads"):
        add(1, (32, 32, 2), args)
    with pytest.raises(ValueError, match="limits"):
        add((1, 70000), 32, args)
    with pytest.raises(TypeError, match="tuple of 1 to 3"):
        add((1, 1, 1, 1), 32, args)
    with pytest.raises(ValueError, match="shared_mem"):
        add(1, 32, args, shared_mem=-1)
    with pytest.raises(ValueError, match="more than a block"):
        add(1, 32, args, shared_mem=1 << 30)


@pytest.mark.parametrize("source,name,options", [
    ("", "k", ()), (ADD, "1bad", ()), (ADD, "add", "-O3"), (ADD, "add", (3,)),
])
def test_bad_compile_arguments(source: str, name: str, options: Any) -> None:
    with pytest.raises(TypeError):
        mt.cuda.compile(source, name=name, options=options)


def test_a_kernel_runs_on_a_stream() -> None:
    add = mt.cuda.compile(ADD, name="add")
    s = mt.cuda.Stream()
    x = mt.ones(100)
    out = mt.empty(100)
    add(1, 128, (out, x, x, 100), stream=s)
    s.synchronize()
    assert out.sum().item() == 200.0


def test_a_kernel_write_is_seen_by_autograd_as_in_place() -> None:
    add = mt.cuda.compile(ADD, name="add")
    x = mt.ones(4, requires_grad=True)
    y = x.exp()  # saves its result for backward
    add(1, 32, (y.detach(), y.detach(), y.detach(), 4))
    with pytest.raises(RuntimeError, match="modified|changed|version"):
        y.sum().backward()


# The recipe of docs/kernels.md: a pair of user kernels as one differentiable op.
SCALED_SQUARE = r'''
extern "C" __global__ void scaled_square(double *y, const double *x, double scale, long long n)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = scale * x[i] * x[i];
}

extern "C" __global__ void scaled_square_backward(double *dx, const double *dy, const double *x,
                                                  double scale, long long n)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n)
        dx[i] = 2.0 * scale * x[i] * dy[i];  // d(scale x^2)/dx = 2 scale x
}
'''


class ScaledSquare(mt.autograd.Function):
    """y = scale * x**2 by a user kernel, its gradient by another."""

    @staticmethod
    def forward(ctx: Any, x: mt.Tensor, scale: float) -> mt.Tensor:
        x = x.contiguous()
        y = mt.empty(*x.shape, dtype=x.dtype)
        n = x.numel()
        if n:
            forward = mt.cuda.compile(SCALED_SQUARE, name="scaled_square")
            forward((n + 255) // 256, 256, (y, x, scale, n))
        ctx.save_for_backward(x)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx: Any, grad: mt.Tensor) -> tuple[mt.Tensor, None]:
        (x,) = ctx.saved_tensors
        grad = grad.contiguous()
        dx = mt.empty(*x.shape, dtype=x.dtype)
        n = x.numel()
        if n:
            backward = mt.cuda.compile(SCALED_SQUARE, name="scaled_square_backward")
            backward((n + 255) // 256, 256, (dx, grad, x, ctx.scale, n))
        return dx, None


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 0)])
def test_user_kernels_as_a_differentiable_op(shape: tuple[int, ...]) -> None:
    a = np.random.default_rng(3).standard_normal(shape)
    y = ScaledSquare.apply(mt.tensor(a), 1.5)
    np.testing.assert_allclose(y.numpy(), 1.5 * a * a)
    gradcheck(lambda m, x: ScaledSquare.apply(x, 1.5), [a])


def test_nvrtc_compiles_the_same_sources_without_a_gpu() -> None:
    try:
        _nvrtc.nvrtc()
    except mt.CompileError as e:
        pytest.skip(str(e))
    include = [*_nvrtc.BASE_OPTIONS, f"-I{Path(compiler._lib.REPO_ROOT) / 'src'}", f"-I{_nvrtc.rtc_include_dir()}"]
    for source, name in [(ADD, "add"), (STRIDED, "scaled_copy"), (BLOCK_SUM, "block_sum")]:
        image, mangled, _ = _nvrtc.compile_source(source, f"{name}.cu", name,
                                                  ["--gpu-architecture=sm_90", *include], "cubin")
        assert image[:4] == b"\x7fELF" and mangled == name
    template = "template <typename T> __global__ void k(T *y) { y[0] = T(1); }"
    _, mangled, _ = _nvrtc.compile_source(template, "k.cu", "k<float>", ["--gpu-architecture=compute_90"], "ptx")
    assert mangled.startswith("_Z") and "k" in mangled
    with pytest.raises(mt.CompileError, match=r"broken\.cu\(3\)"):
        _nvrtc.compile_source("__global__ void broken(float *o)\n{\n    o[0] = ;\n}\n", "broken.cu", "broken",
                              ["--gpu-architecture=sm_90"], "cubin")
