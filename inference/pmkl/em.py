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

import numpy as np

from bayeszoo import checks
from bayeszoo.inference.timing import Timer
from bayeszoo.inference.approximations import approximation_fit
from bayeszoo.progress import progress_bar
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, owner, register

from . import _common as MK

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


def em_estimate(model, data, *, variant="em", max_iter=100, tol=1e-4, learn_beta=True, progress=False):
    """Algorithm 5 (``variant="em"``) or 4 (``"map"``); returns the estimates and traces."""
    Ks = model.train_kernels(data)
    S, N = Ks.shape[:2]
    C = model.n_classes(data)
    y = data.y.astype(int)
    onehot = np.eye(C, dtype=bool)[y]
    tau, nu = float(model.tau), float(model.nu)
    beta = model.default_beta(S)
    learn_beta = learn_beta and model.rule == "convex"
    A = np.ones((N, C))
    Y = np.where(onehot, 1.0, 0.0)
    W = np.zeros((N, C))
    trace, converged = [], False
    with progress_bar(total=max_iter, desc=variant, disable=not progress, unit="iteration") as bar:
        for it in range(max_iter):
            K = MK.combine(Ks, beta, model.rule)
            W_new, Ls = MK.w_posterior(K, K @ K, Y, A)
            M = K @ W_new
            Y_new = MK.cone_moments(M, onehot)[0] if variant == "em" else map_y(M, onehot)
            A = ((2 * tau + 1) if variant == "em" else (2 * tau - 1)) / (W_new**2 + 2 * nu)
            if learn_beta:
                beta = MK.simplex_qp(*MK.beta_qp_terms(Ks, W_new, Y_new), x0=beta)
            change = max(np.linalg.norm(W_new - W) / max(np.linalg.norm(W_new), 1e-300),
                         np.linalg.norm(Y_new - Y) / max(np.linalg.norm(Y_new), 1e-300))
            W, Y = W_new, Y_new
            trace.append(MK.train_loglik(K, W, y))
            bar.update()
            if change < tol:
                converged = True
                break
    K = MK.combine(Ks, beta, model.rule)
    W, Ls = MK.w_posterior(K, K @ K, Y, A)
    return {"W": W, "Ls": Ls, "A": A, "beta": beta, "Y": Y, "trace": np.asarray(trace),
            "iterations": len(trace), "converged": converged}


def map_check(options, model, data):
    """map: the chapter-5 rule check, and tau > 1/2 for the mode of alpha."""
    MK.check_rule("map")(options, model, data)
    if float(model.tau) <= 0.5:
        raise ValueError(f"{owner('pmkl', 'map')} uses the mode (2 tau - 1) / (w^2 + 2 nu) of alpha (eq. 5.9), "
                         f"which needs tau > 1/2; got PMKL(tau={model.tau})")
    return options


def _run(variant, model, data, draws, chains, seed, progress, opts):
    timer = Timer()
    res = em_estimate(model, data, variant=variant, progress=progress, **opts)
    q = MK.conditional_w(model, data, res["W"], res["Ls"], res["A"], res["beta"],
                      objective={"train_loglik": res["trace"]}, iterations=res["iterations"],
                      converged=res["converged"])
    return approximation_fit(model, data, variant, q, draws=draws, chains=chains, seed=seed,
                             timing={"tune": timer()}, owner=owner("pmkl", variant),
                             limit=f"{opts['max_iter']} iterations", info={"train_loglik": float(res["trace"][-1])})


@register("em", kind="approximation", family="pmkl", applies=MK.fixed_kernels, options=OPTIONS,
          check=MK.check_rule("em"), defaults=APPROXIMATION_DEFAULTS, memory=MK.memory(9.5),
          description="EM point estimates with the beta QP (Algorithm 5)")
def run_em(model, data, *, draws, tune, chains, seed, progress, **opts):
    """EM (Algorithm 5): E-steps for Y and A, M-step for W, QP for beta."""
    return _run("em", model, data, draws, chains, seed, progress, opts)


@register("map", kind="approximation", family="pmkl", applies=MK.fixed_kernels, options=OPTIONS, check=map_check,
          defaults=APPROXIMATION_DEFAULTS, memory=MK.memory(9.5),
          description="MAP point estimates with the beta QP (Algorithm 4)")
def run_map(model, data, *, draws, tune, chains, seed, progress, **opts):
    """MAP (Algorithm 4): modes for Y and A, M-step for W, QP for beta."""
    return _run("map", model, data, draws, chains, seed, progress, opts)
