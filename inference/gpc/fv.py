"""``fv``: the factorial (mean-field) variational approximation for GP classification (thesis §4.7, App. F.9).

Free-form Q(f) = prod_i q_i(f_i) minimising KL(Q || P) (Csato et al. 2000). With P = K^-1 the prior precision,
the optimal factors are tilted Gaussians (4.21):

    q_i(f_i) ∝ N(f_i | mu_i, s_i^2) sig(y_i f_i),   s_i^2 = 1 / P_ii,   mu_i = m_i - s_i^2 [P m]_i = -s_i^2 sum_{j!=i} P_ij m_j,

m_j = E_{q_j}[f_j]: the same moments as the prior's conditional of f_i given the other means. Tilted moments:
closed form for the probit, log-space quadrature for the logit (``common.tilted_moments``).

Solver. The thesis iterates "move m a step towards (4.21), adaptive step sizes". Both that and exact
one-factor-at-a-time updates (coordinate ascent) converge only linearly, at a rate set by the conditioning of
P, which the 1e-6 ridge makes very poor. Here the factors are parametrised by their locations mu (every mu gives valid factors, and the bound
below is a valid lower bound for each), and ln Z_FV is maximised by Newton's method with step halving:
gradient D (d1 - P m), D = diag(dm_i / dmu_i) = diag(1 + s_i^2 d2_i), and the positive definite curvature
D P D - diag(D d2) (the exact negative Hessian at the fixed point), so the stationary point is that of (4.21)
and the objective trace never decreases.

Evidence: the mean-field lower bound ln Z_FV = E_Q[ln N(f | 0, K) P(y | f) / Q(f)]. With the optimal-form
factors it reduces to (derived here; the digest's printed Csato formula is marked unreadable, [?] in §3.8)

    ln Z_FV = sum_i [ln Z_i + 1/2 ln s_i^2 + (m_i - mu_i)^2 / (2 s_i^2)] - 1/2 m^T P m - 1/2 ln|K|,

Z_i = int N(f | mu_i, s_i^2) sig(y_i f) df (the factor variances cancel). As in the thesis (§4.11), a ridge of
1e-6 (option ``ridge``) is added to K for this method, and P, ln|K| refer to K + ridge I; the precision P is the
one matrix this method needs explicitly (from the Cholesky factor of K + ridge I).

The Fit's Gaussian is N(m, diag(v)) with v_i the factors' variances; predictions use it in (4.10) as the thesis
does (a further approximation). The thesis finds that FV underestimates the marginal variances badly when the
prior is correlated (large lengthscales); its Jensen bound (4.13) is evaluated at that Gaussian.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import linalg as sla

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Interval
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.models.gpc import VARIANCE_LIMIT
from bayeszoo.numerics.linalg import cholesky
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import common as C

OPTIONS = {
    "max_iter": Option(200, "largest number of Newton iterations on the factor locations", POSITIVE_INT),
    "tol": Option(1e-9, "convergence tolerance on the relative gain of ln Z_FV in an iteration", POSITIVE),
    # added to the prior covariance: the same limit as the prior variance
    "ridge": Option(1e-6, "added to the diagonal of K for this method (thesis §4.11), in [0, 1e10]",
                    Interval(float, 0.0, VARIANCE_LIMIT, "both")),
}


def factor_moments(y, mu, s2, likelihood):
    """``(ln Z, d1, d2, m, v)`` of the factors N(f | mu, s2) sig(y f): normaliser, its first two derivatives in
    mu, mean m = mu + s2 d1 and variance v = s2 + s2^2 d2 (``common.tilted_moments``), elementwise."""
    log_z, d1, d2 = C.tilted_moments(y, mu, s2, likelihood)
    return log_z, d1, d2, mu + s2 * d1, s2 + s2 * s2 * d2


def fv_bound(log_z, m, mu, s2, P, logdet_K):
    """ln Z_FV for factors with cavity (mu, s2), means m and normalisers log_z (module docstring)."""
    return float(np.sum(log_z + 0.5 * np.log(s2) + 0.5 * (m - mu) ** 2 / s2)) - 0.5 * float(m @ P @ m) \
        - 0.5 * logdet_K


class FVState(NamedTuple):
    """The factor locations ``mu`` and what they give: the factors' means ``m`` and variances ``v``, the first two
    derivatives ``d1``, ``d2`` of their log normalisers, and ``objective`` ln Z_FV."""

    mu: np.ndarray
    m: np.ndarray
    v: np.ndarray
    d1: np.ndarray
    d2: np.ndarray
    objective: float


class FVInfo(NamedTuple):
    """One Newton step on mu: ln Z_FV after it (``objective``), its relative gain (``change``), whether mu still
    moved by more than 1e-8 (1 + max |mu|) (``moving``), and ``stalled``: no ascent was left at machine precision
    (``moving`` then says whether the point or the direction is not finite)."""

    objective: float
    change: float
    moving: bool
    stalled: bool = False


class FVResult(NamedTuple):
    """FV's factors: means ``m`` and variances ``v``, locations ``mu`` and cavity variances ``s2``,
    ``log_evidence`` (ln Z_FV), its ``trace``, ``iterations`` and ``converged``."""

    m: np.ndarray
    v: np.ndarray
    mu: np.ndarray
    s2: np.ndarray
    log_evidence: float
    trace: np.ndarray
    iterations: int
    converged: bool


def newton_on_locations(y, likelihood, s2, P, logdet_K) -> Algorithm:
    """Newton steps on the factor locations with step halving on ln Z_FV; ``init`` takes the starting mu."""
    def state(mu):
        log_z, d1, d2, m, v = factor_moments(y, mu, s2, likelihood)
        return FVState(mu, m, v, d1, d2, fv_bound(log_z, m, mu, s2, P, logdet_K))

    def step(s):
        dm = 1.0 + s2 * s.d2                             # dm_i / dmu_i, in (0, 1]
        grad = dm * (s.d1 - P @ s.m)                     # zero iff mu satisfies (4.21)
        H = dm[:, None] * P * dm[None, :] - np.diag(dm * s.d2)   # -Hessian at the fixed point, > 0
        try:
            direction = sla.solve(H, grad, assume_a="pos", check_finite=False)
        except (np.linalg.LinAlgError, sla.LinAlgError):       # round-off: a diagonally scaled gradient step
            direction = grad / np.diag(H)
        size = 1.0
        while size >= 1e-12:
            new = state(s.mu + size * direction)
            if np.isfinite(new.objective) and new.objective >= s.objective - 1e-13 * abs(s.objective):
                break
            size *= 0.5
        else:                                            # no ascent left at machine precision
            finite = np.isfinite(s.objective) and np.all(np.isfinite(direction))
            return s, FVInfo(objective=s.objective, change=0.0, moving=not finite, stalled=True)
        move = size * float(np.max(np.abs(direction)))
        info = FVInfo(objective=new.objective, change=(new.objective - s.objective) / max(1.0, abs(new.objective)),
                      moving=move > 1e-8 * (1.0 + float(np.max(np.abs(new.mu)))))
        return new, info

    return Algorithm(lambda mu0: state(mu0), step)


def fv_fit(K, y, likelihood, *, ridge=1e-6, max_iter=200, tol=1e-9, mu0=None, progress=False,
           owner: str = "fv") -> FVResult:
    """Maximise ln Z_FV over the factor locations mu (Newton with step halving, from ``mu0``; None: zero)."""
    n = K.shape[0]
    Kr = K + ridge * np.eye(n)
    Lk = cholesky(Kr, what="K + ridge I (the kernel matrix of the factor locations)")
    P = sla.cho_solve((Lk, True), np.eye(n), check_finite=False)
    P = 0.5 * (P + P.T)
    logdet_K = 2.0 * float(np.sum(np.log(np.diag(Lk))))
    s2 = 1.0 / np.diag(P)
    start = np.zeros(n) if mu0 is None else np.asarray(mu0, float).copy()
    run = iterate(newton_on_locations(y, likelihood, s2, P, logdet_K), start, max_iter=max_iter, tol=tol,
                  progress=progress, desc=f"fv ({likelihood})", unit="Newton step", owner=owner,
                  change_name="gain of ln Z_FV")
    s = run.state
    return FVResult(m=s.m, v=s.v, mu=s.mu, s2=s2, log_evidence=s.objective, trace=run.trace,
                    iterations=run.iterations, converged=run.converged)


def fv_posterior(model, data, opts=None, progress=False, owner: str = "fv") -> C.Posterior:
    """FV's Q = N(m, diag v) (the factors' moments) at the model's hyperparameters, as the family's posterior
    struct; no site form (Q is not (K^-1 + W)^-1), its sites: the factor locations mu and variances s2."""
    opts = C.with_defaults(OPTIONS, opts)
    res, K, y = C.run_at_hyperparameters(model, data, fv_fit, ridge=opts["ridge"], max_iter=opts["max_iter"],
                                         tol=opts["tol"], progress=progress, owner=owner)
    V = np.diag(res.v)
    with C.quiet_numerics():
        jb = C.jensen_bound(y, res.m, V, model.likelihood, K=K)
    return C.Posterior(mean=res.m, cov=V, log_evidence=res.log_evidence, jensen_bound=jb,
                       objective={"log_evidence": res.trace}, objective_name="log_evidence",
                       iterations=res.iterations, converged=res.converged,
                       sites={"factor_mu": res.mu, "factor_s2": res.s2}, info={"ridge": float(opts["ridge"])})


@register("fv", kind="approximation", family="gpc", options=OPTIONS, defaults=APPROXIMATION_DEFAULTS,
          memory=C.memory(8))
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """Factorial variational approximation: free-form mean field over the latents, sequential factor updates."""
    return C.approximation_run(model, data, fv_posterior, opts, ctx,
                               draws=draws, chains=chains, limit=f"{opts['max_iter']} iterations")
