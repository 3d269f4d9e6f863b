"""The one timer of the helpers and the benchmarks: one call, or the best of a few (wall clock, this run)."""

from __future__ import annotations

import time
from typing import Any, NamedTuple

__all__ = ["Timed", "timed", "best_time"]


class Timed(NamedTuple):
    """Seconds one call took, and what it returned."""

    seconds: float
    result: Any


def timed(function, *args, **kwargs) -> Timed:
    """``Timed(seconds, result)`` of one call of ``function(*args, **kwargs)``."""
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return Timed(time.perf_counter() - start, result)


def best_time(function, repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``function()``, in seconds."""
    return min(timed(function).seconds for _ in range(max(1, repeats)))
