"""engine: reverse-mode automatic differentiation, the part to study first.

How it fits together (the torch vocabulary):

- A ``Variable`` is an Array (minitensor/_array.py) with an autograd
  record: ``requires_grad``, ``grad`` and ``grad_fn``. The Tensor of
  minitensor/tensor.py is a Variable with torch's methods.
- A ``Function`` subclass has a ``forward(ctx, *args)`` that computes its
  result with the raw ops of minitensor/ops/, and a ``backward(ctx, grad)``
  that turns the gradient of the result into one gradient per argument of
  forward (``None`` for arguments that are not tensors or need none). Both
  are static methods; ``ctx`` is the node of the graph (an instance of the
  Function class) and carries what forward saved for backward. The rules of
  minitensor (Add, Exp, Sum, MatMul, ...) are in the modules next to this one.
- ``Function.apply(*args)`` runs forward with gradient recording off. When
  recording is on (outside ``no_grad()``) and a tensor argument requires a
  gradient, the result gets ``requires_grad = True`` and ``grad_fn = ctx``:
  that is the graph. Tensors without a ``grad_fn`` are leaves.
- ``backward(t)`` orders the nodes reachable from ``t.grad_fn`` as torch's
  engine runs them (``topological_order``: the node recorded last first,
  which puts a node after every node that consumes its result), calls each
  node's backward exactly once with the sum of the gradients of its result,
  and accumulates into ``.grad`` of the leaves that require a gradient (and
  of non-leaves that asked with ``retain_grad()``).

The ops return plain Arrays; the engine hands every value that user code
sees (results, saved tensors, gradients) over as a Variable of the kind of
its inputs, through ``Variable._wrap`` (a Tensor's results are Tensors).
Gradients are not themselves differentiable (no ``create_graph``).

In-place ops are recorded as torch records them (minitensor/tensor.py): the
tensor's ``grad_fn`` is replaced by the node of the op, whose input is the
tensor's previous record. Each Storage has a version counter, bumped by every
in-place write into it (and so shared by a tensor and its views);
``save_for_backward`` notes the version of each tensor it keeps and
``saved_tensors`` raises RuntimeError if it changed since: backward would
otherwise compute with the changed values.

Tensors saved for backward are stored as detached aliases (same storage, no
``grad_fn``), so a result never refers to itself through its node and is
freed by reference counting, without waiting for the cycle collector.
"""

from __future__ import annotations

import functools
import itertools
import sys
import threading
import weakref
from operator import attrgetter
from typing import Any, Callable, Optional

from .. import ops
from .._array import Array, empty
from .._errors import ShapeError

# ---- gradient mode -----------------------------------------------------------------------

class _GradState(threading.local):
    """The gradient mode of one thread; on by default (a class-level default,
    so that a read is a plain field read, not a getattr with a fallback)."""

    enabled = True


_state = _GradState()


def is_grad_enabled() -> bool:
    """Whether ops record the graph (False inside ``no_grad()``)."""
    return _state.enabled


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


# ---- what the graph is made of ----------------------------------------------------------------


# How many post-accumulate-grad hooks are registered in the process: backward
# counts the leaves' uses (the work the hooks need) only when some are.
_hook_count = 0


def _forget_hooks(hooks: list) -> None:
    """A hooked leaf was freed: its remaining hooks leave the process's count."""
    global _hook_count
    _hook_count -= len(hooks)
    hooks.clear()


class RemovableHandle:
    """What register_post_accumulate_grad_hook returns: ``remove()`` takes the hook away."""

    def __init__(self, hooks: list, hook: Callable[[Any], None]) -> None:
        self._hooks: Optional[list] = hooks
        self._hook = hook

    def remove(self) -> None:
        global _hook_count
        if self._hooks is not None and self._hook in self._hooks:  # not already freed with its leaf
            self._hooks.remove(self._hook)
            _hook_count -= 1
        self._hooks = None


