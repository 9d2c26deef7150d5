"""Zero-copy interop with NumPy (and anything else on the host): minitensor/_interop.py.

Proved, not assumed: each test compares data pointers and writes through
one view, then reads through the other. These run on the emulator, whose
memory is the host's; the CUDA backend's round trips with torch and CuPy
are in test_interop_gpu.py. The error cases that do not depend on the
backend run on both.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest

import minitensor as mt
from minitensor import _array, _dlpack, _foreign, ops
from tests.helpers import assert_close


@pytest.fixture
def host() -> None:
    """Skips a test on the CUDA backend, whose memory NumPy cannot address."""
    if mt.backend() != "emulator":
        pytest.skip("NumPy shares memory with the emulator only; on CUDA see test_interop_gpu.py")


def regions() -> list[tuple[int, int, int]]:
    gc.collect()
    return _foreign.registered_regions()


# ---- import: NumPy memory as a minitensor tensor ------------------------------------


@pytest.mark.parametrize("how", ["asarray", "from_dlpack"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_import_shares_memory_both_ways(host: None, how: str, dtype: Any) -> None:
    a = np.arange(12, dtype=dtype).reshape(3, 4)
    t = getattr(mt, how)(a)
    assert t.data_ptr() == a.ctypes.data
    assert t.shape == (3, 4) and t.strides == (4, 1)
    assert t.dtype == (mt.float32 if dtype is np.float32 else mt.float64)
    a[1, 2] = -5.0  # NumPy writes, minitensor reads
    assert t[1, 2].item() == -5.0
    t.mul_(2.0)  # a kernel writes, NumPy reads
    assert_close(a, 2.0 * np.where(np.arange(12).reshape(3, 4) == 6, -5.0, np.arange(12).reshape(3, 4)), dtype)
    assert regions() == [(a.ctypes.data, a.nbytes, 1)]


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[:, 1:],  # an offset and a gap between rows
        lambda a: a.T,  # transposed strides
        lambda a: a[::2, ::3],  # steps
        lambda a: a[1],  # a row
        lambda a: np.broadcast_to(a[:1], (3, 6))[:, :],  # stride 0 (NumPy marks it read-only)
    ],
)
def test_import_keeps_strides(host: None, view: Any) -> None:
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = view(a)
    if not v.flags.writeable:
        with pytest.raises(mt.InvalidArgumentError, match="read-only"):
            mt.asarray(v)
        return
    t = mt.asarray(v)
    assert t.data_ptr() == v.ctypes.data
    assert t.strides == tuple(s // 4 for s in v.strides)
    assert_close(t, v, mt.float32)
    assert_close(t + 1, v + 1, mt.float32)


def test_dlpack_keeps_the_storage_offset(host: None) -> None:
    """A DLPack producer's byte_offset becomes the tensor's storage offset."""

    class Offset:
        """Lends a[2:] as DLPack's data=a, byte_offset=8, as a producer may."""

        def __init__(self, a: np.ndarray) -> None:
            self.a = a

        def __dlpack_device__(self) -> tuple[int, int]:
            return (_dlpack.CPU, 0)

        def __dlpack__(self, stream: Any = None, max_version: Any = None) -> Any:
            return _dlpack.export(self.a.ctypes.data, (_dlpack.CPU, 0), 32, (4,), (1,), self.a, False,
                                  byte_offset=8)

    a = np.arange(6, dtype=np.float32)
    producer = Offset(a)
    producer.__dlpack__()  # dropped at once: an unconsumed capsule releases what it held
    assert _dlpack.lent_count() == 0
    t = mt.from_dlpack(producer)
    assert t.storage_offset() == 2 and t.data_ptr() == a.ctypes.data + 8
    assert t.tolist() == [2.0, 3.0, 4.0, 5.0]
    assert regions() == [(a.ctypes.data, 24, 1)]
    del t
    gc.collect()
    assert _dlpack.lent_count() == 0 and regions() == []


def test_producer_kept_alive_and_released(host: None) -> None:
    a = np.arange(6, dtype=np.float32) * 3
    alive = weakref.ref(a)
    t = mt.from_dlpack(a[1:])
    del a
    gc.collect()
    assert alive() is not None  # the tensor keeps NumPy's array alive
    assert t.tolist() == [3.0, 6.0, 9.0, 12.0, 15.0]
    del t
    gc.collect()
    assert alive() is None  # ...and lets it go with the last view
    assert regions() == []


