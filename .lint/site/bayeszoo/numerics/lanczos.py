"""Lanczos estimates of marginal variances, diag(C A^-1 C^T) for a symmetric positive definite A known by its
products only (Nickisch thesis §3.5.4, Alg. 3.2).

k steps of Lanczos with full Gram-Schmidt re-orthogonalisation give Q (n x k, orthonormal) and the tridiagonal
T = Q^T A Q; with the Cholesky factor T = L L^T (L lower bidiagonal: diagonal e, subdiagonal d) the columns of
W = Q L^-T follow the recursion w_i = (q_i - d_(i-1) w_(i-1)) / e_i, and

    diag(C Q T^-1 Q^T C^T) = sum_i (C w_i)^2,

a sum of squares that grows with every step: an underestimate of diag(C A^-1 C^T) for k < n, exact (up to
rounding) once the Krylov space is all of R^n. Cost: k products with A, k with each C, O(n k^2) for the
re-orthogonalisation; storage O(n k).
"""
from __future__ import annotations

import numpy as np


def _steps(matvec, n: int, k: int, start, tol: float):
    """The Lanczos iteration with full re-orthogonalisation: yields ``(i, q_i, alpha_i, beta_i)`` for each step
    i < k, stopping early when the Krylov space becomes invariant (beta below ``tol`` times the largest
    alpha). ``beta_i`` is the norm of the next residual (the off-diagonal T[i+1, i])."""
    k = int(min(k, n))
    q = np.random.default_rng(0).standard_normal(n) if start is None else np.asarray(start, dtype=float).copy()
    q /= np.linalg.norm(q)
    Q = np.empty((n, k))
    scale = 0.0
    v = matvec(q)
    for i in range(k):
        Q[:, i] = q
        alpha = float(q @ v)
        r = v - alpha * q
        r -= Q[:, : i + 1] @ (Q[:, : i + 1].T @ r)     # full re-orthogonalisation (twice is enough)
        r -= Q[:, : i + 1] @ (Q[:, : i + 1].T @ r)
        beta = float(np.linalg.norm(r))
        yield i, q, alpha, beta
        scale = max(scale, abs(alpha))
        if i + 1 == k or beta <= tol * scale:
            return
        q_prev, q = q, r / beta
        v = matvec(q) - beta * q_prev


def lanczos(matvec, n: int, k: int, *, start=None, tol: float = 1e-12):
    """k Lanczos steps on A (``matvec(v) = A v``, n x n SPD): ``(Q, alpha, beta)`` with Q (n x steps) orthonormal
    and T = Q^T A Q tridiagonal with diagonal ``alpha`` and off-diagonal ``beta`` (steps - 1 entries), so that
    Q T^-1 Q^T approximates A^-1 from below (exact once the Krylov space is invariant)."""
    qs, alphas, betas = [], [], []
    for _, q, alpha, beta in _steps(matvec, n, k, start, tol):
        qs.append(q)
        alphas.append(alpha)
        betas.append(beta)
    return np.column_stack(qs), np.asarray(alphas), np.asarray(betas[:-1])


def lanczos_variances(matvec, n: int, k: int, maps=(), *, start=None, tol: float = 1e-12):
    """Run k Lanczos steps on A (``matvec(v) = A v``, n x n SPD) and return ``(variances, steps)``.

    ``maps`` is a sequence of linear maps C (callables v -> C v); ``variances[i]`` estimates diag(C_i A^-1 C_i^T).
    ``start`` is the unit start vector (default: a fixed pseudo-random one, so the estimate does not depend on the
    caller's seed). The iteration stops early when the Krylov space becomes invariant (beta below ``tol`` times the
    largest alpha); ``steps`` is the number of steps taken.
    """
    ws = [None] * len(maps)
    variances = [None] * len(maps)
    d_prev = 0.0
    steps = 0
    for i, q, alpha, beta in _steps(matvec, n, k, start, tol):
        # Cholesky of T, one row at a time; Alg. 3.2, corrected: d_i = beta_i / e_i ([N] §3.5.4, the '/' is lost)
        e = np.sqrt(max(alpha - d_prev**2, 1e-300))
        for j, C in enumerate(maps):
            Cq = C(q)
            ws[j] = Cq / e if i == 0 else (Cq - d_prev * ws[j]) / e
            variances[j] = ws[j] ** 2 if i == 0 else variances[j] + ws[j] ** 2
        d_prev = beta / e
        steps = i + 1
    return variances, steps
