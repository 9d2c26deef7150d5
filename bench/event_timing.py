"""event_timing: how the ladder benchmarks (attention.py, conv.py,
reduce_rows.py) time one GPU call: a few warm-up calls, then the median of
many CUDA-event timings, each read after its end event has completed.

    from event_timing import median_ms
    ms = median_ms(fn, mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True))

start and end are a pair of events of the library that launches fn
(minitensor's or torch's), so that they are recorded on the stream fn uses.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable


def median_ms(fn: Callable[[], Any], start: Any, end: Any, repeats: int = 20, warmup: int = 3) -> float:
    """The median time of fn() in milliseconds over `repeats` timed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
