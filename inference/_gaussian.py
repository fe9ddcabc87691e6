"""i.i.d. draws from the Gaussian approximations of the hand-written backends (Laplace, EP, VB, type-II ML)."""
from __future__ import annotations

import numpy as np


def gaussian_draws(rng: np.random.Generator, mean: np.ndarray, cov: np.ndarray, chains: int, draws: int) -> np.ndarray:
    """i.i.d. draws (chains, draws, M) from N(mean, cov) via Cholesky with jitter for near-singular cov."""
    M = mean.shape[0]
    jitter = 0.0
    for _ in range(8):
        try:
            L = np.linalg.cholesky(cov + jitter * np.eye(M))
            break
        except np.linalg.LinAlgError:
            jitter = max(1e-12, 10 * jitter) * max(1.0, float(np.mean(np.diag(cov))))
    else:
        raise ValueError("the posterior covariance is not positive definite even with jitter: the problem is too "
                         "ill-conditioned for a Gaussian approximation (rescale the inputs or change the kernel)")
    z = rng.standard_normal((chains, draws, M))
    return mean + z @ L.T
