"""_dlpack: DLPack's C structs and capsules, through ctypes.

DLPack is the C ABI that array libraries use to lend each other memory
without a copy. The producer's ``__dlpack__()`` returns a PyCapsule named
``"dltensor"`` that holds a pointer to a ``DLManagedTensor`` (or, for
consumers that ask with ``max_version=(1, 0)`` or newer, a
``"dltensor_versioned"`` capsule holding a ``DLManagedTensorVersioned``):
the data pointer, device, dtype, shape and strides (in elements), plus a
deleter. The consumer renames the capsule to ``"used_dltensor"`` (or
``"used_dltensor_versioned"``) when it takes the tensor over, and calls the
deleter once it no longer needs the memory. A capsule that nobody consumed
is released by its producer (here: at the next export, see ``_sweep``).

This module is the second (and last) user of ctypes in the package, next to
_lib/: it knows the structs and the capsule protocol, and nothing of
minitensor's arrays. ``export`` makes a capsule of a pointer, shape and
strides and keeps an owner object alive until the consumer is done;
``Borrowed`` opens a producer's capsule into a ``Borrowed`` record whose
``release()`` calls the producer's deleter.
"""

from __future__ import annotations

import ctypes
import sys
from ctypes import (
    CFUNCTYPE,
    POINTER,
    PYFUNCTYPE,
    Structure,
    c_char_p,
    c_int,
    c_int32,
    c_int64,
    c_uint8,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
    py_object,
)
from typing import Any, Optional

# DLDeviceType codes.
CPU = 1
CUDA = 2
CUDA_HOST = 3
CUDA_MANAGED = 13
DEVICE_NAMES = {
    1: "CPU", 2: "CUDA", 3: "CUDAHost", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI",
    10: "ROCM", 11: "ROCMHost", 12: "ExtDev", 13: "CUDAManaged", 14: "OneAPI",
    15: "WebGPU", 16: "Hexagon",
}

# DLDataTypeCode values: those of minitensor's dtypes, and names for the others.
INT = 0
FLOAT = 2
BOOL = 6
TYPE_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque", 4: "bfloat", 5: "complex", 6: "bool"}

# DLManagedTensorVersioned.flags bits.
FLAG_READ_ONLY = 1 << 0

# The version this module writes into versioned capsules.
VERSION = (1, 0)

# Capsule names. Module constants: a capsule keeps the char* it is given, so
# the bytes must live as long as any capsule could.
NAME = b"dltensor"
USED_NAME = b"used_dltensor"
VERSIONED_NAME = b"dltensor_versioned"
USED_VERSIONED_NAME = b"used_dltensor_versioned"


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),  # NULL: C-contiguous
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    pass


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    pass


# Both deleters take the struct's own address.
DELETER = CFUNCTYPE(None, c_void_p)
_DELETER_WITH_GIL = PYFUNCTYPE(None, c_void_p)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", DELETER)]
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", c_void_p),
    ("deleter", DELETER),
    ("flags", c_uint64),
    ("dl_tensor", DLTensor),
]

# The capsule C API. Private prototypes (not ctypes.pythonapi's shared
# function objects, whose argtypes other code may set).
_api = ctypes.pythonapi
_capsule_new = PYFUNCTYPE(py_object, c_void_p, c_char_p, c_void_p)(("PyCapsule_New", _api))
_capsule_is_valid = PYFUNCTYPE(c_int, py_object, c_char_p)(("PyCapsule_IsValid", _api))
_capsule_pointer = PYFUNCTYPE(c_void_p, py_object, c_char_p)(("PyCapsule_GetPointer", _api))
_capsule_set_name = PYFUNCTYPE(c_int, py_object, c_char_p)(("PyCapsule_SetName", _api))


# ---- export: minitensor's memory lent to another library ------------------------
#
# What a capsule points at (the struct, its shape and strides arrays, the
# owner) must live until the consumer calls the deleter, or, for a capsule
# nobody consumed, until the capsule is gone. The usual way to learn the
# latter is a capsule destructor, but one written in Python (a ctypes
# callback) would run while the consumer's own error is pending when a
# consumer refuses the capsule (NumPy refuses a CUDA one after taking it), and
# a ctypes callback can neither run with an error pending nor hand it back:
# the consumer's message would become a SystemError. So the capsules carry no
# destructor; this module keeps a reference to each capsule it made and, at
# each export (``_sweep``), lets go of the capsules a consumer has renamed
# and releases the ones that nobody but this module holds any more.

# struct address -> [struct, shape array, strides array, owner, the capsule
# while nobody has consumed it (else None), its name]
_lent: dict[int, list[Any]] = {}


def _references(entry: list[Any]) -> int:
    """sys.getrefcount of the capsule in a _lent entry, as _sweep sees it."""
    return sys.getrefcount(entry[4])


# The count of an object that only a _lent entry holds, measured by the same
# code (what getrefcount adds for its own argument varies between versions).
_ONLY_OURS = _references([None, None, None, None, object(), None])

# PyErr_Fetch, given no argtypes and ready-made byref arguments, so that
# ctypes converts nothing: converting would itself see a pending error.
_pending = (c_void_p(), c_void_p(), c_void_p())
_pending_refs = tuple(ctypes.byref(p) for p in _pending)
_err_fetch = PYFUNCTYPE(None)(("PyErr_Fetch", _api))
_decref = PYFUNCTYPE(None, c_void_p)(("Py_DecRef", _api))


