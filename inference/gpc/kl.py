"""``kl``: the Gaussian Q = N(m, V) closest to the GPC posterior in KL(Q || P) (thesis §4.5, App. F.3 / F.6).

Q is parametrised as in the thesis and in Nickisch & Rasmussen (2008): m = K alpha, V = (K^-1 + W)^-1 with W
diagonal and >= 0 (W = -2 Lambda), which holds at every stationary point, so only 2n numbers are free. The
objective is the Jensen bound (4.13), ln Z_KL = ln Z - KL(Q || P):

    J(alpha, W) = sum_i a_i(m_i, v_i) - 1/2 alpha^T K alpha + 1/2 [n - ln|B| - tr(B^-1)],   B = I + sW K sW,

a_i = E_{N(m_i, v_i)} log sig(y_i f_i) by composite Gauss-Legendre quadrature (``common``), v = diag V. Its
gradients (derived in the B form; the thesis's F.6 in (alpha, lambda)):

    dJ/dalpha = K (a_m - alpha),        dJ/dW = -(V o V) (a_v + W / 2)      (o: elementwise product),

so a stationary point has alpha = a_m and W = -2 a_v (F.3). Each iteration takes Newton's step for these
stationarity conditions jointly in (m, W) (the thesis's O(8 n^3) Newton step on (alpha, Lambda), F.6; the
second derivatives a_mm, a_mv, a_vv come from the same quadrature), with step halving until J increases, so the
objective trace is monotone. Where that step is not an ascent direction or would make W negative, block steps
are taken instead: Newton in alpha at fixed V (J is concave in alpha for log-concave likelihoods; solved in
the stable B form like Laplace's step, R&W Alg. 3.1) and Newton in W at fixed alpha, or the fixed-point
direction -2 a_v - W (the gradient preconditioned by the positive definite (V o V)^-1, hence always an ascent
direction). Started from the Laplace approximation. The tests check the optimum against a direct numerical
minimisation of KL(Q || P) over the full (m, chol V).

Evidence: ln Z_KL = J at the optimum (the maximised lower bound), also returned as the Jensen bound.
:func:`kl_log_evidence_grad` gives d ln Z_KL / d theta by the envelope theorem (derived in the B form;
the thesis prints it in (alpha, Lambda), F.6): tr(dK M) with
M = sym(a_m alpha^T) + A^T diag(a_v) A - alpha alpha^T / 2 - C K C / 2, A = V K^-1 = I - K C, C = sW B^-1 sW.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayeszoo.checks import POSITIVE, POSITIVE_INT
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import common as C
from .laplace import laplace_mode

OPTIONS = {
    "max_iter": Option(500, "largest number of Newton iterations on (alpha, W)", POSITIVE_INT),
    "tol": Option(1e-10, "convergence tolerance on the relative gain of the Jensen bound in an iteration", POSITIVE),
}


class KLState(NamedTuple):
    """Everything the objective and its gradients need at (alpha, W): ``objective`` J (the Jensen bound, 4.13),
    ``alpha``, ``W``, ``sW``, ``L`` = chol(B), ``m`` = K alpha, ``V``, ``v`` = diag V, and the expected log
    likelihood's derivatives ``a_m``, ``a_v``, ``a_mm``, ``a_mv``, ``a_vv``."""

    objective: float
    alpha: np.ndarray
    W: np.ndarray
    sW: np.ndarray
    L: np.ndarray
    m: np.ndarray
    V: np.ndarray
    v: np.ndarray
    a_m: np.ndarray
    a_v: np.ndarray
    a_mm: np.ndarray
    a_mv: np.ndarray
    a_vv: np.ndarray


class KLInfo(NamedTuple):
    """One Newton step on (alpha, W): J after it (``objective``), its relative gain (``change``), whether m or W
    still moved by more than 1e-6 of their size (``moving``), and ``stalled``: no ascent was left at machine
    precision (``moving`` then says whether the point or its directions are not finite)."""

    objective: float
    change: float
    moving: bool
    stalled: bool = False


#: the KL-optimal Q: the final state's fields (:class:`KLState`, its J as ``log_evidence``), the J ``trace``,
#: ``iterations`` and ``converged``
KLResult = NamedTuple("KLResult", [("log_evidence", float)]
                      + [(name, np.ndarray) for name in KLState._fields[1:]]
                      + [("trace", np.ndarray), ("iterations", int), ("converged", bool)])


