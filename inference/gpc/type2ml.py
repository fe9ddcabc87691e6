"""Evidence and type-II maximum likelihood for GP classification.

:func:`log_evidence_and_grad` gives ln Z of the Laplace, EP or KL approximation at given log-hyperparameters,
with its analytic gradient: R&W Alg. 5.1 for Laplace (including the implicit term through f_hat), R&W 5.27 for
EP at its fixed point, and for KL the maximised Jensen bound (4.13), differentiated by the envelope theorem.
:func:`optimize_hyperparameters` maximises it over the log-hyperparameters with scipy's L-BFGS-B.

This module builds on the method modules (:mod:`.laplace`, :mod:`.ep`, :mod:`.kl`); they never import it.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from . import common as C
from .ep import ep_log_evidence_grad
from .kl import kl_log_evidence_grad
from .laplace import laplace_log_evidence_grad

#: approximations with an analytic evidence gradient, and that gradient
EVIDENCE_GRADIENTS = {"laplace": laplace_log_evidence_grad, "ep": ep_log_evidence_grad, "kl": kl_log_evidence_grad}
TYPE2_METHODS = tuple(EVIDENCE_GRADIENTS)


def _check_method(method):
    if method not in EVIDENCE_GRADIENTS:
        raise ValueError(f"method must be one of {TYPE2_METHODS}, got {method!r}")


def log_evidence_and_grad(model, data, hyp, method="laplace", **kw):
    """(ln Z, d ln Z / d hyp) of the Laplace, EP or KL approximation at log-hyperparameters ``hyp``
    (KL: its maximised Jensen bound, differentiated by the envelope theorem). ``kw`` go to the method's own
    iteration (e.g. ``tol``, ``max_sweeps`` for EP)."""
    _check_method(method)
    y = C.labels_pm(data.y)
    K, dK = C.kernel_and_grads(model, data.X, hyp)
    with C.quiet_numerics():
        lZ, g, _ = EVIDENCE_GRADIENTS[method](K, dK, y, model.likelihood, **kw)
    return lZ, g


def optimize_hyperparameters(model, data, method="laplace", *, x0=None, max_iter=200, bounds=(-8.0, 8.0),
                             return_result=False):
    """Type-II maximum likelihood: maximise ln Z_LA, ln Z_EP or ln Z_KL over the log-hyperparameters (L-BFGS-B
    with analytic gradients). Returns a copy of ``model`` with the optimum (and the scipy result if asked)."""
    _check_method(method)
    model.validate(data)
    x0 = C.get_hyp(model, data.X) if x0 is None else np.asarray(x0, float)

    def obj(h):
        lZ, g = log_evidence_and_grad(model, data, h, method)
        if not np.isfinite(lZ) or not np.all(np.isfinite(g)):
            return 1e300, np.zeros_like(h)
        return -lZ, -g

    res = minimize(obj, x0, jac=True, method="L-BFGS-B", bounds=[bounds] * x0.size,
                   options={"maxiter": max_iter})
    out = C.with_hyp(model, res.x)
    return (out, res) if return_result else out
