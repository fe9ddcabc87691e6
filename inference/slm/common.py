"""What the SLM backends share: the problem's operators and potentials, the precision matrix's Cholesky factor, the
starting precisions and the ``potentials`` group.

``problem(model, data)`` gathers X, B (PyLops operators), y, sigma2 and the potentials (tau per potential) once.
The backends' results become a Fit through :mod:`bayeszoo.inference.chains` (``gibbs``) and
:mod:`bayeszoo.inference.approximations` (the others); what an approximation learns per potential (precisions,
variances of s = B u) goes into the ``potentials`` group over ``potential`` (:func:`potentials_group`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import xarray as xr

from bayeszoo.numerics.blas_threads import one_blas_thread
from bayeszoo.numerics.linalg import cholesky
from bayeszoo.numerics.potentials import Potential
from bayeszoo.memory_guard import Need, dense

#: the group of a fit that holds one value per potential (dim ``potential``): what an approximation learnt about
#: each T_j
POTENTIALS_GROUP = "potentials"


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


def precision_cholesky(A, owner: str) -> np.ndarray:
    """The lower Cholesky factor of a posterior precision matrix A; a ValueError saying why when A has overflowed
    or is not numerically positive definite, which happens when the scales of X^T X / sigma2 and of the
    potentials' precisions are too far apart for double precision. No jitter: added to a precision matrix it
    would change the posterior the matrix stands for (a failure here means the inputs need rescaling). ``owner``
    names the backend in the error."""
    who = owner

    def failure(A, reason):
        if reason == "not finite":
            return (f"{who}: the posterior precision matrix overflowed (X^T X / sigma2 or the potentials' precisions "
                    f"exceed double precision); rescale X, y and sigma2, or tau")
        d = np.abs(np.diag(A))
        return (f"{who}: the posterior precision matrix is not positive definite in double precision (its diagonal "
                f"spans {d.min():.3g} to {d.max():.3g}): the scales of X^T X / sigma2 and of the potentials' "
                f"precisions are too far apart; rescale X, y and sigma2, or tau")

    return cholesky(A, failure=failure)


def check_finite(x, owner: str, what: str) -> np.ndarray:
    """``x``, or a ValueError when it has left double precision (NaN or inf), so that a backend reports why rather
    than handing NaN on."""
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{owner}: {what} left double precision (NaN or inf): the scales of X^T X / "
                         f"sigma2 and of the potentials' precisions are too far apart; rescale X, y and sigma2, "
                         f"or tau")
    return x


def prior_precision(pot: Potential) -> np.ndarray:
    """1 / E[gamma] under the potentials' mixing distributions: where the Gibbs chains, EP's sites and the double
    loop's variational parameters start."""
    tau = np.asarray(pot.tau, dtype=float)
    if pot.name == "laplace":
        return tau**2 / 2.0
    if pot.name == "student":
        return tau * np.maximum(pot.nu - 2.0, 1.0) / pot.nu
    if pot.name == "logistic":
        return 12.0 * tau**2 / np.pi**2       # E[gamma] = Var(s) = pi^2 / (12 tau^2)
    if pot.name == "sigmoid":
        return tau**2 / np.pi**2              # symmetric part sech(tau s / 2) / 2: Var(s) = pi^2 / tau^2
    return tau


#: what to do when an SLM fit with dense matrices needs more memory than the machine has
MEMORY_ADVICE = ("use an algorithm on the operators, which holds no n x n matrix: gibbs with solver='cg', map with "
                 "solver 'fista' or 'lbfgs', or dloop (dense only up to n = 2000)")


def dense_memory(model, data, square: float, B_copies: float = 1, X_copies: float = 1) -> Need:
    """The working memory of an SLM backend on dense algebra (``bayeszoo.memory_guard``): ``square`` n x n matrices (the
    posterior precision, its Cholesky factor, X^T X, the covariance), ``B_copies`` dense copies of B (q x n) and
    ``X_copies`` of X (m x n), as counted on the backend's code path."""
    m, n = data.n, data.d
    q = int(model.operator_B(data).shape[0])
    return Need({f"{square:g} matrices of {n:,} x {n:,} (precision, its factor, covariance)": dense(n, n, square),
                 f"dense B ({q:,} x {n:,})": dense(q, n, B_copies),
                 f"dense X ({m:,} x {n:,})": dense(m, n, X_copies)}, MEMORY_ADVICE)


def potentials_group(**values) -> dict:
    """``extra_groups`` holding one array per name, each with one value per potential."""
    return {POTENTIALS_GROUP: xr.Dataset({name: xr.DataArray(np.asarray(v, dtype=float), dims=("potential",))
                                          for name, v in values.items()})}


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

    def neg_log_joint(self, u, s=None) -> float:
        """||X u - y||^2 / (2 sigma2) - sum_j ln T_j((B u)_j): the MAP objective (``s``: B u when known)."""
        r = self.X @ u - self.y
        s = self.B @ u if s is None else s
        return float(0.5 * (r @ r) / self.sigma2 - np.sum(self.potential.log_t(s)))

    def gradient(self, u) -> np.ndarray:
        """Gradient of :meth:`neg_log_joint` (for the Laplace potential a subgradient)."""
        return self.X.H @ (self.X @ u - self.y) / self.sigma2 - self.B.H @ self.potential.dlog_t(self.B @ u)


def problem(model, data) -> Problem:
    return Problem(X=model.operator_X(data), B=model.operator_B(data), y=np.asarray(data.y, dtype=float),
                   sigma2=float(model.sigma2), potential=model.potentials(data), shape=model.signal_shape(data))
