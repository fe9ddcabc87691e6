"""The Gaussian RVM core that the rvm, arvm and imagervm backends share.

Notation follows the Tzikas digest: Phi (N x M) design, A = diag(alpha) weight precisions, B = diag(beta_n)
noise precisions (beta * I for regression, the IRLS weights for classification), t (or t-hat) targets,
Sigma = (Phi^T B Phi + A)^-1 and mu = Sigma Phi^T B t [T 2.13-2.14]. Only the M x M posterior precision is
ever factorised (Cholesky after symmetric diagonal scaling, with jitter); kernel matrices are never inverted.

The type-II / MAP objective of ``em`` and ``fast`` is [T 2.21] over the bases currently in the model,

    J = log N(t | 0, B^-1 + Phi A^-1 Phi^T) + sum_active (a log alpha_i - b alpha_i) + c log beta - d beta,

i.e. Gamma(a, b) / Gamma(c, d) densities on log alpha_i and log beta (the digest's corrected form: coefficient
a, not a - 1, and the Gamma prior on beta, not sigma^2). A basis removed from the model contributes nothing.

The results of the approximations are :class:`~bayeszoo.inference.approximations.GaussianApproximation` s over
``w`` (:func:`type2_approximation`).
"""
from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import numpy as np
from scipy import linalg as sla
from scipy.special import expit, log_expit, log_ndtr

from bayeszoo.inference.approximations import GaussianApproximation, approximation_fit
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.models.rvm import LOG_ALPHA_PRUNED
from bayeszoo.numerics.blas_threads import one_blas_thread
from bayeszoo.numerics.linalg import jittered_cholesky
from bayeszoo.memory_guard import Need, dense

LOG_2PI = float(np.log(2.0 * np.pi))
#: what to do when an RVM fit needs more memory than the machine has
MEMORY_ADVICE = ("fit a random subset of the training points (the RVM has one basis function per point, so its "
                 "matrices grow as N^2), or for regression the adaptive RVM, bz.models.ARVM(n_basis=...), whose "
                 "few bases move")


def memory(square: float):
    """The ``memory`` declaration of an RVM backend (``bayeszoo.memory_guard``): the design Phi (N x M) and ``square``
    M x M matrices alive at its peak (counted on its code path: Phi^T Phi, the posterior precision, its scaled copy,
    Cholesky factor and inverse, Sigma, and the temporaries between them)."""
    def need(model, data, options) -> Need:
        N, M = data.n, model.n_basis(data)
        return Need({f"design matrix Phi ({N:,} x {M:,})": dense(N, M),
                     f"{square:g} matrices of {M:,} x {M:,} (Phi^T Phi, precision, its factors, Sigma)":
                         dense(M, M, square)}, MEMORY_ADVICE)
    return need


# ------------------------------------------------------------------------------------------------ Cholesky
def spd_cholesky(H: np.ndarray):
    """Cholesky of a symmetric positive definite matrix after scaling it to unit diagonal (with jitter).

    Returns ``(L, d)`` with ``H = D L L^T D``, ``D = diag(d)``. Scaling makes precisions whose diagonal spans
    many orders of magnitude (alpha_i from 1e-3 to 1e12) factorise to working precision.
    """
    diag = np.diag(H).copy()
    if np.any(~np.isfinite(diag)) or np.any(diag <= 0):
        raise np.linalg.LinAlgError("posterior precision has a non-positive or non-finite diagonal")
    d = np.sqrt(diag)
    return jittered_cholesky(H / d[:, None] / d[None, :], what="the posterior precision of the weights"), d


class Gaussian:
    """N(mu, Sigma) with Sigma = H^-1, H = Phi^T B Phi + A, from the factor of H; mu = Sigma h."""

    def __init__(self, H: np.ndarray, h: np.ndarray | None = None):
        self.L, self.d = spd_cholesky(H)
        self.M = H.shape[0]
        self.logdet_H = 2.0 * np.sum(np.log(np.diag(self.L))) + 2.0 * np.sum(np.log(self.d))
        self.mu = self.solve(h) if h is not None else None
        self._Sigma = None

    def solve(self, rhs):
        x = rhs / self.d if rhs.ndim == 1 else rhs / self.d[:, None]
        x = sla.cho_solve((self.L, True), x, check_finite=False)
        return x / self.d if rhs.ndim == 1 else x / self.d[:, None]

    @property
    def Sigma(self) -> np.ndarray:
        if self._Sigma is None:
            Li = self._L_inv() / self.d[None, :]
            self._Sigma = Li.T @ Li
        return self._Sigma

    @property
    def logdet_Sigma(self) -> float:
        return -self.logdet_H

    def chol_cov(self) -> np.ndarray:
        """A square root R of Sigma (Sigma = R R^T), for i.i.d. draws."""
        return self._L_inv().T / self.d[:, None]

    def _L_inv(self) -> np.ndarray:
        # LAPACK's triangular inverse, not solve_triangular(L, I), which is much slower on small M
        L_inv, info = sla.lapack.dtrtri(self.L, lower=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"triangular inverse failed (dtrtri info={info})")
        return L_inv


