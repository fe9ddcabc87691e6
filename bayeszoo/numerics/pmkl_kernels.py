"""Kernel Gram matrices of the multiple-kernel models (Damoulas thesis §3.2, eqs 3.1-3.5).

A :class:`Source` is one base kernel on some columns of X; ``base_grams`` stacks them, ``combine`` applies a
combination rule (mean, convex, binary, product, weighted product), ``latent_means`` the predictive means
W^T k* for a batch of draws. The rbf sources' parameters Theta have a flat layout (``theta_layout``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bayeszoo.numerics.probit import CHUNK_BYTES

RULES = ("mean", "convex", "binary", "product", "wproduct")
KERNELS = ("rbf", "poly", "linear", "precomputed")

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


def latent_means(Ks_test, W, beta, rule: str, max_bytes: int | None = None) -> np.ndarray:
    """m = W^T k* for every draw: Ks_test (S, N, n*), W (L, N, C), beta (L, S) -> (L, n*, C).

    The draws go through in chunks whose per-draw arrays (W's copy as one matrix and two n* x C means, or an
    N x n* composite kernel) stay under about ``max_bytes`` (``probit.CHUNK_BYTES``), so the peak is the
    result's, whatever the number of draws."""
    Ks_test = np.asarray(Ks_test, dtype=float)
    W = np.asarray(W, dtype=float)
    beta = np.asarray(beta, dtype=float)
    S, N, n = Ks_test.shape
    L, C = W.shape[0], W.shape[2]
    out = np.empty((L, n, C))
    linear = rule in ("mean", "convex", "binary")
    # sum_s beta_s (K_s^T W) for the linear rules: never forms the per-draw composite kernel
    max_bytes = CHUNK_BYTES if max_bytes is None else max_bytes
    step = max(1, int(max_bytes) // (8 * ((N + 2 * n) * C if linear else N * n)))
    for a in range(0, L, step):
        if linear:
            # K_s^T [W_a ... W_b] as one matrix product per source (BLAS; einsum's own loops took seconds)
            block = np.moveaxis(W[a:a + step], 1, 0).reshape(N, -1)                       # (N, l C)
            acc = np.zeros((n, block.shape[1]))
            for s in range(S):
                acc += (Ks_test[s].T @ block) * np.repeat(beta[a:a + step, s], C)
            out[a:a + step] = np.moveaxis(acc.reshape(n, -1, C), 1, 0)
        else:
            K = combine(Ks_test, beta[a:a + step], rule)                 # (l, N, n*)
            out[a:a + step] = np.einsum("lnm,lnc->lmc", K, W[a:a + step])
    return out
