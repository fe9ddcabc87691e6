"""``vb``: individual-potential (local variational) bounds for GP classification (thesis §4.6, Table 4.1, App. F.8).

Every likelihood factor is bounded from below by a Gaussian-form function of f_i, tight at a position
varsigma_i (4.19): sig(y_i f_i) >= exp(a_i f_i^2 + b_i y_i f_i + c_i), so

    Z >= Z_VB(varsigma) = int N(f | 0, K) exp(f^T A f + (b o y)^T f + 1^T c) df,
    ln Z_VB = 1^T c + 1/2 (b o y)^T (K^-1 - 2A)^-1 (b o y) - 1/2 ln|I - 2 A K|                      (4.20)

and Q = N(m, V) with W = -2A, V = (K^-1 + W)^-1, m = V (b o y) is the normalised bounding integrand.

* logit: Jaakkola & Jordan, a = -lambda(varsigma), b = 1/2, c = lambda varsigma^2 - varsigma/2 + ln sig(varsigma),
  lambda = (2 sig(varsigma) - 1) / (4 varsigma) = tanh(varsigma/2) / (4 varsigma)  (lambda(0) = 1/8);
* probit: the thesis's bound (F.8), a = -1/2, b = varsigma + N(varsigma)/Phi(varsigma),
  c = (varsigma/2 - b) varsigma + ln Phi(varsigma): tangent to ln Phi at varsigma with the curvature of its left
  tail (valid because ln Phi(t) + t^2/2 is convex). Its width cannot adapt, so W = I whatever the data.

The positions are updated by the EM fixed point, which maximises E_Q[ln bound] at the current Q and therefore
never decreases ln Z_VB: logit varsigma_i^2 = E_Q[f_i^2] = m_i^2 + V_ii; probit varsigma_i = y_i m_i (the
bound's derivative in varsigma is b'(varsigma)(y_i m_i - varsigma) with b' > 0). EM is slow for large amplitudes,
so each EM step is also tried over-relaxed (step length doubled while it pays, Salakhutdinov & Roweis 2003) and
the better of the two is kept, so the bound still never decreases. At the probit fixed point
(K^-1 + I) m = m + y o N(y o m)/Phi(y o m), i.e. K^-1 m = d ln P(y | m)/dm: the VB mean is the Laplace mode and
V = (K^-1 + I)^-1, whatever the amplitude. Both likelihoods start from the Laplace approximation
(varsigma_i = y_i f_hat_i, resp. varsigma_i^2 = f_hat_i^2 + V_LA,ii), which the EM steps then improve; from
other starts the probit iteration converges only linearly (slowly for large amplitudes). The returned log evidence is
ln Z_VB (the bound, a lower bound on ln Z); the Jensen bound (4.13) at Q is never below it (the thesis uses the
latter for model selection).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import log_expit, log_ndtr

from bayeszoo.checks import POSITIVE, POSITIVE_INT
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import common as C
from .laplace import laplace_mode

OPTIONS = {
    "max_iter": Option(1000, "largest number of EM updates of the bound positions", POSITIVE_INT),
    "tol": Option(1e-10, "convergence tolerance on the relative change of ln Z_VB in an update", POSITIVE),
}


def jj_lambda(varsigma):
    """Jaakkola-Jordan curvature lambda(varsigma) = (2 sig(varsigma) - 1) / (4 varsigma), 1/8 at 0."""
    s = np.abs(np.asarray(varsigma, float))
    small = s < 1e-4
    safe = np.where(small, 1.0, s)
    return np.where(small, 0.125 - s * s / 96.0, np.tanh(0.5 * safe) / (4.0 * safe))


def bound_coefficients(varsigma, likelihood):
    """``(a, b, c)`` of the lower bound ln sig(t) >= a t^2 + b t + c tight at t = varsigma (Table 4.1)."""
    varsigma = np.asarray(varsigma, float)
    if likelihood == "logit":
        lam = jj_lambda(varsigma)
        return -lam, np.full_like(varsigma, 0.5), lam * varsigma**2 - 0.5 * varsigma + log_expit(varsigma)
    lp = log_ndtr(varsigma)
    b = varsigma + np.exp(-0.5 * varsigma**2 - 0.5 * C.LOG_2PI - lp)   # varsigma + N/Phi   (F.8)
    return np.full_like(varsigma, -0.5), b, (0.5 * varsigma - b) * varsigma + lp


class VBState(NamedTuple):
    """The bound positions ``varsigma`` and Q there (:func:`vb_state`): ``m``, ``v`` (diag V), ``alpha``, ``sW``,
    ``L``; ``objective`` ln Z_VB; ``relax``, the over-relaxation's step factor for the next update."""

    varsigma: np.ndarray
    m: np.ndarray
    v: np.ndarray
    alpha: np.ndarray
    sW: np.ndarray
    L: np.ndarray
    objective: float
    relax: float = 1.0


def vb_state(K, y, likelihood, varsigma) -> VBState:
    """Q and ln Z_VB (4.20) for the bound positions ``varsigma``: m = V (b o y), alpha = K^-1 m = b o y - C K (b o y)
    with C = sW B^-1 sW (Table 4.3), and diag V (the full V: ``C.posterior_cov(K, sW, L)``)."""
    a, b, c = bound_coefficients(varsigma, likelihood)
    sW = np.sqrt(-2.0 * a)
    by = b * y
    L = C.chol_B(K, sW)
    alpha = by - C.solve_C(sW, L, K @ by)
    m = K @ alpha
    Vh = C.triangular_inverse(L) @ (sW[:, None] * K)
    v = np.diag(K) - np.sum(Vh * Vh, 0)
    # (b o y)^T V (b o y) = (b o y)^T m
    log_z = float(np.sum(c)) + 0.5 * float(by @ m) - 0.5 * C.logdet_B(L)
    return VBState(varsigma=varsigma, m=m, v=v, alpha=alpha, sW=sW, L=L, objective=log_z)


