"""Throughput of the dense kernels the hand-written algorithms are built from, measured on this machine in this run.

The roofline and growth benchmarks compare an algorithm's time per iteration with the time its dominant kernels
need at the same sizes. :class:`Probe` times each kernel once per size (best of a few calls on fresh random
operands; memoised), so a bound is ``sum(count_k * probe.seconds(kernel_k, size_k))``, i.e. work over the
throughput measured at that size. Kernels (flops counted as LAPACK / BLAS do):

* ``gemm(m, k, n)``: (m x k) @ (k x n), 2 m k n flops;   ``syrk(n, k)``: A^T A for A (k x n), k n^2 flops;
* ``chol(n)``: Cholesky, n^3 / 3;   ``trtri(n)``: triangular inverse, n^3 / 3;
* ``trsm(n, r)``: triangular solve with r right-hand sides, n^2 r;   ``trsv(n)``: one right-hand side, n^2;
* ``gemv(m, n)``: matrix-vector product, 2 m n;   ``ger(b)``: rank-one update of a b x b block, 2 b^2;
* ``fft(h, w)``: one real 2-D FFT (``numerics.fft.rfft2``, scipy's pocketfft, one thread), 2.5 M log2 M flops
  (half of a complex FFT's 5 M log2 M), M = h w;   ``ifft(h, w)`` the inverse;
* ``stream(bytes)``: moving that many bytes at the bandwidth of a large copy (read + write counted); ``gemv`` and
  ``trsv`` take at least their matrix's bytes at the rate a product with a 256 MiB matrix reads memory
  (:meth:`Probe.seconds`).

Everything runs on one BLAS thread (the caller limits it), as do the algorithms measured beside the kernels, and
every time is CPU time of the process (:data:`CLOCK`), so that other jobs on a shared machine do not enter it.
"""
from __future__ import annotations

import math
import time

import numpy as np
import scipy.linalg as sla

FLOPS = {
    "gemm": lambda m, k, n: 2.0 * m * k * n,
    "syrk": lambda n, k: float(k) * n * n,
    "chol": lambda n: n**3 / 3.0,
    "trtri": lambda n: n**3 / 3.0,
    "trsm": lambda n, r: float(n) * n * r,
    "trsv": lambda n: float(n) * n,
    "gemv": lambda m, n: 2.0 * m * n,
    "ger": lambda b: 2.0 * b * b,
    "fft": lambda h, w: 2.5 * h * w * math.log2(h * w),
    "ifft": lambda h, w: 2.5 * h * w * math.log2(h * w),
}
COPY_BYTES = 256 * 2**20       # the bandwidth probe's array: far beyond any cache
#: the clock of every kernel and algorithm time: CPU seconds of this process. On one BLAS thread (the callers limit
#: it) that is the work's own time, while wall time on a machine shared with other jobs also counts the time the
#: process waited for a core (at a load average of 11 on 2 cores, several times the work)
CLOCK = time.process_time


def _best(fn, min_seconds: float = 0.2, max_calls: int = 200) -> float:
    """Smallest CPU time (:data:`CLOCK`) of one call of ``fn`` over at least three calls and about ``min_seconds``
    of calls."""
    fn()                                            # warm: allocation, FFT plans, page faults
    best, spent, calls = math.inf, 0.0, 0
    while calls < 3 or (spent < min_seconds and calls < max_calls):
        t0 = CLOCK()
        fn()
        dt = CLOCK() - t0
        best, spent, calls = min(best, dt), spent + dt, calls + 1
    return best


