"""_lib: the ctypes binding of the C engine (src/minitensor.h).

This is the only module that touches ctypes. It

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
- checks the ABI version, the maximum rank and every op-id table against
  the tables below when it loads the library, and raises on a mismatch;
- turns a failed mt_status into an exception carrying ``mt_last_error()``.

The wrappers at the bottom take tensors (anything with ``_storage``,
``_offset``, ``dtype``, ``shape`` and ``strides``) and op names, build the
``mt_tensor`` descriptor and call the engine. They validate nothing
themselves: minitensor/ops.py checks arguments before calling, and the C
library checks them again.
"""

from __future__ import annotations

import ctypes
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
)

# ---- what this binding was written against (checked at load) -------------

ABI_VERSION = 4
MAX_DIMS = 8

# mt_status values -> exception class. MT_OK (0) is success.
MT_OK = 0
STATUS_ERRORS: dict[int, type[MinitensorError]] = {
    1: InvalidArgumentError,  # MT_ERR_INVALID_ARGUMENT
    2: ShapeError,  # MT_ERR_SHAPE
    3: DimError,  # MT_ERR_DIM
    4: DTypeError,  # MT_ERR_DTYPE
    5: OutOfMemoryError,  # MT_ERR_OUT_OF_MEMORY
    6: CudaError,  # MT_ERR_CUDA
    7: NoDeviceError,  # MT_ERR_NO_DEVICE
}

# mt_dtype values.
MT_FLOAT32 = 0
MT_FLOAT64 = 1

