"""CUDA Graphs: record a step once, replay it with one call (torch.cuda's
``CUDAGraph`` and ``graph``).

    model, opt = ..., ...
    x, y = mt.zeros(64, 784), mt.zeros(64)      # static inputs: the graph reads these buffers
    for _ in range(3):                           # warm up: every first-time host work done
        step(x, y)
    g = mt.cuda.CUDAGraph()
    with mt.cuda.graph(g):                       # recorded, not run
        loss = step(x, y)
    for xb, yb in batches:
        x.copy_(xb); y.copy_(yb)                 # new data into the same buffers
        g.replay()                               # the whole step, one launch
        print(loss.item())                       # loss: the same tensor, new value

Inside the ``with`` block the ops run their Python as usual but the GPU
work is only recorded, on a side stream (the legacy default stream cannot
capture). A replay runs that work again on the same buffers: the inputs are
whatever the captured tensors hold then, and tensors made inside the block
(the loss, activations kept for backward, gradients) are rewritten in place.
What cannot be captured raises and ends the capture: anything that waits for
the device (``.item()``, ``.numpy()``, printing a tensor), and first-time
work that measures or checks on the device (the matmul autotuner's timing,
the cross-entropy's target check): run the step once or twice before
capturing, as torch asks too. Values seen by Python during the capture are
not computed yet: read results after a replay.

On the emulator the same code works: the recorded launches run again at
each replay.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

from .. import _lib
from .._errors import InvalidArgumentError
from .streams import Stream, _handle_of


class CUDAGraph:
    """A recorded sequence of GPU work (fill it with ``mt.cuda.graph(g)``)."""

    def __init__(self) -> None:
        self._exec = 0
        self._capture_stream: Optional[Stream] = None

    def capture_begin(self, stream: Stream) -> None:
        """Starts recording the work this thread queues on `stream`."""
        if self._exec:
            raise InvalidArgumentError("CUDAGraph: already captured; call reset() to capture again")
        _lib.graph_capture_begin(stream.cuda_stream)
        self._capture_stream = stream
        self._stream = stream  # the buffers the capture allocates are freed on it: kept alive

    def capture_end(self) -> None:
        """Ends the recording; the graph can be replayed."""
        if self._capture_stream is None:
            raise InvalidArgumentError("CUDAGraph.capture_end: no capture was begun")
        stream, self._capture_stream = self._capture_stream, None
        self._exec = _lib.graph_capture_end(stream.cuda_stream)

    def replay(self, stream: Any = None) -> None:
        """Runs the recorded work again, queued on `stream` (default: the current stream)."""
        if not self._exec:
            raise InvalidArgumentError("CUDAGraph.replay: nothing was captured")
        handle = _lib.get_stream() if stream is None else _handle_of(stream, "CUDAGraph.replay")
        _lib.graph_replay(self._exec, handle)

    def reset(self) -> None:
        """Drops the recording (its memory goes once no tensor of it is left)."""
        if self._exec:
            exec_, self._exec = self._exec, 0
            _lib.graph_destroy(exec_)

    def __del__(self) -> None:
        if getattr(self, "_exec", 0):
            try:
                _lib.graph_destroy(self._exec)
            except Exception:  # noqa: BLE001 - a finalizer must never raise
                pass

    def __repr__(self) -> str:
        return f"<minitensor.cuda.CUDAGraph {'captured' if self._exec else 'empty'}>"


@contextlib.contextmanager
def graph(cuda_graph: CUDAGraph, stream: Optional[Stream] = None) -> Iterator[CUDAGraph]:
    """``with mt.cuda.graph(g):`` records the block's GPU work into g, on
    `stream` (default: a new side stream), ordered after the work queued
    before it and before the work queued after it on the current stream."""
    if not isinstance(cuda_graph, CUDAGraph):
        raise TypeError(f"graph: expected a CUDAGraph, got {type(cuda_graph).__name__}")
    side = Stream() if stream is None else stream
    if not isinstance(side, Stream) or side.cuda_stream == 0:
        raise InvalidArgumentError("graph: capture needs a stream of its own, not the default stream")
    previous = Stream(handle=_lib.get_stream())
    side.wait_stream(previous)  # the capture's inputs are ready before it
    with side:
        cuda_graph.capture_begin(side)
        try:
            yield cuda_graph
        except BaseException:
            cuda_graph._capture_stream = None
            try:
                _lib.graph_capture_abort()
            except Exception:  # noqa: BLE001 - the error that ended the capture is the one to see
                pass
            raise
        cuda_graph.capture_end()
    previous.wait_stream(side)
