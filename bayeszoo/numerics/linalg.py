"""Dense linear algebra the hand-written algorithms share: one Cholesky factorisation with its policies (jitter,
error, memory) and one size limit for dense matrices."""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla

#: the largest n for which an algorithm forms and factorises an n x n matrix by default ("auto" solvers); above it
#: they work with operators, or refuse
DENSE_N = 2000

FIRST_JITTER = 1e-12   # relative to the mean of the diagonal (at least 1)
JITTER_TRIES = 10      # growing tenfold: up to 1e-3 of the diagonal


def cholesky(A, *, what: str = "a covariance matrix", jitter="none", failure=None, lower: bool = True,
             overwrite: bool = False) -> np.ndarray:
    """The Cholesky factor of the symmetric matrix ``A``, under one of the policies the algorithms need:

    * ``jitter``: "none" (``A`` as it is: a jitter would change what it stands for, e.g. a posterior precision),
      "grow" (0, then :data:`FIRST_JITTER` growing tenfold, :data:`JITTER_TRIES` tries in all, each times
      max(1, mean(diag A))), or a sequence of absolute jitters tried after ``A`` itself;
    * ``failure``: the error when ``A`` holds NaN or inf or no try succeeds: None raises
      ``numpy.linalg.LinAlgError`` (a ValueError) naming ``what``; a function ``failure(A, reason)``, reason
      "not finite" or "not positive definite", gives the message of a ValueError (the family's own remedy);
    * ``overwrite``: LAPACK may use ``A``'s memory (no n x n copy); then ``A`` may be a function of no arguments
      that builds the matrix, called again for every try (a failed try has overwritten it), and ``failure`` is
      given None for the matrix.
    """
    build = A if callable(A) else (lambda: A)
    first = np.asarray(build(), dtype=float)
    if not np.all(np.isfinite(first)):
        raise _cholesky_error(failure, first, "not finite",
                              f"{what} holds NaN or inf: the problem's scales are too far apart for double precision "
                              f"(rescale the inputs)")
    if isinstance(jitter, str):
        grow = jitter == "grow"
        jitters = [FIRST_JITTER * 10.0 ** k for k in range(JITTER_TRIES - 1)] if grow else []
        scale = max(1.0, float(np.mean(np.diag(first)))) if grow and first.size else 1.0
    else:
        jitters, scale, grow = list(jitter), 1.0, False
    if overwrite and jitters and not callable(A):
        raise TypeError("cholesky: with overwrite=True and jitters, pass a function that builds the matrix (a failed "
                        "try overwrites it)")
    for extra in [0.0, *jitters]:
        if not overwrite:
            M = first if extra == 0.0 else first + extra * scale * np.eye(first.shape[0])
        else:   # a failed try has overwritten the matrix: the next builds its own (one n x n buffer at a time)
            M = first if extra == 0.0 else _add_to_diagonal(np.asarray(build(), dtype=float), extra * scale)
            first = None
        try:
            return sla.cholesky(M, lower=lower, overwrite_a=overwrite, check_finite=False)
        except (np.linalg.LinAlgError, sla.LinAlgError):
            M = None
    tried = f" even with jitter {jitters[-1]:.0e}" + (" x its mean diagonal" if grow else "") if jitters else ""
    raise _cholesky_error(failure, first, "not positive definite",
                          f"{what} is not positive definite{tried}: it is too ill-conditioned (rescale the inputs or "
                          f"change the model's hyperparameters)")


def _add_to_diagonal(M: np.ndarray, value: float) -> np.ndarray:
    M.flat[::M.shape[0] + 1] += value      # in place: a transposed (Fortran-ordered) view is the same diagonal
    return M


def _cholesky_error(failure, A, reason: str, default: str) -> Exception:
    if failure is None:
        return np.linalg.LinAlgError(default)
    return ValueError(failure(A, reason))


def jittered_cholesky(A, *, lower: bool = True, what: str = "a covariance matrix") -> np.ndarray:
    """:func:`cholesky` with a growing jitter (``jitter="grow"``), raising ``numpy.linalg.LinAlgError``."""
    return cholesky(A, what=what, jitter="grow", lower=lower)