def kl_state(K, y, likelihood, alpha, W) -> KLState:
    """Everything the objective and its gradients need at (alpha, W)."""
    W = np.maximum(np.asarray(W, float), 0.0)
    sW = np.sqrt(W)
    L = C.chol_B(K, sW)
    m = K @ alpha
    Li = C.triangular_inverse(L)                        # one inverse gives V and tr(B^-1)
    Vh = Li @ (sW[:, None] * K)
    V = K - Vh.T @ Vh
    V = 0.5 * (V + V.T)
    v = np.maximum(np.diag(V), 1e-300)
    a, a_m, a_v, a_mm, a_mv, a_vv = C.expected_log_lik_derivs(y, m, v, likelihood)
    J = float(np.sum(a)) - 0.5 * float(alpha @ m) + 0.5 * (K.shape[0] - C.logdet_B(L) - float(np.sum(Li * Li)))
    return KLState(J, alpha, W, sW, L, m, V, v, a_m, a_v, a_mm, a_mv, a_vv)


def kl_objective(K, y, likelihood, alpha, W):
    """(J, dJ/dalpha, dJ/dW): the Jensen bound (4.13) at Q = N(K alpha, (K^-1 + W)^-1) and its gradients."""
    s = kl_state(K, y, likelihood, np.asarray(alpha, float), W)
    g_alpha = K @ (s.a_m - s.alpha)
    g_W = -(s.V * s.V) @ (s.a_v + 0.5 * s.W)
    return s.objective, g_alpha, g_W


def _block_directions(K, s, residual, P):
    """Newton direction in alpha at fixed V, and for the W condition at fixed alpha (or the fixed point)."""
    Wm = np.maximum(-s.a_mm, 0.0)                    # -d^2 a / dm^2 >= 0 for log-concave likelihoods
    sWm = np.sqrt(Wm)
    Lm = C.chol_B(K, sWm)
    b = Wm * s.m + s.a_m
    d_alpha = b - C.solve_C(sWm, Lm, K @ b) - s.alpha
    W = s.W
    d_fixed = np.maximum(-2.0 * s.a_v, 0.0) - W
    try:
        d_W = -np.linalg.solve(np.eye(W.size) - 2.0 * s.a_vv[:, None] * P, residual)
    except np.linalg.LinAlgError:
        return d_alpha, d_fixed
    if np.all(np.isfinite(d_W)) and np.all(W + d_W >= 0.0) and -0.5 * (P @ residual) @ d_W > 0.0:
        return d_alpha, d_W
    return d_alpha, d_fixed


def _directions(K, s):
    """Joint Newton direction for the stationarity conditions (F.3)

        K a_m(m, v) - m = 0,     W + 2 a_v(m, v) = 0,      m = K alpha, v = diag (K^-1 + W)^-1,

    solved for (dm, dW) (the thesis's O(8 n^3) Newton step, in the B-form variables); dalpha follows from the
    first condition without K^-1. Used when it is an ascent direction of J that keeps W >= 0; otherwise the
    block directions (:func:`_block_directions`)."""
    n = K.shape[0]
    W = s.W
    residual = W + 2.0 * s.a_v
    P = s.V * s.V                                 # d diag(V) / dW = -(V o V)
    A = np.empty((2 * n, 2 * n))
    A[:n, :n] = K * s.a_mm[None, :] - np.eye(n)
    A[:n, n:] = -(K * s.a_mv[None, :]) @ P
    A[n:, :n] = np.diag(2.0 * s.a_mv)
    A[n:, n:] = np.eye(n) - 2.0 * s.a_vv[:, None] * P
    rhs = -np.concatenate([K @ s.a_m - s.m, residual])
    try:
        d = np.linalg.solve(A, rhs)
    except np.linalg.LinAlgError:
        return _block_directions(K, s, residual, P)
    dm, d_W = d[:n], d[n:]
    d_alpha = s.a_mm * dm - s.a_mv * (P @ d_W) + s.a_m - s.alpha
    slope = (K @ (s.a_m - s.alpha)) @ d_alpha - 0.5 * (P @ residual) @ d_W
    if np.all(np.isfinite(d)) and np.all(W + d_W >= 0.0) and slope > 0.0:
        return d_alpha, d_W
    return _block_directions(K, s, residual, P)


