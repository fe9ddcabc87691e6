"""What the SLM backends share: the problem's operators and potentials, and the Fit builders.

``problem(model, data)`` gathers X, B (PyLops operators), y, sigma2 and the potentials (tau per potential) once;
``point_fit`` stores a point estimate (MAP) as its draws, ``gaussian_fit`` i.i.d. draws of a Gaussian posterior
N(mean, cov) (SBL, and the Gaussian approximations to come: EP, double loop).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from bayeszoo import checks
from bayeszoo.results import build_fit
from bayeszoo.inference._gaussian import gaussian_draws
from bayeszoo.inference._options import Timer  # noqa: F401  (re-exported)
from bayeszoo.numerics.blas_threads import one_blas_thread
from bayeszoo.numerics.potentials import Potential


def owner(backend: str) -> str:
    """Whose option it is, in the ValueErrors of the backends' ``check`` functions."""
    return f"SLM backend {backend!r}"


def check_iterations(backend: str, opts: dict, *names) -> dict:
    """``checks.iterations`` with this family's owner in the messages."""
    return checks.iterations(owner(backend), opts, *names)


def blas_threads(always: bool = False):
    """Decorator for a backend's ``run(model, data, ...)``: BLAS on one thread for problems with fewer than
    ``numerics.blas_threads.SMALL_N`` unknowns (loops of small factorisations, where waking a second thread costs
    more than the work) and, with ``always``, at every size (the operator algorithms, whose BLAS calls are
    level-1 products of long vectors between FFTs and wavelet transforms: on a shared 2-core machine a second
    thread only waits for its turn)."""
    def decorate(run):
        @functools.wraps(run)
        def wrapper(model, data, **kwargs):
            with one_blas_thread(0 if always else data.d):
                return run(model, data, **kwargs)
        return wrapper
    return decorate


def cholesky(A, backend: str) -> np.ndarray:
    """The lower Cholesky factor of a posterior precision matrix A; a ValueError saying why when A has overflowed
    or is not numerically positive definite, which happens when the scales of X^T X / sigma2 and of the
    potentials' precisions are too far apart for double precision."""
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{owner(backend)}: the posterior precision matrix overflowed (X^T X / sigma2 or the "
                         f"potentials' precisions exceed double precision); rescale X, y and sigma2, or tau")
    try:
        return sla.cholesky(A, lower=True)
    except np.linalg.LinAlgError:
        d = np.abs(np.diag(A))
        raise ValueError(f"{owner(backend)}: the posterior precision matrix is not positive definite in double "
                         f"precision (its diagonal spans {d.min():.3g} to {d.max():.3g}): the scales of X^T X / "
                         f"sigma2 and of the potentials' precisions are too far apart; rescale X, y and sigma2, "
                         f"or tau") from None


def check_finite(x, backend: str, what: str) -> np.ndarray:
    """``x``, or a ValueError when it has left double precision (NaN or inf), so that a backend reports why rather
    than handing NaN on."""
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{owner(backend)}: {what} left double precision (NaN or inf): the scales of X^T X / "
                         f"sigma2 and of the potentials' precisions are too far apart; rescale X, y and sigma2, "
                         f"or tau")
    return x


@dataclass
class Problem:
    """One SLM posterior: N(y | X u, sigma2 I) prod_j T_j((B u)_j)."""

    X: object            # PyLops operator, m x n
    B: object            # PyLops operator, q x n
    y: np.ndarray
    sigma2: float
    potential: Potential
    shape: tuple

    @property
    def n(self) -> int:
        return int(self.X.shape[1])

    @property
    def q(self) -> int:
        return int(self.B.shape[0])

    def neg_log_joint(self, u) -> float:
        """||X u - y||^2 / (2 sigma2) - sum_j ln T_j((B u)_j): the MAP objective."""
        r = self.X @ u - self.y
        return float(0.5 * (r @ r) / self.sigma2 - np.sum(self.potential.log_t(self.B @ u)))

    def gradient(self, u) -> np.ndarray:
        """Gradient of :meth:`neg_log_joint` (for the Laplace potential a subgradient)."""
        return self.X.H @ (self.X @ u - self.y) / self.sigma2 - self.B.H @ self.potential.dlog_t(self.B @ u)


def problem(model, data) -> Problem:
    return Problem(X=model.operator_X(data), B=model.operator_B(data), y=np.asarray(data.y, dtype=float),
                   sigma2=float(model.sigma2), potential=model.potentials(data), shape=model.signal_shape(data))


def point_fit(model, data, backend, u, *, draws, chains, timing, info, objective=None):
    """A point estimate stored as ``chains`` x ``draws`` identical draws (kind "approximation")."""
    u = np.broadcast_to(np.asarray(u, dtype=float), (chains, draws, u.size))
    return build_fit(model, data, backend, "approximation", {"u": np.array(u)}, timing=timing, info=info,
                     objective=objective)


def gaussian_fit(model, data, backend, mean, cov, *, draws, chains, seed, timing, info, objective=None):
    """i.i.d. draws from N(mean, cov) (kind "approximation"); ``info["mean"]`` keeps the exact mean."""
    rng = np.random.default_rng(np.random.SeedSequence([0 if seed is None else int(seed), 7919]))
    u = gaussian_draws(rng, np.asarray(mean, float), np.asarray(cov, float), chains, draws)
    info = {**info, "mean": np.asarray(mean, dtype=float).tolist()}
    return build_fit(model, data, backend, "approximation", {"u": u}, timing=timing, info=info, objective=objective)
