"""Zero-copy interop on the GPU: minitensor with torch and CuPy, both ways.

Marked ``gpu`` (skipped unless the CUDA backend runs), and each test needs
torch or CuPy with CUDA (skipped with the reason otherwise). As in
test_interop.py, every test compares data pointers and writes through one
view before reading through the other. The stream tests queue slow work on
a side stream of the other library and check that minitensor sees its
result (and the reverse).
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import minitensor as mt
from minitensor import _foreign
from tests.helpers import assert_close

pytestmark = pytest.mark.gpu

BIG = 1 << 24  # elements: long enough for a missing wait to read stale data


@pytest.fixture
def torch() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    return torch


@pytest.fixture
def cupy() -> Any:
    return pytest.importorskip("cupy")


class OnlyCai:
    """Shows another array through __cuda_array_interface__ alone, as Numba's arrays do."""

    def __init__(self, array: Any) -> None:
        self.array = array

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.array.__cuda_array_interface__


def regions() -> list[tuple[int, int, int]]:
    gc.collect()
    return _foreign.registered_regions()


# ---- torch ---------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["asarray", "from_dlpack"])
def test_torch_to_minitensor(torch: Any, how: str) -> None:
    x = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)
    t = getattr(mt, how)(x)
    assert t.data_ptr() == x.data_ptr() and t.strides == x.stride()
    x[1, 2] = -5.0  # torch writes, minitensor reads
    assert t[1, 2].item() == -5.0
    t.mul_(2.0)  # minitensor writes, torch reads
    assert x[1, 2].item() == -10.0 and x[2, 3].item() == 22.0


@pytest.mark.parametrize(
    "view",
    [lambda x: x[:, 1:], lambda x: x.t(), lambda x: x[::2, ::3], lambda x: x[1], lambda x: x[:1].expand(3, 6)],
)
def test_torch_views_keep_strides_and_offset(torch: Any, view: Any) -> None:
    x = torch.arange(24, dtype=torch.float64, device="cuda").reshape(4, 6)
    v = view(x)
    t = mt.asarray(v)
    assert t.data_ptr() == v.data_ptr() and t.strides == v.stride() and t.shape == tuple(v.shape)
    assert_close(t, v.cpu().numpy(), mt.float64)


def test_torch_producer_kept_alive(torch: Any) -> None:
    gc.collect()
    before = torch.cuda.memory_allocated()
    x = torch.full((1 << 20,), 3.0, device="cuda")
    t = mt.from_dlpack(x)
    del x
    gc.collect()
    assert torch.cuda.memory_allocated() == before + (4 << 20)  # torch's memory is still lent
    assert t.min().item() == 3.0 and t.max().item() == 3.0
    del t
    gc.collect()
    assert torch.cuda.memory_allocated() == before  # the deleter gave it back
    assert regions() == []


@pytest.mark.parametrize("first_freed", [0, 1])
def test_overlapping_torch_views(torch: Any, first_freed: int) -> None:
    x = torch.arange(10, dtype=torch.float32, device="cuda")
    views = [mt.asarray(x[:6]), mt.asarray(x[4:])]
    assert regions() == [(x.data_ptr(), 40, 2)]
    views[0].add_(100.0)
    assert views[1].tolist() == [104.0, 105.0, 6.0, 7.0, 8.0, 9.0]
    views.pop(first_freed)
    assert regions() == [(x.data_ptr(), 40, 1)]
    views.clear()
    assert regions() == []


def test_minitensor_to_torch(torch: Any) -> None:
    x = mt.arange(12.0).reshape(3, 4)
    y = torch.from_dlpack(x)
    assert y.data_ptr() == x.data_ptr() and y.device.type == "cuda"
    y[0, 0] = 50.0
    assert x[0, 0].item() == 50.0
    x.mul_(2.0)
    assert y[0, 0].item() == 100.0
    z = torch.as_tensor(x.T, device="cuda")  # through __cuda_array_interface__
    assert z.data_ptr() == x.data_ptr() and z.stride() == (1, 4)


