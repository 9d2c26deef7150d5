"""Streams on the GPU: the ordering that tests/test_streams.py cannot see on
the emulator, with torch's and CuPy's streams, and a run-time compiled
kernel beside CuPy's RawKernel.

Marked ``gpu``. A slow kernel (each thread spins for a few milliseconds of
clock64 before it writes) makes a missing wait visible: work that does not
wait for it reads the old values.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import minitensor as mt

pytestmark = pytest.mark.gpu

SLOW = r'''
extern "C" __global__ void slow_fill(float *y, const float *x, float add, long long n, long long cycles)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    if (i < n)
        y[i] = (x ? x[i] : 0.0f) + add;
}
'''
N = 1 << 20
CYCLES = 20_000_000  # about 10 ms at 2 GHz per wave of blocks


@pytest.fixture(autouse=True)
def needs_cuda(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if mt.backend() != "cuda":
        pytest.skip("needs the CUDA backend")
    monkeypatch.setenv("MINITENSOR_KERNEL_CACHE", str(tmp_path))


def slow() -> mt.cuda.RawKernel:
    return mt.cuda.compile(SLOW, name="slow_fill")


def test_a_stream_that_waits_for_an_event_sees_the_work_before_it() -> None:
    s1, s2 = mt.cuda.Stream(), mt.cuda.Stream()
    y = mt.zeros(N)
    mt.cuda.synchronize()
    slow()((N + 255) // 256, 256, (y, None, 1.0, N, CYCLES), stream=s1)
    s2.wait_event(s1.record_event())
    with mt.cuda.stream(s2):
        z = y * 2.0
        assert z.min().item() == 2.0  # 0.0 somewhere: s2 did not wait for s1


def test_the_default_stream_waits_for_a_blocking_stream() -> None:
    s1 = mt.cuda.Stream()
    y = mt.zeros(N)
    mt.cuda.synchronize()
    slow()((N + 255) // 256, 256, (y, None, 1.0, N, CYCLES), stream=s1)
    z = y * 2.0  # on the legacy default stream, with no explicit wait
    assert z.min().item() == 2.0


def test_record_stream_keeps_memory_from_reuse_until_the_other_stream_is_done() -> None:
    s1, s2 = mt.cuda.Stream(), mt.cuda.Stream()
    with mt.cuda.stream(s1):
        x = mt.ones(N)
    out = mt.zeros(N)
    s2.wait_stream(s1)
    slow()((N + 255) // 256, 256, (out, x, 0.0, N, CYCLES), stream=s2)  # reads x late
    x.record_stream(s2)
    del x
    gc.collect()
    with mt.cuda.stream(s1):
        w = mt.full((N,), 5.0)  # the pool may hand x's memory out again only after s2's read
    s2.synchronize()
    assert out.numpy().min() == 1.0 and out.numpy().max() == 1.0
    assert w.min().item() == 5.0


def test_torch_and_cupy_streams_can_be_current() -> None:
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    x = mt.ones(N)
    with mt.cuda.stream(side):
        assert mt.cuda.current_stream().cuda_stream == side.cuda_stream
        y = x * 3.0
    side.synchronize()
    assert y.min().item() == 3.0
    cupy = pytest.importorskip("cupy")
    cs = cupy.cuda.Stream(non_blocking=True)
    with mt.cuda.stream(cs):
        z = x + 1.0
        assert z.max().item() == 2.0  # a copy to the host waits for the current stream


def test_a_user_kernel_matches_cupys_raw_kernel_on_the_same_source() -> None:
    cupy = pytest.importorskip("cupy")
    from tests.test_raw_kernel import ADD
    n = 100_003
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    b = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    x, y, out = mt.tensor(a), mt.tensor(b), mt.empty(n)
    mt.cuda.compile(ADD, name="add")((n + 255) // 256, 256, (out, x, y, n))
    ours = out.numpy()
    theirs = cupy.empty(n, dtype=cupy.float32)
    cupy.RawKernel(ADD, "add")(((n + 255) // 256,), (256,), (theirs, cupy.asarray(a), cupy.asarray(b), np.int32(n)))
    np.testing.assert_array_equal(ours, cupy.asnumpy(theirs))
    # A minitensor tensor goes to CuPy's kernel without a copy, and back.
    cupy.RawKernel(ADD, "add")(((n + 255) // 256,), (256,), (cupy.asarray(out), cupy.asarray(out),
                                                              cupy.asarray(out), np.int32(n)))
    cupy.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(out.numpy(), 2 * ours)
