"""``ep``: expectation propagation for binary GP classification (thesis section 4.4; R&W Alg. 3.5, 3.6).

Sites t_i(f_i) = Z~_i N(f_i | nu~_i / tau~_i, 1 / tau~_i) in natural parameters (tau~ = W, nu~). One sweep
visits the sites in order: cavity (R&W 3.56), tilted moments (probit closed form, logit by log-space
quadrature, :func:`.common.tilted_moments`), site update in the GPML form

    tau~_i = -d2 / (1 + d2 var_-i),   nu~_i = (d1 - mu_-i d2) / (1 + d2 var_-i)

(d1, d2 the first two derivatives of log Z_i in the cavity mean; no division by a difference of small
precisions, so wide cavities in regime 2 are safe), optionally damped, then a rank-one update of Sigma
(R&W 3.70). The rank-one updates of ``BLOCK`` consecutive sites are applied to the rest of Sigma as one
rank-``BLOCK`` update (:func:`_sweep`: the same sequential schedule, with matrix-matrix BLAS instead of one pass
over all of Sigma per site). After every sweep Sigma and mu are recomputed from L = chol(I + sW K sW) to stop
round-off from accumulating, so a sweep costs about ten Cholesky factorisations of an n x n matrix. Converged
when the largest change of the site parameters and of log Z_EP fall below ``tol``.

Evidence, R&W 3.65 in the GPML ``infEP`` form (prior mean 0)::

    ln Z_EP = sum_i ln Z_i - 1/2 ln|B| + 1/2 nu~^T mu + 1/2 nu_-^T (tau~/tau_- nu_- - 2 nu~)/(tau~ + tau_-)
              - 1/2 sum nu~^2 / (tau_- + tau~) + 1/2 sum ln(1 + tau~ / tau_-).

Gradient w.r.t. the log-hyperparameters at the fixed point (R&W 5.27): 1/2 tr((b b^T - R) dK/dtheta) with
b = nu~ - sW B^-1 sW K nu~ and R = sW B^-1 sW.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import linalg as sla

from bayeszoo.checks import POSITIVE, POSITIVE_INT, AtMost, Interval
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import common as C

OPTIONS = {
    "max_sweeps": Option(200, "largest number of sweeps over the sites", POSITIVE_INT),
    "tol": Option(1e-8, "convergence tolerance on the largest change of the site parameters and of ln Z_EP",
                  POSITIVE),
    "damping": Option(1.0, "fraction of each site update applied, in (0, 1] (1: undamped)",
                      Interval(float, 0.0, 1.0, "right")),
    "min_sweeps": Option(2, "sweeps made before convergence is tested (at most max_sweeps)", POSITIVE_INT),
}
#: a run cannot make more sweeps than its cap
RELATIONS = (AtMost("min_sweeps", "max_sweeps"),)


_ger = sla.blas.get_blas_funcs("ger", dtype=np.float64)     # rank-one update A += alpha x y^T, in place
_gemm = sla.blas.get_blas_funcs("gemm", dtype=np.float64)

#: sites per block of the sweep: their rank-one updates are gathered into one rank-``BLOCK`` update of Sigma
BLOCK = 128


def _recompute(K, ttau, tnu):
    """Sigma = K - K sW B^-1 sW K and mu = Sigma nu~ from scratch (R&W Alg. 3.5 line 12), with L = chol(B)."""
    n = K.shape[0]
    sW = np.sqrt(np.maximum(ttau, 0.0))
    if not np.any(sW):                  # no site information yet (the first sweep): B = I, Sigma = K
        L = np.eye(n)
        Sigma = K.copy()
        return Sigma, Sigma @ tnu, sW, L
    L = C.chol_B(K, sW)
    Sigma = C.posterior_cov(K, sW, L)
    return Sigma, Sigma @ tnu, sW, L


def _log_z(K, ttau, tnu, likelihood, y, Sigma, mu, L):
    """ln Z_EP (R&W 3.65 / GPML infEP), from the current sites and posterior."""
    dS = np.diag(Sigma)
    tau_n = 1.0 / dS - ttau
    nu_n = mu / dS - tnu
    lZ, _, _ = C.tilted_moments(y, nu_n / tau_n, 1.0 / tau_n, likelihood)
    nlZ = (0.5 * C.logdet_B(L) - float(np.sum(lZ)) - 0.5 * float(tnu @ mu)
           - 0.5 * float(nu_n @ ((ttau / tau_n * nu_n - 2.0 * tnu) / (ttau + tau_n)))
           + 0.5 * float(np.sum(tnu**2 / (tau_n + ttau))) - 0.5 * float(np.sum(np.log1p(ttau / tau_n))))
    return -nlZ


def _sweep(Sigma, mu, ttau, tnu, y, likelihood, damping, block, report):
    """One sequential pass over the sites (R&W Alg. 3.5 lines 4-11), in blocks of ``block`` sites.

    Inside a block each site sees the exact sequential state: its rank-one updates (R&W 3.70) are applied to the
    block's own rows and columns of Sigma and mu only. The block's sites then change Sigma by one rank-``block``
    update (Woodbury), Sigma <- Sigma - Sigma[:, B] (I + D Sigma[B, B])^-1 D Sigma[B, :] with D = diag(dtau~_B),
    and mu by the matching O(n block) term, both applied to the rows of the sites still to come (the rows
    already visited are recomputed after the pass). Same arithmetic as site-by-site updates up to round-off, but
    a rank-one update streams all of Sigma through memory for each site (once Sigma outgrows the cache the pass
    is memory-bound) where the blocked update is matrix-matrix BLAS.
    ``Sigma`` and ``mu`` are overwritten (their visited rows are stale afterwards); returns the largest
    relative change of the (undamped) site parameters."""
    n = Sigma.shape[0]
    max_change = 0.0
    if likelihood == "probit":
        moments = C.probit_tilted_moments_scalar
    else:
        def moments(y_i, m_c, v_c):
            return C.tilted_moments(y_i, m_c, v_c, likelihood)
    for start in range(0, n, block):
        stop = min(start + block, n)
        S0 = Sigma[start:stop, start:stop].copy()      # the block of Sigma at the block's start
        mu0 = mu[start:stop].copy()
        S = S0.copy()
        m = mu0.copy()
        dtau = np.zeros(stop - start)
        dnu = np.zeros(stop - start)
        for k in range(stop - start):
            i = start + k
            s_ii = S[k, k]
            tau_c = 1.0 / s_ii - ttau[i]
            if not (tau_c > 0):           # round-off in a near-degenerate Sigma: skip this site once
                continue
            nu_c = m[k] / s_ii - tnu[i]
            m_c, v_c = nu_c / tau_c, 1.0 / tau_c
            _, d1, d2 = moments(float(y[i]), m_c, v_c)
            denom = 1.0 + d2 * v_c
            tau_new = max(-d2 / denom, 0.0)   # log-concave likelihoods: tau >= 0 (R&W 3.6 comment)
            nu_new = (d1 - m_c * d2) / denom
            # convergence is judged on the full (undamped) update: at a fixed point it is zero, whereas a
            # damped step is small whenever the damping is, fixed point or not
            max_change = max(max_change, abs(tau_new - ttau[i]) / (1.0 + abs(ttau[i])),
                             abs(nu_new - tnu[i]) / (1.0 + abs(tnu[i])))
            if damping < 1.0:
                tau_new = damping * tau_new + (1.0 - damping) * ttau[i]
                nu_new = damping * nu_new + (1.0 - damping) * tnu[i]
            dt = tau_new - ttau[i]
            dn = nu_new - tnu[i]
            ttau[i], tnu[i] = tau_new, nu_new
            dtau[k], dnu[k] = dt, dn
            si = S[:, k].copy()
            c = dt / (1.0 + dt * s_ii)
            _ger(-c, si, si, a=S.T, overwrite_a=True)               # R&W 3.70 within the block, in place
            m += si * (dn * (1.0 - c * s_ii) - c * m[k])            # = Sigma_new @ nu~_new on the block
        mu[start:stop] = m
        if stop == n or not np.any(dtau):
            if stop < n and np.any(dnu):    # sites with unchanged precision move mu only: mu += Sigma[:, B] dnu
                mu[stop:] += Sigma[stop:, start:stop] @ dnu
            report(stop)
            continue
        # Woodbury for the block: A = (I + D S0)^-1 D = (D^-1 + S0)^-1, symmetric
        A = sla.solve(np.eye(stop - start) + dtau[:, None] * S0, np.diag(dtau), check_finite=False)
        P = Sigma[stop:, start:stop]                       # Sigma[T, B] for the rows T still to come
        mu[stop:] += P @ (dnu - A @ (mu0 + S0 @ dnu))
        X = P @ A                                          # (n_T, b), C-ordered
        # Sigma[T, :] -= X Sigma[B, :], in place: the rows T are contiguous in C order, so their transpose is a
        # Fortran-ordered block BLAS updates without a copy (Sigma[B, :] is current: rows B were rows T before)
        _gemm(-1.0, Sigma[start:stop, :].T, X.T, beta=1.0, c=Sigma[stop:, :].T, overwrite_c=True)
        report(stop)
    return max_change


class EPState(NamedTuple):
    """The sites and the posterior they make: site precisions ``ttau`` (tau~) and natural means ``tnu`` (nu~);
    ``Sigma``, ``mu``, ``sW`` = tau~^1/2 and ``L`` = chol(B) recomputed from them; ``objective`` ln Z_EP
    (-inf before the first pass from zero sites)."""

    ttau: np.ndarray
    tnu: np.ndarray
    Sigma: np.ndarray
    mu: np.ndarray
    sW: np.ndarray
    L: np.ndarray
    objective: float


class EPInfo(NamedTuple):
    """One pass over the sites: ln Z_EP after it (``objective``), its relative change (``change``), and whether
    a site parameter still changed by ``tol`` or more, relative to its size (``moving``: ``site_change``, the
    largest, undamped)."""

    objective: float
    change: float
    moving: bool
    site_change: float


class EPSites(NamedTuple):
    """EP's fixed point: the sites (``ttau``, ``tnu``), Q = N(``mu``, ``Sigma``), ``sW``, ``L``, ``alpha`` (= K^-1 mu
    = tnu - sW B^-1 sW K tnu), ``log_evidence`` (ln Z_EP), its ``trace``, ``iterations`` (passes) and
    ``converged``."""

    ttau: np.ndarray
    tnu: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    sW: np.ndarray
    L: np.ndarray
    alpha: np.ndarray
    log_evidence: float
    trace: np.ndarray
    iterations: int
    converged: bool


def expectation_propagation(K, y, likelihood, *, tol, damping=1.0, block=BLOCK) -> Algorithm:
    """EP's passes over the sites (module docstring); ``init`` takes the starting sites ``(ttau0, tnu0)`` (None:
    zero) and each pass reports the site it has reached (a pass over thousands of sites takes seconds)."""
    n = K.shape[0]

    def init(sites):
        ttau0, tnu0 = sites
        ttau = np.zeros(n) if ttau0 is None else np.asarray(ttau0, float).copy()
        tnu = np.zeros(n) if tnu0 is None else np.asarray(tnu0, float).copy()
        Sigma, mu, sW, L = _recompute(K, ttau, tnu)
        lZ = _log_z(K, ttau, tnu, likelihood, y, Sigma, mu, L) if ttau0 is not None else -np.inf
        return EPState(ttau, tnu, Sigma, mu, sW, L, lZ)

    def step(state, report):
        ttau, tnu, Sigma, mu, _, _, lZ_old = state
        del state         # with its last factor: Sigma is updated in place, then recomputed
        site_change = _sweep(Sigma, mu, ttau, tnu, y, likelihood, damping, max(1, int(block)),
                             lambda site: report(f"site {site}/{n}"))
        Sigma = None      # stale rows: free them before the recompute needs memory
        report("recomputing Sigma from chol(B)")
        Sigma, mu, sW, L = _recompute(K, ttau, tnu)
        lZ = _log_z(K, ttau, tnu, likelihood, y, Sigma, mu, L)
        info = EPInfo(objective=lZ, change=abs(lZ - lZ_old) / max(1.0, abs(lZ)), moving=site_change >= tol,
                      site_change=site_change)
        return EPState(ttau, tnu, Sigma, mu, sW, L, lZ), info

    def describe(state, info):
        return f"site change {info.site_change:.2g}"

    return Algorithm(init, step, describe=describe, trace_initial=False,
                     reports=True)


@C.one_blas_thread_when_small
def ep_sites(K, y, likelihood, *, max_sweeps=200, tol=1e-8, damping=1.0, min_sweeps=2, ttau0=None, tnu0=None,
             progress=False, block=BLOCK, owner: str = "ep") -> EPSites:
    """Run EP to convergence from the sites ``ttau0``, ``tnu0`` (None: zero); ``progress`` shows a bar over the
    passes (sweeps over the sites). ``block``: sites whose rank-one updates are applied together
    (:func:`_sweep`; 1 is the textbook site-by-site update)."""
    algorithm = expectation_propagation(K, y, likelihood, tol=tol, damping=damping, block=block)
    run = iterate(algorithm, (ttau0, tnu0), max_iter=max_sweeps, tol=tol, min_iter=min_sweeps, progress=progress,
                  desc=f"ep ({likelihood})", unit="pass", owner=owner, change_name="ln Z change")
    s = run.state
    alpha = s.tnu - C.solve_C(s.sW, s.L, K @ s.tnu)
    return EPSites(ttau=s.ttau, tnu=s.tnu, mu=s.mu, Sigma=s.Sigma, sW=s.sW, L=s.L, alpha=alpha,
                   log_evidence=float(run.trace[-1]), trace=run.trace, iterations=run.iterations,
                   converged=run.converged)


def ep_log_evidence_grad(K, dK, y, likelihood, res=None, **ep_kw):
    """ln Z_EP and its gradient w.r.t. the log-hyperparameters at the EP fixed point (R&W 5.27)."""
    if res is None:
        res = ep_sites(K, y, likelihood, **ep_kw)
    sW, L, tnu = res.sW, res.L, res.tnu
    b = tnu - C.solve_C(sW, L, K @ tnu)
    R = C.C_matrix(sW, L)
    F = np.outer(b, b) - R
    g = np.array([0.5 * float(np.sum(F * dK[j])) for j in range(dK.shape[0])])
    return res.log_evidence, g, res


def fit_ep(model, data, opts=None, progress=False, owner: str = "ep"):
    """EP at the model's hyperparameters: (its :class:`EPSites`, K, y)."""
    opts = C.with_defaults(OPTIONS, opts)
    return C.run_at_hyperparameters(model, data, ep_sites, max_sweeps=opts["max_sweeps"], tol=opts["tol"],
                                    damping=opts["damping"], min_sweeps=opts["min_sweeps"], progress=progress,
                                    owner=owner)