# ------------------------------------------------------------------------------------------------ evidence
def log_evidence(post: Gaussian, tBt: float, PtBt: np.ndarray, alpha: np.ndarray, logdet_B: float, N: int) -> float:
    """log N(t | 0, C), C = B^-1 + Phi A^-1 Phi^T, through the M x M factor.

    # [T 2.22], corrected: log|C| = -log|Sigma| - log|B| - log|A|  and  t^T C^-1 t = t^T B (t - Phi mu)
    """
    quad = tBt - float(post.mu @ PtBt)
    logdet_C = -post.logdet_Sigma - logdet_B - np.sum(np.log(alpha))
    return -0.5 * (N * LOG_2PI + logdet_C + quad)


def log_prior_terms(alpha, beta, model) -> float:
    """sum_i (a log alpha_i - b alpha_i) + c log beta - d beta.  # [T 2.21], corrected: Gamma prior on beta"""
    out = float(np.sum(model.a * np.log(alpha) - model.b * alpha))
    if beta is not None:
        out += model.c * np.log(beta) - model.d * beta
    return out


def basis_contribution(alpha, s, q2, a, b):
    """f_i(alpha) = l(alpha_i) + a log alpha_i - b alpha_i with l of [T 3.5]: basis i's share of J."""
    return 0.5 * (np.log(alpha) - np.log(alpha + s) + q2 / (alpha + s)) + a * np.log(alpha) - b * alpha


#: log(alpha / s) grid on which the local maxima of f_i are bracketed (see :func:`best_alpha`)
BRACKET_GRID = np.exp(np.linspace(-30.0, 36.0, 89))


def best_alpha(s, q2, a, b, alpha_max=1e12, counts: dict | None = None):
    """Maximise f_i(alpha) over alpha for every basis at once; returns ``(alpha*, f*)``.

    With a = b = 0 this is [T 3.7-3.8] (alpha = s^2 / (q^2 - s), or infinity). With the Gamma hyperprior
    the stationarity condition is a cubic, which can have two local maxima. Writing alpha = s x, the sign of
    d f / d log alpha is that of P(x) = -b s x^3 + (a - 2 b s) x^2 + (2 a + 1/2 - b s - q^2 / 2s) x + a + 1/2;
    its + to - crossings are bracketed on a log grid of x in [e^-30, e^36] and refined by Newton's method on P
    inside the bracket (bisection where a Newton step would leave it). Where no finite maximum exists, or the best
    lies above ``alpha_max``, alpha* = inf and f* = 0 (the basis is better left out). ``counts``, when given, receives
    the maxima bracketed (``"crossings"``) and the Newton iterations made (``"newton"``): the work of the call.
    """
    s = np.atleast_1d(np.asarray(s, float))
    q2 = np.atleast_1d(np.asarray(q2, float))
    K = s.shape[0]
    best_f = np.zeros(K)
    best_a = np.full(K, np.inf)
    theta = q2 / s
    bs = b * s
    x = BRACKET_GRID
    xp1 = x + 1.0
    # P(x) / (x + 1)^2 = (1/2 / (x + 1) + a) - theta x / 2 (x + 1)^2 - b s x on the grid, as one matrix product
    F = np.column_stack([np.ones(K), theta, bs]) @ np.stack([0.5 / xp1 + a, -0.5 * x / (xp1 * xp1), -x])
    up = F > 0
    rows, cols = np.nonzero(up[:, :-1] & ~up[:, 1:])
    if counts is not None:
        counts.update(crossings=int(rows.size), newton=0)
    if rows.size == 0:
        return best_a, best_f
    lo, hi = x[cols], x[cols + 1]
    c3 = -bs[rows]
    c2 = a - 2.0 * bs[rows]
    c1 = 2.0 * a + 0.5 - bs[rows] - 0.5 * theta[rows]
    c0 = a + 0.5
    r = np.sqrt(lo * hi)
    for iteration in range(1, 101):
        p = ((c3 * r + c2) * r + c1) * r + c0
        positive = p > 0
        lo = np.where(positive, r, lo)
        hi = np.where(positive, hi, r)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = r - p / ((3.0 * c3 * r + 2.0 * c2) * r + c1)
        step = np.where((newton >= lo) & (newton <= hi), newton, np.sqrt(lo * hi))
        settled = np.all(np.abs(step - r) <= 1e-14 * r)
        r = step
        if settled:
            break
    if counts is not None:
        counts["newton"] = iteration
    ss, qq = s[rows], q2[rows]
    al = ss * r
    fv = basis_contribution(al, ss, qq, a, b)
    ok = (al <= alpha_max) & (fv > 0)
    rows, al, fv = rows[ok], al[ok], fv[ok]
    np.maximum.at(best_f, rows, fv)
    # of two equal maxima the smaller alpha (rows come in increasing x within a basis)
    winners = fv == best_f[rows]
    kept, first = np.unique(rows[winners], return_index=True)
    best_a[kept] = al[winners][first]
    return best_a, best_f


