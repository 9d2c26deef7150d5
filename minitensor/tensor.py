"""tensor: the Tensor class, the creation functions and the torch-style functions.

A Tensor is a strided view of a Storage (device memory): a shape, strides
counted in elements, a storage offset and a dtype. Views (view, permute,
expand, indexing, ...) make new Tensor objects over the same Storage, and
the kernels read the strides directly, so no view ever copies.

Every differentiable method is one call to a Function of
minitensor/autograd.py (which runs the raw op of minitensor/ops.py and
records the graph); the others call ops.py directly. Comparisons, argmax,
argmin and sign have no gradient: their results never require one.
In-place methods refuse a tensor that requires a gradient while gradients
are being recorded (wrap optimizer-style updates in ``mt.no_grad()``).

Where minitensor differs from torch, the docstring says so; the full list
is in docs/api.md.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence

import numpy as np

from . import _lib, _shape, autograd, ops
from ._dtype import DType, default_dtype, float32, float64, to_dtype
from ._storage import Storage

# ---- the Tensor class ------------------------------------------------------------------


class Tensor:
    """A strided, typed view of device memory, with torch's method names.

    Create tensors with minitensor.tensor(data), zeros, ones, rand, ...; the
    constructor itself is internal.
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
        self._storage = storage
        self._shape = shape
        self._strides = strides
        self._offset = offset
        self._dtype = dtype
        self.requires_grad = requires_grad
        self.grad: Optional[Tensor] = None
        self.grad_fn: Any = None

    # ---- construction helpers used by ops (no autograd) ----

    def new_empty(self, shape: Sequence[int], dtype: Any = None) -> Tensor:
        """A new contiguous tensor of shape, uninitialised (dtype defaults to self's)."""
        return empty(*shape, dtype=self._dtype if dtype is None else dtype)

    def _new_like(self) -> Tensor:
        """A new contiguous, uninitialised tensor of this shape and dtype.

        The fast path of ops: unlike new_empty it skips normalising and
        checking the shape, which this tensor already has.
        """
        shape = self._shape
        storage = Storage(_shape.numel(shape) * self._dtype.itemsize)
        return Tensor(storage, shape, _shape.contiguous_strides(shape), 0, self._dtype)

    def _alias(self, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Tensor:
        """A view of this tensor's storage with another shape/strides/offset."""
        return Tensor(self._storage, shape, strides, offset, self._dtype)

    # ---- attributes ----

    @property
    def shape(self) -> tuple[int, ...]:
        """The size of each dim, as a tuple (torch returns a torch.Size, a tuple subclass)."""
        return self._shape

    @property
    def ndim(self) -> int:
        """The number of dims (the rank)."""
        return len(self._shape)

    @property
    def dtype(self) -> DType:
        """minitensor.float32 or minitensor.float64."""
        return self._dtype

    @property
    def strides(self) -> tuple[int, ...]:
        """The step in storage, in elements (not bytes, unlike NumPy), of each dim."""
        return self._strides

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
        return autograd.Permute.apply(self, _t_dims(self))

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
        return self._shape if dim is None else self._shape[_shape.normalize_dim(dim, self.ndim, "size()")]

    def stride(self, dim: Optional[int] = None) -> Any:
        """The strides (in elements), or the stride of one dim."""
        return self._strides if dim is None else self._strides[_shape.normalize_dim(dim, self.ndim, "stride()")]

    def dim(self) -> int:
        """The number of dims."""
        return len(self._shape)

    def numel(self) -> int:
        """The number of elements."""
        return _shape.numel(self._shape)

    def element_size(self) -> int:
        """Bytes per element."""
        return self._dtype.itemsize

    def storage_offset(self) -> int:
        """Where the first element is in the storage, in elements."""
        return self._offset

    def data_ptr(self) -> int:
        """Device address of the first element."""
        return self._storage.ptr + self._offset * self._dtype.itemsize

    def is_contiguous(self) -> bool:
        """Whether the elements lie in row-major order without gaps (size-1 dims ignored)."""
        return _shape.is_contiguous(self._shape, self._strides)

    # ---- conversion ----

    def numpy(self) -> np.ndarray:
        """A NumPy copy (torch's numpy() shares memory; the device memory cannot be shared)."""
        return ops.to_numpy(self)

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        array = ops.to_numpy(self)
        return array if dtype is None else array.astype(dtype)

    def item(self) -> float:
        """The value of a one-element tensor, as a Python float."""
        if self.numel() != 1:
            raise ops.ShapeError(
                f"item(): a tensor with {self.numel()} elements (shape {self._shape}) cannot be "
                f"converted to a Python number"
            )
        return float(ops.to_numpy(self).reshape(-1)[0])

    def tolist(self) -> Any:
        """Nested Python lists of floats (a float for a 0-d tensor)."""
        return ops.to_numpy(self).tolist()

    def to(self, dtype: Any) -> Tensor:
        """This tensor converted to dtype (itself when it has it already)."""
        return self if to_dtype(dtype) is self._dtype else autograd.Cast.apply(self, to_dtype(dtype))

    def float(self) -> Tensor:
        """This tensor as float32."""
        return self.to(float32)

    def double(self) -> Tensor:
        """This tensor as float64."""
        return self.to(float64)

    def clone(self) -> Tensor:
        """A contiguous copy (differentiable: the gradient passes through)."""
        return autograd.Clone.apply(self)

    def detach(self) -> Tensor:
        """A view sharing the storage, outside any autograd graph."""
        return self._alias(self._shape, self._strides, self._offset)

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
        values = np.array2string(ops.to_numpy(self), separator=", ", prefix="tensor(", precision=4)
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
        return self.item()

    def __int__(self) -> int:
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
        return autograd.Permute.apply(self, _t_dims(self))

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
        """Basic indexing (a view): ints, slices with a positive step, None and ...."""
        return autograd.Index.apply(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        """Writes a number or a broadcastable tensor into the basic-index view self[key]."""
        ops.setitem(_writable(self, "__setitem__"), key, value)

    # ---- in place ----

    def fill_(self, value: float) -> Tensor:
        """Sets every element to value."""
        return ops.fill_(_writable(self, "fill_()"), value)

    def zero_(self) -> Tensor:
        """Sets every element to 0."""
        return ops.fill_(_writable(self, "zero_()"), 0.0)

    def copy_(self, src: Any) -> Tensor:
        """Copies src (broadcast, cast to this dtype) into this tensor."""
        return ops.copy_(_writable(self, "copy_()"), src)

    def add_(self, other: Any) -> Tensor:
        """self += other, in place (computed out of place, then copied in)."""
        return ops.copy_(_writable(self, "add_()"), ops.add(self, other))

    def sub_(self, other: Any) -> Tensor:
        """self -= other, in place."""
        return ops.copy_(_writable(self, "sub_()"), ops.sub(self, other))

    def mul_(self, other: Any) -> Tensor:
        """self *= other, in place."""
        return ops.copy_(_writable(self, "mul_()"), ops.mul(self, other))

    def div_(self, other: Any) -> Tensor:
        """self /= other, in place."""
        return ops.copy_(_writable(self, "div_()"), ops.div(self, other))

    # ---- elementwise ----

    def __neg__(self) -> Tensor:
        return autograd.Neg.apply(self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return autograd.Abs.apply(self)

    def __add__(self, other: Any) -> Tensor:
        return autograd.Add.apply(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return autograd.Add.apply(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return autograd.Sub.apply(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return autograd.Sub.apply(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return autograd.Mul.apply(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return autograd.Mul.apply(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return autograd.Div.apply(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return autograd.Div.apply(other, self)

    def __pow__(self, other: Any) -> Tensor:
        return autograd.Pow.apply(self, other)

    def __rpow__(self, other: Any) -> Tensor:
        return autograd.Pow.apply(other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return autograd.MatMul.apply(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return autograd.MatMul.apply(other, self)

    def __lt__(self, other: Any) -> Tensor:
        return ops.zip_("lt", self, other)

    def __le__(self, other: Any) -> Tensor:
        return ops.zip_("le", self, other)

    def __gt__(self, other: Any) -> Tensor:
        return ops.zip_("gt", self, other)

    def __ge__(self, other: Any) -> Tensor:
        return ops.zip_("ge", self, other)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        if not (ops.is_tensor(other) or ops.is_scalar(other)):
            return NotImplemented
        return ops.zip_("eq", self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        if not (ops.is_tensor(other) or ops.is_scalar(other)):
            return NotImplemented
        return ops.zip_("ne", self, other)

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
        return ops.map_("sign", self)

    # ---- reductions ----

    def sum(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """Sum over dim (None: everything; an int or a tuple of ints)."""
        return autograd.Sum.apply(self, dim, keepdim)

    def mean(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """Mean over dim (None: everything; an int or a tuple of ints)."""
        return autograd.Mean.apply(self, dim, keepdim)

    def prod(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """Product over dim (None: everything; an int or a tuple of ints)."""
        return autograd.Prod.apply(self, dim, keepdim)

    def max(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """Maximum over dim. Values only: torch returns (values, indices) when dim is given."""
        return autograd.Max.apply(self, dim, keepdim)

    def min(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """Minimum over dim. Values only: torch returns (values, indices) when dim is given."""
        return autograd.Min.apply(self, dim, keepdim)

    def argmax(self, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
        """Index of the first maximum along dim (None: of the flattened tensor), as floats."""
        return ops.reduce_("argmax", self, dim, keepdim)

    def argmin(self, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
        """Index of the first minimum along dim (None: of the flattened tensor), as floats."""
        return ops.reduce_("argmin", self, dim, keepdim)

    def logsumexp(self, dim: Any, keepdim: bool = False) -> Tensor:
        """log(sum(exp(self))) over dim, numerically stable."""
        return autograd.LogSumExp.apply(self, dim, keepdim)

    def softmax(self, dim: int) -> Tensor:
        """softmax along dim, numerically stable."""
        return autograd.Softmax.apply(self, dim)

    def log_softmax(self, dim: int) -> Tensor:
        """log(softmax) along dim, numerically stable."""
        return autograd.LogSoftmax.apply(self, dim)

    # ---- matmul, gather, scatter ----

    def matmul(self, other: Tensor) -> Tensor:
        """self @ other (see minitensor.matmul)."""
        return autograd.MatMul.apply(self, other)

    def gather(self, dim: int, index: Tensor) -> Tensor:
        """out[i][j] = self[i][index[i][j]] along dim; index holds whole numbers as floats."""
        return autograd.Gather.apply(self, dim, index)

    def scatter_add(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """A copy of self with src added at index along dim."""
        return autograd.ScatterAdd.apply(self, dim, index, src)

    def scatter_add_(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """Adds src at index along dim, in place; repeated indices add up."""
        return ops.scatter_add_(_writable(self, "scatter_add_()"), dim, index, src)


ops.register_tensor_class(Tensor)


def _writable(x: Tensor, func: str) -> Tensor:
    """x, after checking that an in-place op may change it: not while gradients are
    recorded for it (torch would track the change; minitensor's autograd does not)."""
    if x.requires_grad and autograd.is_grad_enabled():
        raise RuntimeError(
            f"{func}: a tensor that requires grad cannot be changed in place while gradients "
            f"are recorded; use an out-of-place op, or wrap the update in minitensor.no_grad()"
        )
    return x


def _tensor_list(tensors: Any, func: str) -> tuple[Tensor, ...]:
    """The tensors of cat()/stack() as a tuple (a list or tuple, not empty)."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) == 0:
        raise ValueError(f"{func}(): expected a non-empty list or tuple of tensors")
    return tuple(tensors)


def _t_dims(x: Tensor) -> tuple[int, ...]:
    """The permutation of .T / .t(): swap the two dims of a matrix."""
    if x.ndim > 2:
        raise ops.ShapeError(
            f".T and t() expect a tensor of at most 2 dims, got shape {x.shape}; "
            f"use .mT, .transpose(d0, d1) or .permute(...)"
        )
    return tuple(reversed(range(x.ndim)))


# ---- creation ----------------------------------------------------------------------------


def _new(shape: tuple[int, ...], dtype: Any, func: str) -> Tensor:
    """A new contiguous, uninitialised tensor."""
    dtype = default_dtype if dtype is None else to_dtype(dtype)
    _shape.check_new_shape(shape, func)
    storage = Storage(_shape.numel(shape) * dtype.itemsize)
    return Tensor(storage, shape, _shape.contiguous_strides(shape), 0, dtype)


def _from_numpy(array: np.ndarray, dtype: DType, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of a host array."""
    host = np.array(array, dtype=dtype.np_dtype, order="C")  # ascontiguousarray would make 0-d 1-d
    out = _new(tuple(host.shape), dtype, "tensor()")
    out._storage.upload(host)
    out.requires_grad = requires_grad
    return out


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """A new tensor from a number, (nested) lists or a NumPy array (always a copy).

    A float32/float64 array (or NumPy scalar) keeps its dtype; any other data becomes the
    default dtype (float32) unless dtype is given. minitensor has no integer
    or bool dtypes: integers and bools are stored as floats.
    """
    if isinstance(data, Tensor):
        host = data.numpy()
    elif isinstance(data, (np.ndarray, np.generic)):
        host = np.asarray(data)
    else:
        try:
            host = np.asarray(data)
        except ValueError as e:
            raise ValueError(f"tensor(): the data is not a rectangular array of numbers: {e}") from None
    if host.dtype.kind not in "biuf":
        raise TypeError(f"tensor(): cannot make a tensor from data of type {host.dtype} ({type(data).__name__})")
    if dtype is not None:
        target = to_dtype(dtype)
    elif host.dtype == np.float64 and isinstance(data, (np.ndarray, np.generic, Tensor)):
        target = float64
    elif host.dtype == np.float32:
        target = float32
    else:
        target = default_dtype
    return _from_numpy(host, target, requires_grad)


def empty(*shape: Any, dtype: Any = None) -> Tensor:
    """A new tensor with uninitialised values."""
    return _new(_shape.as_shape(shape, "empty()"), dtype, "empty()")


def zeros(*shape: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """A new tensor of zeros; shape as varargs or a tuple."""
    return full(_shape.as_shape(shape, "zeros()"), 0.0, dtype=dtype, requires_grad=requires_grad)


def ones(*shape: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """A new tensor of ones; shape as varargs or a tuple."""
    return full(_shape.as_shape(shape, "ones()"), 1.0, dtype=dtype, requires_grad=requires_grad)


def full(shape: Any, fill_value: float, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """A new tensor of shape filled with fill_value."""
    out = _new(_shape.as_shape(shape, "full()"), dtype, "full()")
    ops.fill_(out, fill_value)
    out.requires_grad = requires_grad
    return out


def zeros_like(x: Tensor, dtype: Any = None) -> Tensor:
    """zeros with x's shape (and dtype unless given)."""
    return full(x.shape, 0.0, dtype=x.dtype if dtype is None else dtype)


def ones_like(x: Tensor, dtype: Any = None) -> Tensor:
    """ones with x's shape (and dtype unless given)."""
    return full(x.shape, 1.0, dtype=x.dtype if dtype is None else dtype)


def full_like(x: Tensor, fill_value: float, dtype: Any = None) -> Tensor:
    """full with x's shape (and dtype unless given)."""
    return full(x.shape, fill_value, dtype=x.dtype if dtype is None else dtype)


def empty_like(x: Tensor, dtype: Any = None) -> Tensor:
    """empty with x's shape (and dtype unless given)."""
    return empty(x.shape, dtype=x.dtype if dtype is None else dtype)


# The random numbers come from a NumPy Generator on the host (then uploaded):
# the same seed gives the same numbers on the emulator and on the GPU.
_generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Seeds the generator of rand/randn (torch returns a Generator; this returns None)."""
    global _generator
    _generator = np.random.default_rng(seed)


def rand(*shape: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Uniform random numbers in [0, 1)."""
    dtype = default_dtype if dtype is None else to_dtype(dtype)
    shape = _shape.as_shape(shape, "rand()")
    _shape.check_new_shape(shape, "rand()")
    return _from_numpy(_generator.random(shape, dtype=dtype.np_dtype), dtype, requires_grad)


def randn(*shape: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Standard normal random numbers."""
    dtype = default_dtype if dtype is None else to_dtype(dtype)
    shape = _shape.as_shape(shape, "randn()")
    _shape.check_new_shape(shape, "randn()")
    return _from_numpy(_generator.standard_normal(shape, dtype=dtype.np_dtype), dtype, requires_grad)


def rand_like(x: Tensor, dtype: Any = None) -> Tensor:
    """rand with x's shape (and dtype unless given)."""
    return rand(x.shape, dtype=x.dtype if dtype is None else dtype)


def randn_like(x: Tensor, dtype: Any = None) -> Tensor:
    """randn with x's shape (and dtype unless given)."""
    return randn(x.shape, dtype=x.dtype if dtype is None else dtype)


def arange(start: float, end: Optional[float] = None, step: float = 1, dtype: Any = None) -> Tensor:
    """Values start, start+step, ... below end (arange(n): 0..n-1), as floats.

    torch gives int64 for integer arguments; minitensor has no integer dtype,
    so the result is float32 unless dtype is given.
    """
    if end is None:
        start, end = 0, start
    for name, value in (("start", start), ("end", end), ("step", step)):
        if not ops.is_scalar(value):
            raise TypeError(f"arange(): {name} must be a number, got {type(value).__name__}")
    if step == 0:
        raise ValueError("arange(): step must be non-zero")
    return tensor(np.arange(start, end, step, dtype=np.float64), dtype=dtype or default_dtype)


def is_tensor(x: Any) -> bool:
    """Whether x is a minitensor Tensor."""
    return isinstance(x, Tensor)


# ---- torch-style functions (each calls the Tensor method, so autograd applies) ------------


def _check(x: Any, func: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{func}(): expected a Tensor, got {type(x).__name__}")
    return x


def exp(x: Tensor) -> Tensor:
    """e ** x, elementwise."""
    return _check(x, "exp").exp()


def log(x: Tensor) -> Tensor:
    """Natural logarithm, elementwise."""
    return _check(x, "log").log()


def relu(x: Tensor) -> Tensor:
    """max(x, 0), elementwise."""
    return _check(x, "relu").relu()


def sigmoid(x: Tensor) -> Tensor:
    """1 / (1 + exp(-x)), elementwise."""
    return _check(x, "sigmoid").sigmoid()


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent, elementwise."""
    return _check(x, "tanh").tanh()


def abs(x: Tensor) -> Tensor:  # noqa: A001 - torch's name
    """|x|, elementwise."""
    return _check(x, "abs").abs()


def sqrt(x: Tensor) -> Tensor:
    """Square root, elementwise."""
    return _check(x, "sqrt").sqrt()


def maximum(a: Tensor, b: Any) -> Tensor:
    """Elementwise maximum, with broadcasting."""
    return _check(a, "maximum").maximum(b)


def minimum(a: Tensor, b: Any) -> Tensor:
    """Elementwise minimum, with broadcasting."""
    return _check(a, "minimum").minimum(b)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product as torch.matmul (2-D, batched N-D, 1-D operands)."""
    return _check(a, "matmul").matmul(b)


def softmax(x: Tensor, dim: int) -> Tensor:
    """softmax along dim, numerically stable."""
    return _check(x, "softmax").softmax(dim)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    """log(softmax) along dim, numerically stable."""
    return _check(x, "log_softmax").log_softmax(dim)


def logsumexp(x: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over dim, numerically stable."""
    return _check(x, "logsumexp").logsumexp(dim, keepdim)


def sum(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Sum over dim."""
    return _check(x, "sum").sum(dim, keepdim)


def mean(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Mean over dim."""
    return _check(x, "mean").mean(dim, keepdim)


def prod(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Product over dim."""
    return _check(x, "prod").prod(dim, keepdim)


def max(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Maximum over dim (values only)."""
    return _check(x, "max").max(dim, keepdim)


def min(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Minimum over dim (values only)."""
    return _check(x, "min").min(dim, keepdim)


def argmax(x: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    """Index of the first maximum (as floats)."""
    return _check(x, "argmax").argmax(dim, keepdim)


def argmin(x: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    """Index of the first minimum (as floats)."""
    return _check(x, "argmin").argmin(dim, keepdim)


def reshape(x: Tensor, *shape: Any) -> Tensor:
    """x.reshape(shape)."""
    return _check(x, "reshape").reshape(*shape)


def permute(x: Tensor, *dims: Any) -> Tensor:
    """x.permute(dims)."""
    return _check(x, "permute").permute(*dims)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """x.transpose(dim0, dim1)."""
    return _check(x, "transpose").transpose(dim0, dim1)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """x.unsqueeze(dim)."""
    return _check(x, "unsqueeze").unsqueeze(dim)


def squeeze(x: Tensor, dim: Any = None) -> Tensor:
    """x.squeeze(dim)."""
    return _check(x, "squeeze").squeeze(dim)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """x.flatten(start_dim, end_dim)."""
    return _check(x, "flatten").flatten(start_dim, end_dim)


def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """x.gather(dim, index)."""
    return _check(x, "gather").gather(dim, index)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenates tensors along an existing dim."""
    return autograd.Cat.apply(dim, *_tensor_list(tensors, "cat"))


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stacks tensors of one shape along a new dim."""
    return autograd.Stack.apply(dim, *_tensor_list(tensors, "stack"))


def where(condition: Tensor, a: Any, b: Any) -> Tensor:
    """a where condition is non-zero, else b (broadcast together)."""
    return autograd.Where.apply(condition, a, b)