def ep_posterior(model, data, opts=None, progress=False, owner: str = "ep") -> C.Posterior:
    """EP's Q = N(mu, Sigma) at the model's hyperparameters, as the family's posterior struct (its sites: the site
    precisions tau~ and natural means nu~)."""
    res, _, y = fit_ep(model, data, opts, progress, owner)
    jb = C.jensen_bound(y, res.mu, res.Sigma, model.likelihood, sW=res.sW, L=res.L, alpha=res.alpha)
    return C.Posterior(mean=res.mu, cov=res.Sigma, log_evidence=res.log_evidence, jensen_bound=jb,
                       alpha=res.alpha, sW=res.sW, objective={"log_evidence": res.trace},
                       objective_name="log_evidence", iterations=res.iterations, converged=res.converged,
                       sites={"site_tau": res.ttau, "site_nu": res.tnu})


@register("ep", kind="approximation", family="gpc", options=OPTIONS, relations=RELATIONS,
          defaults=APPROXIMATION_DEFAULTS, memory=C.memory(7, quadrature_rows=C.QUADRATURE_ROWS))
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """Expectation propagation: moment-matched Gaussian sites, sequential sweeps with rank-one updates."""
    return C.approximation_run(model, data, ep_posterior, opts, ctx,
                               draws=draws, chains=chains, limit=f"{opts['max_sweeps']} sweeps")
