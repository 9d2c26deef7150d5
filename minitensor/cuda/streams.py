"""Streams and events, in torch.cuda's vocabulary.

A stream is a queue of GPU work that runs in order; work on two streams may
run at the same time. Every op of minitensor (kernel, copy, allocation) is
queued on the calling thread's *current stream*: the legacy default stream
until ``with mt.cuda.stream(s):`` names another.

    s = mt.cuda.Stream()
    with mt.cuda.stream(s):
        y = x @ w               # queued on s
    done = s.record_event()
    mt.cuda.current_stream().wait_event(done)   # later work waits for y

Default-stream semantics (docs/api.md says the same):

- The default stream is CUDA's *legacy* default stream. It waits for the work
  queued before on every blocking stream, and they wait for it.
- ``Stream()`` makes a blocking stream (torch makes non-blocking ones): two
  such streams overlap, but anything queued on the default stream orders with
  both. A foreign stream (torch's, CuPy's) keeps its own flags.
- A tensor is freed on the stream it was allocated on. Used on another stream,
  ``t.record_stream(s)`` makes the free wait for s's work (torch's rule).
- The emulator has one in-order queue: the same API works, and every wait has
  nothing to wait for.

Foreign streams: ``mt.cuda.stream(x)`` and ``ExternalStream(x)`` accept a
torch stream (``.cuda_stream``), a CuPy stream (``.ptr``) or a raw
``cudaStream_t`` value. A tensor allocated on another library's stream is
freed on it, so it keeps that stream's Python object alive; a raw handle is
the caller's to keep alive until such tensors are gone.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

from .. import _interop, _lib
from .._errors import InvalidArgumentError


def _handle_of(obj: Any, func: str) -> int:
    """The raw cudaStream_t value of a stream given in any of its spellings."""
    if isinstance(obj, Stream):
        return obj.cuda_stream
    return _interop.stream_handle(obj, func)


class Stream:
    """A CUDA stream made by minitensor (destroyed with the object), or, as
    ``Stream(handle=...)``/``ExternalStream``, one borrowed from elsewhere."""

    def __init__(self, handle: Optional[int] = None) -> None:
        self._owned = False
        self._previous: list[int] = []  # the streams `with` replaced, innermost last
        if handle is None:
            self._handle = _lib.stream_create()
            self._owned = True
        else:
            self._handle = _handle_of(handle, "Stream")

    @property
    def cuda_stream(self) -> int:
        """The raw cudaStream_t value (torch's name; 0 is the default stream)."""
        return self._handle

    @property
    def ptr(self) -> int:
        """The raw cudaStream_t value (CuPy's name)."""
        return self._handle

    def synchronize(self) -> None:
        """Waits on the host until all the work queued on this stream is done."""
        _lib.stream_synchronize(self._handle)

    def query(self) -> bool:
        """True when all the work queued on this stream has finished."""
        return _lib.stream_query(self._handle)

    def record_event(self, event: Optional[Event] = None) -> Event:
        """Records an event (a new one if none is given) at this point of the stream."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        """Work queued on this stream from now on waits for the event."""
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait_event: expected an Event, got {type(event).__name__}")
        _lib.stream_wait_event(self._handle, event._handle)

    def wait_stream(self, stream: Any) -> None:
        """Work queued on this stream from now on waits for the work queued so far on `stream`."""
        _lib.stream_wait(self._handle, _handle_of(stream, "Stream.wait_stream"))

    def __enter__(self) -> Stream:
        self._previous.append((_lib.get_stream(), _lib.stream_owner()))
        _lib.set_stream(self._handle, _owner_of(self))
        return self

    def __exit__(self, *exc: Any) -> None:
        _lib.set_stream(*self._previous.pop())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other._handle == self._handle

    def __hash__(self) -> int:
        return hash(self._handle)

    def __repr__(self) -> str:
        kind = "default" if self._handle == 0 else ("owned" if self._owned else "external")
        return f"<minitensor.cuda.Stream {kind} cuda_stream={self._handle:#x}>"

    def __del__(self) -> None:
        if getattr(self, "_owned", False) and self._handle:
            try:
                _lib.stream_destroy(self._handle)
            except Exception:  # noqa: BLE001 - a finalizer must never raise
                pass


class ExternalStream(Stream):
    """Another library's stream (torch's ``.cuda_stream``, CuPy's ``.ptr``, or a
    raw handle), used but never destroyed by minitensor. It keeps the other
    library's stream object alive, and so does every tensor allocated on it."""

    def __init__(self, stream: Any) -> None:
        super().__init__(handle=_handle_of(stream, "ExternalStream"))
        self._foreign = stream if not isinstance(stream, int) else None