class Variable(Array):
    """An Array with an autograd record: requires_grad, grad and grad_fn.

    The class-level values are the record of a new value (a leaf that needs
    no gradient); an instance sets its own when they change.
    """

    _requires_grad: bool = False
    grad: Optional[Variable] = None
    grad_fn: Optional[Function] = None  # the node that made this value; None for a leaf

    def _set_requires_grad(self, value: bool) -> None:
        if value and not self._dtype.is_floating_point:
            raise RuntimeError(f"only tensors of floating point dtype can require gradients, "
                               f"got {self._dtype.name} (as in torch)")
        self._requires_grad = bool(value)

    # Read through a C getter (operator.attrgetter): every op asks each of its
    # inputs, and reading it then runs no Python function. Setting it checks
    # the dtype.
    requires_grad = property(attrgetter("_requires_grad"), _set_requires_grad,
                             doc="Whether backward() computes a gradient for this tensor (and records the "
                                 "ops on it). Only float tensors can require one, as in torch.")

    # Hooks run when backward has accumulated this leaf's gradient (None: none).
    _post_accumulate_grad_hooks: Optional[list[Callable[[Any], None]]] = None

    def register_post_accumulate_grad_hook(self, hook: Callable[[Any], None]) -> RemovableHandle:
        """Runs ``hook(tensor)`` in each backward pass once this leaf's ``.grad``
        holds every gradient of the pass (torch's hook of the same name: after
        the last accumulation into it, not once per use). DDP starts a
        bucket's all-reduce from here while the pass goes on. Returns a handle
        whose ``remove()`` unregisters it."""
        global _hook_count
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if not callable(hook):
            raise TypeError(f"register_post_accumulate_grad_hook: hook must be callable, got {type(hook).__name__}")
        if self._post_accumulate_grad_hooks is None:
            self._post_accumulate_grad_hooks = []
            # A leaf that dies with hooks still on it takes them out of the
            # count, so backward stops counting uses for hooks no one has.
            weakref.finalize(self, _forget_hooks, self._post_accumulate_grad_hooks)
        self._post_accumulate_grad_hooks.append(hook)
        _hook_count += 1
        return RemovableHandle(self._post_accumulate_grad_hooks, hook)

    def _wrap(self, array: Array) -> Variable:
        """array (a result of an op on this value) as a new value of the kind
        that ops on this value give, outside any graph. Tensor overrides it."""
        return Variable._from_array(array)


def _detached(t: Array) -> Array:
    """t outside any graph: a new Variable over a Variable's storage; a plain
    Array (what the ops return) is in no graph already."""
    return t._wrap(t) if isinstance(t, Variable) else t