# Op-id tables: position = the id in the header's enum, value = the name the
# library reports through mt_op_name(family, id).
MAP_OPS: tuple[str, ...] = (
    "copy",
    "neg",
    "exp",
    "log",
    "relu",
    "sigmoid",
    "tanh",
    "abs",
    "sqrt",
    "reciprocal",
    "sign",
    "add_scalar",
    "mul_scalar",
    "pow_scalar",
    "rpow_scalar",
    "fill",
)
ZIP_OPS: tuple[str, ...] = (
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "relu_backward",
)
REDUCE_OPS: tuple[str, ...] = (
    "sum",
    "prod",
    "max",
    "min",
    "argmax",
    "argmin",
)
# The kernel ladders: mt_matmul_algo, mt_reduce_algo (mt_reduce_variant) and
# mt_copy_algo (mt_copy_variant), in the order of the header's enums.
MATMUL_ALGOS: tuple[str, ...] = (
    "default",
    "naive",
    "coalesced",
    "tiled",
    "blocktile_1d",
    "blocktile_2d",
    "vectorized",
    "warptile",
)
REDUCE_ALGOS: tuple[str, ...] = (
    "default",
    "interleaved",
    "sequential",
    "first_add",
    "warp_shuffle",
    "vectorized",
)
COPY_ALGOS: tuple[str, ...] = (
    "default",
    "naive",
    "tiled",
    "tiled_padded",
)
OP_TABLES: dict[str, tuple[str, ...]] = {
    "map": MAP_OPS,
    "zip": ZIP_OPS,
    "reduce": REDUCE_OPS,
    "matmul": MATMUL_ALGOS,
    "reduce_algo": REDUCE_ALGOS,
    "copy_algo": COPY_ALGOS,
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
    "mt_malloc": (c_int, [POINTER(c_void_p), c_size_t]),
    "mt_free": (c_int, [c_void_p]),
    "mt_memory_in_use": (c_int, [POINTER(c_int64)]),
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
    "mt_reduce_variant": (c_int, [c_int, MtTensor, MtTensor, c_int, c_int]),
    "mt_copy_variant": (c_int, [MtTensor, MtTensor, c_int]),
    "mt_softmax": (c_int, [MtTensor, MtTensor, c_int, c_int]),
    "mt_gather": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
    "mt_scatter_add": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
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


def _declare(lib: ctypes.CDLL) -> None:
    """Sets argtypes and restype of every function in SIGNATURES."""
    for name, (restype, argtypes) in SIGNATURES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise ImportError(f"minitensor: {lib._name} does not export {name}") from None
        fn.restype = restype
        fn.argtypes = argtypes


def _verify(lib: ctypes.CDLL) -> None:
    """Checks the library's ABI version, max rank and op tables against ours."""
    path = lib._name
    version = lib.mt_abi_version()
    if version != ABI_VERSION:
        raise ImportError(
            f"minitensor: {path} has ABI version {version}, but the Python package "
            f"expects {ABI_VERSION}; rebuild with `make` or update the package"
        )
    max_dims = lib.mt_max_dims()
    if max_dims != MAX_DIMS:
        raise ImportError(f"minitensor: {path} has MT_MAX_DIMS={max_dims}, expected {MAX_DIMS}")
    for family, names in OP_TABLES.items():
        count = lib.mt_op_count(family.encode())
        if count != len(names):
            raise ImportError(
                f"minitensor: {path} has {count} {family} ops, the package expects {len(names)}"
            )
        for op_id, expected in enumerate(names):
            raw = lib.mt_op_name(family.encode(), op_id)
            got = raw.decode() if raw is not None else None
            if got != expected:
                raise ImportError(
                    f"minitensor: {family} op id {op_id} is {got!r} in {path}, "
                    f"but the package expects {expected!r}"
                )


def _open(path: Path) -> ctypes.CDLL:
    """dlopens one library, declares its functions and verifies its tables."""
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise ImportError(f"minitensor: cannot load {path}: {e}") from None
    _declare(lib)
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
        if lib.mt_init() != MT_OK:
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
        if lib.mt_init() != MT_OK:
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
        if lib is not None and lib.mt_init() == MT_OK:
            return lib
    if not EMU_LIB_PATH.is_file():
        raise NoDeviceError(
            f"minitensor: the CUDA build found no usable GPU and {EMU_LIB_PATH} is not built; "
            f"run `make` in {REPO_ROOT}"
        )
    return _init_emulator()


def _init_emulator() -> ctypes.CDLL:
    lib = _open(EMU_LIB_PATH)
    if lib.mt_init() != MT_OK:
        raise MinitensorError(f"minitensor: the emulator failed to start: {_init_message(lib)}")
    return lib


def lib() -> ctypes.CDLL:
    """The loaded, initialised engine library (chosen on the first call)."""
    global _LIB
    if _LIB is None:
        _LIB = _choose()
    return _LIB


def is_loaded() -> bool:
    """Whether the engine has been loaded yet (import alone does not)."""
    return _LIB is not None


def check(status: int, func: str) -> None:
    """Raises the exception for a failed status, with the library's message."""
    if status == MT_OK:
        return
    # The library's message already names the C function and the argument.
    message = lib().mt_last_error().decode(errors="replace") or f"{func} failed (no message)"
    error = STATUS_ERRORS.get(status, MinitensorError)
    raise error(message)


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


def _desc(t: Any) -> MtTensor:
    """The mt_tensor descriptor of a Tensor (its storage, offset, shape, strides).

    A tensor is an immutable view (its storage, offset, shape, strides and
    dtype never change after it is made; in-place ops write into the storage
    but keep the view), so the descriptor is built once and kept on the
    tensor as ``_mt_desc``. ctypes copies it into each call (it is passed by
    value), so sharing it between calls is safe.
    """
    d = getattr(t, "_mt_desc", None)
    if d is None:
        shape = t.shape
        d = MtTensor(t._storage.ptr, t._offset, t.dtype.code, len(shape), shape, t.strides)
        t._mt_desc = d
    return d


# family -> {op name: op id}, built once from OP_TABLES.
_OP_IDS: dict[str, dict[str, int]] = {
    family: {name: op_id for op_id, name in enumerate(names)} for family, names in OP_TABLES.items()
}


def _op_id(family: str, name: str) -> int:
    op_id = _OP_IDS[family].get(name)
    if op_id is None:
        raise ValueError(f"unknown {family} op {name!r}")
    return op_id


def map_(op: str, out: Any, inp: Any, scalar: float = 0.0) -> None:
    """out = op(inp, scalar), elementwise (mt_map)."""
    status = lib().mt_map(_op_id("map", op), _desc(out), _desc(inp), float(scalar))
    if status != MT_OK:
        check(status, f"mt_map({op})")


def fill(out: Any, value: float) -> None:
    """out = value everywhere (mt_fill)."""
    check(lib().mt_fill(_desc(out), float(value)), "mt_fill")


def zip_(op: str, out: Any, a: Any, b: Any) -> None:
    """out = op(a, b) with broadcasting (mt_zip)."""
    status = lib().mt_zip(_op_id("zip", op), _desc(out), _desc(a), _desc(b))
    if status != MT_OK:
        check(status, f"mt_zip({op})")


def reduce_(op: str, out: Any, inp: Any, dim: int) -> None:
    """Reduces inp along dim into out (keepdim shape) (mt_reduce)."""
    check(lib().mt_reduce(_op_id("reduce", op), _desc(out), _desc(inp), dim), f"mt_reduce({op})")


def reduce_all(op: str, out: Any, inp: Any) -> None:
    """Reduces every element of inp into the one element of out (mt_reduce_all)."""
    check(lib().mt_reduce_all(_op_id("reduce", op), _desc(out), _desc(inp)), f"mt_reduce_all({op})")


def matmul(out: Any, a: Any, b: Any, algo: str = "default", config: int = -1) -> None:
    """out = a @ b over the last two dims, batch dims broadcast (mt_matmul_with_config).

    config picks a tile configuration of the warptile kernel (0 ..
    matmul_config_count() - 1, for algo "default" or "warptile"); -1 lets the
    library choose from the shape.
    """
    check(
        lib().mt_matmul_with_config(_desc(out), _desc(a), _desc(b), _op_id("matmul", algo), config),
        "mt_matmul",
    )


def matmul_config_count() -> int:
    """How many tile configurations the warptile matmul kernel has."""
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
        lib().mt_reduce_variant(_op_id("reduce", op), _desc(out), _desc(inp), dim, _op_id("reduce_algo", algo)),
        f"mt_reduce_variant({op}, {algo})",
    )