# ------------------------------------------------------------------------------------------------ links
def link_terms(f, t, link):
    """Bernoulli log likelihood sum, its gradient and minus its second derivative in f (IRLS weights)."""
    sgn = 2.0 * t - 1.0
    if link == "logit":
        y = expit(f)
        ll = float(np.sum(log_expit(sgn * f)))
        return ll, t - y, np.maximum(y * (1.0 - y), 1e-300)
    z = sgn * f
    logcdf = log_ndtr(z)
    lam = np.exp(-0.5 * z * z - 0.5 * LOG_2PI - logcdf)       # N(z) / Phi(z), stable in the tails
    return float(np.sum(logcdf)), sgn * lam, np.maximum(lam * (lam + z), 1e-300)


class IRLSState(NamedTuple):
    """The weights ``w``, ``objective`` log p(t | w) + log p(w | alpha) (up to a constant), and the likelihood's
    terms there: ``log_lik``, its gradient ``g`` in f and the IRLS weights ``W``."""

    w: np.ndarray
    objective: float
    log_lik: float
    g: np.ndarray
    W: np.ndarray


class IRLSInfo(NamedTuple):
    """One Newton step: the objective after it, ``change`` = max |dw| / (1 + max |w|), and ``stalled``: no step
    along the Newton direction raised the objective (w is the mode to working precision)."""

    objective: float
    change: float
    stalled: bool = False


def irls(Phi, t, alpha, link) -> Algorithm:
    """IRLS / Newton for the mode of p(w | t, alpha), with step halving; ``init`` takes the starting w (None:
    zero)."""
    M = Phi.shape[1]

    def state(w):
        ll, g, W = link_terms(Phi @ w, t, link)
        return IRLSState(w, ll - 0.5 * float(np.sum(alpha * w * w)), ll, g, W)

    def step(s):
        H = (Phi.T * s.W) @ Phi
        H[np.diag_indices(M)] += alpha
        direction = Gaussian(H).solve(Phi.T @ s.g - alpha * s.w)
        size = 1.0
        while True:
            new = state(s.w + size * direction)
            if new.objective >= s.objective - 1e-12 * abs(s.objective):
                break
            if size < 1e-8:
                # no step along the Newton direction raises psi: w is the mode to working precision. Taking the step
                # anyway (as before) let tiny alphas on separable data throw w to overflow (NaN IRLS weights)
                return s, IRLSInfo(s.objective, 0.0, stalled=True)
            size *= 0.5
        change = float(np.max(np.abs(new.w - s.w))) / (1.0 + float(np.max(np.abs(s.w))))
        return new, IRLSInfo(new.objective, change)

    return Algorithm(lambda w0: state(np.zeros(M) if w0 is None else np.asarray(w0, float).copy()), step)


def laplace_mode(Phi, t, alpha, link, w0=None, max_iter=100, tol=1e-9):
    """IRLS / Newton for the mode of p(w | t, alpha) ([P 18-20], digest 2.5), with step halving, from ``w0``.

    Returns ``(post, W, g, loglik, iters)``: ``post`` is the Laplace Gaussian (mu = mode), ``W`` the weights B,
    ``g`` the likelihood gradient in f, so B t-hat = W f + g  ([P 20]: t-hat = Phi w + B^-1 (t - y)).
    """
    run = iterate(irls(Phi, t, alpha, link), w0, max_iter=max_iter, tol=tol, owner="IRLS")
    s = run.state
    H = (Phi.T * s.W) @ Phi
    H[np.diag_indices(Phi.shape[1])] += alpha
    post = Gaussian(H)
    post.mu = s.w
    return post, s.W, s.g, s.log_lik, run.iterations


