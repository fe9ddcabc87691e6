"""``vb``: VBpMKL, the thesis's Algorithm 3 (Damoulas ch. 4, App. B).

Mean field Q(Y) Q(W) Q(A) Q(beta) Q(Theta) Q(rho); one iteration:
    w~_c = V_c K y~_c,  V_c = (K K + A~_c)^-1                     (4.19-4.20; K at beta~)
    y~_nc, c != t_n, and y~_n,t_n from the cone-truncated moments  (4.15-4.16, Gauss-Hermite in log space)
    alpha~_nc = (2 tau + 1) / (2 nu + w~_nc^2)                     (4.23; Algorithm 3 line 6 has a spurious ^-1,
                                                                    erratum 4; ``exact_alpha`` uses E[w^2])
    beta~ = sum_i W(beta^i) beta^i, beta^i from the prior          (4.27; weights in log space)
    rho~ = sum_i W(rho^i) rho^i, W ~ Dir(beta~ | rho^i), rho^i ~ Gamma(lam, mu)   (4.28; ``infer_rho``)
    theta~_s = sum_i W(theta^i) theta^i per rbf source s, theta^i ~ Gamma(omega, phi)^D_s, weights
            prod N(y~_nc | w~_c^T k_n, 1) with source s at theta^i and the others at theta~ (4.25-4.26;
            ``kernel_params="infer"``); K and V_c then use K_s(theta~_s) (first-order approximation B.1)
The importance-sampling pool accumulates ``is_samples`` new prior draws per iteration and all weights are
recomputed at the current y~, w~ (B.9's "samples taken until now", erratum 11); ``is_pool="fresh"`` draws a
new pool every iteration instead. The same holds for the pools of rho and of each source's theta. Theta is
importance-sampled one source at a time (Q(Theta) = prod_s Q(theta_s)): prior draws of the whole Theta have
weights that collapse onto one draw as soon as there are more than a few inputs. When rho is inferred, beta's
prior Dir(rho~) moves between iterations, so each pooled beta^i carries the weight p(beta^i | rho~) / q_i(beta^i),
q_i the Dirichlet it was drawn from (an unbiased weight per draw); with rho fixed this ratio is 1, as in 4.27.
Prior proposals for theta (the thesis's) leave few effective draws beyond two or three inputs;
``theta_proposal="local"`` draws half of each batch log-normally around the current theta~ (a defensive
mixture with the prior, weights p / q of the mixture density).
The lower bound B.23 (A = precision, erratum 6) is traced after every iteration (``lower_bound`` in the
``objective`` group, ``fit.info["objective"]``); it conditions on A and beta (and Theta), so it can fall slightly
when they move. Stopping rule of the thesis: relative increase below ``tol`` (0.1 %) or ``max_iter`` (100)
iterations.

The fit's draws are i.i.d. from the final Q: W from prod_c N(w~_c, V_c) (a ``GaussianApproximation`` of W, whose
mean and variances ``approximation_fit`` keeps in the ``gaussian`` group) and, drawn with each draw of W (its
``others``), log alpha from Q(A) (Gamma(tau + 1/2, nu + w~^2 / 2), 4.22), beta resampled from the weighted pool
(convex, binary, weighted product) or fixed (mean, product); theta (per source) and rho resampled from their
weighted pools. The means of
Q(beta), Q(Theta) and Q(rho) are in the ``importance`` group (``beta_mean``, ``theta_mean``, ``rho_mean``), the
effective sample sizes 1 / sum w_i^2 of the final weights in ``fit.info`` (``is_ess``, ``theta_is_ess``,
``rho_is_ess``).
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
from bayeszoo.numerics.blas_threads import one_blas_thread
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import common as MK

OPTIONS = {
    "max_iter": Option(100, "largest number of iterations", checks.POSITIVE_INT),
    "tol": Option(1e-3, "stop when the lower bound rises by less than this fraction of itself", checks.POSITIVE),
    "is_samples": Option(200, "new prior draws per iteration in each importance-sampling pool (beta, rho, theta)",
                         checks.POSITIVE_INT),
    "is_pool": Option("accumulate", "'accumulate' keeps every iteration's draws in the pools (B.9); 'fresh' "
                                    "draws new pools each iteration", checks.OneOf(("accumulate", "fresh"))),
    "exact_alpha": Option(False, "update alpha with E[w^2] (mean^2 + variance) instead of the thesis's mean^2",
                          checks.Flag()),
    "fix_alpha": Option(None, "hold every alpha_nc at this positive value (None: update alpha)",
                        checks.Interval(float, 0, None, "neither", none=True)),
    "theta_proposal": Option("prior", "proposal for theta: 'prior' (the thesis's) or 'local' (half of each batch "
                                      "log-normal around the current theta~)", checks.OneOf(("prior", "local"))),
}
IMPORTANCE_GROUP = "importance"
LOCAL_LOG_SD = 0.5     # log-scale sd of the local component of ``theta_proposal="local"``


def positive_gamma(rng, shape: float, rate: float, size) -> np.ndarray:
    """Gamma(shape, rate) draws, floored at the smallest normal number: with a small shape many draws underflow to
    0, which is no valid Dirichlet parameter or kernel width (and has log density -inf)."""
    return np.maximum(rng.gamma(shape, 1.0 / rate, size), np.finfo(float).tiny)


def theta_proposal_draws(rng, n: int, center, omega: float, phi: float, kind: str):
    """n proposals for one source's theta (n, D) and log [p(theta) / q(theta)] for each.

    "prior": Gamma(omega, phi) draws, the thesis's proposal (the ratio is 0). "local": a defensive mixture,
    half Gamma(omega, phi) and half log-normal around the current theta~ (sd ``LOCAL_LOG_SD`` on the log
    scale), with q the mixture density, so the weights stay valid and bounded by twice the prior ratio."""
    from scipy import stats

    D = len(center)
    prior = stats.gamma(omega, scale=1.0 / phi)
    if kind == "prior":
        return positive_gamma(rng, omega, phi, (n, D)), np.zeros(n)
    local = rng.random(n) < 0.5
    draws = np.where(local[:, None], np.exp(np.log(center) + LOCAL_LOG_SD * rng.standard_normal((n, D))),
                     positive_gamma(rng, omega, phi, (n, D)))
    log_prior = prior.logpdf(draws).sum(1)
    log_local = stats.norm(np.log(center), LOCAL_LOG_SD).logpdf(np.log(draws)).sum(1) - np.log(draws).sum(1)
    log_q = np.logaddexp(log_prior, log_local) - np.log(2.0)
    return draws, log_prior - log_q


def prior_beta_draws(model, rng, n: int, S: int, rho=None):
    """n draws of beta from the rule's prior (the importance-sampling proposal of 4.27); ``rho`` (S,) is the
    current Dirichlet parameter of the convex rule (the model's fixed rho when None)."""
    if model.rule == "convex":
        conc = np.full(S, model.rho) if rho is None else np.asarray(rho, float)
        return np.clip(rng.dirichlet(conc, size=n), 1e-300, None)
    if model.rule == "binary":
        # Bernoulli(1/2) per kernel conditioned on at least one kernel selected, as in gibbs (by rejection)
        b = (rng.random((n, S)) < 0.5).astype(float)
        while np.any(b.sum(1) == 0):
            empty = b.sum(1) == 0
            b[empty] = (rng.random((int(empty.sum()), S)) < 0.5).astype(float)
        return b
    # weighted product: pi, chi from their exponential priors, then beta ~ Gamma(pi, chi)
    pi = rng.exponential(1.0 / model.mu, (n, S))
    chi = rng.exponential(1.0 / model.lam, (n, S))
    return np.clip(rng.gamma(pi, 1.0 / chi), 1e-300, None)


def is_log_weights(model, pool, Ks, W, Y, chunk: int = 256):
    """log of the unnormalised weights prod_{n,c} N(y~_nc | w~_c^T k_n^beta_i, 1) for every pool member."""
    if model.rule in ("convex", "binary"):
        # -1/2 ||Y - sum_s b_s K_s W||^2 = -1/2 Y.Y + b.f - 1/2 b^T Omega b (App. C terms): O(S^2) per pool member
        Omega, f = MK.beta_qp_terms(Ks, W, Y)
        return -0.5 * np.sum(Y * Y) + pool @ f - 0.5 * np.einsum("is,st,it->i", pool, Omega, pool)
    out = np.empty(pool.shape[0])
    for a in range(0, pool.shape[0], chunk // 8 or 1):
        b = pool[a:a + (chunk // 8 or 1)]
        M = MK.combine(Ks, b, model.rule) @ W
        out[a:a + len(b)] = -0.5 * np.sum((Y - M) ** 2, axis=(1, 2))
    return out


def theta_log_weights(model, pool, Xs, i, Ks, beta, W, Y, chunk: int = 64):
    """log prod_{n,c} N(y~_nc | w~_c^T k_n, 1) (4.25) with source i's kernel at each pooled theta (pool (I, D_i),
    inputs Xs (N, D_i)) and the other base kernels ``Ks`` (S, N, N) as they are."""
    rule = model.rule
    out = np.empty(pool.shape[0])
    others = [j for j in range(Ks.shape[0]) if j != i]
    if rule in ("mean", "convex", "binary"):
        M_rest = sum(beta[j] * (Ks[j] @ W) for j in others) if others else 0.0
    else:
        power = beta if rule == "wproduct" else np.ones_like(beta)
        K_rest = np.prod([Ks[j] ** power[j] for j in others], axis=0) if others else 1.0
    for a in range(0, pool.shape[0], chunk):
        Kb = MK.rbf_gram_batch(Xs, Xs, pool[a:a + chunk])                   # (b, N, N)
        if rule in ("mean", "convex", "binary"):
            M = M_rest + beta[i] * (Kb @ W)
        else:
            M = (K_rest * Kb ** power[i]) @ W
        out[a:a + chunk] = -0.5 * np.sum((Y - M) ** 2, axis=(1, 2))
    return out


def normalised(log_w):
    """Self-normalised importance weights from log weights (log-sum-exp shift)."""
    w = np.exp(log_w - np.max(log_w))
    return w / w.sum()


def is_ess(w) -> float:
    """Effective sample size 1 / sum w_i^2 of normalised weights."""
    return float(1.0 / np.sum(w**2))


def lower_bound(K, W, Ls, A, logZ):
    """B.23: NC/2 + 1/2 sum log|V_c| + sum log Z_n - 1/2 sum Tr[A_c V_c] - 1/2 sum w~_c^T A_c w~_c
    + 1/2 sum log|A_c| - 1/2 sum_c sum_n k_n^T V_c k_n, where sum_n k_n^T V_c k_n = Tr(V_c K K) = N - Tr(A_c V_c)
    because V_c^-1 = K K + A_c (so only diag(V_c) is needed)."""
    N, C = W.shape
    total = 0.5 * N * C + float(np.sum(logZ))
    for c in range(C):
        tr_AV = float(np.sum(A[:, c] * MK.diag_cov(Ls[c])))
        total += -np.sum(np.log(np.diag(Ls[c])))
        total += -0.5 * tr_AV
        total += -0.5 * np.sum(A[:, c] * W[:, c] ** 2) + 0.5 * np.sum(np.log(A[:, c]))
        total += -0.5 * (N - tr_AV)
    return total


class VBState(NamedTuple):
    """Q after an iteration: the means ``W`` (with ``Ls``, the Cholesky factors of the V_c), ``Y``, ``A``,
    ``beta``, the Gram matrices ``Ks`` at ``theta`` (None unless inferred), ``rho``; the importance-sampling pools
    and their log weights (beta's with ``pool_logq``, the log density of the proposal each draw came from; each
    rbf source's theta with ``theta_log_ratio``, log p / q of each draw; rho's); the generator the pools are
    drawn from; ``betas``, beta after each iteration; ``iteration``; and ``objective``, the lower bound B.23
    (None before the first iteration)."""

    W: np.ndarray | None
    Ls: list | None
    Y: np.ndarray
    A: np.ndarray
    beta: np.ndarray
    Ks: np.ndarray
    theta: np.ndarray | None
    rho: np.ndarray
    pool: np.ndarray
    pool_logq: np.ndarray
    log_wts: np.ndarray
    theta_pools: list
    theta_log_wts: list
    theta_log_ratio: list
    rho_pool: np.ndarray
    rho_log_wts: np.ndarray
    rng: np.random.Generator
    betas: tuple
    iteration: int
    objective: float | None


class VBInfo(NamedTuple):
    """One iteration: the lower bound after its W step and ``change``, the bound's relative change (infinite at
    the first iteration, which has nothing to compare with)."""

    objective: float
    change: float


class VBFit(NamedTuple):
    """The final Q: Q(W) recomputed at the final A and beta (``W``, ``Ls``, ``K``), the other factors' means and
    pools (as in :class:`VBState`), the ``bound`` trace, ``beta_trace``, ``iterations`` and ``converged``."""

    W: np.ndarray
    Ls: list
    A: np.ndarray
    Y: np.ndarray
    beta: np.ndarray
    pool: np.ndarray
    log_wts: np.ndarray
    bound: np.ndarray
    beta_trace: np.ndarray
    iterations: int
    converged: bool
    K: np.ndarray
    Ks: np.ndarray
    rng: np.random.Generator
    theta: np.ndarray | None
    theta_pools: list
    theta_log_wts: list
    rho: np.ndarray
    rho_pool: np.ndarray
    rho_log_wts: np.ndarray


def vb_iterations(model, data, *, is_samples, is_pool, exact_alpha, fix_alpha, theta_proposal,
                  callback=None) -> Algorithm:
    """Algorithm 3 (module docstring); ``init`` takes the generator the pools are drawn from."""
    from scipy.stats import dirichlet

    sources = model.source_list(data)
    C = model.n_classes(data)
    onehot = np.eye(C, dtype=bool)[data.y.astype(int)]
    tau, nu = float(model.tau), float(model.nu)
    learn_beta = model.rule in ("convex", "binary", "wproduct")
    fresh = is_pool == "fresh"
    blocks = [(i, sl, data.X[:, list(sources[i].columns)]) for i, sl in MK.theta_layout(sources)] \
        if model.infer_theta else []

    def init(rng):
        theta = MK.theta_start(sources) if model.infer_theta else None
        Ks = model.train_kernels(data, theta)
        S, N = Ks.shape[:2]
        return VBState(
            W=None, Ls=None, Y=np.where(onehot, 1.0, 0.0),                      # "aligned" initialisation (ch. 5)
            A=np.full((N, C), 1.0 if fix_alpha is None else float(fix_alpha)),
            beta=model.default_beta(S) if model.rule != "binary" else np.ones(S), Ks=Ks, theta=theta,
            rho=np.full(S, float(model.rho)), pool=np.empty((0, S)), pool_logq=np.empty(0), log_wts=np.empty(0),
            theta_pools=[np.empty((0, sl.stop - sl.start)) for _, sl, _ in blocks],
            theta_log_wts=[np.empty(0) for _ in blocks], theta_log_ratio=[np.empty(0) for _ in blocks],
            rho_pool=np.empty((0, S)), rho_log_wts=np.empty(0), rng=rng, betas=(), iteration=0, objective=None)

    def accumulate(pool, new):
        return new if fresh else (np.vstack if np.ndim(new) > 1 else np.concatenate)([pool, new])

    def step(s):
        rng, Ks, beta, rho, A = s.rng, s.Ks, s.beta, s.rho, s.A
        S = Ks.shape[0]
        K = MK.combine(Ks, beta, model.rule)
        W, Ls = MK.w_posterior(K, K @ K, s.Y, A)
        Y, logZ = MK.cone_moments(K @ W, onehot)
        bound = lower_bound(K, W, Ls, A, logZ)
        if callback is not None:
            callback(s.iteration, {"W": W, "Ls": Ls, "beta": np.array(beta, copy=True), "Ks": Ks.copy()})
        if fix_alpha is None:
            w2 = W**2
            if exact_alpha:
                for c in range(C):
                    w2[:, c] += MK.diag_cov(Ls[c])
            A = (2.0 * tau + 1.0) / (2.0 * nu + w2)     # eq. 4.23
        pool, pool_logq, log_wts = s.pool, s.pool_logq, s.log_wts
        if learn_beta:
            new = prior_beta_draws(model, rng, is_samples, S, rho)
            logq = np.array([dirichlet(rho).logpdf(b / b.sum()) for b in new]) if model.infer_rho \
                else np.zeros(len(new))
            pool, pool_logq = accumulate(pool, new), accumulate(pool_logq, logq)
            log_wts = is_log_weights(model, pool, Ks, W, Y)
            if model.infer_rho:          # prior at the current rho~ over the proposal each draw came from
                log_wts = log_wts + np.array([dirichlet(rho).logpdf(b / b.sum()) for b in pool]) - pool_logq
            beta = normalised(log_wts) @ pool
        rho_pool, rho_log_wts = s.rho_pool, s.rho_log_wts
        if model.infer_rho:
            rho_pool = accumulate(rho_pool, positive_gamma(rng, model.lam, model.mu, (is_samples, S)))
            rho_log_wts = np.array([dirichlet(r).logpdf(beta / beta.sum()) for r in rho_pool])   # 4.28
            rho = normalised(rho_log_wts) @ rho_pool
        theta, theta_pools, theta_log_wts, theta_log_ratio = s.theta, s.theta_pools, s.theta_log_wts, s.theta_log_ratio
        for j, (i, sl, Xs) in enumerate(blocks):
            new, ratio = theta_proposal_draws(rng, is_samples, theta[sl], model.omega, model.phi, theta_proposal)
            theta_pools[j] = accumulate(theta_pools[j], new)
            theta_log_ratio[j] = accumulate(theta_log_ratio[j], ratio)
            theta_log_wts[j] = (theta_log_weights(model, theta_pools[j], Xs, i, Ks, beta, W, Y)   # 4.25
                                + theta_log_ratio[j])
            theta[sl] = normalised(theta_log_wts[j]) @ theta_pools[j]                       # 4.26
            Ks[i] = MK.rbf_gram_batch(Xs, Xs, theta[sl])
        change = np.inf if s.objective is None else abs(bound - s.objective) / abs(s.objective)
        state = VBState(W, Ls, Y, A, beta, Ks, theta, rho, pool, pool_logq, log_wts, theta_pools, theta_log_wts,
                        theta_log_ratio, rho_pool, rho_log_wts, rng, s.betas + (beta.copy(),), s.iteration + 1,
                        bound)
        return state, VBInfo(bound, change)

    return Algorithm(init, step)


def vb_fit_state(model, data, *, rng: np.random.Generator, max_iter=100, tol=1e-3, is_samples=200, is_pool="accumulate",
                 exact_alpha=False, fix_alpha=None, theta_proposal="prior", progress=False,
                 callback=None, owner: str = "approximation") -> VBFit:
    """Run Algorithm 3: the final variational parameters, the bound trace and the importance-sampling pools.
    ``rng``: the generator of the importance samples (the backend's: the root stream of its run context);
    ``owner`` names the backend in errors.
    ``callback(iteration, state)``, if given, sees Q(W) after each iteration's W step: a dict with ``W``,
    ``Ls`` and the ``beta``, ``Ks`` (copies) it was computed under (used by the benchmark's running test error)."""
    algorithm = vb_iterations(model, data, is_samples=is_samples, is_pool=is_pool, exact_alpha=exact_alpha,
                              fix_alpha=fix_alpha, theta_proposal=theta_proposal, callback=callback)
    # many N x N factorisations: BLAS worker threads only contend at these sizes (inference._blas)
    with one_blas_thread(data.n):
        run = iterate(algorithm, rng, max_iter=max_iter, tol=tol, progress=progress, desc="vb",
                      owner=owner)
    s = run.state
    # final Q(W) at the final A, beta
    K = MK.combine(s.Ks, s.beta, model.rule)
    W, Ls = MK.w_posterior(K, K @ K, s.Y, s.A)
    return VBFit(W=W, Ls=Ls, A=s.A, Y=s.Y, beta=s.beta, pool=s.pool, log_wts=s.log_wts, bound=run.trace,
                 beta_trace=np.asarray(s.betas), iterations=run.iterations, converged=run.converged, K=K, Ks=s.Ks,
                 rng=s.rng, theta=s.theta, theta_pools=s.theta_pools, theta_log_wts=s.theta_log_wts, rho=s.rho,
                 rho_pool=s.rho_pool, rho_log_wts=s.rho_log_wts)


def vb_predictive(model, state, Ks_test):
    """The thesis's VB predictive (4.33): E_u prod_{j != i} Phi[(u nu_i + m_i - m_j) / nu_j] with
    m_c = K*^T w~_c (4.34 simplified by the push-through identity) and nu_c = sqrt(1 + k*^T V_c k*), the
    standard deviation (erratum 7). ``Ks_test`` (S, N, n*) at theta~ (``state.theta`` when inferred);
    returns (n*, C) probabilities."""
    Kt = MK.combine(Ks_test, state.beta, model.rule)
    M = Kt.T @ state.W
    C = M.shape[1]
    nu = np.empty_like(M)
    for c in range(C):
        v = sla.solve_triangular(state.Ls[c], Kt, lower=True, check_finite=False)
        nu[:, c] = np.sqrt(1.0 + np.sum(v**2, axis=0))
    return np.exp(MK.log_class_probs(M, nu))


@register("vb", kind="approximation", family="pmkl", options=OPTIONS, defaults=APPROXIMATION_DEFAULTS,
          memory=MK.memory(10),
          description="VBpMKL: mean-field VB with importance sampling for beta, Theta and rho (Algorithm 3)")
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """VBpMKL (Algorithm 3); draws are i.i.d. from the final Q."""
    timer = Timer()
    st = vb_fit_state(model, data, rng=ctx.numpy_rng(), progress=ctx.progress, owner=ctx.owner, **opts)
    N = st.W.shape[0]
    others, fixed, info, group = _other_factors(model, st, model.source_list(data))
    q = MK.w_gaussian(st.W, st.Ls, np.arange(N), N, fixed=fixed, others=others,
                      objective={"lower_bound": st.bound}, objective_name="lower_bound",
                      iterations=st.iterations, converged=bool(st.converged))
    return approximation_fit(model, data, q, ctx=ctx, draws=draws, chains=chains, timing={"tune": timer()},
                             limit=f"{opts['max_iter']} iterations",
                             info={"lower_bound": float(st.bound[-1]), **info},
                             extra_groups={IMPORTANCE_GROUP: group})


def _other_factors(model, st, sources):
    """The factors of Q besides Q(W): ``others(rng, w_draws)`` draws, with each draw of W, log alpha from Q(A)
    (Gamma(tau + 1/2, nu + w~^2 / 2), 4.22) and beta, theta, rho from their weighted pools; ``fixed`` holds beta
    for the rules without free weights. Also the effective sample sizes of the pools' weights (for ``info``) and
    the means of Q(beta), Q(Theta), Q(rho) (the ``importance`` group)."""
    N, C = st.W.shape
    shape, rate = model.tau + 0.5, model.nu + 0.5 * st.W ** 2
    coords = {"source": [s.name for s in sources]}
    pools, fixed, info = [], {}, {"is_ess": None}          # pools: (name, members, weights, columns of the draw)
    group = {"beta_mean": xr.DataArray(np.asarray(st.beta, float), dims=("source",), coords=coords)}
    if st.pool.shape[0]:
        w = normalised(st.log_wts)
        pools.append(("beta", st.pool, w, slice(None)))
        info["is_ess"] = is_ess(w)
    else:
        fixed["beta"] = np.asarray(st.beta, float)
    if model.infer_theta:
        names = [s.name for s in sources if s.kernel == "rbf"]
        info["theta_is_ess"] = {}
        for (_, sl), members, lw, name in zip(MK.theta_layout(sources), st.theta_pools, st.theta_log_wts, names):
            w = normalised(lw)
            pools.append(("theta", members, w, sl))
            info["theta_is_ess"][name] = is_ess(w)
        group["theta_mean"] = xr.DataArray(np.asarray(st.theta, float), dims=("kernel_param",),
                                           coords={"kernel_param": MK.theta_labels(sources)})
    if model.infer_rho:
        w = normalised(st.rho_log_wts)
        pools.append(("rho", st.rho_pool, w, slice(None)))
        info["rho_is_ess"] = is_ess(w)
        group["rho_mean"] = xr.DataArray(np.asarray(st.rho, float), dims=("source",), coords=coords)
    n_theta = 0 if st.theta is None else st.theta.size

    def others(rng, w_draws):
        n = len(w_draws)
        out = {"log_alpha": np.log(np.clip(rng.gamma(shape, 1.0 / rate, (n, N, C)), 1e-300, None))}
        if model.infer_theta:
            out["theta"] = np.empty((n, n_theta))
        for name, members, w, columns in pools:
            picked = members[rng.choice(len(members), size=n, p=w)]
            if name == "theta":
                out["theta"][:, columns] = picked
            else:
                out[name] = picked
        return out

    return others, fixed, info, xr.Dataset(group)
