"""Your own kernels, compiled at run time: ``mt.cuda.compile`` and ``RawKernel``.

    add = mt.cuda.compile(r'''
    extern "C" __global__ void add(float *out, const float *x, const float *y, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)                 // the last block may run past the end
            out[i] = x[i] + y[i];
    }''', name="add")
    add(grid=(n + 255) // 256, block=256, args=(out, x, y, n))

The same source runs on both backends:

- CUDA: NVRTC compiles it for the device's own architecture and the driver
  API launches it (minitensor/cuda/_nvrtc.py); no nvcc is needed.
- Emulator: minitensor/cuda/_cu2emu.py translates it and the host C++ compiler builds a
  shared library against the emulator's runtime (minitensor/cuda/_host_build.py),
  so the emulator's checks (barriers, shuffles, poisoned memory, shared-memory
  races under MINITENSOR_EMU_CHECK=full) apply to it.

Arguments follow the kernel's own parameter list, read from the source:

- a pointer parameter (``float *``, ``const double *``, ``int64_t *``, ``bool *``) takes a contiguous
  Tensor of that dtype (its first element's address), a raw address (int) or
  None;
- an ``mt_tensor`` parameter takes any Tensor view as the library's
  descriptor (data, offset, shape, strides), so a kernel can use indexing.h's
  helpers (``#include "indexing.h"``) on a strided or broadcast view;
- a number parameter (``int``, ``int64_t``, ``float``, ...) takes a Python or
  NumPy number, converted to that type (an int out of range, or a float for
  an integer, is an error rather than a silent cast);
- a parameter whose type the parser cannot name (a template's ``T``) takes a
  NumPy scalar, whose dtype gives the C type, or a Tensor (its address).

Compiled kernels are cached on disk, keyed by the source, name, options,
backend, architecture and compiler version, under $MINITENSOR_KERNEL_CACHE
(default ~/.cache/minitensor/kernels). Compile errors raise CompileError with
the compiler's log, whose line numbers are those of the source as given.
"""

from __future__ import annotations

import re
import threading
import time
import ctypes
from ctypes import (c_bool, c_double, c_float, c_int8, c_int16, c_int32, c_int64, c_uint8, c_uint16, c_uint32,
                    c_uint64, c_void_p)
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from .. import _lib
from .._array import Array
from .._dtype import bool_, float32, float64, int64

_BY_NAME = {d.name: d for d in (float32, float64, int64, bool_)}
from .._errors import DTypeError, InvalidArgumentError
from .._shape import contiguous_strides

# C spellings of a number parameter -> ctypes type.
_NUMBER_TYPES: dict[str, Any] = {
    "float": c_float, "double": c_double, "bool": c_bool,
    "char": c_int8, "signed char": c_int8, "unsigned char": c_uint8, "int8_t": c_int8, "uint8_t": c_uint8,
    "short": c_int16, "unsigned short": c_uint16, "int16_t": c_int16, "uint16_t": c_uint16,
    "int": c_int32, "signed": c_int32, "signed int": c_int32, "unsigned": c_uint32, "unsigned int": c_uint32,
    "int32_t": c_int32, "uint32_t": c_uint32,
    "long": c_int64, "long int": c_int64, "unsigned long": c_uint64,
    "long long": c_int64, "long long int": c_int64, "unsigned long long": c_uint64,
    "int64_t": c_int64, "uint64_t": c_uint64, "size_t": c_uint64, "ptrdiff_t": c_int64,
}
_POINTEE_DTYPES = {"float": "float32", "double": "float64", "int64_t": "int64", "long long": "int64",
                   "long long int": "int64", "long": "int64", "long int": "int64", "bool": "bool"}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct)\b")
_COMMENTS_AND_STRINGS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.DOTALL)


