"""Worker processes on a small machine: the environment they start with, so that several do not fight for cores.

Every numerical library sizes its thread pools to all the cores when it loads, so ``jobs`` worker processes would
each run as many threads as there are cores; on the small matrices of a model's log density, threads waiting for
each other cost more than they share. :func:`process_pool` gives each worker ``cores // jobs`` threads per pool, as
joblib gives its workers (``make demo --jobs``, ``bz.benchmark(jobs=...)``).
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import threading
from concurrent.futures import ProcessPoolExecutor

#: the thread pools a worker's libraries size from the environment when they load: OpenMP, OpenBLAS and MKL (NumPy,
#: SciPy, PyTensor's BLAS), and XLA's CPU backend (its Eigen pool; ``intra_op_parallelism_threads``)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def worker_environment(threads: int):
    """The environment workers spawned inside inherit: ``threads`` threads for each library's pool. A variable
    the user set is kept; the parent's own pools were made when it started and are unchanged."""
    saved = dict(os.environ)
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, str(threads))
    if threads == 1 and "intra_op_parallelism_threads" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@contextlib.contextmanager
def process_pool(jobs: int):
    """A pool of ``jobs`` worker processes, each with its share of the cores' threads (:func:`worker_environment`),
    all started at once.

    Forked where that is safe (:func:`start_method`): a forked worker starts with this process's imports, where a
    spawned one spends seconds importing bayeszoo, JAX and PyMC again; its libraries' thread pools, made when this
    process loaded them, are cut to its share (threadpoolctl), and XLA, not started yet, starts in the worker with
    the limited environment. Spawned otherwise."""
    threads = max(1, usable_cores() // jobs)
    chosen = any(name in os.environ for name in THREAD_VARIABLES)   # the user's own thread counts stay
    with worker_environment(threads), \
            ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(start_method()),
                                initializer=_limit_threads, initargs=(None if chosen else threads,)) as pool:
        pool.submit(int).result()   # starts the workers (a forked pool all of them) before this process's threads
        yield pool


def start_method() -> str:
    """``"fork"`` on Linux while this process runs one thread and has not started JAX's runtime (a fork copies a
    running runtime's locks but not its threads, and can hang); ``"spawn"`` otherwise."""
    if sys.platform != "linux" or threading.active_count() > 1:
        return "spawn"
    bridge = sys.modules.get("jax._src.xla_bridge")
    try:
        started = bridge is not None and bridge.backends_are_initialized()
    except AttributeError:   # another JAX: its runtime may have started
        started = True
    return "spawn" if started else "fork"


def _limit_threads(threads: int | None) -> None:
    """In a worker: the thread pools its libraries made before it started (a forked one's) cut to ``threads``
    (None: left as the user's environment set them)."""
    from threadpoolctl import threadpool_limits

    if threads is not None:
        threadpool_limits(limits=threads)
