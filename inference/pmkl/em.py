"""``em`` and ``map``: the point estimators of Damoulas ch. 5 (Algorithms 4 and 5), convex or mean rule.

    W  = (K K + A)^-1 K Y                                          (5.1)
    Y  em: moments of the cone-truncated Gaussian (5.4-5.6 = 4.15-4.16);
       map: its mode, the untruncated mean where feasible, else the truncation point (5.3)
    A  em: posterior mean (2 tau + 1) / (w^2 + 2 nu); map: mode (2 tau - 1) / (w^2 + 2 nu)   (5.9; map needs tau > 1/2)
    beta = argmin 1/2 b^T Omega b - b^T f on the simplex            (5.10, App. C with m_snc excluding beta, erratum 10)
Stops when the relative change of W and Y is below ``tol`` or after ``max_iter`` iterations. The ``objective``
group traces the training log likelihood sum_n log P(t_n | W, k_n) (eq. 3.11 by quadrature); it is monitored, not
the quantity the iterations maximise, so ``fit.info["objective"]`` is None.

These are point estimates. The fit's draws of W come from the Gaussian conditional N(W^, V_c) at the estimates
(eq. 3.22 with Y, A, beta at their estimates): a ``GaussianApproximation`` of W, with ``log_alpha`` and ``beta``
fixed at their estimates, so ``predict`` averages over it. ``kind`` is ``approximation``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayeszoo import checks
from bayeszoo.inference.approximations import approximation_fit
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.inference.timing import Timer
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import common as MK

OPTIONS = {
    "max_iter": Option(100, "largest number of iterations", checks.POSITIVE_INT),
    "tol": Option(1e-4, "stop when the relative change of W and of Y falls below this", checks.POSITIVE),
    "learn_beta": Option(True, "estimate the kernel weights beta by the simplex QP (convex rule; the mean rule "
                               "keeps them equal)", checks.Flag()),
}


def map_y(M, onehot):
    """Mode of the cone-truncated Gaussian given means M (5.3)."""
    m_t = np.sum(np.where(onehot, M, 0.0), -1, keepdims=True)
    return np.where(onehot, M, np.minimum(M, m_t))


class EMState(NamedTuple):
    """The estimates after an iteration: weights ``W``, latent scores ``Y``, precisions ``A``, kernel weights
    ``beta``, and ``objective``, the training log likelihood (None before the first iteration)."""

    W: np.ndarray
    Y: np.ndarray
    A: np.ndarray
    beta: np.ndarray
    objective: float | None


class EMInfo(NamedTuple):
    """One iteration: the training log likelihood after it and ``change``, the larger relative change of W and
    of Y."""

    objective: float
    change: float


class EMEstimate(NamedTuple):
    """The final estimates ``W`` (with ``Ls``, its posterior's factors, at the final beta), ``A``, ``beta``, ``Y``,
    the training log likelihood ``trace``, ``iterations`` and ``converged``."""

    W: np.ndarray
    Ls: list
    A: np.ndarray
    beta: np.ndarray
    Y: np.ndarray
    trace: np.ndarray
    iterations: int
    converged: bool


def em_iterations(Ks, y, onehot, *, tau, nu, rule, variant, learn_beta) -> Algorithm:
    """Algorithm 5 (``variant="em"``: E-steps for Y and A) or 4 (``"map"``: their modes), the M-step for W and
    the QP for beta; ``init`` takes the starting kernel weights."""
    N, C = onehot.shape

    def init(beta):
        return EMState(W=np.zeros((N, C)), Y=np.where(onehot, 1.0, 0.0), A=np.ones((N, C)), beta=beta,
                       objective=None)

    def step(s):
        beta = s.beta
        K = MK.combine(Ks, beta, rule)
        W_new, _ = MK.w_posterior(K, K @ K, s.Y, s.A)
        M = K @ W_new
        Y_new = MK.cone_moments(M, onehot)[0] if variant == "em" else map_y(M, onehot)
        A = ((2 * tau + 1) if variant == "em" else (2 * tau - 1)) / (W_new**2 + 2 * nu)
        if learn_beta:
            beta = MK.simplex_qp(*MK.beta_qp_terms(Ks, W_new, Y_new), x0=beta)
        change = max(np.linalg.norm(W_new - s.W) / max(np.linalg.norm(W_new), 1e-300),
                     np.linalg.norm(Y_new - s.Y) / max(np.linalg.norm(Y_new), 1e-300))
        loglik = MK.train_loglik(K, W_new, y)
        return EMState(W_new, Y_new, A, beta, loglik), EMInfo(loglik, change)

    return Algorithm(init, step)


def em_estimate(model, data, *, variant="em", max_iter=100, tol=1e-4, learn_beta=True, progress=False,
                owner: str = "approximation") -> EMEstimate:
    """Algorithm 5 (``variant="em"``) or 4 (``"map"``): the estimates and the trace of the training log
    likelihood; ``owner`` names the backend in errors."""
    Ks = model.train_kernels(data)
    S = Ks.shape[0]
    y = data.y.astype(int)
    onehot = np.eye(model.n_classes(data), dtype=bool)[y]
    algorithm = em_iterations(Ks, y, onehot, tau=float(model.tau), nu=float(model.nu), rule=model.rule,
                              variant=variant, learn_beta=learn_beta and model.rule == "convex")
    run = iterate(algorithm, model.default_beta(S), max_iter=max_iter, tol=tol, progress=progress, desc=variant,
                  owner=owner)
    s = run.state
    K = MK.combine(Ks, s.beta, model.rule)
    W, Ls = MK.w_posterior(K, K @ K, s.Y, s.A)
    return EMEstimate(W=W, Ls=Ls, A=s.A, beta=s.beta, Y=s.Y, trace=run.trace, iterations=run.iterations,
                      converged=run.converged)


def map_check(options, model, data, owner):
    """map: the chapter-5 rule check, and tau > 1/2 for the mode of alpha."""
    MK.check_rule(options, model, data, owner)
    if float(model.tau) <= 0.5:
        raise ValueError(f"{owner} uses the mode (2 tau - 1) / (w^2 + 2 nu) of alpha (eq. 5.9), "
                         f"which needs tau > 1/2; got PMKL(tau={model.tau})")
    return options


def _run(model, data, draws, chains, ctx, opts):
    timer = Timer()
    res = em_estimate(model, data, variant=ctx.backend, progress=ctx.progress, owner=ctx.owner, **opts)
    q = MK.conditional_w(model, data, res.W, res.Ls, res.A, res.beta, objective={"train_loglik": res.trace},
                         iterations=res.iterations, converged=res.converged)
    return approximation_fit(model, data, q, ctx=ctx, draws=draws, chains=chains,
                             timing={"tune": timer()},
                             limit=f"{opts['max_iter']} iterations", info={"train_loglik": float(res.trace[-1])})


@register("em", kind="approximation", family="pmkl", applies=MK.fixed_kernels, options=OPTIONS,
          check=MK.check_rule, defaults=APPROXIMATION_DEFAULTS, memory=MK.memory(9.5),
          description="EM point estimates with the beta QP (Algorithm 5)")
def run_em(model, data, *, draws, tune, chains, ctx, **opts):
    """EM (Algorithm 5): E-steps for Y and A, M-step for W, QP for beta."""
    return _run(model, data, draws, chains, ctx, opts)


@register("map", kind="approximation", family="pmkl", applies=MK.fixed_kernels, options=OPTIONS, check=map_check,
          defaults=APPROXIMATION_DEFAULTS, memory=MK.memory(9.5),
          description="MAP point estimates with the beta QP (Algorithm 4)")
def run_map(model, data, *, draws, tune, chains, ctx, **opts):
    """MAP (Algorithm 4): modes for Y and A, M-step for W, QP for beta."""
    return _run(model, data, draws, chains, ctx, opts)
