"""``laplace``: Laplace's method for binary GP classification (thesis section 4.3; R&W Alg. 3.1, 3.2, 5.1).

Newton's method for the mode of log p(f | y) in the stable B = I + W^1/2 K W^1/2 form (R&W Alg. 3.1), with
step-size control (step halving on Psi(a) = -a^T f / 2 + log p(y | f) along the Newton direction in alpha).
Q = N(f_hat, (K^-1 + W)^-1), W = -d^2 log p(y | f_hat). Evidence (4.15, corrected sign of log p(y | m)):

    ln Z_LA = log p(y | f_hat) - 1/2 f_hat^T K^-1 f_hat - 1/2 ln|I + K W|.

Its gradient w.r.t. the log-hyperparameters (:func:`laplace_log_evidence_grad`) is R&W Alg. 5.1, including the
implicit term through f_hat; :mod:`.type2ml` maximises it.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import linalg as sla

from bayeszoo.checks import POSITIVE, POSITIVE_INT
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import common as C

OPTIONS = {
    "max_iter": Option(100, "largest number of Newton iterations for the mode", POSITIVE_INT),
    "tol": Option(1e-9, "convergence tolerance on the relative change of Psi between Newton iterations", POSITIVE),
}


class NewtonState(NamedTuple):
    """Newton's iterate for the mode: ``alpha`` = K^-1 f, ``f`` and ``objective``, Psi(alpha) = -alpha^T f / 2 +
    log p(y | f)."""

    alpha: np.ndarray
    f: np.ndarray
    objective: float


class NewtonInfo(NamedTuple):
    """One Newton step: Psi after it (``objective``), its relative change (``change``), whether f still moved by
    more than 1e-8 (1 + max |f|) (``moving``), and the step length the halving kept (``step_size``)."""

    objective: float
    change: float
    moving: bool
    step_size: float


class LaplaceMode(NamedTuple):
    """The mode and what the evidence and its gradient need there: ``f``, ``alpha`` (K^-1 f), ``sW`` (W^1/2),
    ``L`` (chol B), ``d1``, ``d3`` (the likelihood's derivatives), ``log_lik``, ``log_evidence`` (ln Z_LA), the
    ``psi`` trace, ``iterations`` and ``converged``."""

    f: np.ndarray
    alpha: np.ndarray
    sW: np.ndarray
    L: np.ndarray
    d1: np.ndarray
    d3: np.ndarray
    log_lik: float
    log_evidence: float
    psi: np.ndarray
    iterations: int
    converged: bool


def newton(K, y, likelihood) -> Algorithm:
    """Newton's method for the mode of log p(f | y) (R&W Alg. 3.1) with step halving on Psi; ``init`` takes the
    starting alpha (None: zero)."""
    def psi_of(a, f):
        return -0.5 * float(a @ f) + float(np.sum(C.log_lik(f, y, likelihood)))

    def init(a0):
        a = np.zeros(K.shape[0]) if a0 is None else np.asarray(a0, float).copy()
        f = K @ a
        return NewtonState(a, f, psi_of(a, f))

    def step(state):
        a, f, psi = state
        _, d1, d2, _ = C.log_lik_derivs(f, y, likelihood)
        W = -d2
        sW = np.sqrt(W)
        b = W * f + d1
        a_new = b - C.solve_C(sW, C.chol_B(K, sW), K @ b)          # R&W Alg. 3.1 lines 6-7
        da = a_new - a
        size = 1.0
        while True:
            a_try = a + size * da
            f_try = K @ a_try
            psi_try = psi_of(a_try, f_try)
            if psi_try >= psi - 1e-12 * abs(psi) or size < 1e-10:
                break
            size *= 0.5
        moved = float(np.max(np.abs(f_try - f)))
        info = NewtonInfo(objective=psi_try, change=abs(psi_try - psi) / max(1.0, abs(psi_try)),
                          moving=moved >= 1e-8 * (1.0 + float(np.max(np.abs(f_try)))), step_size=size)
        return NewtonState(a_try, f_try, psi_try), info

    def result(state):
        a, f, _ = state
        lp, d1, d2, d3 = C.log_lik_derivs(f, y, likelihood)
        sW = np.sqrt(-d2)
        L = C.chol_B(K, sW)
        lZ = -0.5 * float(a @ f) + float(np.sum(lp)) - 0.5 * C.logdet_B(L)
        return dict(f=f, alpha=a, sW=sW, L=L, d1=d1, d3=d3, log_lik=float(np.sum(lp)), log_evidence=lZ)

    return Algorithm(init, step, result)


@C.one_blas_thread_when_small
def laplace_mode(K, y, likelihood, *, a0=None, max_iter=100, tol=1e-9, progress=False,
                 owner: str = "laplace") -> LaplaceMode:
    """Mode of the GPC posterior by Newton (R&W Alg. 3.1) with step halving, from ``a0`` (alpha; None: zero);
    ``progress`` shows a bar over the Newton steps."""
    algorithm = newton(K, y, likelihood)
    run = iterate(algorithm, a0, max_iter=max_iter, tol=tol, progress=progress, desc=f"laplace ({likelihood})",
                  unit="Newton step", owner=owner, change_name="change of Psi")
    return LaplaceMode(**algorithm.result(run.state), psi=run.trace, iterations=run.iterations,
                       converged=run.converged)


def laplace_log_evidence_grad(K, dK, y, likelihood, res=None, **mode_kw):
    """ln Z_LA and its gradient w.r.t. the log-hyperparameters (R&W Alg. 5.1, with the implicit term)."""
    if res is None:
        res = laplace_mode(K, y, likelihood, **mode_kw)
    sW, L, a, d1, d3 = res.sW, res.L, res.alpha, res.d1, res.d3
    R = C.C_matrix(sW, L)                                  # sW B^-1 sW = (K + W^-1)^-1
    Cm = sla.solve_triangular(L, sW[:, None] * K, lower=True, check_finite=False)
    # d lnZ / d f_hat = -1/2 d ln|B| / d f_hat = +1/2 diag(V) * d3, since dW_ii / df_i = -d3_i.
    # (R&W 5.23 / Alg. 5.1 line 7 with W = -d2, as in GPML infLaplace; checked by finite differences in the tests)
    s2 = 0.5 * (np.diag(K) - np.sum(Cm * Cm, 0)) * d3
    g = np.empty(dK.shape[0])
    for j in range(dK.shape[0]):
        Cj = dK[j]
        s1 = 0.5 * float(a @ Cj @ a) - 0.5 * float(np.sum(R * Cj))
        b = Cj @ d1
        s3 = b - K @ (R @ b)
        g[j] = s1 + float(s2 @ s3)
    return res.log_evidence, g, res


def fit_laplace(model, data, opts=None, progress=False, owner: str = "laplace"):
    """Laplace approximation at the model's hyperparameters: (its :class:`LaplaceMode`, K, y)."""
    opts = C.with_defaults(OPTIONS, opts)
    return C.run_at_hyperparameters(model, data, laplace_mode, max_iter=opts["max_iter"], tol=opts["tol"],
                                    progress=progress, owner=owner)


def laplace_posterior(model, data, opts=None, progress=False, owner: str = "laplace") -> C.Posterior:
    """Laplace's Q = N(f_hat, (K^-1 + W)^-1) at the model's hyperparameters, as the family's posterior struct."""
    res, K, y = fit_laplace(model, data, opts, progress, owner)
    V = C.posterior_cov(K, res.sW, res.L)
    jb = C.jensen_bound(y, res.f, V, model.likelihood, sW=res.sW, L=res.L, alpha=res.alpha)
    return C.Posterior(mean=res.f, cov=V, log_evidence=res.log_evidence, jensen_bound=jb, alpha=res.alpha,
                       sW=res.sW, objective={"psi": res.psi}, objective_name="psi",
                       iterations=res.iterations, converged=res.converged)


@register("laplace", kind="approximation", family="gpc", options=OPTIONS, defaults=APPROXIMATION_DEFAULTS,
          memory=C.memory(5, quadrature_rows=C.QUADRATURE_ROWS))
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """Laplace's method: Gaussian at the posterior mode of f (Newton in the B = I + W^1/2 K W^1/2 form)."""
    return C.approximation_run(model, data, laplace_posterior, opts, ctx,
                               draws=draws, chains=chains, limit=f"{opts['max_iter']} Newton iterations")
