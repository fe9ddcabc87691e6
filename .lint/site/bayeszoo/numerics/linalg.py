"""Dense linear algebra the hand-written algorithms share: one jittered Cholesky factorisation and one size limit
for dense matrices."""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla

#: the largest n for which an algorithm forms and factorises an n x n matrix by default ("auto" solvers); above it
#: they work with operators, or refuse
DENSE_N = 2000

FIRST_JITTER = 1e-12   # relative to the mean of the diagonal (at least 1)
JITTER_TRIES = 10      # growing tenfold: up to 1e-3 of the diagonal


def jittered_cholesky(A, *, lower: bool = True, what: str = "a covariance matrix") -> np.ndarray:
    """The Cholesky factor of the symmetric matrix ``A``, adding ``jitter * max(1, mean(diag A))`` to its diagonal
    when it is not numerically positive definite (jitter 0, then :data:`FIRST_JITTER` growing tenfold,
    :data:`JITTER_TRIES` times in all). Raises ``numpy.linalg.LinAlgError`` (a ValueError) naming ``what`` when
    even the largest jitter fails or ``A`` holds NaN or inf."""
    A = np.asarray(A, dtype=float)
    if not np.all(np.isfinite(A)):
        raise np.linalg.LinAlgError(f"{what} holds NaN or inf: the problem's scales are too far apart for double "
                                    f"precision (rescale the inputs)")
    scale = max(1.0, float(np.mean(np.diag(A)))) if A.size else 1.0
    eye = np.eye(A.shape[0])
    jitter = 0.0
    for _ in range(JITTER_TRIES):
        try:
            return sla.cholesky(A + jitter * scale * eye if jitter else A, lower=lower, check_finite=False)
        except (np.linalg.LinAlgError, sla.LinAlgError):
            jitter = FIRST_JITTER if jitter == 0.0 else 10.0 * jitter
    raise np.linalg.LinAlgError(f"{what} is not positive definite even with jitter {jitter / 10:.0e} x its mean "
                                f"diagonal: it is too ill-conditioned (rescale the inputs or change the model's "
                                f"hyperparameters)")
