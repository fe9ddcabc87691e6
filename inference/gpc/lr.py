"""``lr``: label regression for GP classification (thesis §4.8, Table 4.2).

The +-1 labels are treated as real regression targets with Gaussian noise sigma_n^2, i.e. the likelihood is
replaced by N(y_i | f_i, sigma_n^2). The GP-regression posterior is the Gaussian

    W = sigma_n^-2 I,   alpha = (K + sigma_n^2 I)^-1 y,   m = K alpha = (I + sigma_n^2 K^-1)^-1 y,
    V = (K^-1 + sigma_n^-2 I)^-1,

and predictions use (4.10) and the model's likelihood in (4.23) (the model's predict path, as for every other
Gaussian approximation). sigma_n is chosen, as in the thesis's experiments, to maximise the regression log
marginal likelihood

    ln Z_reg(sigma_n) = -1/2 y^T (K + sigma_n^2 I)^-1 y - 1/2 ln|K + sigma_n^2 I| - n/2 ln 2 pi

over a range (option ``noise_range``, default [0.5, 2], bounded scalar search on ln sigma_n), unless a fixed
``noise_sd`` is given. ln Z_reg is the evidence of a different (regression) model, so, as in the thesis, the
log evidence reported for LR is the Jensen bound (4.13) at Q under the classification likelihood;
ln Z_reg at the chosen sigma_n is kept in ``info["log_evidence_regression"]``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize_scalar

from bayeszoo.checks import POSITIVE, Interval, Numbers
from bayeszoo.progress import progress_bar
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import common as C


def noise_range(owner: str, name: str, value) -> tuple:
    """Two numbers 0 < low <= high (a constraint, ``bayeszoo.checks``)."""
    low, high = Numbers(POSITIVE, length=2)(owner, name, value)
    if low > high:
        raise ValueError(f"{owner}: {name} must be two numbers 0 < low <= high; got {value!r}")
    return low, high


OPTIONS = {
    "noise_sd": Option(None, "fixed noise sd sigma_n (None: chosen in noise_range by the regression evidence)",
                       Interval(float, 0.0, None, "neither", none=True)),
    "noise_range": Option((0.5, 2.0), "(low, high) range searched for sigma_n when noise_sd is None, 0 < low <= high",
                          noise_range),
}


def regression_log_evidence(K, y, noise_sd):
    """ln Z_reg of GP regression of y with noise sd ``noise_sd``, and the fit parts (sW, L, alpha)."""
    n = K.shape[0]
    sW = np.full(n, 1.0 / noise_sd)
    L = C.chol_B(K, sW)
    alpha = C.solve_C(sW, L, y)                     # (K + s^2 I)^-1 y = sW B^-1 sW y
    # ln|K + s^2 I| = n ln s^2 + ln|B|
    lz = -0.5 * float(y @ alpha) - 0.5 * (2.0 * n * np.log(noise_sd) + C.logdet_B(L)) - 0.5 * n * C.LOG_2PI
    return lz, sW, L, alpha


def select_noise(K, y, noise_range=(0.5, 2.0)):
    """sigma_n in ``noise_range`` maximising ln Z_reg (bounded Brent search on ln sigma_n). One eigendecomposition
    K = U diag(lam) U^T makes every evaluation O(n): ln Z_reg = -1/2 sum (r_j^2 / (lam_j + s^2) + ln(lam_j + s^2))
    - n/2 ln 2 pi with r = U^T y."""
    lo, hi = float(noise_range[0]), float(noise_range[1])
    if lo == hi:
        return lo
    lam, U = np.linalg.eigh(K)
    lam = np.maximum(lam, 0.0)
    r2 = (U.T @ y) ** 2

    def neg_log_evidence(log_s):
        d = lam + np.exp(2.0 * log_s)
        return 0.5 * float(np.sum(r2 / d + np.log(d)))

    res = minimize_scalar(neg_log_evidence, bounds=(np.log(lo), np.log(hi)), method="bounded",
                          options={"xatol": 1e-8})
    return float(np.exp(res.x))


class LabelRegression(NamedTuple):
    """Label regression's Gaussian Q = N(m, V) and what the evidence and predictions need.

    m
        The posterior mean of f, K alpha.
    V
        The posterior covariance (K^-1 + sigma_n^-2 I)^-1.
    alpha
        (K + sigma_n^2 I)^-1 y.
    sW
        W^1/2 = sigma_n^-1 per point (B = I + sW K sW).
    L
        The lower Cholesky factor of B.
    noise_sd
        sigma_n: the given ``noise_sd``, or the one in ``noise_range`` maximising ln Z_reg.
    log_evidence_regression
        ln Z_reg at sigma_n, the evidence of the regression model on the labels.
    jensen_bound
        The Jensen bound (4.13) at Q under the classification likelihood: the log evidence reported for LR.
    """

    m: np.ndarray
    V: np.ndarray
    alpha: np.ndarray
    sW: np.ndarray
    L: np.ndarray
    noise_sd: float
    log_evidence_regression: float
    jensen_bound: float


def lr_fit(K, y, likelihood, *, noise_sd=None, noise_range=(0.5, 2.0), progress=False) -> LabelRegression:
    """Label regression (module docstring) as a :class:`LabelRegression`. No iterations: ``progress`` shows a bar
    over its four steps, each O(n^3)."""
    with progress_bar(total=4, desc="lr", disable=not progress, unit="step") as bar:
        bar.set_postfix_str("noise sd (eigendecomposition of K)")
        s = select_noise(K, y, noise_range) if noise_sd is None else float(noise_sd)
        bar.update()
        bar.set_postfix_str("factorisation of B")
        lz, sW, L, alpha = regression_log_evidence(K, y, s)
        m = K @ alpha
        bar.update()
        bar.set_postfix_str("covariance")
        V = C.posterior_cov(K, sW, L)
        bar.update()
        bar.set_postfix_str("Jensen bound")
        jb = C.jensen_bound(y, m, V, likelihood, sW=sW, L=L, alpha=alpha)
        bar.update()
    return LabelRegression(m=m, V=V, alpha=alpha, sW=sW, L=L, noise_sd=s, log_evidence_regression=lz,
                           jensen_bound=jb)


def lr_posterior(model, data, opts=None, progress=False, owner: str = "lr") -> C.Posterior:
    """Label regression's Q = N(m, V) at the model's hyperparameters, as the family's posterior struct; closed form
    (no iterations), its evidence the Jensen bound under the classification likelihood. ``owner``, the label of
    the errors of the GPC approximations' iterations, is taken for their common signature; this one has none."""
    opts = C.with_defaults(OPTIONS, opts)
    res, _, _ = C.run_at_hyperparameters(model, data, lr_fit, noise_sd=opts["noise_sd"],
                                         noise_range=opts["noise_range"], progress=progress)
    return C.Posterior(mean=res.m, cov=res.V, log_evidence=res.jensen_bound, jensen_bound=res.jensen_bound,
                       alpha=res.alpha, sW=res.sW,
                       objective={"log_evidence_regression": np.array([res.log_evidence_regression])},
                       # sigma_n (unless fixed) maximises the regression evidence
                       objective_name="log_evidence_regression" if opts["noise_sd"] is None else None,
                       converged=True, info={"log_evidence_regression": res.log_evidence_regression,
                                             "noise_sd": res.noise_sd})


@register("lr", kind="approximation", family="gpc", options=OPTIONS, defaults=APPROXIMATION_DEFAULTS,
          memory=C.memory(5))
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """Label regression: GP regression on the +-1 labels, noise chosen by the regression evidence."""
    return C.approximation_run(model, data, lr_posterior, opts, ctx, draws=draws, chains=chains)