class Function:
    """Base class of a differentiable operation; subclass it with static
    ``forward(ctx, *args)`` and ``backward(ctx, grad)`` and call ``apply``.

    Inside forward, ``ctx.save_for_backward(*tensors)`` keeps tensors for
    backward (read them back as ``ctx.saved_tensors``); other values can be
    stored as plain attributes of ctx. ``ctx.needs_input_grad[i]`` says
    whether argument i needs a gradient, so backward may skip work;
    ``ctx.records`` (in forward) whether the node is recorded at all.
    """

    # A node's fields, with their values before forward runs. Class-level
    # defaults (all immutable), so that making a node, which every op does,
    # runs no __init__; apply and save_for_backward set them per node.
    inputs: tuple[Any, ...] = ()  # the arguments of forward (tensors and others)
    # The grad_fn of each input when this node was recorded: the graph's
    # edges. An in-place op later gives the input tensor a new grad_fn;
    # this node must still send its gradient to the old one.
    input_fns: tuple[Optional[Function], ...] = ()
    needs_input_grad: tuple[bool, ...] = ()
    _saved: tuple[Optional[Array], ...] = ()
    _versions: tuple[int, ...] = ()  # the version of each saved tensor's storage, when saved
    _freed = False
    _retained: Optional[weakref.ref] = None  # the result, when it called retain_grad()
    # When apply recorded this node: 1 for the first node of the process, then
    # 2, 3, ... (torch's sequence number). backward runs the nodes in
    # decreasing order of it (topological_order). A node made by hand, not
    # through apply, keeps 0 and runs after every recorded node.
    sequence_nr = 0

    # Whether apply records this node (some input requires a gradient, with
    # grad mode on): when it does not, backward never runs, and
    # save_for_backward keeps nothing; a rule may test it to skip other work
    # that only backward needs.
    records = False

    def save_for_backward(self, *tensors: Optional[Array]) -> None:
        """Keeps tensors or arrays (or None) for backward."""
        for t in tensors:
            if t is not None and not isinstance(t, Array):
                raise TypeError(f"save_for_backward() takes tensors or None, got {type(t).__name__}")
        if not self.records:
            return
        saved = []
        versions = []
        for t in tensors:  # a loop, not a generator expression: no call per tensor
            # _detached(t), written out: a call less per saved tensor
            saved.append(t._wrap(t) if isinstance(t, Variable) else t)
            versions.append(0 if t is None else t._storage.version)
        self._saved = tuple(saved)
        self._versions = tuple(versions)

    @property
    def saved_tensors(self) -> tuple[Optional[Array], ...]:
        if self._freed:
            raise RuntimeError(
                f"Trying to backward through the graph a second time ({type(self).__name__} has "
                f"already freed its saved tensors); call .backward(retain_graph=True) the first "
                f"time if you need to"
            )
        for i, (t, version) in enumerate(zip(self._saved, self._versions)):
            if t is not None and t._storage.version != version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: the tensor of shape {t.shape} that {type(self).__name__} "
                    f"saved (saved tensor {i}) is at version {t._storage.version}; expected version "
                    f"{version} instead. Compute the changed value out of place (y = y + 1, not "
                    f"y += 1), or clone() it before changing it"
                )
        return self._saved

    @staticmethod
    def forward(ctx: Function, *args: Any) -> Array:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Function, grad: Variable) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """Runs forward on args; records a node when one of them requires a gradient."""
        # One pass over the arguments finds the first Variable (whose kind the
        # result takes) and decides whether a node is recorded; when it is not
        # (grad mode off, or no input requires grad), the op costs little more
        # than the raw op. The loops below are plain for loops, not generator
        # expressions: each of those is a Python call per element, and this
        # runs for every op.
        grad_enabled = _state.enabled
        like = None
        record = False
        for a in args:
            if isinstance(a, Variable):
                if like is None:
                    like = a
                if a._requires_grad and grad_enabled:
                    record = True
                    break
        ctx = cls()
        if record:
            ctx.records = True
        if grad_enabled:
            # As `with no_grad():`, without building a context manager.
            _state.enabled = False
            try:
                out = cls.forward(ctx, *args)
            finally:
                _state.enabled = True
        else:
            out = cls.forward(ctx, *args)
        if like is not None and not isinstance(out, Variable):
            out = like._wrap(out)
        elif like is not None:
            for a in args:
                if out is a:
                    out = like._wrap(out)  # never turn an input into its own result
                    break
        if record and out._dtype.is_floating_point:  # an int64 or bool result has no gradient
            ctx.inputs = args
            fns = []
            needs = []
            for a in args:
                if isinstance(a, Variable):
                    fns.append(a.grad_fn)
                    needs.append(a._requires_grad)
                else:
                    fns.append(None)
                    needs.append(False)
            ctx.input_fns = tuple(fns)
            ctx.needs_input_grad = tuple(needs)
            ctx.sequence_nr = next(_sequence)
            out._requires_grad = True
            out.grad_fn = ctx
        return out


# ---- backward: walking the graph -----------------------------------------------------------


