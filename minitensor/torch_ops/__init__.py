"""minitensor's kernels as PyTorch custom ops (torch.library), forward and backward.

    import torch
    import minitensor.torch_ops as mtops

    x = torch.randn(8, 64, requires_grad=True)
    w = torch.randn(32, 64, requires_grad=True)
    y = mtops.softmax(mtops.linear(x, w), dim=-1)   # minitensor's kernels
    y.sum().backward()                              # their gradient kernels, through torch's autograd

Importing this package registers the ops under the ``minitensor`` namespace
(``torch.ops.minitensor.matmul`` ...): matmul, softmax (and log_softmax), layer_norm,
sdpa (scaled dot-product attention) and conv2d, each with a backward op
(``minitensor::softmax_backward`` ...). They take torch tensors and return
torch tensors, and never copy one: each tensor's memory goes to the kernels
through DLPack (_bridge.py), and each kernel runs on torch's current stream.
Where the tensors must live: on the GPU of minitensor's CUDA build, or on
the host (torch CPU tensors) under the emulator.

The functions below spell the ops as torch.nn.functional does. Each op has a
fake implementation (its output's shape from its inputs'), so torch.compile
traces through a model that uses them and keeps each op opaque, one node of
the graph. docs/torch_ops.md has the details and the measured cost of the
custom-op call.

This is the one place in minitensor that imports torch, and only when it is
imported: ``import minitensor`` does not import it, and torch is no
dependency of minitensor.
"""

from . import _bridge  # noqa: F401  (first: it says what to install when torch is missing)
from .attention import scaled_dot_product_attention
from .conv import conv2d
from .dense import layer_norm, linear, log_softmax, matmul, softmax

__all__ = ["matmul", "linear", "softmax", "log_softmax", "layer_norm", "scaled_dot_product_attention", "conv2d"]
