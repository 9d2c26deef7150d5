"""The graphs whose gradients the autograd tests check, written once for two libraries.

Each case is a function ``fn(m, *xs)`` of an API adapter ``m`` (minitensor or
torch: see ``Api``) and the leaf tensors, plus the shapes of the leaves and
the range their random values come from. tests/test_autograd.py checks every
case against central finite differences; tests/test_torch_compare.py runs
the same function on torch and compares values and gradients.

The cases cover every differentiable op, and feed many of them awkward
inputs: broadcast pairs, permuted, sliced (with a step and an offset) and
expanded (stride 0) views.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np


class Api:
    """The library module, plus the few things spelt differently in minitensor and torch."""

    def __init__(self, lib: Any, index_dtype: Any = None) -> None:
        self.lib = lib
        self.index_dtype = index_dtype  # torch needs int64 indices; minitensor stores them as floats

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lib, name)

    def index(self, values: Any) -> Any:
        """A tensor of whole-number indices (for gather and scatter_add)."""
        if self.index_dtype is None:
            return self.lib.tensor(np.asarray(values, dtype=np.float64))
        return self.lib.tensor(np.asarray(values), dtype=self.index_dtype)


def values(result: Any) -> Any:
    """The values of max(dim)/min(dim), which return (values, indices) in both libraries."""
    return result[0] if isinstance(result, tuple) else result


@dataclass
class Case:
    name: str
    fn: Callable[..., Any]
    shapes: tuple[tuple[int, ...], ...]
    low: Optional[float] = None  # None: standard normal values; else uniform in [low, high)
    high: Optional[float] = None
    torch: bool = True  # False when torch spells the op differently (e.g. max over a tuple of dims)

    def inputs(self, seed: int) -> list[np.ndarray]:
        """The leaves as float64 arrays."""
        rng = np.random.default_rng(seed)
        if self.low is None:
            return [rng.standard_normal(s) for s in self.shapes]
        return [rng.uniform(self.low, self.high, s) for s in self.shapes]


POS = dict(low=0.5, high=2.0)  # for log, sqrt, pow and division by a tensor

CASES = [
    # ---- arithmetic, with broadcasting and scalars on either side
    Case("add_broadcast", lambda m, x, y: x + y, ((3, 1), (4,))),
    Case("add_scalar", lambda m, x: 2.5 + x + 1.0, ((2, 3),)),
    Case("sub_broadcast", lambda m, x, y: x - y, ((2, 1, 3), (4, 1))),
    Case("rsub_scalar", lambda m, x: 1.5 - x, ((3,),)),
    Case("mul_broadcast", lambda m, x, y: x * y, ((2, 3), (1, 3))),
    Case("mul_self", lambda m, x: x * x * 3.0, ((4,),)),
    Case("div_broadcast", lambda m, x, y: x / y, ((2, 3), (3,)), **POS),
    Case("rdiv_scalar", lambda m, x: 2.0 / x, ((3,),), **POS),
    Case("div_scalar", lambda m, x: x / 4.0, ((3,),)),
    Case("pow_tensor", lambda m, x, y: x ** y, ((2, 3), (3,)), **POS),
    Case("pow_scalar", lambda m, x: x ** 2.5 + x ** -1.5, ((4,),), **POS),
    Case("pow_int", lambda m, x: x ** 3, ((4,),)),
    Case("rpow_scalar", lambda m, x: 2.0 ** x, ((4,),)),
    Case("neg", lambda m, x: -x, ((2, 2),)),
    Case("maximum", lambda m, x, y: m.maximum(x, y), ((3, 1), (4,))),
    Case("minimum", lambda m, x, y: m.minimum(x, y.T), ((2, 3), (3, 2))),
    Case("where", lambda m, x, y: m.where(x > 0, x * 2.0, y), ((3, 4), (4,))),
    # ---- elementwise functions, on strided views
    Case("exp_permuted", lambda m, x: x.permute(1, 0).exp(), ((2, 3),)),
    Case("log_sliced", lambda m, x: x[1:, ::2].log(), ((3, 5),), **POS),
    Case("relu_expanded", lambda m, x: x.expand(3, 4).relu() * 2.0, ((1, 4),)),
    Case("sigmoid", lambda m, x: x.sigmoid(), ((2, 3),)),
    Case("softplus", lambda m, x: m.nn.functional.softplus(x), ((2, 3),)),
    Case("gelu_permuted", lambda m, x: m.nn.functional.gelu(x.permute(1, 0)), ((2, 3),)),
    Case("gelu_tanh", lambda m, x: m.nn.functional.gelu(x, approximate="tanh"), ((2, 3),)),
    Case("silu_sliced", lambda m, x: m.nn.functional.silu(x[:, ::2]), ((3, 5),)),
    Case("elu", lambda m, x: m.nn.functional.elu(x, alpha=0.7), ((2, 3),)),
    Case("leaky_relu", lambda m, x: m.nn.functional.leaky_relu(x, 0.1) * 2.0, ((2, 3),)),
    Case("hardtanh", lambda m, x: m.nn.functional.hardtanh(x, -0.5, 0.8), ((3, 4),)),
    Case("tanh_transposed", lambda m, x: x.transpose(0, 1).tanh(), ((3, 2),)),
    Case("abs", lambda m, x: x.abs(), ((5,),)),
    Case("sqrt_stepped", lambda m, x: x[::2].sqrt(), ((5, 2),), **POS),
    Case("reciprocal", lambda m, x: x.reciprocal(), ((4,),), **POS),
    Case("functions", lambda m, x: m.exp(x) + m.tanh(x) * m.sigmoid(x) - m.relu(x), ((6,),)),
    # ---- reductions
    Case("sum_all", lambda m, x: x.sum(), ((2, 3),)),
    Case("sum_dim", lambda m, x: x.sum(dim=1), ((2, 3, 2),)),
    Case("sum_keepdim_neg", lambda m, x: x.sum(dim=-1, keepdim=True) * x, ((3, 4),)),
    Case("sum_dims", lambda m, x: x.sum(dim=(0, 2)), ((2, 3, 2),)),
    Case("sum_permuted", lambda m, x: x.permute(2, 0, 1).sum(dim=0), ((2, 3, 2),)),
    Case("mean_all", lambda m, x: x.mean(), ((3, 4),)),
    Case("mean_dim", lambda m, x: x[:, 1:].mean(dim=0, keepdim=True), ((3, 4),)),
    Case("prod_all", lambda m, x: x.prod(), ((2, 3),)),
    Case("prod_dim", lambda m, x: x.prod(dim=1), ((3, 4),)),
    Case("max_all", lambda m, x: x.max(), ((3, 4),)),
    Case("max_dim", lambda m, x: values(x.max(dim=1)), ((3, 4),)),
    Case("max_dim_keepdim", lambda m, x: values(x.T.max(dim=0, keepdim=True)), ((3, 4),)),
    Case("min_all", lambda m, x: x.min(), ((3, 4),)),
    Case("min_dim", lambda m, x: values(x.min(dim=-1)), ((2, 5),)),
    Case("max_dims", lambda m, x: x.max(dim=(0, 2)), ((2, 3, 2),), torch=False),
    Case("logsumexp", lambda m, x: m.logsumexp(x, dim=1), ((3, 4),)),
    Case("logsumexp_large", lambda m, x: m.logsumexp(x + 1000.0, dim=0), ((3, 2),)),  # exp(1000) overflows
    Case("logsumexp_dims_transposed", lambda m, x: m.logsumexp(x.transpose(0, 2), dim=(0, 1)), ((2, 3, 4),)),
    Case("amax_dim", lambda m, x: x.amax(dim=1), ((3, 4),)),
    Case("softmax", lambda m, x: x.softmax(1), ((3, 4),)),
    Case("softmax_dim0_permuted", lambda m, x: m.softmax(x.permute(1, 0), 0), ((3, 4),)),
    Case("log_softmax", lambda m, x: x.log_softmax(-1), ((3, 4),)),
    Case("softmax_large", lambda m, x: m.softmax(x - 1000.0, 1), ((2, 3),)),
    Case("log_softmax_large", lambda m, x: m.log_softmax(x + 1000.0, 1), ((2, 3),)),
    # ---- matmul
    Case("matmul_2d", lambda m, x, y: x @ y, ((3, 4), (4, 2))),
    Case("matmul_transposed", lambda m, x, y: x.T @ y.T, ((4, 3), (2, 4))),
    Case("matmul_batched", lambda m, x, y: m.matmul(x, y), ((2, 3, 4), (2, 4, 2))),
    Case("matmul_broadcast_batch", lambda m, x, y: x @ y, ((2, 1, 2, 3), (3, 3, 2))),
    Case("matmul_vector_right", lambda m, x, y: x @ y, ((3, 4), (4,))),
    Case("matmul_vector_left", lambda m, x, y: x @ y, ((4,), (2, 4, 3))),
    Case("matmul_dot", lambda m, x, y: x @ y, ((5,), (5,))),
    # ---- views
    Case("view", lambda m, x: x.view(3, 2) * m.arange(6).view(3, 2).to(x.dtype), ((2, 3),)),
    Case("reshape_noncontiguous", lambda m, x: x.T.reshape(-1) ** 2, ((2, 3),)),
    Case("unsqueeze_squeeze", lambda m, x: (x.unsqueeze(1) * x.unsqueeze(0)).squeeze(), ((3,),)),
    Case("squeeze_dim", lambda m, x: x.squeeze(1).exp(), ((3, 1, 2),)),
    Case("flatten", lambda m, x: x.flatten(1) ** 2, ((2, 2, 3),)),
    Case("expand", lambda m, x: x.expand(2, 3, 4) * m.arange(24).view(2, 3, 4).to(x.dtype), ((3, 1),)),
    Case("index_int", lambda m, x: x[1] * 2.0, ((3, 4),)),
    Case("index_mixed", lambda m, x: x[..., 0, None] * x[:, 1:3], ((3, 4),)),
    Case("index_step_offset", lambda m, x: x[1::2, ::3].exp(), ((5, 7),)),
    Case("narrow", lambda m, x: x.narrow(1, 1, 2) ** 2, ((3, 4),)),
    Case("mT", lambda m, x: x.mT ** 2, ((2, 3, 2),)),
    Case("contiguous_clone", lambda m, x: x.T.contiguous().clone() ** 2, ((2, 3),)),
    Case("iterate", lambda m, x: sum(row * (i + 1.0) for i, row in enumerate(x)), ((3, 2),)),
    # ---- gather, scatter, joining
    Case("gather", lambda m, x: x.gather(1, m.index([[0, 0, 2], [1, 3, 3]])), ((2, 4),)),
    Case("gather_dim0", lambda m, x: m.gather(x, 0, m.index([[2, 0], [2, 2], [1, 0]])), ((3, 2),)),
    Case("scatter_add", lambda m, x, y: x.scatter_add(1, m.index([[0, 2, 0]]), y), ((2, 3), (1, 3))),
    Case("cat", lambda m, x, y: m.cat([x, y.T, x], dim=1), ((2, 2), (3, 2))),
    Case("stack", lambda m, x, y: m.stack([x, y * 2.0], dim=1), ((2, 3), (2, 3))),
    # ---- a small network: linear, tanh, log_softmax, gather
    Case("mlp", lambda m, x, w, b: (x @ w.T + b).tanh().log_softmax(1).gather(1, m.index([[1], [0], [2]])),
         ((3, 4), (3, 4), (3,))),
]


def case_ids() -> list[str]:
    return [case.name for case in CASES]
