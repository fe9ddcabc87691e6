"""MAP estimation / penalised least squares for the SLM (Nickisch thesis §2.5.6, (5.4); §6.3 "L1", "L1+TV").

    u_MAP = argmin_u  ||X u - y||^2 / (2 sigma2) - sum_j ln T_j((B u)_j)

convex for the log-concave potentials (Laplace, logistic, Gaussian); for Student's t a local minimum from u = 0.
Solvers (option ``solver``, "auto" picks the first that fits):

* ``fista``: PyLops' FISTA (Beck & Teboulle 2009) on the coefficients c = B u, for Laplace potentials with an
  orthonormal B (``identity``, ``wavelet``): min ||X B^T c - y||^2 / 2 + sigma2 tau ||c||_1;
* ``admm``: ADMM with the split s = B u (Boyd et al. 2011, §6.4), for Laplace potentials with any B (L1+TV): an
  exact u-step (dense Cholesky for n <= ``DENSE_N``, CG on the operators above), soft thresholding in s;
* ``lbfgs``: SciPy's L-BFGS-B on u, for the smooth potentials (Student's t, logistic, Gaussian).

The result is a :class:`~bayeszoo.inference.approximations.PointEstimate` (every draw is the estimate), the
objective trace ``neg_log_joint``.
"""
from __future__ import annotations

import time

import numpy as np
import scipy.linalg as sla
from scipy.optimize import minimize
from scipy.sparse.linalg import LinearOperator, cg

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Interval, OneOf
from bayeszoo.inference.approximations import PointEstimate, approximation_fit
from bayeszoo.inference.slm._common import blas_threads, check_finite, dense_memory, precision_cholesky, problem
from bayeszoo.resources import Need
from bayeszoo.numerics.linalg import DENSE_N   # the ADMM u-step factorises X^T X / sigma2 + rho B^T B up to this n
from bayeszoo.progress import progress_bar, show
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, owner, register

SOLVERS = ("auto", "fista", "admm", "lbfgs")


def _check(options, model, data):
    choose_solver(model, options["solver"])     # a solver that does not fit the potential or B


def choose_solver(model, solver: str) -> str:
    """The solver ``auto`` means for this model; a ValueError when the asked one does not fit."""
    orthonormal = model.B in ("identity", "wavelet")
    fits = {"fista": model.potential == "laplace" and orthonormal, "admm": model.potential == "laplace",
            "lbfgs": model.potential != "laplace"}
    if solver == "auto":
        return "fista" if fits["fista"] else "admm" if fits["admm"] else "lbfgs"
    if not fits[solver]:
        raise ValueError(f"{owner('slm', 'map')}: solver {solver!r} does not fit potential={model.potential!r}, "
                         f"B={model.B!r} (fista: Laplace with B 'identity' or 'wavelet'; admm: Laplace; "
                         f"lbfgs: the smooth potentials)")
    return solver


def _lipschitz(Op, iters: int = 300) -> float:
    """A bound on the largest eigenvalue of Op^H Op: a seeded power iteration (so the step, and the estimate, do
    not change between runs), enlarged by 1 %."""
    v = np.random.default_rng(0).standard_normal(Op.shape[1])
    lam = 0.0
    for _ in range(iters):
        w = Op.H @ (Op @ v)
        lam = float(np.linalg.norm(w))
        if lam == 0.0:
            return 1.0
        v = w / lam
    return 1.01 * lam


def _fista(prob, max_iter, tol, bar):
    from pylops.optimization.sparsity import fista

    tau = float(prob.potential.tau[0])       # identity / wavelet rows all carry tau
    Op = prob.X @ prob.B.H                   # X B^T: B orthonormal, u = B^T c
    trace = []
    # PyLops' FISTA thresholds at eps * step / 2, i.e. it minimises ||y - Op c||^2 / 2 + (eps / 2) ||c||_1
    def step(c):
        trace.append(prob.neg_log_joint(prob.B.H @ c))
        bar.update()

    c, iters, _ = fista(Op, prob.y, niter=max_iter, eps=2.0 * prob.sigma2 * tau, tol=tol, alpha=1.0 / _lipschitz(Op),
                        callback=step)
    return prob.B.H @ c, int(iters), np.asarray(trace), int(iters) < max_iter


