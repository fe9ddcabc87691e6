"""``vb``: VBpMKL, the thesis's Algorithm 3 (Damoulas ch. 4, App. B).

Mean field Q(Y) Q(W) Q(A) Q(beta); one iteration:
    w~_c = V_c K y~_c,  V_c = (K K + A~_c)^-1                     (4.19-4.20; K at beta~)
    y~_nc, c != t_n, and y~_n,t_n from the cone-truncated moments  (4.15-4.16, Gauss-Hermite in log space)
    alpha~_nc = (2 tau + 1) / (2 nu + w~_nc^2)                     (4.23; Algorithm 3 line 6 has a spurious ^-1,
                                                                    erratum 4; ``exact_alpha`` uses E[w^2])
    beta~ = sum_i W(beta^i) beta^i, beta^i from the prior          (4.27; weights in log space)
The importance-sampling pool accumulates ``is_samples`` new prior draws per iteration and all weights are
recomputed at the current y~, w~ (B.9's "samples taken until now", erratum 11); ``is_pool="fresh"`` draws a
new pool every iteration instead. The lower bound B.23 (A = precision, erratum 6) is traced after every
iteration; it conditions on A and beta, so it can fall slightly when they move. Stopping rule of the thesis:
relative increase below ``tol`` (0.1 %) or ``max_iter`` (100) iterations.

The fit's draws are i.i.d. from the final Q: W from prod_c N(w~_c, V_c), log alpha from Q(A)
(Gamma(tau + 1/2, nu + w~^2 / 2), 4.22), beta resampled from the weighted pool (convex, binary, weighted
product) or fixed (mean, product).
"""
from __future__ import annotations

import numpy as np
from scipy import linalg as sla

from bayeszoo.inference._idata import make_fit
from bayeszoo.inference._options import Timer, check_options, positive
from bayeszoo.progress import progress_bar
from bayeszoo.registry import register

from . import _common as MK

OPTIONS = {"max_iter": 100, "tol": 1e-3, "is_samples": 200, "is_pool": "accumulate", "exact_alpha": False,
           "fix_alpha": None}