def retain_grad(t: Variable) -> None:
    """Makes backward fill t.grad although t is not a leaf."""
    if not t.requires_grad:
        raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
    if t.grad_fn is not None:
        t.grad_fn._retained = weakref.ref(t)


def _accumulate(t: Variable, grad: Array, steal: bool = False) -> None:
    """t.grad += grad (a fresh contiguous tensor the first time, never an alias of
    a tensor anyone else can see; with steal, grad itself: see _unshared)."""
    t.grad = t._wrap((grad if steal else ops.clone(grad)) if t.grad is None else ops.add(t.grad, grad))


# CPython's reference counts, as sys.getrefcount reports them up to 3.13 (3.14
# may skip counting some references, which would make a shared tensor look unshared).
_COUNTS_REFERENCES = sys.implementation.name == "cpython" and sys.version_info < (3, 14)


def _unshared(g: Array, results: tuple) -> bool:
    """Whether only backward()'s loop can see g, a gradient of the rule's `results`,
    so that a leaf's .grad may be g itself, with no copy (torch's AccumulateGrad
    steals a gradient whose use count says so too): g dense over its whole storage,
    no other view of that storage, and no reference to g but the loop's variable,
    the tuple zip() keeps of its last items, and g's places in results. (A g that
    _check_grad cast has fewer references than that, and is copied: no matter.)"""
    if not (_COUNTS_REFERENCES and g._offset == 0 and g.is_contiguous()
            and g._storage.nbytes == g.numel() * g._dtype.itemsize
            and sys.getrefcount(g._storage) == 2):  # g's field and the argument
        return False
    holders = 4  # the loop's variable, zip()'s tuple, this parameter, the argument
    for r in results:
        holders += r is g
    return sys.getrefcount(g) == holders


def _check_grad(node: Function, t: Variable, grad: Any) -> Array:
    """grad as a gradient of t: same shape (else the rule is wrong), t's dtype."""
    if not isinstance(grad, Array):
        raise TypeError(f"{type(node).__name__}.backward returned {type(grad).__name__}, not a Tensor")
    if grad.shape != t.shape:
        raise RuntimeError(
            f"{type(node).__name__}.backward returned a gradient of shape {grad.shape} for an "
            f"input of shape {t.shape}"
        )
    return grad if grad._dtype is t._dtype else ops.cast(grad, t._dtype)


def _input_fns(node: Function) -> tuple[Optional[Function], ...]:
    """The grad_fn of each input of node, as recorded (or, for a node built by
    hand, as the inputs have them now)."""
    if node.input_fns or not node.inputs:
        return node.input_fns
    return tuple(x.grad_fn if isinstance(x, Variable) else None for x in node.inputs)


# The sequence numbers of recorded nodes (next() on it is one C call).
_sequence = itertools.count(1)
_sequence_nr = attrgetter("sequence_nr")


def topological_order(root: Function) -> list[Function]:
    """The nodes reachable from root, each once, in the order backward() calls
    them: the node recorded last first (torch's order).

    That is a topological order (a node comes before the nodes it consumes,
    so its gradient is complete when it runs): a node is recorded after the
    nodes that made its inputs, so its sequence number is higher than theirs.
    And it is torch's order: torch's engine keeps the nodes ready to run in a
    priority queue and runs the one of highest number first; the node of
    highest number not yet run is always ready (its consumers have higher
    numbers still), so that is the order of the numbers.

    Why torch chooses so: the backward goes through the forward pass in
    reverse, and a parameter's gradient is complete soon after the backward of
    its layer, not at the end (DistributedDataParallel starts a bucket's
    all-reduce then). Under the teaching policy ``nn.Linear`` is
    ``x @ weight.t() + bias``: the transpose of the weight, recorded first in
    the layer, runs right after the layer's matmul, before the layers below.
    (A walk of the graph by depth-first search would put every such
    transpose, a dead end, after the whole chain of matmuls.)
    """
    nodes = [root]
    seen = {id(root)}
    for node in nodes:  # a breadth-first walk: the loop reaches the nodes it appends
        fns = node.input_fns if node.input_fns or not node.inputs else _input_fns(node)  # no call: the common case
        for fn in fns:
            if fn is not None and id(fn) not in seen:
                seen.add(id(fn))
                nodes.append(fn)
    nodes.sort(key=_sequence_nr, reverse=True)
    return nodes


