"""``gibbs``: the thesis's Algorithm 1 for pMKL (Damoulas §3.4.1, App. A), vectorised over chains in NumPy.

One sweep, per chain:
    beta            convex: Metropolis-Hastings with a Dirichlet(kappa beta + 1/2) proposal (Hastings ratio
                    included); weighted product: random walk on log beta_s, log pi_s, log chi_s (Jacobians
                    included) (A.3-A.5); binary: exact Gibbs for each beta_i (A.1.3). The likelihood term is
                    p(Y | beta, A) = prod_c N(y_c | 0, I + K A_c^-1 K) with W integrated out    (A.6 with
                    Omega^-1, erratum 8), so (beta, W) is one block; ``beta_step="conditional"`` uses the
                    thesis's prod N(y_nc | w_c^T k_n^beta, 1) at the current W instead (A.1), which mixes far
                    more slowly because W is tied to the beta it was drawn under (measured in the tests).
    W | Y, A, beta  prod_c N(V_c K y_c, V_c), V_c^-1 = K K + A_c                                (3.22)
    Y | W, beta     one Gibbs sweep inside each cone with exact truncated-normal draws           (3.23)
    A | W           alpha_nc ~ Gamma(tau + 1/2, nu + w_nc^2 / 2)                                  (3.24)
The MH proposal scale (kappa, or the log-scale step) is adapted during ``tune`` towards an acceptance rate of
0.2-0.4 and then frozen. Chains start from beta drawn from the prior, alpha = 1 and Y "aligned" with the
labels (y_n,t_n = 1, others 0; erratum 17). Array ops (Y, A, beta proposals, the batched Cholesky factors of
K K + A_c) run over all chains at once; the triangular solves loop over chain x class. One NumPy Generator
seeded by ``seed`` drives everything: same seed, same draws.

Options: ``thin`` (1), ``beta_steps`` (MH steps for beta per sweep, 1; "few steps, even one" per the thesis),
``beta_step`` ("marginal" or "conditional", see above),
``fix_alpha`` (hold every alpha_nc at this value), ``fix_beta`` (hold beta at these weights).
"""
from __future__ import annotations

import numpy as np
from scipy import linalg as sla
from scipy.special import gammaln

from bayeszoo.inference._idata import make_fit
from bayeszoo.inference._options import Timer, check_options, positive
from bayeszoo.progress import progress_bar
from bayeszoo.registry import register

from . import _common as MK

OPTIONS = {"thin": 1, "beta_steps": 1, "beta_step": "marginal", "fix_alpha": None, "fix_beta": None}


# -------------------------------------------------------------------------------- full conditionals
def w_draw(rng, K, KK, Y, A):
    """W | Y, A for every chain: K, KK (ch, N, N), Y, A (ch, N, C) -> (ch, N, C) (eq. 3.22)."""
    ch, N, C = Y.shape
    P = np.repeat(KK[:, None], C, axis=1)                               # (ch, C, N, N)
    idx = np.arange(N)
    P[:, :, idx, idx] += np.swapaxes(A, 1, 2)
    try:
        Ls = np.linalg.cholesky(P)
    except np.linalg.LinAlgError:
        Ls = np.stack([np.stack([MK.chol_spd(P[k, c]) for c in range(C)]) for k in range(ch)])
    rhs = np.einsum("knm,knc->kcm", K, Y)                                # K^T y_c (K symmetric)
    z = rng.standard_normal((ch, C, N))
    W = np.empty((ch, N, C))
    for k in range(ch):
        for c in range(C):
            v = sla.solve_triangular(Ls[k, c], rhs[k, c], lower=True, check_finite=False)
            W[k, :, c] = sla.solve_triangular(Ls[k, c], v + z[k, c], lower=True, trans="T", check_finite=False)
    return W


def alpha_params(W, tau, nu):
    """Shape and rate of alpha_nc | w_nc: Gamma(tau + 1/2, nu + w_nc^2 / 2) (eq. 3.24)."""
    return tau + 0.5, nu + 0.5 * W * W


def loglik_y(Y, KsW, beta, rule, Ks=None, W=None):
    """sum_{n,c} log N(y_nc | (K_beta w_c)_n, 1) for each chain; linear rules use the per-source K_s W."""
    if rule in ("mean", "convex", "binary"):
        M = np.einsum("ks,ksnc->knc", beta, KsW)
    else:
        M = np.einsum("knm,kmc->knc", MK.combine(Ks, beta, rule), W)
    R = Y - M
    return -0.5 * np.sum(R * R, axis=(1, 2)) - 0.5 * R[0].size * MK.LOG_2PI


