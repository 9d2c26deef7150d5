"""optim: optimizers that update parameters in place from their .grad (as torch.optim).

    opt = optim.Adam(model.parameters(), lr=1e-3)
    for x, y in batches:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

Each update is computed by the library's kernels (ops.py) under no_grad and
written into the parameter's own storage, so the Parameter objects a model
holds stay the same. The formulas are torch's, step for step, so the same
hyper-parameters give the same trajectory. Unlike torch there are no
parameter groups: one set of hyper-parameters, kept as attributes (``opt.lr``
may be changed between steps).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from . import autograd, ops
from .tensor import Tensor


class Optimizer:
    """Base class: holds the parameters and per-parameter state; subclasses define step()."""

    def __init__(self, params: Iterable[Tensor]) -> None:
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

    def zero_grad(self) -> None:
        """Sets .grad of every parameter to None (torch's default, set_to_none=True)."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """Updates every parameter that has a .grad."""
        raise NotImplementedError

    def _update(self, p: Tensor, new_value: Tensor) -> None:
        """Writes new_value into p's storage (p keeps its identity)."""
        ops.copy_(p, new_value)


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum and weight decay (L2):

        g = grad + weight_decay * p
        b = g (first step), else momentum * b + g      (when momentum != 0)
        p = p - lr * b
    """

    def __init__(self, params: Iterable[Tensor], lr: float, momentum: float = 0.0,
                 weight_decay: float = 0.0) -> None:
        if lr < 0.0 or momentum < 0.0 or weight_decay < 0.0:
            raise ValueError(
                f"SGD: lr, momentum and weight_decay must be >= 0, got {lr}, {momentum}, {weight_decay}"
            )
        super().__init__(params)
        self.lr = lr
        self.momentum = momentum
        self.weight_decay = weight_decay

    @autograd.no_grad()
    def step(self) -> None:
        # TASK(layers_optim) BEGIN
        for p, state in zip(self.params, self.state):
            if p.grad is None:
                continue
            g = p.grad
            if self.weight_decay:
                g = ops.add(g, ops.mul(p, self.weight_decay))
            if self.momentum:
                buf = state.get("momentum_buffer")
                g = ops.clone(g) if buf is None else ops.add(ops.mul(buf, self.momentum), g)
                state["momentum_buffer"] = g
            self._update(p, ops.sub(p, ops.mul(g, self.lr)))
        # TASK(layers_optim) STUB
        #| # TODO (task layers_optim): for each parameter p with a gradient, the
        #| # update of the class docstring; keep the momentum buffer in this
        #| # parameter's state dict, and write the new value with self._update.
        #| raise NotImplementedError("task layers_optim is not done: SGD.step in minitensor/optim.py")
        # TASK(layers_optim) END


class Adam(Optimizer):
    """Adam (Kingma and Ba, 2015), as torch.optim.Adam (weight_decay is L2, added to the gradient):

        g = grad + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        if lr < 0.0 or eps < 0.0 or weight_decay < 0.0:
            raise ValueError(f"Adam: lr, eps and weight_decay must be >= 0, got {lr}, {eps}, {weight_decay}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"Adam: betas must be in [0, 1), got {betas}")
        super().__init__(params)
        self.lr = lr
        self.betas = tuple(betas)
        self.eps = eps
        self.weight_decay = weight_decay

    @autograd.no_grad()
    def step(self) -> None:
        # TASK(layers_optim) BEGIN
        beta1, beta2 = self.betas
        for p, state in zip(self.params, self.state):
            if p.grad is None:
                continue
            g = p.grad
            if self.weight_decay:
                g = ops.add(g, ops.mul(p, self.weight_decay))
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
        #| # TODO (task layers_optim): the update of the class docstring, for each
        #| # parameter with a gradient: the step count t and the moving averages
        #| # m and v live in the parameter's state dict (torch names them step,
        #| # exp_avg and exp_avg_sq); write the new value with self._update.
        #| raise NotImplementedError("task layers_optim is not done: Adam.step in minitensor/optim.py")
        # TASK(layers_optim) END
