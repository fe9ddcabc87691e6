"""Numerics shared by the PMKL model and its hand-written backends (Damoulas thesis; digest ``damoulas_mkl.md``).

* Base kernels per source and the combination rules of §3.2 (eqs 3.1-3.5).
* The multinomial-probit class probability (eq. 3.11) by Gauss-Hermite quadrature in log space, with the
  corrected rule of eq. 3.12: E_u F(u) = pi^-1/2 sum_k w_k F(sqrt(2) x_k) (physicists' nodes), and its
  scaled form (eq. 4.33) for the VB predictive. A Monte-Carlo version is kept for checking.
* Exact one-dimensional truncated-normal draws (inverse CDF in log space) and one Gibbs sweep inside the cone
  {y_t > y_j for all j != t} (digest §3.1 option (b)).
* Moments of the cone-truncated Gaussian (eqs 4.14-4.16) used by VB and EM.
* W | Y, A (eq. 3.22) and the simplex-constrained QP for beta (eq. 5.10, App. C).

Everything is NumPy / SciPy so that it can be imported by the model without pulling in JAX.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg as sla
from scipy.special import log_ndtr, logsumexp, ndtri_exp

GH_NODES = 20          # quadrature nodes of eq. 3.11: abs. error < 1e-6 on probabilities (tests)
RULES = ("mean", "convex", "binary", "product", "wproduct")
KERNELS = ("rbf", "poly", "linear", "precomputed")
LOG_2PI = float(np.log(2.0 * np.pi))


# ------------------------------------------------------------------------------------------ quadrature
def gh_rule(n: int = GH_NODES):
    """Nodes u_k and log-weights for E_{u ~ N(0,1)} F(u) ~= sum_k exp(logw_k) F(u_k)."""
    x, w = np.polynomial.hermite.hermgauss(int(n))
    return np.sqrt(2.0) * x, np.log(w) - 0.5 * np.log(np.pi)   # eq. 3.12 corrected: e^{-u^2/2}, not e^{-u^2}


def log_class_probs(M, nu=None, n_nodes: int = GH_NODES) -> np.ndarray:
    """log P(t = i | m) = log E_u prod_{j != i} Phi((u nu_i + m_i - m_j) / nu_j) for every class i.

    ``M`` is (..., C) latent means m = W^T k; ``nu`` (same shape, optional) the predictive sds of eq. 4.33
    (nu = 1 gives eq. 3.11). Computed in log space (log_ndtr, logsumexp over the nodes), so products of many
    small Phi values do not underflow.
    """
    M = np.asarray(M, dtype=float)
    u, logw = gh_rule(n_nodes)
    C = M.shape[-1]
    if nu is None:
        arg = u[:, None, None] + (M[..., None, :, None] - M[..., None, None, :])        # (..., K, i, j)
    else:
        nu = np.broadcast_to(np.asarray(nu, dtype=float), M.shape)
        arg = (u[:, None, None] * nu[..., None, :, None] + M[..., None, :, None] - M[..., None, None, :]) \
            / nu[..., None, None, :]
    lp = log_ndtr(arg)
    lp = np.where(np.eye(C, dtype=bool), 0.0, lp).sum(-1)                                  # (..., K, i)
    return logsumexp(lp + logw[:, None], axis=-2)


def log_class_probs_mc(M, n_samples: int, rng: np.random.Generator) -> np.ndarray:
    """Monte-Carlo version of :func:`log_class_probs` (nu = 1) with ``n_samples`` draws of u (thesis §3.3.2)."""
    M = np.asarray(M, dtype=float)
    C = M.shape[-1]
    u = rng.standard_normal(int(n_samples))
    lp = log_ndtr(u[:, None, None] + (M[..., None, :, None] - M[..., None, None, :]))
    lp = np.where(np.eye(C, dtype=bool), 0.0, lp).sum(-1)
    return logsumexp(lp, axis=-2) - np.log(n_samples)


# ------------------------------------------------------------------------------------------- kernels
@dataclass(frozen=True)
class Source:
    """One base kernel: ``kernel`` on the columns ``columns`` of X.

    rbf: exp(-sum_d theta_d (x_d - x'_d)^2) (ARD form, digest §2.1; theta defaults to 1/D_s, the thesis's
    setting); poly: (x.x' + 1)^degree; linear: x.x'; precomputed: ``matrix`` is a kernel matrix over all objects
    (training and test) and the single column holds each row's object index into it (e.g. string kernels).
    """

    name: str
    columns: tuple
    kernel: str = "rbf"
    theta: tuple | None = None
    degree: int = 2
    matrix: np.ndarray | None = field(default=None, compare=False, repr=False)   # precomputed gram

    def theta_vector(self) -> np.ndarray:
        D = len(self.columns)
        if self.theta is None:
            return np.full(D, 1.0 / D)
        th = np.broadcast_to(np.asarray(self.theta, dtype=float), (D,)).copy()
        return th

    def gram(self, X1, X2, theta=None) -> np.ndarray:
        """k(X1, X2) on this source's columns of the full feature matrices."""
        A = np.asarray(X1, dtype=float)[:, list(self.columns)]
        B = np.asarray(X2, dtype=float)[:, list(self.columns)]
        if self.kernel == "rbf":
            th = self.theta_vector() if theta is None else np.asarray(theta, dtype=float)
            As, Bs = A * np.sqrt(th), B * np.sqrt(th)
            sq = np.sum(As**2, 1)[:, None] + np.sum(Bs**2, 1)[None, :] - 2.0 * As @ Bs.T
            return np.exp(-np.clip(sq, 0.0, None))
        if self.kernel == "poly":
            return (A @ B.T + 1.0) ** self.degree
        if self.kernel == "linear":
            return A @ B.T
        if self.kernel == "precomputed":
            i, j = A[:, 0].astype(int), B[:, 0].astype(int)
            return self.matrix[np.ix_(i, j)]
        raise ValueError(f"unknown kernel {self.kernel!r}; choose one of {KERNELS}")


def base_grams(sources, X1, X2, theta=None) -> np.ndarray:
    """Stack of base kernels (S, n1, n2); ``theta`` (flat, :func:`theta_layout` order) overrides the rbf
    sources' own parameters."""
    if theta is None:
        return np.stack([s.gram(X1, X2) for s in sources])
    slices = dict(theta_layout(sources))
    return np.stack([s.gram(X1, X2, theta[slices[i]] if i in slices else None) for i, s in enumerate(sources)])


# ------------------------------------------------------------------------------ kernel parameters Theta
def theta_layout(sources):
    """Where each rbf source's theta_sd sit in the flat parameter vector: [(source index, slice), ...].
    Only rbf sources have parameters (poly and linear kernels are fixed forms, precomputed ones are given)."""
    out, start = [], 0
    for i, s in enumerate(sources):
        if s.kernel == "rbf":
            out.append((i, slice(start, start + len(s.columns))))
            start += len(s.columns)
    return out


def theta_labels(sources) -> list[str]:
    """Coordinate labels "source:column" of the flat theta vector."""
    return [f"{sources[i].name}:{c}" for i, _ in theta_layout(sources) for c in sources[i].columns]


def theta_start(sources) -> np.ndarray:
    """The flat theta vector at the sources' fixed values (1/D_s unless given)."""
    return np.concatenate([sources[i].theta_vector() for i, _ in theta_layout(sources)])


def rbf_gram_batch(A, B, theta) -> np.ndarray:
    """exp(-sum_d theta_d (a_d - b_d)^2) for a batch of parameter vectors: A (n1, D), B (n2, D), theta (..., D)
    -> (..., n1, n2)."""
    sq = (np.einsum("...d,nd->...n", theta, A * A)[..., :, None]
          + np.einsum("...d,md->...m", theta, B * B)[..., None, :]
          - 2.0 * np.einsum("nd,...d,md->...nm", A, theta, B))
    return np.exp(-np.clip(sq, 0.0, None))


def combine(Ks, beta, rule: str) -> np.ndarray:
    """Composite kernel(s) from base kernels ``Ks`` (S, n1, n2) and weights ``beta`` (S,) or (L, S).

    mean / convex / binary: sum_s beta_s K_s (eqs 3.1-3.3); product: prod_s K_s (3.4);
    wproduct: prod_s K_s^beta_s element-wise (3.5; needs positive base kernels, i.e. rbf).
    """
    Ks = np.asarray(Ks, dtype=float)
    beta = np.asarray(beta, dtype=float)
    if rule in ("mean", "convex", "binary"):
        # element-wise weighted sum: S is small, and a BLAS tensordot is slower here (thread start-up)
        out = beta[..., 0, None, None] * Ks[0]
        for s in range(1, Ks.shape[0]):
            out = out + beta[..., s, None, None] * Ks[s]
        return out
    if rule == "product":
        out = np.prod(Ks, axis=0)
        return np.broadcast_to(out, beta.shape[:-1] + out.shape).copy()
    if rule == "wproduct":
        return np.exp(np.tensordot(beta, np.log(np.clip(Ks, 1e-300, None)), axes=([-1], [0])))
    raise ValueError(f"unknown combination rule {rule!r}; choose one of {RULES}")


def latent_means(Ks_test, W, beta, rule: str, chunk: int = 200) -> np.ndarray:
    """m = W^T k* for every draw: Ks_test (S, N, n*), W (L, N, C), beta (L, S) -> (L, n*, C)."""
    W = np.asarray(W, dtype=float)
    beta = np.asarray(beta, dtype=float)
    if rule in ("mean", "convex", "binary"):
        # sum_s beta_s (K_s^T W): never forms the per-draw composite kernel
        per_source = np.einsum("snm,lnc->lsmc", Ks_test, W)
        return np.einsum("ls,lsmc->lmc", beta, per_source)
    out = np.empty((W.shape[0], Ks_test.shape[2], W.shape[2]))
    for a in range(0, W.shape[0], chunk):
        K = combine(Ks_test, beta[a:a + chunk], rule)                 # (l, N, n*)
        out[a:a + chunk] = np.einsum("lnm,lnc->lmc", K, W[a:a + chunk])
    return out


# ---------------------------------------------------------------------------- truncated normal draws
def truncnorm_above(rng, mean, lower):
    """Exact draws from N(mean, 1) truncated to (lower, inf) by the inverse CDF in log space."""
    a = np.asarray(lower, float) - mean
    u = rng.random(np.shape(a))
    # x = -Phi^-1(u Phi(-a)): upper tail of the standard normal, stable for any a
    return mean - ndtri_exp(log_ndtr(-a) + np.log(u))


def truncnorm_below(rng, mean, upper):
    """Exact draws from N(mean, 1) truncated to (-inf, upper)."""
    b = np.asarray(upper, float) - mean
    u = rng.random(np.shape(b))
    return mean + ndtri_exp(log_ndtr(b) + np.log(u))


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
def chol_spd(H):
    """Lower Cholesky factor with growing jitter if needed (H symmetric positive definite)."""
    scale = float(np.mean(np.diag(H))) if H.size else 1.0
    jitter = 0.0
    for _ in range(8):
        try:
            return sla.cholesky(H + jitter * np.eye(H.shape[0]) if jitter else H, lower=True, check_finite=False)
        except (np.linalg.LinAlgError, sla.LinAlgError):
            jitter = 1e-10 * scale if jitter == 0.0 else 10.0 * jitter
    raise np.linalg.LinAlgError("matrix is not positive definite even with jitter")


def w_posterior(K, KK, Y, A):
    """Mean (N, C) and Cholesky factors (C, N, N) of W | Y, A: N(V_c K y_c, V_c), V_c^-1 = K K + A_c (eq. 3.22)."""
    N, C = Y.shape
    KY = K.T @ Y
    mean = np.empty((N, C))
    Ls = np.empty((C, N, N))
    for c in range(C):
        L = chol_spd(KK + np.diag(A[:, c]))
        mean[:, c] = sla.cho_solve((L, True), KY[:, c], check_finite=False)
        Ls[c] = L
    return mean, Ls


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
    rho = np.nonzero(u - css / k > 0)[0][-1]
    return np.clip(v - css[rho] / (rho + 1.0), 0.0, None)


def beta_qp_terms(Ks, W, Ytil):
    """Omega (S, S) and f (S,) of the beta QP: m_snc = w_c^T k_sn without beta (App. C, corrected)."""
    Msrc = np.einsum("snm,nc->smc", Ks, W)             # (S, N, C): K_s is symmetric, column n = row n
    Omega = np.einsum("snc,tnc->st", Msrc, Msrc)
    f = np.einsum("snc,nc->s", Msrc, Ytil)
    return Omega, f


def gaussian_loglik(Y, Mean) -> float:
    """sum_{n,c} log N(y_nc | m_nc, 1) (eq. 3.8)."""
    R = np.asarray(Y) - np.asarray(Mean)
    return float(-0.5 * np.sum(R * R) - 0.5 * R.size * LOG_2PI)
