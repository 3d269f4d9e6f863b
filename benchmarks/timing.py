"""The benchmarks' two timers: one call, and the best of a few repeats (wall clock, this run)."""

from __future__ import annotations

import time


def timed(function, *args, **kwargs):
    """``(seconds, result)`` of one call of ``function(*args, **kwargs)``."""
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - start, result


def best_time(function, repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``function()``, in seconds."""
    return min(timed(function)[0] for _ in range(max(1, repeats)))
