"""Small helpers of the hand-written backends: a positive-number check for their ``check`` functions, a timer."""
from __future__ import annotations

import time

import numpy as np


def positive(name, value, integer=False):
    """``value`` if it is a positive (integer) number, else a ValueError naming the option."""
    ok = (isinstance(value, (int, np.integer)) and not isinstance(value, bool)) if integer else \
        (isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool))
    if not ok or not np.isfinite(value) or value <= 0:
        kind = "a positive integer" if integer else "a positive number"
        raise ValueError(f"option {name} must be {kind}, got {value!r}")
    return value


class Timer:
    """Seconds since construction, read by calling it."""

    def __init__(self):
        self.t0 = time.perf_counter()

    def __call__(self):
        return time.perf_counter() - self.t0
