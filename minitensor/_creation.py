"""_creation: the functions that make new tensors (tensor, zeros, ones, full,
empty, rand, randn, arange and their *_like forms, manual_seed), and the three
that share another library's memory instead (from_numpy, from_dlpack, asarray).

Each allocates an Array (minitensor/_array.py), fills it on the device (or
uploads host data) and hands it over as a Tensor.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, Optional

import numpy as np

from . import _array, _interop, _lib, ops
from ._dtype import DType, bool_, default_dtype, from_numpy_dtype, int64, promote_scalar, to_dtype
from ._errors import DTypeError, IntegerOverflowError, OutOfMemoryError
from ._shape import as_shape, check_new_shape
from .tensor import Tensor


def _new(shape: tuple[int, ...], dtype: Any, func: str) -> Tensor:
    """A new contiguous, uninitialised tensor."""
    dtype = default_dtype if dtype is None else to_dtype(dtype)
    check_new_shape(shape, func)
    return Tensor._from_array(_array.empty(shape, dtype))


def _check_device(device: Any, func: str) -> None:
    """device= as torch's creation functions take it: None or the process's own
    device ("cpu" on the emulator, "cuda" or "cuda:N" on the GPU, a string or
    a torch.device); another is refused, with the reason, as Tensor.to does."""
    if device is not None:
        _interop.check_device(_interop.device_name(), device, func)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _overflow(value: Any, func: str) -> IntegerOverflowError:
    return IntegerOverflowError(f"{func}: {value!r} is outside the range of int64 "
                                f"[-2**63, 2**63 - 1]; values are refused, not wrapped")


def _check_int64_range(host: np.ndarray, func: str) -> None:
    """Refuses host values that int64 cannot hold (they would wrap on the cast)."""
    if host.size == 0:
        return
    if host.dtype.kind == "u" and host.max() > _INT64_MAX:
        raise _overflow(int(host.max()), func)
    if host.dtype.kind == "f":
        bad = (host >= 2.0**63) | (host < -(2.0**63))
        if bad.any():
            raise _overflow(float(host[bad].flat[0]), func)


def _leaves(data: Any) -> list:
    """The numbers of nested lists and tuples, in order."""
    out, stack = [], [data]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
        else:
            out.append(item)
    return out


def _from_numpy(array: np.ndarray, dtype: DType, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of a host array."""
    if np.asarray(array).dtype.kind == "f" and dtype is int64 and not np.isfinite(array).all():
        raise ValueError("tensor(): NaN and infinity cannot be converted to int64")
    if dtype is int64:
        _check_int64_range(np.asarray(array), "tensor()")
    host = np.array(array, dtype=dtype.np_dtype, order="C")  # ascontiguousarray would make 0-d 1-d
    out = _new(tuple(host.shape), dtype, "tensor()")
    _array.upload(out, host)
    out.requires_grad = requires_grad
    return out


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False, *, device: Any = None) -> Tensor:
    """A new tensor from a number, (nested) lists or a NumPy array (always a copy).

    The dtype, unless given, is inferred as torch infers it: bools give bool,
    integers int64, Python floats the default dtype (float32); a NumPy array
    keeps its dtype (other integer widths become int64, float16 float64).
    device, as torch's: None or this process's device (see Tensor.device).
    """
    _check_device(device, "tensor()")
    if isinstance(data, Tensor):
        host = data.numpy()
    elif isinstance(data, (np.ndarray, np.generic)):
        host = np.asarray(data)
    else:
        try:
            host = np.asarray(data)
        except ValueError as e:
            raise ValueError(f"tensor(): the data is not a rectangular array of numbers: {e}") from None
        host = _python_ints(data, host, dtype)
    if host.dtype.kind not in "biuf":
        raise TypeError(f"tensor(): cannot make a tensor from data of type {host.dtype} ({type(data).__name__})")
    if dtype is not None:
        target = to_dtype(dtype)
    elif isinstance(data, Tensor):
        target = data.dtype
    elif isinstance(data, (np.ndarray, np.generic)) or host.dtype.kind != "f":
        target = from_numpy_dtype(host.dtype)
    else:
        target = default_dtype  # Python floats: float32, as torch's default
    if requires_grad and not target.is_floating_point:
        raise RuntimeError(f"tensor(): only tensors of floating point dtype can require gradients, "
                           f"got {target.name} (pass dtype=minitensor.float32)")
    return _from_numpy(host, target, requires_grad)


