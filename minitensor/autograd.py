"""autograd: reverse-mode automatic differentiation over minitensor's raw ops.

How it fits together (the torch vocabulary):

- A ``Function`` subclass has a ``forward(ctx, *args)`` that computes its
  result with the raw ops of minitensor/ops.py, and a ``backward(ctx, grad)``
  that turns the gradient of the result into one gradient per argument of
  forward (``None`` for arguments that are not tensors or need none). Both
  are static methods; ``ctx`` is the node of the graph (an instance of the
  Function class) and carries what forward saved for backward.
- ``Function.apply(*args)`` runs forward with gradient recording off. When
  recording is on (outside ``no_grad()``) and a tensor argument requires a
  gradient, the result gets ``requires_grad = True`` and ``grad_fn = ctx``:
  that is the graph. Tensors without a ``grad_fn`` are leaves.
- ``backward(t)`` sorts the nodes reachable from ``t.grad_fn`` in reverse
  topological order (iteratively: deep graphs must not hit Python's recursion
  limit), calls each node's backward exactly once with the sum of the
  gradients of its result, and accumulates into ``.grad`` of the leaves that
  require a gradient (and of non-leaves that asked with ``retain_grad()``).

Every gradient is computed by the library's own kernels through ops.py, never
by NumPy. Gradients are not themselves differentiable (no ``create_graph``).

Rules of this file:

- ``unbroadcast(grad, shape)`` is the one place where broadcasting is undone;
  every rule of a broadcasting op calls it.
- max/min over one dim send the gradient to the index the forward picked
  (the first maximum/minimum, as torch's ``max(dim)`` does); max/min over
  every element, or a tuple of dims, split it evenly among the tied
  elements (as torch's ``max()`` and ``amax`` do). ``maximum``/``minimum``
  give half to each side of a tie (as torch does).
- Tensors saved for backward are stored as detached aliases (same storage,
  no ``grad_fn``), so a result never refers to itself through its node and
  is freed by reference counting, without waiting for the cycle collector.
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from . import ops
from ._shape import as_shape, broadcast_shapes, keepdim_shape, normalize_dim, numel, reduce_dims

if TYPE_CHECKING:
    from .tensor import Tensor

# ---- gradient mode -----------------------------------------------------------------------

_state = threading.local()


def is_grad_enabled() -> bool:
    """Whether ops record the graph (False inside ``no_grad()``)."""
    return getattr(_state, "enabled", True)


def _set_grad_enabled(mode: bool) -> None:
    _state.enabled = mode


class _GradMode:
    """A context manager (and decorator) that sets the gradient mode for its body."""

    mode = True

    def __enter__(self) -> None:
        self._previous = is_grad_enabled()
        _set_grad_enabled(self.mode)

    def __exit__(self, *exc: Any) -> None:
        _set_grad_enabled(self._previous)

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)():
                return func(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):  # noqa: N801 - torch's name
    """Turns gradient recording off: ``with mt.no_grad(): ...`` or ``@mt.no_grad()``."""

    mode = False


class enable_grad(_GradMode):  # noqa: N801 - torch's name
    """Turns gradient recording back on inside a ``no_grad()`` block."""

    mode = True


# ---- the Function base class and the graph -------------------------------------------------


def _detached(t: Tensor) -> Tensor:
    """A new Tensor object over t's storage, outside any graph."""
    return t._alias(t.shape, t.strides, t._offset)


