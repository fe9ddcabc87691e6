"""Timing helper shared by the benchmarks."""
from __future__ import annotations

import math
import time


def best_of(fn, repeats: int):
    """(smallest wall time over ``repeats`` calls of ``fn``, the last call's result)."""
    best, out = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out
