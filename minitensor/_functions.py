"""_functions: torch's free functions (mt.exp(x), mt.sum(x, dim), mt.cat(...), ...).

Each checks that it got a Tensor and calls the Tensor method, so autograd
applies; cat, stack and where, which have no single Tensor to call on,
apply their gradient rule themselves.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from . import autograd
from ._shape import broadcast_shapes as _broadcast_pair
from ._shape import dim_or_axis
from .tensor import Tensor


def _tensor_list(tensors: Any, func: str) -> tuple[Tensor, ...]:
    """The tensors of cat()/stack() as a tuple (a list or tuple, not empty)."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) == 0:
        raise ValueError(f"{func}(): expected a non-empty list or tuple of tensors")
    return tuple(tensors)


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


def erf(x: Tensor) -> Tensor:
    """The error function, elementwise."""
    return _check(x, "erf").erf()


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


def softmax(x: Tensor, dim: Optional[int] = None, *, axis: Optional[int] = None) -> Tensor:
    """softmax along dim (or axis=), numerically stable."""
    return _check(x, "softmax").softmax(dim, axis=axis)


def log_softmax(x: Tensor, dim: Optional[int] = None, *, axis: Optional[int] = None) -> Tensor:
    """log(softmax) along dim (or axis=), numerically stable."""
    return _check(x, "log_softmax").log_softmax(dim, axis=axis)


