"""``mrvm1`` and ``mrvm2``: the multiclass relevance vector machines of Damoulas ch. 5 (convex or mean rule).

mRVM1 (Algorithms 6-7): one precision alpha_i per training object, shared by the classes; fast type-II ML of
log p(Y | K, A) = sum_c log N(y_c | 0, I + K^T A^-1 K) (5.13), constructive. Per iteration, with the active
rows K_o of the composite kernel, S_m and Q_cm for every object by Woodbury (5.24-5.25), the sparsity and
quality factors s_m, q_cm (5.23), the contribution theta_i = sum_c q_ci^2 - C s_i (5.19-5.20 with the square,
erratum 9); informative selection (Algorithm 7): add the inactive object of largest theta > 0, else delete the
active one of smallest theta <= 0, else re-estimate a random active one; then the M-step for W_o (5.21), the
QP for beta (5.10) and the E-step for Y (5.4-5.5), all on the active set. Stops by Criterion 2 (§5.4.4):
|Delta log alpha_m| < ``threshold`` for every active m, theta_i <= 0 for every inactive i, and at least
``min_iter`` (default N) iterations; or after ``max_iter``.

mRVM2 (Algorithm 8): per-object, per-class precisions with the flat Gamma(tau, nu) prior (options of this
backend), A started at 1 (not from the diffuse prior). The thesis's tau = nu = 1e-5 cannot work with its own
threshold: the E-step mean (2 tau + 1) / (w^2 + 2 nu) never exceeds (2 tau + 1) / (2 nu) = 5e4 < 1e6, so nothing
would ever be pruned. The default is tau = 1e-5, nu = 1e-8 (cap 5e7), with which objects are pruned in the first
few iterations as the thesis reports. Each iteration runs the M-step for W_o, the beta QP, the E-step for Y, the
E-step (mean) for alpha, and objects with alpha_ic > ``prune`` for every c are pruned for good. Stops when the
relative change of W and Y is below ``tol`` or after ``max_iter``.

Both report the relevance vectors (the ``relevance`` group: ``fit.idata.relevance["relevance_vectors"]``, the
indices of the training objects); pruned objects have W = 0 and log_alpha = log(1e12). Draws of W come from the
Gaussian conditional at the estimates on the active set (a ``GaussianApproximation`` of W, log_alpha and beta
fixed). The ``objective`` group traces the training log likelihood and the number of relevance vectors; neither is
the quantity the iterations maximise, so ``fit.info["objective"]`` is None.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import xarray as xr
from scipy import linalg as sla

from bayeszoo import checks
from bayeszoo.inference.timing import Timer
from bayeszoo.inference.approximations import approximation_fit
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.numerics.linalg import jittered_cholesky
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import common as MK

_LEARN_BETA = Option(True, "estimate the kernel weights beta by the simplex QP (convex rule; the mean rule keeps "
                           "them equal)", checks.Flag())
S_RTOL = 1e-10        # relative size below which S_m (alpha_m - S_m when active) is rounding noise
RELEVANCE_GROUP = "relevance"

OPTIONS1 = {
    "max_iter": Option(None, "largest number of iterations (None: 20 N)", checks.Interval(int, 1, None, none=True)),
    "min_iter": Option(None, "fewest iterations before Criterion 2 may stop the run (None: N)",
                       checks.Interval(int, 1, None, none=True)),
    "threshold": Option(1e-6, "Criterion 2: largest |change of log alpha| of an active object at convergence",
                        checks.POSITIVE),
    "learn_beta": _LEARN_BETA,
}
OPTIONS2 = {
    "max_iter": Option(200, "largest number of iterations", checks.POSITIVE_INT),
    "tol": Option(1e-4, "stop when the relative change of W and of Y falls below this (and nothing is pruned)",
                  checks.POSITIVE),
    "tau": Option(1e-5, "shape of the flat Gamma(tau, nu) prior on the precisions alpha_ic", checks.POSITIVE),
    "nu": Option(1e-8, "rate of the flat Gamma(tau, nu) prior on the precisions alpha_ic", checks.POSITIVE),
    "prune": Option(1e6, "an object is pruned once alpha_ic exceeds this for every class", checks.POSITIVE),
    "learn_beta": _LEARN_BETA,
}


def _reduced_posterior(Ko, Y, alpha_o):
    """Cholesky of Sigma^-1 = K_o K_o^T + A_o (M x M) and W_o = Sigma K_o Y (5.21)."""
    L = jittered_cholesky(Ko @ Ko.T + np.diag(alpha_o), what="K_o K_o^T + A_o (the relevance vectors' precision)")
    return L, sla.cho_solve((L, True), Ko @ Y, check_finite=False)


_PRECISION = "K_o K_o^T + A_o,{c} (the relevance vectors' precision of class {c})"


def sparsity_quality(K, active, alpha_active, Y):
    """S_m = k_m^T C^-1 k_m and Q_cm = k_m^T C^-1 y_c for every object m, C = I + K_o^T A_o^-1 K_o (5.22),
    by Woodbury with the M x M matrix K_o K_o^T + A_o (5.24-5.25). Returns (S (N,), Q (N, C), L, W_o)."""
    Ko = K[active]
    L, Wo = _reduced_posterior(Ko, Y, alpha_active)
    B = Ko @ K                                            # (M, N): K_o k_m for every m
    SB = sla.cho_solve((L, True), B, check_finite=False)
    S = np.sum(K * K, 0) - np.sum(B * SB, 0)
    Q = K.T @ Y - SB.T @ (Ko @ Y)
    return S, Q, L, Wo


class MRVMState(NamedTuple):
    """The estimates after an iteration: precisions ``alpha`` (mRVM1: (N,), inf where the object is not active) or
    ``A`` (mRVM2: (N, C)) with the ``active`` objects, weights ``W``, latent scores ``Y``, kernel weights
    ``beta`` and the composite kernel ``K`` at them; the generator of mRVM1's random re-estimations; ``n_rv``,
    the number of relevance vectors after each iteration; ``iteration``; ``objective``, the training log
    likelihood (None before the first iteration); mRVM1's ``column_norms`` |k_m|^2 at the start, the scale an
    inactive object's S_m is resolved against."""

    alpha: np.ndarray
    active: np.ndarray
    W: np.ndarray
    Y: np.ndarray
    beta: np.ndarray
    K: np.ndarray
    rng: np.random.Generator | None
    n_rv: tuple
    iteration: int
    objective: float | None
    column_norms: np.ndarray | None = None


