"""Multinomial-probit class probabilities by Gauss-Hermite quadrature (Damoulas thesis eq. 3.11).

The corrected rule of eq. 3.12 [D 3.12]: E_u F(u) = pi^-1/2 sum_k w_k F(sqrt(2) x_k) (physicists' nodes), in log
space, and its scaled form (eq. 4.33) for the VB predictive. A Monte-Carlo version is kept for checking.
"""
from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr, logsumexp

GH_NODES = 20          # quadrature nodes of eq. 3.11: abs. error < 1e-6 on probabilities (tests)

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
