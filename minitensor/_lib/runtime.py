"""The device and its streams, events and graphs, the kernel policy and launch
counts, device placement (src/errors.cu, src/stream.cu, src/graph.cu,
src/policy.cu)."""

from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, c_char_p, c_int, c_int64, c_size_t, c_void_p
from typing import Any, Optional

from .._errors import MinitensorError
from .loader import KERNEL_POLICIES, declare, C, check

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_backend_name": (c_char_p, []),
    "mt_device_info": (c_int, [c_char_p, c_size_t]),
    "mt_device_key": (c_int, [c_char_p, c_size_t]),
    "mt_set_sync_debug": (c_int, [c_int]),
    "mt_synchronize": (c_int, []),
    "mt_set_stream": (c_int, [c_void_p]),
    "mt_get_stream": (c_int, [POINTER(c_void_p)]),
    "mt_stream_create": (c_int, [POINTER(c_void_p)]),
    "mt_stream_destroy": (c_int, [c_void_p]),
    "mt_stream_synchronize": (c_int, [c_void_p]),
    "mt_stream_query": (c_int, [c_void_p, POINTER(c_int)]),
    "mt_stream_wait": (c_int, [c_void_p, c_void_p]),
    "mt_event_create": (c_int, [POINTER(c_void_p), c_int]),
    "mt_event_destroy": (c_int, [c_void_p]),
    "mt_event_record": (c_int, [c_void_p, c_void_p]),
    "mt_event_synchronize": (c_int, [c_void_p]),
    "mt_event_query": (c_int, [c_void_p, POINTER(c_int)]),
    "mt_event_elapsed": (c_int, [POINTER(ctypes.c_float), c_void_p, c_void_p]),
    "mt_stream_wait_event": (c_int, [c_void_p, c_void_p]),
    "mt_record_stream": (c_int, [c_void_p, c_void_p]),
    "mt_graph_capture_begin": (c_int, [c_void_p]),
    "mt_graph_capture_end": (c_int, [c_void_p, POINTER(c_void_p)]),
    "mt_graph_capture_abort": (c_int, []),
    "mt_graph_replay": (c_int, [c_void_p, c_void_p]),
    "mt_graph_destroy": (c_int, [c_void_p]),
    "mt_set_kernel_policy": (c_int, [c_int]),
    "mt_get_kernel_policy": (c_int, []),
    "mt_launch_count": (c_int64, [c_char_p, c_char_p]),
    "mt_reset_launch_counts": (None, []),
    "mt_set_device": (c_int, [c_int]),
    "mt_get_device": (c_int, [POINTER(c_int)]),
}
declare(SIGNATURES)


# ---- library information ---------------------------------------------------


def backend_name() -> str:
    """'cuda' or 'emulator'."""
    return C.mt_backend_name().decode()


def device_info() -> str:
    buf = ctypes.create_string_buffer(512)
    check(C.mt_device_info(buf, len(buf)), "mt_device_info")
    return buf.value.decode(errors="replace")


def device_key() -> str:
    """A short key for the current device ("<name>|sm_90|132sm"), cached in C."""
    buf = ctypes.create_string_buffer(512)
    check(C.mt_device_key(buf, len(buf)), "mt_device_key")
    return buf.value.decode(errors="replace")


def set_sync_debug(on: bool) -> None:
    check(C.mt_set_sync_debug(1 if on else 0), "mt_set_sync_debug")


def synchronize() -> None:
    check(C.mt_synchronize(), "mt_synchronize")


# ---- streams and events (raw cudaStream_t / cudaEvent_t values; 0 is the
# legacy default stream) --------------------------------------------------------


def stream_wait(waiting: int, done: int) -> None:
    """Work queued on stream `waiting` from now on waits for the work queued on
    `done` so far."""
    check(C.mt_stream_wait(waiting or None, done or None), "mt_stream_wait")


# The current stream lives in C, per thread (mt_set_stream); this mirror of it
# answers get_stream without a call, since every change goes through here.
# Its fields: handle, owner (see stream_owner) and capturing; the Storage of
# each new tensor reads owner directly (stream_state), as a field.


class _StreamState(threading.local):
    """The current stream of one thread, with class-level defaults: a thread
    that never set its stream reads them as plain fields (getattr with a
    default costs a raised and caught AttributeError, about 0.4 us, on every
    new tensor)."""

    handle = 0
    owner: Any = None
    capturing = False


_current_stream = _StreamState()
stream_state = _current_stream


def set_stream(stream: int, owner: Any = None) -> None:
    """Makes `stream` this thread's current stream: every op queues on it.
    owner is the Python object of another library's stream (torch's, CuPy's),
    which every allocation made on it keeps alive (stream_owner)."""
    check(C.mt_set_stream(stream or None), "mt_set_stream")
    _current_stream.handle = stream or 0
    _current_stream.owner = owner