class MRVMInfo(NamedTuple):
    """One iteration: the training log likelihood after it; ``change`` (mRVM1: the largest |change of log alpha|
    of an active object; mRVM2: the larger relative change of W and of Y); ``moving``, True while the active set
    changes (mRVM1: every action changes alpha; Criterion 2 is its own test, a ``stalled`` step); ``stalled``,
    mRVM1's Criterion 2 held and nothing was changed."""

    objective: float | None
    change: float
    moving: bool = False
    stalled: bool = False


class MRVMEstimate(NamedTuple):
    """The final estimates on the ``active`` objects: ``W`` (N, C; zero elsewhere), ``Ls`` the Cholesky factors
    of each class's precision K_o K_o^T + A_o,c, ``A`` (M, C) the precisions, ``beta``; the training log
    likelihood ``trace``, ``n_rv`` after each iteration, ``iterations`` and ``converged``."""

    W: np.ndarray
    Ls: np.ndarray
    active: np.ndarray
    A: np.ndarray
    beta: np.ndarray
    trace: np.ndarray
    n_rv: np.ndarray
    iterations: int
    converged: bool


def mrvm1_iterations(Ks, y, onehot, *, rule, min_iter, threshold, learn_beta, owner: str = "mRVM1") -> Algorithm:
    """Algorithms 6-7 (module docstring): one informative action per iteration; ``init`` takes the generator of
    the random re-estimations and the starting kernel weights."""
    N, C = onehot.shape

    def init(start):
        rng, beta = start
        K = MK.combine(Ks, beta, rule)
        Y = np.where(onehot, 1.0, 0.0)
        return MRVMState(alpha=_first_relevance_vector(K, Y, C, owner), active=None, W=None, Y=Y, beta=beta, K=K,
                         rng=rng,
                         n_rv=(), iteration=0, objective=None, column_norms=np.sum(K * K, 0))

    def step(s):
        alpha, K, beta, Y, rng = s.alpha, s.K, s.beta, s.Y, s.rng
        act = np.nonzero(np.isfinite(alpha))[0]
        Sm, Qm, L, Wo = sparsity_quality(K, act, alpha[act], Y)
        sp, q = Sm.copy(), Qm.copy()
        fin = np.isfinite(alpha)
        kk = s.column_norms
        # S_m = |k_m|^2 - (the part the active set explains) loses its digits when k_m lies (numerically) in the
        # span of the active columns. Such an inactive object is not added (its s_m is lost to rounding); for an
        # active one alpha_m - S_m = alpha_m^2 / (alpha_m + s_m) vanishes as s_m grows, theta_m -> -inf: deleted
        resolved = np.where(fin, alpha - Sm > S_RTOL * np.where(fin, alpha, 0.0), Sm > S_RTOL * kk)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            sp[fin] = alpha[fin] * Sm[fin] / (alpha[fin] - Sm[fin])             # 5.23
            q[fin] = (alpha[fin] / (alpha[fin] - Sm[fin]))[:, None] * Qm[fin]
            theta = np.where(resolved, np.sum(q**2, 1) - C * sp, -np.inf)
            alpha_star = np.where(theta > 0, C * sp**2 / theta, np.inf)     # 5.19-5.20
        alpha_star = np.where(alpha_star > 0, alpha_star, np.inf)          # s underflowed: nothing to add
        # convergence (Criterion 2): stationary active alphas, nothing to add, enough iterations
        d_log = np.abs(np.log(alpha_star[fin]) - np.log(alpha[fin]))
        change = float(d_log.max()) if d_log.size else 0.0
        if s.iteration >= min_iter and np.all(d_log < threshold) and np.all(theta[~fin] <= 0):
            return s, MRVMInfo(None, change, stalled=True)
        alpha = alpha.copy()
        # informative selection (Algorithm 7)
        inactive_pos = np.nonzero(~fin & (theta > 0))[0]
        active_neg = np.nonzero(fin & (theta <= 0))[0]
        if inactive_pos.size:
            i = inactive_pos[np.argmax(theta[inactive_pos])]
            alpha[i] = alpha_star[i]
        elif active_neg.size and fin.sum() > 1:
            alpha[active_neg[np.argmin(theta[active_neg])]] = np.inf
        else:
            i = rng.choice(np.nonzero(fin)[0])
            if np.isfinite(alpha_star[i]):
                alpha[i] = alpha_star[i]
        act = np.nonzero(np.isfinite(alpha))[0]
        L, Wo = _reduced_posterior(K[act], Y, alpha[act])
        W = np.zeros((N, C))
        W[act] = Wo
        if learn_beta:
            beta = MK.simplex_qp(*MK.beta_qp_terms(Ks, W, Y), x0=beta)
            K = MK.combine(Ks, beta, rule)
        Y = MK.cone_moments(K.T @ W, onehot)[0]
        loglik = MK.train_loglik(K, W, y)
        state = MRVMState(alpha, act, W, Y, beta, K, rng, s.n_rv + (len(act),), s.iteration + 1, loglik, kk)
        return state, MRVMInfo(loglik, change, moving=True)

    return Algorithm(init, step)


