"""The helpers every family of ops uses, and the ops of no kernel family of their own.

Argument checks (is_array, check_out, require_float, ...), the dtype rules of
the engine's ops (op_takes, op_result_dtype: read from the library), the scalars the
engine takes (engine_scalar), dtype promotion of two operands
(_promote_pair), the two views that may copy (reshape, flatten), the
copies, fills and casts (the map kernel's copy op, src/map.cu), the
kernel policy (fast_kernels) and joining (cat, stack: copies into narrow
views). Every family module of minitensor/ops/ builds on this one.
"""

from __future__ import annotations

import contextlib
import numbers
from typing import Any, Iterator, Optional, Sequence, Union

from .. import _lib
from .._array import Array, adopt, bump_version, empty, empty_like, same_elements, shares_storage
from .._views import expand, index, narrow, unsqueeze, view
from .._dtype import DType, bool_, int64, promote, promote_scalar, to_dtype
from .._errors import DimError, DTypeError, InvalidArgumentError, MinitensorError, ShapeError
from .._shape import INT64_LIMIT, as_shape, contiguous_layout, normalize_dim, numel, view_layout


Scalar = Union[int, float]
Shape = tuple[int, ...]

# ---- small helpers -----------------------------------------------------------


def is_array(x: Any) -> bool:
    """Whether x is an Array (a Tensor is one): what the ops compute on."""
    return isinstance(x, Array)


def is_scalar(x: Any) -> bool:
    """Whether x is a Python or NumPy real number (bool included, as in torch)."""
    # Python's own numbers first, then tensors: isinstance against
    # numbers.Real runs the ABC machinery, a Python call, and a small op asks
    # this often.
    return isinstance(x, (int, float)) or not isinstance(x, Array) and isinstance(x, numbers.Real)


def check_writable(out: Array, func: str) -> None:
    """An output must not have several elements at one address (an expanded view)."""
    for size, stride in zip(out.shape, out.strides):
        if size > 1 and stride == 0:
            raise MinitensorError(
                f"{func}: cannot write into a tensor of shape {out.shape} with strides "
                f"{out.strides}: several of its elements share one memory location "
                f"(an expanded view); clone() it first"
            )


def check_out(out: Any, shape: tuple[int, ...], dtype: Any, func: str) -> None:
    """out must be an Array of the result's shape (and dtype, unless None)
    that can be written (no expanded dims)."""
    _require_array(out, func, "out")
    if out.shape != shape:
        raise ShapeError(f"{func}: out has shape {out.shape}, but the result has shape {shape}")
    if dtype is not None and out.dtype is not dtype:
        raise DTypeError(f"{func}: out has dtype {out.dtype.name}, but the result has dtype {dtype.name}")
    check_writable(out, func)


def _require_array(x: Any, func: str, name: str = "input") -> None:
    if not isinstance(x, Array):  # is_array(x), without its call
        raise TypeError(f"{func}: {name} must be a Tensor, got {type(x).__name__}")


def as_float(value: Scalar, func: str) -> float:
    """A Python number as the double the engine takes (ValueError if it has none)."""
    try:
        return float(value)
    except OverflowError:
        raise InvalidArgumentError(f"{func}: the number {value} is too large for a double") from None


# The engine takes every scalar as a double, which holds each integer only up
# to 2**53: a larger one meant for an int64 tensor is refused, not rounded.
_EXACT_INT = 2 ** 53


def engine_scalar(value: Scalar, dtype: DType, func: str) -> float:
    """value as the double the engine takes for a tensor of dtype: refused
    (InvalidArgumentError) for an int64 tensor when the double would not hold it exactly."""
    if dtype is int64 and isinstance(value, numbers.Integral) and abs(int(value)) > _EXACT_INT:
        raise InvalidArgumentError(f"{func}: the integer {value} is beyond 2**53, the largest that minitensor "
                                   f"passes to a kernel exactly; use a tensor operand")
    return as_float(value, func)


# The letter of each dtype in the dtype rules of src/minitensor.h's op lists.
_RULE_LETTER = {"float32": "f", "float64": "f", "int64": "i", "bool": "b"}
_LETTER_DTYPE = {"i": int64, "b": bool_}


