"""_interop: zero-copy exchange with other array libraries, both ways.

Export (an Array lends its memory; ``_array.Array``'s dunder methods call
these):

- CUDA backend: ``__cuda_array_interface__`` (version 3; its "stream" is the
  current stream, on which minitensor queues its work: 1, the legacy default
  stream, unless ``mt.cuda.stream`` chose another) and
  ``__dlpack__`` / ``__dlpack_device__`` as kDLCUDA memory;
- emulator: ``__array_interface__`` (so ``np.asarray(t)`` is a view) and
  ``__dlpack__`` as kDLCPU memory.

Import (``borrow``): from ``__dlpack__`` (torch, CuPy, NumPy, JAX, ...),
``__cuda_array_interface__`` (Numba, CuPy) or ``__array_interface__`` and the
buffer protocol (NumPy, memoryview). The result is the five fields of an
Array over a ``ForeignStorage`` (minitensor/_foreign.py), which keeps the
producer alive and its range registered with the engine. Only memory the
backend's kernels can address is accepted (device memory of minitensor's
GPU for CUDA, host memory for the emulator), only float32, float64, int64
and bool (one byte), and only
layouts an Array can describe: non-negative strides, each a multiple of the
element size, at most MAX_DIMS dims, and a writable buffer. Everything
else raises an error naming what is wrong and how to copy instead
(``mt.tensor(x)``).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _dlpack, _lib
from ._dtype import DType, bool_, float32, float64, int64
from ._errors import DTypeError, InvalidArgumentError, ShapeError
from ._foreign import ForeignStorage
from ._shape import INT64_LIMIT, check_layout
from ._storage import Storage

# DLPack's (type code, bits) and the array interfaces' typestr of each dtype.
_DLPACK = {float32: (_dlpack.FLOAT, 32), float64: (_dlpack.FLOAT, 64), int64: (_dlpack.INT, 64),
           bool_: (_dlpack.BOOL, 8)}
_BY_DLPACK = {code_bits: dtype for dtype, code_bits in _DLPACK.items()}
_TYPESTR = {"<f4": float32, "<f8": float64, "<i8": int64, "<b1": bool_}
_SUPPORTED = "float32, float64, int64 and bool"

COPY_HINT = "use mt.tensor(x) to copy it instead"


def _is_cuda() -> bool:
    return _lib.backend_name() == "cuda"


# ---- export ----------------------------------------------------------------


def _interface(x: Any) -> dict[str, Any]:
    """What NumPy's array interface and the CUDA Array Interface (both version
    3) say alike: shape, typestr, (address, read-only) and strides in bytes."""
    return {
        "shape": x.shape,
        "typestr": x.dtype.np_dtype.str,
        "data": (x.data_ptr() if x.numel() else 0, False),
        "strides": tuple(s * x.dtype.itemsize for s in x.strides),
        "version": 3,
    }


def cuda_array_interface(x: Any) -> dict[str, Any]:
    """The CUDA Array Interface (v3) of x; AttributeError on the emulator, whose
    memory is the host's (so that GPU libraries do not take it for theirs)."""
    if not _is_cuda():
        raise AttributeError(
            "__cuda_array_interface__: the emulator's tensors live in host memory "
            "(np.asarray(t) is a zero-copy view of them)"
        )
    # minitensor's work is queued on the current stream (0 there is the
    # legacy default stream, which the interface spells 1).
    return {**_interface(x), "stream": _lib.get_stream() or 1}


def array_interface(x: Any) -> dict[str, Any]:
    """NumPy's array interface (v3) of x on the emulator; AttributeError on CUDA,
    where np.asarray(t) falls back to ``__array__`` (a copy)."""
    if _is_cuda():
        raise AttributeError("__array_interface__: a CUDA tensor's memory is not host memory")
    return _interface(x)


def dlpack_device(x: Any) -> tuple[int, int]:
    """(kDLCUDA, device index) on CUDA, (kDLCPU, 0) on the emulator."""
    if _is_cuda():
        return (_dlpack.CUDA, _lib.get_device())
    return (_dlpack.CPU, 0)


