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

import numpy as np
import scipy.linalg as sla

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Flag, Interval
from bayeszoo.inference.approximations import GaussianApproximation, approximation_fit
from bayeszoo.inference.slm._common import blas_threads, dense_memory, potentials_group, precision_cholesky
from bayeszoo.resources import Need
from bayeszoo.progress import progress_bar, show
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, owner, register

DENSE_LIMIT = 4096     # largest n (the posterior covariance is formed densely, O(n^3) per iteration)
LOG_2PI = float(np.log(2.0 * np.pi))


def _check(options, model, data):
    if data.d > DENSE_LIMIT:
        raise ValueError(f"{owner('slm', 'sbl')} is dense (O(n^3) per iteration) and takes n <= {DENSE_LIMIT}; this "
                         f"problem has n = {data.d}")


def _moments_small_m(X, y, sigma2, alpha):
    """B = I, m < n: (mean, nu = diag P^-1, log evidence, tr(X P^-1 X^T) / sigma2) through C = sigma2 I + X Gamma
    X^T (module docstring)."""
    gamma = 1.0 / alpha
    G = (X * gamma) @ X.T
    Lc = precision_cholesky(0.5 * (G + G.T) + sigma2 * np.eye(len(y)), "sbl")
    W = sla.solve_triangular(Lc, X * gamma, lower=True)                # L_C^-1 X Gamma
    a = sla.solve_triangular(Lc, y, lower=True)
    mean = W.T @ a                                                     # Gamma X^T C^-1 y
    nu = gamma - np.sum(W * W, axis=0)
    log_evidence = -0.5 * (len(y) * LOG_2PI + 2.0 * np.sum(np.log(np.diag(Lc))) + a @ a)
    GCinv_trace = np.trace(sla.cho_solve((Lc, True), G))               # tr(X P^-1 X^T) / sigma2 = tr(G C^-1)
    return mean, nu, log_evidence, GCinv_trace, W, gamma


def sbl(X, B, y, sigma2, *, learn_noise=False, max_iter=1000, tol=1e-8, prune=1e12, progress=False):
    """Type-II ML on dense X (m x n), B (q x n). Returns a dict: ``mean``, ``cov`` (of u), ``alpha`` = 1/gamma
    (q,), ``sigma2``, ``iterations``, ``converged``, ``log_evidence`` (trace; NaN unless B is orthonormal);
    ``progress`` shows a bar over the iterations."""
    with progress_bar(total=max_iter, desc="sbl (slm)", disable=not progress, unit="iteration") as bar:
        return _sbl(X, B, y, sigma2, learn_noise=learn_noise, max_iter=max_iter, tol=tol, prune=prune, bar=bar)


def _sbl(X, B, y, sigma2, *, learn_noise, max_iter, tol, prune, bar):
    m, n = X.shape
    q = B.shape[0]
    if q == n and m < n and np.array_equal(B, np.eye(n)):
        return _sbl_small_m(X, y, sigma2, learn_noise=learn_noise, max_iter=max_iter, tol=tol, prune=prune, bar=bar)
    XtX, Xty = X.T @ X, X.T @ y
    alpha = np.ones(q)
    orthonormal = q == n and np.allclose(B @ B.T, np.eye(q), atol=1e-10)
    trace, converged = [], False
    for it in range(1, max_iter + 1):
        P = XtX / sigma2 + B.T @ (alpha[:, None] * B)
        L = precision_cholesky(0.5 * (P + P.T), "sbl")
        mean = sla.cho_solve((L, True), Xty / sigma2)
        Li_Bt = sla.solve_triangular(L, B.T, lower=True)            # nu = diag(B P^-1 B^T)
        nu = np.sum(Li_Bt**2, axis=0)
        s = B @ mean
        resid = y - X @ mean
        if orthonormal:
            logdet = 2.0 * np.sum(np.log(np.diag(L))) - np.sum(np.log(alpha))
            trace.append(-0.5 * (m * np.log(2 * np.pi * sigma2) + logdet + resid @ resid / sigma2
                                 + np.sum(alpha * s * s)))
        new = _mackay(alpha, nu, s, prune)
        if learn_noise:
            Li_Xt = sla.solve_triangular(L, X.T, lower=True)
            dof = m - np.sum(Li_Xt**2) / sigma2
            sigma2 = float(resid @ resid / max(dof, 1e-12))
        alpha, change = new, _change(alpha, new, prune)
        bar.update()
        show(bar, f"change {change:.2g} (tol {tol:g})")
        if change < tol:
            converged = True
            break
    P = XtX / sigma2 + B.T @ (alpha[:, None] * B)
    L = precision_cholesky(0.5 * (P + P.T), "sbl")
    mean = sla.cho_solve((L, True), Xty / sigma2)
    Li = sla.solve_triangular(L, np.eye(n), lower=True)
    return {"mean": mean, "cov": Li.T @ Li, "alpha": alpha, "sigma2": sigma2, "iterations": it,
            "converged": converged, "log_evidence": np.asarray(trace, float)}