@dataclass(frozen=True)
class Param:
    """One parameter of the kernel: kind is "pointer", "tensor", "number" or "unknown"."""

    kind: str
    name: str
    ctype: Any = None       # for "number"
    pointee: str = ""       # for "pointer": the base type ("float", "void", ...)
    writes: bool = False    # a pointer or tensor the kernel may write through

    def describe(self) -> str:
        if self.kind == "pointer":
            return f"{'' if self.writes else 'const '}{self.pointee} *{self.name}"
        if self.kind == "number":
            return f"{self.ctype.__name__[2:]} {self.name}"
        return f"{self.kind} {self.name}"


def parse_params(source: str, name: str) -> Optional[list[Param]]:
    """The parameters of __global__ function `name` (template arguments
    dropped), or None when the source has no such definition."""
    base = name.split("<", 1)[0].strip()
    code = _COMMENTS_AND_STRINGS.sub(lambda m: " " * len(m.group()), source)
    for m in re.finditer(r"__global__[^;{}()]*?\b" + re.escape(base) + r"\s*\(", code):
        depth, start = 1, m.end()
        for i in range(start, len(code)):
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            if depth == 0:
                return [_param(p, i) for i, p in enumerate(_split_top(code[start:i])) if p.strip() not in ("", "void")]
    return None


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += {"(": 1, "<": 1, "[": 1, ")": -1, ">": -1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def _param(text: str, index: int) -> Param:
    text = " ".join(text.split("=")[0].split())  # no default value, one space
    const = bool(re.search(r"\bconst\b", text))
    bare = " ".join(_QUALIFIERS.sub(" ", text).split())
    m = re.match(r"^(?P<type>.*?)(?P<stars>[\s*&]*?)\s*(?P<name>[A-Za-z_]\w*)?\s*(?:\[\s*\])?$", bare)
    type_part = bare
    pname = f"arg{index}"
    if m:
        type_part, pname = m["type"] or bare, m["name"] or pname
        if "*" in (m["stars"] or "") or "*" in type_part or bare.endswith("[]"):
            pointee = type_part.replace("*", "").strip() or "void"
            return Param("pointer", pname, pointee=pointee, writes=not const)
    type_part = type_part.replace("*", "").strip()
    if type_part in ("mt_tensor",):
        return Param("tensor", pname, writes=not const)
    if type_part in _NUMBER_TYPES:
        return Param("number", pname, ctype=_NUMBER_TYPES[type_part])
    return Param("unknown", pname)


# ---- arguments ------------------------------------------------------------------------------


def _integer_range(ctype: Any) -> tuple[int, int]:
    bits = 8 * np.dtype(ctype).itemsize
    if ctype in (c_uint8, c_uint16, c_uint32, c_uint64):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _number(param: Param, value: Any, where: str) -> Any:
    ctype = param.ctype
    if isinstance(value, Array):
        raise TypeError(f"{where}: parameter '{param.describe()}' is a number, got a Tensor")
    if isinstance(value, np.generic):
        value = value.item()
    if ctype is c_bool:
        if isinstance(value, (bool, int)) and value in (0, 1):
            return c_bool(bool(value))
        raise TypeError(f"{where}: parameter '{param.describe()}' takes a bool, got {value!r}")
    if ctype in (c_float, c_double):
        if isinstance(value, (bool, int, float)):
            return ctype(float(value))
        raise TypeError(f"{where}: parameter '{param.describe()}' takes a number, got {type(value).__name__}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where}: parameter '{param.describe()}' takes an int, got {type(value).__name__} {value!r}")
    lo, hi = _integer_range(ctype)
    if not lo <= value <= hi:
        raise OverflowError(f"{where}: {value} does not fit parameter '{param.describe()}' (range {lo}..{hi})")
    return ctype(value)


def _pointer(param: Param, value: Any, where: str) -> Any:
    if value is None:
        return c_void_p(None)
    if isinstance(value, Array):
        expected = _POINTEE_DTYPES.get(param.pointee)
        if expected is not None and value.dtype.name != expected:
            raise DTypeError(f"{where}: parameter '{param.describe()}' points to {param.pointee}, "
                             f"but the tensor is {value.dtype.name}")
        if not value.is_contiguous():
            raise InvalidArgumentError(
                f"{where}: parameter '{param.describe()}' gets a non-contiguous tensor (shape "
                f"{value.shape}, strides {value.strides}); pass .contiguous(), or declare the parameter "
                f"as mt_tensor to get its strides")
        if param.writes:
            value._storage.version += 1  # autograd sees the write, as for an in-place op
        return c_void_p(value.data_ptr() if value.numel() else None)
    if isinstance(value, int) and not isinstance(value, bool):
        return c_void_p(value)
    raise TypeError(f"{where}: parameter '{param.describe()}' takes a Tensor, an address or None, "
                    f"got {type(value).__name__}")


def _unknown(param: Param, value: Any, where: str) -> Any:
    if isinstance(value, Array):
        return _pointer(Param("pointer", param.name, pointee="void", writes=True), value, where)
    if isinstance(value, np.generic):
        return np.ctypeslib.as_ctypes_type(value.dtype)(value.item())
    raise TypeError(f"{where}: the type of parameter {param.name} is not known from the source; "
                    f"pass a NumPy scalar (np.float32(x), np.int32(n), ...) or a Tensor")


def pack_args(params: Optional[list[Param]], args: Sequence[Any], where: str) -> list[Any]:
    """One ctypes object per kernel argument, checked against the parameters."""
    if params is None:
        params = [Param("unknown", f"arg{i}") for i in range(len(args))]
    if len(args) != len(params):
        listing = ", ".join(p.describe() for p in params)
        raise TypeError(f"{where}: the kernel takes {len(params)} arguments ({listing}), got {len(args)}")
    return [convert(p, a, f"{where}, argument {i}") for i, (p, a) in enumerate(zip(params, args))]


def convert(p: Param, a: Any, at: str) -> Any:
    """One argument as the ctypes object of its parameter, checked."""
    if p.kind == "pointer":
        return _pointer(p, a, at)
    if p.kind == "tensor":
        if not isinstance(a, Array):
            raise TypeError(f"{at}: parameter 'mt_tensor {p.name}' takes a Tensor, got {type(a).__name__}")
        if p.writes:
            a._storage.version += 1
        return _lib.MtTensor.from_buffer_copy(a.descriptor())
    if p.kind == "number":
        return _number(p, a, at)
    return _unknown(p, a, at)


def _dims(value: Any, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in dims):
        raise TypeError(f"RawKernel: {what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    if any(d < 1 for d in dims):
        raise InvalidArgumentError(f"RawKernel: every {what} dimension must be at least 1, got {dims}")
    return dims  # type: ignore[return-value]


def launch_dims(grid: Any, block: Any, max_threads: int) -> tuple[int, ...]:
    """grid and block as six ints, checked against CUDA's limits."""
    g, b = _dims(grid, "grid"), _dims(block, "block")
    if g[0] > 2**31 - 1 or g[1] > 65535 or g[2] > 65535:
        raise InvalidArgumentError(f"RawKernel: grid {g} is over CUDA's limits (2**31-1, 65535, 65535)")
    if b[0] > 1024 or b[1] > 1024 or b[2] > 64 or b[0] * b[1] * b[2] > max_threads:
        raise InvalidArgumentError(
            f"RawKernel: block {b} has {b[0] * b[1] * b[2]} threads; this kernel allows at most {max_threads} "
            f"per block (and x, y <= 1024, z <= 64)")
    return g + b


class PreparedArgs:
    """The launch's argument block, made once per kernel: one ctypes object per
    parameter and the array of their addresses that cuLaunchKernel (and the
    emulator's launcher) reads. A call only stores each argument's value into
    its object, after the same checks as pack_args; the common cases (a
    contiguous tensor for a pointer, a Python number) take a short path, the
    rest go through pack_args' converters."""

    def __init__(self, params: list[Param]) -> None:
        self.params = params
        self.slots: list[Any] = []
        setters = []
        for p in params:
            if p.kind == "pointer":
                slot = c_void_p()
                setters.append(self._pointer_setter(p, slot))
            elif p.kind == "number":
                slot = p.ctype()
                setters.append(self._number_setter(p, slot))
            else:  # "tensor": the descriptor is copied in whole
                slot = _lib.MtTensor()
                setters.append(self._general_setter(p, slot))
            self.slots.append(slot)
        self.setters = setters
        self.array = (c_void_p * max(len(params), 1))(*[ctypes.addressof(s) for s in self.slots])
        self.lock = threading.Lock()  # one argument block: one launch fills it at a time

    @staticmethod
    def _general_setter(p: Param, slot: Any) -> Any:
        size = ctypes.sizeof(slot)

        def store(value: Any, where: str, i: int) -> None:
            packed = convert(p, value, f"{where}, argument {i}")
            ctypes.memmove(ctypes.addressof(slot), ctypes.addressof(packed), size)
        return store

    @staticmethod
    def _pointer_setter(p: Param, slot: Any) -> Any:
        expected = _BY_NAME.get(_POINTEE_DTYPES.get(p.pointee, ""))
        general = PreparedArgs._general_setter(p, slot)
        writes = p.writes

        def store(value: Any, where: str, i: int) -> None:
            if isinstance(value, Array) and (expected is None or value._dtype is expected):
                shape, strides = value._shape, value._strides
                if strides is contiguous_strides(shape) or strides == contiguous_strides(shape):
                    if writes:
                        value._storage.version += 1
                    slot.value = (value._storage.ptr + value._offset * value._dtype.itemsize) or None
                    return
            general(value, where, i)  # its checks raise, or it converts the rest
        return store

    @staticmethod
    def _number_setter(p: Param, slot: Any) -> Any:
        general = PreparedArgs._general_setter(p, slot)
        if p.ctype in (c_float, c_double):
            def store(value: Any, where: str, i: int) -> None:
                if type(value) is float or type(value) is int:
                    slot.value = value
                else:
                    general(value, where, i)
        elif p.ctype is c_bool:
            store = general
        else:
            lo, hi = _integer_range(p.ctype)

            def store(value: Any, where: str, i: int) -> None:
                if type(value) is int and lo <= value <= hi:
                    slot.value = value
                else:
                    general(value, where, i)
        return store


# ---- the kernel ----------------------------------------------------------------------------


class RawKernel:
    """A CUDA kernel compiled from source at run time (CuPy's RawKernel).

    ``RawKernel(source, name, options=())`` compiles at once (from the disk
    cache when it can), so a mistake is reported where the kernel is defined.
    Call it as ``kernel(grid, block, args, shared_mem=0, stream=None)``: grid
    and block are ints or tuples of up to three ints; shared_mem is the
    dynamic shared memory in bytes (``extern __shared__``; above 48 KB the
    opt-in is done for you); stream is a minitensor, torch or CuPy stream or
    a raw handle (default: the current stream).

    ``options`` go to NVRTC (``-DBLOCK=256``, ``--use_fast_math``, ...); on
    the emulator ``-D``, ``-U`` and ``-I`` are passed to the host compiler
    and the rest, which only concern GPU code generation, are ignored.
    """

    def __init__(self, source: str, name: str, options: Sequence[str] = ()) -> None:
        if not isinstance(source, str) or not source.strip():
            raise TypeError("RawKernel: source must be a non-empty string of CUDA C++")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w:]*(<.*>)?", name.strip()):
            raise TypeError(f"RawKernel: name must name a __global__ function, got {name!r}")
        if isinstance(options, str) or any(not isinstance(o, str) for o in options):
            raise TypeError(f"RawKernel: options must be a sequence of strings, got {options!r}")
        self.source = source
        self.name = name.strip()
        self.options = tuple(options)
        self.params = parse_params(source, self.name)
        self.backend = _lib.backend_name()
        self.filename = f"{self.name.split('<')[0].split('::')[-1]}.cu"
        start = time.perf_counter()
        if self.backend == "cuda":
            from . import _nvrtc as impl
        else:
            from . import _host_build as impl
        self._impl, self.cached = impl.build(self)
        self.compile_seconds = time.perf_counter() - start
        # The argument block when every parameter's type is known; a kernel
        # with a template parameter packs its arguments per call.
        known = self.params is not None and all(p.kind != "unknown" for p in self.params)
        self._prepared = PreparedArgs(self.params) if known else None
        sizes = getattr(self._impl, "sizes", None)  # the emulator knows the compiler's parameter sizes
        if self._prepared is not None and sizes is not None and \
                sizes != [ctypes.sizeof(slot) for slot in self._prepared.slots]:
            self._prepared = None  # the parser misread a type: check each call against the sizes
        self._dims: dict[Any, tuple[int, ...]] = {}
        self._where = f"kernel '{self.name}'"

    def __call__(self, grid: Any, block: Any, args: Sequence[Any], *, shared_mem: int = 0,
                 stream: Any = None) -> None:
        where = self._where
        if type(args) is not tuple and type(args) is not list:
            raise TypeError(f"{where}: args must be a tuple or list of the kernel's arguments")
        key = (grid, block) if _plain(grid) and _plain(block) else None
        dims = self._dims.get(key) if key is not None else None
        if dims is None:
            dims = launch_dims(grid, block, self._impl.max_threads)
            if key is not None and len(self._dims) < 64:
                self._dims[key] = dims
        if type(shared_mem) is not int or shared_mem < 0 or shared_mem > self._impl.max_shared:
            shared_mem = self._check_shared(shared_mem)
        handle = _lib.get_stream() if stream is None else _stream_handle(stream)
        prepared = self._prepared
        if prepared is None:
            packed = pack_args(self.params, args, where)
            self._impl.launch(dims, shared_mem, handle, packed)
            return
        if len(args) != len(prepared.setters):
            pack_args(self.params, args, where)  # raises, naming the parameters
        with prepared.lock:
            for i, (store, value) in enumerate(zip(prepared.setters, args)):
                store(value, where, i)
            self._impl.launch_prepared(dims, shared_mem, handle, prepared.array)

    def _check_shared(self, shared_mem: Any) -> int:
        where = self._where
        if isinstance(shared_mem, bool) or not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
            raise InvalidArgumentError(f"{where}: shared_mem must be a number of bytes >= 0, got {shared_mem!r}")
        if shared_mem > self._impl.max_shared:
            raise InvalidArgumentError(f"{where}: shared_mem={shared_mem} bytes is more than a block may have "
                                       f"on this device ({self._impl.max_shared})")
        return int(shared_mem)

    def __repr__(self) -> str:
        params = "?" if self.params is None else ", ".join(p.describe() for p in self.params)
        return f"<RawKernel {self.name}({params}) on {self.backend}>"


def _plain(dims: Any) -> bool:
    """Whether grid or block is spelled with Python ints only, so that it can
    key the cache of checked launch shapes (1.0 and True hash as 1 does)."""
    return type(dims) is int or (type(dims) is tuple and all(type(d) is int for d in dims))


def _stream_handle(stream: Any) -> int:
    from .streams import _handle_of
    return _handle_of(stream, "RawKernel")


def compile(source: str, name: str, options: Sequence[str] = ()) -> RawKernel:  # noqa: A001 - the issue's name
    """Compiles the __global__ function `name` of `source` for this backend
    (see RawKernel)."""
    return RawKernel(source, name, options)