def to_dlpack(x: Any, stream: Any = None, max_version: Optional[tuple[int, int]] = None,
              dl_device: Optional[tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
    """A DLPack capsule lending x's memory (the Python array API's ``__dlpack__``).

    stream is the consumer's stream (CUDA): None or 1 the legacy default
    stream, 2 the per-thread default stream, -1 no synchronisation, any other
    int a cudaStream_t; minitensor's queued work is ordered before it. The
    capsule is versioned when max_version allows DLPack 1.x.
    """
    device = dlpack_device(x)
    if copy:
        raise BufferError("__dlpack__(copy=True): minitensor exports without copying; use x.clone() first")
    if dl_device is not None and tuple(dl_device) != device:
        raise BufferError(
            f"__dlpack__: cannot export to {_dlpack.device_name(dl_device[0])}:{dl_device[1]}; "
            f"the tensor is on {_dlpack.device_name(device[0])}:{device[1]}"
        )
    if stream is not None and not isinstance(stream, int):
        raise TypeError(f"__dlpack__: stream must be an int or None, got {type(stream).__name__}")
    if device[0] == _dlpack.CUDA:
        if stream == 0:
            raise ValueError("__dlpack__: stream 0 is ambiguous (use 1 for the legacy default stream, 2 per-thread)")
        if stream is not None and stream != -1:
            _lib.stream_wait(stream, _lib.get_stream())  # the consumer's stream waits for minitensor's work
    elif stream is not None:
        raise ValueError(f"__dlpack__: a CPU tensor takes stream=None, got {stream}")
    if x.numel() * x.dtype.itemsize >= INT64_LIMIT:
        # An expanded view can have more elements than an int64 counts bytes
        # of: consumers size arrays in int64 bytes, and would fail on it.
        raise BufferError(
            f"__dlpack__: the view of shape {x.shape} spans {x.numel() * x.dtype.itemsize} bytes, "
            f"more than a consumer can count (2**63); export a smaller view"
        )
    versioned = max_version is not None and tuple(max_version)[0] >= 1
    code, bits = _DLPACK[x.dtype]
    return _dlpack.export(x.data_ptr() if x.numel() else 0, device, bits,
                          x.shape, x.strides, x, versioned, code=code)


# ---- import ---------------------------------------------------------------


def _refuse_device(device_type: int, device_id: int, what: str) -> None:
    """Raises unless memory on (device_type, device_id) is what this backend's kernels can address."""
    name = _dlpack.device_name(device_type)
    if _is_cuda():
        if device_type not in (_dlpack.CUDA, _dlpack.CUDA_MANAGED):
            raise InvalidArgumentError(
                f"{what}: the array is in {name} memory, but minitensor runs on the GPU "
                f"(CUDA backend) and cannot use it without a copy; {COPY_HINT}"
            )
        ours = _lib.get_device()
        if device_id != ours:
            raise InvalidArgumentError(
                f"{what}: the array is on GPU {device_id}, but minitensor uses GPU {ours}; "
                f"move it there first (e.g. x.to('cuda:{ours}'))"
            )
    elif device_type not in (_dlpack.CPU, _dlpack.CUDA_HOST):
        raise InvalidArgumentError(
            f"{what}: the array is in {name} memory, but minitensor runs on the CPU "
            f"emulator and can only use host memory; copy it to the host first "
            f"(torch: x.cpu(), CuPy: x.get()) and pass that"
        )


def _layout(what: str, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int,
            in_bytes: bool) -> tuple[int, ...]:
    """Strides in elements, after refusing what an Array cannot describe."""
    for dim, stride in enumerate(strides):
        if stride < 0 and shape[dim] > 1:
            raise ShapeError(
                f"{what}: stride {stride} of dim {dim} is negative (strides {strides}); minitensor's "
                f"views have non-negative strides: {COPY_HINT}"
            )
        if in_bytes and stride % itemsize:
            raise ShapeError(
                f"{what}: stride {stride} bytes of dim {dim} is not a multiple of the element size "
                f"{itemsize} (strides {strides}); {COPY_HINT}"
            )
    elements = tuple(s // itemsize for s in strides) if in_bytes else tuple(strides)
    # A size-1 dim's stride is never used: make a negative one harmless.
    return tuple(0 if n == 1 and s < 0 else s for n, s in zip(shape, elements))


def _storage_for(what: str, base: int, first: int, shape: tuple[int, ...], strides: tuple[int, ...],
                 dtype: DType, owner: Any, release: Any = None) -> tuple[Storage, int]:
    """A ForeignStorage over [base, end of the view) and the view's offset in it.

    base is where the producer says its memory starts (DLPack's data, before
    byte_offset); the view's first element is at first.
    """
    itemsize = dtype.itemsize
    if first % itemsize:
        raise InvalidArgumentError(
            f"{what}: the first element's address {first:#x} is not aligned to the element size "
            f"{itemsize}; {COPY_HINT}"
        )
    if (first - base) % itemsize:
        base = first  # a byte offset that is not whole elements: start the storage at the view
    offset = (first - base) // itemsize
    span = check_layout(shape, strides, offset, itemsize, what)
    if span == 0:
        if release is not None:
            release()
        return Storage(0), 0
    return ForeignStorage(base, span, owner, release), offset


def _dtype_of_typestr(what: str, typestr: str) -> DType:
    dtype = _TYPESTR.get(typestr.replace("=", "<").replace("|", "<"))
    if dtype is None:
        raise DTypeError(
            f"{what}: unsupported dtype {np.dtype(typestr)} (typestr {typestr!r}); minitensor has "
            f"{_SUPPORTED}: convert it first (e.g. x.astype(np.float32) or x.float())"
        )
    return dtype


Fields = tuple[Storage, tuple[int, ...], tuple[int, ...], int, DType]


def from_dlpack(obj: Any, what: str = "from_dlpack()") -> Fields:
    """The Array fields of a zero-copy view of obj's memory, through ``__dlpack__``."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"{what}: {type(obj).__name__} has no __dlpack__ method")
    if hasattr(obj, "__dlpack_device__"):
        device_type, device_id = obj.__dlpack_device__()
        _refuse_device(int(device_type), int(device_id), what)
    # The consumer's stream: minitensor queues its work on the current stream
    # (the legacy default stream, 1, unless mt.cuda.stream changed it); a CPU
    # producer takes None.
    stream = (_lib.get_stream() or 1) if _is_cuda() else None
    try:
        capsule = obj.__dlpack__(stream=stream, max_version=_dlpack.VERSION)
    except TypeError:  # a producer older than DLPack 1.0 knows no max_version
        capsule = obj.__dlpack__(stream=stream)
    borrowed = _dlpack.Borrowed(capsule)
    _refuse_device(*borrowed.device, what)
    dtype = _BY_DLPACK.get((borrowed.code, borrowed.bits)) if borrowed.lanes == 1 else None
    if dtype is None:
        raise DTypeError(
            f"{what}: unsupported dtype {borrowed.dtype_name()}; minitensor has {_SUPPORTED}: "
            f"convert it first (e.g. x.float() or x.astype(np.float32))"
        )
    if borrowed.read_only:
        raise InvalidArgumentError(
            f"{what}: the array is read-only, and minitensor's tensors are writable; {COPY_HINT}"
        )
    shape = borrowed.shape
    strides = borrowed.strides
    if strides is None:  # C-contiguous
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
    strides = _layout(what, shape, strides, dtype.itemsize, in_bytes=False)
    borrowed.take()  # from here on, the deleter is ours to call
    try:
        storage, offset = _storage_for(what, borrowed.data, borrowed.data + borrowed.byte_offset, shape,
                                       strides, dtype, obj, borrowed.release)
    except BaseException:
        borrowed.release()  # once only: a ForeignStorage that failed may have called it
        raise
    return storage, shape, strides, offset, dtype


def from_cuda_array_interface(obj: Any, what: str = "asarray()") -> Fields:
    """The Array fields of a zero-copy view of a ``__cuda_array_interface__`` producer."""
    cai = obj.__cuda_array_interface__
    if not _is_cuda():
        _refuse_device(_dlpack.CUDA, 0, what)
    if cai.get("mask") is not None:
        raise InvalidArgumentError(f"{what}: masked arrays (a 'mask' in __cuda_array_interface__) are not supported")
    stream = cai.get("stream")
    if stream == 0:
        raise InvalidArgumentError(f"{what}: __cuda_array_interface__ has stream 0, which the interface disallows")
    if stream is not None:
        _lib.stream_wait(_lib.get_stream(), int(stream))  # minitensor's next work waits for the producer's
    return _from_interface(what, cai, obj)


def from_array_interface(obj: Any, what: str = "asarray()") -> Fields:
    """The Array fields of a zero-copy view of host memory (array interface or buffer protocol)."""
    _refuse_device(_dlpack.CPU, 0, what)
    view = np.asarray(obj)  # a view: obj exposes its memory (checked by the caller)
    return _from_interface(what, view.__array_interface__, view)


def _from_interface(what: str, interface: dict[str, Any], owner: Any) -> Fields:
    """Shared by both interfaces: they describe memory the same way (byte strides)."""
    dtype = _dtype_of_typestr(what, interface["typestr"])
    data, read_only = interface["data"]
    if read_only:
        raise InvalidArgumentError(
            f"{what}: the array is read-only, and minitensor's tensors are writable; {COPY_HINT}"
        )
    shape = tuple(int(n) for n in interface["shape"])
    strides = interface.get("strides")
    if strides is None:
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize for i in range(len(shape)))
    strides = _layout(what, shape, tuple(int(s) for s in strides), dtype.itemsize, in_bytes=True)
    storage, offset = _storage_for(what, data or 0, data or 0, shape, strides, dtype, owner)
    return storage, shape, strides, offset, dtype


def _exposes_buffer(obj: Any) -> bool:
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True


def borrow(obj: Any, what: str = "asarray()") -> Fields:
    """The Array fields of a zero-copy view of obj, through the first protocol
    it has of: DLPack, the CUDA Array Interface, the array interface or the
    buffer protocol. TypeError when it has none (a list, a number)."""
    refused: Optional[BufferError] = None
    if hasattr(obj, "__dlpack__"):
        try:
            return from_dlpack(obj, what)
        except BufferError as e:
            # The producer would not export it (NumPy refuses byte-swapped or
            # oddly strided arrays): its array interface gets the precise error.
            refused = e
    if hasattr(obj, "__cuda_array_interface__"):
        return from_cuda_array_interface(obj, what)
    if hasattr(obj, "__array_interface__") or _exposes_buffer(obj):
        return from_array_interface(obj, what)
    if refused is not None:
        raise InvalidArgumentError(f"{what}: {type(obj).__name__}.__dlpack__ refused: {refused}") from None
    raise TypeError(
        f"{what}: a {type(obj).__name__} exposes no memory to share (no __dlpack__, "
        f"__cuda_array_interface__, __array_interface__ or buffer); use mt.tensor(x) to copy it"
    )


def stream_handle(obj: Any, func: str) -> int:
    """The raw cudaStream_t value of a stream in any of its spellings: None (the
    default stream, 0), a raw int, or an object with ``.cuda_stream`` (torch,
    minitensor's Stream) or ``.ptr`` (CuPy)."""
    if obj is None:
        return 0
    if isinstance(obj, bool):
        raise TypeError(f"{func}: expected a stream, got a bool")
    if isinstance(obj, int):
        if obj < 0:
            raise InvalidArgumentError(f"{func}: a stream handle is not negative, got {obj}")
        return obj
    for attr in ("cuda_stream", "ptr"):  # torch and minitensor, CuPy
        value = getattr(obj, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    raise TypeError(
        f"{func}: expected a minitensor Stream, an object with .cuda_stream (torch) or .ptr (CuPy), "
        f"or a raw cudaStream_t int, got {type(obj).__name__}")


def device_name() -> str:
    """The one device of this process, as ``Tensor.device`` spells it: "cuda:N" or "cpu-emulator"."""
    return f"cuda:{_lib.get_device()}" if _is_cuda() else "cpu-emulator"


def check_device(here: str, device: Any, func: str = "to()") -> None:
    """device (a string or an object with ``.type``, as torch.device) names the
    device here (a tensor's .device, for Tensor.to; device_name() for a new
    tensor), else a RuntimeError, naming func, saying where this process
    keeps its tensors."""
    name = str(device if isinstance(device, str) else getattr(device, "type", device))
    kind, _, index = name.partition(":")
    if kind in ("cpu", "cpu-emulator") and here == "cpu-emulator":
        return
    if kind == "cuda" and here.startswith("cuda") and (not index or f"cuda:{index}" == here):
        return
    if kind not in ("cpu", "cpu-emulator", "cuda"):
        raise RuntimeError(f"{func}: unknown device {name!r} (minitensor knows 'cpu' and 'cuda')")
    hint = ("a host copy is .numpy()" if here.startswith("cuda") else
            "run on a machine with a GPU and the CUDA build, where tensors live on 'cuda'")
    verb = "move one to" if func.endswith("to()") else "put one on"  # Tensor.to, Module.to; or a new tensor
    raise RuntimeError(f"{func}: this process keeps every tensor on {here}; it cannot {verb} {name} ({hint})")