def _admm(prob, max_iter, tol, rho, bar):
    X, B, y, s2 = prob.X, prob.B, prob.y, prob.sigma2
    tau = np.asarray(prob.potential.tau, dtype=float)
    n = prob.n
    if rho is None:                          # balance the two quadratic terms of the u-step
        xs = np.linalg.norm(X @ np.ones(n)) ** 2 / s2
        bs = np.linalg.norm(B @ np.ones(n)) ** 2
        rho = float(max(xs, 1e-3 * (bs + 1.0)) / max(bs, 1.0))
    Xty = X.H @ y / s2
    if n <= DENSE_N:
        from bayeszoo.numerics.operators import to_dense

        Xd, Bd = to_dense(X), to_dense(B)
        cho = (precision_cholesky(Xd.T @ Xd / s2 + rho * Bd.T @ Bd, "map"), True)

        def solve(rhs, _):
            return sla.cho_solve(cho, rhs)
    else:
        A = LinearOperator((n, n), matvec=lambda v: X.H @ (X @ v) / s2 + rho * (B.H @ (B @ v)), dtype=float)

        def solve(rhs, x0):
            return cg(A, rhs, x0=x0, rtol=1e-10, maxiter=5 * n)[0]

    u = np.zeros(n)
    z = np.zeros(prob.q)
    w = np.zeros(prob.q)
    trace = []
    converged = False
    for it in range(1, max_iter + 1):
        u = check_finite(solve(Xty + rho * (B.H @ (z - w)), u), "map", "the ADMM iterate")
        Bu = B @ u
        z_old = z
        v = Bu + w
        z = np.sign(v) * np.maximum(np.abs(v) - tau / rho, 0.0)     # prox of (tau / rho) |.|
        w = w + Bu - z
        trace.append(prob.neg_log_joint(u))
        primal = np.linalg.norm(Bu - z)
        dual = rho * np.linalg.norm(B.H @ (z - z_old))
        scale = max(np.linalg.norm(Bu), np.linalg.norm(z), 1e-12)
        bar.update()
        show(bar, f"primal residual {primal / scale:.2g} (tol {tol:g})")
        if primal <= tol * scale and dual <= tol * max(rho * np.linalg.norm(B.H @ w), 1e-12):
            converged = True
            break
    return u, it, np.asarray(trace), converged


def _lbfgs(prob, max_iter, tol, bar):
    trace = []
    # L-BFGS-B multiplies gradients together: beyond objectives of ~1e150 (a tiny sigma2) they overflow and it stops
    # at once, reporting success, so it minimises a copy scaled below 1e100 (no change for ordinary problems)
    at_zero = check_finite(prob.neg_log_joint(np.zeros(prob.n)), "map", "the objective at u = 0")
    scale = max(1.0, abs(float(at_zero)) * 1e-100)

    def fun(u):
        value = prob.neg_log_joint(u)
        trace.append(value)
        return value / scale, prob.gradient(u) / scale

    res = minimize(fun, np.zeros(prob.n), jac=True, method="L-BFGS-B", callback=lambda _: bar.update(),
                   options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-12, "maxcor": 20})
    return res.x, int(res.nit), np.asarray(trace), bool(res.success)


def memory(model, data, options) -> Need:
    """ADMM up to n = DENSE_N factorises X^T X / sigma2 + rho B^T B densely; FISTA, L-BFGS and ADMM above hold
    vectors only."""
    if choose_solver(model, options["solver"]) == "admm" and data.d <= DENSE_N:
        return dense_memory(model, data, 3)
    return Need({})


@register("map", kind="approximation", family="slm", check=_check, memory=memory,
          defaults={**APPROXIMATION_DEFAULTS, "draws": 1, "chains": 1},
          description="MAP / penalised least squares (L1, L1+TV): FISTA, ADMM or L-BFGS",
          options={"solver": Option("auto", "fista (Laplace, orthonormal B), admm (Laplace, any B), lbfgs "
                                            "(smooth potentials) or auto", OneOf(SOLVERS)),
                   "max_iter": Option(5000, "most iterations of the solver", POSITIVE_INT),
                   "tol": Option(1e-10, "relative tolerance of the solver's stopping rule", POSITIVE),
                   "rho": Option(None, "ADMM penalty (None: balances X^T X / sigma2 against B^T B)",
                                 Interval(float, 0, None, "neither", none=True))})
@blas_threads()
def run(model, data, *, draws, tune, chains, seed, progress, solver, max_iter, tol, rho):
    """The MAP estimate of u (penalised least squares)."""
    t0 = time.perf_counter()
    solver = choose_solver(model, solver)
    prob = problem(model, data)
    with progress_bar(total=max_iter, desc=f"map ({solver})", disable=not progress, unit="iteration") as bar:
        if solver == "fista":
            u, iters, trace, converged = _fista(prob, max_iter, tol, bar)
        elif solver == "admm":
            u, iters, trace, converged = _admm(prob, max_iter, tol, rho, bar)
        else:
            u, iters, trace, converged = _lbfgs(prob, max_iter, tol, bar)
    check_finite(u, "map", f"the {solver} estimate")
    trace = np.append(trace, prob.neg_log_joint(u))    # the last entry is the estimate's objective
    estimate = PointEstimate(values={"u": u}, objective={"neg_log_joint": trace}, objective_name="neg_log_joint",
                             iterations=iters, converged=converged)
    warnings = [] if prob.potential.log_concave else [
        "Student's t potentials are not log-concave: the MAP estimate is a local minimum"]
    return approximation_fit(model, data, "map", estimate, draws=draws, chains=chains, seed=seed,
                             timing={"tune": time.perf_counter() - t0}, owner=owner("slm", "map"),
                             info={"solver": solver, "warnings": warnings},
                             limit=f"{iters} {solver} iterations (tol={tol:g})")
