"""_bridge: torch tensors in and out of minitensor's Arrays, without a copy.

The custom ops of this package compute on minitensor's Arrays (the ops
layer, minitensor/ops/) and take and return torch tensors. Neither way
copies (minitensor/_interop.py does the exchange):

- in, ``to_array``: the torch tensor's memory, described as the array
  interfaces describe memory (its first element's address, shape, strides
  and dtype, from torch's metadata), is imported as a ``ForeignStorage``
  (its range registered with the engine for as long as the Array lives,
  the tensor kept alive); its shape, strides and storage offset are kept,
  so a transposed or sliced torch view reaches the kernels as the same
  strided view;
- out, ``to_torch``: the Array's memory, freshly allocated by minitensor,
  is lent to torch by a DLPack capsule (``torch.utils.dlpack.from_dlpack``)
  that keeps the Array alive until torch frees the tensor.

Which memory: on the CUDA build, torch CUDA tensors of minitensor's GPU
(kDLCUDA); on the emulator, whose kernels run on the host, torch CPU
tensors (kDLCPU). Anything else (a CPU tensor on the CUDA build, a CUDA
tensor under the emulator, float16) is refused with a message naming what
is wrong; nothing is copied silently.

Streams: minitensor queues its work on its current stream, torch on its
own. ``on_torch_stream`` makes torch's current stream minitensor's for the
length of one op, so that the kernels run in order with the torch work
before and after them and neither side has to wait for the other: the
capsule of an export asks for no synchronisation (stream ``-1``), and an
import, which has no stream to name, needs none.

torch is imported here, and this package is imported only by its users:
``import minitensor`` never imports torch.
"""

from __future__ import annotations

from typing import Any

try:
    import torch
    import torch.utils.dlpack
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        "minitensor.torch_ops needs PyTorch (pip install torch); minitensor itself does not depend on it"
    ) from e

from .. import _interop, _lib
from .._array import Array

WHAT = "minitensor.torch_ops"  # how import errors name the caller
# Where minitensor's kernels read: the one GPU of this process (CUDA build), or the host.
_DEVICE_TYPE = "cuda" if _lib.backend_name() == "cuda" else "cpu"
_DEVICE_INDEX = _lib.get_device() if _DEVICE_TYPE == "cuda" else None


# The array interfaces' typestr of each torch dtype minitensor has.
_TYPESTR = {torch.float32: "<f4", torch.float64: "<f8", torch.int64: "<i8", torch.bool: "<b1"}


def to_array(t: torch.Tensor) -> Array:
    """A minitensor Array viewing t's memory (no copy): same shape, strides and offset.

    t describes its memory as an array interface does: the address of its
    first element, its shape, its strides and its dtype, read from torch's
    metadata, and minitensor imports it as it imports a
    ``__cuda_array_interface__`` (or, on the emulator, an
    ``__array_interface__``): the range is registered with the engine and t
    kept alive while the Array lives. The DLPack capsule (``__dlpack__``)
    says the same thing, but opening one costs about as much again through
    ctypes as the rest of the import (docs/torch_ops.md); a tensor that
    requires a gradient is read as it is (a custom op's inputs may).
    """
    if t.device.type != _DEVICE_TYPE or t.device.index != _DEVICE_INDEX:
        device_type, device_id = t.__dlpack_device__()
        _interop._refuse_device(int(device_type), int(device_id), WHAT)  # raises, naming both devices
    typestr = _TYPESTR.get(t.dtype)
    if typestr is None:
        raise TypeError(f"{WHAT}: a {t.dtype} tensor; minitensor's kernels take float32, float64, int64 and bool")
    size = t.element_size()
    interface = {"typestr": typestr, "data": (t.data_ptr(), False), "shape": tuple(t.shape),
                 "strides": tuple(s * size for s in t.stride())}
    return Array(*_interop._from_interface(WHAT, interface, t))


def maybe_array(t: Any) -> Any:
    """to_array(t), or None for None (an optional argument)."""
    return None if t is None else to_array(t)


def to_torch(x: Array) -> torch.Tensor:
    """A torch tensor viewing x's memory (no copy), which keeps x alive."""
    stream = -1 if _DEVICE_TYPE == "cuda" else None  # one stream on both sides: nothing to synchronise
    return torch.utils.dlpack.from_dlpack(_interop.to_dlpack(x, stream=stream))


class on_torch_stream:
    """``with on_torch_stream(t):`` minitensor queues its work on torch's current
    stream of t's device (CUDA), then goes back to its own. On the emulator,
    whose one queue runs everything in order, it does nothing."""

    __slots__ = ("device", "previous")

    def __init__(self, t: torch.Tensor) -> None:
        self.device = t.device
        self.previous: Any = None

    def __enter__(self) -> None:
        if self.device.type != "cuda":
            return
        stream = torch.cuda.current_stream(self.device)
        if stream.cuda_stream != _lib.get_stream():
            self.previous = (_lib.get_stream(), _lib.stream_owner())
            # The torch stream object is the owner: a buffer allocated on the
            # stream is freed on it, so it keeps the stream alive.
            _lib.set_stream(stream.cuda_stream, stream)

    def __exit__(self, *exc: Any) -> None:
        if self.previous is not None:
            _lib.set_stream(*self.previous)
            self.previous = None


def check_float(op: str, **tensors: Any) -> None:
    """Refuses, naming the op and the argument, a tensor whose dtype minitensor's
    kernels lack (they take float32 and float64), or tensors of mixed dtypes."""
    dtypes = {}
    for name, t in tensors.items():
        if t is None:
            continue
        if t.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{op}: {name} is {t.dtype}; minitensor's kernels take torch.float32 or torch.float64")
        dtypes[name] = t.dtype
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{name} {dtype}" for name, dtype in dtypes.items())
        raise TypeError(f"{op}: the tensors must have one dtype, got {listed}")


def empty_like_none(t: torch.Tensor) -> torch.Tensor:
    """The stand-in for a gradient that was not asked for: a custom op returns a
    tensor for every output, so a skipped one is an empty (0,) tensor."""
    return t.new_empty((0,))
