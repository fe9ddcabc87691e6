"""Sparse Bayesian learning (type-II maximum likelihood / ARD; Tipping 2001) for the SLM: the thesis's "BCS"
baseline (Ji & Carin 2007; Nickisch thesis §3.2, (3.2)-(3.3), §5.4).

The potentials are replaced by Gaussians s_j ~ N(0, gamma_j) on s = B u, and gamma (and the noise variance when
``learn_noise``) maximise the marginal likelihood. With P = X^T X / sigma2 + B^T diag(1/gamma) B, posterior
N(mu, P^-1) and nu = diag(B P^-1 B^T), MacKay's fixed point reads

    1/gamma_j = g_j / (B mu)_j^2,   g_j = 1 - nu_j / gamma_j,     sigma2 = ||y - X mu||^2 / (m - tr(X P^-1 X^T) / sigma2)

(for B = I Tipping's (16)-(18); 0 <= nu_j <= gamma_j by Theorem 1.4 of the thesis, so g_j is in [0, 1]).
Potentials whose precision 1/gamma_j passes ``prune`` are pruned (gamma_j = 0): the "premature sparsification" of
§5.5. The model's ``potential`` and ``tau`` do not enter: SBL is a different prior on the same measurements. Dense
algebra: O(n^3) per iteration; with B = I and fewer measurements than unknowns (m < n, compressed sensing) the
iteration works with the m x m matrix C = sigma2 I + X Gamma X^T instead (Woodbury: P^-1 = Gamma - Gamma X^T C^-1
X Gamma, mu = Gamma X^T C^-1 y; Tipping 2001, (16)-(18)), O(m^2 n).

The result is the :class:`~bayeszoo.inference.approximations.GaussianApproximation` N(mu, P^-1) at the optimum
(i.i.d. draws, its mean and covariance in the ``gaussian`` group); the learnt ``gamma`` goes into the ``potentials``
group, ``n_pruned`` and ``sigma2`` into ``info``; the ``log_evidence`` trace when B is orthonormal (``identity``,
``wavelet``).
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Flag, Interval
from bayeszoo.inference.approximations import GaussianApproximation, approximation_fit
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.inference.slm.common import blas_threads, dense_memory, potentials_group, precision_cholesky
from bayeszoo.memory_guard import Need
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

DENSE_LIMIT = 4096     # largest n (the posterior covariance is formed densely, O(n^3) per iteration)
LOG_2PI = float(np.log(2.0 * np.pi))


def _check(options, model, data, owner):
    if data.d > DENSE_LIMIT:
        raise ValueError(f"{owner} is dense (O(n^3) per iteration) and takes n <= {DENSE_LIMIT}; this "
                         f"problem has n = {data.d}")


def _moments_small_m(X, y, sigma2, alpha, owner: str):
    """B = I, m < n: (mean, nu = diag P^-1, log evidence, tr(X P^-1 X^T) / sigma2) through C = sigma2 I + X Gamma
    X^T (module docstring)."""
    gamma = 1.0 / alpha
    G = (X * gamma) @ X.T
    Lc = precision_cholesky(0.5 * (G + G.T) + sigma2 * np.eye(len(y)), owner)
    W = sla.solve_triangular(Lc, X * gamma, lower=True)                # L_C^-1 X Gamma
    a = sla.solve_triangular(Lc, y, lower=True)
    mean = W.T @ a                                                     # Gamma X^T C^-1 y
    nu = gamma - np.sum(W * W, axis=0)
    log_evidence = -0.5 * (len(y) * LOG_2PI + 2.0 * np.sum(np.log(np.diag(Lc))) + a @ a)
    GCinv_trace = np.trace(sla.cho_solve((Lc, True), G))               # tr(X P^-1 X^T) / sigma2 = tr(G C^-1)
    return mean, nu, log_evidence, GCinv_trace, W, gamma


class SBLState(NamedTuple):
    """The fixed point's iterate: ``alpha`` = 1/gamma (q,), the noise variance ``sigma2`` and ``objective``, the log
    evidence the last step computed (None before the first step, and throughout unless B is orthonormal)."""

    alpha: np.ndarray
    sigma2: float
    objective: float | None


class SBLInfo(NamedTuple):
    """One fixed-point step: ``objective``, the log evidence at the gamma it started from (its factorisation gives
    it; None unless B is orthonormal), and ``change``, the largest change of log(1/gamma_j) over the potentials not
    pruned."""

    objective: float | None
    change: float


class SBLResult(NamedTuple):
    """Type-II ML's optimum: the posterior ``mean`` and ``cov`` of u there, ``alpha`` = 1/gamma (q,), ``sigma2``,
    ``iterations``, ``converged`` and the ``log_evidence`` trace (at the gamma each iteration started from; empty
    unless B is orthonormal)."""

    mean: np.ndarray
    cov: np.ndarray
    alpha: np.ndarray
    sigma2: float
    iterations: int
    converged: bool
    log_evidence: np.ndarray


def sbl(X, B, y, sigma2, *, learn_noise=False, max_iter=1000, tol=1e-8, prune=1e12, progress=False,
        owner: str = "approximation") -> SBLResult:
    """Type-II ML on dense X (m x n), B (q x n), from gamma = 1 and the noise variance ``sigma2``; ``progress``
    shows a bar over the iterations."""
    m, n = X.shape
    small_m = B.shape[0] == n and m < n and np.array_equal(B, np.eye(n))
    algorithm = (fixed_point_small_m(X, y, learn_noise=learn_noise, prune=prune, owner=owner) if small_m else
                 fixed_point(X, B, y, learn_noise=learn_noise, prune=prune, owner=owner))
    run = iterate(algorithm, sigma2, max_iter=max_iter, tol=tol, progress=progress, desc="sbl (slm)",
                  unit="iteration", owner=owner)
    mean, cov = algorithm.result(run.state)
    return SBLResult(mean=mean, cov=cov, alpha=run.state.alpha, sigma2=run.state.sigma2,
                     iterations=run.iterations, converged=run.converged, log_evidence=run.trace)


def fixed_point(X, B, y, *, learn_noise, prune, owner: str = "approximation") -> Algorithm:
    """MacKay's fixed point on the dense precision P (module docstring); ``init`` takes the starting noise
    variance and ``result`` gives (mean, cov) of u at the state's gamma."""
    m, n = X.shape
    q = B.shape[0]
    XtX, Xty = X.T @ X, X.T @ y
    orthonormal = q == n and np.allclose(B @ B.T, np.eye(q), atol=1e-10)

    def factor(alpha, sigma2):
        P = XtX / sigma2 + B.T @ (alpha[:, None] * B)
        L = precision_cholesky(0.5 * (P + P.T), owner)
        return L, sla.cho_solve((L, True), Xty / sigma2)

    def init(sigma2):
        return SBLState(np.ones(q), sigma2, None)

    def step(state):
        alpha, sigma2, _ = state
        L, mean = factor(alpha, sigma2)
        Li_Bt = sla.solve_triangular(L, B.T, lower=True)            # nu = diag(B P^-1 B^T)
        nu = np.sum(Li_Bt**2, axis=0)
        s = B @ mean
        resid = y - X @ mean
        log_evidence = None
        if orthonormal:
            logdet = 2.0 * np.sum(np.log(np.diag(L))) - np.sum(np.log(alpha))
            log_evidence = -0.5 * (m * np.log(2 * np.pi * sigma2) + logdet + resid @ resid / sigma2
                                   + np.sum(alpha * s * s))
        new = _mackay(alpha, nu, s, prune)
        if learn_noise:
            Li_Xt = sla.solve_triangular(L, X.T, lower=True)
            dof = m - np.sum(Li_Xt**2) / sigma2
            sigma2 = float(resid @ resid / max(dof, 1e-12))
        return SBLState(new, sigma2, log_evidence), SBLInfo(log_evidence, _change(alpha, new, prune))

    def result(state):
        L, mean = factor(state.alpha, state.sigma2)
        Li = sla.solve_triangular(L, np.eye(n), lower=True)
        return mean, Li.T @ Li

    return Algorithm(init, step, result)


