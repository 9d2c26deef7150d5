"""_lib: the ctypes binding of the C engine (src/minitensor.h).

This is the module that binds the engine through ctypes (_dlpack.py, the
other user of ctypes, binds only DLPack's structs). It

- finds the shared library by a path relative to this file
  (``<repo>/build/libminitensor_cuda.so`` or ``libminitensor_emu.so``); the
  environment variable ``MINITENSOR_LIB`` overrides it with a full path;
- chooses the backend lazily, on the first call that needs the engine, so
  that ``import minitensor`` never initialises CUDA:
  ``MINITENSOR_BACKEND=cuda`` or ``=emulator`` forces one; otherwise the CUDA
  build is used when it exists and ``mt_init`` finds a usable GPU, else the
  emulator build;
- declares argtypes and restype for every function of the header
  (``SIGNATURES``; tests/test_binding.py checks them against the header);
- checks the ABI version and the maximum rank when it loads the library,
  reads the op-id tables from it (``mt_op_name``; ``op_names(family)``) and
  checks that every op the package calls is there (``REQUIRED_OPS``);
- turns a failed mt_status into an exception carrying ``mt_last_error()``.

The wrappers at the bottom take arrays (minitensor/_array.py; a Tensor is
one) and op names; each array hands over its ``mt_tensor`` descriptor
(``descriptor()``) and the wrapper calls the engine. They validate nothing
themselves: minitensor/ops.py checks arguments before calling, and the C
library checks them again.
"""

from __future__ import annotations

import ctypes
import threading
import os
from ctypes import (
    POINTER,
    Structure,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_void_p,
)
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ._errors import (
    CudaError,
    DimError,
    DTypeError,
    InvalidArgumentError,
    MinitensorError,
    NoDeviceError,
    OutOfMemoryError,
    ShapeError,
    TaskNotDoneError,
)

# ---- what this binding was written against (checked at load) -------------

ABI_VERSION = 21
MAX_DIMS = 8

# mt_status values -> exception class. MT_OK (0) is success.
MT_OK = 0
# MT_ERR_INTERRUPTED is Python's own KeyboardInterrupt: Ctrl-C stopped an op.
STATUS_ERRORS: dict[int, type[BaseException]] = {
    1: InvalidArgumentError,  # MT_ERR_INVALID_ARGUMENT
    2: ShapeError,  # MT_ERR_SHAPE
    3: DimError,  # MT_ERR_DIM
    4: DTypeError,  # MT_ERR_DTYPE
    5: OutOfMemoryError,  # MT_ERR_OUT_OF_MEMORY
    6: CudaError,  # MT_ERR_CUDA
    7: NoDeviceError,  # MT_ERR_NO_DEVICE
    8: KeyboardInterrupt,  # MT_ERR_INTERRUPTED
    9: TaskNotDoneError,  # MT_ERR_NOT_IMPLEMENTED
}

# mt_dtype values.
MT_FLOAT32 = 0
MT_FLOAT64 = 1
MT_INT64 = 2
MT_BOOL = 3

# mt_kernel_policy values, by name (set_kernel_policy, minitensor.kernels.set_policy).
KERNEL_POLICIES: dict[str, int] = {"fast": 0, "teaching": 1}

# The op families of the header. mt_op_name(family, id) names each id of
# the family's enum and returns NULL past the last one: the binding reads the
# tables from the library when it loads it (see op_names), so the names are
# written once, in src/. MATMUL, REDUCE_ALGO and COPY_ALGO are the kernel
# ladders (mt_matmul_algo, mt_reduce_algo, mt_copy_algo).
OP_FAMILIES: tuple[str, ...] = ("map", "zip", "reduce", "matmul", "reduce_algo", "copy_algo")

# The op names that minitensor's Python layers call. The library must have
# each (checked at load, with an error naming what is missing); it may have
# more (a new rung of a ladder needs no change here).
REQUIRED_OPS: dict[str, tuple[str, ...]] = {
    "map": (
        "copy", "neg", "exp", "log", "relu", "sigmoid", "tanh", "abs", "sqrt",
        "reciprocal", "sign", "add_scalar", "mul_scalar", "pow_scalar", "rpow_scalar", "softplus", "erf",
    ),
    "zip": (
        "add", "sub", "mul", "div", "pow", "maximum", "minimum",
        "eq", "ne", "lt", "le", "gt", "ge", "relu_backward",
        "bitwise_and", "bitwise_or", "bitwise_xor", "floor_divide", "remainder",
    ),
    "reduce": ("sum", "prod", "max", "min", "argmax", "argmin"),
    "matmul": ("default",),
    "reduce_algo": ("default",),
    "copy_algo": ("default",),
}


class MtTensor(Structure):
    """Mirror of ``mt_tensor``: a strided view of device memory, by value."""

    _fields_ = [
        ("data", c_void_p),
        ("offset", c_int64),
        ("dtype", c_int32),
        ("ndim", c_int32),
        ("shape", c_int64 * MAX_DIMS),
        ("strides", c_int64 * MAX_DIMS),
    ]