def newton_on_bound(K, y, likelihood) -> Algorithm:
    """Newton steps on (alpha, W) with step halving on J; ``init`` takes the starting ``(alpha, W)``."""
    def init(start):
        alpha0, W0 = start
        return kl_state(K, y, likelihood, np.asarray(alpha0, float).copy(), np.asarray(W0, float).copy())

    def step(s):
        d_alpha, d_W = _directions(K, s)
        size = 1.0
        while size >= 1e-12:
            new = kl_state(K, y, likelihood, s.alpha + size * d_alpha, s.W + size * d_W)
            if np.isfinite(new.objective) and new.objective >= s.objective - 1e-13 * abs(s.objective):
                break
            size *= 0.5
        else:                               # no ascent left at machine precision: stationary
            finite = np.isfinite(s.objective) and np.all(np.isfinite(d_alpha)) and np.all(np.isfinite(d_W))
            return s, KLInfo(objective=s.objective, change=0.0, moving=not finite, stalled=True)
        dm = size * float(np.max(np.abs(K @ d_alpha)))
        dW = size * float(np.max(np.abs(d_W)))
        info = KLInfo(objective=new.objective, change=(new.objective - s.objective) / max(1.0, abs(new.objective)),
                      moving=(dm > 1e-6 * (1.0 + float(np.max(np.abs(new.m))))
                              or dW > 1e-6 * (1.0 + float(np.max(new.W)))))
        return new, info

    return Algorithm(init, step)


def kl_fit(K, y, likelihood, *, alpha0=None, W0=None, max_iter=500, tol=1e-10, progress=False,
           owner: str = "kl") -> KLResult:
    """Maximise the Jensen bound over (alpha, W), from the Laplace approximation unless given a start."""
    if alpha0 is None or W0 is None:
        la = laplace_mode(K, y, likelihood)
        alpha0 = la.alpha if alpha0 is None else alpha0
        W0 = la.sW ** 2 if W0 is None else W0
    run = iterate(newton_on_bound(K, y, likelihood), (alpha0, W0), max_iter=max_iter, tol=tol, progress=progress,
                  desc=f"kl ({likelihood})", unit="Newton step", owner=owner, change_name="gain of J")
    return KLResult(*run.state, trace=run.trace, iterations=run.iterations, converged=run.converged)


def kl_log_evidence_grad(K, dK, y, likelihood, res=None, **fit_kw):
    """ln Z_KL and d ln Z_KL / d log-hyperparameters at the optimum (envelope theorem; see module docstring)."""
    if res is None:
        res = kl_fit(K, y, likelihood, **fit_kw)
    n = K.shape[0]
    s = res
    Cm = C.C_matrix(s.sW, s.L)
    A = np.eye(n) - K @ Cm                              # V K^-1
    G = np.outer(s.a_m, s.alpha)
    M = 0.5 * (G + G.T) + A.T @ (s.a_v[:, None] * A) - 0.5 * np.outer(s.alpha, s.alpha) - 0.5 * Cm @ K @ Cm
    g = np.array([float(np.sum(dK[j] * M)) for j in range(dK.shape[0])])
    return s.log_evidence, g, res


def kl_posterior(model, data, opts=None, progress=False, owner: str = "kl") -> C.Posterior:
    """The KL-optimal Q = N(m, V) at the model's hyperparameters, as the family's posterior struct; its evidence is
    the maximised Jensen bound."""
    opts = C.with_defaults(OPTIONS, opts)
    res, _, _ = C.run_at_hyperparameters(model, data, kl_fit, max_iter=opts["max_iter"], tol=opts["tol"],
                                         progress=progress, owner=owner)
    return C.Posterior(mean=res.m, cov=res.V, log_evidence=res.log_evidence, jensen_bound=res.log_evidence,
                       alpha=res.alpha, sW=res.sW, objective={"jensen_bound": res.trace},
                       objective_name="jensen_bound", iterations=res.iterations, converged=res.converged)


@register("kl", kind="approximation", family="gpc", options=OPTIONS, defaults=APPROXIMATION_DEFAULTS,
          memory=C.memory(12.5))
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """KL method: the Gaussian maximising the Jensen bound, i.e. minimising KL(Q || P) (thesis §4.5)."""
    return C.approximation_run(model, data, kl_posterior, opts, ctx,
                               draws=draws, chains=chains, limit=f"{opts['max_iter']} iterations")
