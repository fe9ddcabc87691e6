"""Covariance functions for GP classification, with log-scale hyperparameters (GPML conventions).

Nickisch thesis §4.1 / §4.12 (SE, linear, polynomial of degree 1-3, Matérn 3/2 and 5/2, neural network);
the formulas and hyperparameter orders follow the GPML toolbox functions named in brackets. Every
hyperparameter is a log: ``hyp`` is a 1-D float array, in this order (``d`` = input dimension):

==========  ===============================  ======================================================  =====
kind        hyp (in order)                   k(x, z)                                                  count
==========  ===============================  ======================================================  =====
``se``      log ell, log sf                  sf^2 exp(-|x - z|^2 / (2 ell^2))            [covSEiso]   2
``se_ard``  log ell_1..log ell_d, log sf     sf^2 exp(-sum_j (x_j - z_j)^2 / (2 ell_j^2)) [covSEard]   d + 1
``matern32`` log ell, log sf                 sf^2 (1 + t) exp(-t),  t = sqrt(3) |x - z| / ell [covMaterniso, 3]  2
``matern52`` log ell, log sf                 sf^2 (1 + t + t^2 / 3) exp(-t),  t = sqrt(5) |x - z| / ell     2
``linear``  log t                            (x.z + 1) / t^2                             [covLINone]  1
``poly``    log c, log sf                    sf^2 (c + x.z)^degree, degree in {1, 2, 3}   [covPoly]    2
``nn``      log ell, log sf                  sf^2 asin(s(x, z)),  s = (1 + x.z / ell^2) /              2
                                             sqrt((2 + |x|^2 / ell^2)(2 + |z|^2 / ell^2))  [covNNone]
==========  ===============================  ======================================================  =====

``kernel_matrix(kind, X1, X2, hyp)`` is the cross-covariance (no jitter), ``kernel_diag(kind, X, hyp)`` its
diagonal for X1 = X2 = X, and ``kernel_grad(kind, X, hyp)`` the list of analytic dK/dhyp_j (one n x n
matrix per hyperparameter, in the order above). ``degree`` is used by ``poly`` only.
"""
from __future__ import annotations

import numpy as np

KERNELS = ("se", "se_ard", "matern32", "matern52", "linear", "poly", "nn")
POLY_DEGREES = (1, 2, 3)


def n_hyp(kind: str, d: int) -> int:
    """Number of (log) hyperparameters of ``kind`` for inputs of dimension ``d``."""
    _check_kind(kind)
    if kind == "se_ard":
        return int(d) + 1
    if kind == "linear":
        return 1
    return 2


def hyp_names(kind: str, d: int) -> list[str]:
    """Names of the hyperparameters, in order (e.g. ``["log_ell", "log_sf"]``)."""
    _check_kind(kind)
    if kind == "se_ard":
        return [f"log_ell_{j}" for j in range(int(d))] + ["log_sf"]
    if kind == "linear":
        return ["log_t"]
    if kind == "poly":
        return ["log_c", "log_sf"]
    return ["log_ell", "log_sf"]


def _check_kind(kind):
    if kind not in KERNELS:
        raise ValueError(f"unknown GP kernel {kind!r}; choose one of {KERNELS}")


def _check(kind, X1, X2, hyp, degree):
    _check_kind(kind)
    X1 = np.atleast_2d(np.asarray(X1, dtype=float))
    X2 = X1 if X2 is None else np.atleast_2d(np.asarray(X2, dtype=float))
    if X1.shape[1] != X2.shape[1]:
        raise ValueError(f"inputs have {X1.shape[1]} and {X2.shape[1]} columns")
    hyp = np.atleast_1d(np.asarray(hyp, dtype=float))
    m = n_hyp(kind, X1.shape[1])
    if hyp.shape != (m,):
        raise ValueError(f"kernel {kind!r} with d={X1.shape[1]} needs {m} log-hyperparameters "
                         f"{hyp_names(kind, X1.shape[1])}, got {hyp.size}")
    if kind == "poly" and int(degree) not in POLY_DEGREES:
        raise ValueError(f"poly kernel degree must be one of {POLY_DEGREES}, got {degree!r}")
    return X1, X2, hyp


def _exponent(*arrays) -> int:
    """e with max |entry| < 2^e (0 for all-zero or empty arrays): dividing by 2^e is exact and brings every
    entry into [-1, 1]."""
    top = max((float(np.max(np.abs(a), initial=0.0)) for a in arrays), default=0.0)
    return int(np.frexp(top)[1]) if top > 0 else 0


