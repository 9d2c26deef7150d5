"""Finding, loading and checking the engine library; the op tables, statuses
and descriptors every wrapper of the package uses."""

from __future__ import annotations

import ctypes
import os
from ctypes import Structure, c_char_p, c_int, c_int32, c_int64, c_void_p
from pathlib import Path
from typing import Any, Optional

from .._errors import (
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

ABI_VERSION = 22
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
# the family's enum and returns NULL past the last one, and mt_op_dtypes(family,
# id) gives the op's dtype rule: the binding reads both from the library when
# it loads it (see op_names, op_dtypes), so that each op's name and dtype rule
# is written once, in the op lists of src/minitensor.h. MATMUL, REDUCE_ALGO
# and COPY_ALGO are the kernel ladders (mt_matmul_algo, mt_reduce_algo,
# mt_copy_algo), which have no dtype rules.
OP_FAMILIES: tuple[str, ...] = ("map", "zip", "reduce", "matmul", "reduce_algo", "copy_algo",
                               "epilogue_act")  # the last: mt_epilogue_act, matmul_epilogue's activations


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
    if ptr:  # the cached bytes hold 0 for both (a new result's: the engine sets its address)
        d.data = ptr
    if offset:
        d.offset = offset
    return d


# Every function of src/minitensor.h: name -> (restype, argtypes). Here the
# ones the loader calls itself; each module of the package declares the
# ones it calls beside its wrappers (declare), so that this table holds
# them all before the library is loaded (tests/test_binding.py checks them
# against the header).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_abi_version": (c_int, []),
    "mt_max_dims": (c_int, []),
    "mt_op_count": (c_int, [c_char_p]),
    "mt_op_name": (c_char_p, [c_char_p, c_int]),
    "mt_op_dtypes": (c_char_p, [c_char_p, c_int]),
    "mt_last_error": (c_char_p, []),
    "mt_init": (c_int, []),
}


def declare(signatures: dict[str, tuple[Any, list[Any]]]) -> None:
    """Adds functions to those whose argtypes and restype are set when the
    library loads (each module of the package declares the ones it calls)."""
    SIGNATURES.update(signatures)


# ---- finding and loading the library --------------------------------------

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
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
        if not (REPO_ROOT / "src" / "minitensor.h").is_file():
            # Installed as a copy (pip install . without -e): the engine is
            # built in the clone, which the copy does not know.
            raise ImportError(
                f"minitensor: the package in {REPO_ROOT / 'minitensor'} is a copy without the engine library: "
                f"run `make` in a clone of the repository and install the clone editable "
                f"(`pip install -e .` there), or set MINITENSOR_LIB to a built "
                f"libminitensor_emu.so or libminitensor_cuda.so"
            )
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


def _read_dtype_rules(lib: ctypes.CDLL, tables: dict[str, tuple[str, ...]]) -> dict[str, dict[str, tuple[str, str]]]:
    """family -> {op name: (the dtype letters it takes, its result's letter or "")}
    for the families with dtype rules ("fib>b" -> ("fib", "b"))."""
    rules: dict[str, dict[str, tuple[str, str]]] = {}
    for family, names in tables.items():
        raw = [lib.mt_op_dtypes(family.encode(), i) for i in range(len(names))]
        if any(r is not None for r in raw):
            rules[family] = {name: _split_rule(r) for name, r in zip(names, raw)}
    return rules


def _split_rule(raw: Optional[bytes]) -> tuple[str, str]:
    takes, _, result = (raw or b"").decode().partition(">")
    return takes, result


def _verify(lib: ctypes.CDLL) -> None:
    """Checks the library's ABI version and max rank."""
    path = lib._name
    check_abi("minitensor", path, lib.mt_abi_version(), ABI_VERSION, "make")
    max_dims = lib.mt_max_dims()
    if max_dims != MAX_DIMS:
        raise ImportError(f"minitensor: {path} has MT_MAX_DIMS={max_dims}, expected {MAX_DIMS}")


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


# family -> {op name: op id}, and for map, zip and reduce {op name: (the dtype
# letters it takes, its result's letter or "")}: read from the library when it
# is loaded.
_OP_IDS: dict[str, dict[str, int]] = {}
_OP_DTYPES: dict[str, dict[str, tuple[str, str]]] = {}


def lib() -> ctypes.CDLL:
    """The loaded, initialised engine library (chosen on the first call)."""
    global _LIB
    if _LIB is None:
        chosen = _choose()
        tables = _read_op_tables(chosen)
        for family, names in tables.items():
            _OP_IDS[family] = {name: op_id for op_id, name in enumerate(names)}
        _OP_DTYPES.update(_read_dtype_rules(chosen, tables))
        _LIB = chosen
    return _LIB


class _Functions:
    """The engine's C functions as attributes, for the wrappers on the road of
    every small op: ``C.mt_zip(...)``. The first use of a name loads the
    library (lib()) and keeps its function as a plain attribute of this
    object, so that later uses cost one attribute read, where ``lib().mt_zip``
    costs a Python call each time."""

    def __getattr__(self, name: str) -> Any:  # only for names not kept yet
        function = getattr(lib(), name)
        setattr(self, name, function)
        return function


C = _Functions()


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


def op_dtypes(family: str, name: str) -> tuple[str, str]:
    """The dtype rule of one op of "map", "zip" or "reduce" as the loaded library
    reports it (src/minitensor.h's op lists): the letters of the dtypes its
    kernel takes (f: float32 and float64, i: int64, b: bool) and the letter of
    its result's dtype, "" when it is the input's. "eq" -> ("fib", "b")."""
    if _LIB is None:
        lib()
    rule = _OP_DTYPES.get(family, {}).get(name)
    if rule is None:
        _op_id(family, name)  # raises for an op the library does not have
        raise ValueError(f"{family} has no dtype rules (map, zip and reduce have)")
    return rule


def _op_id(family: str, name: str) -> int:
    op_id = _OP_IDS[family].get(name)  # filled by lib(), which every wrapper calls first
    if op_id is None:
        raise ValueError(
            f"unknown {family} op {name!r}: the library ({_LIB._name if _LIB else 'not loaded'}) has "
            f"{', '.join(_OP_IDS[family]) or 'none'}; an op added to src/minitensor.h needs `make`"
        )
    return op_id


_NO_TENSOR = MtTensor()  # an argument the flags say is absent: never read


def _desc(x: Any) -> MtTensor:
    return _NO_TENSOR if x is None else x.descriptor()
