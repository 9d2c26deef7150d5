"""Streams and events (minitensor.cuda), on whichever backend runs.

On the emulator every launch has finished when it returns, so these tests
check the API's contract (the current stream, restoring it, handles,
events, freeing memory of a destroyed stream); tests/test_streams_gpu.py
checks the ordering itself on a GPU, with work long enough to lose a race.
"""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import numpy as np
import pytest

import minitensor as mt
from minitensor import _lib
from tests.helpers import assert_close


def test_the_default_stream_is_current_until_a_stream_is_chosen() -> None:
    assert mt.cuda.current_stream() == mt.cuda.default_stream()
    assert mt.cuda.current_stream().cuda_stream == 0
    s = mt.cuda.Stream()
    assert s.cuda_stream != 0 and s.ptr == s.cuda_stream
    with mt.cuda.stream(s):
        assert mt.cuda.current_stream() == s
        inner = mt.cuda.Stream()
        with inner:  # a Stream is a context manager too, as CuPy's
            assert mt.cuda.current_stream() == inner
        assert mt.cuda.current_stream() == s
    assert mt.cuda.current_stream().cuda_stream == 0


def test_the_stream_is_restored_after_an_exception() -> None:
    s = mt.cuda.Stream()
    with pytest.raises(ZeroDivisionError):
        with mt.cuda.stream(s):
            1 / 0
    assert mt.cuda.current_stream().cuda_stream == 0


def test_ops_on_a_stream_give_the_same_values() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((33, 17)), rng.standard_normal((17, 5))
    s = mt.cuda.Stream()
    with mt.cuda.stream(s):
        x, y = mt.tensor(a), mt.tensor(b)
        z = (x @ y).relu().sum(dim=0)
        host = z.numpy()  # a copy to the host waits for the current stream
    done = s.record_event()
    mt.cuda.current_stream().wait_event(done)
    assert_close(host, np.maximum(a @ b, 0).sum(axis=0), mt.float32, n=17)
    assert_close(z.numpy(), host, mt.float32)


def test_the_current_stream_belongs_to_the_thread() -> None:
    s = mt.cuda.Stream()
    seen: list[int] = []
    with mt.cuda.stream(s):
        worker = threading.Thread(target=lambda: seen.append(mt.cuda.current_stream().cuda_stream))
        worker.start()
        worker.join()
    assert seen == [0]


def test_foreign_streams_are_taken_in_every_spelling() -> None:
    s = mt.cuda.Stream()

    class TorchLike:
        cuda_stream = s.cuda_stream

    class CupyLike:
        ptr = s.cuda_stream

    for spelling in (TorchLike(), CupyLike(), s.cuda_stream, mt.cuda.ExternalStream(s.cuda_stream)):
        with mt.cuda.stream(spelling):
            assert mt.cuda.current_stream().cuda_stream == s.cuda_stream
    with mt.cuda.stream(None):  # torch's spelling of "no change"
        assert mt.cuda.current_stream().cuda_stream == 0
    assert "external" in repr(mt.cuda.ExternalStream(s))


@pytest.mark.parametrize("bad", ["stream", 1.5, True, object()])
def test_what_is_not_a_stream_is_refused(bad: Any) -> None:
    with pytest.raises(TypeError, match="stream"):
        with mt.cuda.stream(bad):
            pass
    with pytest.raises(TypeError):
        mt.cuda.ExternalStream(bad)


def test_a_negative_handle_is_refused() -> None:
    with pytest.raises(ValueError, match="not negative"):
        mt.cuda.set_stream(-1)


def test_events_record_wait_and_time() -> None:
    start, end = mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True)
    s = mt.cuda.Stream()
    start.record(s)
    with mt.cuda.stream(s):
        x = mt.randn(256, 256)
        y = x @ x
    end.record(s)
    end.synchronize()
    assert start.query() and end.query() and s.query()
    assert start.elapsed_time(end) >= 0.0
    end.wait()  # the current stream waits: nothing left to wait for, and no error
    s.wait_stream(mt.cuda.default_stream())
    assert y.shape == (256, 256)


def test_events_refuse_what_cannot_be_timed() -> None:
    plain, timed = mt.cuda.Event(), mt.cuda.Event(enable_timing=True)
    plain.record()
    timed.record()
    with pytest.raises(ValueError, match="enable_timing"):
        plain.elapsed_time(timed)
    unrecorded = mt.cuda.Event(enable_timing=True)
    with pytest.raises(ValueError, match="recorded"):
        timed.elapsed_time(unrecorded)
    with pytest.raises(TypeError):
        timed.elapsed_time(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        mt.cuda.current_stream().wait_event("event")  # type: ignore[arg-type]


def test_memory_of_a_destroyed_stream_is_freed_later_without_error() -> None:
    gc.collect()
    before = mt.memory_in_use()
    s = mt.cuda.Stream()
    with mt.cuda.stream(s):
        kept = mt.ones(1000)  # allocated on s
    used = mt.zeros(1000)
    used.record_stream(s)  # used on s besides the default stream
    del s
    gc.collect()  # the stream is destroyed: its buffers move to the default stream
    assert kept.sum().item() == 1000.0
    del kept, used
    gc.collect()
    assert mt.memory_in_use() == before


def test_record_stream_is_a_no_op_for_borrowed_memory_and_checks_its_argument() -> None:
    borrowed = mt.asarray(np.ones(4, dtype=np.float32)) if mt.backend() == "emulator" else mt.ones(4)
    borrowed.record_stream(mt.cuda.current_stream())
    with pytest.raises(TypeError, match="stream"):
        borrowed.record_stream("s")


def test_a_tensor_allocated_on_a_foreign_stream_keeps_its_object_alive() -> None:
    # CuPy destroys a stream when its object goes; a tensor made on it is
    # freed on it later, so the tensor keeps the object alive.
    s = mt.cuda.Stream()

    class CupyLike:
        ptr = s.cuda_stream

    foreign = CupyLike()
    alive = weakref.ref(foreign)
    with mt.cuda.stream(foreign):
        t = mt.ones(10)
    empty_made = mt.ones(10)  # after the block: the default stream, no owner
    del foreign
    gc.collect()
    assert alive() is not None
    del t
    gc.collect()
    assert alive() is None
    assert empty_made.sum().item() == 10.0


def test_the_default_stream_cannot_be_destroyed() -> None:
    with pytest.raises(ValueError, match="default stream"):
        _lib.stream_destroy(0)


def test_device_queries() -> None:
    assert mt.cuda.is_available() == (mt.backend() == "cuda")
    assert mt.cuda.device_count() == (1 if mt.cuda.is_available() else 0)
    mt.cuda.synchronize()