def prior_beta_draws(model, rng, n: int, S: int):
    """n draws of beta from the rule's prior (the importance-sampling proposal of 4.27)."""
    if model.rule == "convex":
        return np.clip(rng.dirichlet(np.full(S, model.rho), size=n), 1e-300, None)
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
    out = np.empty(pool.shape[0])
    if model.rule in ("convex", "binary"):
        KsW = np.einsum("snm,mc->snc", Ks, W)
        for a in range(0, pool.shape[0], chunk):
            M = np.einsum("is,snc->inc", pool[a:a + chunk], KsW)
            out[a:a + chunk] = -0.5 * np.sum((Y - M) ** 2, axis=(1, 2))
        return out
    for a in range(0, pool.shape[0], chunk // 8 or 1):
        b = pool[a:a + (chunk // 8 or 1)]
        M = MK.combine(Ks, b, model.rule) @ W
        out[a:a + len(b)] = -0.5 * np.sum((Y - M) ** 2, axis=(1, 2))
    return out


def diag_cov(L):
    """diag(V) for V = (L L^T)^-1, from the triangular inverse (LAPACK trtri, N^3 / 3 flops)."""
    Linv, info = sla.lapack.dtrtri(L, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError("singular Cholesky factor")
    return np.sum(Linv**2, axis=0)


def lower_bound(K, W, Ls, A, logZ):
    """B.23: NC/2 + 1/2 sum log|V_c| + sum log Z_n - 1/2 sum Tr[A_c V_c] - 1/2 sum w~_c^T A_c w~_c
    + 1/2 sum log|A_c| - 1/2 sum_c sum_n k_n^T V_c k_n, where sum_n k_n^T V_c k_n = Tr(V_c K K) = N - Tr(A_c V_c)
    because V_c^-1 = K K + A_c (so only diag(V_c) is needed)."""
    N, C = W.shape
    total = 0.5 * N * C + float(np.sum(logZ))
    for c in range(C):
        tr_AV = float(np.sum(A[:, c] * diag_cov(Ls[c])))
        total += -np.sum(np.log(np.diag(Ls[c])))
        total += -0.5 * tr_AV
        total += -0.5 * np.sum(A[:, c] * W[:, c] ** 2) + 0.5 * np.sum(np.log(A[:, c]))
        total += -0.5 * (N - tr_AV)
    return total


def vb_fit_state(model, data, *, max_iter=100, tol=1e-3, is_samples=200, is_pool="accumulate",
                 exact_alpha=False, fix_alpha=None, seed=0, progress=False):
    """Run Algorithm 3; returns the final variational parameters, the bound trace and the IS pool."""
    rng = np.random.default_rng(np.random.SeedSequence([0 if seed is None else int(seed), 777]))
    Ks = model.train_kernels(data)
    S, N = Ks.shape[:2]
    C = model.n_classes(data)
    onehot = np.eye(C, dtype=bool)[data.y.astype(int)]
    tau, nu = float(model.tau), float(model.nu)
    learn_beta = model.rule in ("convex", "binary", "wproduct")
    beta = model.default_beta(S) if model.rule != "binary" else np.ones(S)
    A = np.full((N, C), 1.0 if fix_alpha is None else float(fix_alpha))
    Y = np.where(onehot, 1.0, 0.0)                           # "aligned" initialisation (ch. 5)
    pool = np.empty((0, S))
    log_wts = np.empty(0)
    bounds, betas = [], []
    converged = False
    with progress_bar(total=max_iter, desc="vb", disable=not progress) as bar:
        for it in range(max_iter):
            K = MK.combine(Ks, beta, model.rule)
            W, Ls = MK.w_posterior(K, K @ K, Y, A)
            Y, logZ = MK.cone_moments(K @ W, onehot)
            bounds.append(lower_bound(K, W, Ls, A, logZ))
            if fix_alpha is None:
                w2 = W**2
                if exact_alpha:
                    for c in range(C):
                        w2[:, c] += diag_cov(Ls[c])
                A = (2.0 * tau + 1.0) / (2.0 * nu + w2)     # eq. 4.23
            if learn_beta:
                new = prior_beta_draws(model, rng, is_samples, S)
                pool = new if is_pool == "fresh" else np.vstack([pool, new])
                log_wts = is_log_weights(model, pool, Ks, W, Y)
                wts = np.exp(log_wts - log_wts.max())
                wts /= wts.sum()
                beta = wts @ pool
            betas.append(beta.copy())
            bar.update()
            if it > 0 and abs(bounds[-1] - bounds[-2]) < tol * abs(bounds[-2]):
                converged = True
                break
    # final Q(W) at the final A, beta
    K = MK.combine(Ks, beta, model.rule)
    W, Ls = MK.w_posterior(K, K @ K, Y, A)
    return {"W": W, "Ls": Ls, "A": A, "Y": Y, "beta": beta, "pool": pool, "log_wts": log_wts,
            "bound": np.asarray(bounds), "beta_trace": np.asarray(betas), "iterations": len(bounds),
            "converged": converged, "K": K, "Ks": Ks, "rng": rng}


def vb_predictive(model, state, Ks_test):
    """The thesis's VB predictive (4.33): E_u prod_{j != i} Phi[(u nu_i + m_i - m_j) / nu_j] with
    m_c = K*^T w~_c (4.34 simplified by the push-through identity) and nu_c = sqrt(1 + k*^T V_c k*), the
    standard deviation (erratum 7). ``Ks_test`` (S, N, n*); returns (n*, C) probabilities."""
    Kt = MK.combine(Ks_test, state["beta"], model.rule)
    M = Kt.T @ state["W"]
    C = M.shape[1]
    nu = np.empty_like(M)
    for c in range(C):
        v = sla.solve_triangular(state["Ls"][c], Kt, lower=True, check_finite=False)
        nu[:, c] = np.sqrt(1.0 + np.sum(v**2, axis=0))
    return np.exp(MK.log_class_probs(M, nu))


@register("vb", kind="approximation", family="mkl",
          description="VBpMKL: mean-field VB with importance sampling for beta (Algorithm 3)")
def run(model, data, *, draws, tune, chains, seed, progress, **options):
    """VBpMKL (Algorithm 3); draws are i.i.d. from the final Q."""
    timer = Timer()
    opts = check_options("vb", options, OPTIONS)
    positive("max_iter", opts["max_iter"], integer=True)
    positive("tol", opts["tol"])
    positive("is_samples", opts["is_samples"], integer=True)
    if opts["is_pool"] not in ("accumulate", "fresh"):
        raise ValueError(f"option is_pool must be 'accumulate' or 'fresh', got {opts['is_pool']!r}")
    if opts["fix_alpha"] is not None:
        positive("fix_alpha", opts["fix_alpha"])
    st = vb_fit_state(model, data, seed=seed, progress=progress, **opts)
    t_opt = timer()
    rng = st["rng"]
    N, C = st["W"].shape
    z = rng.standard_normal((chains, draws, C, N))
    Wd = np.empty((chains, draws, N, C))
    for c in range(C):
        Wd[..., c] = st["W"][:, c] + sla.solve_triangular(st["Ls"][c], z[..., c, :].reshape(-1, N).T, lower=True,
                                                           trans="T", check_finite=False).T.reshape(chains, draws, N)
    shape, rate = model.tau + 0.5, model.nu + 0.5 * st["W"] ** 2
    la = np.log(np.clip(rng.gamma(shape, 1.0 / rate, (chains, draws, N, C)), 1e-300, None))
    S = st["beta"].shape[0]
    if st["pool"].shape[0]:
        wts = np.exp(st["log_wts"] - st["log_wts"].max())
        idx = rng.choice(st["pool"].shape[0], size=(chains, draws), p=wts / wts.sum())
        bd = st["pool"][idx]
    else:
        bd = np.broadcast_to(st["beta"], (chains, draws, S)).copy()
    ess_is = float(1.0 / np.sum((wts / wts.sum()) ** 2)) if st["pool"].shape[0] else None
    warn = [] if st["converged"] else [f"vb did not converge in {opts['max_iter']} iterations"]
    info = {"iterations": st["iterations"], "converged": st["converged"], "warnings": warn,
            "lower_bound": float(st["bound"][-1]), "beta_mean": st["beta"].tolist(), "is_ess": ess_is}
    return make_fit(model, data, "vb", "approximation", {"W": Wd, "log_alpha": la, "beta": bd},
                    timing={"compile": 0.0, "tune": t_opt, "sample": timer() - t_opt},
                    objective={"lower_bound": st["bound"]}, info=info)
