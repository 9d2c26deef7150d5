"""minitensor.distributed.PeerGroup: one process, one kernel over several devices.

Every rung of the p2p all-reduce ladder (src/dist/p2p_*.cu) against a plain
sum in float64, on 2, 3 and 4 devices: emulated devices on the emulator
(emulate_devices), the machine's GPUs on the CUDA build (as many as it has,
up to 4; the tests that need more skip). Every rank must hold the same bits,
whatever the rung's order of additions. Also: the refusal where two devices
cannot reach each other (emulator), bad arguments, and the benchmark call.
"""

from __future__ import annotations

import re
from typing import Iterator

import numpy as np
import pytest

import minitensor as mt
from minitensor import _lib
from minitensor.distributed import PeerGroup, device_count, emulate_devices, oneshot_max_bytes
from minitensor.distributed import _p2p_lib

from helpers import DTYPES, assert_close, random_array

EMULATOR = _lib.backend_name() == "emulator"
RUNGS = ["naive", "ring", "oneshot", "twoshot", "auto"]


@pytest.fixture
def devices(request: pytest.FixtureRequest) -> Iterator[int]:
    """`request.param` devices: emulated, or skip where the machine has fewer GPUs."""
    n = request.param
    if EMULATOR:
        emulate_devices(n)
        yield n
        emulate_devices(1)
    else:
        if device_count() < n:
            pytest.skip(f"needs {n} GPUs, the machine has {device_count()}")
        yield n


def reduce_and_check(group: PeerGroup, shape: tuple[int, ...], dtype: mt.dtype, rung: str, seed: int) -> None:
    arrays = [random_array(seed + r, shape, dtype) for r in range(group.world_size)]
    tensors = [mt.tensor(a) for a in arrays]
    group.all_reduce(tensors, rung=rung)
    ref = sum(a.astype(np.float64) for a in arrays)
    first = tensors[0].numpy()
    for r, t in enumerate(tensors):
        assert_close(t, ref, dtype, n=group.world_size)
        np.testing.assert_array_equal(t.numpy(), first, err_msg=f"rank {r} holds other bits than rank 0")


@pytest.mark.parametrize("devices", [1, 2, 3, 4], indirect=True)
@pytest.mark.parametrize("rung", RUNGS)
def test_every_rung_equals_the_plain_sum(devices: int, rung: str) -> None:
    with PeerGroup(range(devices)) as group:
        assert group.world_size == devices
        # sizes off every boundary: one element, under a 16-byte pack, a
        # part smaller than a rank's share, several grid strides, 2-D
        for i, shape in enumerate([(1,), (3,), (7,), (33,), (5, 13), (1025,), (4099,)]):
            for dtype in DTYPES:
                reduce_and_check(group, shape, dtype, rung, seed=100 * i)


@pytest.mark.parametrize("devices", [1, 2], indirect=True)
def test_calls_repeat_and_sizes_change(devices: int) -> None:
    """The barrier count carries over from call to call (flags are never reset)."""
    with PeerGroup(range(devices)) as group:
        # the large sizes fill every block of a GPU launch (32 x 512 threads) several times over
        for i, (rung, n) in enumerate([("ring", 40), ("twoshot", 9), ("naive", 300), ("oneshot", 40),
                                       ("ring", 2), ("twoshot", 5000), ("auto", 17), ("ring", 300_001),
                                       ("twoshot", 300_000), ("oneshot", 100_003), ("naive", 70_000),
                                       ("auto", 1 << 17)]):
            reduce_and_check(group, (n,), mt.float32, rung, seed=i)


@pytest.mark.parametrize("devices", [3], indirect=True)
def test_views_empty_tensors_and_a_subset_of_devices(devices: int) -> None:
    with PeerGroup([2, 0]) as group:  # rank 0 is device 2
        assert group.devices == (2, 0)
        base = [random_array(7 + r, (6, 5), mt.float64) for r in range(2)]
        views = [mt.tensor(b).t() for b in base]  # transposed: not contiguous
        assert not views[0].is_contiguous()
        group.all_reduce(views, rung="twoshot")
        for v in views:
            assert_close(v, (base[0] + base[1]).T, mt.float64, n=2)
        empty = [mt.zeros((0, 3)) for _ in range(2)]
        group.all_reduce(empty, rung="ring")
        assert all(tuple(e.shape) == (0, 3) for e in empty)


@pytest.mark.parametrize("devices", [2], indirect=True)
def test_bad_arguments_are_refused_with_a_message(devices: int) -> None:
    with PeerGroup([0, 1]) as group:
        a, b = mt.zeros(4), mt.zeros(4)
        with pytest.raises(ValueError, match="3 tensors for a group of 2"):
            group.all_reduce([a, b, a])
        with pytest.raises(ValueError, match=re.escape("tensors[1] is float32 (5,), tensors[0] is float32 (4,)")):
            group.all_reduce([a, mt.zeros(5)])
        with pytest.raises(TypeError, match="tensors.1. has dtype int64"):
            group.all_reduce([a, mt.zeros(4, dtype=mt.int64)])
        with pytest.raises(ValueError, match="unknown all-reduce rung 'tree'"):
            group.all_reduce([a, b], rung="tree")
    with pytest.raises(RuntimeError, match="closed"):
        group.all_reduce([a, b])
    with pytest.raises(mt.MinitensorError, match="listed twice"):
        PeerGroup([1, 1])
    with pytest.raises(mt.MinitensorError, match=r"device 64 does not exist"):
        PeerGroup([0, 64])


@pytest.mark.parametrize("devices", [2], indirect=True)
def test_bench_times_every_call(devices: int) -> None:
    with PeerGroup(range(devices)) as group:
        for rung in RUNGS:
            ms = group.bench(1000, "float64", rung=rung, warmup=1, iters=3)
            assert len(ms) == 3 and all(t > 0 for t in ms)
    assert oneshot_max_bytes() > 0


@pytest.mark.skipif(not EMULATOR, reason="peer access is the machine's on a GPU")
def test_a_group_without_peer_access_is_refused() -> None:
    emulate_devices(2, peer_access=False)
    try:
        with pytest.raises(mt.MinitensorError, match="device 0 cannot access device 1's memory"):
            PeerGroup()
    finally:
        emulate_devices(1)


@pytest.mark.skipif(not EMULATOR, reason="the emulator's device count")
def test_emulated_devices_are_counted_and_bounded() -> None:
    emulate_devices(4)
    try:
        assert device_count() == 4
        with PeerGroup([3]):
            with pytest.raises(mt.MinitensorError, match="alive"):
                emulate_devices(2)
    finally:
        emulate_devices(1)
    assert device_count() == 1
    with pytest.raises(mt.MinitensorError, match="1 to 64"):
        emulate_devices(65)


def test_the_header_matches_the_binding() -> None:
    """Every function of minitensor_p2p.h is declared in _p2p_lib.SIGNATURES, and the reverse."""
    from pathlib import Path

    header = (Path(__file__).resolve().parent.parent / "src" / "dist" / "minitensor_p2p.h").read_text()
    declared = set(re.findall(r"^\w[\w\s\*]*?\b(mtp_\w+)\(", header, flags=re.M))
    assert declared == set(_p2p_lib.SIGNATURES)
    assert f"#define MTP_ABI_VERSION {_p2p_lib.ABI_VERSION}" in header
    assert f"#define MTP_MAX_DEVICES {_p2p_lib.MAX_DEVICES}" in header