def _mackay(alpha, nu, s, prune):
    """MacKay's fixed point for the precisions 1/gamma_j (module docstring); pruned potentials stay pruned."""
    g = np.clip(1.0 - alpha * nu, 0.0, 1.0)
    new = np.minimum(g / np.maximum(s * s, 1e-300), prune)
    return np.where(alpha >= prune, prune, np.maximum(new, 1e-300))


def _change(alpha, new, prune) -> float:
    live = new < prune
    return float(np.max(np.abs(np.log(new[live]) - np.log(alpha[live])))) if live.any() else 0.0


def _sbl_small_m(X, y, sigma2, *, learn_noise, max_iter, tol, prune, bar):
    """:func:`sbl` for B = I and m < n through the m x m matrix C (module docstring)."""
    m, n = X.shape
    alpha = np.ones(n)
    trace, converged = [], False
    for it in range(1, max_iter + 1):
        mean, nu, log_evidence, GCinv_trace, _, _ = _moments_small_m(X, y, sigma2, alpha)
        trace.append(log_evidence)
        new = _mackay(alpha, nu, mean, prune)
        if learn_noise:
            resid = y - X @ mean
            sigma2 = float(resid @ resid / max(m - GCinv_trace, 1e-12))
        alpha, change = new, _change(alpha, new, prune)
        bar.update()
        show(bar, f"change {change:.2g} (tol {tol:g})")
        if change < tol:
            converged = True
            break
    mean, _, _, _, W, gamma = _moments_small_m(X, y, sigma2, alpha)
    return {"mean": mean, "cov": np.diag(gamma) - W.T @ W, "alpha": alpha, "sigma2": sigma2, "iterations": it,
            "converged": converged, "log_evidence": np.asarray(trace, float)}


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
def run(model, data, *, draws, tune, chains, seed, progress, max_iter, tol, learn_noise, prune):
    """SBL / ARD type-II maximum likelihood on the potentials' variances."""
    t0 = time.perf_counter()
    res = sbl(model.dense_X(data), model.dense_B(data), np.asarray(data.y, float), model.sigma2,
              learn_noise=learn_noise, max_iter=max_iter, tol=tol, prune=prune, progress=progress)
    evidence = res["log_evidence"]
    q = GaussianApproximation(variable="u", mean=res["mean"], cov=res["cov"],
                              log_evidence=evidence[-1] if evidence.size else None,
                              objective={"log_evidence": evidence} if evidence.size else {},
                              objective_name="log_evidence" if evidence.size else None,
                              iterations=res["iterations"], converged=res["converged"])
    info = {"sigma2": res["sigma2"], "n_pruned": int(np.sum(res["alpha"] >= prune))}
    return approximation_fit(model, data, "sbl", q, draws=draws, chains=chains, seed=seed,
                             timing={"tune": time.perf_counter() - t0}, owner=owner("slm", "sbl"), info=info,
                             limit=f"{max_iter} iterations (tol={tol:g})",
                             extra_groups=potentials_group(gamma=1.0 / res["alpha"]))