def stream_owner() -> Any:
    """The foreign stream object behind the current stream, or None. A buffer
    is freed on the stream it was allocated on, so a buffer allocated on a
    foreign stream keeps that stream's object (and the stream) alive."""
    return _current_stream.owner


def get_stream() -> int:
    """This thread's current stream (0: the legacy default stream)."""
    return _current_stream.handle


def stream_create() -> int:
    out = c_void_p()
    check(C.mt_stream_create(ctypes.byref(out)), "mt_stream_create")
    return out.value or 0


def stream_destroy(stream: int) -> None:
    check(C.mt_stream_destroy(stream or None), "mt_stream_destroy")
    if get_stream() == stream:  # C made the default stream current again
        _current_stream.handle = 0
        _current_stream.owner = None


def stream_synchronize(stream: int) -> None:
    check(C.mt_stream_synchronize(stream or None), "mt_stream_synchronize")


def stream_query(stream: int) -> bool:
    done = c_int()
    check(C.mt_stream_query(stream or None, ctypes.byref(done)), "mt_stream_query")
    return bool(done.value)


def event_create(timing: bool) -> int:
    out = c_void_p()
    check(C.mt_event_create(ctypes.byref(out), 1 if timing else 0), "mt_event_create")
    return out.value or 0


def event_destroy(event: int) -> None:
    check(C.mt_event_destroy(event or None), "mt_event_destroy")


def event_record(event: int, stream: int) -> None:
    check(C.mt_event_record(event or None, stream or None), "mt_event_record")


def event_synchronize(event: int) -> None:
    check(C.mt_event_synchronize(event or None), "mt_event_synchronize")


def event_query(event: int) -> bool:
    done = c_int()
    check(C.mt_event_query(event or None, ctypes.byref(done)), "mt_event_query")
    return bool(done.value)


def event_elapsed(start: int, end: int) -> float:
    ms = ctypes.c_float()
    check(C.mt_event_elapsed(ctypes.byref(ms), start or None, end or None), "mt_event_elapsed")
    return ms.value


def stream_wait_event(stream: int, event: int) -> None:
    check(C.mt_stream_wait_event(stream or None, event or None), "mt_stream_wait_event")


def graph_capture_begin(stream: int) -> None:
    check(C.mt_graph_capture_begin(stream or None), "mt_graph_capture_begin")
    _current_stream.capturing = True


def graph_capture_end(stream: int) -> int:
    out = c_void_p()
    _current_stream.capturing = False
    check(C.mt_graph_capture_end(stream or None, ctypes.byref(out)), "mt_graph_capture_end")
    return out.value or 0


def graph_capture_abort() -> None:
    _current_stream.capturing = False
    check(C.mt_graph_capture_abort(), "mt_graph_capture_abort")


def capturing() -> bool:
    """Whether this thread is capturing a CUDA graph (mt.cuda.graph)."""
    return _current_stream.capturing


def graph_replay(graph: int, stream: int) -> None:
    check(C.mt_graph_replay(graph or None, stream or None), "mt_graph_replay")


def graph_destroy(graph: int) -> None:
    check(C.mt_graph_destroy(graph or None), "mt_graph_destroy")


def record_stream(ptr: int, stream: int) -> None:
    """The buffer at ptr is used on `stream` too; its free waits for that work."""
    check(C.mt_record_stream(ptr or None, stream or None), "mt_record_stream")


# ---- kernel policy -------------------------------------------------------------


def set_kernel_policy(name: str) -> None:
    """Makes the default paths run the "fast" kernels or only the "teaching" ones
    (mt_set_kernel_policy). name must be a key of KERNEL_POLICIES."""
    check(C.mt_set_kernel_policy(KERNEL_POLICIES[name]), "mt_set_kernel_policy")


def get_kernel_policy() -> str:
    """The kernel policy in force: "fast" or "teaching" (mt_get_kernel_policy)."""
    value = int(C.mt_get_kernel_policy())
    for name, number in KERNEL_POLICIES.items():
        if number == value:
            return name
    raise MinitensorError(f"mt_get_kernel_policy returned {value}, which is no policy this package knows")


def launch_count(kernel: str, with_: Optional[str] = None) -> int:
    """Launches of the kernel named `kernel` since reset_launch_counts(), of
    instantiations whose signature contains `with_` (mt_launch_count); -1 on
    the CUDA build, which does not count."""
    return int(C.mt_launch_count(kernel.encode(), with_.encode() if with_ else None))


def reset_launch_counts() -> None:
    C.mt_reset_launch_counts()


# ---- device placement (minitensor.distributed: one process per GPU) -----------


def set_device(device: int) -> None:
    """Chooses this process's GPU (before the first tensor is created)."""
    check(C.mt_set_device(int(device)), "mt_set_device")


def get_device() -> int:
    """The device index this process uses (always 0 on the emulator)."""
    device = c_int()
    check(C.mt_get_device(ctypes.byref(device)), "mt_get_device")
    return device.value
