"""Worker processes on a small machine: the environment they start with, so that several do not fight for cores.

Every numerical library sizes its thread pools to all the cores when it loads, so ``jobs`` worker processes would
each run as many threads as there are cores; on the small matrices of a model's log density, threads waiting for
each other cost more than they share. :func:`worker_environment` gives processes spawned inside it ``threads``
threads per pool, as joblib gives its workers (``make demo --jobs``, ``bz.benchmark(jobs=...)``).
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

#: the thread pools a worker's libraries size from the environment when they load: OpenMP, OpenBLAS and MKL (NumPy,
#: SciPy, PyTensor's BLAS)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: XLA's CPU backend runs its Eigen operations on one thread with this flag (XLA has no thread-count flag: a word
#: without ``--`` in XLA_FLAGS, such as ``intra_op_parallelism_threads=1``, is ignored without a word)
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false"


@contextlib.contextmanager
def worker_environment(threads: int):
    """The environment workers spawned inside inherit: ``threads`` threads for each library's pool. A variable
    the user set is kept; the parent's own pools were made when it started and are unchanged."""
    saved = dict(os.environ)
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, str(threads))
    if threads == 1 and "xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {XLA_ONE_THREAD}".strip()
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
    """A pool of ``jobs`` spawned worker processes, each started inside :func:`worker_environment` with its share
    of the cores' threads. Not forked: a forked JAX runtime is not safe to use, and where none had started yet a
    forked worker, which skips the imports, still ran NumPy samplers slower than a spawned one (BENCHMARKS.md,
    "`make demo`, 2026-11-30 early morning")."""
    with worker_environment(threads=max(1, usable_cores() // jobs)), \
            ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool
