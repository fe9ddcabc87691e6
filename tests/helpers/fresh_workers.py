"""A stand-in for a pool of spawned worker processes, in this process, so that a test sees what a worker gets
without starting one (each imports bayeszoo, JAX and PyMC: many seconds on a busy machine).

Every call goes through ``pickle`` as ``multiprocessing`` sends it, and is unpickled and run in the workers' state:
none of the backends registered by the session (``library="user"``), only those the workers registered themselves
in earlier calls (a pool, or a Dask worker, outlives a task), a bare ``__main__`` (a notebook's or a script's
definitions are not there), and none of the modules the session made from files (the command line's
``FILE.py:FUNCTION``) or listed in ``missing``. Afterwards the session's state is back as it was. What a real pool
does with a call it cannot unpickle is done too: the pool breaks (``BrokenProcessPool``) and every call fails.
"""
from __future__ import annotations

import contextlib
import pickle
import sys
import types
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool

from bayeszoo import registry

#: the prefix of the names the command line gives the modules it loads from FILE.py (not importable elsewhere)
FILE_MODULES = "bayeszoo_user_"


class FreshWorkers(Executor):
    """``concurrent.futures.Executor`` whose calls run as in spawned workers (module docstring); ``broken`` is set
    once a call could not be unpickled."""

    def __init__(self, missing=()):
        self.missing = tuple(missing)
        self.broken = None
        self._tables = None   # the workers' registry, kept from one call to the next

    def submit(self, fn, /, *args, **kwargs):
        blob = pickle.dumps((fn, args, kwargs))   # raises here as multiprocessing's queue would
        future = Future()
        with self._fresh():
            if self.broken is None:
                try:
                    fn, args, kwargs = pickle.loads(blob)
                except Exception as exc:
                    self.broken = f"{type(exc).__name__}: {exc}"
            if self.broken is not None:
                future.set_exception(BrokenProcessPool(f"a worker could not unpickle a call: {self.broken}"))
                return future
            try:
                result = fn(*args, **kwargs)
                future.set_result(pickle.loads(pickle.dumps(result)))
            except Exception as exc:
                future.set_exception(exc)
        return future

    @contextlib.contextmanager
    def _fresh(self):
        tables = (registry._GENERIC, registry._FAMILY)
        saved_tables = [dict(t) for t in tables]
        if self._tables is None:
            self._tables = [{k: b for k, b in t.items() if b.library != "user"} for t in tables]
        for table, workers in zip(tables, self._tables):
            table.clear()
            table.update(workers)
        hidden = {name: module for name, module in sys.modules.items()
                  if name.startswith(FILE_MODULES) or name in self.missing or name == "__main__"}
        for name in hidden:
            del sys.modules[name]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            self._tables = [dict(t) for t in tables]
            for table, saved in zip(tables, saved_tables):
                table.clear()
                table.update(saved)
            # what the call imported stays, as a library loaded once would; what was hidden is back
            sys.modules.update(hidden)


@contextlib.contextmanager
def fresh_pool(jobs: int, missing=()):
    """In place of :func:`bayeszoo.workers.process_pool` (the benchmark module's ``process_pool``): a pool of
    :class:`FreshWorkers`."""
    yield FreshWorkers(missing)