# Descriptors by (dtype, shape, strides), without their pointer and offset: a
# new tensor's descriptor is a 128-byte copy of one of these and two stores,
# a quarter of the time ctypes takes to build one from tuples.
_DESCRIPTOR_BYTES: dict[tuple[int, tuple[int, ...], tuple[int, ...]], bytes] = {}


def make_descriptor(ptr: int, offset: int, dtype_code: int, shape: tuple[int, ...],
                    strides: tuple[int, ...]) -> MtTensor:
    """The mt_tensor of a view: address, offset (elements), dtype, shape, strides."""
    key = (dtype_code, shape, strides)
    raw = _DESCRIPTOR_BYTES.get(key)
    if raw is None:
        if len(_DESCRIPTOR_BYTES) >= 1024:
            _DESCRIPTOR_BYTES.clear()
        raw = _DESCRIPTOR_BYTES[key] = bytes(MtTensor(0, 0, dtype_code, len(shape), shape, strides))
    d = MtTensor.from_buffer_copy(raw)
    d.data = ptr
    d.offset = offset
    return d


# Every function of src/minitensor.h: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_abi_version": (c_int, []),
    "mt_max_dims": (c_int, []),
    "mt_op_count": (c_int, [c_char_p]),
    "mt_op_name": (c_char_p, [c_char_p, c_int]),
    "mt_backend_name": (c_char_p, []),
    "mt_last_error": (c_char_p, []),
    "mt_init": (c_int, []),
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
    "mt_malloc": (c_int, [POINTER(c_void_p), c_size_t]),
    "mt_free": (c_int, [c_void_p]),
    "mt_memory_in_use": (c_int, [POINTER(c_int64)]),
    "mt_register_buffer": (c_int, [c_void_p, c_size_t]),
    "mt_grow_buffer": (c_int, [c_void_p, c_size_t]),
    "mt_unregister_buffer": (c_int, [c_void_p]),
    "mt_find_allocation": (c_int, [c_void_p, POINTER(c_void_p), POINTER(c_size_t)]),
    "mt_memcpy_h2d": (c_int, [c_void_p, c_void_p, c_size_t]),
    "mt_memcpy_d2h": (c_int, [c_void_p, c_void_p, c_size_t]),
    "mt_memcpy_d2d": (c_int, [c_void_p, c_void_p, c_size_t]),
    "mt_map": (c_int, [c_int, MtTensor, MtTensor, c_double]),
    "mt_fill": (c_int, [MtTensor, c_double]),
    "mt_zip": (c_int, [c_int, MtTensor, MtTensor, MtTensor]),
    "mt_reduce": (c_int, [c_int, MtTensor, MtTensor, c_int]),
    "mt_reduce_all": (c_int, [c_int, MtTensor, MtTensor]),
    "mt_matmul": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
    "mt_matmul_config_count": (c_int, []),
    "mt_matmul_config_name": (c_char_p, [c_int]),
    "mt_matmul_with_config": (c_int, [MtTensor, MtTensor, MtTensor, c_int, c_int]),
    "mt_matmul_tf32": (c_int, [MtTensor, MtTensor, MtTensor]),
    "mt_matmul_tf32_rung": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
    "mt_reduce_variant": (c_int, [c_int, MtTensor, MtTensor, c_int, c_int]),
    "mt_copy_variant": (c_int, [MtTensor, MtTensor, c_int]),
    "mt_softmax": (c_int, [MtTensor, MtTensor, c_int, c_int]),
    "mt_softmax_backward": (c_int, [MtTensor, MtTensor, MtTensor, c_int, c_int, c_double]),
    "mt_masked_softmax": (c_int, [MtTensor, MtTensor, MtTensor, c_double, c_int]),
    "mt_layer_norm": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_int, c_double]),
    "mt_layer_norm_backward": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor,
                                       MtTensor, c_int, c_int]),
    "mt_where": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor]),
    "mt_logsumexp": (c_int, [MtTensor, MtTensor, c_int]),
    "mt_attention": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_double, c_int]),
    "mt_attention_backward": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor,
                                      MtTensor, MtTensor, c_double, c_int]),
    "mt_conv2d": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, c_int, c_int, c_int, c_int, c_int, c_int, c_int,
                          c_int]),
    "mt_cross_entropy": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, c_int]),
    "mt_cross_entropy_backward": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_double, c_int]),
    "mt_sgd_step": (c_int, [MtTensor, MtTensor, MtTensor, c_double, c_double, c_double, c_int]),
    "mt_adam_step": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, c_double, c_double, c_double, c_double,
                             c_double, c_int64, c_int]),
    "mt_gather": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
    "mt_scatter_add": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
    "mt_set_kernel_policy": (c_int, [c_int]),
    "mt_get_kernel_policy": (c_int, []),
    "mt_launch_count": (c_int64, [c_char_p, c_char_p]),
    "mt_reset_launch_counts": (None, []),
    "mt_set_device": (c_int, [c_int]),
    "mt_get_device": (c_int, [POINTER(c_int)]),
}

# ---- finding and loading the library --------------------------------------

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "build"
CUDA_LIB_PATH = BUILD_DIR / "libminitensor_cuda.so"
EMU_LIB_PATH = BUILD_DIR / "libminitensor_emu.so"
BACKENDS = ("cuda", "emulator")