def logsumexp(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """log(sum(exp(x))) over dim (or axis=), numerically stable."""
    return _check(x, "logsumexp").logsumexp(dim, keepdim, axis=axis)


def sum(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:  # noqa: A001
    """Sum over dim."""
    return _check(x, "sum").sum(dim, keepdim, axis=axis)


def mean(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Mean over dim."""
    return _check(x, "mean").mean(dim, keepdim, axis=axis)


def prod(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Product over dim."""
    return _check(x, "prod").prod(dim, keepdim, axis=axis)


def max(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:  # noqa: A001
    """Maximum: a tensor, or (values, indices) over an int dim (see Tensor.max)."""
    return _check(x, "max").max(dim, keepdim, axis=axis)


def min(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:  # noqa: A001
    """Minimum: a tensor, or (values, indices) over an int dim (see Tensor.min)."""
    return _check(x, "min").min(dim, keepdim, axis=axis)


def amax(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Maximum over dim, values only."""
    return _check(x, "amax").amax(dim, keepdim, axis=axis)


def amin(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Minimum over dim, values only."""
    return _check(x, "amin").amin(dim, keepdim, axis=axis)


def argmax(x: Tensor, dim: Optional[int] = None, keepdim: bool = False, *, axis: Optional[int] = None) -> Tensor:
    """Index of the first maximum, int64."""
    return _check(x, "argmax").argmax(dim, keepdim, axis=axis)


def argmin(x: Tensor, dim: Optional[int] = None, keepdim: bool = False, *, axis: Optional[int] = None) -> Tensor:
    """Index of the first minimum, int64."""
    return _check(x, "argmin").argmin(dim, keepdim, axis=axis)


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


def cat(tensors: Sequence[Tensor], dim: Optional[int] = None, *, axis: Optional[int] = None) -> Tensor:
    """Concatenates tensors along an existing dim (0 unless dim or axis says)."""
    dim = dim_or_axis(dim, axis, "cat()")
    return autograd.Cat.apply(0 if dim is None else dim, *_tensor_list(tensors, "cat"))


def concatenate(tensors: Sequence[Tensor], dim: Optional[int] = None, *, axis: Optional[int] = None) -> Tensor:
    """cat under NumPy's name (torch.concatenate)."""
    return cat(tensors, dim, axis=axis)


def stack(tensors: Sequence[Tensor], dim: Optional[int] = None, *, axis: Optional[int] = None) -> Tensor:
    """Stacks tensors of one shape along a new dim (0 unless dim or axis says)."""
    dim = dim_or_axis(dim, axis, "stack()")
    return autograd.Stack.apply(0 if dim is None else dim, *_tensor_list(tensors, "stack"))


def where(condition: Tensor, a: Any, b: Any) -> Tensor:
    """a where condition is non-zero, else b (broadcast together)."""
    return autograd.Where.apply(condition, a, b)


def clamp(x: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 - torch's names
    """x limited to [min, max] (see Tensor.clamp)."""
    return _check(x, "clamp").clamp(min, max)


clip = clamp


def var(x: Tensor, dim: Any = None, unbiased: Optional[bool] = None, keepdim: bool = False, *,
        correction: Optional[float] = None, axis: Any = None) -> Tensor:
    """The variance over dim (see Tensor.var)."""
    return _check(x, "var").var(dim, unbiased, keepdim, correction=correction, axis=axis)


def std(x: Tensor, dim: Any = None, unbiased: Optional[bool] = None, keepdim: bool = False, *,
        correction: Optional[float] = None, axis: Any = None) -> Tensor:
    """The standard deviation over dim (see Tensor.std)."""
    return _check(x, "std").std(dim, unbiased, keepdim, correction=correction, axis=axis)


def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    """The shape that tensors of these shapes broadcast to (NumPy's rules)."""
    out: tuple[int, ...] = ()
    for shape in shapes:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        out = _broadcast_pair(out, shape, "broadcast_shapes()")
    return out


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """Views of the tensors, each expanded to their common broadcast shape."""
    for t in tensors:
        _check(t, "broadcast_tensors")
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t.expand(shape) for t in tensors)


def isclose(a: Tensor, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Where |a - b| <= atol + rtol * |b| (b broadcast), as torch.isclose (Tensor.isclose)."""
    return _check(a, "isclose").isclose(b, rtol, atol, equal_nan)


def allclose(a: Tensor, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every element of isclose(a, b, ...) holds, as torch.allclose (a bool)."""
    return _check(a, "allclose").allclose(b, rtol, atol, equal_nan)


def all(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:  # noqa: A001 - torch's name
    """Whether every element (along dim) is non-zero, as torch.all (Tensor.all)."""
    return _check(x, "all").all(dim, keepdim, axis=axis)


def any(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:  # noqa: A001 - torch's name
    """Whether some element (along dim) is non-zero, as torch.any (Tensor.any)."""
    return _check(x, "any").any(dim, keepdim, axis=axis)


# ---- int64 and bool tensors --------------------------------------------------------------


def floor_divide(a: Tensor, b: Any) -> Tensor:
    """a // b, rounded toward -inf (torch.floor_divide)."""
    return _check(a, "floor_divide").floor_divide(b)


def remainder(a: Tensor, b: Any) -> Tensor:
    """a % b, with the sign of b (torch.remainder)."""
    return _check(a, "remainder").remainder(b)


def bitwise_and(a: Tensor, b: Any) -> Tensor:
    """a & b, for int64 and bool tensors."""
    return _check(a, "bitwise_and").bitwise_and(b)


def bitwise_or(a: Tensor, b: Any) -> Tensor:
    """a | b, for int64 and bool tensors."""
    return _check(a, "bitwise_or").bitwise_or(b)


def bitwise_xor(a: Tensor, b: Any) -> Tensor:
    """a ^ b, for int64 and bool tensors."""
    return _check(a, "bitwise_xor").bitwise_xor(b)


def bitwise_not(x: Tensor) -> Tensor:
    """~x, for int64 and bool tensors."""
    return _check(x, "bitwise_not").bitwise_not()


def logical_and(a: Tensor, b: Any) -> Tensor:
    """Both non-zero, as a bool tensor."""
    return _check(a, "logical_and").logical_and(b)


def logical_or(a: Tensor, b: Any) -> Tensor:
    """Either non-zero, as a bool tensor."""
    return _check(a, "logical_or").logical_or(b)


def logical_xor(a: Tensor, b: Any) -> Tensor:
    """Exactly one non-zero, as a bool tensor."""
    return _check(a, "logical_xor").logical_xor(b)


def logical_not(x: Tensor) -> Tensor:
    """Zero, as a bool tensor."""
    return _check(x, "logical_not").logical_not()


def masked_fill(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    """A copy of x with value where the bool mask is True."""
    return _check(x, "masked_fill").masked_fill(mask, value)


def nonzero(x: Tensor, as_tuple: bool = False) -> Any:
    """The indices of the non-zero elements of x (torch.nonzero)."""
    return _check(x, "nonzero").nonzero(as_tuple)


def count_nonzero(x: Tensor, dim: Any = None, *, axis: Any = None) -> Tensor:
    """How many elements of x (along dim, or axis=) are non-zero, as int64."""
    return _check(x, "count_nonzero").count_nonzero(dim, axis=axis)


def is_floating_point(x: Tensor) -> bool:
    """Whether x is a float32 or float64 tensor."""
    return _check(x, "is_floating_point").is_floating_point()