def _first_relevance_vector(K, Y, C, owner: str):
    """The starting precisions: the object with the largest projection sum_c (k_i^T y_c)^2 / |k_i|^2 active
    (Tipping-Faul), every other one at infinity."""
    kk = np.sum(K * K, 0)
    if not np.any(kk > 0):
        raise ValueError(f"{owner}: the composite kernel is zero on the training objects (to working "
                         f"precision, e.g. a linear kernel on zero or tiny columns), so no relevance vector can be "
                         f"selected; standardise the inputs or use another kernel")
    with np.errstate(divide="ignore", invalid="ignore"):
        proj = np.where(kk > 0, np.sum((K.T @ Y) ** 2, 1) / kk, -np.inf)   # a zero column explains nothing
    i0 = int(np.argmax(proj))
    alpha = np.full(K.shape[0], np.inf)
    denom = proj[i0] / C - 1.0
    alpha[i0] = kk[i0] / denom if denom > 0 else 1.0 / kk[i0]   # 5.19 with C = I
    return alpha


def mrvm1_estimate(model, data, *, rng: np.random.Generator, max_iter=None, min_iter=None, threshold=1e-6,
                   learn_beta=True, progress=False, owner: str = "approximation") -> MRVMEstimate:
    """mRVM1 (Algorithms 6-7); ``rng`` draws the informative sample selection's ties (the backend's: the root
    stream of its run context); ``owner`` names the backend in errors."""
    Ks = model.train_kernels(data)
    S, N = Ks.shape[:2]
    C = model.n_classes(data)
    y = data.y.astype(int)
    onehot = np.eye(C, dtype=bool)[y]
    max_iter = 20 * N if max_iter is None else max_iter
    min_iter = N if min_iter is None else min_iter
    algorithm = mrvm1_iterations(Ks, y, onehot, rule=model.rule, min_iter=min_iter, threshold=threshold, owner=owner,
                                 learn_beta=learn_beta and model.rule == "convex")
    run = iterate(algorithm, (rng, model.default_beta(S)), max_iter=max_iter, tol=threshold, progress=progress,
                  desc="mrvm1", unit="action", owner=owner,
                  change_name="largest |change of log alpha|")
    s = run.state
    act = np.nonzero(np.isfinite(s.alpha))[0]
    K = MK.combine(Ks, s.beta, model.rule)
    L, Wo = _reduced_posterior(K[act], s.Y, s.alpha[act])
    W = np.zeros((N, C))
    W[act] = Wo
    return MRVMEstimate(W=W, Ls=np.broadcast_to(L, (C,) + L.shape), active=act,
                        A=np.repeat(s.alpha[act][:, None], C, axis=1), beta=s.beta, trace=run.trace,
                        n_rv=np.asarray(s.n_rv), iterations=s.iteration, converged=run.converged)