def check_built() -> None:
    """Raises ImportError when no engine library can be found.

    Called by ``import minitensor``. It only looks at files: loading the
    library and initialising the device wait for the first use.
    """
    override = os.environ.get("MINITENSOR_LIB")
    if override:
        if not Path(override).is_file():
            raise ImportError(
                f"minitensor: MINITENSOR_LIB={override} does not exist; unset it to use "
                f"the libraries built under {BUILD_DIR}"
            )
        return
    if not CUDA_LIB_PATH.is_file() and not EMU_LIB_PATH.is_file():
        raise ImportError(
            f"minitensor: the engine library is not built (no {EMU_LIB_PATH.name} or "
            f"{CUDA_LIB_PATH.name} in {BUILD_DIR}); run `make` in {REPO_ROOT} to build it"
        )


def load_library(path: Path, signatures: dict[str, tuple[Any, list[Any]]], who: str,
                 mode: int = ctypes.DEFAULT_MODE) -> ctypes.CDLL:
    """dlopens path and sets argtypes and restype of every function in signatures.

    who names the package part in the ImportError raised when the file cannot
    be loaded or lacks a function (minitensor/distributed loads its own
    library through this too).
    """
    try:
        lib = ctypes.CDLL(str(path), mode=mode)
    except OSError as e:
        raise ImportError(f"{who}: cannot load {path}: {e}") from None
    for name, (restype, argtypes) in signatures.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise ImportError(f"{who}: {path} does not export {name}") from None
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def check_abi(who: str, path: Any, found: int, expected: int, rebuild: str) -> None:
    """ImportError when a library's ABI version is not the one this package was written against."""
    if found != expected:
        raise ImportError(
            f"{who}: {path} has ABI version {found}, but the Python package expects "
            f"{expected}; rebuild with `{rebuild}` or update the package"
        )


def read_names(name_of: Any, count: Optional[int] = None) -> tuple[str, ...]:
    """The names name_of(0), name_of(1), ... up to count, or up to the first NULL."""
    names: list[str] = []
    while count is None or len(names) < count:
        raw = name_of(len(names))
        if raw is None:
            break
        names.append(raw.decode())
    return tuple(names)


def _read_op_tables(lib: ctypes.CDLL) -> dict[str, tuple[str, ...]]:
    """family -> the op names of the library, in id order (position = id)."""
    return {family: read_names(lambda i, f=family.encode(): lib.mt_op_name(f, i)) for family in OP_FAMILIES}


def _verify(lib: ctypes.CDLL) -> None:
    """Checks the library's ABI version and max rank, and that it has every op
    the package calls (REQUIRED_OPS)."""
    path = lib._name
    check_abi("minitensor", path, lib.mt_abi_version(), ABI_VERSION, "make")
    max_dims = lib.mt_max_dims()
    if max_dims != MAX_DIMS:
        raise ImportError(f"minitensor: {path} has MT_MAX_DIMS={max_dims}, expected {MAX_DIMS}")
    tables = _read_op_tables(lib)
    for family, names in REQUIRED_OPS.items():
        missing = [name for name in names if name not in tables[family]]
        if missing:
            raise ImportError(
                f"minitensor: {path} has no {family} op {missing[0]!r} (its {family} ops are "
                f"{', '.join(tables[family]) or 'none'}); rebuild with `make` or update the package"
            )


def _open(path: Path) -> ctypes.CDLL:
    """dlopens one library, declares its functions and verifies it."""
    lib = load_library(path, SIGNATURES, "minitensor")
    _verify(lib)
    return lib


def _init_message(lib: ctypes.CDLL) -> str:
    return lib.mt_last_error().decode(errors="replace")


_LIB: Optional[ctypes.CDLL] = None


def _choose() -> ctypes.CDLL:
    """Picks, loads and initialises the library (the first use)."""
    override = os.environ.get("MINITENSOR_LIB")
    forced = os.environ.get("MINITENSOR_BACKEND", "").strip().lower()
    if forced not in ("",) + BACKENDS:
        raise ValueError(
            f"MINITENSOR_BACKEND={forced!r} is not one of 'cuda', 'emulator' (or unset)"
        )
    if override:
        lib = _open(Path(override))
        status = lib.mt_init()
        _raise_unless_device_missing(lib, status)
        if status != MT_OK:
            raise NoDeviceError(f"minitensor: mt_init failed for {override}: {_init_message(lib)}")
        return lib
    if forced == "emulator":
        if not EMU_LIB_PATH.is_file():
            raise ImportError(f"minitensor: {EMU_LIB_PATH} is not built; run `make` in {REPO_ROOT}")
        return _init_emulator()
    if forced == "cuda":
        if not CUDA_LIB_PATH.is_file():
            raise NoDeviceError(
                f"MINITENSOR_BACKEND=cuda, but {CUDA_LIB_PATH} is not built "
                f"(it needs nvcc); run `make` in {REPO_ROOT} on a machine with the CUDA toolkit"
            )
        lib = _open(CUDA_LIB_PATH)
        status = lib.mt_init()
        _raise_unless_device_missing(lib, status)
        if status != MT_OK:
            raise NoDeviceError(
                f"MINITENSOR_BACKEND=cuda, but no usable GPU was found: {_init_message(lib)}. "
                f"Unset MINITENSOR_BACKEND (or set it to 'emulator') to run on the CPU emulator"
            )
        return lib
    # Automatic: the CUDA build when it exists and a GPU is usable.
    if CUDA_LIB_PATH.is_file():
        try:
            lib = _open(CUDA_LIB_PATH)
        except ImportError:
            lib = None  # e.g. the CUDA runtime is missing: use the emulator
        if lib is not None:
            status = lib.mt_init()
            _raise_unless_device_missing(lib, status)
            if status == MT_OK:
                return lib
    if not EMU_LIB_PATH.is_file():
        raise NoDeviceError(
            f"minitensor: the CUDA build found no usable GPU and {EMU_LIB_PATH} is not built; "
            f"run `make` in {REPO_ROOT}"
        )
    return _init_emulator()