class Probe:
    """Memoised kernel timings (module docstring)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.cache: dict[tuple, float] = {}
        self._bandwidth = None
        self._read_bandwidth = None

    # -- the kernels
    def _time(self, kernel: str, *size) -> float:
        rng = self.rng
        if kernel == "gemm":
            m, k, n = size
            a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
            return _best(lambda: a @ b)
        if kernel == "syrk":
            n, k = size
            a = rng.standard_normal((k, n))
            return _best(lambda: a.T @ a)
        if kernel in ("chol", "trtri", "trsm", "trsv"):
            n = size[0]
            g = rng.standard_normal((n, n)) / np.sqrt(n)
            spd = g @ g.T + np.eye(n)
            if kernel == "chol":
                return _best(lambda: np.linalg.cholesky(spd))
            L = np.linalg.cholesky(spd)
            if kernel == "trtri":
                return _best(lambda: sla.lapack.dtrtri(L, lower=1))
            rhs = rng.standard_normal((n, size[1])) if kernel == "trsm" else rng.standard_normal(n)
            return _best(lambda: sla.solve_triangular(L, rhs, lower=True, check_finite=False))
        if kernel == "gemv":
            m, n = size
            a, x = rng.standard_normal((m, n)), rng.standard_normal(n)
            return _best(lambda: a @ x)
        if kernel == "ger":
            b = size[0]
            ger = sla.blas.get_blas_funcs("ger", dtype=np.float64)
            a = np.asfortranarray(rng.standard_normal((b, b)))
            x = rng.standard_normal(b)
            return _best(lambda: ger(-1e-9, x, x, a=a, overwrite_a=True))
        if kernel in ("fft", "ifft"):
            from bayeszoo.numerics import fft as _fft

            h, w = size
            x = rng.standard_normal((h, w))
            X = _fft.rfft2(x)
            return _best(lambda: _fft.rfft2(x)) if kernel == "fft" else _best(lambda: _fft.irfft2(X, (h, w)))
        raise ValueError(kernel)

    def seconds(self, kernel: str, *size) -> float:
        """Time of one call of ``kernel`` at ``size`` (for ``stream``: the seconds to move ``size[0]`` bytes).

        The matrix-vector kernels (``gemv``, ``trsv``) are memory-bound: timed in a loop their matrix stays in
        cache, which it does not inside an algorithm that streams several such matrices, so their time is at
        least the matrix's bytes over the rate at which a matrix-vector product reads memory
        (:meth:`read_bandwidth`)."""
        if kernel == "stream":
            return float(size[0]) / self.bandwidth()
        size = tuple(int(s) for s in size)
        key = (kernel, *size)
        if key not in self.cache:
            self.cache[key] = self._time(kernel, *size)
        floor = {"gemv": lambda m, n: 8.0 * m * n, "trsv": lambda n: 4.0 * n * n}.get(kernel)
        return max(self.cache[key], floor(*size) / self.read_bandwidth()) if floor else self.cache[key]

    def rate(self, kernel: str, *size) -> float:
        """GFLOP/s of ``kernel`` at ``size``."""
        return FLOPS[kernel](*size) / self.seconds(kernel, *size) / 1e9

    def bandwidth(self) -> float:
        """Bytes per second of a large copy (read + write)."""
        if self._bandwidth is None:
            src = np.ones(COPY_BYTES // 8)
            dst = np.empty_like(src)
            self._bandwidth = 2.0 * COPY_BYTES / _best(lambda: np.copyto(dst, src), min_seconds=0.3)
        return self._bandwidth

    def read_bandwidth(self) -> float:
        """Bytes per second that a matrix-vector product reads from memory (a 256 MiB matrix, beyond any cache)."""
        if self._read_bandwidth is None:
            a = np.ones((4096, COPY_BYTES // 8 // 4096))
            x = np.ones(a.shape[1])
            self._read_bandwidth = COPY_BYTES / _best(lambda: a @ x, min_seconds=0.3)
        return self._read_bandwidth

    def bound(self, work) -> float:
        """Seconds of ``work``, a list of ``(count, kernel, *size)``."""
        return float(sum(count * self.seconds(kernel, *size) for count, kernel, *size in work))

    def summary(self) -> dict:
        """Every kernel timed so far with its GFLOP/s, and the bandwidth."""
        out = {" ".join(map(str, k)): {"seconds": v, "gflops": FLOPS[k[0]](*k[1:]) / v / 1e9}
               for k, v in sorted(self.cache.items())}
        out["stream"] = {"gb_per_s": self.bandwidth() / 1e9}
        out["gemv read"] = {"gb_per_s": self.read_bandwidth() / 1e9}
        return out
