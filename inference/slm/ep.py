"""Expectation propagation for the SLM (Nickisch thesis §5.3.2; Seeger 2008): fractional EP on dense algebra.

Each potential T_i(s_i), s = B u, is replaced by a Gaussian site t_i(s_i) = exp(b_i s_i - pi_i s_i^2 / 2), so the
approximation is Q(u) = N(m, A^-1) with

    A = X^T X / sigma2 + B^T diag(pi) B,    A m = X^T y / sigma2 + B^T b.

An update of site i (fractional EP with power eta, the thesis's eta = 0.9): the tilted distribution
Q(u) t_i(s_i)^-eta T_i(s_i)^eta has, in s_i, the cavity N(s_i | mu_c, v_c) times T_i^eta; its mean and variance
(mu_hat, v_hat) become those of Q's marginal by changing (b_i, pi_i) alone:

    pi_i <- pi_i + 1/v_hat - 1/rho_i,    b_i <- b_i + mu_hat/v_hat - h_i/rho_i,

with Q(s_i) = N(h_i, rho_i) (eta = 1 is standard EP; eta < 1 damps the step and makes the SLM updates robust).
The tilted moments of the Laplace potential are closed forms in Gaussian CDFs, evaluated in log space with erfcx
(the two one-sided truncated Gaussians); the other potentials use a 1-d quadrature on a fine grid (the Gaussian
one is exact). A ``damping`` option mixes the old site into the new one.

Representation (Seeger 2008): the Cholesky factor L L^T = A, changed by a rank-one update or downdate per site
update (O(n^2)); all marginals (h, rho) are kept current by Woodbury's formula from A^-1 b_i (two triangular
solves and one product with B), and recomputed from a fresh factor after every sweep so that rounding does not
accumulate. Memory O(n^2 + q n): for n up to a few hundred.

Schedules: ``sweep`` updates every site in turn; ``selective`` updates, q times per sweep, the site whose update
would move Q most, scored by KL[Q'(s_i) || Q(s_i)] (the thesis's selective updating, with every site a candidate).
The stopping rule and the objective trace ``max_site_change`` are the largest such KL divergence over a sweep.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numba
import numpy as np
import scipy.linalg as sla
from scipy.special import erfcx, log_ndtr

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Interval, OneOf
from bayeszoo.inference.approximations import GaussianApproximation, approximation_fit
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.inference.slm.common import (blas_threads, dense_memory, potentials_group, precision_cholesky,
                                            prior_precision, problem)
from bayeszoo.numerics.linalg import DENSE_N   # largest n (dense Cholesky representation)
from bayeszoo.numerics.operators import to_dense
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

SCHEDULES = ("sweep", "selective")
GRID = 801               # quadrature nodes over the cavity's +-10 standard deviations
SQRT_2_PI = float(np.sqrt(2.0 / np.pi))


def _check(options, model, data, owner):
    if data.d > DENSE_N:
        raise ValueError(f"{owner} keeps a dense Cholesky factor and takes n <= {DENSE_N}; this problem "
                         f"has n = {data.d}: use 'dloop'")


# ---- tilted moments ------------------------------------------------------------------------------------------
def _mills(x):
    """phi(x) / Phi(x) for any x, through erfcx (no overflow or 0/0 in the lower tail)."""
    with np.errstate(over="ignore"):
        return SQRT_2_PI / erfcx(-x / np.sqrt(2.0))


def laplace_moments(mu, v, a):
    """Mean and variance of N(s | mu, v) exp(-a |s|), normalised: a mixture of the Gaussian shifted by -a v and
    truncated to s > 0 and the one shifted by +a v truncated to s < 0, weighted by their masses (log space)."""
    sd = np.sqrt(v)
    mp, mm = mu - a * v, mu + a * v
    lz_p = -a * mu + 0.5 * a * a * v + log_ndtr(mp / sd)
    lz_m = a * mu + 0.5 * a * a * v + log_ndtr(-mm / sd)
    lz = np.logaddexp(lz_p, lz_m)
    wp, wm = np.exp(lz_p - lz), np.exp(lz_m - lz)
    xp, xm = mp / sd, -mm / sd
    lp, lm = _mills(xp), _mills(xm)
    ep, em = mp + sd * lp, mm - sd * lm
    vp = v * np.clip(1.0 - lp * (lp + xp), 0.0, 1.0)
    vm = v * np.clip(1.0 - lm * (lm + xm), 0.0, 1.0)
    mean = wp * ep + wm * em
    var = wp * vp + wm * vm + wp * wm * (ep - em) ** 2
    return mean, np.maximum(var, 1e-300 + 1e-16 * v)


def tilted_moments(pot, idx, mu, v, eta):
    """Mean and variance of N(s | mu, v) T_i(s)^eta for the sites ``idx`` (vectors)."""
    tau = np.asarray(pot.tau, dtype=float)
    tau = tau[idx] if tau.ndim else np.full(idx.size, float(tau))
    if pot.name == "laplace":
        return laplace_moments(mu, v, eta * tau)
    if pot.name == "gaussian":
        prec = 1.0 / v + eta * tau
        return (mu / v) / prec, 1.0 / prec
    sd = np.sqrt(v)
    t = np.linspace(-10.0, 10.0, GRID)
    s = mu[:, None] + sd[:, None] * t
    logw = -0.5 * t * t + eta * pot.take((idx, None)).log_t(s)
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)               # equal spacing: the trapezoid weights cancel in the ratio
    mean = np.sum(w * s, axis=1)
    var = np.sum(w * (s - mean[:, None]) ** 2, axis=1)
    return mean, np.maximum(var, 1e-300 + 1e-16 * v)


def _kl(m1, v1, m0, v0):
    """KL[N(m1, v1) || N(m0, v0)]."""
    return 0.5 * (v1 / v0 + (m1 - m0) ** 2 / v0 - 1.0 + np.log(v0 / v1))


# ---- the Cholesky representation --------------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True)
def _rotate_columns(L, x, p, scale, shift):
    """Column k of the updated factor: L[i, k] <- scale_k L[i, k] + shift_k y_k[i] for i >= k, with
    y_k = x - sum_{j<k} p_j L[:, j] (old columns) carried from column to column: one pass over the lower triangle,
    down the columns, which is memory order for the column-major factors SciPy's Cholesky returns."""
    n = L.shape[0]
    y = x.copy()
    for k in range(n):
        for i in range(k, n):
            old = L[i, k]
            L[i, k] = scale[k] * old + shift[k] * y[i]
            y[i] -= p[k] * old


