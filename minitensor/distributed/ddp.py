"""DistributedDataParallel: the same model on every rank, gradients averaged.

    model = DistributedDataParallel(build_model(), bucket_cap_mb=25)
    loss = F.cross_entropy(model(x_shard), y_shard)   # this rank's part of the batch
    loss.backward()      # ends with the gradients averaged over ranks
    optimizer.step()     # same gradients -> same update on every rank

At construction the parameters and buffers of rank 0 are broadcast, so every
rank starts from the same weights. The forward pass marks its output; when a
backward pass reaches it, DDP queues an all-reduce to run at the end of that
pass (minitensor.autograd.queue_callback), when every .grad has been
accumulated. Gradients go in buckets of about bucket_cap_mb: each bucket is
one flat buffer, filled with the library's copy kernel (parameters in reverse
order, as torch groups them), averaged with one all_reduce(op="avg") and
copied back into each .grad. Fewer, larger messages are what make NCCL and MPI
fast; a bucket per parameter would pay the latency of each collective.

With equal shards, the average of the per-rank mean-loss gradients is the
gradient of the mean loss over the whole batch: 2 ranks with half a batch
each train exactly like 1 process with the whole batch (tests/test_distributed.py).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from .. import autograd, ops
from ..nn import Module
from .._creation import empty
from ..tensor import Tensor
from .collectives import _flat_slice, all_reduce, broadcast, get_world_size, is_initialized


class _GradSyncPoint(autograd.Function):
    """Identity on the model's output; its backward queues the gradient all-reduce."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, ddp: Any) -> Tensor:
        ctx.ddp = ddp
        return x  # autograd hands the result over as a new alias of x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Any:
        ddp = ctx.ddp
        if ddp._sync_enabled and not ddp._queued:
            ddp._queued = True
            autograd.queue_callback(ddp._finish_backward)
        return grad, None


class DistributedDataParallel(Module):
    """Wraps module for data-parallel training (see the module docstring).

    The wrapped model is ``self.module`` (so state_dict keys start with
    "module.", as in torch); save ``ddp.module`` to get the plain names.
    """

    def __init__(self, module: Module, bucket_cap_mb: float = 25.0, broadcast_buffers: bool = True) -> None:
        super().__init__()
        if not is_initialized():
            raise RuntimeError("DistributedDataParallel: call minitensor.distributed.init_process_group() first")
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be an nn.Module, got {type(module).__name__}")
        if bucket_cap_mb <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got {bucket_cap_mb}")
        self.module = module
        object.__setattr__(self, "_bucket_bytes", int(bucket_cap_mb * 1024 * 1024))
        object.__setattr__(self, "_sync_enabled", True)
        object.__setattr__(self, "_queued", False)
        # Everyone starts from rank 0's weights (and buffers, e.g. statistics).
        with autograd.no_grad():
            for p in module.parameters():
                broadcast(p, src=0)
            if broadcast_buffers:
                for b in module.buffers():
                    broadcast(b, src=0)
        object.__setattr__(self, "_buckets", self._make_buckets())

    def _make_buckets(self) -> list[list[Tensor]]:
        """Parameters in reverse order, grouped by dtype into buckets of at most _bucket_bytes."""
        buckets: list[list[Tensor]] = []
        current: list[Tensor] = []
        size = 0
        for p in reversed([p for p in self.module.parameters() if p.requires_grad]):
            nbytes = p.numel() * p.dtype.itemsize
            if current and (size + nbytes > self._bucket_bytes or current[0].dtype is not p.dtype):
                buckets.append(current)
                current, size = [], 0
            current.append(p)
            size += nbytes
        if current:
            buckets.append(current)
        return buckets

    @property
    def buckets(self) -> list[list[Tensor]]:
        """The parameters of each gradient bucket (for inspection and tests)."""
        return self._buckets

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        out = self.module(*args, **kwargs)
        if isinstance(out, Tensor) and out.requires_grad and autograd.is_grad_enabled():
            object.__setattr__(self, "_queued", False)
            out = _GradSyncPoint.apply(out, self)
        return out

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside only accumulate local gradients (gradient accumulation);
        the first backward after it averages the accumulated sum."""
        object.__setattr__(self, "_sync_enabled", False)
        try:
            yield
        finally:
            object.__setattr__(self, "_sync_enabled", True)

    def _finish_backward(self) -> None:
        object.__setattr__(self, "_queued", False)
        self.reduce_gradients()

    @autograd.no_grad()
    def reduce_gradients(self) -> None:
        """Averages every parameter's .grad over ranks (called after backward; callable by hand).

        A parameter without a .grad counts as a zero gradient and gets one, so
        that every rank sends buckets of the same layout.
        """
        if get_world_size() == 1:
            return
        for bucket in self._buckets:
            total = sum(p.numel() for p in bucket)
            flat = empty(total, dtype=bucket[0].dtype)
            offset = 0
            for p in bucket:
                view = _flat_slice(flat, offset, p.shape)
                if p.grad is None:
                    ops.fill_(view, 0.0)
                else:
                    ops.copy_(view, p.grad)
                offset += p.numel()
            all_reduce(flat, op="avg")
            offset = 0
            for p in bucket:
                view = _flat_slice(flat, offset, p.shape)
                if p.grad is None:
                    p.grad = view.clone()  # under no_grad: a plain copy
                else:
                    ops.copy_(p.grad, view)
                offset += p.numel()

    def extra_repr(self) -> str:
        return f"world_size={get_world_size()}, buckets={len(self._buckets)}"
