"""BLAS threading for the hand-written algorithms: many small factorisations run faster on one thread."""
from __future__ import annotations

import contextlib
import functools

import numpy as np
from threadpoolctl import ThreadpoolController

SMALL_N = 1000   # below this many training points the loops of small BLAS calls run on one thread


def one_blas_thread(n: int):
    """Context in which BLAS runs on one thread when the problem has fewer than ``SMALL_N`` points.

    EP's site loop, Laplace's Newton steps and the predictions make many small level-2 / level-3 BLAS calls, and
    waking OpenBLAS's worker threads costs more than the work: EP on sonar (n = 108) took 124 ms with two
    threads and 17 ms with one (2 cores); ten 200 x 200 Cholesky factors of the PMKL sampler 105 ms and 10 ms."""
    return _blas_controller().limit(limits=1, user_api="blas") if n < SMALL_N else contextlib.nullcontext()


def one_blas_thread_when_small(fn):
    """Decorator: ``fn(K, ...)`` under :func:`one_blas_thread` for K's size."""
    @functools.wraps(fn)
    def wrapper(K, *args, **kwargs):
        with one_blas_thread(np.shape(K)[0]):
            return fn(K, *args, **kwargs)

    return wrapper


@functools.lru_cache(maxsize=1)
def _blas_controller() -> ThreadpoolController:
    """The loaded BLAS libraries, found once (a fresh ``threadpool_limits`` rescans them: ~3 ms a call)."""
    return ThreadpoolController()