def chol_rank_one(L, x, sign):
    """L L^T + sign x x^T in place (L lower triangular); False, with L unchanged, when a downdate loses definiteness.

    LINPACK's column-by-column rotations (dchud / dchdd) in closed form: with p = L^-1 x and
    C_k^2 = 1 + sign sum_{j<k} p_j^2 (all positive, or the downdate fails), column k of the new factor is
    (C_k / C_k+1) L[:, k] + sign p_k y_k / (C_k C_k+1), y_k = x - sum_{j<k} p_j L[:, j] (zero above row k). The
    rotations need the columns in turn, so a NumPy loop over them made n Python steps (three quarters of an EP pass
    at n = 128); in this form one compiled pass over the triangle does the update.
    """
    x = np.asarray(x, dtype=float)
    p = sla.solve_triangular(L, x, lower=True, check_finite=False)
    C2 = 1.0 + sign * np.concatenate(([0.0], np.cumsum(p * p)))
    if not np.all(C2[1:] > 0):
        return False
    C = np.sqrt(C2)
    _rotate_columns(L, x, p, C[:-1] / C[1:], sign * p / (C[:-1] * C[1:]))
    return True


class State:
    """Sites (pi, b), the factor L of A and the marginals (h, rho) of s = B u."""

    def __init__(self, Xd, Bd, y, sigma2, pi, b, owner: str = "approximation"):
        self.owner = owner
        self.Bd, self.pi, self.b = Bd, pi.astype(float), b.astype(float)
        self.XtX, self.Xty = Xd.T @ Xd / sigma2, Xd.T @ y / sigma2
        self.refresh()

    def refresh(self):
        A = self.XtX + self.Bd.T @ (self.pi[:, None] * self.Bd)
        self.L = precision_cholesky(0.5 * (A + A.T), self.owner)
        R = sla.solve_triangular(self.L, self.Bd.T, lower=True)
        alpha = sla.solve_triangular(self.L, self.Xty + self.Bd.T @ self.b, lower=True)
        self.rho, self.h = np.sum(R * R, axis=0), R.T @ alpha

    def update(self, i, pi_new, b_new) -> bool:
        """Site i to (pi_new, b_new); False (nothing changed) if A would stop being positive definite."""
        d_pi, d_b = pi_new - self.pi[i], b_new - self.b[i]
        bi = self.Bd[i]
        Ab = sla.cho_solve((self.L, True), bi)             # A^-1 b_i with the current factor
        kappa = 1.0 + d_pi * self.rho[i]
        if not kappa > 1e-12:
            return False
        if d_pi != 0.0 and not chol_rank_one(self.L, np.sqrt(abs(d_pi)) * bi, 1.0 if d_pi > 0 else -1.0):
            return False
        w = self.Bd @ Ab
        self.h = self.h + w * (d_b - d_pi * self.h[i]) / kappa
        self.rho = self.rho - w * w * d_pi / kappa
        self.pi[i], self.b[i] = pi_new, b_new
        return True

    def mean_cov(self):
        self.refresh()
        Li = sla.solve_triangular(self.L, np.eye(self.L.shape[0]), lower=True)
        cov = Li.T @ Li
        return cov @ (self.Xty + self.Bd.T @ self.b), 0.5 * (cov + cov.T)