class Function:
    """Base class of a differentiable operation; subclass it with static
    ``forward(ctx, *args)`` and ``backward(ctx, grad)`` and call ``apply``.

    Inside forward, ``ctx.save_for_backward(*tensors)`` keeps tensors for
    backward (read them back as ``ctx.saved_tensors``); other values can be
    stored as plain attributes of ctx. ``ctx.needs_input_grad[i]`` says
    whether argument i needs a gradient, so backward may skip work.
    """

    def __init__(self) -> None:
        self.inputs: tuple[Any, ...] = ()  # the arguments of forward (tensors and others)
        self.needs_input_grad: tuple[bool, ...] = ()
        self._saved: tuple[Tensor, ...] = ()
        self._freed = False
        self._retained: Optional[weakref.ref] = None  # the result, when it called retain_grad()

    def save_for_backward(self, *tensors: Optional[Tensor]) -> None:
        """Keeps tensors (or None) for backward."""
        for t in tensors:
            if t is not None and not ops.is_tensor(t):
                raise TypeError(f"save_for_backward() takes tensors or None, got {type(t).__name__}")
        self._saved = tuple(None if t is None else _detached(t) for t in tensors)

    @property
    def saved_tensors(self) -> tuple[Tensor, ...]:
        if self._freed:
            raise RuntimeError(
                f"Trying to backward through the graph a second time ({type(self).__name__} has "
                f"already freed its saved tensors); call .backward(retain_graph=True) the first "
                f"time if you need to"
            )
        return self._saved

    @staticmethod
    def forward(ctx: Function, *args: Any) -> Tensor:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Function, grad: Tensor) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any) -> Tensor:
        """Runs forward on args; records a node when one of them requires a gradient."""
        # One pass over the arguments decides whether a node is recorded; when
        # it is not (grad mode off, or no input requires grad), the op costs
        # little more than the raw op.
        grad_enabled = is_grad_enabled()
        record = False
        if grad_enabled:
            for a in args:
                if ops.is_tensor(a) and a.requires_grad:
                    record = True
                    break
        ctx = cls()
        if grad_enabled:
            # As `with no_grad():`, without building a context manager.
            _set_grad_enabled(False)
            try:
                out = cls.forward(ctx, *args)
            finally:
                _set_grad_enabled(True)
        else:
            out = cls.forward(ctx, *args)
        for a in args:
            if out is a:
                out = _detached(out)  # never turn an input into its own result
                break
        if record:
            ctx.inputs = args
            ctx.needs_input_grad = tuple(ops.is_tensor(a) and a.requires_grad for a in args)
            out.requires_grad = True
            out.grad_fn = ctx
        return out


def retain_grad(t: Tensor) -> None:
    """Makes backward fill t.grad although t is not a leaf."""
    if not t.requires_grad:
        raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
    if t.grad_fn is not None:
        t.grad_fn._retained = weakref.ref(t)


def _accumulate(t: Tensor, grad: Tensor) -> None:
    """t.grad += grad (a fresh contiguous tensor the first time, never an alias of grad)."""
    t.grad = ops.clone(grad) if t.grad is None else ops.add(t.grad, grad)


def _check_grad(node: Function, t: Tensor, grad: Any) -> Tensor:
    """grad as a gradient of t: same shape (else the rule is wrong), t's dtype."""
    if not ops.is_tensor(grad):
        raise TypeError(f"{type(node).__name__}.backward returned {type(grad).__name__}, not a Tensor")
    if grad.shape != t.shape:
        raise RuntimeError(
            f"{type(node).__name__}.backward returned a gradient of shape {grad.shape} for an "
            f"input of shape {t.shape}"
        )
    return ops.cast(grad, t.dtype)