def log_dirichlet(beta, rho):
    """log Dir(beta | rho 1) for each row of beta (ch, S)."""
    S = beta.shape[-1]
    return gammaln(S * rho) - S * gammaln(rho) + (rho - 1.0) * np.sum(np.log(beta), -1)


def log_dirichlet_general(x, a):
    """log Dir(x | a) row-wise, a of the same shape as x."""
    return gammaln(a.sum(-1)) - gammaln(a).sum(-1) + np.sum((a - 1.0) * np.log(x), -1)


def collapsed_loglik(Y, K, A):
    """log p(Y | beta, A) for every chain, W integrated out (A.6 corrected); K (ch, N, N)."""
    return np.array([log_collapsed_y(Y[k], K[k], A[k]) for k in range(Y.shape[0])])


def convex_beta_mh(rng, beta, kappa, Y, rho, *, KsW=None, Ks=None, A=None):
    """One MH step for beta on the simplex with an asymmetric Dirichlet(kappa beta + 1/2) proposal (Hastings
    ratio included). Target: Dir(beta | rho) times prod N(y_nc | w_c^T k_n^beta, 1) at the current W (A.1,
    ``KsW`` given) or times p(Y | beta, A) with W integrated out (``Ks`` and ``A`` given)."""
    a_fwd = kappa[:, None] * beta + 0.5
    prop = np.stack([rng.dirichlet(a) for a in a_fwd])
    prop = np.clip(prop, 1e-300, None)
    prop /= prop.sum(-1, keepdims=True)
    a_bwd = kappa[:, None] * prop + 0.5
    if KsW is not None:
        ll_prop, ll_cur = loglik_y(Y, KsW, prop, "convex"), loglik_y(Y, KsW, beta, "convex")
    else:
        ll_prop = collapsed_loglik(Y, MK.combine(Ks, prop, "convex"), A)
        ll_cur = collapsed_loglik(Y, MK.combine(Ks, beta, "convex"), A)
    log_r = (ll_prop + log_dirichlet(prop, rho) - ll_cur - log_dirichlet(beta, rho)
             + log_dirichlet_general(beta, a_bwd) - log_dirichlet_general(prop, a_fwd))
    accept = np.log(rng.random(beta.shape[0])) < log_r
    return np.where(accept[:, None], prop, beta), accept


def log_collapsed_y(Y, K, A):
    """log p(Y | beta, A) with W integrated out: sum_c log N(y_c | 0, I + K A_c^-1 K) (A.6 corrected).
    All classes in one batched Cholesky (many small LAPACK calls are slow when the cores are shared)."""
    N, C = Y.shape
    Omega = np.eye(N) + (K[None] / A.T[:, None, :]) @ K.T                  # (C, N, N)
    try:
        L = np.linalg.cholesky(Omega)
    except np.linalg.LinAlgError:
        L = np.stack([MK.chol_spd(O) for O in Omega])
    v = np.linalg.solve(L, Y.T[..., None])[..., 0]
    logdet = np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)))
    return float(-0.5 * np.sum(v * v) - logdet - 0.5 * N * C * MK.LOG_2PI)


def binary_beta_gibbs(rng, beta, Y, Ks, A):
    """Exact Gibbs update of each beta_i in {0, 1} in turn, W integrated out (A.1.3). Prior: Bernoulli(1/2)
    for each kernel, conditioned on at least one kernel being selected (beta = 0 would leave no kernel, K = 0)."""
    beta = beta.copy()
    S = Ks.shape[0]
    for k in range(beta.shape[0]):
        for i in range(S):
            logp = np.empty(2)
            for val in (0, 1):
                beta[k, i] = val
                if beta[k].sum() == 0:
                    logp[val] = -np.inf
                    continue
                logp[val] = log_collapsed_y(Y[k], np.tensordot(beta[k], Ks, axes=1), A[k])
            p1 = 1.0 / (1.0 + np.exp(logp[0] - logp[1]))
            beta[k, i] = float(rng.random() < p1)
    return beta


