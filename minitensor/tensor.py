"""tensor: the Tensor class.

A Tensor is an Array (minitensor/_array.py: a strided view of a Storage of
device memory) with an autograd record (requires_grad, grad, grad_fn: the
Variable of minitensor/autograd/engine.py) and torch's method names.

Every differentiable method is one call to a gradient rule of
minitensor/autograd/ (``Rule.apply``, which runs the raw op of
minitensor/ops/ and records the graph); the others call the ops directly
and wrap the Array it returns as a Tensor (``Tensor._from_array``: cheap, it
copies five fields). Comparisons, argmax, argmin and sign have no gradient:
their results never require one; nor does any int64 or bool tensor. The
comparisons and the integer and mask operators (&, |, ~, //, ...) are
inherited from _nograd_ops.py, the arithmetic (+, -, *, /, **, @, exp, relu,
...) from _arithmetic.py, the reductions (sum, max, argmax, var, softmax, ...)
from _reductions.py. In-place methods write into the tensor's
memory and follow torch's autograd rules (their bookkeeping is in
_inplace.py); indexing with an index array or a mask is in _indexing.py.

The creation functions (tensor, zeros, randn, ...) are in _creation.py, the
torch-style free functions (mt.exp, mt.cat, ...) in _functions.py. Where
minitensor differs from torch, the docstring says so; the full list is in
docs/api.md.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence

import numpy as np

from . import _array, _interop, _lib, _views, autograd, ops
from ._array import Array
from ._dtype import DType, bool_, default_dtype, float32, float64, int64, to_dtype
from ._errors import ShapeError
from ._shape import as_shape, check_new_shape, normalize_dim, t_dims
from ._storage import Storage
from .autograd import Variable
from ._indexing import _assign_rows, _has_index_array, _select
from ._nograd_ops import NoGradOps
from ._arithmetic import ArithmeticOps
from ._reductions import ReductionOps, return_types  # noqa: F401 - mt.return_types comes from here
from ._inplace import _check_leaf, _inplace, _overwrite, _previous, _rebase, _records

# ---- the Tensor class ------------------------------------------------------------------


class Tensor(NoGradOps, ArithmeticOps, ReductionOps, Variable):
    """A strided, typed view of device memory with an autograd record, and torch's methods.

    Create tensors with minitensor.tensor(data), zeros, ones, rand, ...; the
    constructor itself is internal. shape, strides, dtype, ndim, numel(),
    storage_offset(), data_ptr(), is_contiguous() and numpy() come from
    Array; requires_grad, grad and grad_fn from autograd's Variable.
    """

    # Make NumPy hand `ndarray + Tensor` to Tensor.__radd__ (which then
    # raises a TypeError asking for minitensor.tensor(...)).
    __array_priority__ = 1000

    def __init__(
        self,
        storage: Storage,
        shape: tuple[int, ...] = (),
        strides: tuple[int, ...] = (),
        offset: int = 0,
        dtype: DType = default_dtype,
        requires_grad: bool = False,
    ) -> None:
        if not isinstance(storage, Storage):
            raise TypeError(
                "Tensor(...) is internal: create tensors with minitensor.tensor(data), "
                "minitensor.zeros(shape), ..."
            )
        super().__init__(storage, shape, strides, offset, dtype)
        self.requires_grad = requires_grad

    def _wrap(self, array: Array) -> Tensor:
        """The results of ops on a Tensor (and on a Parameter) are Tensors."""
        # Array._from_array's copy of the seven fields, written out here: every
        # result of every op on a Tensor comes through, and a call costs.
        obj = Tensor.__new__(Tensor)
        obj._storage = array._storage
        obj._shape = array._shape
        obj._strides = array._strides
        obj._offset = array._offset
        obj._dtype = array._dtype
        obj._desc = array._desc
        obj._ndim = array._ndim
        return obj

    def new_empty(self, shape: Sequence[int], dtype: Any = None) -> Tensor:
        """A new contiguous tensor of shape, uninitialised (dtype defaults to self's)."""
        shape = as_shape(shape, "new_empty()")
        check_new_shape(shape, "new_empty()")
        return Tensor._from_array(_array.empty(shape, self._dtype if dtype is None else to_dtype(dtype)))

    # ---- attributes ----

    @property
    def device(self) -> str:
        """Where the data lives: "cuda:N" (the GPU of this process) or "cpu-emulator".

        A string, not a torch.device; every tensor of a process is on the same
        device (minitensor.distributed places one process on each GPU).
        """
        if _lib.backend_name() == "cuda":
            return f"cuda:{_lib.get_device()}"
        return "cpu-emulator"

    @property
    def T(self) -> Tensor:  # noqa: N802 - torch's name
        """The transpose of a 2-D tensor (0-D and 1-D tensors are returned as they are)."""
        return autograd.Permute.apply(self, t_dims(self.shape))

    @property
    def mT(self) -> Tensor:  # noqa: N802 - torch's name
        """The last two dims swapped (a batch of matrices transposed)."""
        return autograd.Transpose.apply(self, -2, -1)

    @property
    def is_leaf(self) -> bool:
        """True for tensors no recorded op produced (created by the user, or not requiring grad)."""
        return self.grad_fn is None

    def size(self, dim: Optional[int] = None) -> Any:
        """The shape, or the size of one dim."""
        return self._shape if dim is None else self._shape[normalize_dim(dim, self.ndim, "size()")]

    def stride(self, dim: Optional[int] = None) -> Any:
        """The strides (in elements), or the stride of one dim."""
        return self._strides if dim is None else self._strides[normalize_dim(dim, self.ndim, "stride()")]

    def dim(self) -> int:
        """The number of dims."""
        return len(self._shape)

    # ---- conversion ----

    def item(self) -> Any:
        """The value of a one-element tensor, as a Python float, int or bool (by dtype)."""
        if self.numel() != 1:
            raise ShapeError(
                f"item(): a tensor with {self.numel()} elements (shape {self._shape}) cannot be "
                f"converted to a Python number"
            )
        return self.numpy().reshape(-1)[0].item()

    def tolist(self) -> Any:
        """Nested Python lists of numbers (a number for a 0-d tensor)."""
        return self.numpy().tolist()

    def is_floating_point(self) -> bool:
        """Whether the dtype is float32 or float64."""
        return self._dtype.is_floating_point

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """This tensor converted to a dtype, as torch's ``to``: ``to(dtype)``,
        ``to(device)``, ``to(device, dtype)``, ``to(other)`` (other's dtype), or the
        keywords ``dtype=`` and ``device=``; itself when nothing changes.

        A process keeps every tensor on its one device (``.device``): naming that
        device is accepted, another one is refused with a message.
        """
        dtype, device = None, kwargs.pop("device", None)
        if "dtype" in kwargs:
            dtype = kwargs.pop("dtype")
        if kwargs:
            raise TypeError(f"to(): unexpected keyword arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, Tensor):
                dtype = arg._dtype
            elif isinstance(arg, str) and arg.split(":")[0] in ("cpu", "cpu-emulator", "cuda") or \
                    not isinstance(arg, (str, DType)) and hasattr(arg, "type"):
                device = arg  # a device name ("cuda:0"), or a torch.device; other strings are dtypes
            else:
                dtype = arg
        if device is not None:
            _interop.check_device(self.device, device)
        if dtype is None:
            return self
        return self if to_dtype(dtype) is self._dtype else autograd.Cast.apply(self, to_dtype(dtype))

    def cpu(self) -> Tensor:
        """Itself on the CPU emulator; on a GPU, refused: every tensor of a
        process lives on its one device (``.numpy()`` gives a host copy)."""
        return self.to("cpu")

    def cuda(self) -> Tensor:
        """Itself on the GPU backend; on the CPU emulator, refused with the reason."""
        return self.to("cuda")

    def record_stream(self, stream: Any) -> None:
        """Marks this tensor's memory as used by work queued on `stream` (an
        ``mt.cuda.Stream``, a torch or CuPy stream, or a raw handle): when it
        is freed, the memory is reused only after that work (torch's rule; a
        tensor is otherwise freed in the order of the stream it was made on).
        Memory of another library (from_dlpack, asarray) is its owner's to free."""
        handle = _interop.stream_handle(stream, "record_stream")
        if type(self._storage) is Storage:
            _lib.record_stream(self._storage.ptr, handle)

    @property
    def data(self) -> Tensor:
        """This tensor's values outside autograd (torch's ``.data``): a view of the
        same storage, so writes through it are seen here and are not recorded."""
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        """Makes this tensor a view of value's storage (shape and dtype included),
        as torch's ``t.data = value``; autograd's record of this tensor is kept."""
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be set to a Tensor, got {type(value).__name__}")
        self._storage, self._shape, self._strides = value._storage, value._shape, value._strides
        self._offset, self._dtype, self._desc = value._offset, value._dtype, value._desc
        self._ndim = value._ndim

    def float(self) -> Tensor:
        """This tensor as float32."""
        return self.to(float32)

    def double(self) -> Tensor:
        """This tensor as float64."""
        return self.to(float64)

    def long(self) -> Tensor:
        """This tensor as int64 (floats truncated toward zero; NaN gives 0)."""
        return self.to(int64)

    def bool(self) -> Tensor:
        """This tensor as bool (non-zero, NaN included, is True)."""
        return self.to(bool_)

    def type_as(self, other: Tensor) -> Tensor:
        """This tensor in other's dtype."""
        return self.to(other._dtype)

    def clone(self) -> Tensor:
        """A contiguous copy (differentiable: the gradient passes through)."""
        return autograd.Clone.apply(self)

    def detach(self) -> Tensor:
        """A view sharing the storage, outside any autograd graph."""
        return Tensor._from_array(self)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Sets requires_grad in place (only a leaf can stop requiring grad)."""
        if not requires_grad and not self.is_leaf:
            raise RuntimeError(
                "requires_grad_(False): you can only change the requires_grad flag of a leaf; "
                "use .detach() to get a tensor outside the graph"
            )
        self.requires_grad = bool(requires_grad)
        return self

    # ---- autograd ----

    def backward(self, gradient: Optional[Tensor] = None, retain_graph: bool = False) -> None:
        """Accumulates the gradient of this tensor into .grad of the leaves that require one.

        gradient (the weight of each element) may be omitted for a one-element
        tensor. retain_graph=True keeps the saved tensors for another backward.
        """
        autograd.backward(self, gradient, retain_graph)

    def retain_grad(self) -> None:
        """Makes backward() fill .grad of this non-leaf tensor too."""
        autograd.retain_grad(self)

    def __repr__(self) -> str:
        values = np.array2string(self.numpy(), separator=", ", prefix="tensor(", precision=4)
        extra = ", requires_grad=True" if self.requires_grad else ""
        if self.grad_fn is not None:
            extra += f", grad_fn=<{type(self.grad_fn).__name__}>"
        return (
            f"tensor({values}, shape={self._shape}, dtype={self._dtype.name}, "
            f"backend={_lib.backend_name()}{extra})"
        )

    def __format__(self, spec: str) -> str:
        if spec and self.ndim == 0:
            return format(self.item(), spec)
        return repr(self)

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(
                f"the truth value of a tensor with {self.numel()} elements (shape {self._shape}) is "
                f"ambiguous; use .all(), .any() style reductions or compare .item()"
            )
        return self.item() != 0.0

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        """A one-element int64 or bool tensor is usable where Python wants an int."""
        if self._dtype.is_floating_point:
            raise TypeError(f"only integer tensors of a single element can be converted to an index, "
                            f"got a {self._dtype.name} tensor")
        return int(self.item())

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))

    def __hash__(self) -> int:
        return id(self)

    # ---- views (no copy) ----

    def view(self, *shape: Any) -> Tensor:
        """A view with a new shape (-1 inferred); raises when the strides do not allow one."""
        return autograd.View.apply(self, shape)

    def view_as(self, other: Tensor) -> Tensor:
        """view(other.shape)."""
        return autograd.View.apply(self, other.shape)

    def reshape(self, *shape: Any) -> Tensor:
        """A view with a new shape when possible, else a copy (-1 inferred)."""
        return autograd.Reshape.apply(self, shape)

    def permute(self, *dims: Any) -> Tensor:
        """A view with the dims reordered."""
        return autograd.Permute.apply(self, dims)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        """A view with two dims swapped."""
        return autograd.Transpose.apply(self, dim0, dim1)

    def t(self) -> Tensor:
        """The transpose of a tensor of at most 2 dims."""
        return autograd.Permute.apply(self, t_dims(self.shape))

    def expand(self, *shape: Any) -> Tensor:
        """A view repeating size-1 dims (stride 0); -1 keeps a size; new dims go in front."""
        return autograd.Expand.apply(self, shape)

    def expand_as(self, other: Tensor) -> Tensor:
        """expand(other.shape)."""
        return autograd.Expand.apply(self, other.shape)

    def unsqueeze(self, dim: int) -> Tensor:
        """A view with a new size-1 dim at dim."""
        return autograd.Unsqueeze.apply(self, dim)

    def squeeze(self, dim: Any = None) -> Tensor:
        """A view without size-1 dims (all, or those named by dim: an int or a tuple)."""
        return autograd.Squeeze.apply(self, dim)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Dims start_dim..end_dim merged into one (a view when possible)."""
        return autograd.Flatten.apply(self, start_dim, end_dim)

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        """A view of length elements from start along dim."""
        return autograd.Narrow.apply(self, dim, start, length)

    def contiguous(self) -> Tensor:
        """Itself when contiguous, else a contiguous copy."""
        return self if self.is_contiguous() else autograd.Contiguous.apply(self)

    def __getitem__(self, key: Any) -> Tensor:
        """Basic indexing (a view): ints, slices with a positive step, None and ....
        Index arrays (int64 or bool tensors, lists or NumPy arrays of ints or
        bools) and negative steps among them select as torch does (a copy,
        through gather, so gradients flow; see _indexing.py)."""
        if _has_index_array(key):
            return _select(self, key)
        return autograd.Index.apply(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        """Writes a number or a broadcastable tensor into the basic-index view self[key].
        Leading dims of size 1 that the view lacks are dropped first, as NumPy
        and torch do (a (1, 3, 2) value fits a (3, 2) view)."""
        if _has_index_array(key):
            return _assign_rows(self, key, value)
        if isinstance(value, Array) and value.ndim > 0:
            extra = value.ndim - _views.index(self, key).ndim
            if extra > 0 and all(size == 1 for size in value.shape[:extra]):
                value = value.reshape(value.shape[extra:])
        _overwrite(self, key, value, "__setitem__")

    # ---- in place ----
    # As in torch: the write goes into this tensor's memory, so its views (and
    # the tensors it is a view of) see it, and the version counter goes up.
    # On a leaf that requires grad this is an error while gradients are
    # recorded (update parameters inside minitensor.no_grad()); on any other
    # tensor in a graph the op is recorded and becomes the tensor's grad_fn.

    def fill_(self, value: float) -> Tensor:
        """Sets every element to value."""
        return _overwrite(self, Ellipsis, value, "fill_()")

    def zero_(self) -> Tensor:
        """Sets every element to 0."""
        return _overwrite(self, Ellipsis, 0.0, "zero_()")

    def copy_(self, src: Any) -> Tensor:
        """Copies src (broadcast, cast to this dtype) into this tensor."""
        return _overwrite(self, Ellipsis, src, "copy_()")

    def add_(self, other: Any) -> Tensor:
        """self += other, in place (other broadcast to self's shape; cast to self's dtype)."""
        return _inplace(self, "add", autograd.Add, other)

    def sub_(self, other: Any) -> Tensor:
        """self -= other, in place."""
        return _inplace(self, "sub", autograd.Sub, other)

    def mul_(self, other: Any) -> Tensor:
        """self *= other, in place."""
        return _inplace(self, "mul", autograd.Mul, other)

    def div_(self, other: Any) -> Tensor:
        """self /= other, in place."""
        return _inplace(self, "div", autograd.Div, other)

    __iadd__ = add_
    __isub__ = sub_
    __imul__ = mul_
    __itruediv__ = div_

    @property
    def _version(self) -> int:
        """The version counter (torch's t._version): in-place writes into this tensor's memory."""
        return self._storage.version

    # ---- matmul, gather, scatter ----

    def matmul(self, other: Tensor) -> Tensor:
        """self @ other (see minitensor.matmul)."""
        return autograd.MatMul.apply(self, other)

    def gather(self, dim: int, index: Tensor) -> Tensor:
        """out[i][j] = self[i][index[i][j]] along dim; index an int64 tensor (whole numbers
        in a float tensor are accepted too)."""
        return autograd.Gather.apply(self, dim, index)

    def scatter_add(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """A copy of self with src added at index along dim."""
        return autograd.ScatterAdd.apply(self, dim, index, src)

    def scatter_add_(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """Adds src at index along dim, in place; repeated indices add up."""
        _check_leaf(self, "scatter_add_()")
        if _records(self, src):
            result = autograd.ScatterAdd.apply(autograd.Clone.apply(_previous(self)), dim, index, src)
            return _rebase(self, result)
        return ops.scatter_add_(self, dim, index, src)


# ---- helpers of the methods ------------------------------------------------------------


def is_tensor(x: Any) -> bool:
    """Whether x is a minitensor Tensor (ops.is_array asks the wider question: an Array)."""
    return isinstance(x, Tensor)
