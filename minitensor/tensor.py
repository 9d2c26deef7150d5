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
inherited from _nograd_ops.py. In-place methods write into the tensor's
memory and follow torch's autograd rules (their bookkeeping is in
_inplace.py); indexing with an index array or a mask is in _indexing.py.

The creation functions (tensor, zeros, randn, ...) are in _creation.py, the
torch-style free functions (mt.exp, mt.cat, ...) in _functions.py. Where
minitensor differs from torch, the docstring says so; the full list is in
docs/api.md.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from . import _array, _interop, _lib, _views, autograd, ops
from ._array import Array
from ._dtype import DType, bool_, default_dtype, float32, float64, int64, to_dtype
from ._errors import DTypeError, ShapeError
from ._shape import as_shape, check_new_shape, dim_or_axis, normalize_dim, t_dims
from ._storage import Storage
from .autograd import Variable
from ._indexing import _assign_rows, _has_index_array, _select
from ._nograd_ops import NoGradOps
from ._inplace import _check_leaf, _inplace, _overwrite, _previous, _rebase, _records

_NUMBERS = (int, float)  # the operands, beside Tensors, of the arithmetic operators' short road

# ---- the Tensor class ------------------------------------------------------------------


class Tensor(NoGradOps, Variable):
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

    # ---- elementwise ----

    def __neg__(self) -> Tensor:
        return autograd.Neg.apply(self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return autograd.Abs.apply(self)

    # The arithmetic operators' short road: where no operand requires a gradient
    # (a Tensor that does not, or a Python number), no node is recorded, so the
    # op runs without Function.apply's work (0.9 us of a + b's host time). The
    # condition is written out in each: a helper's call costs what it saves.

    def __add__(self, other: Any) -> Tensor:
        if not self._requires_grad and (type(other) in _NUMBERS or type(other) is Tensor and not other._requires_grad):
            return self._wrap(ops.add(self, other))
        return autograd.Add.apply(self, other)

    def __radd__(self, other: Any) -> Tensor:
        if not self._requires_grad and (type(other) in _NUMBERS or type(other) is Tensor and not other._requires_grad):
            return self._wrap(ops.add(other, self))
        return autograd.Add.apply(other, self)

    def __sub__(self, other: Any) -> Tensor:
        if not self._requires_grad and (type(other) in _NUMBERS or type(other) is Tensor and not other._requires_grad):
            return self._wrap(ops.sub(self, other))
        return autograd.Sub.apply(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        if not self._requires_grad and (type(other) in _NUMBERS or type(other) is Tensor and not other._requires_grad):
            return self._wrap(ops.sub(other, self))
        return autograd.Sub.apply(other, self)

    def __mul__(self, other: Any) -> Tensor:
        if not self._requires_grad and (type(other) in _NUMBERS or type(other) is Tensor and not other._requires_grad):
            return self._wrap(ops.mul(self, other))
        return autograd.Mul.apply(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        if not self._requires_grad and (type(other) in _NUMBERS or type(other) is Tensor and not other._requires_grad):
            return self._wrap(ops.mul(other, self))
        return autograd.Mul.apply(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        if not self._requires_grad and (type(other) in _NUMBERS or type(other) is Tensor and not other._requires_grad):
            return self._wrap(ops.div(self, other))
        return autograd.Div.apply(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        if not self._requires_grad and (type(other) in _NUMBERS or type(other) is Tensor and not other._requires_grad):
            return self._wrap(ops.div(other, self))
        return autograd.Div.apply(other, self)

    def __pow__(self, other: Any) -> Tensor:
        return autograd.Pow.apply(self, other)

    def __rpow__(self, other: Any) -> Tensor:
        return autograd.Pow.apply(other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return autograd.MatMul.apply(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return autograd.MatMul.apply(other, self)

    def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
        """A copy with value where mask (a bool tensor broadcast to self's shape) is True."""
        _check_mask(mask, "masked_fill()")
        if isinstance(value, Tensor) and value.ndim > 0:
            raise ShapeError(f"masked_fill(): value must be a number or a 0-d tensor, got shape {value.shape}")
        if isinstance(value, Tensor):
            value = value.to(self._dtype)
        out = autograd.Where.apply(mask, value, self)
        if out.shape != self._shape:
            raise ShapeError(f"masked_fill(): the mask of shape {mask.shape} does not broadcast to the "
                             f"tensor's shape {self._shape}")
        return out if out._dtype is self._dtype else out.to(self._dtype)

    def masked_fill_(self, mask: Tensor, value: Any) -> Tensor:
        """Sets self to value where mask is True, in place."""
        return self.copy_(self.masked_fill(mask, value))

    def nonzero(self, as_tuple: bool = False) -> Any:
        """The indices of the non-zero elements: an (n, ndim) int64 tensor, row-major
        order, or with as_tuple one int64 tensor per dim. Reads the tensor back to the
        host (its size depends on the values), as torch's does."""
        host = self.numpy()
        found = np.nonzero(host.reshape(1) if self.ndim == 0 else host)
        if as_tuple:
            return tuple(_host_tensor(f.astype(np.int64)) for f in found)
        if self.ndim == 0:  # torch: (1, 0) for a non-zero scalar, (0, 0) for zero
            return _host_tensor(np.zeros((len(found[0]), 0), dtype=np.int64))
        return _host_tensor(np.stack(found, axis=1).astype(np.int64))

    def count_nonzero(self, dim: Any = None, *, axis: Any = None) -> Tensor:
        """How many elements (along dim; axis is another name for it) are non-zero, as int64."""
        with autograd.no_grad():
            return (self.detach() != 0).sum(dim_or_axis(dim, axis, "count_nonzero()"))

    def add(self, other: Any) -> Tensor:
        """self + other."""
        return autograd.Add.apply(self, other)

    def sub(self, other: Any) -> Tensor:
        """self - other."""
        return autograd.Sub.apply(self, other)

    def mul(self, other: Any) -> Tensor:
        """self * other."""
        return autograd.Mul.apply(self, other)

    def div(self, other: Any) -> Tensor:
        """self / other."""
        return autograd.Div.apply(self, other)

    def pow(self, exponent: Any) -> Tensor:
        """self ** exponent."""
        return autograd.Pow.apply(self, exponent)

    def maximum(self, other: Any) -> Tensor:
        """Elementwise maximum."""
        return autograd.Maximum.apply(self, other)

    def minimum(self, other: Any) -> Tensor:
        """Elementwise minimum."""
        return autograd.Minimum.apply(self, other)

    def neg(self) -> Tensor:
        """-self."""
        return autograd.Neg.apply(self)

    def exp(self) -> Tensor:
        """e ** self, elementwise."""
        return autograd.Exp.apply(self)

    def log(self) -> Tensor:
        """Natural logarithm, elementwise."""
        return autograd.Log.apply(self)

    def relu(self) -> Tensor:
        """max(self, 0), elementwise."""
        return autograd.Relu.apply(self)

    def sigmoid(self) -> Tensor:
        """1 / (1 + exp(-self)), elementwise."""
        return autograd.Sigmoid.apply(self)

    def tanh(self) -> Tensor:
        """Hyperbolic tangent, elementwise."""
        return autograd.Tanh.apply(self)

    def erf(self) -> Tensor:
        """The error function, elementwise."""
        return autograd.Erf.apply(self)

    def abs(self) -> Tensor:
        """|self|, elementwise."""
        return autograd.Abs.apply(self)

    def sqrt(self) -> Tensor:
        """Square root, elementwise."""
        return autograd.Sqrt.apply(self)

    def reciprocal(self) -> Tensor:
        """1 / self, elementwise."""
        return autograd.Reciprocal.apply(self)

    def sign(self) -> Tensor:
        """-1, 0 or 1, elementwise."""
        return Tensor._from_array(ops.map_("sign", self))

    # ---- reductions ----

    def all(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        """Whether every element (along dim) is non-zero (NaN counts as non-zero), as
        torch.all: a bool tensor; True over no elements."""
        with autograd.no_grad():
            return (self.detach() == 0).sum(dim_or_axis(dim, axis, "all()"), keepdim) == 0

    def any(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        """Whether some element (along dim) is non-zero, as torch.any: a bool tensor;
        False over no elements."""
        with autograd.no_grad():
            return (self.detach() != 0).sum(dim_or_axis(dim, axis, "any()"), keepdim) > 0

    def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        """Where |self - other| <= atol + rtol * |other| (other broadcast), as
        torch.isclose: equal infinities are close, NaN is close to NaN only with
        equal_nan. A bool tensor, as the comparisons give."""
        for name, value in (("rtol", rtol), ("atol", atol)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"isclose: {name} must be a number >= 0, got {value!r}")
        with autograd.no_grad():
            a = self.detach()
            b = other.detach() if isinstance(other, Tensor) else other
            diff = (a - b).abs()
            tolerance = (b.abs() if isinstance(b, Tensor) else abs(b)) * rtol + atol
            # An infinite difference is never within an (infinite) tolerance: an
            # infinity is close only to itself, which a == b finds (inf - inf is nan).
            close = (diff <= tolerance) & (diff != float("inf")) | (a == b)
            if equal_nan:
                close = close | (a != a) & ((b != b) if isinstance(b, Tensor) else bool(b != b))
            return close

    def allclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
        """Whether every element of isclose holds, as torch.allclose (a bool)."""
        return bool(self.isclose(other, rtol, atol, equal_nan).all())

    def sum(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        """Sum over dim (None: everything; an int or a tuple of ints; axis is another name for dim)."""
        return autograd.Sum.apply(self, dim_or_axis(dim, axis, "sum()"), keepdim)

    def mean(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        """Mean over dim (None: everything; an int or a tuple of ints; or axis=)."""
        return autograd.Mean.apply(self, dim_or_axis(dim, axis, "mean()"), keepdim)

    def prod(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        """Product over dim (None: everything; an int or a tuple of ints; or axis=)."""
        return autograd.Prod.apply(self, dim_or_axis(dim, axis, "prod()"), keepdim)

    def max(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """The maximum of every element (a tensor) or, as torch, over an int dim a named
        pair (values, indices), the indices int64. Over a tuple of dims:
        the values only (torch's amax)."""
        return _extremum(self, autograd.Max, "max", return_types.max,
                         dim if axis is None else dim_or_axis(dim, axis, "max()"), keepdim)

    def min(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """The minimum; like max(): a tensor, or (values, indices) over an int dim."""
        return _extremum(self, autograd.Min, "min", return_types.min,
                         dim if axis is None else dim_or_axis(dim, axis, "min()"), keepdim)

    def amax(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        """The maximum over dim (None: everything; an int or a tuple; or axis=): values only."""
        return autograd.Max.apply(self, dim_or_axis(dim, axis, "amax()"), keepdim)

    def amin(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        """The minimum over dim (None: everything; an int or a tuple; or axis=): values only."""
        return autograd.Min.apply(self, dim_or_axis(dim, axis, "amin()"), keepdim)

    def argmax(self, dim: Optional[int] = None, keepdim: bool = False, *, axis: Optional[int] = None) -> Tensor:
        """Index of the first maximum along dim (None: of the flattened tensor; or axis=), int64."""
        return Tensor._from_array(ops.reduce_("argmax", self, dim_or_axis(dim, axis, "argmax()"), keepdim))

    def argmin(self, dim: Optional[int] = None, keepdim: bool = False, *, axis: Optional[int] = None) -> Tensor:
        """Index of the first minimum along dim (None: of the flattened tensor; or axis=), int64."""
        return Tensor._from_array(ops.reduce_("argmin", self, dim_or_axis(dim, axis, "argmin()"), keepdim))

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 - torch's names
        """Each element limited to [min, max] (numbers, or tensors that broadcast);
        NaN stays NaN; the gradient passes where min <= x <= max, as torch's."""
        if min is None and max is None:
            raise ValueError("clamp(): at least one of min and max must not be None")
        out = self
        if min is not None:
            out = autograd.Where.apply(out < min, min, out)
        if max is not None:
            out = autograd.Where.apply(out > max, max, out)
        return out

    clip = clamp

    def var(self, dim: Any = None, unbiased: Optional[bool] = None, keepdim: bool = False, *,
            correction: Optional[float] = None, axis: Any = None) -> Tensor:
        """The variance over dim: the sum of squared deviations from the mean over
        N - correction (correction 1 by default, Bessel's; ``unbiased=False`` is
        correction 0). N - correction <= 0 gives nan or inf, as torch."""
        if unbiased is not None and correction is not None:
            raise ValueError("var(): give unbiased or correction, not both")
        c = float(correction) if correction is not None else (0.0 if unbiased is False else 1.0)
        dim = dim_or_axis(dim, axis, "var()")
        dims = tuple(range(self.ndim)) if dim is None else dim
        count = 1
        for d in (dims if isinstance(dims, (tuple, list)) else (dims,)):
            count *= self.shape[normalize_dim(d, self.ndim, "var()")]
        centered = self - self.mean(dims, keepdim=True)
        total = (centered * centered).sum(dims, keepdim)
        if count - c > 0:
            return total * (1.0 / (count - c))
        return total / (total.detach() * 0.0)  # no terms left: 0/0 is nan, x/0 is inf, as torch

    def std(self, dim: Any = None, unbiased: Optional[bool] = None, keepdim: bool = False, *,
            correction: Optional[float] = None, axis: Any = None) -> Tensor:
        """The standard deviation over dim: the square root of var (same arguments)."""
        return self.var(dim_or_axis(dim, axis, "std()"), unbiased, keepdim, correction=correction).sqrt()

    def logsumexp(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        """log(sum(exp(self))) over dim (or axis=), numerically stable."""
        return autograd.LogSumExp.apply(self, dim_or_axis(dim, axis, "logsumexp()", required=True), keepdim)

    def softmax(self, dim: Optional[int] = None, *, axis: Optional[int] = None) -> Tensor:
        """softmax along dim (or axis=), numerically stable."""
        return autograd.Softmax.apply(self, dim_or_axis(dim, axis, "softmax()", required=True))

    def log_softmax(self, dim: Optional[int] = None, *, axis: Optional[int] = None) -> Tensor:
        """log(softmax) along dim (or axis=), numerically stable."""
        return autograd.LogSoftmax.apply(self, dim_or_axis(dim, axis, "log_softmax()", required=True))

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


class return_types:  # noqa: N801 - torch's name (torch.return_types)
    """The named pairs that max and min over a dim return, as torch's."""

    max = namedtuple("max", ["values", "indices"])
    min = namedtuple("min", ["values", "indices"])


def _extremum(x: Tensor, rule: Any, op: str, pair: Any, dim: Any, keepdim: bool) -> Any:
    if dim is None or isinstance(dim, (tuple, list)):
        return rule.apply(x, dim, keepdim)
    values, indices = autograd.max_along_dim(x, op, dim, keepdim)  # one pass finds both
    return pair(values, Tensor._from_array(indices))


def _check_mask(mask: Any, func: str) -> None:
    if not isinstance(mask, Tensor) or mask._dtype is not bool_:
        what = mask._dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise DTypeError(f"{func}: the mask must be a bool tensor, got {what}")


def _host_tensor(host: np.ndarray) -> Tensor:
    """A new tensor holding a copy of a host array (of one of minitensor's dtypes)."""
    host = np.ascontiguousarray(host)
    out = _array.empty(tuple(host.shape), to_dtype(host.dtype))
    if host.size:
        _array.upload(out, host)
    return Tensor._from_array(out)


def is_tensor(x: Any) -> bool:
    """Whether x is a minitensor Tensor (ops.is_array asks the wider question: an Array)."""
    return isinstance(x, Tensor)