def wproduct_mh(rng, beta, pi, chi, step, Y, Ks, W, mu, lam, A=None):
    """Random-walk MH on log beta_s (A.3; at the current W, or with W integrated out when ``A`` is given),
    then on log pi_s and log chi_s (A.4-A.5), all sources jointly."""
    def log_gamma(x, a, b):
        return np.sum(a * np.log(b) - gammaln(a) + (a - 1.0) * np.log(x) - b * x, -1)

    ch, S = beta.shape
    prop = beta * np.exp(step[:, None] * rng.standard_normal((ch, S)))
    if A is None:
        ll_prop, ll_cur = loglik_y(Y, None, prop, "wproduct", Ks, W), loglik_y(Y, None, beta, "wproduct", Ks, W)
    else:
        ll_prop = collapsed_loglik(Y, MK.combine(Ks, prop, "wproduct"), A)
        ll_cur = collapsed_loglik(Y, MK.combine(Ks, beta, "wproduct"), A)
    log_r = (ll_prop + log_gamma(prop, pi, chi) + np.log(prop).sum(-1)
             - ll_cur - log_gamma(beta, pi, chi) - np.log(beta).sum(-1))
    acc_b = np.log(rng.random(ch)) < log_r
    beta = np.where(acc_b[:, None], prop, beta)
    # pi and chi: exponential priors, target in log space (Jacobian log x)
    for which in ("pi", "chi"):
        cur = pi if which == "pi" else chi
        new = cur * np.exp(0.5 * rng.standard_normal((ch, S)))
        rate = mu if which == "pi" else lam
        lp_new = log_gamma(beta, new, chi) if which == "pi" else log_gamma(beta, pi, new)
        lp_cur = log_gamma(beta, pi, chi)
        log_r = lp_new - rate * new.sum(-1) + np.log(new).sum(-1) - lp_cur + rate * cur.sum(-1) - np.log(cur).sum(-1)
        acc = np.log(rng.random(ch)) < log_r
        if which == "pi":
            pi = np.where(acc[:, None], new, pi)
        else:
            chi = np.where(acc[:, None], new, chi)
    return beta, pi, chi, acc_b