def _sqdist(X1, X2, ell=1.0):
    """|x / ell - z / ell|^2 for every pair of rows. The inputs are scaled by a power of two into [-1, 1] and
    centred before the squares are formed, so neither large inputs (|x| ~ 1e300) overflow nor inputs far from
    the origin lose their differences to cancellation; a distance beyond the float range is inf."""
    e = _exponent(X1, X2)
    U1, U2 = np.ldexp(X1, -e) / ell, np.ldexp(X2, -e) / ell
    centre = 0.5 * (np.max(U1, 0, initial=-np.inf) + np.min(U1, 0, initial=np.inf)) if U1.shape[0] else 0.0
    U1, U2 = U1 - centre, U2 - centre
    D = (np.sum(U1**2, 1)[:, None] + np.sum(U2**2, 1)[None, :] - 2.0 * U1 @ U2.T).clip(min=0.0)
    with np.errstate(over="ignore"):
        return np.ldexp(D, 2 * e)


def _times(K, R):
    """K * R elementwise with 0 where K is 0 (R may be inf there: a distance beyond the float range)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(K == 0.0, 0.0, K * R)


#: exp(-t) is 0 in double precision beyond this, so the Matern forms are evaluated at min(t, T_MAX) (no inf * 0)
_T_MAX = 800.0


def _matern_t(r2, nu_times_2):
    return np.minimum(np.sqrt(nu_times_2 * r2), _T_MAX)


def _row_exponents(X):
    """e_i >= 0 with max_j |X_ij| < 2^e_i (0 for rows inside (-1, 1))."""
    return np.maximum(np.frexp(np.max(np.abs(X), axis=1, initial=0.0))[1], 0)


def _nn_parts(X1, X2, ell):
    """S = 1 + x.z / ell^2 (rows x of X1, z of X2), D = 2 + |x|^2 / ell^2, s = S / sqrt(D1 D2), with every row
    scaled by the power of two c_i = 2^e_i that brings it into [-1, 1] (when that is a reduction): S_ij is divided
    by c_i c_j and D_i by c_i^2, so no square overflows and no D is 0, and s is unchanged. Returns those scaled
    S, D1, D2, s and the scaled constants 1 / (c_i c_j), 2 / c_i^2, 2 / c_j^2 (0 where they underflow, which
    changes s by less than 1e-300)."""
    e1, e2 = _row_exponents(X1), _row_exponents(X2)
    W1, W2 = np.ldexp(X1, -e1[:, None]) / ell, np.ldexp(X2, -e2[:, None]) / ell
    one = np.ldexp(1.0, -(e1[:, None] + e2[None, :]))
    two1, two2 = np.ldexp(2.0, -2 * e1), np.ldexp(2.0, -2 * e2)
    S = one + W1 @ W2.T
    D1, D2 = two1 + np.sum(W1**2, 1), two2 + np.sum(W2**2, 1)
    s = S / np.sqrt(D1[:, None] * D2[None, :])
    return S, D1, D2, np.clip(s, -1.0, 1.0), (one, two1, two2)


def kernel_matrix(kind: str, X1, X2, hyp, degree: int = 2) -> np.ndarray:
    """Covariance matrix k(X1[i], X2[j]) (n1 x n2), no jitter. ``X2=None`` means X2 = X1."""
    X1, X2, hyp = _check(kind, X1, X2, hyp, degree)
    with np.errstate(over="ignore", invalid="ignore"):
        K = _kernel_matrix(kind, X1, X2, hyp, degree)
    if not np.all(np.isfinite(K)):
        top = max(np.max(np.abs(X1), initial=0.0), np.max(np.abs(X2), initial=0.0))
        raise ValueError(f"GP kernel {kind!r} with log-hyperparameters {hyp.tolist()} overflows at these inputs "
                         f"(largest |x| = {top:.3g}); standardise the inputs")
    return K


def _kernel_matrix(kind, X1, X2, hyp, degree):
    if kind in ("se", "se_ard", "matern32", "matern52"):
        sf2 = np.exp(2.0 * hyp[-1])
        if kind == "se_ard":
            return sf2 * np.exp(-0.5 * _sqdist(X1, X2, np.exp(hyp[:-1])))
        r2 = _sqdist(X1, X2, np.exp(hyp[0]))
        if kind == "se":
            return sf2 * np.exp(-0.5 * r2)
        if kind == "matern32":
            t = _matern_t(r2, 3.0)
            return sf2 * (1.0 + t) * np.exp(-t)
        t = _matern_t(r2, 5.0)
        return sf2 * (1.0 + t + t**2 / 3.0) * np.exp(-t)
    if kind == "linear":
        return (X1 @ X2.T + 1.0) * np.exp(-2.0 * hyp[0])
    if kind == "poly":
        c, sf2 = np.exp(hyp[0]), np.exp(2.0 * hyp[1])
        return sf2 * (c + X1 @ X2.T) ** int(degree)
    ell, sf2 = np.exp(hyp[0]), np.exp(2.0 * hyp[1])   # nn
    return sf2 * np.arcsin(_nn_parts(X1, X2, ell)[3])


def kernel_diag(kind: str, X, hyp, degree: int = 2) -> np.ndarray:
    """Prior variances k(x, x) for every row of X (n,), without forming the n x n matrix."""
    X, _, hyp = _check(kind, X, None, hyp, degree)
    if kind in ("se", "se_ard", "matern32", "matern52"):
        return np.full(X.shape[0], np.exp(2.0 * hyp[-1]))
    with np.errstate(over="ignore", invalid="ignore"):     # linear / poly: inf where the variance overflows
        sq = np.sum(X**2, 1)
        if kind == "linear":
            return (sq + 1.0) * np.exp(-2.0 * hyp[0])
        if kind == "poly":
            return np.exp(2.0 * hyp[1]) * (np.exp(hyp[0]) + sq) ** int(degree)
        a = sq / np.exp(2.0 * hyp[0])
        ratio = np.where(np.isfinite(a), (1.0 + a) / (2.0 + a), 1.0)     # nn: -> 1 for |x| -> inf
    return np.exp(2.0 * hyp[1]) * np.arcsin(ratio)


def kernel_grad(kind: str, X, hyp, degree: int = 2) -> list[np.ndarray]:
    """Analytic derivatives dK/dhyp_j of K = kernel_matrix(kind, X, X, hyp), one (n, n) array per hyp_j."""
    X, _, hyp = _check(kind, X, None, hyp, degree)
    K = kernel_matrix(kind, X, X, hyp, degree)
    if kind == "se":
        return [_times(K, _sqdist(X, X, np.exp(hyp[0]))), 2.0 * K]
    if kind == "se_ard":
        ell = np.exp(hyp[:-1])
        grads = [_times(K, _sqdist(X[:, j:j + 1], X[:, j:j + 1], ell[j])) for j in range(X.shape[1])]
        return grads + [2.0 * K]
    if kind in ("matern32", "matern52"):
        sf2 = np.exp(2.0 * hyp[1])
        r2 = _sqdist(X, X, np.exp(hyp[0]))
        if kind == "matern32":
            t = _matern_t(r2, 3.0)
            dell = sf2 * t**2 * np.exp(-t)                     # dK/dt * dt/dlog ell, dt/dlog ell = -t
        else:
            t = _matern_t(r2, 5.0)
            dell = sf2 * t**2 * (1.0 + t) * np.exp(-t) / 3.0
        return [dell, 2.0 * K]
    if kind == "linear":
        return [-2.0 * K]
    if kind == "poly":
        c, sf2, p = np.exp(hyp[0]), np.exp(2.0 * hyp[1]), int(degree)
        return [sf2 * p * (c + X @ X.T) ** (p - 1) * c, 2.0 * K]
    ell, sf2 = np.exp(hyp[0]), np.exp(2.0 * hyp[1])     # nn
    S, D1, D2, s, (one, two1, two2) = _nn_parts(X, X, ell)   # scaled per row, which leaves ds unchanged
    dS = -2.0 * (S - one)                                 # d/dlog ell of 1 + x.z / ell^2
    dD1, dD2 = -2.0 * (D1 - two1), -2.0 * (D2 - two2)
    root = np.sqrt(D1[:, None] * D2[None, :])
    ds = (dS - S * (0.5 * dD1[:, None] / D1[:, None] + 0.5 * dD2[None, :] / D2[None, :])) / root
    with np.errstate(divide="ignore", invalid="ignore"):
        dK = sf2 * ds / np.sqrt(np.clip(1.0 - s**2, 1e-300, None))
    return [np.where(np.isfinite(dK), dK, 0.0), 2.0 * K]
