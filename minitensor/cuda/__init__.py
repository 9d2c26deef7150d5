"""minitensor.cuda: streams, events and your own kernels (torch.cuda's and
CuPy's vocabulary), on the GPU and on the emulator alike.

- streams.py: Stream, ExternalStream, Event, current_stream, stream(),
  synchronize, and the default-stream semantics;
- graphs.py: CUDAGraph and graph(), capture of a step and its replay;
- compiler.py: compile / RawKernel, kernels compiled at run time (NVRTC and
  the driver API through _nvrtc.py on CUDA; _cu2emu.py and the host
  compiler through _host_build.py on the emulator), cached on disk.
"""

from .. import _lib
from .._errors import CompileError
from ._cache import cache_dir
from .compiler import RawKernel, compile
from .graphs import CUDAGraph, graph
from .streams import (
    Event,
    ExternalStream,
    Stream,
    current_stream,
    default_stream,
    set_stream,
    stream,
    synchronize,
)


def is_available() -> bool:
    """True when minitensor runs on a GPU (False on the emulator)."""
    return _lib.backend_name() == "cuda"


def device_count() -> int:
    """GPUs this process can use: 1 on the CUDA backend (one device per
    process), 0 on the emulator."""
    return 1 if is_available() else 0


__all__ = [
    "CUDAGraph",
    "CompileError",
    "Event",
    "ExternalStream",
    "RawKernel",
    "Stream",
    "cache_dir",
    "compile",
    "current_stream",
    "default_stream",
    "device_count",
    "graph",
    "is_available",
    "set_stream",
    "stream",
    "synchronize",
]
