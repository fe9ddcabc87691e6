"""Numerics shared by the Gaussian approximations of GP classification (Nickisch thesis ch. 4; R&W ch. 3).

Conventions: labels y_pm in {-1, +1} (the Dataset's 0/1 labels mapped by y_pm = 2 y - 1); sig(t) = Phi(t)
(probit) or 1 / (1 + e^-t) (logit); every Gaussian approximation is Q(f) = N(m, V) with V = (K^-1 + W)^-1,
W diagonal, stored as alpha = K^-1 m, sW = W^1/2 and L = chol(B), B = I + sW K sW (thesis Table 4.3). K is
never inverted: C = (K + W^-1)^-1 = sW B^-1 sW, V = K - K C K, log|I + K W| = 2 sum log diag(L).

1-d Gaussian integrals against the likelihood (logit site moments, the Jensen bound's expected log-likelihood
and its derivatives) use graded composite Gauss-Legendre panels (:func:`_graded_nodes`): half-sd panels over
mean +- 12 sd, refined to unit width in f near the sigmoid's step, so wide cavities (regime 2 of Fig. 4.3, sd of
tens) cost the same ~730 nodes and are integrated as accurately as narrow ones. Sums run in log space.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
import warnings
from typing import NamedTuple

import numpy as np
import xarray as xr
from scipy import linalg as sla
from scipy.special import expit, log_expit, log_ndtr, logsumexp

from bayeszoo.inference.approximations import GaussianApproximation, approximation_fit
from bayeszoo.models.gpc import GPC
from bayeszoo.numerics import gp_kernels as gk
from bayeszoo.numerics.blas_threads import one_blas_thread, one_blas_thread_when_small  # noqa: F401
from bayeszoo.numerics.linalg import DENSE_N, cholesky, jittered_cholesky
from bayeszoo.memory_guard import Need, dense

LOG_2PI = float(np.log(2.0 * np.pi))
LIKELIHOODS = ("probit", "logit")

# Gauss-Legendre nodes on [-1/2, 1/2] for one panel
_GL_X, _GL_W = np.polynomial.legendre.leggauss(10)
_GL_X = 0.5 * _GL_X
_GL_W = 0.5 * _GL_W
_SPAN = 12.0  # integrate over mean +- _SPAN sd


def labels_pm(y) -> np.ndarray:
    """0/1 (or -1/+1) labels as -1/+1 floats (``GPC.labels_pm``)."""
    return GPC.labels_pm(y)


# ------------------------------------------------------------------------------------------------ likelihood
def log_lik(f, y, likelihood):
    """log sig(y f) elementwise, stable for extreme arguments."""
    z = y * np.asarray(f, float)
    return log_ndtr(z) if likelihood == "probit" else log_expit(z)


def log_lik_derivs(f, y, likelihood):
    """``(lp, d1, d2, d3)``: log sig(y f) and its first three derivatives in f, elementwise.

    probit: with r = N(z) / Phi(z) = exp(log N(z) - log Phi(z)) (no underflow in the tails), z = y f:
    d1 = y r, d2 = -r (z + r), d3 = y r [(z + r)(z + 2 r) - 1].  logit, s = sig(z): d1 = y (1 - s),
    d2 = -s (1 - s), d3 = -y s (1 - s)(1 - 2 s).
    """
    f = np.asarray(f, float)
    z = y * f
    if likelihood == "probit":
        lp = log_ndtr(z)
        r = np.exp(-0.5 * z * z - 0.5 * LOG_2PI - lp)
        zr = z + r
        d1 = y * r
        d2 = -np.clip(r * zr, 0.0, 1.0)         # -W lies in [-1, 0] for the probit
        d3 = y * r * (zr * (z + 2.0 * r) - 1.0)
    else:
        lp = log_expit(z)
        s = expit(z)
        sc = expit(-z)
        d1 = y * sc
        d2 = -s * sc
        d3 = -y * s * sc * (sc - s)
    return lp, d1, d2, d3


# ------------------------------------------------------------------------------------------------ 1-d quadrature
_COARSE_T = np.linspace(-_SPAN, _SPAN, 49)           # panel edges in sd units away from the sigmoid's step
_FINE_F = np.concatenate([[-30.0, -24.0, -18.0, -14.0, -10.0, -8.0], np.linspace(-6.0, 6.0, 13),
                          [8.0, 10.0, 14.0, 18.0, 24.0, 30.0]])   # around f = 0, where sig steps


#: quadrature nodes per point of :func:`_graded_nodes`: the panels between the merged edges, 10 nodes each
QUADRATURE_NODES = (_COARSE_T.size + _FINE_F.size - 1) * _GL_X.size
#: rows per chunk of :func:`tilted_moments` (logit) and :func:`expected_log_lik`: their node arrays stay at a few MB
QUADRATURE_ROWS = 256


def _graded_nodes(m, sd):
    """Per-row quadrature for N(m_i, sd_i^2) expectations of functions that are smooth except for a step of
    width ~1 around f = 0: Gauss-Legendre panels of half an sd over mean +- 12 sd, refined to unit width in f
    for |f| < 6 and to widths 2-6 out to |f| = 30 (the logistic's exponential tails). Returns nodes f (n, P),
    log weights (incl. the Gaussian density) and standardised nodes t. ~730 nodes per row for any sd, where
    uniform unit-width panels need ~240 sd."""
    sd_safe = np.maximum(sd, 1e-300)[:, None]
    fine = np.clip((_FINE_F[None, :] - m[:, None]) / sd_safe, -_SPAN, _SPAN)
    edges = np.sort(np.concatenate([np.broadcast_to(_COARSE_T, (m.size, _COARSE_T.size)), fine], axis=1), axis=1)
    width = np.diff(edges, axis=1)                                           # empty panels get zero weight
    mid = 0.5 * (edges[:, 1:] + edges[:, :-1])
    t = (mid[:, :, None] + width[:, :, None] * _GL_X[None, None, :]).reshape(m.size, -1)
    w = (width[:, :, None] * _GL_W[None, None, :]).reshape(m.size, -1)
    with np.errstate(divide="ignore"):
        logw = np.log(w) - 0.5 * t * t - 0.5 * LOG_2PI
    return m[:, None] + sd[:, None] * t, logw, t


def tilted_moments(y, mu, var, likelihood):
    """Moments of the tilted distribution N(f | mu, var) sig(y f): ``(log Z, d1, d2)``, elementwise.

    d1 = d log Z / d mu, d2 = d^2 log Z / d mu^2, so the tilted mean is mu + var d1 and the tilted variance
    var + var^2 d2 (R&W 3.58). Probit: closed form (R&W 3.82). Logit: log-space quadrature.
    """
    y = np.asarray(y, float)
    mu = np.asarray(mu, float)
    var = np.asarray(var, float)
    if likelihood == "probit":
        s = np.sqrt(1.0 + var)
        z = y * mu / s
        lZ = log_ndtr(z)
        r = np.exp(-0.5 * z * z - 0.5 * LOG_2PI - lZ)
        d1 = y * r / s
        d2 = -np.clip(r * (z + r), 0.0, 1.0) / (1.0 + var)
        return lZ, d1, d2
    shape = np.broadcast(y, mu, var).shape
    y, mu, var = (np.broadcast_to(a, shape).ravel() for a in (y, mu, var))
    sd = np.sqrt(var)
    lZ, mt, vt = np.empty(mu.size), np.empty(mu.size), np.empty(mu.size)
    for start in range(0, mu.size, QUADRATURE_ROWS):     # rows are independent: chunks bound the node arrays
        rows = slice(start, start + QUADRATURE_ROWS)
        f, logw, t = _graded_nodes(mu[rows], sd[rows])
        la = logw + log_lik(f, y[rows, None], "logit")
        lZ[rows] = logsumexp(la, axis=1)
        p = np.exp(la - lZ[rows, None])
        mt[rows] = np.sum(p * t, axis=1)                  # tilted mean in standardised units
        vt[rows] = np.maximum(np.sum(p * t * t, axis=1) - mt[rows] ** 2, 0.0)
    d1 = mt / sd
    d2 = (vt - 1.0) / var
    return lZ.reshape(shape), d1.reshape(shape), d2.reshape(shape)


def probit_tilted_moments_scalar(y: float, mu: float, var: float):
    """:func:`tilted_moments` for one probit site, in scalar arithmetic (EP's sequential site loop calls it once
    per site and pass, where NumPy's per-call overhead on 0-d arrays costs more than the formula)."""
    s = math.sqrt(1.0 + var)
    z = y * mu / s
    lZ = float(log_ndtr(z))
    r = math.exp(-0.5 * z * z - 0.5 * LOG_2PI - lZ)
    return lZ, y * r / s, -min(max(r * (z + r), 0.0), 1.0) / (1.0 + var)


def expected_log_lik(y, m, v, likelihood):
    """sum_i E_{N(f_i | m_i, v_i)} log sig(y_i f_i): term 1 of the Jensen bound (4.13)."""
    sd = np.atleast_1d(np.sqrt(np.maximum(np.asarray(v, float), 0.0)))
    m = np.atleast_1d(np.asarray(m, float))
    y = np.broadcast_to(np.asarray(y, float), m.shape)
    total = 0.0
    for start in range(0, m.size, QUADRATURE_ROWS):
        rows = slice(start, start + QUADRATURE_ROWS)
        f, logw, _ = _graded_nodes(m[rows], sd[rows])
        total += float(np.sum(np.exp(logw) * log_lik(f, y[rows, None], likelihood)))
    return total


# ------------------------------------------------------------------------------------------------ linear algebra
def _scaled_kernel(K, sW):
    """sW K sW as a new C-ordered matrix (one n x n allocation: the products are formed in place)."""
    A = sW[:, None] * K
    A *= sW[None, :]
    return A


def chol_B(K, sW):
    """Lower Cholesky factor of B = I + sW K sW (eigenvalues >= 1, thesis footnote 9), Fortran-ordered.

    B is built and factorised in one n x n buffer: LAPACK reads the buffer's transpose, which is B itself up to
    the last bit of the products (the factor's memory is B's: no copies of n x n matrices)."""
    n = K.shape[0]

    def build():
        B = _scaled_kernel(K, sW)
        B.flat[::n + 1] += 1.0
        return B.T

    def failure(_, reason):
        if reason == "not finite":
            return (f"GPC: B = I + W^1/2 K W^1/2 holds NaN or inf (largest prior variance "
                    f"{float(np.max(np.diag(K))):.3g}): the likelihood's curvature overflowed; rescale the inputs "
                    f"or lower the amplitude (log_sf)")
        return (f"GPC: B = I + W^1/2 K W^1/2 is not positive definite in floating point (largest prior "
                f"variance {float(np.max(np.diag(K))):.3g}): K is numerically singular; increase the model's "
                f"jitter or lower the amplitude (log_sf)")

    return cholesky(build, jitter=(1e-10,), overwrite=True, failure=failure)


def _half_cov(K, sW, L):
    """L^-1 sW K, solved in place in a Fortran-ordered buffer ((K sW)^T = sW K for symmetric K)."""
    return sla.solve_triangular(L, (K * sW[None, :]).T, lower=True, overwrite_b=True, check_finite=False)


def posterior_cov(K, sW, L):
    """V = K - K C K with C = sW B^-1 sW  (Table 4.3); exactly symmetric (numpy forms Vh^T Vh with syrk)."""
    Vh = _half_cov(K, sW, L)
    V = Vh.T @ Vh
    del Vh
    return np.subtract(K, V, out=V)


def posterior_var(K, sW, L):
    Vh = _half_cov(K, sW, L)
    return np.diag(K) - np.sum(Vh * Vh, axis=0)


def solve_C(sW, L, b):
    """C b = sW B^-1 sW b."""
    return sW * sla.cho_solve((L, True), sW * b, check_finite=False)


def C_matrix(sW, L):
    Li = sla.solve_triangular(L, np.diag(sW), lower=True, check_finite=False)
    return Li.T @ Li


def logdet_B(L):
    return 2.0 * float(np.sum(np.log(np.diag(L))))


# ------------------------------------------------------------------------------------------------ Jensen bound
def jensen_bound(y, m, V, likelihood, *, K=None, sW=None, L=None, alpha=None):
    """The Jensen lower bound ln Z_B <= ln Z for a Gaussian Q = N(m, V)  (thesis 4.12-4.13):

        ln Z_B = sum_i E_Q log sig(y_i f_i) + 1/2 [n - m^T K^-1 m + ln|V K^-1| - tr(V K^-1)].

    With the site form (``sW``, ``L``, ``alpha``; V = (K^-1 + W)^-1) the regulariser comes from B:
    V K^-1 = (I + K W)^-1, ln|V K^-1| = -ln|B|, tr(V K^-1) = tr(B^-1), m^T K^-1 m = m^T alpha.
    Otherwise (any V, e.g. moments of samples) from Cholesky factors of K and V.
    """
    m = np.asarray(m, float)
    V = np.asarray(V, float)
    n = m.shape[0]
    term1 = expected_log_lik(y, m, np.diag(V), likelihood)
    if sW is not None and L is not None and alpha is not None:
        reg = n - float(m @ alpha) - logdet_B(L) - trace_B_inv(L)
    else:
        if K is None:
            raise ValueError("jensen_bound needs K, or the site form (sW, L, alpha)")
        LK = jittered_cholesky(K, what="GPC: the kernel matrix of the Jensen bound")
        LV = jittered_cholesky(V, what="GPC: the covariance of the Jensen bound's Gaussian")
        a = sla.solve_triangular(LK, m, lower=True, check_finite=False)
        M = sla.solve_triangular(LK, LV, lower=True, check_finite=False)
        reg = n - float(a @ a) + 2.0 * float(np.sum(np.log(np.diag(LV))) - np.sum(np.log(np.diag(LK)))) \
            - float(np.sum(M * M))
    return term1 + 0.5 * reg


# ------------------------------------------------------------------------------------------------ kernel access
def _d(model, X=None):
    return 1 if X is None else np.atleast_2d(np.asarray(X, float)).shape[1]  # d of the inputs


def get_hyp(model, X=None) -> np.ndarray:
    """The model's kernel log-hyperparameters as a vector, in the order of ``models.gp_kernels``; ``X``: the training
    inputs (they set a ``log_lengthscale="scale"``)."""
    if X is not None:
        model = model.at(X)
    return np.atleast_1d(np.asarray(model.hyperparameters(_d(model, X)), float))


def with_hyp(model, hyp):
    """A copy of ``model`` with kernel log-hyperparameters ``hyp``."""
    return dataclasses.replace(model, hyp=tuple(float(h) for h in np.asarray(hyp, float)))


def _kind(model):
    return getattr(model, "kernel", "se")


def _degree(model):
    return int(getattr(model, "degree", 2))


def kernel_and_grads(model, X, hyp=None, grads=True):
    """``(K, dK)``: training kernel matrix (with the model's jitter) and its analytic derivatives w.r.t. the
    log-hyperparameters, shape (p, n, n) (``models.gp_kernels``)."""
    X = np.atleast_2d(np.asarray(X, float))
    if hyp is None:
        hyp = get_hyp(model, X)
    K0 = gk.kernel_matrix(_kind(model), X, X, hyp, _degree(model))
    K = K0 + K0.T             # exactly symmetric; formed in place from here on (no n x n temporaries)
    del K0
    K *= 0.5
    K.flat[::K.shape[0] + 1] += getattr(model, "jitter", 1e-8)
    if not grads:
        return K, None
    return K, np.stack(gk.kernel_grad(_kind(model), X, hyp, _degree(model)))


@contextlib.contextmanager
def quiet_numerics():
    """Silence RuntimeWarnings (overflow in exp, log of 0) that the approximations handle themselves."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def run_at_hyperparameters(model, data, algorithm, **kwargs) -> tuple:
    """``algorithm(K, y, likelihood, **kwargs)`` (every approximation's own iterations) at the model's
    hyperparameters, on one BLAS thread for small problems: (its result, ``K``, ``y``)."""
    with one_blas_thread(len(data.y)):
        y = labels_pm(data.y)
        K, _ = kernel_and_grads(model, data.X, grads=False)
        model.cholesky(data.X, K=K)       # a numerically singular K is refused here, with the option to change
        with quiet_numerics():
            res = algorithm(K, y, model.likelihood, **kwargs)
    return res, K, y


def cross_kernel(model, X, Xs, hyp=None):
    if hyp is None:
        hyp = get_hyp(model, X)
    return gk.kernel_matrix(_kind(model), X, Xs, hyp, _degree(model))


def kss_diag(model, Xs, hyp=None):
    if hyp is None:        # Xs are not the training inputs: no "scale" lengthscale is set from them
        hyp = np.atleast_1d(np.asarray(model.hyperparameters(_d(model, Xs)), float))
    return gk.kernel_diag(_kind(model), Xs, hyp, _degree(model))


def predict_latent(model, X, Xs, alpha, sW, L):
    """Predictive latent mean and variance (4.10): mu_* = k_*^T alpha, s2_* = k_** - |L^-1 sW k_*|^2."""
    with one_blas_thread(L.shape[0]):
        hyp = get_hyp(model, X)
        Ks = cross_kernel(model, X, Xs, hyp)
        mu = Ks.T @ alpha
        v = sla.solve_triangular(L, sW[:, None] * Ks, lower=True, check_finite=False)
        return mu, np.maximum(kss_diag(model, Xs, hyp) - np.sum(v * v, 0), 0.0)


# ------------------------------------------------------------------------------------------------ memory
MEMORY_ADVICE = ("fit a random subset of the training points: every GPC backend holds n x n matrices (the kernel, its "
                 "Cholesky factors, the posterior covariance)")


def memory(square: float, approximation: bool = True, quadrature_rows: int | None = None):
    """The ``memory`` declaration of a GPC backend (``bayeszoo.memory_guard``): ``square`` n x n matrices alive at its
    peak (counted on its code path: the kernel and its symmetrised copy, chol(K), B and its factor, the covariance
    V and the temporaries that form it, the factor the draws use). An ``approximation`` also holds, up to n =
    ``DENSE_N``, its covariance in the fit's ``gaussian`` group (three n x n matrices while it is symmetrised), and
    evaluates the Jensen bound (and the logit's tilted moments) by quadrature: six arrays of n x
    :data:`QUADRATURE_NODES`, or of ``quadrature_rows`` x :data:`QUADRATURE_NODES` for a backend whose quadrature
    runs in chunks of that many rows."""
    def need(model, data, options) -> Need:
        n = data.n
        parts = {f"{square:g} matrices of {n:,} x {n:,} (kernel, Cholesky factors, covariance)": dense(n, n, square)}
        if approximation and n <= DENSE_N:
            parts[f"the covariance kept with the fit ({n:,} x {n:,}, 3 matrices)"] = dense(n, n, 3)
        if approximation:
            rows = n if quadrature_rows is None else min(n, quadrature_rows)
            parts[f"quadrature (6 arrays of {rows:,} x {QUADRATURE_NODES} nodes)"] = dense(rows, QUADRATURE_NODES, 6)
        return Need(parts, MEMORY_ADVICE)
    return need


# ------------------------------------------------------------------------------------------------ output
#: the idata group of a Gaussian approximation's site form (GPML's posterior struct), one value per training point
SITES_GROUP = "sites"


class Posterior(NamedTuple):
    """What every Gaussian approximation returns, after GPML's one posterior struct: Q(f) = N(mean, cov) at the
    training inputs; where Q has the site form V = (K^-1 + W)^-1, ``alpha`` = K^-1 m and ``sW`` = W^1/2 (Table
    4.3, what predictions need without V); the method's own log evidence, the Jensen bound (4.13) at Q, the traces
    of what it optimises (``objective``, ``objective_name`` the one it maximises), iterations and convergence;
    ``sites``: the method's own per-point parameters (EP's site precisions, VB's bound positions); ``info``: its
    own scalars (LR's noise sd)."""

    mean: np.ndarray
    cov: np.ndarray
    log_evidence: float
    jensen_bound: float
    alpha: np.ndarray | None = None
    sW: np.ndarray | None = None
    objective: dict = {}
    objective_name: str | None = None
    iterations: int | None = None
    converged: bool | None = None
    sites: dict = {}
    info: dict = {}


def with_defaults(options: dict, opts: dict | None) -> dict:
    """A backend's ``opts`` over the defaults of its declared ``options`` (for calls outside ``bz.fit``)."""
    return {**{name: opt.default for name, opt in options.items()}, **(opts or {})}


def approximation_run(model, data, method, opts: dict, ctx, *, draws: int, chains: int, limit: str | None = None):
    """The Fit of a Gaussian approximation: ``method(model, data, opts, progress, owner) -> Posterior`` timed
    (``progress``, the label of its errors and the seed of the draws from the run context ``ctx``), then
    :func:`bayeszoo.inference.approximations.approximation_fit` (draws, the ``gaussian`` group with m, diag V and
    V); alpha, sW and the method's own site parameters go into the group ``sites`` (over ``obs``)."""
    t0 = time.perf_counter()
    post = method(model, data, opts, ctx.progress, ctx.owner)
    seconds = time.perf_counter() - t0
    q = GaussianApproximation(variable="f", mean=np.asarray(post.mean, float), cov=np.asarray(post.cov, float),
                              log_evidence=float(post.log_evidence), objective=post.objective,
                              objective_name=post.objective_name, iterations=post.iterations,
                              converged=post.converged)
    per_point = {"alpha": post.alpha, "sW": post.sW, **post.sites}
    sites = {k: xr.DataArray(np.asarray(v, float), dims=("obs",), coords={"obs": model.coords(data)["obs"]})
             for k, v in per_point.items() if v is not None}
    groups = {SITES_GROUP: xr.Dataset(sites)} if sites else {}
    info = {"jensen_bound": float(post.jensen_bound), **post.info}
    with quiet_numerics():
        return approximation_fit(model, data, q, ctx=ctx, draws=draws, chains=chains,
                                 timing={"tune": seconds}, info=info, limit=limit,
                                 extra_groups=groups)


# ------------------------------------------------------------------------------------------------ variational helpers
def expected_log_lik_derivs(y, m, v, likelihood):
    """Per-site E_{N(f_i | m_i, v_i)} log sig(y_i f_i) and its derivatives in (m_i, v_i).

    Returns ``(a, a_m, a_v, a_mm, a_mv, a_vv)``. By Bonnet's and Price's theorems the derivatives are Gaussian
    expectations of the likelihood's derivatives: a_m = E[d1], a_v = E[d2] / 2, a_mm = E[d2], a_mv = E[d3] / 2
    (more accurate than the thesis's Hermite-moment forms, F.3, when v_i is small), and
    a_vv = E[(t^2 - 1) d2(m + sqrt(v) t)] / (4 v) (Stein's identity once more). Quadrature: graded
    Gauss-Legendre panels per row (:func:`_graded_nodes`), so wide Gaussians (regime 2) cost no more than narrow
    ones.
    """
    y = np.broadcast_to(np.asarray(y, float), np.shape(m)).ravel()
    m = np.asarray(m, float).ravel()
    sd = np.sqrt(np.maximum(np.asarray(v, float).ravel(), 0.0))
    f, logw, t = _graded_nodes(m, sd)
    w = np.exp(logw)
    lp, d1, d2, d3 = log_lik_derivs(f, y[:, None], likelihood)
    return (np.sum(w * lp, 1), np.sum(w * d1, 1), 0.5 * np.sum(w * d2, 1), np.sum(w * d2, 1),
            0.5 * np.sum(w * d3, 1), np.sum(w * (t * t - 1.0) * d2, 1) / (4.0 * np.maximum(sd**2, 1e-300)))


def triangular_inverse(L):
    """L^-1 for lower-triangular L (LAPACK trtri: one call, much cheaper than a triangular solve against I)."""
    Li, info = sla.lapack.dtrtri(L, lower=1)
    if info != 0:
        raise ValueError(f"GPC: a Cholesky factor is singular (LAPACK trtri info {info}); the kernel matrix is too "
                         f"ill-conditioned (rescale the inputs or change the hyperparameters)")
    return Li


def trace_B_inv(L):
    """tr(B^-1) from L = chol(B): the trace term tr(V K^-1) of the Jensen bound (4.13)."""
    Li = triangular_inverse(L).ravel(order="K")          # a view: no second n x n array for the squares
    return float(Li @ Li)