def mrvm2_iterations(Ks, y, onehot, *, rule, tau, nu, prune, learn_beta) -> Algorithm:
    """Algorithm 8 (module docstring); ``init`` takes the starting kernel weights."""
    N, C = onehot.shape

    def init(beta):
        return MRVMState(alpha=np.ones((N, C)), active=np.arange(N), W=np.zeros((N, C)),
                         Y=np.where(onehot, 1.0, 0.0), beta=beta, K=None, rng=None, n_rv=(), iteration=0,
                         objective=None)

    def step(s):
        A, act, beta = s.alpha, s.active, s.beta
        K = MK.combine(Ks, beta, rule)
        Ko = K[act]
        W_new = np.zeros((N, C))
        for c in range(C):
            L = jittered_cholesky(Ko @ Ko.T + np.diag(A[act, c]), what=_PRECISION.format(c=c))
            W_new[act, c] = sla.cho_solve((L, True), Ko @ s.Y[:, c], check_finite=False)
        if learn_beta:
            beta = MK.simplex_qp(*MK.beta_qp_terms(Ks, W_new, s.Y), x0=beta)
            K = MK.combine(Ks, beta, rule)
        Y_new = MK.cone_moments(K.T @ W_new, onehot)[0]
        A[act] = (2 * tau + 1) / (W_new[act] ** 2 + 2 * nu)       # E-step (5.9)
        keep = ~np.all(A[act] > prune, axis=1)
        if keep.sum() == 0:
            keep[np.argmin(A[act].min(1))] = True
        change = max(np.linalg.norm(W_new - s.W) / max(np.linalg.norm(W_new), 1e-300),
                     np.linalg.norm(Y_new - s.Y) / max(np.linalg.norm(Y_new), 1e-300))
        loglik = MK.train_loglik(K, W_new, y)
        act = act[keep]
        W_new[np.setdiff1d(np.arange(N), act)] = 0.0
        state = MRVMState(A, act, W_new, Y_new, beta, K, None, s.n_rv + (len(act),), s.iteration + 1, loglik)
        return state, MRVMInfo(loglik, change, moving=not keep.all())

    return Algorithm(init, step)


