"""DistributedDataParallel: the same model on every rank, gradients averaged.

    model = DistributedDataParallel(build_model(), bucket_cap_mb=25)
    loss = F.cross_entropy(model(x_shard), y_shard)   # this rank's part of the batch
    loss.backward()      # ends with the gradients averaged over ranks
    optimizer.step()     # same gradients -> same update on every rank

At construction the parameters and buffers of rank 0 are broadcast, so every
rank starts from the same weights. Gradients travel in buckets of about
bucket_cap_mb (parameters in reverse order of registration, as torch groups
them: the backward pass produces the last layer's gradients first). Each
bucket owns one flat buffer. Fewer, larger messages are what make NCCL and
MPI fast; a message per parameter would pay each collective's latency.

The overlap (torch's reducer). Every parameter has a post-accumulate-grad
hook (``Tensor.register_post_accumulate_grad_hook``), which the autograd
engine runs once the parameter's ``.grad`` holds all of this pass's
gradient. When the last parameter of a bucket reports, its gradients are
copied into the bucket's buffer (on the current stream) and an
``all_reduce(op="avg", async_op=True)`` of the buffer starts: on NCCL it
runs on the library's second stream while the current stream goes on
computing the gradients of the earlier layers. Buckets start in their order
only (bucket k after k-1), so every rank queues the same collectives in the
same order, as NCCL requires. At the end of the pass
(``minitensor.autograd.queue_callback``) the buckets not started yet start
(a parameter that got no gradient counts as zeros), the current stream
waits for each (an event, not the host), and the averages are copied back
into each ``.grad`` before the optimizer step can read them.

With equal shards, the average of the per-rank mean-loss gradients is the
gradient of the mean loss over the whole batch: 2 ranks with half a batch
each train exactly like 1 process with the whole batch (tests/test_distributed.py).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

from .. import autograd, ops
from ..nn import Module
from .._creation import empty
from ..tensor import Tensor
from .collectives import Work, _flat_slice, all_reduce, broadcast, get_world_size, is_initialized


class _Bucket:
    """Parameters whose gradients are averaged together, and their flat buffer."""

    def __init__(self, params: list[Tensor]) -> None:
        self.params = params
        self.numel = sum(p.numel() for p in params)
        self.flat: Optional[Tensor] = None  # made at the first reduction, kept
        self.views: list[Tensor] = []
        self.waiting = len(params)  # parameters of this pass whose gradient has not arrived
        self.work: Optional[Work] = None

    def buffer(self) -> Tensor:
        if self.flat is None:
            self.flat = empty(self.numel, dtype=self.params[0].dtype)
            offset = 0
            for p in self.params:
                self.views.append(_flat_slice(self.flat, offset, p.shape))
                offset += p.numel()
        return self.flat


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
        object.__setattr__(self, "_queued", False)  # this pass's end-of-backward callback is queued
        object.__setattr__(self, "_next", 0)  # the first bucket of this pass not started yet
        # How the last pass started each bucket: "hook" (during the backward
        # pass, overlapped) or "end" (at its end). For tests and the curious.
        object.__setattr__(self, "last_started_by", [])
        # Everyone starts from rank 0's weights (and buffers, e.g. statistics).
        with autograd.no_grad():
            for p in module.parameters():
                broadcast(p, src=0)
            if broadcast_buffers:
                for b in module.buffers():
                    broadcast(b, src=0)
        buckets = [_Bucket(ps) for ps in self._make_buckets()]
        object.__setattr__(self, "_bucket_list", buckets)
        object.__setattr__(self, "_bucket_of", {id(p): k for k, b in enumerate(buckets) for p in b.params})
        handles = []
        if get_world_size() > 1:
            for b in buckets:
                for p in b.params:
                    handles.append(p.register_post_accumulate_grad_hook(self._grad_ready))
        object.__setattr__(self, "_hook_handles", handles)

    def _make_buckets(self) -> list[list[Tensor]]:
        """Parameters in reverse order, grouped by dtype into buckets of at most _bucket_bytes."""
        buckets: list[list[Tensor]] = []
        current: list[Tensor] = []
        size = 0
        seen: set[int] = set()
        for p in reversed([p for p in self.module.parameters() if p.requires_grad]):
            if id(p) in seen:  # a shared parameter goes in once
                continue
            seen.add(id(p))
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
        return [b.params for b in self._bucket_list]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside only accumulate local gradients (gradient accumulation);
        the first backward after it averages the accumulated sum."""
        object.__setattr__(self, "_sync_enabled", False)
        try:
            yield
        finally:
            object.__setattr__(self, "_sync_enabled", True)

    # ---- the reducer -----------------------------------------------------------------

    def _grad_ready(self, p: Tensor) -> None:
        """The post-accumulate-grad hook of every parameter (runs inside backward)."""
        if not self._sync_enabled:
            return
        if not self._queued:
            object.__setattr__(self, "_queued", True)
            self.last_started_by.clear()
            autograd.queue_callback(self._finish_backward)
        bucket = self._bucket_list[self._bucket_of[id(p)]]
        bucket.waiting -= 1
        # Start every bucket that is complete, in order.
        buckets = self._bucket_list
        while self._next < len(buckets) and buckets[self._next].waiting == 0:
            self._start(buckets[self._next], "hook")

    def _start(self, bucket: _Bucket, by: str) -> None:
        """Copies the bucket's gradients into its buffer and starts their average."""
        flat = bucket.buffer()
        for p, view in zip(bucket.params, bucket.views):
            if p.grad is None:
                ops.fill_(view, 0.0)
            else:
                ops.copy_(view, p.grad)
        bucket.work = all_reduce(flat, op="avg", async_op=True)
        self.last_started_by.append(by)
        object.__setattr__(self, "_next", self._next + 1)

    def _finish_backward(self) -> None:
        """End of the backward pass: start the rest, wait for all, copy the averages back."""
        try:
            self._finish()
        finally:
            object.__setattr__(self, "_queued", False)
            object.__setattr__(self, "_next", 0)
            for b in self._bucket_list:
                b.waiting = len(b.params)
                b.work = None

    @autograd.no_grad()
    def _finish(self) -> None:
        while self._next < len(self._bucket_list):
            self._start(self._bucket_list[self._next], "end")
        for b in self._bucket_list:
            assert b.work is not None
            b.work.wait()  # the current stream waits for the average
            for p, view in zip(b.params, b.views):
                if p.grad is None:
                    p.grad = view.clone()  # under no_grad: a plain copy
                else:
                    ops.copy_(p.grad, view)

    def reduce_gradients(self) -> None:
        """Averages every parameter's .grad over ranks now (backward does it; callable by hand).

        A parameter without a .grad counts as a zero gradient and gets one, so
        that every rank sends buckets of the same layout.
        """
        if get_world_size() == 1:
            return
        object.__setattr__(self, "_next", 0)
        self._finish_backward()

    def extra_repr(self) -> str:
        return f"world_size={get_world_size()}, buckets={len(self._bucket_list)}"