def op_takes(family: str, op: str, dtype: DType) -> bool:
    """Whether the kernel of op ("map", "zip" or "reduce") takes dtype, by the
    op's dtype rule in src/minitensor.h ("fi": floats and int64), as the
    library reports it."""
    return _RULE_LETTER[dtype.name] in _lib.op_dtypes(family, op)[0]


def op_result_dtype(family: str, op: str, dtype: DType) -> DType:
    """The dtype of op's result for an input of dtype: the one its rule names
    after ">" (a comparison's bool, argmax's int64), else dtype."""
    letter = _lib.op_dtypes(family, op)[1]
    return _LETTER_DTYPE[letter] if letter else dtype


def require_float(x: Array, func: str, name: str = "input") -> None:
    """DTypeError unless x is a float32 or float64 tensor (the ops whose kernels
    only exist for floats: matmul, softmax, layer_norm, ...)."""
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{func}: the {name} has dtype {x.dtype.name}; this op takes float32 or float64 "
                         f"tensors (convert with .float())")


def _scalar_tensor(value: Scalar, dtype: DType, like: Array) -> Array:
    """A new 0-d tensor holding value."""
    out = empty((), dtype)
    _lib.fill(out, engine_scalar(value, dtype, "a scalar operand"))
    return out


def _promote_pair(a: Any, b: Any, func: str) -> tuple[Array, Array]:
    """Two tensors of one dtype from tensors or numbers (at least one tensor)."""
    if not is_array(a) and not is_array(b):
        raise TypeError(f"{func}: expected a Tensor operand, got {type(a).__name__} and {type(b).__name__}")
    for x in (a, b):
        if not is_array(x) and not is_scalar(x):
            raise TypeError(
                f"{func}: unsupported operand type {type(x).__name__}; use a Tensor or a "
                f"Python number (convert arrays with minitensor.tensor(...))"
            )
    if not is_array(a):
        a = _scalar_tensor(a, promote_scalar(b.dtype, a), b)
    if not is_array(b):
        b = _scalar_tensor(b, promote_scalar(a.dtype, b), a)
    dtype = promote(a.dtype, b.dtype)
    return cast(a, dtype), cast(b, dtype)


# ---- new results: allocated and computed in one call into the engine --------------
#
# The road of a small op (docs/architecture.md): the dtypes and the result's
# shape are decided once, here, and the result is made by one call into the
# engine (mt_map_new, mt_zip_new), which takes its memory from the pool and
# launches into it; the engine checks every argument again, as always.


# (shape, dtype) -> (row-major strides, bytes, the bytes of its descriptor
# with no address yet) of a new result, the same for every result of that
# shape and dtype: one lookup per result. Bytes 0 where it gets no memory: no
# element (no launch either), or more bytes than an int64 counts (empty()
# then raises its ShapeError).
_NEW_RESULTS: dict[tuple[tuple[int, ...], DType], tuple[tuple[int, ...], int, bytes]] = {}


def _new_result(shape: tuple[int, ...], dtype: DType) -> tuple[tuple[int, ...], int, bytes]:
    strides, count = contiguous_layout(shape)
    nbytes = count * dtype.itemsize
    if nbytes == 0 or nbytes >= INT64_LIMIT:
        return strides, 0, b""
    if len(_NEW_RESULTS) >= 512:
        _NEW_RESULTS.clear()
    layout = _NEW_RESULTS[shape, dtype] = (strides, nbytes, bytes(_lib.make_descriptor(0, 0, dtype.code, shape,
                                                                                         strides)))
    return layout


def new_map(op: str, x: Array, scalar: float, dtype: Optional[DType] = None) -> Array:
    """A new contiguous tensor op(x, scalar), of x's shape, in x's dtype or
    dtype (the "copy" op casts)."""
    shape = x._shape
    dtype = x._dtype if dtype is None else dtype
    strides, nbytes, raw = _NEW_RESULTS.get((shape, dtype)) or _new_result(shape, dtype)
    if not nbytes:
        return empty(shape, dtype, "allocating a result")
    desc = _lib.MtTensor.from_buffer_copy(raw)
    return adopt(_lib.map_new(op, desc, x, scalar), desc, shape, strides, dtype, nbytes)


