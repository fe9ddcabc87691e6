"""Double-loop variational inference for the SLM (Nickisch thesis §3.5, Alg. 3.1; the phi^(2) bound of (3.9)).

Every potential here is a maximum of Gaussians, ln T_j(s) = max_gamma -s^2 / (2 gamma) - h_j(gamma) / 2 (3.4, with
sigma = 1: the potentials are not scaled by the noise). Replacing each T_j by its Gaussian lower bound makes the
posterior Gaussian, N(m, A^-1) with A = X^T X / sigma2 + B^T diag(1/gamma) B, and bounds the log partition
function Z = int N(y | X u, sigma2 I) prod_j T_j((B u)_j) du:

    -2 ln Z <= phi(gamma) = h(gamma) + min_u R(u, gamma) + ln|A| + m ln(2 pi sigma2) - n ln(2 pi),
    R(u, gamma) = ||X u - y||^2 / sigma2 + sum_j [(B u)_j^2 / gamma_j - 2 beta_j (B u)_j]

(beta = 0 but for the tilted sigmoid likelihood, ln T = beta s + ln T_sym, whose symmetric part carries h).

phi is convex for log-concave potentials (Theorem 2) but ln|A| couples everything. The double loop bounds the
concave map 1/gamma -> ln|A| by its tangent, z^T (1/gamma) - const with z = diag(B A^-1 B^T) (the marginal
variances of s = B u under the current Gaussian; the bound phi^(2)), and alternates

* outer loop: z at the current gamma, by Lanczos (Alg. 3.2, :mod:`bayeszoo.numerics.lanczos`; k steps give an
  underestimate) or exactly by a dense Cholesky factor (``exact_variances``, small n);
* inner loop: minimise the decoupled surrogate jointly in (u, gamma). Minimising over gamma in closed form leaves
  a smoothed MAP problem (§3.5.6, App. E.5):

      u* = argmin_u ||X u - y||^2 / (2 sigma2) - sum_j ln T_j(varsigma_j),   varsigma_j = sqrt(s_j^2 + z_j),

  solved by Newton steps (IRLS: penalised least squares) with conjugate gradients on the operators and a line
  search that needs no further products with X or B; then gamma_j = gamma*(varsigma_j), where the bound touches
  ln T_j. With z = 0 the inner problem is the MAP problem.

Each outer step cannot increase phi when the variances are exact and the inner loop is solved (the tangent is an
upper bound that touches at the current gamma). The inner problem is convex for log-concave potentials; for
Student's t the outer loop also bounds the concave part of its height function by a tangent (:class:`Surrogate`),
which keeps the inner problem convex and phi non-increasing, though phi itself is not convex then (§3.4).

The Gaussian approximation is N(u*, A(gamma)^-1). For n <= ``DENSE_N`` its covariance is formed and the draws are
i.i.d. from it; above, the draws are perturb-and-solve samples from the same Gaussian (conjugate gradients,
Papandreou & Yuille 2010, as in the ``gibbs`` backend; :func:`perturb_and_solve`), exact up to the CG tolerance, and
its variances are the Lanczos estimates. The ``potentials`` group holds gamma and the marginal variances of s = B u
(Lanczos estimates unless ``info["variances_exact"]``), ``info`` the Lanczos steps taken; the objective trace
``phi`` (the bound above, before the first and after each outer iteration) is computed for n <= ``DENSE_N`` only
(it needs ln|A|).
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import LinearOperator, cg

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Flag
from bayeszoo.inference.approximations import GaussianApproximation, approximation_fit
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.inference.slm.common import (blas_threads, check_finite, dense_memory, potentials_group,
                                            precision_cholesky, prior_precision, problem)
from bayeszoo.memory_guard import Need, dense
from bayeszoo.inference.slm.gibbs import GaussianStep
from bayeszoo.numerics.lanczos import lanczos_variances
from bayeszoo.numerics.linalg import DENSE_N   # up to this n: dense covariance, the phi trace, exact_variances
from bayeszoo.numerics.operators import to_dense
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

POTENTIALS = ("laplace", "logistic", "gaussian", "student", "sigmoid")
TINY = 1e-300


def _check(options, model, data, owner):
    if options["exact_variances"] and data.d > DENSE_N:
        raise ValueError(f"{owner}: exact_variances forms A densely and takes n <= {DENSE_N}; this "
                         f"problem has n = {data.d}")


def _defaults(model, data):
    # above DENSE_N every draw is a CG solve: keep the default number small
    return {**APPROXIMATION_DEFAULTS, **({"draws": 1000, "chains": 4} if data.d <= DENSE_N else
                                         {"draws": 10, "chains": 2})}


# ---- the inner loop: smoothed MAP by Newton-CG ---------------------------------------------------------------
class Surrogate:
    """The inner loop's penalty on s = B u after minimising over gamma, and the gamma that attains it.

    Log-concave potentials (App. E.5, beta = 0, sigma = 1): -ln T_j(varsigma_j), varsigma_j = sqrt(s_j^2 + z_j),
    gamma_j = gamma*(varsigma_j). Student's t: its height function is h = h_cup + h_cap with h_cup(gamma) =
    nu / (tau gamma) convex and h_cap(gamma) = (nu + 1) ln gamma concave (plus a constant; Table 3.1 above the
    threshold, where every gamma*(s) lies), and the outer loop also replaces h_cap by its tangent at the current
    gamma, slope c_j = (nu + 1) / gamma_j (the surrogate (3.10), z_1 = z_{h_cap}). Minimising (s_j^2 + z_j) / gamma +
    h_cup(gamma) + c_j gamma over gamma gives gamma_j = sqrt(q_j / c_j) and the convex penalty sqrt(c_j q_j), with
    q_j = s_j^2 + z_j + nu / tau_j (half of the -2 ln scale, constants dropped). A tilted potential exp(beta s)
    T_sym(s) (the sigmoid likelihood) adds -beta^T s to the penalty of its symmetric part (App. E.5 with beta)."""

    def __init__(self, pot, z, gamma=None):
        self.beta = pot.beta if pot.labels is not None else None
        pot = pot.symmetric
        self.pot, self.z = pot, z
        if pot.name == "student":
            self.slope = (pot.nu + 1.0) / gamma
            self.offset = z + pot.nu / np.asarray(pot.tau, dtype=float)

    def penalty(self, s):
        """Sum of the penalties and their first two derivatives in s_j."""
        value, d1, d2 = self._symmetric_penalty(s)
        if self.beta is None:
            return value, d1, d2
        return value - float(self.beta @ s), d1 - self.beta, d2

    def _symmetric_penalty(self, s):
        if self.pot.name == "student":
            q = s * s + self.offset
            p = np.sqrt(self.slope * q)
            return float(np.sum(p)), self.slope * s / p, self.slope * self.offset / (p * q)
        pot, z = self.pot, self.z
        vs = np.maximum(np.sqrt(s * s + z), 1e-100)     # vs**3 stays a normal number
        g1, g2 = pot.dlog_t(vs), pot.d2log_t(vs)
        return -float(np.sum(pot.log_t(vs))), -g1 * s / vs, -(g2 * (s / vs) ** 2 + g1 * z / vs**3)

    def gamma(self, s):
        if self.pot.name == "student":
            return np.sqrt((s * s + self.offset) / self.slope)
        return self.pot.gamma_star(np.sqrt(s * s + self.z))


def _line_search(surrogate, s, Bd, rXd, XdXd, sigma2, max_iter=40):
    """argmin_lam of the inner objective along u + lam d, from Bd, r^T X d and ||X d||^2 only (no products with X
    or B): a convex 1-d problem, solved by Newton steps safeguarded by bisection on its derivative."""
    def slope(lam):
        _, d1, d2 = surrogate.penalty(s + lam * Bd)
        return (rXd + lam * XdXd) / sigma2 + d1 @ Bd, XdXd / sigma2 + d2 @ (Bd * Bd)

    d0 = slope(0.0)[0]
    if d0 >= 0:
        return 0.0
    lo, hi = 0.0, 1.0
    while slope(hi)[0] < 0 and hi < 1e8:
        lo, hi = hi, 2.0 * hi
    lam = hi if hi == 1.0 else 0.5 * (lo + hi)
    for _ in range(max_iter):
        g, H = slope(lam)
        if abs(g) <= 1e-10 * abs(d0):
            break
        lo, hi = (lam, hi) if g < 0 else (lo, lam)
        step = lam - g / H if H > 0 else np.nan
        lam = step if lo < step < hi else 0.5 * (lo + hi)
        if hi - lo <= 1e-14 * hi:
            break
    return lam


class NewtonState(NamedTuple):
    """The inner loop's iterate: ``u``, ``s`` = B u, ``r`` = X u - y, the penalty's first two derivatives ``d1``,
    ``d2`` at s, and ``objective`` f(u)."""

    u: np.ndarray
    s: np.ndarray
    r: np.ndarray
    d1: np.ndarray
    d2: np.ndarray
    objective: float


class NewtonInfo(NamedTuple):
    """One Newton-CG step: f after it (``objective``) and its decrease relative to max(1, |f|) (``change``)."""

    objective: float
    change: float


class InnerLoop(NamedTuple):
    """What :func:`inner_loop` returns: the minimiser ``u``, the ``f`` trace (before the first and after each
    step), the Newton ``steps`` made, ``converged`` and the ``surrogate`` it minimised."""

    u: np.ndarray
    f: np.ndarray
    steps: int
    converged: bool
    surrogate: Surrogate


def newton_cg(prob, surrogate, *, cg_tol=1e-8, cg_max_iter=300, owner: str = "approximation") -> Algorithm:
    """Newton steps on f(u) = ||X u - y||^2 / (2 sigma2) + the ``surrogate``'s penalty: CG on the operators for the
    direction, :func:`_line_search` for its length; ``init`` takes the starting u. A step that increases f by more
    than rounding is a ValueError: the products have left double precision."""
    X, B, y, s2 = prob.X, prob.B, prob.y, prob.sigma2

    def init(u0):
        u = np.array(u0, dtype=float)
        r, s = X @ u - y, B @ u
        pen, d1, d2 = surrogate.penalty(s)
        return NewtonState(u, s, r, d1, d2, 0.5 * (r @ r) / s2 + pen)

    def step(state):
        u, s, r, d1, w, f_old = state
        grad = X.H @ r / s2 + B.H @ d1
        H = LinearOperator((prob.n, prob.n), dtype=float, matvec=lambda v: X.H @ (X @ v) / s2 + B.H @ (w * (B @ v)))
        scale = max(float(np.max(np.abs(grad))), TINY)      # CG's inner products overflow beyond |grad| ~ 1e154
        d = cg(H, -grad / scale, rtol=cg_tol, maxiter=cg_max_iter)[0] * scale
        if not grad @ d < 0:                       # CG stopped too early to give a descent direction
            d = -grad
        Bd, Xd = B @ d, X @ d
        lam = _line_search(surrogate, s, Bd, float(r @ Xd), float(Xd @ Xd), s2)
        u, s, r = u + lam * d, s + lam * Bd, r + lam * Xd
        pen, d1, d2 = surrogate.penalty(s)
        f = 0.5 * (r @ r) / s2 + pen
        if not f <= f_old + 1e-8 * max(1.0, abs(f_old)):     # overflowed products, not convergence
            raise ValueError(f"{owner}: a Newton step of the inner loop increased its objective from "
                             f"{f_old:.3g} to {f:.3g} (products left double precision): the scales of X^T X / "
                             f"sigma2 and of the potentials' precisions are too far apart; rescale X, y and sigma2, "
                             f"or tau")
        return NewtonState(u, s, r, d1, d2, f), NewtonInfo(f, (f_old - f) / max(1.0, abs(f)))

    return Algorithm(init, step, result=lambda state: state.u)


def inner_loop(prob, z, u, *, gamma=None, n_inner=30, inner_tol=1e-10, cg_tol=1e-8, cg_max_iter=300,
               owner: str = "approximation") -> InnerLoop:
    """Minimise f(u) = ||X u - y||^2 / (2 sigma2) + the :class:`Surrogate` penalty (log-concave potentials:
    - sum_j ln T_j(sqrt(s_j^2 + z_j)); Student's t: its tangent at ``gamma``) from u, by :func:`newton_cg` until
    the relative decrease of f is at most ``inner_tol``; with z = 0 and a log-concave potential this is the MAP
    objective."""
    surrogate = Surrogate(prob.potential, z, gamma)
    run = iterate(newton_cg(prob, surrogate, cg_tol=cg_tol, cg_max_iter=cg_max_iter, owner=owner), u, max_iter=n_inner,
                  tol=inner_tol, owner=owner, unit="Newton step")
    return InnerLoop(run.state.u, run.trace, run.iterations, run.converged, surrogate)


# ---- the outer loop: marginal variances --------------------------------------------------------------------
def _dense_precision(Xd, Bd, sigma2, gamma):
    A = Xd.T @ Xd / sigma2 + Bd.T @ (Bd / gamma[:, None])
    return 0.5 * (A + A.T)


def variances(prob, gamma, *, k, dense=None, owner: str = "approximation"):
    """Marginal variances of s = B u and of u under N(., A(gamma)^-1): ``(z, u_var, steps)``. ``dense`` =
    (X, B) matrices: exact, by a Cholesky factor (steps None); otherwise k Lanczos steps on the operators."""
    if dense is not None:
        L = precision_cholesky(_dense_precision(*dense, prob.sigma2, gamma), owner)
        Li = sla.solve_triangular(L, np.eye(prob.n), lower=True)
        return np.sum((Li @ dense[1].T) ** 2, axis=0), np.sum(Li**2, axis=0), None
    X, B, s2 = prob.X, prob.B, prob.sigma2
    (z, u_var), steps = lanczos_variances(lambda v: X.H @ (X @ v) / s2 + B.H @ ((B @ v) / gamma), prob.n, k,
                                          [lambda v: B @ v, lambda v: v])
    # Lanczos squares A's products: on a badly scaled problem they overflow where a Cholesky factor would not
    check_finite(np.append(z, u_var), owner, "the Lanczos variance estimates")
    return z, u_var, steps


def phi_bound(prob, gamma, Xd, Bd, owner: str = "approximation"):
    """phi(gamma) of the module docstring (dense): -phi / 2 is a lower bound on ln Z."""
    s2, y = prob.sigma2, prob.y
    L = precision_cholesky(_dense_precision(Xd, Bd, s2, gamma), owner)
    b = Xd.T @ y / s2 + Bd.T @ np.broadcast_to(prob.potential.beta, (Bd.shape[0],))   # the tilts' linear term
    a = sla.solve_triangular(L, b, lower=True)
    r_min = float(y @ y / s2 - a @ a)
    m, n = Xd.shape
    return float(np.sum(prob.potential.h(gamma)) + r_min + 2.0 * np.sum(np.log(np.diag(L)))
                 + m * np.log(2 * np.pi * s2) - n * np.log(2 * np.pi))


class OuterState(NamedTuple):
    """The outer loop's iterate: ``gamma``, the inner loop's minimiser ``u`` (its next start), the Newton ``inner``
    steps of every outer iteration so far, whether every inner loop ``inner_converged``, and ``objective``, phi at
    gamma (None without the dense matrices)."""

    gamma: np.ndarray
    u: np.ndarray
    inner: tuple
    inner_converged: bool
    objective: float | None


class OuterInfo(NamedTuple):
    """One outer iteration: phi after it (``objective``; None without the dense matrices) and the largest change of
    ln gamma (``change``)."""

    objective: float | None
    change: float


class DoubleLoop(NamedTuple):
    """What :func:`double_loop` returns: the posterior ``mean`` u*, ``gamma``, the marginal variances ``z`` of s = B u
    and ``u_var`` of u at gamma, the ``phi`` trace (empty without the dense matrices), ``lanczos_k`` (steps of the
    last Lanczos run, None when exact), ``outer`` iterations, ``inner`` (Newton steps per outer iteration),
    ``converged`` and ``inner_converged`` (every inner loop met its tolerance)."""

    mean: np.ndarray
    gamma: np.ndarray
    z: np.ndarray
    u_var: np.ndarray
    phi: np.ndarray
    lanczos_k: int | None
    outer: int
    inner: list
    converged: bool
    inner_converged: bool


def outer_loop(prob, *, n_inner=30, lanczos_k=100, inner_tol=1e-10, cg_tol=1e-8, cg_max_iter=300,
               exact_variances=False, dense=None, owner: str = "approximation") -> Algorithm:
    """Alg. 3.1's outer iterations from the prior's gamma and u = 0 (``init`` takes nothing): the variances z at
    gamma, the :func:`inner_loop` from the last u, gamma where the bound touches. ``dense`` = (X, B) matrices give
    the objective phi (and are needed for ``exact_variances``)."""
    var_dense = dense if exact_variances else None

    def init(_):
        gamma = np.broadcast_to(1.0 / prior_precision(prob.potential), (prob.q,)).astype(float)
        return OuterState(gamma, np.zeros(prob.n), (), True,
                          phi_bound(prob, gamma, *dense, owner=owner) if dense is not None else None)

    def step(state):
        gamma, u, inner, inner_ok, _ = state
        z, _, _ = variances(prob, gamma, k=lanczos_k, dense=var_dense, owner=owner)
        u, _, steps, ok, surrogate = inner_loop(prob, z, u, gamma=gamma, n_inner=n_inner, inner_tol=inner_tol,
                                                owner=owner,
                                                cg_tol=cg_tol, cg_max_iter=cg_max_iter)
        new = np.maximum(surrogate.gamma(prob.B @ u), TINY)
        change = float(np.max(np.abs(np.log(new) - np.log(gamma))))
        phi = phi_bound(prob, new, *dense, owner=owner) if dense is not None else None
        return OuterState(new, u, inner + (steps,), inner_ok and ok, phi), OuterInfo(phi, change)

    return Algorithm(init, step, result=lambda state: state.u)


def double_loop(prob, *, n_outer=5, n_inner=30, lanczos_k=100, outer_tol=1e-3, inner_tol=1e-10, cg_tol=1e-8,
                cg_max_iter=300, exact_variances=False, dense=None, progress=False,
                owner: str = "approximation") -> DoubleLoop:
    """Alg. 3.1 with the phi^(2) bound (:func:`outer_loop`) until the largest change of ln gamma is at most
    ``outer_tol``, then the variances at the final gamma."""
    algorithm = outer_loop(prob, n_inner=n_inner, lanczos_k=lanczos_k, inner_tol=inner_tol, cg_tol=cg_tol,
                           cg_max_iter=cg_max_iter, exact_variances=exact_variances, dense=dense, owner=owner)
    run = iterate(algorithm, None, max_iter=n_outer, tol=outer_tol, progress=progress, desc="dloop (slm)",
                  unit="outer loop", owner=owner, change_name="change of ln gamma")
    st = run.state
    z, u_var, steps = variances(prob, st.gamma, k=lanczos_k, dense=dense if exact_variances else None,
                                owner=owner)
    return DoubleLoop(mean=algorithm.result(st), gamma=st.gamma, z=z, u_var=u_var, phi=run.trace, lanczos_k=steps,
                      outer=run.iterations, inner=list(st.inner), converged=run.converged,
                      inner_converged=st.inner_converged)


def perturb_and_solve(step: GaussianStep, pi, mean, cg_tol: float):
    """Draws from N(mean, A^-1) known by its precision A = X^T X / sigma2 + B^T diag(pi) B on the operators (n
    above ``DENSE_N``): perturb-and-solve samples (:class:`GaussianStep`, CG to ``cg_tol``, started at the mean)."""
    return lambda rng, n: np.stack([step.draw(rng, pi, mean, cg_tol) for _ in range(n)])


def memory(model, data, options) -> Need:
    """Up to n = DENSE_N: the dense precision, its factor and inverse (the phi trace, the covariance), dense B and X;
    above, the Lanczos vectors (k x n, twice)."""
    if data.d <= DENSE_N:
        return dense_memory(model, data, 5)
    k = min(options["lanczos_k"], data.d)
    return Need({f"Lanczos vectors ({k} x {data.d:,}, twice)": dense(k, data.d, 2)})


@register("dloop", kind="approximation", family="slm", check=_check, defaults=_defaults, memory=memory,
          applies=lambda model: model.potential in POTENTIALS,
          description="double-loop variational inference (Lanczos variances, Newton-CG inner loop)",
          options={"n_outer": Option(5, "most outer iterations (variance updates)", POSITIVE_INT),
                   "n_inner": Option(30, "most Newton steps per inner loop", POSITIVE_INT),
                   "lanczos_k": Option(100, "Lanczos steps per variance estimate (capped at n)", POSITIVE_INT),
                   "exact_variances": Option(False, f"exact variances by a dense Cholesky factor (n <= {DENSE_N})",
                                             Flag()),
                   "outer_tol": Option(1e-3, "stop when the largest change of ln gamma is below this", POSITIVE),
                   "inner_tol": Option(1e-10, "stop the inner loop when the relative decrease is below this",
                                       POSITIVE),
                   "cg_tol": Option(1e-8, "relative residual of the CG solves (Newton steps and draws)", POSITIVE),
                   "cg_max_iter": Option(300, "most CG iterations per Newton step", POSITIVE_INT)})
@blas_threads(always=True)
def run(model, data, *, draws, tune, chains, ctx, n_outer, n_inner, lanczos_k, exact_variances,
        outer_tol, inner_tol, cg_tol, cg_max_iter):
    """Double-loop variational inference for the SLM (every potential: :class:`Surrogate`)."""
    t0 = time.perf_counter()
    prob = problem(model, data)
    small = prob.n <= DENSE_N
    dense = (to_dense(prob.X), to_dense(prob.B)) if small else None
    setup = time.perf_counter() - t0
    res = double_loop(prob, n_outer=n_outer, n_inner=n_inner, lanczos_k=lanczos_k, outer_tol=outer_tol,
                      inner_tol=inner_tol, cg_tol=cg_tol, cg_max_iter=cg_max_iter, exact_variances=exact_variances,
                      dense=dense, progress=ctx.progress, owner=ctx.owner)
    fields = {"variable": "u", "mean": res.mean, "objective": {"phi": res.phi} if small else {},
              "objective_name": "phi" if small else None, "iterations": res.outer, "converged": res.converged}
    if small:
        L = precision_cholesky(_dense_precision(*dense, prob.sigma2, res.gamma), ctx.owner)
        cov = sla.cho_solve((L, True), np.eye(prob.n))
        q = GaussianApproximation(cov=0.5 * (cov + cov.T), **fields)
    else:
        draw = perturb_and_solve(GaussianStep(prob, "cg", ctx.owner), 1.0 / res.gamma, res.mean, cg_tol)
        q = GaussianApproximation(var=res.u_var, sampler=draw, **fields)
    exact = res.lanczos_k is None or res.lanczos_k == prob.n
    info = {"inner_iterations": int(sum(res.inner)), "lanczos_k": res.lanczos_k, "variances_exact": bool(exact),
            "warnings": [] if res.inner_converged else [f"an inner loop used all n_inner={n_inner} Newton steps"]}
    limit = f"{res.outer} outer iterations (outer_tol={outer_tol:g})" + (
        "" if exact else f"; with {res.lanczos_k} < n Lanczos steps the variance estimates move with gamma, so the "
                         f"outer loop need not settle")
    return approximation_fit(model, data, q, ctx=ctx, draws=draws, chains=chains,
                             timing={"compile": setup, "tune": time.perf_counter() - t0 - setup}, info=info,
                             limit=limit,
                             extra_groups=potentials_group(gamma=res.gamma, s_var=res.z))
