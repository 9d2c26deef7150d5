"""Batch normalization layers of minitensor.nn (BatchNorm1d, BatchNorm2d), as torch's,
over F.batch_norm (nn/functional_norm.py).

Each keeps, per channel, a learned weight (ones) and bias (zeros) when affine,
and, when track_running_stats, three buffers that state_dict(), mt.save and
mt.load carry: running_mean (zeros), running_var (ones) and
num_batches_tracked (an int64 count of training batches). In training mode the
batch's statistics normalize and the running ones move towards them by
momentum (momentum=None: their cumulative average, 1 / num_batches_tracked);
in evaluation mode the running statistics normalize.
"""

from __future__ import annotations

from typing import Any, Optional

from .._creation import ones, tensor, zeros
from .._dtype import default_dtype, int64, to_dtype
from .._errors import DimError
from ..tensor import Tensor
from .functional_norm import batch_norm
from .modules import Module, _check_size
from .parameter import Parameter


class _BatchNorm(Module):
    """What BatchNorm1d and BatchNorm2d share; they differ in the input dims they take."""

    name = "BatchNorm"
    input_dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = True, track_running_stats: bool = True, dtype: Any = None) -> None:
        super().__init__()
        _check_size(num_features, self.name, "num_features")
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        dtype = default_dtype if dtype is None else to_dtype(dtype)
        if affine:
            self.weight = Parameter(ones((num_features,), dtype=dtype))
            self.bias = Parameter(zeros((num_features,), dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros((num_features,), dtype=dtype))
            self.register_buffer("running_var", ones((num_features,), dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        """running_mean to zeros, running_var to ones, num_batches_tracked to 0."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1.0)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """The running statistics reset, weight to ones and bias to zeros."""
        self.reset_running_stats()
        if self.affine:
            self.weight.detach().fill_(1.0)
            self.bias.detach().zero_()

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"{self.name}: input must be a Tensor, got {type(x).__name__}")
        if x.ndim not in self.input_dims:
            wanted = " or ".join(f"{d}D" for d in self.input_dims)
            raise DimError(f"{self.name}: expected {wanted} input, got {x.ndim}D input of shape {x.shape}")
        if x.shape[1] != self.num_features:
            raise ValueError(f"{self.name}: the input of shape {x.shape} has {x.shape[1]} channels (dim 1); "
                             f"this layer normalizes {self.num_features}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked.item())
        # Batch statistics in training, and in evaluation too when there are no running ones.
        use_batch = self.training or self.running_mean is None
        update = self.training and self.track_running_stats
        return batch_norm(x, self.running_mean if update or not use_batch else None,
                          self.running_var if update or not use_batch else None,
                          self.weight, self.bias, use_batch, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) inputs over N (and L), per channel C."""

    name = "BatchNorm1d"
    input_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) inputs over N, H and W, per channel C."""

    name = "BatchNorm2d"
    input_dims = (4,)