def new_zip(op: str, shape: tuple[int, ...], dtype: DType, a: Array, b: Array) -> Array:
    """A new contiguous tensor op(a, b) of shape and dtype (the broadcast shape, op's result dtype)."""
    strides, nbytes, raw = _NEW_RESULTS.get((shape, dtype)) or _new_result(shape, dtype)
    if not nbytes:
        return empty(shape, dtype, "allocating a result")  # as in new_map
    desc = _lib.MtTensor.from_buffer_copy(raw)
    return adopt(_lib.zip_new(op, desc, a, b), desc, shape, strides, dtype, nbytes)


# ---- views (in _views.py) and the two that may copy ---------------------------------


def reshape(x: Array, shape: Sequence[int]) -> Array:
    """Like view(), but copies (once) when the strides do not allow a view."""
    if shape == x._shape and type(shape) is tuple:
        return x  # nothing to change (gradient rules ask this often); an Array never changes
    shape, strides = view_layout(x._shape, x._strides, as_shape(shape, "reshape()"), "reshape()")
    if strides is None:
        return view(clone(x), shape)
    return same_elements(x, shape, strides, x._offset)


def flatten(x: Array, start_dim: int = 0, end_dim: int = -1) -> Array:
    """Merges dims start_dim..end_dim into one (a view when possible, like reshape)."""
    if x.ndim == 0:
        return reshape(x, (1,))
    s = normalize_dim(start_dim, x.ndim, "flatten()")
    e = normalize_dim(end_dim, x.ndim, "flatten()")
    if s > e:
        raise DimError(f"flatten(): start_dim {start_dim} comes after end_dim {end_dim}")
    merged = numel(x.shape[s : e + 1])
    return reshape(x, x.shape[:s] + (merged,) + x.shape[e + 1 :])


# ---- copies, fills and casts ---------------------------------------------------


def fill_(out: Array, value: Scalar) -> Array:
    """Sets every element of out to value, in place."""
    if not is_scalar(value):
        raise TypeError(f"fill_(): value must be a number, got {type(value).__name__}")
    check_writable(out, "fill_()")
    if type(value) is not float:  # a float is the double the engine takes already
        value = engine_scalar(value, out.dtype, "fill_()")
    bump_version(out)
    if out.numel() > 0:
        _lib.fill(out, value)
    return out


def copy_(dst: Array, src: Any) -> Array:
    """Copies src (broadcast to dst's shape, cast to dst's dtype) into dst, in place."""
    if is_scalar(src):
        return fill_(dst, src)
    _require_array(src, "copy_()", "src")
    check_writable(dst, "copy_()")
    try:
        if src._shape != dst._shape:  # one shape (the common copy) needs no expanded view
            src = expand(src, dst.shape)
    except ShapeError:
        raise ShapeError(
            f"copy_(): a tensor of shape {src.shape} cannot be broadcast to the destination shape {dst.shape}"
        ) from None
    bump_version(dst)
    if dst.numel() == 0:
        return dst
    if shares_storage(src, dst):
        src = clone(src)  # they may overlap: read everything before writing
    _lib.map_("copy", dst, src)
    return dst


def setitem(x: Array, key: Any, value: Any) -> None:
    """x[key] = value, for a basic index and a number or a broadcastable tensor."""
    copy_(index(x, key), value)


def cast(x: Array, dtype: Any) -> Array:
    """x converted to dtype (x itself when it already has it)."""
    if x._dtype is dtype:  # the common case, before dtype is read as a name or a NumPy dtype
        return x
    dtype = to_dtype(dtype)
    if x.dtype is dtype:
        return x
    return new_map("copy", x, 0.0, dtype)


def clone(x: Array) -> Array:
    """A contiguous copy of x."""
    return new_map("copy", x, 0.0)


def contiguous(x: Array) -> Array:
    """x when it is already contiguous, else a contiguous copy."""
    if x.is_contiguous():
        return x
    return clone(x)


