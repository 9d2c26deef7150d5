"""_array: the Array, a strided view of device memory, and nothing more.

An Array is five fields: a Storage (one block of device memory, shared by
all the views of it), a shape, strides counted in elements, an offset into
the storage (in elements) and a dtype. A view (view, permute, expand,
indexing, ...) is a new Array over the same Storage; the kernels read the
strides directly, so no view ever copies.

This layer knows nothing of gradients or of torch's method names: minitensor/ops/
computes on Arrays, and the Tensor of tensor.py is an Array with an
autograd record (minitensor/autograd/engine.py) and torch's methods.

An Array is immutable: its storage, shape, strides, offset and dtype never
change after it is made (in-place ops write into the storage but keep the
view). So the C descriptor of an Array (``descriptor()``, the ``mt_tensor``
struct that every call into the engine takes) is built once, on the first
call, and kept in the Array's own ``_desc`` slot.
"""

from __future__ import annotations

import os
from operator import attrgetter
from typing import Any, Optional

import numpy as np

from . import _interop, _lib
from ._dtype import DType
from ._shape import INT64_LIMIT, check_layout, check_new_shape, contiguous_strides, is_contiguous, numel
from ._errors import OutOfMemoryError
from ._storage import Storage


class Array:
    """shape, strides and offset (in elements) and a dtype over a Storage."""

    __slots__ = ("_storage", "_shape", "_strides", "_offset", "_dtype", "_desc", "_ndim")

    def __init__(self, storage: Storage, shape: tuple[int, ...], strides: tuple[int, ...],
                 offset: int, dtype: DType) -> None:
        self._storage = storage
        self._shape = shape
        self._strides = strides
        self._offset = offset
        self._dtype = dtype
        self._desc: Optional[_lib.MtTensor] = None
        self._ndim = len(shape)  # kept, so that ndim is read as the fields are

    @classmethod
    def _from_array(cls, x: Array) -> Any:
        """x's view (and its descriptor, if built) as a new object of class cls.

        Cheap: it copies the five fields and runs no __init__, so a subclass
        gives its own fields class-level defaults (see autograd's Variable).
        Tensor._wrap (tensor.py) writes the same copy out, a call less per
        result: a field added to __slots__ goes into both.
        """
        obj = cls.__new__(cls)
        obj._storage = x._storage
        obj._shape = x._shape
        obj._strides = x._strides
        obj._offset = x._offset
        obj._dtype = x._dtype
        obj._desc = x._desc
        obj._ndim = x._ndim
        return obj

    # The fields read as properties whose getter is C code (operator.attrgetter):
    # reading t.shape or t.dtype runs no Python function, and every op reads
    # them several times on the road from a Python call to its kernel.
    shape = property(attrgetter("_shape"),
                     doc="The size of each dim, as a tuple (torch returns a torch.Size, a tuple subclass).")
    strides = property(attrgetter("_strides"),
                       doc="The step in storage, in elements (not bytes, unlike NumPy), of each dim.")
    dtype = property(attrgetter("_dtype"), doc="minitensor.float32, float64, int64 or bool.")

    ndim = property(attrgetter("_ndim"), doc="The number of dims (the rank).")

    def numel(self) -> int:
        """The number of elements."""
        n = 1
        for size in self._shape:  # _shape.numel's loop, here: every op asks, and a call costs
            n *= size
        return n

    def storage_offset(self) -> int:
        """Where the first element is in the storage, in elements."""
        return self._offset

    def element_size(self) -> int:
        """Bytes per element."""
        return self._dtype.itemsize

    def data_ptr(self) -> int:
        """Device address of the first element."""
        return self._storage.ptr + self._offset * self._dtype.itemsize

    def is_contiguous(self) -> bool:
        """Whether the elements lie in row-major order without gaps (size-1 dims ignored)."""
        return is_contiguous(self._shape, self._strides)

    def descriptor(self) -> _lib.MtTensor:
        """The ``mt_tensor`` struct of this view, as the engine's functions take it.

        Built on the first call and kept: ctypes copies it into each call (it
        is passed by value), so sharing it between calls is safe.
        """
        d = self._desc
        if d is None:
            d = self._desc = _lib.make_descriptor(self._storage.ptr, self._offset, self._dtype.code,
                                                  self._shape, self._strides)
        return d

    def numpy(self) -> np.ndarray:
        """A NumPy copy (torch's numpy() shares memory; device memory cannot be shared)."""
        return to_numpy(self)

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        """A NumPy copy. On the emulator np.asarray(t) does not get here: it
        finds ``__array_interface__`` first and makes a view."""
        array = to_numpy(self)
        return array if dtype is None else array.astype(dtype)

    # ---- zero-copy export (minitensor/_interop.py) --------------------------

    @property
    def __array_interface__(self) -> dict[str, Any]:
        """NumPy's array interface, emulator only: np.asarray(t) shares t's memory."""
        return _interop.array_interface(self)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA Array Interface v3 (CUDA backend only), for CuPy, Numba, torch."""
        return _interop.cuda_array_interface(self)

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[tuple[int, int]] = None,
                   dl_device: Optional[tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """A DLPack capsule lending this view's memory (torch.from_dlpack(t) and
        np.from_dlpack(t) share it); stream is the consumer's CUDA stream."""
        return _interop.to_dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(kDLCUDA = 2, device index) on the CUDA backend, (kDLCPU = 1, 0) on the emulator."""
        return _interop.dlpack_device(self)

    def __repr__(self) -> str:
        return (
            f"Array(shape={self._shape}, strides={self._strides}, offset={self._offset}, "
            f"dtype={self._dtype.name})"
        )


# ---- making arrays: new memory, or a new view of the same memory -------------------


def empty(shape: tuple[int, ...], dtype: DType, func: str = "empty()") -> Array:
    """A new contiguous, uninitialised Array.

    The last check before memory is asked for: every size and the byte count
    must fit an int64 (ShapeError naming func and the shape otherwise).
    """
    # Every result asks this, mostly for shapes the program made before: the
    # checked count and strides of a (shape, itemsize) come from a small cache,
    # one dict lookup instead of two calls that loop over the dims.
    key = (tuple(shape), dtype.itemsize)
    layout = _NEW_LAYOUTS.get(key)
    if layout is None:
        count = check_new_shape(shape, func, dtype.itemsize)
        strides = contiguous_strides(shape)
        if strides and strides[0] >= INT64_LIMIT:  # only with no elements: (2**62, 2**62, 0)
            check_layout(shape, strides, 0, dtype.itemsize, func)
        if len(_NEW_LAYOUTS) >= 512:
            _NEW_LAYOUTS.clear()
        layout = _NEW_LAYOUTS[key] = (count, strides)
    count, strides = layout
    return Array(Storage(count * dtype.itemsize), shape, strides, 0, dtype)


_NEW_LAYOUTS: dict[tuple[tuple[int, ...], int], tuple[int, tuple[int, ...]]] = {}


def adopt(ptr: int, desc: _lib.MtTensor, shape: tuple[int, ...], strides: tuple[int, ...], dtype: DType,
          nbytes: int) -> Array:
    """A new contiguous Array over the nbytes at ptr, which the engine
    allocated for it (mt_zip_new, mt_map_new: a result allocated and computed
    in one call) and which it then owns; desc is its descriptor, address included."""
    out = Array(Storage.adopt(ptr, nbytes), shape, strides, 0, dtype)
    out._desc = desc
    return out


def empty_like(x: Array) -> Array:
    """A new contiguous, uninitialised Array of x's shape and dtype.

    x's sizes are checked already, but an expanded view of few bytes may have
    more elements than an int64 can count bytes of (ShapeError then).
    """
    shape = x._shape
    dtype = x._dtype
    nbytes = numel(shape) * dtype.itemsize
    if nbytes >= INT64_LIMIT:
        check_new_shape(shape, "allocating a result", dtype.itemsize)
    return Array(Storage(nbytes), shape, contiguous_strides(shape), 0, dtype)


def alias(x: Array, shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
          func: str = "view") -> Array:
    """A view of x's storage with another shape, strides and offset (checked:
    every number an int64, every byte it addresses below 2**63)."""
    check_layout(shape, strides, offset, x._dtype.itemsize, func)
    return Array(x._storage, shape, strides, offset, x._dtype)


def same_elements(x: Array, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Array:
    """A view of x's storage that addresses only elements x addresses (a
    permute, a view, an expand of x): its layout is valid because x's is, so
    it is not checked again, as alias checks a view of new extent."""
    return Array(x._storage, shape, strides, offset, x._dtype)


def bump_version(x: Array) -> None:
    """Records an in-place write into x's storage (see Storage.version)."""
    x._storage.version += 1