def _forget(address: Optional[int]) -> None:
    """The deleter of the structs this module makes: drops what kept them alive.

    A consumer may call it while an error of its own is pending (its array
    freed during an exception); Python code cannot run with one pending, so
    that error is cleared first (PyErr_Fetch) and dropped: a ctypes callback
    cannot give it back.
    """
    _err_fetch(*_pending_refs)
    for p in _pending:
        if p.value:
            _decref(p.value)
        p.value = None
    if address:
        _lent.pop(address, None)


_deleter = DELETER(_forget)


def _sweep() -> None:
    """Lets go of consumed capsules; releases the ones nobody else holds."""
    for address, entry in list(_lent.items()):
        if entry[4] is None:
            continue
        if not _capsule_is_valid(entry[4], entry[5]):
            entry[4] = None  # renamed: consumed; the consumer calls the deleter
        elif _references(entry) <= _ONLY_OURS:
            _lent.pop(address, None)  # dropped unconsumed: nobody can take it any more


def export(data: int, device: tuple[int, int], bits: int, shape: tuple[int, ...],
           strides: tuple[int, ...], owner: Any, versioned: bool, byte_offset: int = 0,
           code: int = FLOAT) -> Any:
    """A "dltensor" (or "dltensor_versioned") capsule lending memory at data.

    The first element is at data + byte_offset; shape and strides are in
    elements; code and bits make the dtype (float of bits bits by default).
    owner is kept alive until the consumer calls the deleter (or, for a
    capsule nobody consumes, until an export after the capsule is dropped).
    """
    _sweep()
    ndim = len(shape)
    shape_arr = (c_int64 * max(ndim, 1))(*shape)
    strides_arr = (c_int64 * max(ndim, 1))(*strides)
    managed = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = managed.dl_tensor
    t.data = data or None
    t.device = DLDevice(*device)
    t.ndim = ndim
    t.dtype = DLDataType(code, bits, 1)
    t.shape = ctypes.cast(shape_arr, POINTER(c_int64))
    t.strides = ctypes.cast(strides_arr, POINTER(c_int64))
    t.byte_offset = byte_offset
    managed.deleter = _deleter
    if versioned:
        managed.version = DLPackVersion(*VERSION)
        managed.flags = 0
    name = VERSIONED_NAME if versioned else NAME
    capsule = _capsule_new(ctypes.addressof(managed), name, None)
    _lent[ctypes.addressof(managed)] = [managed, shape_arr, strides_arr, owner, capsule, name]
    return capsule


def lent_count() -> int:
    """How many exported tensors a consumer still holds (for tests)."""
    _sweep()
    return len(_lent)


# ---- import: another library's memory borrowed by minitensor --------------------


class Borrowed:
    """What a producer's capsule describes, and the right to release it.

    shape and strides are in elements (strides None: C-contiguous), data and
    byte_offset as DLPack gives them (the first element is at data +
    byte_offset). ``release()`` calls the producer's deleter, once.
    """

    def __init__(self, capsule: Any) -> None:
        if _capsule_is_valid(capsule, VERSIONED_NAME):
            self.versioned = True
            ptr = _capsule_pointer(capsule, VERSIONED_NAME)
            managed: Any = DLManagedTensorVersioned.from_address(ptr)
            self.version = (managed.version.major, managed.version.minor)
            self.flags = int(managed.flags)
        elif _capsule_is_valid(capsule, NAME):
            self.versioned = False
            ptr = _capsule_pointer(capsule, NAME)
            managed = DLManagedTensor.from_address(ptr)
            self.version = (0, 0)
            self.flags = 0
        else:
            raise TypeError(
                "__dlpack__() did not return a 'dltensor' or 'dltensor_versioned' capsule "
                "(an already consumed one, or not a DLPack capsule)"
            )
        self._capsule = capsule
        self._managed = managed
        self._address = ptr
        self._taken = False
        t = managed.dl_tensor
        self.data = t.data or 0
        self.device = (int(t.device.device_type), int(t.device.device_id))
        self.code, self.bits, self.lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
        self.shape = tuple(int(t.shape[i]) for i in range(t.ndim)) if t.ndim else ()
        self.strides: Optional[tuple[int, ...]] = (
            tuple(int(t.strides[i]) for i in range(t.ndim)) if t.strides else None
        )
        self.byte_offset = int(t.byte_offset)

    @property
    def read_only(self) -> bool:
        return bool(self.flags & FLAG_READ_ONLY)

    def dtype_name(self) -> str:
        """The producer's dtype in DLPack's words, e.g. "int64" or "float16"."""
        name = f"{TYPE_CODE_NAMES.get(self.code, f'code{self.code}')}{self.bits}"
        return name if self.lanes == 1 else f"{name}x{self.lanes}"

    def take(self) -> None:
        """Takes the tensor over: renames the capsule, so that its destructor
        leaves the release to us (``release()``)."""
        name = USED_VERSIONED_NAME if self.versioned else USED_NAME
        if _capsule_set_name(self._capsule, name) != 0:
            raise RuntimeError("PyCapsule_SetName failed on a DLPack capsule")
        self._taken = True
        self._capsule = None  # the capsule may go now; the struct stays the producer's

    def release(self) -> None:
        """Calls the producer's deleter (once), if the tensor was taken over."""
        if not self._taken:
            return
        self._taken = False
        deleter = self._managed.deleter
        if deleter:
            # Called with the GIL held: a producer written in Python (or
            # Cython) needs it, and one in C or C++ does not mind.
            ctypes.cast(deleter, _DELETER_WITH_GIL)(self._address)


def device_name(device_type: int) -> str:
    return DEVICE_NAMES.get(device_type, f"device type {device_type}")