def test_registered_extent_is_the_view(host: None) -> None:
    """Only the bytes the view addresses are registered: an op reaching past them is refused."""
    a = np.arange(10, dtype=np.float32)
    t = mt.asarray(a[2:6])
    assert regions() == [(a.ctypes.data + 8, 16, 1)]
    beyond = _array.alias(t, (5,), (1,), 0)  # one element past a[2:6]
    with pytest.raises(mt.InvalidArgumentError, match="registered buffer"):
        ops.add(beyond, 1.0)
    assert_close(t * 2, np.arange(2, 6) * 2.0, mt.float32)


@pytest.mark.parametrize("first_freed", [0, 1])
def test_overlapping_imports(host: None, first_freed: int) -> None:
    """Two overlapping views alive at once share one registration; freed in either order."""
    a = np.arange(10, dtype=np.float64)
    views = [mt.asarray(a[:6]), mt.asarray(a[4:])]
    assert regions() == [(a.ctypes.data, 80, 2)]
    inner = mt.asarray(a[1:3])  # inside the region: one more user, no new registration
    assert regions() == [(a.ctypes.data, 80, 3)]
    views[0].add_(100.0)  # written through one view, read through the other
    assert views[1].tolist() == [104.0, 105.0, 6.0, 7.0, 8.0, 9.0]
    assert (views[0][4:] + views[1][:2]).tolist() == [208.0, 210.0]  # both in one op
    del inner
    views.pop(first_freed)
    assert regions() == [(a.ctypes.data, 80, 1)]
    assert views[0].sum().item() == float(a[:6].sum() if first_freed == 1 else a[4:].sum())
    views.clear()
    assert regions() == []


def test_disjoint_imports_register_separately(host: None) -> None:
    a = np.zeros(8, dtype=np.float32)
    b = np.zeros(8, dtype=np.float32)
    ta, tb = mt.asarray(a), mt.asarray(b)
    assert len(regions()) == 2
    ta.add_(tb + 1.0)
    assert a.tolist() == [1.0] * 8
    del ta, tb
    assert regions() == []


def test_reimport_of_own_memory(host: None) -> None:
    """NumPy's view of a minitensor tensor, imported back: the same memory, nothing registered."""
    x = mt.arange(6.0)
    y = mt.asarray(np.asarray(x))
    assert y.data_ptr() == x.data_ptr()
    assert regions() == []
    y.mul_(10.0)
    assert x.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    assert mt.asarray(x) is x


def test_tensor_still_copies(host: None) -> None:
    a = np.ones(4, dtype=np.float32)
    t = mt.tensor(a)
    assert t.data_ptr() != a.ctypes.data
    a[0] = 7.0
    assert t.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_buffer_protocol_and_array_interface(host: None) -> None:
    raw = bytearray(np.arange(4, dtype=np.float32).tobytes())
    with pytest.raises(mt.DTypeError, match="uint8"):
        mt.asarray(raw)  # a bytearray's elements are bytes
    floats = memoryview(raw).cast("f")
    t = mt.asarray(floats)
    t.add_(1.0)
    assert np.frombuffer(raw, dtype=np.float32).tolist() == [1.0, 2.0, 3.0, 4.0]


# ---- export: minitensor memory seen by NumPy ------------------------------------------


def test_numpy_view_of_a_tensor(host: None) -> None:
    x = mt.arange(12.0, dtype=mt.float64).reshape(3, 4)
    v = np.asarray(x)
    assert v.ctypes.data == x.data_ptr() and v.base is x  # a view that keeps x alive
    v[0, 0] = 50.0
    assert x[0, 0].item() == 50.0
    x.mul_(2.0)
    assert v[0, 0] == 100.0 and v[2, 3] == 22.0
    xt = x.T[1:]  # strides and offset go through too
    vt = np.asarray(xt)
    assert vt.ctypes.data == xt.data_ptr() and vt.strides == (8, 32)
    assert_close(vt, x.numpy().T[1:], mt.float64)


@pytest.mark.parametrize("max_version", [None, (0, 8), (1, 0), (1, 3)])
def test_dlpack_export(host: None, max_version: Any) -> None:
    x = mt.arange(8.0).reshape(2, 4)[:, 1:]
    capsule = x.__dlpack__(max_version=max_version)
    versioned = max_version is not None and max_version[0] >= 1
    assert f'"{"dltensor_versioned" if versioned else "dltensor"}"' in repr(capsule)
    assert _dlpack.lent_count() == 1  # held, unconsumed: it may still be taken
    del capsule
    assert _dlpack.lent_count() == 0  # dropped unconsumed: released
    assert x.__dlpack_device__() == (_dlpack.CPU, 0)
    v = np.from_dlpack(x)
    assert v.ctypes.data == x.data_ptr() and v.strides == (16, 4)
    v[1, 2] = -1.0
    assert x[1, 2].item() == -1.0
    assert _dlpack.lent_count() == 1  # NumPy holds it...
    del v
    gc.collect()
    assert _dlpack.lent_count() == 0  # ...and has called the deleter