# Callbacks to run once the current backward pass has finished (torch's
# queue_callback): minitensor.distributed's DistributedDataParallel queues the
# gradient all-reduce here, when every .grad of the pass has been accumulated.
_queued_callbacks: list[Callable[[], Any]] = []


def queue_callback(fn: Callable[[], Any]) -> None:
    """Runs fn() at the end of the backward pass that is running now."""
    _queued_callbacks.append(fn)


def _leaf_uses(order: list[Function]) -> dict[int, int]:
    """For every hooked leaf of the pass: how many edges of the graph bring it a gradient."""
    uses: dict[int, int] = {}
    for node in order:
        fns = node.input_fns if node.input_fns or not node.inputs else _input_fns(node)
        for x, fn, needed in zip(node.inputs, fns, node.needs_input_grad):
            if needed and fn is None and x._post_accumulate_grad_hooks:
                uses[id(x)] = uses.get(id(x), 0) + 1
    return uses


def _leaf_done(x: Variable, uses: dict[int, int]) -> None:
    """One gradient (or None) of leaf x has arrived; after its last, its hooks run."""
    key = id(x)
    left = uses.get(key)
    if left is None:
        return
    if left > 1:
        uses[key] = left - 1
        return
    del uses[key]
    if x.grad is not None:
        for hook in list(x._post_accumulate_grad_hooks or ()):
            hook(x)


def backward(t: Variable, gradient: Optional[Array] = None, retain_graph: bool = False) -> None:
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
        gradient = ops.fill_(empty(t.shape, t.dtype), 1.0)
    elif not isinstance(gradient, Array):
        raise TypeError(f"backward(): gradient must be a Tensor, got {type(gradient).__name__}")
    elif gradient.shape != t.shape:
        raise ShapeError(
            f"backward(): gradient of shape {gradient.shape} does not match the tensor's shape {t.shape}"
        )
    if gradient._dtype is not t._dtype:
        gradient = ops.cast(gradient, t.dtype)
    if t.grad_fn is None:
        _accumulate(t, gradient)
        for hook in list(t._post_accumulate_grad_hooks or ()):
            hook(t)
        return
    previous = _state.enabled
    _state.enabled = False  # as `with no_grad():`, without its calls (see apply)
    try:
        _queued_callbacks.clear()  # left over from a pass that raised
        pending: dict[int, Array] = {id(t.grad_fn): gradient}
        order = topological_order(t.grad_fn)
        uses = _leaf_uses(order) if _hook_count else None  # None: no hook anywhere, nothing to count
        for node in order:
            grad = t._wrap(pending.pop(id(node)))  # backward sees a Tensor, as forward did
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
            fns = node.input_fns if node.input_fns or not node.inputs else _input_fns(node)
            for x, fn, needed, g in zip(node.inputs, fns, node.needs_input_grad, input_grads):
                if not needed or g is None:
                    if needed and fn is None and uses:
                        _leaf_done(x, uses)
                    continue
                if not (isinstance(g, Array) and g._shape == x._shape and g._dtype is x._dtype):
                    g = _check_grad(node, x, g)  # a wrong shape raises, another dtype is cast
                if fn is None:
                    steal = g is not grad and _unshared(g, input_grads)  # never the incoming grad
                    _accumulate(x, g, steal)
                    if uses:
                        _leaf_done(x, uses)
                else:
                    key = id(fn)
                    pending[key] = ops.add(pending[key], g) if key in pending else g
        while _queued_callbacks:
            _queued_callbacks.pop(0)()
    finally:
        _state.enabled = previous
