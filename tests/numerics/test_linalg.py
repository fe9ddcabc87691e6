"""numerics.linalg.cholesky: one factorisation, its policies (no jitter, a growing jitter, given jitters in an
overwritten buffer) and its errors (the default LinAlgError naming the matrix, or a family's ValueError)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from bayeszoo.numerics.linalg import FIRST_JITTER, cholesky, jittered_cholesky


def _spd(n=6, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, n + 2))
    return X @ X.T + 0.1 * np.eye(n)


def _singular(n=5):
    v = np.arange(1.0, n + 1)
    return np.outer(v, v)                    # rank one: not positive definite in floating point


def test_a_positive_definite_matrix_is_factorised_as_it_is_under_every_policy():
    A = _spd()
    for policy in ("none", "grow", (1e-10,)):
        L = cholesky(A, jitter=policy)
        np.testing.assert_array_equal(L, sla.cholesky(A, lower=True))  # the first try adds nothing (same LAPACK call)
    np.testing.assert_allclose(cholesky(A, lower=False).T @ cholesky(A, lower=False), A, rtol=1e-12)


def test_no_jitter_refuses_a_singular_matrix_with_the_familys_message():
    seen = []

    def failure(A, reason):
        seen.append((A.shape, reason))
        return f"the precision is {reason}; rescale the inputs"

    with pytest.raises(ValueError, match="the precision is not positive definite; rescale the inputs"):
        cholesky(_singular(), failure=failure)
    with pytest.raises(ValueError, match="the precision is not finite"):
        cholesky(np.full((3, 3), np.nan), failure=failure)
    assert seen == [((5, 5), "not positive definite"), ((3, 3), "not finite")]


def test_a_growing_jitter_factorises_the_smallest_multiple_of_the_mean_diagonal_that_is_enough():
    A = _singular()                           # mean diagonal 11: the jitter is relative to it
    L = cholesky(A, jitter="grow")
    added = np.diag(L @ L.T - A) / np.mean(np.diag(A))
    # a singular matrix needs any jitter at all: the first one, on every diagonal entry alike (to the rounding of
    # L L^T - A at a millionth of a millionth of 11)
    np.testing.assert_allclose(added, FIRST_JITTER, rtol=1e-3, atol=0)
    np.testing.assert_array_equal(jittered_cholesky(A), L)
    with pytest.raises(np.linalg.LinAlgError, match=r"the kernel is not positive definite even with jitter 1e-04"):
        cholesky(-np.eye(3), jitter="grow", what="the kernel")


def test_an_overwritten_buffer_is_rebuilt_for_each_try():
    builds = []

    A = _singular() - 1e-9 * np.eye(5)                   # one eigenvalue -1e-9

    def build():
        builds.append(1)
        return A.copy().T                                # a transposed view, as GPC's B

    L = cholesky(build, jitter=(1e-12, 1e-6), overwrite=True)
    np.testing.assert_allclose(L @ L.T, A + 1e-6 * np.eye(5), rtol=1e-12, atol=1e-12)
    assert len(builds) == 3                              # A, A + 1e-12 I (fails), A + 1e-6 I
    with pytest.raises(ValueError, match="B is not positive definite"):
        cholesky(lambda: -np.eye(2), jitter=(1e-10,), overwrite=True,
                 failure=lambda A, reason: f"B is {reason}")
    with pytest.raises(TypeError, match="pass a function that builds the matrix"):
        cholesky(-np.eye(2), jitter=(1e-10,), overwrite=True)          # a retry would read the overwritten buffer
    with pytest.raises(np.linalg.LinAlgError, match=r"even with jitter 1e-10:"):     # absolute: no "mean diagonal"
        cholesky(-np.eye(2), jitter=(1e-10,))
