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
exchange in either direction names no stream and synchronises nothing.

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

from .. import _dlpack, _interop, _lib
from .._array import Array
from .._dtype import bool_, float32, float64, int64
from .._foreign import ForeignStorage
from .._storage import Storage

WHAT = "minitensor.torch_ops"  # how import errors name the caller
# Where minitensor's kernels read: the one GPU of this process (CUDA build), or the host.
_DEVICE_TYPE = "cuda" if _lib.backend_name() == "cuda" else "cpu"
_DEVICE_INDEX = _lib.get_device() if _DEVICE_TYPE == "cuda" else None
_DLPACK_DEVICE = (_dlpack.CUDA, _DEVICE_INDEX) if _DEVICE_TYPE == "cuda" else (_dlpack.CPU, 0)


# minitensor's dtype of each torch dtype it has.
_DTYPES = {torch.float32: float32, torch.float64: float64, torch.int64: int64, torch.bool: bool_}


def to_array(t: torch.Tensor) -> Array:
    """A minitensor Array viewing t's memory (no copy): same shape, strides and offset.

    t describes its memory as the array interfaces do: the address of its
    first element, its shape, its strides (in elements) and its dtype, read
    from torch's metadata. The Array's storage is a ``ForeignStorage`` over
    the bytes the view can reach, from its first element on: registered
    with the engine and keeping t alive while the Array lives, as any import
    (minitensor/_foreign.py). Nothing else needs checking: torch's strides
    are never negative, are counted in elements, and fit in int64 bytes.
    The DLPack capsule (``__dlpack__``) would say the same, but opening one
    through ctypes and going through the general importer's checks cost
    more than the rest (docs/torch_ops.md). A tensor that requires a
    gradient is read as it is (a custom op's inputs may).
    """
    if t.device.type != _DEVICE_TYPE or t.device.index != _DEVICE_INDEX:
        device_type, device_id = t.__dlpack_device__()
        _interop._refuse_device(int(device_type), int(device_id), WHAT)  # raises, naming both devices
    dtype = _DTYPES.get(t.dtype)
    if dtype is None:
        raise TypeError(f"{WHAT}: a {t.dtype} tensor; minitensor's kernels take float32, float64, int64 and bool")
    shape, strides = tuple(t.shape), t.stride()
    if t.numel() == 0:
        return Array(Storage(0), shape, strides, 0, dtype)
    last = sum((n - 1) * s for n, s in zip(shape, strides))  # the farthest element from the first
    return Array(ForeignStorage(t.data_ptr(), (last + 1) * dtype.itemsize, t), shape, strides, 0, dtype)


def maybe_array(t: Any) -> Any:
    """to_array(t), or None for None (an optional argument)."""
    return None if t is None else to_array(t)


def to_torch(x: Array) -> torch.Tensor:
    """A torch tensor viewing x's memory (no copy), which keeps x alive.

    The capsule is what ``x.__dlpack__()`` makes, less the checks a result
    of an op never needs (it is new, on this device, and its stream is
    torch's: nothing to synchronise)."""
    code, bits = _interop._DLPACK[x.dtype]  # DLPack's (type code, bits) of the dtype
    capsule = _dlpack.export(x.data_ptr() if x.numel() else 0, _DLPACK_DEVICE, bits, x.shape, x.strides, x,
                             False, code=code)
    return torch.utils.dlpack.from_dlpack(capsule)


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
