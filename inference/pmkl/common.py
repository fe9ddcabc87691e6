"""Numerics and declarations shared by the PMKL backends (Damoulas thesis; digest ``damoulas_mkl.md``).

* One Gibbs sweep inside the cone {y_t > y_j for all j != t} (digest §3.1 option (b)), from exact
  one-dimensional truncated-normal draws.
* Moments of the cone-truncated Gaussian (eqs 4.14-4.16) used by VB and EM.
* W | Y, A (eq. 3.22) and the simplex-constrained QP for beta (eq. 5.10, App. C); the Gaussian prod_c N(w_c, V_c)
  of W as the ``GaussianApproximation`` the approximations hand to ``approximation_fit``.
* What the chapter-5 point estimators (em, map, mrvm1, mrvm2) share: the models they apply to, their check of the
  combination rule, the training log likelihood they trace.

The base kernels and combination rules (:mod:`bayeszoo.numerics.pmkl_kernels`) and the class probabilities by
quadrature (:mod:`bayeszoo.numerics.probit`) are shared with the model and imported here for the backends.
"""
from __future__ import annotations

import numpy as np
from scipy import linalg as sla
from scipy.special import log_ndtr, logsumexp

from bayeszoo.inference.random_draws import truncnorm_above, truncnorm_below
from bayeszoo.inference.approximations import GaussianApproximation
from bayeszoo.numerics.linalg import jittered_cholesky
from bayeszoo.memory_guard import Need, dense
from bayeszoo.numerics.pmkl_kernels import (KERNELS, RULES, Source, base_grams, combine, latent_means,  # noqa: F401
                                            rbf_gram_batch, theta_labels, theta_layout, theta_start)
from bayeszoo.numerics.probit import GH_NODES, gh_rule, log_class_probs, log_class_probs_mc  # noqa: F401

LOG_2PI = float(np.log(2.0 * np.pi))


# ------------------------------------------------------------------------------------- the cone sweep
def cone_gibbs_sweep(rng, Y, Mean, onehot):
    """One Gibbs sweep of Y ~ prod_n N(m_n, I) restricted to the cones {y_n,t_n > y_nj, j != t_n} (eq. 3.23).

    y_nt | y_n,-t ~ N(m_nt, 1) truncated to (max_{j != t} y_nj, inf); then every y_nj, j != t, given y_nt,
    independently N(m_nj, 1) truncated to (-inf, y_nt). Both steps are exact draws from full conditionals,
    so the sweep leaves the cone-truncated Gaussian invariant. Shapes (..., N, C); ``onehot`` bool (N, C).
    """
    others = np.where(onehot, -np.inf, Y).max(-1)
    m_t = np.sum(np.where(onehot, Mean, 0.0), -1)
    y_t = truncnorm_above(rng, m_t, others)
    y_o = truncnorm_below(rng, Mean, y_t[..., None])
    return np.where(onehot, y_t[..., None], y_o)


# ------------------------------------------------------------------------- cone-truncated moments
def cone_moments(M, onehot, n_nodes: int = GH_NODES):
    """Mean of N(m_n, I) truncated to the cone of class t_n, and log Z_n (eqs 4.14-4.16).

    For c != i = t_n: E y_nc = m_nc - E_u{phi(u + m_ni - m_nc) Phi_u^{n,i,c}} / Z_n, and
    E y_ni = m_ni + sum_{c != i} (m_nc - E y_nc). Returns (Ey (N, C), logZ (N,)).
    """
    M = np.asarray(M, dtype=float)
    u, logw = gh_rule(n_nodes)
    m_t = np.sum(np.where(onehot, M, 0.0), -1, keepdims=True)                            # (N, 1)
    d = u[:, None, None] + m_t[None] - M[None]                                             # (K, N, C)
    lphi = log_ndtr(d)
    lphi = np.where(onehot[None], 0.0, lphi)
    total = lphi.sum(-1, keepdims=True)                                                    # (K, N, 1)
    logZ = logsumexp(total[..., 0] + logw[:, None], axis=0)                               # (N,)
    # Phi_u^{n,i,c} = prod_{j != i, c} = total - lphi_c; numerator density phi(u + m_i - m_c)
    lnum = -0.5 * d**2 - 0.5 * LOG_2PI + (total - lphi)
    num = np.exp(logsumexp(lnum + logw[:, None, None], axis=0) - logZ[:, None])          # (N, C)
    Ey_other = M - num
    shift = np.sum(np.where(onehot, 0.0, num), -1)                                        # sum_c (m_c - Ey_c)
    Ey = np.where(onehot, M + shift[:, None], Ey_other)                                   # eq. 4.16 / B.11
    return Ey, logZ