def _proposals(st, pot, idx, eta, damping):
    """The new sites (pi, b) that EP proposes at ``idx``, the new marginal moments and the sites whose cavity is
    improper (skipped)."""
    P, H = 1.0 / st.rho[idx], st.h[idx] / st.rho[idx]
    Pc, Hc = P - eta * st.pi[idx], H - eta * st.b[idx]
    ok = Pc > 0
    Pc_safe = np.where(ok, Pc, 1.0)
    mean, var = tilted_moments(pot, idx, Hc / Pc_safe, 1.0 / Pc_safe, eta)
    pi_new = st.pi[idx] + 1.0 / var - P
    b_new = st.b[idx] + mean / var - H
    pi_new = (1.0 - damping) * pi_new + damping * st.pi[idx]
    b_new = (1.0 - damping) * b_new + damping * st.b[idx]
    P_new, H_new = P + pi_new - st.pi[idx], H + b_new - st.b[idx]
    kl = np.where(ok & (P_new > 0), _kl(H_new / np.where(P_new > 0, P_new, 1.0), 1.0 / np.where(P_new > 0, P_new, 1.0),
                                         st.h[idx], st.rho[idx]), 0.0)
    # a site that overflows (a tilted variance near 0 far from the cavity's mean) is skipped like an improper cavity
    return pi_new, b_new, kl, ok & (P_new > 0) & np.isfinite(pi_new) & np.isfinite(b_new)


class EPState(NamedTuple):
    """EP's iterate: the ``sites`` (pi, b) with the factor and marginals they make (:class:`State`, updated in
    place by a sweep), the site updates ``skipped`` so far and ``objective``, the largest KL of the last sweep
    (None before the first)."""

    sites: State
    skipped: int
    objective: float | None


class EPInfo(NamedTuple):
    """One sweep: the largest KL[Q'(s_i) || Q(s_i)] of its site updates, as ``objective`` and as ``change``, and
    the updates it ``skipped``."""

    objective: float
    change: float
    skipped: int


class EPResult(NamedTuple):
    """EP's fixed point: Q = N(``mean``, ``cov``), the site precisions ``pi`` and linear terms ``b``, the
    ``max_site_change`` trace (per sweep), ``sweeps``, ``converged`` and ``skipped`` (updates refused)."""

    mean: np.ndarray
    cov: np.ndarray
    pi: np.ndarray
    b: np.ndarray
    max_site_change: np.ndarray
    sweeps: int
    converged: bool
    skipped: int