class VBInfo(NamedTuple):
    """One EM update: ln Z_VB after it (``objective``), its relative change (``change``), and whether a bound
    position still moved by more than 1e-6 (1 + max |varsigma|) (``moving``)."""

    objective: float
    change: float
    moving: bool


class VBResult(NamedTuple):
    """VB's Q = N(``m``, ``V``) at the final bound positions ``varsigma`` (``v`` = diag V, ``alpha`` = K^-1 m,
    ``sW``, ``L``), ``log_evidence`` (ln Z_VB), its ``trace``, ``iterations`` and ``converged``."""

    varsigma: np.ndarray
    m: np.ndarray
    v: np.ndarray
    V: np.ndarray
    alpha: np.ndarray
    sW: np.ndarray
    L: np.ndarray
    log_evidence: float
    trace: np.ndarray
    iterations: int
    converged: bool


def em_bounds(K, y, likelihood, *, overrelax=True) -> Algorithm:
    """EM updates of the bound positions (module docstring); ``init`` takes the starting positions. With
    ``overrelax`` each update is also tried over-relaxed, and the better of the two kept."""
    def state_at(varsigma, relax):
        return vb_state(K, y, likelihood, varsigma)._replace(relax=relax)

    def init(varsigma0):
        return state_at(np.asarray(varsigma0, float).copy(), 1.0)

    def step(s):
        em_pos = np.sqrt(s.m ** 2 + s.v) if likelihood == "logit" else y * s.m
        relax = s.relax
        new = state_at(em_pos, relax)
        if overrelax and relax > 1.0:
            # over-relaxed EM (Salakhutdinov & Roweis 2003): a longer step along the EM step, kept only if
            # it beats the EM step itself, so the bound still never decreases
            far_pos = s.varsigma + relax * (em_pos - s.varsigma)
            far = state_at(np.abs(far_pos) if likelihood == "logit" else far_pos, relax)
            if far.objective > new.objective:
                new, relax = far, min(2.0 * relax, 64.0)
            else:
                relax = 1.0
        elif overrelax:
            relax = 2.0
        moved = float(np.max(np.abs(new.varsigma - s.varsigma)))
        info = VBInfo(objective=new.objective, change=abs(new.objective - s.objective) / max(1.0, abs(new.objective)),
                      moving=moved > 1e-6 * (1.0 + float(np.max(np.abs(new.varsigma)))))
        return new._replace(relax=relax), info

    return Algorithm(init, step)


def vb_fit(K, y, likelihood, *, varsigma0=None, max_iter=1000, tol=1e-10, overrelax=True, progress=False,
           owner: str = "vb") -> VBResult:
    """EM fixed point on the bound positions from ``varsigma0`` (None: from the Laplace approximation, module
    docstring). ``overrelax`` tries longer steps along each EM step (doubling while they pay, back to plain EM
    when not); every accepted step is at least as good as the EM step."""
    if varsigma0 is None:
        la = laplace_mode(K, y, likelihood)
        if likelihood == "logit":
            varsigma0 = np.sqrt(la.f ** 2 + C.posterior_var(K, la.sW, la.L))
        else:
            varsigma0 = y * la.f
    run = iterate(em_bounds(K, y, likelihood, overrelax=overrelax), varsigma0, max_iter=max_iter, tol=tol,
                  progress=progress, desc=f"vb ({likelihood})", unit="EM step", owner=owner,
                  change_name="change of ln Z_VB")
    s = run.state
    return VBResult(varsigma=s.varsigma, m=s.m, v=s.v, V=C.posterior_cov(K, s.sW, s.L), alpha=s.alpha, sW=s.sW,
                    L=s.L, log_evidence=s.objective, trace=run.trace, iterations=run.iterations,
                    converged=run.converged)


def vb_posterior(model, data, opts=None, progress=False, owner: str = "vb") -> C.Posterior:
    """VB's Q = N(m, V) at the model's hyperparameters, as the family's posterior struct (its sites: the bound
    positions varsigma); its evidence is the bound ln Z_VB."""
    opts = C.with_defaults(OPTIONS, opts)
    res, _, y = C.run_at_hyperparameters(model, data, vb_fit, max_iter=opts["max_iter"], tol=opts["tol"],
                                         progress=progress, owner=owner)
    with C.quiet_numerics():
        jb = C.jensen_bound(y, res.m, res.V, model.likelihood, sW=res.sW, L=res.L, alpha=res.alpha)
    return C.Posterior(mean=res.m, cov=res.V, log_evidence=res.log_evidence, jensen_bound=jb,
                       alpha=res.alpha, sW=res.sW, objective={"log_evidence": res.trace},
                       objective_name="log_evidence", iterations=res.iterations, converged=res.converged,
                       sites={"varsigma": res.varsigma})


@register("vb", kind="approximation", family="gpc", options=OPTIONS, defaults=APPROXIMATION_DEFAULTS,
          memory=C.memory(8))
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """Individual-potential bounds (Jaakkola-Jordan for logit, the thesis's bound for probit), EM updates."""
    return C.approximation_run(model, data, vb_posterior, opts, ctx,
                               draws=draws, chains=chains, limit=f"{opts['max_iter']} iterations")