# ---------------------------------------------------------------------------------------- the sampler
def gibbs_sample(model, data, *, draws, tune, chains, seed, thin=1, beta_steps=1, beta_step="marginal",
                 fix_alpha=None, fix_beta=None, progress=False):
    """Run ``chains`` chains of Algorithm 1; returns arrays (chains, draws, ...) and timings."""
    timer = Timer()
    rng = np.random.default_rng(np.random.SeedSequence([0 if seed is None else int(seed), 4242]))
    Ks = model.train_kernels(data)
    S, N = Ks.shape[:2]
    C = model.n_classes(data)
    t = data.y.astype(int)
    onehot = np.eye(C, dtype=bool)[t]
    rule, tau, nu = model.rule, float(model.tau), float(model.nu)
    free_beta = rule in ("convex", "binary", "wproduct") and fix_beta is None

    # starting points
    if fix_beta is not None:
        beta = np.tile(np.asarray(fix_beta, float), (chains, 1))
    elif rule == "convex":
        beta = rng.dirichlet(np.full(S, model.rho), size=chains)
    elif rule == "binary":
        beta = (rng.random((chains, S)) < 0.5).astype(float)
        beta[beta.sum(1) == 0, 0] = 1.0
    elif rule == "wproduct":
        beta = rng.gamma(1.0, 1.0, (chains, S))
    else:
        beta = np.tile(model.default_beta(S), (chains, 1))
    beta = np.clip(beta, 1e-12, None) if rule in ("convex", "wproduct") else beta
    pi = np.ones((chains, S))
    chi = np.ones((chains, S))
    A = np.full((chains, N, C), 1.0 if fix_alpha is None else float(fix_alpha))
    Y = np.where(onehot, 1.0, 0.0)[None].repeat(chains, 0)
    W = np.zeros((chains, N, C))
    kappa = np.full(chains, 100.0 * S)
    step = np.full(chains, 0.3)

    keep_W = np.empty((chains, draws, N, C))
    keep_la = np.empty((chains, draws, N, C))
    keep_b = np.empty((chains, draws, S))
    acc_trace = np.zeros((chains, draws))
    t_tune = 0.0
    n_sweeps = tune + draws * thin
    window_acc = np.zeros(chains)
    window = 0
    with progress_bar(total=n_sweeps, desc="gibbs", disable=not progress) as bar:
        K = MK.combine(Ks, beta, rule)                                        # (ch, N, N)
        KK = K @ K
        for sweep in range(n_sweeps):
            acc = np.zeros(chains)
            if free_beta:
                for _ in range(beta_steps):
                    marginal = beta_step == "marginal"
                    if rule == "convex":
                        if marginal:
                            beta, a = convex_beta_mh(rng, beta, kappa, Y, model.rho, Ks=Ks, A=A)
                        else:
                            beta, a = convex_beta_mh(rng, beta, kappa, Y, model.rho,
                                                     KsW=np.einsum("snm,kmc->ksnc", Ks, W))
                    elif rule == "wproduct":
                        beta, pi, chi, a = wproduct_mh(rng, beta, pi, chi, step, Y, Ks, W, model.mu, model.lam,
                                                       A=A if marginal else None)
                    else:
                        beta, a = binary_beta_gibbs(rng, beta, Y, Ks, A), np.ones(chains)
                    acc += a / beta_steps
                K = MK.combine(Ks, beta, rule)
                KK = K @ K
            W = w_draw(rng, K, KK, Y, A)
            M = K @ W
            Y = MK.cone_gibbs_sweep(rng, Y, M, onehot)
            if fix_alpha is None:
                shape, rate = alpha_params(W, tau, nu)
                A = rng.gamma(shape, 1.0 / rate)
                A = np.clip(A, 1e-300, None)
            if sweep < tune:
                window_acc += acc
                window += 1
                if window == 20 and rule in ("convex", "wproduct"):
                    rate_acc = window_acc / window
                    kappa = np.where(rate_acc < 0.2, kappa * 1.6, np.where(rate_acc > 0.4, kappa / 1.6, kappa))
                    step = np.where(rate_acc < 0.2, step / 1.6, np.where(rate_acc > 0.4, step * 1.6, step))
                    window_acc[:] = 0.0
                    window = 0
                if sweep == tune - 1:
                    t_tune = timer()
            elif (sweep - tune + 1) % thin == 0:
                j = (sweep - tune) // thin
                keep_W[:, j], keep_la[:, j], keep_b[:, j] = W, np.log(A), beta
                acc_trace[:, j] = acc
            bar.update()
    total = timer()
    return {"W": keep_W, "log_alpha": keep_la, "beta": keep_b, "accept_beta": acc_trace,
            "timing": {"compile": 0.0, "tune": t_tune, "sample": total - t_tune},
            "kappa": kappa, "step": step, "sweeps": n_sweeps}


def check_gibbs_options(model, data, opts):
    positive("thin", opts["thin"], integer=True)
    positive("beta_steps", opts["beta_steps"], integer=True)
    if opts["beta_step"] not in ("marginal", "conditional"):
        raise ValueError(f"option beta_step must be 'marginal' or 'conditional', got {opts['beta_step']!r}")
    if opts["fix_alpha"] is not None:
        positive("fix_alpha", opts["fix_alpha"])
    if opts["fix_beta"] is not None:
        S = len(model.source_list(data))
        fb = np.asarray(opts["fix_beta"], float)
        if fb.shape != (S,) or np.any(~np.isfinite(fb)) or np.any(fb < 0):
            raise ValueError(f"option fix_beta must be {S} non-negative weights, got {opts['fix_beta']!r}")


@register("gibbs", kind="mcmc", family="mkl",
          description="Gibbs sampler with auxiliary variables and Metropolis sub-steps (Algorithm 1)")
def run(model, data, *, draws, tune, chains, seed, progress, **options):
    """Algorithm 1: W, cone-truncated Y, A by exact conditionals; beta by MH (convex, weighted product) or
    collapsed Gibbs (binary)."""
    opts = check_options("gibbs", options, OPTIONS)
    check_gibbs_options(model, data, opts)
    res = gibbs_sample(model, data, draws=draws, tune=tune, chains=chains, seed=seed, progress=progress,
                       **opts)
    info = {"sweeps": res["sweeps"], "thin": opts["thin"], "converged": True, "warnings": [],
            "beta_acceptance": float(np.mean(res["accept_beta"])) if model.rule in ("convex", "wproduct")
            else None}
    return make_fit(model, data, "gibbs", "mcmc", {"W": res["W"], "log_alpha": res["log_alpha"],
                                                   "beta": res["beta"]},
                    timing=res["timing"], sample_stats={"accept_beta": res["accept_beta"]}, info=info)