def fast_kernels() -> bool:
    """Whether the kernel policy is fast: the ops whose only kernels are fused ones
    (logsumexp, cross-entropy) then take them; under teaching they run as chains
    of the kernels students write."""
    return _lib.get_kernel_policy() == "fast"


# ---- joining ---------------------------------------------------------------------------------


def cat(tensors: Sequence[Array], dim: int = 0, dtype: Optional[DType] = None) -> Array:
    """Concatenates tensors along an existing dim (all other sizes must match),
    into their promoted dtype or dtype (each cast as it is copied in)."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) == 0:
        raise ValueError("cat(): expected a non-empty list or tuple of tensors")
    for t in tensors:
        _require_array(t, "cat()", "every element")
    first = tensors[0]
    if first.ndim == 0:
        raise ShapeError("cat(): zero-dimensional tensors cannot be concatenated; use stack()")
    d = normalize_dim(dim, first.ndim, "cat()")
    before, after = first.shape[:d], first.shape[d + 1:]
    result = first.dtype
    total = 0
    for t in tensors:  # slices and a loop, no generator per tensor (clip_grad_norm_ cats every gradient)
        if t.ndim != first.ndim or t.shape[:d] != before or t.shape[d + 1:] != after:
            raise ShapeError(
                f"cat(): shapes {first.shape} and {t.shape} do not match outside dim {d}"
            )
        if t.dtype is not result:
            result = promote(result, t.dtype)
        total += t.shape[d]
    out = empty(first.shape[:d] + (total,) + first.shape[d + 1 :], result if dtype is None else dtype)
    start = 0
    for t in tensors:
        copy_(narrow(out, d, start, t.shape[d]), t)
        start += t.shape[d]
    return out


def stack(tensors: Sequence[Array], dim: int = 0) -> Array:
    """Stacks tensors of one shape along a new dim."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) == 0:
        raise ValueError("stack(): expected a non-empty list or tuple of tensors")
    for t in tensors:
        _require_array(t, "stack()", "every element")
        if t.shape != tensors[0].shape:
            raise ShapeError(f"stack(): shapes {tensors[0].shape} and {t.shape} differ")
    d = normalize_dim(dim, tensors[0].ndim, "stack()", extra=1)
    return cat([unsqueeze(t, d) for t in tensors], d)


# ---- the engine's tables, the kernel policy, device copies (minitensor.kernels) ---------


def op_names(family: str) -> tuple[str, ...]:
    """The engine's names of one op family ("matmul", "reduce_algo", "copy_algo",
    "reduce", ...), in the order of src/minitensor.h's enums."""
    return _lib.op_names(family)


def kernel_policies() -> tuple[str, ...]:
    """The kernel policies: ("fast", "teaching")."""
    return tuple(_lib.KERNEL_POLICIES)


def kernel_policy() -> str:
    """The kernel policy in force: "fast" or "teaching"."""
    return _lib.get_kernel_policy()


def set_kernel_policy(name: str) -> None:
    """Makes the default paths run the fast kernels or only the teaching ones
    (name: one of kernel_policies(), not checked here)."""
    _lib.set_kernel_policy(name)


def copy_rung_(out: Array, x: Array, algo: str) -> None:
    """out = x with rung algo of the transpose-copy ladder (mt_copy_variant); the
    caller checked the arguments (minitensor.kernels.copy)."""
    _lib.copy_variant(out, x, algo)


def copy_device_bytes(dst: int, src: int, nbytes: int, foreign: int) -> None:
    """Copies nbytes from device address src to dst (mt_memcpy_d2d); foreign (dst
    or src) is another library's memory, known to the engine for the copy."""
    with _known_to_the_library(foreign, nbytes):
        _lib.memcpy_d2d(dst, src, nbytes)


@contextlib.contextmanager
def _known_to_the_library(ptr: int, nbytes: int) -> Iterator[None]:
    """Registers [ptr, ptr + nbytes) with the library for one copy, unless ptr
    is already in memory it knows (a minitensor tensor's): the library copies
    only within buffers it knows, and checks the size against them."""
    if _lib.find_allocation(ptr) is not None:
        yield
        return
    _lib.register_buffer(ptr, nbytes)
    try:
        yield
    finally:
        _lib.unregister_buffer(ptr)
