"""minitensor.autograd: reverse-mode automatic differentiation.

Read engine.py first: Function, the graph and backward() (with no_grad and
the gradient mode), in about 200 lines of code. The gradient rules of every
differentiable op of minitensor are Function subclasses next to it, filed
by kernel family under the names of minitensor/ops/'s modules:

    engine.py         Variable, Function, backward(), no_grad, queue_callback
    helpers.py        unbroadcast() and the other pieces the rules share
    elementwise.py    Add, Sub, Mul, Div, Pow, Maximum, Minimum, Exp, ...
    reduce.py         Sum, Mean, Prod, Max, Min, MaxAlongDim (max_along_dim)
    gather.py         Gather, ScatterAdd
    where.py          Where
    softmax.py        Softmax, LogSoftmax
    logsumexp.py      LogSumExp
    cross_entropy.py  CrossEntropy
    norm.py           LayerNorm
    attention.py      MaskedSoftmax, Attention
    matmul.py         MatMul, LinearFused
    conv.py           Im2Col, Conv2dTiled, Conv2dImplicitGemm, Conv2dDepthwise, Conv2dDirect
    pool.py           MaxPool2d, AvgPool2d, AdaptiveAvgPool2d
    shaping.py        View, Reshape, Permute, Expand, Index, ..., Overwrite, Cat, Stack

The rules compute with the raw ops of minitensor/ops/ on Arrays; the
Tensor methods of minitensor/tensor.py call ``Rule.apply``.
"""

from .engine import (
    Function,
    Variable,
    backward,
    enable_grad,
    is_grad_enabled,
    no_grad,
    queue_callback,
    retain_grad,
)
from .engine import topological_order  # noqa: F401 - the order backward() walks (notebooks/04 draws it)
from .helpers import unbroadcast
from .elementwise import (
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
    InPlace,
    Neg,
    Exp,
    Log,
    Relu,
    Sigmoid,
    Softplus,
    Activation,
    Erf,
    Tanh,
    Abs,
    Sqrt,
    Reciprocal,
)
from .reduce import Sum, Mean, Prod, Max, Min, MaxAlongDim, max_along_dim
from .gather import Gather, ScatterAdd
from .where import Where
from .softmax import Softmax, LogSoftmax
from .logsumexp import LogSumExp
from .cross_entropy import CrossEntropy
from .norm import LayerNorm
from .attention import MaskedSoftmax, Attention
from .matmul import LinearFused, MatMul
from .conv import Im2Col, Conv2dTiled, Conv2dImplicitGemm, Conv2dDepthwise, Conv2dDirect
from .pool import MaxPool2d, AvgPool2d, AdaptiveAvgPool2d
from .shaping import (
    View,
    Reshape,
    Squeeze,
    Unsqueeze,
    Flatten,
    Permute,
    Transpose,
    Expand,
    Index,
    Narrow,
    Contiguous,
    Clone,
    Cast,
    Overwrite,
    Cat,
    Stack,
)

__all__ = [
    "Function",
    "Variable",
    "backward",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
    "queue_callback",
    "retain_grad",
    "topological_order",
    "unbroadcast",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Maximum",
    "Minimum",
    "Where",
    "InPlace",
    "Neg",
    "Exp",
    "Log",
    "Relu",
    "Sigmoid",
    "Softplus",
    "Activation",
    "Erf",
    "Tanh",
    "Abs",
    "Sqrt",
    "Reciprocal",
    "Sum",
    "Mean",
    "Prod",
    "Max",
    "Min",
    "MaxAlongDim",
    "max_along_dim",
    "LogSumExp",
    "Softmax",
    "LogSoftmax",
    "MaskedSoftmax",
    "LayerNorm",
    "CrossEntropy",
    "MatMul",
    "LinearFused",
    "View",
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Permute",
    "Transpose",
    "Expand",
    "Index",
    "Narrow",
    "Contiguous",
    "Clone",
    "Cast",
    "Gather",
    "ScatterAdd",
    "Overwrite",
    "Cat",
    "Stack",
]