def mrvm2_estimate(model, data, *, max_iter=200, tol=1e-4, tau=1e-5, nu=1e-5, prune=1e6, learn_beta=True,
                   progress=False, owner: str = "approximation") -> MRVMEstimate:
    Ks = model.train_kernels(data)
    S, N = Ks.shape[:2]
    C = model.n_classes(data)
    y = data.y.astype(int)
    onehot = np.eye(C, dtype=bool)[y]
    algorithm = mrvm2_iterations(Ks, y, onehot, rule=model.rule, tau=tau, nu=nu, prune=prune,
                                 learn_beta=learn_beta and model.rule == "convex")
    run = iterate(algorithm, model.default_beta(S), max_iter=max_iter, tol=tol, progress=progress, desc="mrvm2",
                  owner=owner)
    s = run.state
    act, A = s.active, s.alpha
    K = MK.combine(Ks, s.beta, model.rule)
    Ko = K[act]
    Ls = np.stack([jittered_cholesky(Ko @ Ko.T + np.diag(A[act, c]), what=_PRECISION.format(c=c)) for c in range(C)])
    W = np.zeros((N, C))
    for c in range(C):
        W[act, c] = sla.cho_solve((Ls[c], True), Ko @ s.Y[:, c], check_finite=False)
    return MRVMEstimate(W=W, Ls=Ls, active=act, A=A[act], beta=s.beta, trace=run.trace, n_rv=np.asarray(s.n_rv),
                        iterations=run.iterations, converged=run.converged)


def _fit(model, data, res, Ls, A, ctx, *, draws, chains, timer, limit):
    """The Gaussian conditional of W on the relevance vectors as a Fit, their indices in the ``relevance`` group."""
    active = res.active
    q = MK.conditional_w(model, data, res.W[active], Ls, A, res.beta, active=active,
                         objective={"train_loglik": res.trace, "n_relevant": res.n_rv},
                         iterations=res.iterations, converged=res.converged)
    relevance = xr.Dataset({"relevance_vectors": xr.DataArray(np.asarray(active, int), dims=("relevance_vector",))})
    return approximation_fit(model, data, q, ctx=ctx, draws=draws, chains=chains,
                             timing={"tune": timer()}, limit=limit,
                             info={"n_relevance_vectors": int(len(active))},
                             extra_groups={RELEVANCE_GROUP: relevance})


@register("mrvm1", kind="approximation", family="pmkl", applies=MK.fixed_kernels, options=OPTIONS1,
          relations=(checks.AtMost("min_iter", "max_iter", larger_default=lambda data: 20 * data.n),),
          check=MK.check_rule, defaults=APPROXIMATION_DEFAULTS, memory=MK.memory(3.5, per_class=False),
          description="mRVM1: fast constructive multiclass RVM with shared precisions (Algorithms 6-7)")
def run_mrvm1(model, data, *, draws, tune, chains, ctx, **opts):
    """mRVM1: constructive type-II ML with informative sample selection."""
    timer = Timer()
    res = mrvm1_estimate(model, data, rng=ctx.numpy_rng(), progress=ctx.progress, owner=ctx.owner, **opts)
    cap = opts["max_iter"] if opts["max_iter"] is not None else 20 * data.n
    return _fit(model, data, res, res.Ls, res.A, ctx, draws=draws, chains=chains, timer=timer,
                limit=f"{cap} iterations (Criterion 2 did not hold)")


@register("mrvm2", kind="approximation", family="pmkl", applies=MK.fixed_kernels, options=OPTIONS2,
          check=MK.check_rule, defaults=APPROXIMATION_DEFAULTS, memory=MK.memory(6),
          description="mRVM2: flat-prior multiclass RVM with top-down pruning (Algorithm 8)")
def run_mrvm2(model, data, *, draws, tune, chains, ctx, **opts):
    """mRVM2: EM with per-class precisions under a flat prior, pruning at alpha > ``prune``."""
    timer = Timer()
    res = mrvm2_estimate(model, data, progress=ctx.progress, owner=ctx.owner, **opts)
    return _fit(model, data, res, res.Ls, res.A, ctx, draws=draws, chains=chains, timer=timer,
                limit=f"{opts['max_iter']} iterations")