def test_torch_streams_are_honoured(torch: Any) -> None:
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.ones(BIG, device="cuda")
        for _ in range(20):
            x.mul_(1.0)
        x.mul_(2.0)  # queued on torch's side stream
        t = mt.from_dlpack(x)  # asks torch to order it before minitensor's stream
    assert t.min().item() == 2.0  # 1.0 somewhere: minitensor read before torch's side stream wrote
    y = mt.ones(BIG)
    y.mul_(3.0)  # queued on minitensor's stream
    with torch.cuda.stream(side):
        z = torch.from_dlpack(y)  # minitensor orders its work before torch's side stream
        low = z.min()
    assert low.item() == 3.0


def test_torch_errors(torch: Any) -> None:
    with pytest.raises(mt.InvalidArgumentError, match="CPU memory.*GPU"):
        mt.asarray(torch.ones(3))
    for dtype in (torch.int32, torch.float16, torch.bfloat16):
        with pytest.raises(mt.DTypeError, match="unsupported dtype"):
            mt.from_dlpack(torch.ones(3, dtype=dtype, device="cuda"))
    assert regions() == []


def test_int64_and_bool_tensors_are_shared_with_torch(torch: Any) -> None:
    t = torch.arange(6, device="cuda")
    m = mt.from_dlpack(t)  # torch's memory, no copy
    assert m.dtype is mt.int64 and m.tolist() == list(range(6))
    m += 10  # one kernel into torch's memory
    torch.cuda.synchronize()
    assert t.tolist() == list(range(10, 16))
    mask = torch.from_dlpack(m > 12)  # minitensor's memory, no copy
    assert mask.dtype == torch.bool and mask.tolist() == [False, False, False, True, True, True]
    back = mt.from_dlpack(mask)
    assert back.dtype is mt.bool and back.sum().item() == 3
    del m, back, mask
    gc.collect()


# ---- CuPy ------------------------------------------------------------------------------


@pytest.mark.parametrize("wrap", [lambda c: c, OnlyCai], ids=["dlpack", "cai"])
def test_cupy_to_minitensor(cupy: Any, wrap: Any) -> None:
    c = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    t = mt.asarray(wrap(c))
    assert t.data_ptr() == c.data.ptr and t.strides == (4, 1)
    c[1, 2] = -5.0
    assert t[1, 2].item() == -5.0
    t.mul_(2.0)
    assert float(c[1, 2]) == -10.0 and float(c[2, 3]) == 22.0
    # Refused either way. Through the array interface the stride is -16
    # bytes: "negative". CuPy 14.2's DLPack export divides the byte stride as
    # an unsigned number (-16 bytes arrives as 2**62 - 4 elements), so there
    # the refusal is that the view would address bytes past 2**63.
    with pytest.raises(mt.ShapeError, match="negative|beyond what an int64 can count"):
        mt.asarray(wrap(c[::-1]))


def test_minitensor_to_cupy(cupy: Any) -> None:
    x = mt.arange(12.0, dtype=mt.float64).reshape(3, 4)
    cai = x.__cuda_array_interface__
    assert cai["version"] == 3 and cai["stream"] == 1 and cai["data"] == (x.data_ptr(), False)
    for c in (cupy.asarray(x), cupy.from_dlpack(x)):
        assert c.data.ptr == x.data_ptr()
        c[0, 0] = 7.0
        assert x[0, 0].item() == 7.0
    x.add_(1.0)
    assert float(cupy.asarray(x)[0, 0]) == 8.0
    assert not hasattr(x, "__array_interface__")  # NumPy copies instead
    assert np.asarray(x)[0, 0] == 8.0


def test_cupy_cai_stream_is_honoured(cupy: Any) -> None:
    side = cupy.cuda.Stream(non_blocking=True)
    with side:
        c = cupy.ones(BIG, dtype=cupy.float32)
        for _ in range(20):
            c *= 1.0
        c *= 2.0  # queued on the side stream; its CAI carries that stream
        t = mt.asarray(OnlyCai(c))  # its CAI names the side stream: minitensor waits for it
    assert t.min().item() == 2.0
