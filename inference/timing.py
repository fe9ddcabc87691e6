"""Clocks of the backends' timing phases: a wall-clock timer for the hand-written backends, and the seconds JAX
spends compiling, which the engines on JAX move into ``compile``."""
from __future__ import annotations

import threading
import time


class Timer:
    """Seconds since construction, read by calling it."""

    def __init__(self):
        self.t0 = time.perf_counter()

    def __call__(self):
        return time.perf_counter() - self.t0


class JaxCompileClock:
    """Sums the tracing / lowering / compilation durations JAX reports through ``jax.monitoring``."""

    _lock = threading.Lock()
    _installed = False
    _active: list["JaxCompileClock"] = []
    EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
              "/jax/core/compile/backend_compile_duration")

    def __init__(self):
        self.seconds = 0.0

    @classmethod
    def _listener(cls, event, duration, **kwargs):
        if event in cls.EVENTS:
            for clock in cls._active:
                clock.seconds += duration

    def __enter__(self):
        import jax.monitoring

        with self._lock:
            if not JaxCompileClock._installed:
                jax.monitoring.register_event_duration_secs_listener(JaxCompileClock._listener)
                JaxCompileClock._installed = True
            self._active.append(self)
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._active.remove(self)
