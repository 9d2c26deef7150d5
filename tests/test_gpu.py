"""Tests that need the CUDA build on a GPU: sizes too big for the emulator,
and the device report. Skipped, with the reason, everywhere else."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt
from helpers import assert_close, pair, random_array

pytestmark = pytest.mark.gpu


def test_backend_is_cuda_and_reports_the_device() -> None:
    assert mt.backend() == "cuda"
    info = mt.device_info()
    assert info


@pytest.mark.parametrize("algo", ["default", "naive", "tiled"])
@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
def test_large_matmul(algo: str, dtype: mt.DType) -> None:
    ta, a = pair(random_array(1, (513, 769), dtype), dtype)
    tb, b = pair(random_array(2, (769, 257), dtype), dtype)
    assert_close(mt.kernels.matmul(ta, tb, algo), a @ b, dtype, n=769)


@pytest.mark.parametrize("dtype", [mt.float32, mt.float64])
def test_large_reductions(dtype: mt.DType) -> None:
    t, a = pair(random_array(3, (1 << 20,), dtype), dtype)
    assert_close(t.sum(), a.sum(), dtype, n=1 << 20)
    assert_close(t.max(), a.max(), dtype)
    assert t.argmax().item() == float(a.argmax())
    t2, a2 = pair(random_array(4, (300, 70000), dtype), dtype)
    assert_close(t2.sum(1), a2.sum(1), dtype, n=70000)
    assert_close(t2.sum(0), a2.sum(0), dtype, n=300)
    assert_close(mt.softmax(t2, 1), np.exp(a2 - a2.max(1, keepdims=True)) / np.exp(a2 - a2.max(1, keepdims=True)).sum(1, keepdims=True), dtype, n=70000)


def test_sync_debug_mode() -> None:
    mt.set_sync_debug(True)
    try:
        assert ((mt.ones(1000) * 2).sum()).item() == 2000.0
    finally:
        mt.set_sync_debug(False)
    mt.synchronize()