def _topological_order(root: Function) -> list[Function]:
    """The nodes reachable from root, each once, every node before the nodes it
    consumes (reverse post-order of an iterative depth-first search)."""
    post_order: list[Function] = []
    visited: set[int] = set()
    stack: list[tuple[Function, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            post_order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        for x in node.inputs:
            if ops.is_tensor(x) and x.grad_fn is not None and id(x.grad_fn) not in visited:
                stack.append((x.grad_fn, False))
    post_order.reverse()
    return post_order


# Callbacks to run once the current backward pass has finished (torch's
# queue_callback): minitensor.distributed's DistributedDataParallel queues the
# gradient all-reduce here, when every .grad of the pass has been accumulated.
_queued_callbacks: list[Any] = []


def queue_callback(fn: Any) -> None:
    """Runs fn() at the end of the backward pass that is running now."""
    _queued_callbacks.append(fn)


def backward(t: Tensor, gradient: Optional[Tensor] = None, retain_graph: bool = False) -> None:
    """Accumulates d(t)/d(leaf), weighted by gradient, into leaf.grad for every
    leaf of t's graph that requires a gradient. gradient may be omitted only
    when t has one element (it is then 1)."""
    if not t.requires_grad:
        raise RuntimeError(
            "backward(): the tensor does not require grad and has no grad_fn (did you create "
            "the inputs with requires_grad=True, or compute it inside no_grad()?)"
        )
    if gradient is None:
        if t.numel() != 1:
            raise RuntimeError(
                f"backward(): grad can be implicitly created only for scalar outputs; this tensor "
                f"has shape {t.shape}: pass gradient= (a tensor of that shape)"
            )
        gradient = ops.fill_(t.new_empty(t.shape), 1.0)
    elif not ops.is_tensor(gradient):
        raise TypeError(f"backward(): gradient must be a Tensor, got {type(gradient).__name__}")
    elif gradient.shape != t.shape:
        raise ops.ShapeError(
            f"backward(): gradient of shape {gradient.shape} does not match the tensor's shape {t.shape}"
        )
    gradient = ops.cast(gradient, t.dtype)
    if t.grad_fn is None:
        _accumulate(t, gradient)
        return
    with no_grad():
        _queued_callbacks.clear()  # left over from a pass that raised
        pending: dict[int, Tensor] = {id(t.grad_fn): gradient}
        for node in _topological_order(t.grad_fn):
            grad = pending.pop(id(node))
            retained = node._retained() if node._retained is not None else None
            if retained is not None:
                _accumulate(retained, grad)
            input_grads = node.backward(node, grad)
            if not isinstance(input_grads, tuple):
                input_grads = (input_grads,)
            if len(input_grads) > len(node.inputs) and all(g is None for g in input_grads[len(node.inputs):]):
                input_grads = input_grads[: len(node.inputs)]  # defaulted arguments (as torch allows)
            if len(input_grads) != len(node.inputs):
                raise RuntimeError(
                    f"{type(node).__name__}.backward returned {len(input_grads)} gradients for "
                    f"{len(node.inputs)} inputs"
                )
            if not retain_graph:
                node._saved = ()
                node._freed = True
            for x, needed, g in zip(node.inputs, node.needs_input_grad, input_grads):
                if not needed or g is None:
                    continue
                g = _check_grad(node, x, g)
                if x.grad_fn is None:
                    _accumulate(x, g)
                else:
                    key = id(x.grad_fn)
                    pending[key] = ops.add(pending[key], g) if key in pending else g
        while _queued_callbacks:
            _queued_callbacks.pop(0)()


# ---- helpers of the rules ------------------------------------------------------------------


def unbroadcast(grad: Tensor, shape: Sequence[int]) -> Tensor:
    """grad summed down to shape: undoes NumPy broadcasting of a tensor of shape to grad.shape.

    The leading dims that broadcasting added are summed away, and so are the
    dims where shape has 1 but grad does not.
    """
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(
        lead + d for d, size in enumerate(shape) if size == 1 and grad.shape[lead + d] != 1
    )
    if dims:
        grad = ops.reduce_("sum", grad, dims, keepdim=True)
    return ops.reshape(grad, shape)


def _expand_reduced(grad: Tensor, shape: Sequence[int], dims: Sequence[int]) -> Tensor:
    """The gradient of a reduction's result, viewed with keepdim and expanded to the input's shape."""
    return ops.expand(ops.reshape(grad, keepdim_shape(shape, dims)), tuple(shape))


def _scalar_like(value: float, like: Tensor) -> Tensor:
    """A 0-d tensor holding value, in like's dtype."""
    return ops.fill_(like.new_empty((), dtype=like.dtype), value)


def _zeros(shape: Sequence[int], like: Tensor) -> Tensor:
    """A new tensor of zeros of shape, in like's dtype."""
    return ops.fill_(like.new_empty(tuple(shape), dtype=like.dtype), 0.0)


def _numbers(*args: Any) -> tuple[Any, ...]:
    """The Python numbers among args, None in place of the tensors (those are saved
    with save_for_backward): rules with an operand that may be either keep both."""
    return tuple(None if ops.is_tensor(x) else x for x in args)


# ---- elementwise arithmetic (a, b: tensors or Python numbers) ------------------------------


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (getattr(a, "shape", ()), getattr(b, "shape", ()))
        return ops.add(a, b)

    @staticmethod
    def backward(ctx, grad):
        ga = unbroadcast(grad, ctx.shapes[0]) if ctx.needs_input_grad[0] else None
        gb = unbroadcast(grad, ctx.shapes[1]) if ctx.needs_input_grad[1] else None
        return ga, gb


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (getattr(a, "shape", ()), getattr(b, "shape", ()))
        return ops.sub(a, b)

    @staticmethod
    def backward(ctx, grad):
        ga = unbroadcast(grad, ctx.shapes[0]) if ctx.needs_input_grad[0] else None
        gb = unbroadcast(ops.map_("neg", grad), ctx.shapes[1]) if ctx.needs_input_grad[1] else None
        return ga, gb


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(*(x if ops.is_tensor(x) else None for x in (a, b)))
        ctx.scalars = _numbers(a, b)
        return ops.mul(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = (s if t is None else t for t, s in zip(ctx.saved_tensors, ctx.scalars))
        ga = unbroadcast(ops.mul(grad, b), a.shape) if ctx.needs_input_grad[0] else None
        gb = unbroadcast(ops.mul(grad, a), b.shape) if ctx.needs_input_grad[1] else None
        return ga, gb


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        out = ops.div(a, b)
        ctx.save_for_backward(b if ops.is_tensor(b) else None, out)
        ctx.scalars = _numbers(a, b)
        ctx.shapes = (getattr(a, "shape", ()), getattr(b, "shape", ()))
        return out

    @staticmethod
    def backward(ctx, grad):
        b, out = ctx.saved_tensors
        b = ctx.scalars[1] if b is None else b
        ga = unbroadcast(ops.div(grad, b), ctx.shapes[0]) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:  # d(a/b)/db = -a/b**2 = -out/b
            gb = unbroadcast(ops.map_("neg", ops.div(ops.mul(grad, out), b)), ctx.shapes[1])
        return ga, gb


class Pow(Function):
    """a ** b for a tensor or a number on either side."""

    @staticmethod
    def forward(ctx, a, b):
        out = ops.pow(a, b)
        ctx.save_for_backward(*(x if ops.is_tensor(x) else None for x in (a, b)), out)
        ctx.scalars = _numbers(a, b)
        return out

    @staticmethod
    def backward(ctx, grad):
        ta, tb, out = ctx.saved_tensors
        a, b = (s if t is None else t for t, s in zip((ta, tb), ctx.scalars))
        ga = gb = None
        if ctx.needs_input_grad[0]:  # b * a**(b-1), and 0 where b == 0 (also at a == 0)
            if tb is None:
                local = ops.mul(ops.pow(a, b - 1), b) if b != 0 else _zeros(a.shape, a)
            else:
                local = ops.where(ops.zip_("eq", b, 0.0), 0.0, ops.mul(b, ops.pow(a, ops.sub(b, 1.0))))
            ga = unbroadcast(ops.mul(grad, local), a.shape)
        if ctx.needs_input_grad[1]:  # a**b * log(a), and 0 where a == 0 and b >= 0
            base = _scalar_like(a, out) if ta is None else a
            zero_base = ops.mul(ops.zip_("eq", base, 0.0), ops.zip_("ge", b, 0.0))
            local = ops.where(zero_base, 0.0, ops.mul(out, ops.map_("log", base)))
            gb = unbroadcast(ops.mul(grad, local), b.shape)
        return ga, gb


class Maximum(Function):
    """Elementwise maximum; a tie sends half of the gradient to each side (as torch)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(*(x if ops.is_tensor(x) else None for x in (a, b)))
        ctx.scalars = _numbers(a, b)
        return ops.maximum(a, b)

    @staticmethod
    def backward(ctx, grad):
        return _select_backward(ctx, grad, "gt")


class Minimum(Function):
    """Elementwise minimum; a tie sends half of the gradient to each side (as torch)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(*(x if ops.is_tensor(x) else None for x in (a, b)))
        ctx.scalars = _numbers(a, b)
        return ops.minimum(a, b)

    @staticmethod
    def backward(ctx, grad):
        return _select_backward(ctx, grad, "lt")


def _select_backward(ctx: Function, grad: Tensor, wins: str) -> tuple[Any, Any]:
    """Gradients of maximum ("gt": a wins where a > b) or minimum ("lt")."""
    a, b = (s if t is None else t for t, s in zip(ctx.saved_tensors, ctx.scalars))
    share_a = ops.add(ops.zip_(wins, a, b), ops.mul(ops.zip_("eq", a, b), 0.5))  # 1, 0 or 0.5
    ga = unbroadcast(ops.mul(grad, share_a), a.shape) if ctx.needs_input_grad[0] else None
    gb = unbroadcast(ops.mul(grad, ops.sub(1.0, share_a)), b.shape) if ctx.needs_input_grad[1] else None
    return ga, gb


class Where(Function):
    """a where cond is non-zero, else b; cond gets no gradient."""

    @staticmethod
    def forward(ctx, cond, a, b):
        out = ops.where(cond, a, b)
        ctx.save_for_backward(cond)
        ctx.shapes = (getattr(a, "shape", ()), getattr(b, "shape", ()))
        return out

    @staticmethod
    def backward(ctx, grad):
        (cond,) = ctx.saved_tensors
        ga = unbroadcast(ops.where(cond, grad, 0.0), ctx.shapes[0]) if ctx.needs_input_grad[1] else None
        gb = unbroadcast(ops.where(cond, 0.0, grad), ctx.shapes[1]) if ctx.needs_input_grad[2] else None
        return None, ga, gb


# ---- elementwise functions of one tensor ----------------------------------------------------


class Neg(Function):
    @staticmethod
    def forward(ctx, x):
        return ops.map_("neg", x)

    @staticmethod
    def backward(ctx, grad):
        return ops.map_("neg", grad)


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        out = ops.map_("exp", x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return ops.mul(grad, out)


class Log(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ops.map_("log", x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return ops.div(grad, x)


class Relu(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ops.map_("relu", x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return ops.relu_backward(grad, x)  # 0 at x == 0, as torch


class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        out = ops.map_("sigmoid", x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return ops.mul(grad, ops.mul(out, ops.sub(1.0, out)))


class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        out = ops.map_("tanh", x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return ops.mul(grad, ops.sub(1.0, ops.mul(out, out)))


class Abs(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ops.map_("abs", x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return ops.mul(grad, ops.map_("sign", x))  # 0 at x == 0, as torch


class Sqrt(Function):
    @staticmethod
    def forward(ctx, x):
        out = ops.map_("sqrt", x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return ops.div(grad, ops.mul(out, 2.0))


class Reciprocal(Function):
    @staticmethod
    def forward(ctx, x):
        out = ops.map_("reciprocal", x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return ops.map_("neg", ops.mul(grad, ops.mul(out, out)))


# ---- reductions ----------------------------------------------------------------------------


class Sum(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        out = ops.reduce_("sum", x, dim, keepdim)
        ctx.in_shape = x.shape
        ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        return out

    @staticmethod
    def backward(ctx, grad):
        return _expand_reduced(grad, ctx.in_shape, ctx.dims), None, None


class Mean(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        out = ops.mean(x, dim, keepdim)
        ctx.in_shape = x.shape
        ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        return out

    @staticmethod
    def backward(ctx, grad):
        count = numel(ctx.in_shape[d] for d in ctx.dims)
        scale = 1.0 / count if count else math.nan
        return ops.mul(_expand_reduced(grad, ctx.in_shape, ctx.dims), scale), None, None


class Prod(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        out = ops.reduce_("prod", x, dim, keepdim)
        ctx.save_for_backward(x)
        ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        return out

    @staticmethod
    def backward(ctx, grad):
        # d prod / d x_i = the product of the other elements: prod/x_i without
        # zeros; with one zero, the product of the non-zeros at the zero and 0
        # elsewhere; with two or more zeros, 0 everywhere.
        (x,) = ctx.saved_tensors
        dims = ctx.dims
        is_zero = ops.zip_("eq", x, 0.0)
        zeros_in_row = ops.reduce_("sum", is_zero, dims, keepdim=True)
        safe = ops.where(is_zero, 1.0, x)
        prod_nonzero = ops.reduce_("prod", safe, dims, keepdim=True)
        no_zero = ops.mul(ops.div(prod_nonzero, safe), ops.zip_("eq", zeros_in_row, 0.0))
        one_zero = ops.mul(ops.mul(prod_nonzero, is_zero), ops.zip_("eq", zeros_in_row, 1.0))
        return ops.mul(_expand_reduced(grad, x.shape, dims), ops.add(no_zero, one_zero)), None, None


class Max(Function):
    """max over one dim (gradient to the first maximum, as torch's max(dim)) or over
    every element / a tuple of dims (split evenly among ties, as torch's max() and amax)."""

    op, arg_op = "max", "argmax"  # Min below changes only these

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        out = ops.reduce_(ctx.op, x, dim, keepdim)
        ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        ctx.by_index = dim is not None and not isinstance(dim, (tuple, list)) and x.ndim > 0
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        keep = keepdim_shape(x.shape, ctx.dims)
        if ctx.by_index:
            (d,) = ctx.dims
            index = ops.reduce_(ctx.arg_op, x, d, keepdim=True)
            return ops.scatter_add_(_zeros(x.shape, x), d, index, ops.reshape(grad, keep)), None, None
        is_selected = ops.zip_("eq", x, ops.reshape(out, keep))
        count = ops.reduce_("sum", is_selected, ctx.dims, keepdim=True)
        share = ops.div(ops.reshape(grad, keep), count)
        return ops.mul(is_selected, share), None, None


class Min(Max):
    op, arg_op = "min", "argmin"


class LogSumExp(Function):
    @staticmethod
    def forward(ctx, x, dim, keepdim=False):
        out = ops.logsumexp(x, dim, keepdim)
        ctx.dims = reduce_dims(dim, x.ndim, "reduction")
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        keep = keepdim_shape(x.shape, ctx.dims)
        softmax = ops.map_("exp", ops.sub(x, ops.reshape(out, keep)))  # stable: x - out <= 0
        return ops.mul(ops.reshape(grad, keep), softmax), None, None


class Softmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        out = ops.softmax(x, dim, log=False)
        ctx.dim = normalize_dim(dim, x.ndim, "softmax()") if x.ndim else None
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors  # dx = y * (grad - sum(grad * y))
        dot = ops.reduce_("sum", ops.mul(grad, y), ctx.dim, keepdim=True)
        return ops.mul(y, ops.sub(grad, dot)), None


class LogSoftmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        out = ops.softmax(x, dim, log=True)
        ctx.dim = normalize_dim(dim, x.ndim, "log_softmax()") if x.ndim else None
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors  # dx = grad - softmax * sum(grad)
        total = ops.reduce_("sum", grad, ctx.dim, keepdim=True)
        return ops.sub(grad, ops.mul(ops.map_("exp", out), total)), None


# ---- matmul --------------------------------------------------------------------------------


class MatMul(Function):
    """a @ b: 2-D, batched with broadcast batch dims, and 1-D operands (as torch.matmul)."""

    @staticmethod
    def forward(ctx, a, b):
        out = ops.matmul(a, b)
        ctx.save_for_backward(a, b)
        return out

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        a2 = ops.unsqueeze(a, 0) if a.ndim == 1 else a  # 1, K
        b2 = ops.unsqueeze(b, 1) if b.ndim == 1 else b  # K, 1
        batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2], "matmul()")
        g2 = ops.reshape(grad, batch + (a2.shape[-2], b2.shape[-1]))  # ..., M, N
        ga = gb = None
        if ctx.needs_input_grad[0]:  # ..., M, K
            ga = ops.reshape(unbroadcast(ops.matmul(g2, ops.transpose(b2, -2, -1)), a2.shape), a.shape)
        if ctx.needs_input_grad[1]:  # ..., K, N
            gb = ops.reshape(unbroadcast(ops.matmul(ops.transpose(a2, -2, -1), g2), b2.shape), b.shape)
        return ga, gb


# ---- views and copies ------------------------------------------------------------------------


class View(Function):
    """A view with a new shape; the shape-only views below share its backward."""

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        return ops.view(x, shape)

    @staticmethod
    def backward(ctx, grad):
        return (ops.reshape(grad, ctx.in_shape),) + (None,) * (len(ctx.inputs) - 1)


class Reshape(View):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        return ops.reshape(x, shape)


class Squeeze(View):
    @staticmethod
    def forward(ctx, x, dim=None):
        ctx.in_shape = x.shape
        return ops.squeeze(x, dim)


class Unsqueeze(View):
    @staticmethod
    def forward(ctx, x, dim):
        ctx.in_shape = x.shape
        return ops.unsqueeze(x, dim)


class Flatten(View):
    @staticmethod
    def forward(ctx, x, start_dim=0, end_dim=-1):
        ctx.in_shape = x.shape
        return ops.flatten(x, start_dim, end_dim)


class Permute(Function):
    @staticmethod
    def forward(ctx, x, dims):
        out = ops.permute(x, dims)
        ctx.dims = tuple(normalize_dim(d, x.ndim, "permute()") for d in as_shape(dims, "permute()"))
        return out

    @staticmethod
    def backward(ctx, grad):
        inverse = [0] * len(ctx.dims)
        for i, d in enumerate(ctx.dims):
            inverse[d] = i
        return ops.permute(grad, inverse), None


class Transpose(Function):
    @staticmethod
    def forward(ctx, x, dim0, dim1):
        ctx.dims = (dim0, dim1)
        return ops.transpose(x, dim0, dim1)

    @staticmethod
    def backward(ctx, grad):
        return ops.transpose(grad, *ctx.dims), None, None


class Expand(Function):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        return ops.expand(x, shape)

    @staticmethod
    def backward(ctx, grad):
        return unbroadcast(grad, ctx.in_shape), None


class Index(Function):
    """Basic indexing x[key]; backward writes grad into the same view of zeros."""

    @staticmethod
    def forward(ctx, x, key):
        ctx.key = key
        ctx.in_shape = x.shape
        return ops.index(x, key)

    @staticmethod
    def backward(ctx, grad):
        out = _zeros(ctx.in_shape, grad)
        ops.copy_(ops.index(out, ctx.key), grad)  # basic indices never repeat an element
        return out, None


class Narrow(Function):
    @staticmethod
    def forward(ctx, x, dim, start, length):
        ctx.args = (dim, start, length)
        ctx.in_shape = x.shape
        return ops.narrow(x, dim, start, length)

    @staticmethod
    def backward(ctx, grad):
        out = _zeros(ctx.in_shape, grad)
        ops.copy_(ops.narrow(out, *ctx.args), grad)
        return out, None, None, None


class Contiguous(Function):
    @staticmethod
    def forward(ctx, x):
        return ops.contiguous(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Clone(Function):
    @staticmethod
    def forward(ctx, x):
        return ops.clone(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Cast(Function):
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.in_dtype = x.dtype
        return ops.cast(x, dtype)

    @staticmethod
    def backward(ctx, grad):
        return ops.cast(grad, ctx.in_dtype), None


# ---- gather, scatter, joining --------------------------------------------------------------


class Gather(Function):
    """out[i][j] = x[i][index[i][j]] along dim; backward scatter-adds into zeros."""

    @staticmethod
    def forward(ctx, x, dim, index):
        out = ops.gather(x, dim, index)
        ctx.dim = dim
        ctx.save_for_backward(x, index)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, index = ctx.saved_tensors
        return ops.scatter_add_(_zeros(x.shape, grad), ctx.dim, index, grad), None, None


class ScatterAdd(Function):
    """A copy of x with src added at index along dim."""

    @staticmethod
    def forward(ctx, x, dim, index, src):
        out = ops.scatter_add(x, dim, index, src)
        ctx.dim = dim
        ctx.save_for_backward(index)
        return out

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        gsrc = ops.gather(grad, ctx.dim, index) if ctx.needs_input_grad[3] else None
        return grad, None, None, gsrc


class Cat(Function):
    """cat along dim; called as Cat.apply(dim, *tensors)."""

    @staticmethod
    def forward(ctx, dim, *tensors):
        out = ops.cat(list(tensors), dim)
        ctx.dim = normalize_dim(dim, out.ndim, "cat()")
        ctx.sizes = [t.shape[ctx.dim] for t in tensors]
        return out

    @staticmethod
    def backward(ctx, grad):
        grads, start = [], 0
        for size in ctx.sizes:
            grads.append(ops.narrow(grad, ctx.dim, start, size))
            start += size
        return (None, *grads)


class Stack(Function):
    """stack along a new dim; called as Stack.apply(dim, *tensors)."""

    @staticmethod
    def forward(ctx, dim, *tensors):
        out = ops.stack(list(tensors), dim)
        ctx.dim = normalize_dim(dim, out.ndim, "stack()")
        return out

    @staticmethod
    def backward(ctx, grad):
        before = (slice(None),) * ctx.dim
        return (None, *(ops.index(grad, before + (i,)) for i in range(len(ctx.inputs) - 1)))