def _python_ints(data: Any, host: np.ndarray, dtype: Any) -> np.ndarray:
    """Python integers beyond int64 in a number or nested lists: NumPy makes
    them uint64, objects or (beside other integers) float64, where torch
    refuses them when the tensor is int64 (all integers and no dtype, or
    dtype=int64) and converts them when it is a float one."""
    if host.dtype.kind not in "Ouf" or (host.dtype.kind == "f" and host.size
                                         and not (np.abs(host) >= 2.0**63).any()):
        return host
    leaves = _leaves(data)
    if not all(isinstance(v, numbers.Number) for v in leaves):
        return host
    floats = any(not isinstance(v, (numbers.Integral, np.integer)) for v in leaves)
    target = None if dtype is None else to_dtype(dtype)
    if target is int64 or (target is None and not floats):
        for v in leaves:
            if isinstance(v, numbers.Integral) and not _INT64_MIN <= int(v) <= _INT64_MAX:
                raise _overflow(int(v), "tensor()")
    if host.dtype.kind == "O":  # integers too large for uint64, converted to a float dtype
        try:
            return np.array(data, dtype=np.float64)
        except (OverflowError, ValueError):
            return host
    return host


def empty(*shape: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A new tensor with uninitialised values."""
    _check_device(device, "empty()")
    return _new(as_shape(shape, "empty()"), dtype, "empty()")


def zeros(*shape: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A new tensor of zeros; shape as varargs or a tuple."""
    _check_device(device, "zeros()")
    return _zeros_or_ones(shape, 0, dtype, requires_grad, "zeros()")


def ones(*shape: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A new tensor of ones; shape as varargs or a tuple."""
    _check_device(device, "ones()")
    return _zeros_or_ones(shape, 1, dtype, requires_grad, "ones()")


def full(shape: Any, fill_value: float, dtype: Any = None, requires_grad: bool = False, *,
         device: Any = None) -> Tensor:
    """A new tensor of shape filled with fill_value; its dtype, unless given, is
    inferred from fill_value as torch does (bool, int64 or float32)."""
    _check_device(device, "full()")
    if dtype is None and ops.is_scalar(fill_value):
        dtype = promote_scalar(bool_, fill_value)
    out = _new(as_shape(shape, "full()"), dtype, "full()")
    ops.fill_(out, fill_value)
    out.requires_grad = requires_grad
    return out


def _zeros_or_ones(shape: Any, value: int, dtype: Any, requires_grad: bool, func: str) -> Tensor:
    return full(as_shape(shape, func), value, dtype=default_dtype if dtype is None else dtype,
                requires_grad=requires_grad)


def zeros_like(x: Tensor, dtype: Any = None, *, device: Any = None) -> Tensor:
    """zeros with x's shape (and dtype unless given)."""
    _check_device(device, "zeros_like()")
    return full(x.shape, 0.0, dtype=x.dtype if dtype is None else dtype)


def ones_like(x: Tensor, dtype: Any = None, *, device: Any = None) -> Tensor:
    """ones with x's shape (and dtype unless given)."""
    _check_device(device, "ones_like()")
    return full(x.shape, 1.0, dtype=x.dtype if dtype is None else dtype)


def full_like(x: Tensor, fill_value: float, dtype: Any = None, *, device: Any = None) -> Tensor:
    """full with x's shape (and dtype unless given)."""
    _check_device(device, "full_like()")
    return full(x.shape, fill_value, dtype=x.dtype if dtype is None else dtype)


def empty_like(x: Tensor, dtype: Any = None, *, device: Any = None) -> Tensor:
    """empty with x's shape (and dtype unless given)."""
    _check_device(device, "empty_like()")
    return empty(x.shape, dtype=x.dtype if dtype is None else dtype)


# The random numbers come from a NumPy Generator on the host (then uploaded):
# the same seed gives the same numbers on the emulator and on the GPU.
_generator = np.random.default_rng()


def numpy_generator() -> np.random.Generator:
    """The package's generator (seeded by manual_seed), for host-side draws such
    as a DataLoader's shuffle."""
    return _generator


def manual_seed(seed: int) -> None:
    """Seeds the generator of rand/randn (torch returns a Generator; this returns None)."""
    global _generator
    _generator = np.random.default_rng(seed)


def _random(shape: tuple[int, ...], dtype: DType, requires_grad: bool, func: str, draw: Any) -> Tensor:
    """A new tensor of numbers from draw (a method of the generator), made on the
    host: the device memory is allocated first, so a shape too large fails there
    (ShapeError, OutOfMemoryError) and not in NumPy."""
    if not dtype.is_floating_point:
        raise TypeError(f"{func}: dtype must be float32 or float64, got {dtype.name}")
    out = _new(shape, dtype, func)
    try:
        host = draw(shape, dtype=dtype.np_dtype)
    except MemoryError:
        raise OutOfMemoryError(f"{func}: the host cannot hold the {out.numel()} numbers of shape {shape}") from None
    _array.upload(out, host)
    out.requires_grad = requires_grad
    return out


def rand(*shape: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Uniform random numbers in [0, 1)."""
    _check_device(device, "rand()")
    dtype = default_dtype if dtype is None else to_dtype(dtype)
    shape = as_shape(shape, "rand()")
    return _random(shape, dtype, requires_grad, "rand()", _generator.random)


def randn(*shape: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Standard normal random numbers."""
    _check_device(device, "randn()")
    dtype = default_dtype if dtype is None else to_dtype(dtype)
    shape = as_shape(shape, "randn()")
    return _random(shape, dtype, requires_grad, "randn()", _generator.standard_normal)


def _whole_numbers(values: np.ndarray, dtype: Any, func: str, largest: int) -> Tensor:
    """Integers as an int64 tensor, or in the float dtype asked for, refused
    where that dtype cannot hold every one of them exactly."""
    dtype = int64 if dtype is None else to_dtype(dtype)
    if dtype is bool_:
        raise TypeError(f"{func}: dtype must be int64 or a float dtype, got bool")
    exact = 2 ** (24 if dtype.itemsize == 4 else 53 if dtype.is_floating_point else 63)
    if largest > exact:
        raise ValueError(f"{func}: values up to {largest} are not all exact in {dtype.name} "
                         f"(whole numbers only up to 2**{exact.bit_length() - 1}); pass dtype=float64")
    return _from_numpy(values, dtype)


def randint(low: int, high: Any = None, size: Any = None, *, dtype: Any = None, device: Any = None) -> Tensor:
    """Integers drawn uniformly from [low, high), as torch.randint: randint(high,
    size) or randint(low, high, size); int64 unless dtype is given."""
    _check_device(device, "randint()")
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    for name, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"randint(): {name} must be an int, got {type(value).__name__}")
    if not low < high:
        raise ValueError(f"randint(): low must be below high, got low={low}, high={high}")
    shape = as_shape(size, "randint()")
    values = _generator.integers(int(low), int(high), size=shape)
    return _whole_numbers(values, dtype, "randint()", max(abs(int(low)), abs(int(high) - 1)))


def randperm(n: int, *, dtype: Any = None, device: Any = None) -> Tensor:
    """A random permutation of 0 .. n-1, as torch.randperm (int64 unless dtype is given)."""
    _check_device(device, "randperm()")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"randperm(): n must be an int >= 0, got {n!r}")
    return _whole_numbers(_generator.permutation(int(n)), dtype, "randperm()", max(int(n) - 1, 0))


def rand_like(x: Tensor, dtype: Any = None, *, device: Any = None) -> Tensor:
    """rand with x's shape (and dtype unless given)."""
    _check_device(device, "rand_like()")
    return rand(x.shape, dtype=x.dtype if dtype is None else dtype)


def randn_like(x: Tensor, dtype: Any = None, *, device: Any = None) -> Tensor:
    """randn with x's shape (and dtype unless given)."""
    _check_device(device, "randn_like()")
    return randn(x.shape, dtype=x.dtype if dtype is None else dtype)


def arange(start: float, end: Optional[float] = None, step: float = 1, dtype: Any = None, *,
           device: Any = None) -> Tensor:
    """Values start, start+step, ... below end (arange(n): 0..n-1).

    As in torch: int64 when start, end and step are all integers, else the
    default dtype (float32), unless dtype is given.
    """
    _check_device(device, "arange()")
    if end is None:
        start, end = 0, start
    for name, value in (("start", start), ("end", end), ("step", step)):
        if not ops.is_scalar(value):
            raise TypeError(f"arange(): {name} must be a number, got {type(value).__name__}")
    if step == 0:
        raise ValueError("arange(): step must be non-zero")
    integral = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (start, end, step))
    dtype = to_dtype(int64 if integral else default_dtype) if dtype is None else to_dtype(dtype)
    for value in (start, end, step):  # as torch: refused, not wrapped
        is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if is_int and not _INT64_MIN <= value <= _INT64_MAX:  # any dtype: torch unpacks an int as int64
            raise _overflow(value, "arange()")
        if dtype is int64 and not is_int and math.isfinite(value) and not _INT64_MIN <= value <= _INT64_MAX:
            raise _overflow(value, "arange()")
    try:
        if integral:  # exact: floats would round counts near 2**63
            count = max(0, -((int(start) - int(end)) // int(step)))
        else:
            count = max(0, math.ceil((float(end) - float(start)) / float(step)))
    except (ValueError, OverflowError):
        raise ValueError(
            f"arange(): start {start}, end {end} and step {step} do not give a finite number of values"
        ) from None
    check_new_shape((count,), "arange()", dtype.itemsize)
    out = _new((count,), dtype, "arange()")  # a count too large fails here, on the device
    if count == 0:
        return out
    try:
        host = np.arange(start, end, step, dtype=np.int64 if dtype is int64 and isinstance(start, (int, np.integer))
                         and isinstance(step, (int, np.integer)) else np.float64)
    except (ValueError, MemoryError) as e:
        raise OutOfMemoryError(f"arange(): {count} values do not fit on the host ({e})") from None
    if host.shape != out.shape:  # NumPy rounded the count the other way
        return _from_numpy(host, dtype)
    _array.upload(out, np.ascontiguousarray(host, dtype=dtype.np_dtype))
    return out


# ---- zero-copy import (minitensor/_interop.py) ---------------------------------


def from_dlpack(ext_tensor: Any) -> Tensor:
    """A tensor sharing the memory of any object with ``__dlpack__`` (torch,
    CuPy, JAX, NumPy): no copy, its strides and storage offset kept, the
    producer kept alive while the tensor lives, its stream synchronised with
    minitensor's. A write through either is seen by the other.

    The memory must be what the backend's kernels address (GPU memory of
    minitensor's device on CUDA, host memory on the emulator) and float32 or
    float64; otherwise an error says why (``mt.tensor(x)`` copies instead).
    """
    return Tensor._from_array(_array.Array(*_interop.from_dlpack(ext_tensor, "from_dlpack()")))


# NumPy's dtypes that a tensor can share (native byte order only).
_SHAREABLE = {np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.bool_)}


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing the memory of a NumPy array, as ``torch.from_numpy``: a
    write through either is seen by the other, and the array is kept alive
    while the tensor lives.

    The emulator's tensors live in host memory, so the array's own memory is
    used (its strides and offset kept; its range is registered with the
    engine like any import, see asarray). On the CUDA backend every tensor
    lives on the GPU, which cannot address NumPy's host memory: there the
    tensor is a copy. A read-only array cannot back a tensor (minitensor's
    tensors are all writable): it is copied, with torch's UserWarning.
    Refused as torch refuses them: a dtype other than float32, float64,
    int64 and bool (DTypeError, a TypeError, naming it), a byte order not
    the machine's, and negative strides (ValueError).
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy(): expected np.ndarray (got {type(array).__name__})")
    if array.dtype.newbyteorder("=") in _SHAREABLE and not array.dtype.isnative:
        raise ValueError(f"from_numpy(): the array's byte order ({array.dtype.str}) is not this machine's; "
                         f"convert it first (array.astype(array.dtype.newbyteorder('=')))")
    if array.dtype not in _SHAREABLE:
        raise DTypeError(f"from_numpy(): can't convert np.ndarray of type numpy.{array.dtype}; the supported "
                         f"types are float32, float64, int64 and bool (convert it first, e.g. "
                         f"array.astype(np.float32))")
    if any(stride < 0 for n, stride in zip(array.shape, array.strides) if n > 1):
        raise ValueError(f"from_numpy(): the array has a negative stride (strides {array.strides} bytes), "
                         f"which tensors cannot have; pass array.copy() instead")
    if not array.flags.writeable:
        warnings.warn("from_numpy(): the given NumPy array is not writable, and minitensor's tensors are; "
                      "the tensor is a copy of it (torch shares it, and writing to it is undefined behaviour)",
                      UserWarning, stacklevel=2)
        return _from_numpy(array, from_numpy_dtype(array.dtype))
    if _lib.backend_name() == "cuda":  # the GPU cannot address the array's host memory
        return _from_numpy(array, from_numpy_dtype(array.dtype))
    return Tensor._from_array(_array.Array(*_interop.from_array_interface(array, "from_numpy()")))


def asarray(obj: Any, *, device: Any = None) -> Tensor:
    """A tensor sharing obj's memory, like ``torch.asarray(obj)`` without a copy.

    A minitensor tensor is returned as it is. Anything else must expose its
    memory: ``__dlpack__`` (torch, CuPy, NumPy), ``__cuda_array_interface__``
    (Numba, CuPy) or the array interface / buffer protocol (NumPy,
    memoryview). Lists, numbers, and memory this backend cannot address raise
    an error that names the problem; ``mt.tensor(x)`` always copies.
    device, as for the other creation functions: None or this process's.
    """
    _check_device(device, "asarray()")
    if isinstance(obj, Tensor):
        return obj
    return Tensor._from_array(_array.Array(*_interop.borrow(obj, "asarray()")))


def eye(n: int, m: Optional[int] = None, dtype: Any = None, requires_grad: bool = False, *,
        device: Any = None) -> Tensor:
    """The n x m identity (m = n by default): ones on the diagonal, zeros elsewhere."""
    _check_device(device, "eye()")
    for name, v in (("n", n), ("m", m)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise ValueError(f"eye(): {name} must be a whole number >= 0, got {v!r}")
    m = n if m is None else m
    out = zeros(n, m, dtype=dtype)
    if n and m:
        # The diagonal is every (m + 1)-th element of the row-major matrix.
        ops.fill_(ops.as_strided(out, (min(n, m),), (m + 1,), 0), 1.0)
    return out.requires_grad_(requires_grad)