def _init_emulator() -> ctypes.CDLL:
    lib = _open(EMU_LIB_PATH)
    status = lib.mt_init()
    _raise_unless_device_missing(lib, status)
    if status != MT_OK:
        raise MinitensorError(f"minitensor: the emulator failed to start: {_init_message(lib)}")
    return lib


def _raise_unless_device_missing(lib: ctypes.CDLL, status: int) -> None:
    """A failed mt_init that is not "no device" is the caller's mistake (a
    MINITENSOR_KERNELS value that is not a policy): raise it as it is, rather
    than try another backend."""
    if status not in (MT_OK, 7):  # 7: MT_ERR_NO_DEVICE
        raise_status(status, "mt_init", lib.mt_last_error())


# family -> {op name: op id}, read from the library when it is loaded.
_OP_IDS: dict[str, dict[str, int]] = {}


def lib() -> ctypes.CDLL:
    """The loaded, initialised engine library (chosen on the first call)."""
    global _LIB
    if _LIB is None:
        chosen = _choose()
        for family, names in _read_op_tables(chosen).items():
            _OP_IDS[family] = {name: op_id for op_id, name in enumerate(names)}
        _LIB = chosen
    return _LIB


def is_loaded() -> bool:
    """Whether the engine has been loaded yet (import alone does not)."""
    return _LIB is not None


def raise_status(status: int, func: str, last_error: Optional[bytes],
                 errors: dict[int, type[BaseException]] = STATUS_ERRORS,
                 default: type[MinitensorError] = MinitensorError) -> None:
    """Raises the exception that errors maps a failed status to, carrying the
    library's last error message (which already names the C function and the
    argument)."""
    message = (last_error or b"").decode(errors="replace") or f"{func} failed (no message)"
    raise errors.get(status, default)(message)


def check(status: int, func: str) -> None:
    """Raises the exception for a failed status, with the library's message."""
    if status != MT_OK:
        raise_status(status, func, lib().mt_last_error())


def op_names(family: str) -> tuple[str, ...]:
    """The op names of one family ("map", "zip", "reduce", "matmul", "reduce_algo",
    "copy_algo"), in id order, as the loaded library reports them."""
    lib()
    if family not in _OP_IDS:
        raise ValueError(f"unknown op family {family!r}; one of {', '.join(OP_FAMILIES)}")
    return tuple(_OP_IDS[family])


# The tables under the names the package used before they were read from the
# library (_lib.MATMUL_ALGOS, ...): computed on access (PEP 562).
_TABLE_NAMES = {
    "MAP_OPS": "map",
    "ZIP_OPS": "zip",
    "REDUCE_OPS": "reduce",
    "MATMUL_ALGOS": "matmul",
    "REDUCE_ALGOS": "reduce_algo",
    "COPY_ALGOS": "copy_algo",
}


