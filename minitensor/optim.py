"""optim: optimizers that update parameters in place from their .grad (as torch.optim).

    opt = optim.Adam(model.parameters(), lr=1e-3)
    for x, y in batches:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

Each update is written into the parameter's own storage under no_grad, so
the Parameter objects a model holds stay the same. The formulas are torch's,
step for step, so the same hyper-parameters give the same trajectory. Unlike
torch there are no parameter groups: one set of hyper-parameters, kept as
attributes (``opt.lr`` may be changed between steps).

Two ways to compute an update, as torch's ``fused`` argument chooses:

- fused: one kernel per parameter (src/optim.cu) reads the parameter, its
  gradient and its state once and writes them once;
- the chain of ops (``_update_one``, the course's task `layers_optim`): Adam's
  is ten kernels and nine temporary tensors per parameter.

``fused=None`` (the default) takes the kernel under the fast kernel policy,
wherever it applies (contiguous float tensors), and the chain of ops under
the teaching policy, whose default paths run the kernels students write;
``fused=True`` always takes the kernel (an error where it cannot),
``fused=False`` always the chain.

Adam and AdamW run the kernel in one of two forms, as torch's ``foreach``
argument chooses: one launch per parameter (src/optim.cu, the kernel a
course reads), or one call for the whole list of parameters, a few launches
in all (src/optim_multi.cu: torch's multi_tensor_apply, which its foreach
and fused optimizers are built on). ``foreach=None`` (the default) takes the
list under the fast policy wherever the kernel runs (as torch's foreach
default on CUDA), the per-parameter launches under the teaching policy;
``foreach=True`` always the list, ``foreach=False`` never. As torch,
``fused=True`` with ``foreach=True`` is refused; so is ``fused=False`` with
``foreach=True`` (the chain of ops has no list form).

``capturable=True`` (torch's, for Adam and AdamW; minitensor's SGD takes it
too) keeps the step count on the device, a 0-d int64 tensor
``state["step"]`` (torch's is float32), advanced by the update's kernel and
read there for Adam's bias corrections and SGD's first step, so that a whole
training step, optimizer included, can be captured into a CUDA graph and
replayed (mt.cuda.graph): each replay advances the count. The state is made
when the optimizer is, so a capture may begin with the first step. It takes
the fused update (contiguous float parameters); hyper-parameters (``lr``)
are the ones the capture saw.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Optional

from . import _lib, autograd, ops
from ._creation import zeros, zeros_like
from ._dtype import int64
from ._errors import InvalidArgumentError
from .tensor import Tensor


class Optimizer:
    """Base class: holds the parameters and per-parameter state; subclasses define step()."""

    def __init__(self, params: Iterable[Tensor], fused: Optional[bool] = None, capturable: bool = False) -> None:
        if fused not in (None, True, False):
            raise TypeError(f"fused must be None, True or False, got {fused!r}")
        if capturable and fused is False:
            raise ValueError(f"{type(self).__name__}: capturable=True takes the fused update; got fused=False")
        self.fused = True if capturable else fused
        self.capturable = bool(capturable)
        if isinstance(params, Tensor):
            raise TypeError("params must be an iterable of Tensors (e.g. model.parameters()), got a Tensor")
        self.params = list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        for p in self.params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("optimizer can only optimize leaf Tensors (parameters, not results of ops)")
        self.state: list[dict[str, Any]] = [{} for _ in self.params]
        if self.capturable:
            for p in self.params:
                if not ops.fused_update_applies(p):
                    raise ValueError(f"{type(self).__name__}(capturable=True) takes contiguous float parameters "
                                     f"(the fused update); got one of shape {p.shape} ({p.dtype.name})")

    def _device_step(self, state: dict[str, Any]) -> Tensor:
        """state["step"], the step count on the device (capturable), made as 0 on first use."""
        step = state.get("step")
        if step is None:
            step = state["step"] = zeros((), dtype=int64)
        return step

    def zero_grad(self) -> None:
        """Sets .grad of every parameter to None (torch's default, set_to_none=True)."""
        for p in self.params:
            p.grad = None

    @autograd.no_grad()
    def step(self) -> None:
        """Updates every parameter that has a .grad."""
        fast = ops.fast_kernels() if self.fused is None else False  # the policy, asked once per step
        for p, state in zip(self.params, self.state):
            if p.grad is None:
                continue
            if self._fuse(p, fast):
                self._fused_update_one(p, state)
            else:
                if _lib.capturing():
                    raise InvalidArgumentError(
                        f"{type(self).__name__}.step: the chain of ops replaces its state tensors (the "
                        f"momentum buffer) at each step, and a CUDA graph replay would keep reading the "
                        f"ones it captured; capture the fused update ({type(self).__name__}(..., fused=True))")
                self._update_one(p, state)

    def _fuse(self, p: Tensor, fast: Optional[bool] = None) -> bool:
        """Whether p's update runs as one kernel (see the module's docstring);
        fast: whether the kernel policy is fast (None: ask it)."""
        if self.fused is False:
            return False
        applies = ops.fused_update_applies(p, p.grad)
        if self.fused is True:
            if not applies:
                raise ValueError(
                    f"{type(self).__name__}(fused=True): the fused update takes contiguous float tensors "
                    f"of one shape; got a parameter of shape {p.shape} ({p.dtype.name}, "
                    f"{'' if p.is_contiguous() else 'not '}contiguous) and a gradient of shape {p.grad.shape}"
                )
            return True
        return applies and (ops.fast_kernels() if fast is None else fast)

    def _update_one(self, p: Tensor, state: dict[str, Any]) -> None:
        """p's update as a chain of ops."""
        raise NotImplementedError

    def _fused_update_one(self, p: Tensor, state: dict[str, Any]) -> None:
        """p's update as one kernel."""
        raise NotImplementedError

    def _update(self, p: Tensor, new_value: Tensor) -> None:
        """Writes new_value into p's storage (p keeps its identity)."""
        ops.copy_(p, new_value)

    def _state_like(self, p: Tensor, state: dict[str, Any], name: str) -> Tensor:
        """state[name], created as zeros like p on first use."""
        buf = state.get(name)
        if buf is None:
            buf = state[name] = zeros_like(p)
        return buf


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum and weight decay (L2):

        g = grad + weight_decay * p
        b = g (first step), else momentum * b + g      (when momentum != 0)
        p = p - lr * b
    """

    def __init__(self, params: Iterable[Tensor], lr: float, momentum: float = 0.0,
                 weight_decay: float = 0.0, fused: Optional[bool] = None, capturable: bool = False) -> None:
        if lr < 0.0 or momentum < 0.0 or weight_decay < 0.0:
            raise ValueError(
                f"SGD: lr, momentum and weight_decay must be >= 0, got {lr}, {momentum}, {weight_decay}"
            )
        super().__init__(params, fused, capturable)
        self.lr = lr
        self.momentum = momentum
        self.weight_decay = weight_decay
        if self.capturable:  # the state before any step, so that a capture may begin with the first
            for p, state in zip(self.params, self.state):
                self._device_step(state)
                if momentum:
                    self._state_like(p, state, "momentum_buffer")

    def _update_one(self, p: Tensor, state: dict[str, Any]) -> None:
        # TASK(layers_optim) BEGIN
        g = p.grad
        if self.weight_decay:
            g = ops.add(g, ops.mul(p, self.weight_decay))
        if self.momentum:
            buf = state.get("momentum_buffer")
            g = ops.clone(g) if buf is None else ops.add(ops.mul(buf, self.momentum), g)
            state["momentum_buffer"] = g
        self._update(p, ops.sub(p, ops.mul(g, self.lr)))
        # TASK(layers_optim) STUB
        #| # TODO (task layers_optim): the update of the class docstring for the
        #| # parameter p (its gradient is p.grad); keep the momentum buffer in
        #| # p's state dict, and write the new value with self._update.
        #| raise NotImplementedError("task layers_optim is not done: SGD._update_one in minitensor/optim.py")
        # TASK(layers_optim) END

    def _fused_update_one(self, p: Tensor, state: dict[str, Any]) -> None:
        if self.capturable:
            buf = self._state_like(p, state, "momentum_buffer") if self.momentum else None
            ops.sgd_step_(p, p.grad, buf, self.lr, self.momentum, self.weight_decay, False, self._device_step(state))
            return
        buf = None
        first = False
        if self.momentum:
            first = "momentum_buffer" not in state
            buf = self._state_like(p, state, "momentum_buffer")
        ops.sgd_step_(p, p.grad, buf, self.lr, self.momentum, self.weight_decay, first)


class Adam(Optimizer):
    """Adam (Kingma and Ba, 2015), as torch.optim.Adam (weight_decay is L2, added to the gradient):

        g = grad + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, fused: Optional[bool] = None,
                 capturable: bool = False, *, foreach: Optional[bool] = None) -> None:
        if foreach not in (None, True, False):
            raise TypeError(f"foreach must be None, True or False, got {foreach!r}")
        if foreach and fused:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")  # torch's words
        if foreach and fused is False:
            raise ValueError(f"{type(self).__name__}: foreach=True runs the multi-tensor kernel, which the chain "
                             f"of ops (fused=False) has no form of")
        self.foreach = foreach
        if lr < 0.0 or eps < 0.0 or weight_decay < 0.0:
            raise ValueError(f"{type(self).__name__}: lr, eps and weight_decay must be >= 0, got {lr}, {eps}, "
                             f"{weight_decay}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"{type(self).__name__}: betas must be in [0, 1), got {betas}")
        super().__init__(params, fused, capturable)
        self.lr = lr
        self.betas = tuple(betas)
        self.eps = eps
        self.weight_decay = weight_decay
        if self.capturable:  # the state before any step, so that a capture may begin with the first
            for p, state in zip(self.params, self.state):
                self._state_like(p, state, "exp_avg")
                self._state_like(p, state, "exp_avg_sq")
                self._device_step(state)

    # AdamW (below) decays the parameter itself instead of adding to the gradient.
    decoupled = False

    def step(self) -> None:
        if _lib.capturing() and not self.capturable:
            raise InvalidArgumentError(
                f"{type(self).__name__}.step: its bias correction depends on the step count, which a CUDA graph "
                f"replay would not advance (the replay reuses the captured count); make the optimizer with "
                f"capturable=True (the count on the device), or capture the forward and backward and call "
                f"step() after each replay")
        fast = ops.fast_kernels()
        if self.fused is not False and (self.foreach or (self.foreach is None and fast)):
            self._step_list(fast)
        else:
            super().step()

    @autograd.no_grad()
    def _step_list(self, fast: bool) -> None:
        """The update of every parameter with a .grad in one call of the
        multi-tensor kernel per step count (one, unless some parameters had
        no gradient at some step); a parameter the kernel cannot take
        (not contiguous) is updated alone, as step() would."""
        lists: dict[Any, tuple[list[Tensor], ...]] = {}  # step count (or "device") -> p, g, m, v, device counts
        for p, state in zip(self.params, self.state):
            g = p.grad
            if g is None:
                continue
            if not ops.fused_update_applies(p, g):
                if self._fuse(p, fast):  # fused=True: an error naming the parameter
                    self._fused_update_one(p, state)
                else:
                    self._update_one(p, state)
                continue
            m, v, count = self._advance(p, state)
            key = "device" if self.capturable else count
            group = lists.get(key)
            if group is None:
                group = lists[key] = ([], [], [], [], [])
            for values, x in zip(group, (p, g, m, v, count)):
                values.append(x)
        for key, (ps, gs, ms, vs, counts) in lists.items():
            ops.adam_step_list_(ps, gs, ms, vs, self.lr, self.betas, self.eps, self.weight_decay,
                                counts if key == "device" else key, self.decoupled)

    def _update_one(self, p: Tensor, state: dict[str, Any]) -> None:
        if self.decoupled and self.weight_decay:
            self._update(p, ops.mul(p, 1.0 - self.lr * self.weight_decay))
        self._adam_update(p, state, 0.0 if self.decoupled else self.weight_decay)

    def _adam_update(self, p: Tensor, state: dict[str, Any], weight_decay: float) -> None:
        # TASK(layers_optim) BEGIN
        beta1, beta2 = self.betas
        g = p.grad
        if weight_decay:
            g = ops.add(g, ops.mul(p, weight_decay))
        t = state["step"] = state.get("step", 0) + 1
        m = state.get("exp_avg")
        v = state.get("exp_avg_sq")
        m_new = ops.mul(g, 1.0 - beta1)
        v_new = ops.mul(ops.mul(g, g), 1.0 - beta2)
        m = m_new if m is None else ops.add(ops.mul(m, beta1), m_new)
        v = v_new if v is None else ops.add(ops.mul(v, beta2), v_new)
        state["exp_avg"], state["exp_avg_sq"] = m, v
        bias_correction1 = 1.0 - beta1**t
        bias_correction2 = 1.0 - beta2**t
        denom = ops.add(ops.mul(ops.map_("sqrt", v), 1.0 / math.sqrt(bias_correction2)), self.eps)
        step = ops.mul(ops.div(m, denom), self.lr / bias_correction1)
        self._update(p, ops.sub(p, step))
        # TASK(layers_optim) STUB
        #| # TODO (task layers_optim): the update of the class docstring for the
        #| # parameter p (its gradient is p.grad), with this weight_decay: the step
        #| # count t and the moving averages m and v live in p's state dict (torch
        #| # names them step, exp_avg and exp_avg_sq); write the new value with
        #| # self._update.
        #| raise NotImplementedError("task layers_optim is not done: Adam._adam_update in minitensor/optim.py")
        # TASK(layers_optim) END

    def _advance(self, p: Tensor, state: dict[str, Any]) -> tuple[Tensor, Tensor, Any]:
        """p's moving averages (made as zeros on first use) and its step count:
        the host's, advanced here, or (capturable) the device's, which the
        kernel advances."""
        m = state.get("exp_avg")  # _state_like's lookup first: a call less per parameter and step
        if m is None:
            m = self._state_like(p, state, "exp_avg")
        v = state.get("exp_avg_sq")
        if v is None:
            v = self._state_like(p, state, "exp_avg_sq")
        if self.capturable:
            return m, v, self._device_step(state)
        t = state["step"] = state.get("step", 0) + 1
        return m, v, t

    def _fused_update_one(self, p: Tensor, state: dict[str, Any]) -> None:
        m, v, t = self._advance(p, state)
        ops.adam_step_(p, p.grad, m, v, self.lr, self.betas, self.eps, self.weight_decay, t, self.decoupled)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter, 2019), as torch.optim.AdamW:

        p = p * (1 - lr * weight_decay)
        then Adam's update of p, with no weight decay in the gradient
    """

    decoupled = True

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, fused: Optional[bool] = None,
                 capturable: bool = False, *, foreach: Optional[bool] = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, fused, capturable, foreach=foreach)
