"""A wall-clock timer for the hand-written backends' timing phases."""
from __future__ import annotations

import time


class Timer:
    """Seconds since construction, read by calling it."""

    def __init__(self):
        self.t0 = time.perf_counter()

    def __call__(self):
        return time.perf_counter() - self.t0