def __getattr__(name: str) -> tuple[str, ...]:
    if name in _TABLE_NAMES:
        return op_names(_TABLE_NAMES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- library information ---------------------------------------------------


def backend_name() -> str:
    """'cuda' or 'emulator'."""
    return lib().mt_backend_name().decode()


def device_info() -> str:
    buf = ctypes.create_string_buffer(512)
    check(lib().mt_device_info(buf, len(buf)), "mt_device_info")
    return buf.value.decode(errors="replace")


def device_key() -> str:
    """A short key for the current device ("<name>|sm_90|132sm"), cached in C."""
    buf = ctypes.create_string_buffer(512)
    check(lib().mt_device_key(buf, len(buf)), "mt_device_key")
    return buf.value.decode(errors="replace")


def set_sync_debug(on: bool) -> None:
    check(lib().mt_set_sync_debug(1 if on else 0), "mt_set_sync_debug")


def synchronize() -> None:
    check(lib().mt_synchronize(), "mt_synchronize")


# ---- streams and events (raw cudaStream_t / cudaEvent_t values; 0 is the
# legacy default stream) --------------------------------------------------------


def stream_wait(waiting: int, done: int) -> None:
    """Work queued on stream `waiting` from now on waits for the work queued on
    `done` so far."""
    check(lib().mt_stream_wait(waiting or None, done or None), "mt_stream_wait")


# The current stream lives in C, per thread (mt_set_stream); this mirror of it
# answers get_stream without a call, since every change goes through here.
_current_stream = threading.local()


def set_stream(stream: int, owner: Any = None) -> None:
    """Makes `stream` this thread's current stream: every op queues on it.
    owner is the Python object of another library's stream (torch's, CuPy's),
    which every allocation made on it keeps alive (stream_owner)."""
    check(lib().mt_set_stream(stream or None), "mt_set_stream")
    _current_stream.handle = stream or 0
    _current_stream.owner = owner


def stream_owner() -> Any:
    """The foreign stream object behind the current stream, or None. A buffer
    is freed on the stream it was allocated on, so a buffer allocated on a
    foreign stream keeps that stream's object (and the stream) alive."""
    return getattr(_current_stream, "owner", None)


def get_stream() -> int:
    """This thread's current stream (0: the legacy default stream)."""
    return getattr(_current_stream, "handle", 0)


def stream_create() -> int:
    out = c_void_p()
    check(lib().mt_stream_create(ctypes.byref(out)), "mt_stream_create")
    return out.value or 0


def stream_destroy(stream: int) -> None:
    check(lib().mt_stream_destroy(stream or None), "mt_stream_destroy")
    if get_stream() == stream:  # C made the default stream current again
        _current_stream.handle = 0
        _current_stream.owner = None


def stream_synchronize(stream: int) -> None:
    check(lib().mt_stream_synchronize(stream or None), "mt_stream_synchronize")


def stream_query(stream: int) -> bool:
    done = c_int()
    check(lib().mt_stream_query(stream or None, ctypes.byref(done)), "mt_stream_query")
    return bool(done.value)


def event_create(timing: bool) -> int:
    out = c_void_p()
    check(lib().mt_event_create(ctypes.byref(out), 1 if timing else 0), "mt_event_create")
    return out.value or 0


def event_destroy(event: int) -> None:
    check(lib().mt_event_destroy(event or None), "mt_event_destroy")


def event_record(event: int, stream: int) -> None:
    check(lib().mt_event_record(event or None, stream or None), "mt_event_record")


def event_synchronize(event: int) -> None:
    check(lib().mt_event_synchronize(event or None), "mt_event_synchronize")


def event_query(event: int) -> bool:
    done = c_int()
    check(lib().mt_event_query(event or None, ctypes.byref(done)), "mt_event_query")
    return bool(done.value)


def event_elapsed(start: int, end: int) -> float:
    ms = ctypes.c_float()
    check(lib().mt_event_elapsed(ctypes.byref(ms), start or None, end or None), "mt_event_elapsed")
    return ms.value


def stream_wait_event(stream: int, event: int) -> None:
    check(lib().mt_stream_wait_event(stream or None, event or None), "mt_stream_wait_event")


def graph_capture_begin(stream: int) -> None:
    check(lib().mt_graph_capture_begin(stream or None), "mt_graph_capture_begin")
    _current_stream.capturing = True


def graph_capture_end(stream: int) -> int:
    out = c_void_p()
    _current_stream.capturing = False
    check(lib().mt_graph_capture_end(stream or None, ctypes.byref(out)), "mt_graph_capture_end")
    return out.value or 0


def graph_capture_abort() -> None:
    _current_stream.capturing = False
    check(lib().mt_graph_capture_abort(), "mt_graph_capture_abort")


def capturing() -> bool:
    """Whether this thread is capturing a CUDA graph (mt.cuda.graph)."""
    return getattr(_current_stream, "capturing", False)


def graph_replay(graph: int, stream: int) -> None:
    check(lib().mt_graph_replay(graph or None, stream or None), "mt_graph_replay")


def graph_destroy(graph: int) -> None:
    check(lib().mt_graph_destroy(graph or None), "mt_graph_destroy")


def record_stream(ptr: int, stream: int) -> None:
    """The buffer at ptr is used on `stream` too; its free waits for that work."""
    check(lib().mt_record_stream(ptr or None, stream or None), "mt_record_stream")


# ---- memory -----------------------------------------------------------------


def malloc(nbytes: int) -> int:
    """Allocates nbytes of device memory; returns the address."""
    ptr = c_void_p()
    check(lib().mt_malloc(ctypes.byref(ptr), nbytes), "mt_malloc")
    if ptr.value is None:
        raise OutOfMemoryError(f"mt_malloc: returned a null pointer for {nbytes} bytes")
    return ptr.value


def free(ptr: int) -> None:
    check(lib().mt_free(ptr), "mt_free")


def memory_in_use() -> int:
    nbytes = c_int64()
    check(lib().mt_memory_in_use(ctypes.byref(nbytes)), "mt_memory_in_use")
    return nbytes.value


def register_buffer(ptr: int, nbytes: int) -> None:
    """Makes memory the library did not allocate known to it (mt_register_buffer)."""
    check(lib().mt_register_buffer(ptr, nbytes), "mt_register_buffer")


def grow_buffer(ptr: int, nbytes: int) -> None:
    """Registers [ptr, ptr + nbytes) in place of the registered buffers inside it, in one step."""
    check(lib().mt_grow_buffer(ptr, nbytes), "mt_grow_buffer")


def unregister_buffer(ptr: int) -> None:
    check(lib().mt_unregister_buffer(ptr), "mt_unregister_buffer")


def find_allocation(ptr: int) -> Optional[tuple[int, int]]:
    """(start, nbytes) of the known buffer holding ptr, or None if there is none."""
    base, nbytes = c_void_p(), c_size_t()
    if lib().mt_find_allocation(ptr, ctypes.byref(base), ctypes.byref(nbytes)) != MT_OK:
        return None
    return base.value or 0, nbytes.value


def memcpy_h2d(dst: int, src: np.ndarray) -> None:
    """Copies a C-contiguous host array to device address dst."""
    assert src.flags.c_contiguous
    check(lib().mt_memcpy_h2d(dst, src.ctypes.data, src.nbytes), "mt_memcpy_h2d")


def memcpy_d2h(dst: np.ndarray, src: int) -> None:
    """Fills a C-contiguous host array from device address src."""
    assert dst.flags.c_contiguous and dst.flags.writeable
    check(lib().mt_memcpy_d2h(dst.ctypes.data, src, dst.nbytes), "mt_memcpy_d2h")


def memcpy_d2d(dst: int, src: int, nbytes: int) -> None:
    check(lib().mt_memcpy_d2d(dst, src, nbytes), "mt_memcpy_d2d")


# ---- kernels ------------------------------------------------------------------


def _op_id(family: str, name: str) -> int:
    op_id = _OP_IDS[family].get(name)  # filled by lib(), which every wrapper calls first
    if op_id is None:
        raise ValueError(f"unknown {family} op {name!r}")
    return op_id


def map_(op: str, out: Any, inp: Any, scalar: float = 0.0) -> None:
    """out = op(inp, scalar), elementwise (mt_map)."""
    status = lib().mt_map(_op_id("map", op), out.descriptor(), inp.descriptor(), float(scalar))
    if status != MT_OK:
        check(status, f"mt_map({op})")


def fill(out: Any, value: float) -> None:
    """out = value everywhere (mt_fill)."""
    check(lib().mt_fill(out.descriptor(), float(value)), "mt_fill")


def zip_(op: str, out: Any, a: Any, b: Any) -> None:
    """out = op(a, b) with broadcasting (mt_zip)."""
    status = lib().mt_zip(_op_id("zip", op), out.descriptor(), a.descriptor(), b.descriptor())
    if status != MT_OK:
        check(status, f"mt_zip({op})")


def reduce_(op: str, out: Any, inp: Any, dim: int) -> None:
    """Reduces inp along dim into out (keepdim shape) (mt_reduce)."""
    check(lib().mt_reduce(_op_id("reduce", op), out.descriptor(), inp.descriptor(), dim), f"mt_reduce({op})")


def reduce_all(op: str, out: Any, inp: Any) -> None:
    """Reduces every element of inp into the one element of out (mt_reduce_all)."""
    check(lib().mt_reduce_all(_op_id("reduce", op), out.descriptor(), inp.descriptor()), f"mt_reduce_all({op})")


def matmul(out: Any, a: Any, b: Any, algo: str = "default", config: int = -1) -> None:
    """out = a @ b over the last two dims, batch dims broadcast (mt_matmul_with_config).

    config picks a tile configuration of a tunable rung (0 ..
    matmul_config_count() - 1: warptile's, then pipelined's; for algo
    "default" or the configuration's own rung); -1 lets the library choose
    from the shape.
    """
    check(
        lib().mt_matmul_with_config(out.descriptor(), a.descriptor(), b.descriptor(), _op_id("matmul", algo), config),
        "mt_matmul",
    )


# The TF32 rungs by name (src/minitensor.h's MT_TF32_SIMPLE, MT_TF32_PIPELINED):
# "tf32" is the library's TF32 product, "tf32_simple" the first rung.
TF32_RUNGS = {"tf32_simple": 0, "tf32": 1}


def matmul_tf32(out: Any, a: Any, b: Any, rung: str = "tf32") -> None:
    """out = a @ b on tensor cores, float32 operands rounded to TF32
    (mt_matmul_tf32_rung; rung is a key of TF32_RUNGS)."""
    check(lib().mt_matmul_tf32_rung(out.descriptor(), a.descriptor(), b.descriptor(), TF32_RUNGS[rung]),
          "mt_matmul_tf32")


def matmul_config_count() -> int:
    """How many tile configurations the tunable matmul rungs have (warptile's and pipelined's)."""
    return int(lib().mt_matmul_config_count())


def matmul_config_name(config: int) -> str:
    """A readable name of one configuration ("128x128x16 warp 64x32 ...")."""
    raw = lib().mt_matmul_config_name(config)
    if raw is None:
        raise ValueError(f"no matmul config {config} (there are {matmul_config_count()})")
    return raw.decode()


def reduce_variant(op: str, out: Any, inp: Any, dim: int, algo: str) -> None:
    """mt_reduce with a chosen rung of the reduction ladder (mt_reduce_variant)."""
    check(
        lib().mt_reduce_variant(_op_id("reduce", op), out.descriptor(), inp.descriptor(), dim, _op_id("reduce_algo", algo)),
        f"mt_reduce_variant({op}, {algo})",
    )


def copy_variant(out: Any, inp: Any, algo: str) -> None:
    """out = inp with a chosen rung of the transpose ladder (mt_copy_variant)."""
    check(lib().mt_copy_variant(out.descriptor(), inp.descriptor(), _op_id("copy_algo", algo)), f"mt_copy_variant({algo})")


def softmax(out: Any, inp: Any, dim: int, log: bool) -> None:
    """out = (log_)softmax(inp) along dim (mt_softmax)."""
    check(lib().mt_softmax(out.descriptor(), inp.descriptor(), dim, 1 if log else 0), "mt_softmax")


def softmax_backward(grad_in: Any, grad_out: Any, out: Any, dim: int, log: bool, scale: float) -> None:
    """grad_in = the gradient of (log_)softmax from its output and grad_out, times
    scale (mt_softmax_backward)."""
    check(lib().mt_softmax_backward(grad_in.descriptor(), grad_out.descriptor(), out.descriptor(), dim,
                                    1 if log else 0, float(scale)), "mt_softmax_backward")


SOFTMAX_MASK, SOFTMAX_CAUSAL = 1, 2  # minitensor.h's flags


def masked_softmax(out: Any, inp: Any, mask: Any, scale: float, causal: bool) -> None:
    """out = softmax(inp * scale + mask [causal]) along the last dim in one kernel
    (mt_masked_softmax); mask None for none."""
    flags = (0 if mask is None else SOFTMAX_MASK) | (SOFTMAX_CAUSAL if causal else 0)
    check(lib().mt_masked_softmax(out.descriptor(), inp.descriptor(), _desc(mask), float(scale), flags),
          "mt_masked_softmax")


LAYER_NORM_WEIGHT, LAYER_NORM_BIAS, LAYER_NORM_GRAD_IN = 1, 2, 4  # minitensor.h's flags
_NO_TENSOR = MtTensor()  # an argument the flags say is absent: never read


def _desc(x: Any) -> MtTensor:
    return _NO_TENSOR if x is None else x.descriptor()


def layer_norm(out: Any, mean: Any, rstd: Any, inp: Any, weight: Any, bias: Any, eps: float) -> None:
    """Normalizes the rows of a contiguous (rows, n) inp into out, saving each row's
    mean and rstd; weight and bias (n,) may be None (mt_layer_norm)."""
    affine = (LAYER_NORM_WEIGHT if weight is not None else 0) | (LAYER_NORM_BIAS if bias is not None else 0)
    check(lib().mt_layer_norm(out.descriptor(), mean.descriptor(), rstd.descriptor(), inp.descriptor(),
                              _desc(weight), _desc(bias), affine, float(eps)), "mt_layer_norm")


def layer_norm_backward(grad_in: Any, grad_weight: Any, grad_bias: Any, grad_out: Any, inp: Any, mean: Any,
                        rstd: Any, weight: Any, has_bias: bool) -> None:
    """The gradients of layer_norm that are not None (mt_layer_norm_backward)."""
    want = ((LAYER_NORM_GRAD_IN if grad_in is not None else 0) | (LAYER_NORM_WEIGHT if grad_weight is not None else 0)
            | (LAYER_NORM_BIAS if grad_bias is not None else 0))
    affine = (LAYER_NORM_WEIGHT if weight is not None else 0) | (LAYER_NORM_BIAS if has_bias else 0)
    check(lib().mt_layer_norm_backward(_desc(grad_in), _desc(grad_weight), _desc(grad_bias), grad_out.descriptor(),
                                       inp.descriptor(), mean.descriptor(), rstd.descriptor(), _desc(weight),
                                       want, affine), "mt_layer_norm_backward")


def where(out: Any, cond: Any, a: Any, b: Any) -> None:
    """out = a where cond is non-zero, else b, broadcast (mt_where)."""
    check(lib().mt_where(out.descriptor(), cond.descriptor(), a.descriptor(), b.descriptor()), "mt_where")


def logsumexp(out: Any, inp: Any, dim: int) -> None:
    """out (inp's shape, dim kept as 1) = log(sum(exp(inp))) along dim (mt_logsumexp)."""
    check(lib().mt_logsumexp(out.descriptor(), inp.descriptor(), dim), "mt_logsumexp")


def attention(out: Any, lse: Any, q: Any, k: Any, v: Any, scale: float, causal: bool) -> None:
    """out = softmax(q @ k^T * scale) @ v in one kernel, each row's log-sum-exp in
    lse (mt_attention); contiguous 3-D tensors, lse (B, L)."""
    check(lib().mt_attention(out.descriptor(), lse.descriptor(), q.descriptor(), k.descriptor(), v.descriptor(),
                             float(scale), 1 if causal else 0), "mt_attention")


def attention_backward(dq: Any, dk: Any, dv: Any, dout: Any, q: Any, k: Any, v: Any, out: Any, lse: Any,
                       scale: float, causal: bool) -> None:
    """dq, dk, dv of mt_attention from dout and the forward's tensors (mt_attention_backward)."""
    check(lib().mt_attention_backward(dq.descriptor(), dk.descriptor(), dv.descriptor(), dout.descriptor(),
                                      q.descriptor(), k.descriptor(), v.descriptor(), out.descriptor(),
                                      lse.descriptor(), float(scale), 1 if causal else 0), "mt_attention_backward")


def conv2d(out: Any, inp: Any, weight: Any, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
           dilation: tuple[int, int], groups: int) -> None:
    """out = the convolution of inp by weight (+ bias, which may be None) in one kernel
    (mt_conv2d, the tiled rung); contiguous (N, C, H, W), (C_out, C / groups, KH, KW), (C_out,)."""
    check(lib().mt_conv2d(out.descriptor(), inp.descriptor(), weight.descriptor(), _desc(bias),
                          0 if bias is None else 1, *(int(v) for v in stride), *(int(v) for v in padding),
                          *(int(v) for v in dilation), int(groups)), "mt_conv2d")


def cross_entropy(loss: Any, lse: Any, logits: Any, targets: Any, checked: bool) -> None:
    """Each row's cross-entropy and logsumexp (mt_cross_entropy); checked: the
    targets are known to be whole numbers in range (no device check)."""
    check(lib().mt_cross_entropy(loss.descriptor(), lse.descriptor(), logits.descriptor(), targets.descriptor(),
                                 1 if checked else 0), "mt_cross_entropy")


def cross_entropy_backward(grad_logits: Any, logits: Any, targets: Any, lse: Any, grad: Any, scale: float,
                           checked: bool) -> None:
    """The gradient of cross_entropy's rows with respect to the logits (mt_cross_entropy_backward)."""
    check(lib().mt_cross_entropy_backward(grad_logits.descriptor(), logits.descriptor(), targets.descriptor(),
                                          lse.descriptor(), grad.descriptor(), float(scale), 1 if checked else 0),
          "mt_cross_entropy_backward")


def sgd_step(param: Any, grad: Any, momentum_buffer: Any, lr: float, momentum: float, weight_decay: float,
             first_step: bool) -> None:
    """One SGD update of param in place (mt_sgd_step); momentum_buffer is None without momentum."""
    check(lib().mt_sgd_step(param.descriptor(), grad.descriptor(), _desc(momentum_buffer), float(lr),
                            float(momentum), float(weight_decay), 1 if first_step else 0), "mt_sgd_step")


def adam_step(param: Any, grad: Any, exp_avg: Any, exp_avg_sq: Any, lr: float, beta1: float, beta2: float,
              eps: float, weight_decay: float, step: int, decoupled: bool) -> None:
    """One Adam (AdamW when decoupled) update of param and its state in place (mt_adam_step)."""
    check(lib().mt_adam_step(param.descriptor(), grad.descriptor(), exp_avg.descriptor(), exp_avg_sq.descriptor(),
                             float(lr), float(beta1), float(beta2), float(eps), float(weight_decay), int(step),
                             1 if decoupled else 0), "mt_adam_step")


def gather(out: Any, inp: Any, index: Any, dim: int) -> None:
    """out = inp gathered along dim at index (mt_gather)."""
    check(lib().mt_gather(out.descriptor(), inp.descriptor(), index.descriptor(), dim), "mt_gather")


def scatter_add(out: Any, index: Any, src: Any, dim: int) -> None:
    """out[..index..] += src along dim, in place (mt_scatter_add)."""
    check(lib().mt_scatter_add(out.descriptor(), index.descriptor(), src.descriptor(), dim), "mt_scatter_add")


# ---- kernel policy -------------------------------------------------------------


def set_kernel_policy(name: str) -> None:
    """Makes the default paths run the "fast" kernels or only the "teaching" ones
    (mt_set_kernel_policy). name must be a key of KERNEL_POLICIES."""
    check(lib().mt_set_kernel_policy(KERNEL_POLICIES[name]), "mt_set_kernel_policy")


def get_kernel_policy() -> str:
    """The kernel policy in force: "fast" or "teaching" (mt_get_kernel_policy)."""
    value = int(lib().mt_get_kernel_policy())
    for name, number in KERNEL_POLICIES.items():
        if number == value:
            return name
    raise MinitensorError(f"mt_get_kernel_policy returned {value}, which is no policy this package knows")


def launch_count(kernel: str, with_: Optional[str] = None) -> int:
    """Launches of the kernel named `kernel` since reset_launch_counts(), of
    instantiations whose signature contains `with_` (mt_launch_count); -1 on
    the CUDA build, which does not count."""
    return int(lib().mt_launch_count(kernel.encode(), with_.encode() if with_ else None))


def reset_launch_counts() -> None:
    lib().mt_reset_launch_counts()


# ---- device placement (minitensor.distributed: one process per GPU) -----------


def set_device(device: int) -> None:
    """Chooses this process's GPU (before the first tensor is created)."""
    check(lib().mt_set_device(int(device)), "mt_set_device")


def get_device() -> int:
    """The device index this process uses (always 0 on the emulator)."""
    device = c_int()
    check(lib().mt_get_device(ctypes.byref(device)), "mt_get_device")
    return device.value