def _owner_of(s: Any) -> Any:
    """What a tensor allocated on stream s must keep alive: a minitensor
    Stream hands its buffers to the default stream when it is destroyed
    (nothing to keep); another library's stream object is kept, since its
    stream may be destroyed with it. A raw handle is the caller's to keep."""
    if isinstance(s, ExternalStream):
        return s
    if isinstance(s, Stream) or isinstance(s, int):
        return None
    return s


class Event:
    """A marker in a stream: the host or another stream can wait for it, and two
    timing events measure the GPU time between them (``enable_timing=True``)."""

    def __init__(self, enable_timing: bool = False) -> None:
        self._timing = bool(enable_timing)
        self._handle = 0
        self._handle = _lib.event_create(self._timing)
        self._recorded = False

    def record(self, stream: Any = None) -> None:
        """Marks the current point of `stream` (default: the current stream)."""
        handle = _lib.get_stream() if stream is None else _handle_of(stream, "Event.record")
        _lib.event_record(self._handle, handle)
        self._recorded = True

    def wait(self, stream: Any = None) -> None:
        """Work queued on `stream` (default: the current stream) from now on waits for this event."""
        handle = _lib.get_stream() if stream is None else _handle_of(stream, "Event.wait")
        _lib.stream_wait_event(handle, self._handle)

    def synchronize(self) -> None:
        """Waits on the host until the work before the recorded point is done."""
        _lib.event_synchronize(self._handle)

    def query(self) -> bool:
        """True when the work before the recorded point has finished."""
        return _lib.event_query(self._handle)

    def elapsed_time(self, end: Event) -> float:
        """Milliseconds of GPU time from this event to `end` (both recorded, both timing)."""
        if not isinstance(end, Event):
            raise TypeError(f"Event.elapsed_time: expected an Event, got {type(end).__name__}")
        if not (self._timing and end._timing):
            raise InvalidArgumentError("Event.elapsed_time: both events need enable_timing=True")
        if not (self._recorded and end._recorded):
            raise InvalidArgumentError("Event.elapsed_time: both events must be recorded first")
        return _lib.event_elapsed(self._handle, end._handle)

    def __repr__(self) -> str:
        return f"<minitensor.cuda.Event timing={self._timing} handle={self._handle:#x}>"

    def __del__(self) -> None:
        if getattr(self, "_handle", 0):
            try:
                _lib.event_destroy(self._handle)
            except Exception:  # noqa: BLE001
                pass


def current_stream() -> Stream:
    """This thread's current stream (every op queues on it)."""
    return Stream(handle=_lib.get_stream())


def default_stream() -> Stream:
    """The legacy default stream (handle 0)."""
    return Stream(handle=0)


def set_stream(stream: Any) -> None:
    """Makes `stream` this thread's current stream (torch.cuda.set_stream)."""
    _lib.set_stream(_handle_of(stream, "set_stream"), _owner_of(stream))


@contextlib.contextmanager
def stream(s: Any) -> Iterator[Any]:
    """``with mt.cuda.stream(s):`` queues this thread's ops on s, then restores
    the stream before; s may be None (no change), a Stream, a torch or CuPy
    stream, or a raw handle."""
    if s is None:
        yield None
        return
    handle = _handle_of(s, "stream")
    previous = (_lib.get_stream(), _lib.stream_owner())
    _lib.set_stream(handle, _owner_of(s))
    try:
        yield s
    finally:
        _lib.set_stream(*previous)


def synchronize() -> None:
    """Waits on the host until all the work queued on the device is done."""
    _lib.synchronize()