def test_a_consumer_failing_with_our_capsule(host: None, capfd: Any) -> None:
    """A consumer that refuses the capsule drops it with its error pending: its
    error comes through, the tensor is released, nothing is printed."""

    class FromTheFuture:
        """Lends a tensor in a capsule of DLPack 9.0, which NumPy refuses after taking it."""

        def __init__(self, x: mt.Tensor) -> None:
            self.x = x

        def __dlpack_device__(self) -> tuple[int, int]:
            return (_dlpack.CPU, 0)

        def __dlpack__(self, **kwargs: Any) -> Any:
            capsule = self.x.__dlpack__(max_version=(1, 0))
            _dlpack.Borrowed(capsule)._managed.version.major = 9
            return capsule

    with pytest.raises(BufferError, match="major version"):  # NumPy's own error, intact
        np.from_dlpack(FromTheFuture(mt.ones(3)))
    gc.collect()
    assert _dlpack.lent_count() == 0
    assert capfd.readouterr() == ("", "")


def test_dlpack_round_trip_through_minitensor(host: None) -> None:
    x = mt.zeros(5)
    y = mt.from_dlpack(x)
    assert y.data_ptr() == x.data_ptr()
    y.fill_(3.0)
    assert x.tolist() == [3.0] * 5


def test_export_refusals(host: None) -> None:
    x = mt.ones(3)
    assert not hasattr(x, "__cuda_array_interface__")  # host memory is no GPU's
    with pytest.raises(ValueError, match="stream=None"):
        x.__dlpack__(stream=5)
    with pytest.raises(BufferError, match="without copying"):
        x.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="CUDA:0"):
        x.__dlpack__(dl_device=(_dlpack.CUDA, 0))
    assert _dlpack.lent_count() == 0


# ---- what cannot be imported, on any backend -------------------------------------------


class FakeGpuArray:
    """A GPU array as torch or CuPy present it, pointing at nothing real."""

    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0x7F0000000000, False), "version": 3}

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_dlpack.CUDA, 0)

    def __dlpack__(self, **kwargs: Any) -> Any:
        raise AssertionError("a consumer that refuses the device must not ask for the capsule")


class FakeCaiOnly:
    __cuda_array_interface__ = FakeGpuArray.__cuda_array_interface__


def test_gpu_array_on_the_emulator(host: None) -> None:
    with pytest.raises(mt.InvalidArgumentError, match="CUDA memory.*emulator"):
        mt.from_dlpack(FakeGpuArray())
    with pytest.raises(mt.InvalidArgumentError, match="CUDA memory.*emulator"):
        mt.asarray(FakeCaiOnly())


class FakeCai:
    """A __cuda_array_interface__ with the given entries over FakeGpuArray's."""

    def __init__(self, **entries: Any) -> None:
        self.__cuda_array_interface__ = {**FakeGpuArray.__cuda_array_interface__, **entries}


def test_refusals_on_cuda() -> None:
    if mt.backend() != "cuda":
        pytest.skip("needs the CUDA backend")
    with pytest.raises(mt.InvalidArgumentError, match="CPU memory.*GPU"):
        mt.asarray(np.ones(3, dtype=np.float32))
    with pytest.raises(mt.InvalidArgumentError, match="CPU memory.*GPU"):
        mt.from_dlpack(np.ones(3, dtype=np.float32))

    class OtherGpu(FakeGpuArray):
        def __dlpack_device__(self) -> tuple[int, int]:
            return (_dlpack.CUDA, 7)

    with pytest.raises(mt.InvalidArgumentError, match="on GPU 7"):
        mt.from_dlpack(OtherGpu())
    with pytest.raises(mt.InvalidArgumentError, match="not device memory"):
        mt.asarray(FakeCaiOnly())  # an address that is no GPU memory: the engine's check
    with pytest.raises(mt.InvalidArgumentError, match="stream 0"):
        mt.asarray(FakeCai(stream=0))
    with pytest.raises(mt.InvalidArgumentError, match="mask"):
        mt.asarray(FakeCai(mask=(0, False)))
    x = mt.ones(3)
    with pytest.raises(ValueError, match="stream 0 is ambiguous"):
        x.__dlpack__(stream=0)
    assert regions() == [] and _dlpack.lent_count() == 0


