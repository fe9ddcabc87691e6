"""``laplace``: Laplace's method for binary GP classification (thesis section 4.3; R&W Alg. 3.1, 3.2, 5.1).

Newton's method for the mode of log p(f | y) in the stable B = I + W^1/2 K W^1/2 form (R&W Alg. 3.1), with
step-size control (step halving on Psi(a) = -a^T f / 2 + log p(y | f) along the Newton direction in alpha).
Q = N(f_hat, (K^-1 + W)^-1), W = -d^2 log p(y | f_hat). Evidence (4.15, corrected sign of log p(y | m)):

    ln Z_LA = log p(y | f_hat) - 1/2 f_hat^T K^-1 f_hat - 1/2 ln|I + K W|.

Its gradient w.r.t. the log-hyperparameters (:func:`laplace_log_evidence_grad`) is R&W Alg. 5.1, including the
implicit term through f_hat; :mod:`.type2ml` maximises it.
"""
from __future__ import annotations

import numpy as np
from scipy import linalg as sla

from bayeszoo.checks import POSITIVE, POSITIVE_INT
from bayeszoo.progress import progress_bar, show
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

from . import _common as C

OPTIONS = {
    "max_iter": Option(100, "largest number of Newton iterations for the mode", POSITIVE_INT),
    "tol": Option(1e-9, "convergence tolerance on the relative change of Psi between Newton iterations", POSITIVE),
}


@C.one_blas_thread_when_small
def laplace_mode(K, y, likelihood, *, a0=None, max_iter=100, tol=1e-9, progress=False):
    """Mode of the GPC posterior by Newton (R&W Alg. 3.1) with step halving.

    Returns a dict: ``f`` (mode), ``alpha`` (K^-1 f), ``sW``, ``L`` (chol B), ``d1``, ``d3`` (likelihood
    derivatives at the mode), ``log_lik``, ``log_evidence`` (ln Z_LA), ``psi`` trace, ``iterations``,
    ``converged``. ``progress`` shows a bar over the Newton steps.
    """
    n = K.shape[0]
    a = np.zeros(n) if a0 is None else np.asarray(a0, float).copy()
    f = K @ a

    def psi_of(a, f):
        return -0.5 * float(a @ f) + float(np.sum(C.log_lik(f, y, likelihood)))

    psi = psi_of(a, f)
    trace = [psi]
    converged = False
    it = 0
    with progress_bar(total=max_iter, desc=f"laplace ({likelihood})", disable=not progress,
                      unit="Newton step") as bar:
        for it in range(1, max_iter + 1):
            _, d1, d2, _ = C.log_lik_derivs(f, y, likelihood)
            W = -d2
            sW = np.sqrt(W)
            L = None                                     # the last step's factor: free before the next one
            L = C.chol_B(K, sW)
            b = W * f + d1
            a_new = b - C.solve_C(sW, L, K @ b)          # R&W Alg. 3.1 lines 6-7
            da = a_new - a
            step = 1.0
            while True:
                a_try = a + step * da
                f_try = K @ a_try
                psi_try = psi_of(a_try, f_try)
                if psi_try >= psi - 1e-12 * abs(psi) or step < 1e-10:
                    break
                step *= 0.5
            change = psi_try - psi
            df = float(np.max(np.abs(f_try - f)))
            a, f, psi = a_try, f_try, psi_try
            trace.append(psi)
            bar.update()
            show(bar, f"change of Psi {abs(change) / max(1.0, abs(psi)):.2g} (tol {tol:g})")
            if abs(change) < tol * max(1.0, abs(psi)) and df < 1e-8 * (1.0 + float(np.max(np.abs(f)))):
                converged = True
                break
    lp, d1, d2, d3 = C.log_lik_derivs(f, y, likelihood)
    sW = np.sqrt(-d2)
    L = None
    L = C.chol_B(K, sW)
    lZ = -0.5 * float(a @ f) + float(np.sum(lp)) - 0.5 * C.logdet_B(L)
    return {"f": f, "alpha": a, "sW": sW, "L": L, "d1": d1, "d3": d3, "log_lik": float(np.sum(lp)),
            "log_evidence": lZ, "psi": np.array(trace), "iterations": it, "converged": converged}


def laplace_log_evidence_grad(K, dK, y, likelihood, res=None, **mode_kw):
    """ln Z_LA and its gradient w.r.t. the log-hyperparameters (R&W Alg. 5.1, with the implicit term)."""
    if res is None:
        res = laplace_mode(K, y, likelihood, **mode_kw)
    sW, L, a, d1, d3 = res["sW"], res["L"], res["alpha"], res["d1"], res["d3"]
    R = C.C_matrix(sW, L)                                  # sW B^-1 sW = (K + W^-1)^-1
    Cm = sla.solve_triangular(L, sW[:, None] * K, lower=True, check_finite=False)
    # d lnZ / d f_hat = -1/2 d ln|B| / d f_hat = +1/2 diag(V) * d3, since dW_ii / df_i = -d3_i.
    # (R&W 5.23 / Alg. 5.1 line 7 with W = -d2, as in GPML infLaplace; checked by finite differences in the tests)
    s2 = 0.5 * (np.diag(K) - np.sum(Cm * Cm, 0)) * d3
    g = np.empty(dK.shape[0])
    for j in range(dK.shape[0]):
        Cj = dK[j]
        s1 = 0.5 * float(a @ Cj @ a) - 0.5 * float(np.sum(R * Cj))
        b = Cj @ d1
        s3 = b - K @ (R @ b)
        g[j] = s1 + float(s2 @ s3)
    return res["log_evidence"], g, res


def fit_laplace(model, data, opts=None, progress=False):
    """Laplace approximation at the model's hyperparameters: returns the mode dict plus K and y."""
    opts = C.with_defaults(OPTIONS, opts)
    return C.run_at_hyperparameters(model, data, laplace_mode, max_iter=opts["max_iter"], tol=opts["tol"],
                                    progress=progress)


def laplace_posterior(model, data, opts=None, progress=False) -> C.Posterior:
    """Laplace's Q = N(f_hat, (K^-1 + W)^-1) at the model's hyperparameters, as the family's posterior struct."""
    res = fit_laplace(model, data, opts, progress)
    K, y = res["K"], res["y"]
    V = C.posterior_cov(K, res["sW"], res["L"])
    jb = C.jensen_bound(y, res["f"], V, model.likelihood, sW=res["sW"], L=res["L"], alpha=res["alpha"])
    return C.Posterior(mean=res["f"], cov=V, log_evidence=res["log_evidence"], jensen_bound=jb, alpha=res["alpha"],
                       sW=res["sW"], objective={"psi": res["psi"]}, objective_name="psi",
                       iterations=res["iterations"], converged=res["converged"])


@register("laplace", kind="approximation", family="gpc", options=OPTIONS, defaults=APPROXIMATION_DEFAULTS,
          memory=C.memory(5, quadrature_rows=C.QUADRATURE_ROWS))
def run(model, data, *, draws, tune, chains, seed, progress, **opts):
    """Laplace's method: Gaussian at the posterior mode of f (Newton in the B = I + W^1/2 K W^1/2 form)."""
    return C.approximation_run(model, data, "laplace", laplace_posterior, opts, progress, draws=draws, chains=chains,
                               seed=seed, limit=f"{opts['max_iter']} Newton iterations")