def shares_storage(a: Array, b: Array) -> bool:
    """Whether a and b are views of one Storage (so a write to one may change the other)."""
    return a._storage is b._storage


def upload(x: Array, host: np.ndarray) -> None:
    """Copies a C-contiguous host array of x's size into the contiguous Array x."""
    x._storage.upload(host, x._offset * x._dtype.itemsize)


def _host_memory_bytes() -> int:
    """This machine's physical memory (0 where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 0


def to_numpy(x: Array) -> np.ndarray:
    """A NumPy copy of x (honours strides and offset).

    An expanded view may have far more elements than the memory it reads (an
    expand to 2**40 elements of one float): a copy larger than this machine's
    memory is refused with OutOfMemoryError before anything is allocated,
    since NumPy's allocation would be granted lazily and the process killed
    while filling it."""
    nbytes = numel(x._shape) * x._dtype.itemsize
    memory = _host_memory_bytes()
    if memory and nbytes > memory:
        raise OutOfMemoryError(
            f"a NumPy copy of the tensor of shape {x._shape} would take {nbytes} bytes, more than this "
            f"machine's {memory} bytes of memory; copy a smaller part (a slice, or the tensor before expand())"
        )
    out = np.empty(x._shape, dtype=x._dtype.np_dtype)
    if out.size == 0:
        return out
    itemsize = x._dtype.itemsize
    if x.is_contiguous():
        x._storage.download(out, x._offset * itemsize)
        return out
    span = 1 + sum((n - 1) * s for n, s in zip(x._shape, x._strides))
    if span > 2 * out.size:
        # A sparse view of a big storage: gather it on the device first.
        packed = empty_like(x)
        _lib.map_("copy", packed, x)
        return to_numpy(packed)
    buf = np.empty(span, dtype=x._dtype.np_dtype)
    x._storage.download(buf, x._offset * itemsize)
    out[...] = np.lib.stride_tricks.as_strided(buf, x._shape, tuple(s * itemsize for s in x._strides))
    return out