def test_a_producer_that_refuses(host: None) -> None:
    class Refuses:
        def __dlpack_device__(self) -> tuple[int, int]:
            return (_dlpack.CPU, 0)

        def __dlpack__(self, **kwargs: Any) -> Any:
            raise BufferError("cannot export this one")

    with pytest.raises(mt.InvalidArgumentError, match="Refuses.__dlpack__ refused: cannot export"):
        mt.asarray(Refuses())
    with pytest.raises(BufferError, match="cannot export"):
        mt.from_dlpack(Refuses())


class FakeDtype:
    """A DLPack producer of another dtype on the backend's device (its data are never read)."""

    def __init__(self, dtype: Any) -> None:
        self.a = np.zeros(3, dtype=dtype)
        self.device = (_dlpack.CUDA if mt.backend() == "cuda" else _dlpack.CPU, 0)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device

    def __dlpack__(self, stream: Any = None, max_version: Any = None) -> Any:
        code = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}[self.a.dtype.kind]
        return _dlpack.export(self.a.ctypes.data, self.device, 8 * self.a.itemsize, (3,), (1,), self.a,
                              False, code=code)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float16, np.complex64])
def test_unsupported_dtype(dtype: Any) -> None:
    with pytest.raises(mt.DTypeError, match="unsupported dtype.*float32, float64, int64 and bool"):
        mt.from_dlpack(FakeDtype(dtype))
    gc.collect()
    assert _dlpack.lent_count() == 0  # the refused capsule released what it held


def test_unsupported_numpy_dtype(host: None) -> None:
    for dtype in (np.int32, np.float16, np.dtype(">f4")):
        with pytest.raises(mt.DTypeError, match="unsupported dtype"):
            mt.asarray(np.zeros(3, dtype=dtype))


def test_layouts_minitensor_cannot_represent(host: None) -> None:
    a = np.arange(12, dtype=np.float32)
    with pytest.raises(mt.ShapeError, match="negative"):
        mt.asarray(a[::-1])
    with pytest.raises(mt.ShapeError, match="negative"):
        mt.from_dlpack(a.reshape(3, 4)[:, ::-2])
    odd = np.lib.stride_tricks.as_strided(a, shape=(3,), strides=(6,))
    with pytest.raises(mt.ShapeError, match="not a multiple of the element size"):
        mt.asarray(odd)
    unaligned = np.frombuffer(bytearray(20), dtype=np.float32, offset=1, count=4)
    with pytest.raises(mt.InvalidArgumentError, match="not aligned"):
        mt.asarray(unaligned)
    with pytest.raises(mt.ShapeError):
        mt.asarray(np.zeros((1,) * 9, dtype=np.float32))
    assert regions() == []
    assert mt.asarray(a[::-1][:1]).tolist() == [11.0]  # one element: its stride is never used


def test_read_only_and_non_arrays(host: None) -> None:
    a = np.ones(3, dtype=np.float32)
    a.setflags(write=False)
    with pytest.raises(mt.InvalidArgumentError, match="read-only.*mt.tensor"):
        mt.asarray(a)
    with pytest.raises(mt.InvalidArgumentError, match="read-only"):
        mt.from_dlpack(a)
    with pytest.raises(TypeError, match="exposes no memory.*mt.tensor"):
        mt.asarray([1.0, 2.0])
    with pytest.raises(TypeError, match="no __dlpack__"):
        mt.from_dlpack([1.0, 2.0])

    class NotACapsule:
        def __dlpack_device__(self) -> tuple[int, int]:
            return (_dlpack.CPU, 0)

        def __dlpack__(self, **kwargs: Any) -> Any:
            return "capsule"

    with pytest.raises(TypeError, match="capsule"):
        mt.from_dlpack(NotACapsule())
    assert regions() == [] and _dlpack.lent_count() == 0


def test_empty_arrays(host: None) -> None:
    t = mt.asarray(np.zeros((0, 3), dtype=np.float32))
    assert t.shape == (0, 3) and regions() == []
    assert np.asarray(mt.zeros(0, 2)).shape == (0, 2)


def test_a_numpy_copy_larger_than_memory_is_refused_before_allocating() -> None:
    # An expanded view reads one float but would copy into 4 TiB: NumPy's lazy
    # allocation would be granted, and the process killed while filling it.
    huge = mt.ones(1).expand(2**40)
    with pytest.raises(mt.OutOfMemoryError, match=r"shape \(1099511627776,\) would take 4398046511104 bytes"):
        huge.numpy()