def fractional_ep(Xd, Bd, y, sigma2, pot, *, eta, damping, schedule, owner: str = "approximation") -> Algorithm:
    """Sweeps of fractional EP (module docstring) from the prior's precisions and b = 0; ``init`` takes nothing
    and each sweep reports the site update it has reached (a sweep over thousands of sites takes seconds)."""
    q = Bd.shape[0]

    def init(_):
        start = State(Xd, Bd, y, sigma2, np.broadcast_to(prior_precision(pot), (q,)), np.zeros(q), owner)
        return EPState(start, 0, None)

    def step(state, report):
        st, skipped, _ = state
        worst, refused = 0.0, 0
        for k in range(q):
            if k % 64 == 63:
                report(f"site update {k + 1}/{q}")
            if schedule == "sweep":
                i = k
                pi_new, b_new, kl, ok = (v[0] for v in _proposals(st, pot, np.array([i]), eta, damping))
            else:
                idx = np.arange(q)
                pi_all, b_all, kl_all, ok_all = _proposals(st, pot, idx, eta, damping)
                i = int(np.argmax(np.where(ok_all, kl_all, -1.0)))
                pi_new, b_new, kl, ok = pi_all[i], b_all[i], kl_all[i], ok_all[i]
            if not ok or not st.update(i, pi_new, b_new):
                refused += 1
                continue
            worst = max(worst, float(kl))
        st.refresh()
        return EPState(st, skipped + refused, worst), EPInfo(worst, worst, refused)

    return Algorithm(init, step, result=lambda state: state.sites.mean_cov(), trace_initial=False, reports=True)


def ep(Xd, Bd, y, sigma2, pot, *, eta=0.9, damping=0.0, max_sweeps=200, tol=1e-10, schedule="sweep",
       progress=False, owner: str = "approximation") -> EPResult:
    """Fractional EP on dense X (m x n) and B (q x n); ``progress`` shows a bar over the sweeps."""
    algorithm = fractional_ep(Xd, Bd, y, sigma2, pot, eta=eta, damping=damping, schedule=schedule, owner=owner)
    run = iterate(algorithm, None, max_iter=max_sweeps, tol=tol, progress=progress, desc="ep (slm)", unit="sweep",
                  owner=owner, change_name="largest KL")
    mean, cov = algorithm.result(run.state)
    st = run.state.sites
    return EPResult(mean=mean, cov=cov, pi=st.pi, b=st.b, max_site_change=run.trace, sweeps=run.iterations,
                    converged=run.converged, skipped=run.state.skipped)


@register("ep", kind="approximation", family="slm", check=_check,
          memory=lambda model, data, options: dense_memory(model, data, 5),
          defaults={**APPROXIMATION_DEFAULTS, "draws": 1000, "chains": 4},
          description="fractional expectation propagation (dense Cholesky representation, rank-one updates)",
          options={"eta": Option(0.9, "EP power (fraction of each potential in the tilted distribution; 1: EP)",
                                 Interval(float, 0, 1, "right")),
                   "damping": Option(0.0, "weight of the old site in each update (0: no damping)",
                                     Interval(float, 0, 1, "left")),
                   "max_sweeps": Option(200, "most sweeps (q site updates each)", POSITIVE_INT),
                   "tol": Option(1e-10, "stop when the largest KL[Q'(s_i) || Q(s_i)] of a sweep is below this",
                                 POSITIVE),
                   "schedule": Option("sweep", "sweep (every site in turn) or selective (largest KL first)",
                                      OneOf(SCHEDULES))})
@blas_threads()
def run(model, data, *, draws, tune, chains, ctx, eta, damping, max_sweeps, tol, schedule):
    """Fractional EP for the SLM."""
    t0 = time.perf_counter()
    prob = problem(model, data)
    res = ep(to_dense(prob.X), to_dense(prob.B), prob.y, prob.sigma2, prob.potential, eta=eta, damping=damping,
             max_sweeps=max_sweeps, tol=tol, schedule=schedule, progress=ctx.progress,
             owner=ctx.owner)
    q = GaussianApproximation(variable="u", mean=res.mean, cov=res.cov,
                              objective={"max_site_change": res.max_site_change}, objective_name="max_site_change",
                              iterations=res.sweeps, converged=res.converged)
    warnings = [f"{res.skipped} site updates were skipped (improper cavity, or an update that would make the "
                f"covariance indefinite or overflow)"] if res.skipped else []
    return approximation_fit(model, data, q, ctx=ctx, draws=draws, chains=chains,
                             timing={"tune": time.perf_counter() - t0},
                             info={"skipped_updates": res.skipped, "eta": eta, "warnings": warnings},
                             limit=f"{max_sweeps} sweeps (tol={tol:g})",
                             extra_groups=potentials_group(site_precision=res.pi, site_linear=res.b))