def _mackay(alpha, nu, s, prune):
    """MacKay's fixed point for the precisions 1/gamma_j (module docstring); pruned potentials stay pruned."""
    g = np.clip(1.0 - alpha * nu, 0.0, 1.0)
    new = np.minimum(g / np.maximum(s * s, 1e-300), prune)
    return np.where(alpha >= prune, prune, np.maximum(new, 1e-300))


def _change(alpha, new, prune) -> float:
    live = new < prune
    return float(np.max(np.abs(np.log(new[live]) - np.log(alpha[live])))) if live.any() else 0.0


def fixed_point_small_m(X, y, *, learn_noise, prune, owner: str = "approximation") -> Algorithm:
    """:func:`fixed_point` for B = I and m < n through the m x m matrix C (module docstring)."""
    m, n = X.shape

    def init(sigma2):
        return SBLState(np.ones(n), sigma2, None)

    def step(state):
        alpha, sigma2, _ = state
        mean, nu, log_evidence, GCinv_trace, _, _ = _moments_small_m(X, y, sigma2, alpha, owner)
        new = _mackay(alpha, nu, mean, prune)
        if learn_noise:
            resid = y - X @ mean
            sigma2 = float(resid @ resid / max(m - GCinv_trace, 1e-12))
        return SBLState(new, sigma2, log_evidence), SBLInfo(log_evidence, _change(alpha, new, prune))

    def result(state):
        mean, _, _, _, W, gamma = _moments_small_m(X, y, state.sigma2, state.alpha, owner)
        return mean, np.diag(gamma) - W.T @ W

    return Algorithm(init, step, result)


