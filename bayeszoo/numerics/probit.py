"""Multinomial-probit class probabilities by Gauss-Hermite quadrature (Damoulas thesis eq. 3.11).

The corrected rule of eq. 3.12 [D 3.12]: E_u F(u) = pi^-1/2 sum_k w_k F(sqrt(2) x_k) (physicists' nodes), in log
space, and its scaled form (eq. 4.33) for the VB predictive. A Monte-Carlo version is kept for checking.
"""
from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr, logsumexp

GH_NODES = 20          # quadrature nodes of eq. 3.11: abs. error < 1e-6 on probabilities (tests)
#: bytes the quadrature's temporaries may take at once (:func:`log_class_probs` works in chunks of rows under it)
CHUNK_BYTES = 8 * 2**20
#: (rows x nodes x C x C) arrays alive at once in the quadrature: the arguments, their log Phi, the masked copy
QUADRATURE_COPIES = 3

# ------------------------------------------------------------------------------------------ quadrature
def gh_rule(n: int = GH_NODES):
    """Nodes u_k and log-weights for E_{u ~ N(0,1)} F(u) ~= sum_k exp(logw_k) F(u_k)."""
    x, w = np.polynomial.hermite.hermgauss(int(n))
    return np.sqrt(2.0) * x, np.log(w) - 0.5 * np.log(np.pi)   # eq. 3.12 corrected: e^{-u^2/2}, not e^{-u^2}


def log_class_probs(M, nu=None, n_nodes: int = GH_NODES, max_bytes: int | None = None) -> np.ndarray:
    """log P(t = i | m) = log E_u prod_{j != i} Phi((u nu_i + m_i - m_j) / nu_j) for every class i.

    ``M`` is (..., C) latent means m = W^T k; ``nu`` (same shape, optional) the predictive sds of eq. 4.33
    (nu = 1 gives eq. 3.11). Computed in log space (log_ndtr, logsumexp over the nodes), so products of many
    small Phi values do not underflow. The quadrature holds (nodes x C x C) values per row of ``M``: the rows go
    through in chunks whose temporaries stay under about ``max_bytes`` (:data:`CHUNK_BYTES`), so the peak does
    not grow with the number of rows (draws x points); every row is computed as it would be alone.
    """
    M = np.asarray(M, dtype=float)
    C = M.shape[-1]
    rows = M.reshape(-1, C)
    sds = None if nu is None else np.broadcast_to(np.asarray(nu, dtype=float), M.shape).reshape(-1, C)
    step = chunk_rows(int(n_nodes) * C * C, max_bytes)
    out = np.empty(rows.shape)
    for a in range(0, rows.shape[0], step):
        out[a:a + step] = _log_class_probs(rows[a:a + step], None if sds is None else sds[a:a + step], n_nodes)
    return out.reshape(M.shape)


def log_class_prob(M, labels, n_nodes: int = GH_NODES, max_bytes: int | None = None) -> np.ndarray:
    """log P(t = t_n | m_n) of the given class of each row (eq. 3.11): :func:`log_class_probs` of that class
    alone, a C-th of its work and memory. ``M`` (..., C), ``labels`` integers broadcasting against ``M[..., 0]``."""
    M = np.asarray(M, dtype=float)
    C = M.shape[-1]
    labels = np.broadcast_to(np.asarray(labels, dtype=int), M.shape[:-1]).reshape(-1)
    rows = M.reshape(-1, C)
    u, logw = gh_rule(n_nodes)
    step = chunk_rows(int(n_nodes) * C, max_bytes)
    out = np.empty(rows.shape[0])
    for a in range(0, rows.shape[0], step):
        m, t = rows[a:a + step], labels[a:a + step]
        m_t = np.take_along_axis(m, t[:, None], axis=1)                                   # (r, 1)
        lp = log_ndtr(u[:, None] + (m_t - m)[:, None, :])                                 # (r, K, j)
        lp = np.where(np.arange(C) == t[:, None, None], 0.0, lp).sum(-1)                  # (r, K)
        out[a:a + step] = logsumexp(lp[..., None] + logw[:, None], axis=-2)[..., 0]
    return out.reshape(M.shape[:-1])


def chunk_rows(values_per_row: int, max_bytes: int | None = None) -> int:
    """Rows per chunk of a quadrature that holds ``values_per_row`` float64 values per row in each of its
    :data:`QUADRATURE_COPIES` temporaries, so that they stay under ``max_bytes`` (:data:`CHUNK_BYTES`; at least
    one row)."""
    max_bytes = CHUNK_BYTES if max_bytes is None else max_bytes
    return max(1, int(max_bytes) // (QUADRATURE_COPIES * 8 * int(values_per_row)))


def _log_class_probs(M, nu, n_nodes: int) -> np.ndarray:
    """:func:`log_class_probs` of the rows ``M`` (r, C), all at once."""
    u, logw = gh_rule(n_nodes)
    C = M.shape[-1]
    if nu is None:
        arg = u[:, None, None] + (M[..., None, :, None] - M[..., None, None, :])        # (r, K, i, j)
    else:
        arg = (u[:, None, None] * nu[..., None, :, None] + M[..., None, :, None] - M[..., None, None, :]) \
            / nu[..., None, None, :]
    lp = log_ndtr(arg)
    lp = np.where(np.eye(C, dtype=bool), 0.0, lp).sum(-1)                                  # (r, K, i)
    return logsumexp(lp + logw[:, None], axis=-2)


def log_class_probs_mc(M, n_samples: int, rng: np.random.Generator) -> np.ndarray:
    """Monte-Carlo version of :func:`log_class_probs` (nu = 1) with ``n_samples`` draws of u (thesis §3.3.2)."""
    M = np.asarray(M, dtype=float)
    C = M.shape[-1]
    u = rng.standard_normal(int(n_samples))
    lp = log_ndtr(u[:, None, None] + (M[..., None, :, None] - M[..., None, None, :]))
    lp = np.where(np.eye(C, dtype=bool), 0.0, lp).sum(-1)
    return logsumexp(lp, axis=-2) - np.log(n_samples)