def laplace_log_evidence(post: Gaussian, alpha, loglik) -> float:
    """log p(t | alpha) ~ log p(t | w*) + log p(w* | alpha) + M/2 log 2 pi + 1/2 log|Sigma|."""
    w = post.mu
    return loglik - 0.5 * float(np.sum(alpha * w * w)) + 0.5 * float(np.sum(np.log(alpha))) + 0.5 * post.logdet_Sigma


# ------------------------------------------------------------------------------------------------ output
class Type2Estimate(NamedTuple):
    """A type-II ML / MAP estimate, as the solvers of :func:`run_type2` (``em``, ``fast``) return it.

    active
        The kept bases: ascending indices of the design's columns.
    alpha
        The prior precisions of the kept bases, in the order of ``active``.
    beta
        The noise precision (None for a classifier).
    post
        The Gaussian posterior of the kept weights: ``mu`` (the mode for a classifier) and ``chol_cov()``, a factor
        R of its covariance (R R^T), both in the order of ``active``.
    log_evidence
        The trace of log p(t | alpha, beta), from the start to the estimate.
    objective
        The trace of the optimised quantity J (the log evidence plus the log hyperprior), the same length.
    iterations
        The iterations made.
    converged
        Whether the tolerance was met before ``max_iter``.
    n_deleted
        ``em``: the bases removed for a non-positive share of J (None for ``fast``).
    actions
        ``fast``: the count of each action taken (add, re-estimate, delete, beta, joint, rejected; None for
        ``em``).
    """

    active: np.ndarray
    alpha: np.ndarray
    beta: float | None
    post: object
    log_evidence: np.ndarray
    objective: np.ndarray
    iterations: int
    converged: bool
    n_deleted: int | None = None
    actions: dict | None = None


def type2_approximation(M: int, res: Type2Estimate, *, classifier: bool) -> GaussianApproximation:
    """The Gaussian posterior of all ``M`` weights at a type-II ML / MAP estimate ``res`` (see :func:`run_type2`):
    N(mu, Sigma) on the kept bases, w = 0 exactly on the pruned ones (zero rows of the covariance factor);
    ``log_alpha`` (LOG_ALPHA_PRUNED on the pruned bases) and ``log_beta`` fixed at the estimates."""
    active, post = res.active, res.post
    mean = np.zeros(M)
    mean[active] = post.mu
    factor = np.zeros((M, active.size))
    factor[active] = post.chol_cov()
    log_alpha = np.full(M, LOG_ALPHA_PRUNED)
    log_alpha[active] = np.minimum(np.log(res.alpha), LOG_ALPHA_PRUNED)
    fixed = {"log_alpha": log_alpha}
    if not classifier:
        fixed["log_beta"] = float(np.log(res.beta))
    return GaussianApproximation("w", mean, factor=factor, fixed=fixed, log_evidence=float(res.log_evidence[-1]),
                                 objective={"log_evidence": res.log_evidence, "objective": res.objective},
                                 objective_name="objective", iterations=res.iterations, converged=res.converged)


def run_type2(solver, model, data, opts: dict, ctx, *, draws: int, chains: int, extra_info, one_thread: bool = False):
    """Shared driver of the type-II backends (``em``, ``fast``): design matrix, ``solver``, Fit of the Gaussian.

    ``solver(model, Phi, t, opts, progress=, owner=)`` (both from the run context ``ctx``) returns a
    :class:`Type2Estimate`; ``extra_info(res)`` adds the backend's own entries to ``fit.info``. ``one_thread``:
    BLAS on one thread whatever N (a solver whose matrices are the active set's, not N-square). The optimised
    quantity is the ``objective`` trace (J); its last value is ``fit.idata.objective["objective"][-1]`` and the
    final log evidence is ``fit.info["log_evidence"]``.
    """
    t0 = time.perf_counter()
    Phi = model.training_design(data)
    t = np.asarray(data.y, float)
    # many small factorisations: below SMALL_N points (or on the active set) a second BLAS thread only contends
    with warnings.catch_warnings(), one_blas_thread(0 if one_thread else min(Phi.shape)):
        warnings.simplefilter("ignore", RuntimeWarning)
        res = solver(model, Phi, t, opts, progress=ctx.progress, owner=ctx.owner)
    q = type2_approximation(Phi.shape[1], res, classifier=model.is_classifier)
    return approximation_fit(model, data, q, ctx=ctx, draws=draws, chains=chains,
                             timing={"tune": time.perf_counter() - t0},
                             limit=f"{opts['max_iter']} iterations",
                             info={"n_relevant": int(res.active.size), **extra_info(res)})