def memory(model, data, options) -> Need:
    """Dense algebra: with B = I and fewer measurements than unknowns the m x n products of the Woodbury form and
    the covariance; otherwise X^T X, the precision, its factor and inverse, the covariance and B^T twice."""
    if model.B == "identity" and data.n < data.d:
        return dense_memory(model, data, 3, B_copies=0, X_copies=3)
    return dense_memory(model, data, 6, B_copies=2)


@register("sbl", kind="approximation", family="slm", check=_check, memory=memory,
          applies=lambda model: model.potential != "sigmoid",   # labels are not measurements
          defaults={**APPROXIMATION_DEFAULTS, "draws": 1000, "chains": 4},
          description="sparse Bayesian learning (type-II ML / ARD on s = B u): the BCS baseline",
          options={"max_iter": Option(1000, "most fixed-point iterations", POSITIVE_INT),
                   "tol": Option(1e-8, "stop when the largest change of log(1/gamma_j) is below this", POSITIVE),
                   "learn_noise": Option(False, "also learn the noise variance (else the model's sigma2)", Flag()),
                   "prune": Option(1e12, "a potential whose precision 1/gamma passes this is pruned",
                                   Interval(float, 1.0, 1e300, "right"))})
@blas_threads()
def run(model, data, *, draws, tune, chains, ctx, max_iter, tol, learn_noise, prune):
    """SBL / ARD type-II maximum likelihood on the potentials' variances."""
    t0 = time.perf_counter()
    res = sbl(model.dense_X(data), model.dense_B(data), np.asarray(data.y, float), model.sigma2,
              learn_noise=learn_noise, max_iter=max_iter, tol=tol, prune=prune, progress=ctx.progress,
              owner=ctx.owner)
    evidence = res.log_evidence
    q = GaussianApproximation(variable="u", mean=res.mean, cov=res.cov,
                              log_evidence=evidence[-1] if evidence.size else None,
                              objective={"log_evidence": evidence} if evidence.size else {},
                              objective_name="log_evidence" if evidence.size else None,
                              iterations=res.iterations, converged=res.converged)
    info = {"sigma2": res.sigma2, "n_pruned": int(np.sum(res.alpha >= prune))}
    return approximation_fit(model, data, q, ctx=ctx, draws=draws, chains=chains,
                             timing={"tune": time.perf_counter() - t0}, info=info,
                             limit=f"{max_iter} iterations (tol={tol:g})",
                             extra_groups=potentials_group(gamma=1.0 / res.alpha))