def copy_variant(out: Any, inp: Any, algo: str) -> None:
    """out = inp with a chosen rung of the transpose ladder (mt_copy_variant)."""
    check(lib().mt_copy_variant(_desc(out), _desc(inp), _op_id("copy_algo", algo)), f"mt_copy_variant({algo})")


def softmax(out: Any, inp: Any, dim: int, log: bool) -> None:
    """out = (log_)softmax(inp) along dim (mt_softmax)."""
    check(lib().mt_softmax(_desc(out), _desc(inp), dim, 1 if log else 0), "mt_softmax")


def gather(out: Any, inp: Any, index: Any, dim: int) -> None:
    """out = inp gathered along dim at index (mt_gather)."""
    check(lib().mt_gather(_desc(out), _desc(inp), _desc(index), dim), "mt_gather")


def scatter_add(out: Any, index: Any, src: Any, dim: int) -> None:
    """out[..index..] += src along dim, in place (mt_scatter_add)."""
    check(lib().mt_scatter_add(_desc(out), _desc(index), _desc(src), dim), "mt_scatter_add")


# ---- device placement (minitensor.distributed: one process per GPU) -----------


def set_device(device: int) -> None:
    """Chooses this process's GPU (before the first tensor is created)."""
    check(lib().mt_set_device(int(device)), "mt_set_device")


def get_device() -> int:
    """The device index this process uses (always 0 on the emulator)."""
    device = c_int()
    check(lib().mt_get_device(ctypes.byref(device)), "mt_get_device")
    return device.value
