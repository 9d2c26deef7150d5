"""The activations and pooling in kernels (issue 29, items 2 and 3), counted on
the emulator: each is one kernel forward, and its backward through
`fn(x).sum().backward()` is the minimum torch runs too (the sum, the seed's
fill, one backward kernel) with nothing more: no copy of the gradient into
x.grad, no zip_strided for the expanded gradient of the sum (zip_one_value
streams it; the fast policy's kernel). The CUDA build counts no launches;
these tests skip there."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import _lib

ACTIVATIONS: dict[str, Callable[[Any], Any]] = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, "tanh"),
    "silu": F.silu,
    "elu": F.elu,
    "leaky_relu": F.leaky_relu,
    "hardtanh": F.hardtanh,
}
POOLS: dict[str, Callable[[Any], Any]] = {
    "max_pool2d": lambda x: F.max_pool2d(x, 3, 2, 1),
    "avg_pool2d": lambda x: F.avg_pool2d(x, 2),
    "adaptive_avg_pool2d": lambda x: F.adaptive_avg_pool2d(x, 1),
}
# The sum's two launches (partials, finish), the seed's fill.
SUM_AND_SEED = 3


def counted(fn: Callable[[], Any]) -> int:
    """Every kernel launch fn makes (launch_count("*"))."""
    _lib.reset_launch_counts()
    fn()
    return _lib.launch_count("*")


@pytest.fixture(autouse=True)
def counting_build_fast_policy() -> Any:
    """The emulator, which counts, under the fast policy: the teaching policy
    keeps zip_strided for a broadcast operand (the kernel students write)."""
    if _lib.launch_count("*") < 0:
        pytest.skip("the CUDA build counts no launches")
    with mt.kernels.policy("fast"):
        yield


@pytest.mark.parametrize("name", list(ACTIVATIONS) + list(POOLS))
def test_one_kernel_forward_and_one_backward(name: str) -> None:
    fn = ACTIVATIONS.get(name) or POOLS[name]
    shape = (2, 3, 6, 6) if name in POOLS else (5, 33)
    x = mt.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32), requires_grad=True)
    with mt.no_grad():
        assert counted(lambda: fn(x)) == 1
    out = fn(x)
    assert counted(lambda: out.sum().backward()) == SUM_AND_SEED + 1
    assert _lib.launch_count("zip_strided") == 0 and _lib.launch_count("map_contiguous_vec", "map_cast") == 0
    if name in ACTIVATIONS:
        assert _lib.launch_count("zip_one_value") == 1