# --------------------------------------------------------------------------------------- W | Y, A
def w_posterior(K, KK, Y, A):
    """Mean (N, C) and Cholesky factors (C, N, N) of W | Y, A: N(V_c K y_c, V_c), V_c^-1 = K K + A_c (eq. 3.22)."""
    N, C = Y.shape
    KY = K.T @ Y
    mean = np.empty((N, C))
    Ls = np.empty((C, N, N))
    for c in range(C):
        L = jittered_cholesky(KK + np.diag(A[:, c]), what=f"K K + A_{c} (the precision of W's class {c})")
        mean[:, c] = sla.cho_solve((L, True), KY[:, c], check_finite=False)
        Ls[c] = L
    return mean, Ls


def diag_cov(L):
    """diag(V) for V = (L L^T)^-1, from the triangular inverse (LAPACK trtri, N^3 / 3 flops)."""
    Linv, info = sla.lapack.dtrtri(L, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError("singular Cholesky factor")
    return np.sum(Linv**2, axis=0)


def w_gaussian(W, Ls, rows, N: int, **fields) -> GaussianApproximation:
    """W (N, C) ~ prod_c N(w_c, V_c) on the ``rows`` (M of them; the others are 0) as a ``GaussianApproximation``:
    ``W`` (M, C) the means there, V_c = (L_c L_c^T)^-1 from the lower factors ``Ls`` (C, M, M). Its variances are
    diag(V_c); it draws w_c = mean + L_c^-T z, z ~ N(0, I), one triangular solve per class (the covariance of W as
    one vector is block diagonal, never formed). ``fields``: the other fields (fixed, objective, ...)."""
    rows = np.asarray(rows)
    C, M = W.shape[1], len(rows)
    mean = np.zeros((N, C))
    mean[rows] = W
    var = np.zeros((N, C))
    for c in range(C):
        var[rows, c] = diag_cov(Ls[c])

    def sampler(rng, n):
        out = np.zeros((n, N, C))
        z = rng.standard_normal((C, M, n))
        for c in range(C):
            noise = sla.solve_triangular(Ls[c], z[c], lower=True, trans="T", check_finite=False)   # (M, n)
            out[:, rows, c] = (W[:, c][:, None] + noise).T
        return out.reshape(n, N * C)

    return GaussianApproximation("W", mean, var=var, sampler=sampler, **fields)


# ------------------------------------------------------------------------------------- beta by QP
def simplex_qp(Omega, f, x0=None, iters: int = 500, tol: float = 1e-12) -> np.ndarray:
    """argmin 1/2 b^T Omega b - b^T f over the probability simplex (eq. 5.10), by projected gradient with the
    exact step 1 / lambda_max(Omega) and Nesterov momentum (Omega is positive semi-definite, S is small)."""
    S = len(f)
    b = np.full(S, 1.0 / S) if x0 is None else project_simplex(np.asarray(x0, float))
    lip = float(np.linalg.eigvalsh(Omega)[-1]) if S > 1 else 1.0
    if S == 1:
        return np.ones(1)
    if lip <= 0:
        return b
    z, t = b.copy(), 1.0
    for _ in range(iters):
        b_new = project_simplex(z - (Omega @ z - f) / lip)
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        z = b_new + (t - 1.0) / t_new * (b_new - b)
        if np.max(np.abs(b_new - b)) < tol:
            b = b_new
            break
        b, t = b_new, t_new
    return b


def project_simplex(v) -> np.ndarray:
    """Euclidean projection onto {b >= 0, sum b = 1} (Held, Wolfe & Crowder)."""
    v = np.asarray(v, float)
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.arange(1, len(v) + 1)
    # the first entry always qualifies (u_1 - (u_1 - 1) = 1); with |v| beyond 1e16 rounding can hide that
    above = np.nonzero(u - css / k > 0)[0]
    rho = above[-1] if above.size else 0
    return np.clip(v - css[rho] / (rho + 1.0), 0.0, None)


def beta_qp_terms(Ks, W, Ytil):
    """Omega (S, S) and f (S,) of the beta QP: m_snc = w_c^T k_sn without beta (App. C, corrected)."""
    # (S, N, C), m_smc = sum_n K_s[n, m] w_nc, as S matrix products (BLAS): einsum's own loop over these indices
    # took most of an EM / VB iteration at N = 400
    Msrc = np.matmul(np.swapaxes(Ks, 1, 2), W)
    flat = Msrc.reshape(Msrc.shape[0], -1)
    return flat @ flat.T, flat @ np.asarray(Ytil, float).ravel()


def gaussian_loglik(Y, Mean) -> float:
    """sum_{n,c} log N(y_nc | m_nc, 1) (eq. 3.8)."""
    R = np.asarray(Y) - np.asarray(Mean)
    return float(-0.5 * np.sum(R * R) - 0.5 * R.size * LOG_2PI)


# --------------------------------------------------------------------------- chapter-5 point estimators
def fixed_kernels(model) -> bool:
    """The point estimators keep theta and rho fixed (ch. 5 conditions on them, Fig. 5.1): they apply only then."""
    return getattr(model, "kernel_params", "fixed") == "fixed" and not getattr(model, "infer_rho", False)


def check_rule(options, model, data, owner):
    """The declared check of a chapter-5 backend: it implements the convex and mean rules only."""
    if model.rule not in ("convex", "mean"):
        raise ValueError(f"{owner} implements chapter 5 of the thesis (convex or mean rule); "
                         f"PMKL(rule={model.rule!r}) is not supported, use gibbs or vb")
    return options


def train_loglik(K, W, y) -> float:
    """sum_n log P(t_n | W, k_n) on the training objects (eq. 3.11 by quadrature): the point estimators' trace."""
    lp = log_class_probs(K @ W)
    return float(np.sum(lp[np.arange(len(y)), y]))


def conditional_w(model, data, W, Ls, A, beta, *, active=None, **fields) -> GaussianApproximation:
    """The point estimators' Fit: W ~ prod_c N(w_c, V_c) on the ``active`` rows (all when None; the others 0) at
    the estimates (:func:`w_gaussian`), log alpha (log 1e12 on the pruned rows) and beta fixed at them; ``fields``
    the remaining fields (objective, iterations, converged)."""
    from bayeszoo.models.pmkl import LOG_ALPHA_PRUNED

    N = data.n
    active = np.arange(N) if active is None else np.asarray(active)
    log_alpha = np.full((N, W.shape[1]), LOG_ALPHA_PRUNED)
    log_alpha[active] = np.log(A)
    return w_gaussian(W, Ls, active, N, fixed={"log_alpha": log_alpha, "beta": np.asarray(beta, float)}, **fields)


# ------------------------------------------------------------------------------------- memory
MEMORY_ADVICE = ("fit a random subset of the training points or fewer sources: PMKL holds one N x N kernel per "
                 "source and one N x N factor per class")


def memory(extra: float, per_class: bool = True):
    """The ``memory`` declaration of a PMKL backend (``bayeszoo.memory_guard``): the S base kernels (N x N each), one
    N x N Cholesky factor per class (``per_class``) and ``extra`` more N x N matrices alive at the backend's peak
    (counted on its code path: the combined kernel, K K, the precision of a class's weights and the temporaries of
    its factorisation)."""
    def need(model, data, options) -> Need:
        N, S = data.n, len(model.source_list(data))
        parts = {f"{S} base kernels of {N:,} x {N:,}": dense(N, N, S)}
        if per_class:
            C = model.n_classes(data)
            parts[f"{C} class factors of {N:,} x {N:,}"] = dense(N, N, C)
        parts[f"{extra:g} more matrices of {N:,} x {N:,} (combined kernel, K K, precisions)"] = dense(N, N, extra)
        return Need(parts, MEMORY_ADVICE)
    return need

