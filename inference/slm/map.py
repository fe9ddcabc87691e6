"""MAP estimation / penalised least squares for the SLM (Nickisch thesis §2.5.6, (5.4); §6.3 "L1", "L1+TV").

    u_MAP = argmin_u  ||X u - y||^2 / (2 sigma2) - sum_j ln T_j((B u)_j)

convex for the log-concave potentials (Laplace, logistic, Gaussian); for Student's t a local minimum from u = 0.
Solvers (option ``solver``; "auto" picks by the problem's structure, the first that fits):

* ``cd``: coordinate descent for the Lasso (Laplace potentials, B = I, X a dense matrix: no ``X_operator``):
  min ||X u - y||^2 / 2 + sigma2 tau ||u||_1 by cyclic soft-thresholding steps on working sets (Massias et al.
  2018, celer: the support and the coordinates whose dual constraints are closest to active, doubling), each
  solved to 0.3 times the full problem's duality gap (dual point: the residual scaled into the dual feasible set,
  as scikit-learn's Lasso); once the signs have settled, the exact minimiser with those signs (one Cholesky
  solve on the support) is tried, which ends the run in one step when the support is right. Stops when the
  duality gap is below ``tol`` times the objective. The inner loops are compiled by Numba (a dependency of
  PyTensor, cached on disk);
* ``fista``: greedy FISTA (Liang, Luo & Schoenlieb 2022; after Beck & Teboulle 2009) on the coefficients
  c = B u, for Laplace potentials with an orthonormal B (``identity``, ``wavelet``):
  min ||X B^T c - y||^2 / 2 + sigma2 tau ||c||_1 with momentum 1, a restart whenever the momentum points uphill
  (O'Donoghue & Candes 2015), step 1.3 / L shrunk towards 1 / L whenever a move outgrows the first (the safeguard
  that makes it converge), L = 1 for Fourier sampling (rows of an orthonormal DFT: ||X|| <= 1) and a
  power-iteration bound otherwise. One product with X B^T and one with its transpose per iteration (X B^T c is
  carried along the extrapolation, so the objective costs no product). First-order steps crawl once the support is
  found: on an under-determined problem the columns of X B^T on the support can be dependent, and along their
  null space only the L1 term moves c, by step tau sigma2 an iteration. So, once the sign pattern of c has held for
  ``FISTA_POLISH_STEADY`` iterations on a support of at most m (a solution with at most m nonzeros exists) and
  ``POLISH_MAX_SUPPORT`` coordinates, the problem restricted to the support is solved exactly (its columns formed
  by products, then feature-sign search: Lee, Battle, Raina & Ng 2007, with rays along null directions of the
  restricted Gram matrix), coordinates that violate the optimality conditions outside it are added, and the point
  is taken if it lowers the objective (the momentum restarts there). A polish waits until FISTA has made as many
  products since the last one as that one made, so polishes make at most as many products as the iterations.
  Stops when the duality gap of a polished point is below ``tol`` times the objective (the dual point as for
  ``cd``), or when a step moves c by less than ``tol`` relative to c;
* ``admm``: ADMM with the split s = B u (Boyd et al. 2011, §6.4), for Laplace potentials with any B (L1+TV): an
  exact u-step (dense Cholesky for n <= ``DENSE_N``, CG on the operators above), soft thresholding in s;
* ``lbfgs``: SciPy's L-BFGS-B on u, for the smooth potentials (Student's t, logistic, Gaussian).

The result is a :class:`~bayeszoo.inference.approximations.PointEstimate` (every draw is the estimate), the
objective trace ``neg_log_joint``.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numba
import numpy as np
import scipy.linalg as sla
from scipy.optimize import minimize
from scipy.sparse.linalg import LinearOperator, cg

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Interval, OneOf
from bayeszoo.inference.approximations import PointEstimate, approximation_fit
from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.inference.slm.common import (MEMORY_ADVICE, blas_threads, check_finite, dense_memory,
                                            precision_cholesky, problem)
from bayeszoo.memory_guard import Need, dense
from bayeszoo.numerics.blas_threads import one_blas_thread
# DENSE_N: the ADMM u-step factorises X^T X / sigma2 + rho B^T B up to this n
from bayeszoo.numerics.linalg import DENSE_N, cholesky
from bayeszoo.numerics.operators import FourierSampling
from bayeszoo.progress import progress_bar
from bayeszoo.registry import APPROXIMATION_DEFAULTS, Option, register

SOLVERS = ("auto", "cd", "fista", "admm", "lbfgs")
CD_FIRST_WORKING_SET = 64     # coordinates of the first working set (celer's p0 order)
CD_SWEEPS_PER_CHECK = 5       # sweeps between two duality-gap evaluations of a working set
CD_POLISH_BELOW = 1e-3        # relative gap of the working set below which settled signs are worth a solve
CD_STEADY_CHECKS = 1          # gap evaluations with unchanged signs before that solve
#: the largest max |X^T y| / (sigma2 tau) the backend takes with fewer measurements than unknowns: beyond
#: 1 / eps the prior's weight is below the rounding of the data term (a sigma2 far below the noise)
LARGEST_WEIGHT_RATIO = 1.0 / np.finfo(float).eps
FISTA_STEP = 1.3              # greedy FISTA's step, in units of 1 / L (Liang, Luo & Schoenlieb 2022: in [1, 2))
FISTA_SHRINK = 0.96           # its safeguard's factor on the step when a move outgrows the first one
FISTA_POLISH_STEADY = 10      # iterations with an unchanged sign pattern before the restricted problem is solved
POLISH_ROUNDS = 10            # rounds of a polish: restricted solve, then the violators outside added
POLISH_MAX_SUPPORT = 1000     # most coordinates of a polish's working set (each round an eigendecomposition)


def _check(options, model, data, owner):
    choose_solver(model, data, options["solver"], owner)     # a solver that does not fit the potential, B or X
    # with fewer measurements than unknowns only the prior fixes u along X's null space: below double precision
    # against the data term it vanishes, and every solver returns some interpolant instead of the MAP (with a full
    # column rank X the MAP is the least-squares solution then, which they find)
    ratio = _prior_weight_ratio(model, data) if data.n < data.d else 0.0
    if ratio > LARGEST_WEIGHT_RATIO:
        weight = model.sigma2 * _smallest_tau(model)
        raise ValueError(f"{owner}: with {data.n} measurements of {data.d} unknowns the prior alone "
                         f"fixes u along X's null space, and its weight sigma2 * tau = {weight:.3g} is {ratio:.2g} "
                         f"times smaller than max |X^T y|, below double precision: it vanishes against the data "
                         f"term, so no solver can find the MAP. sigma2 is the noise variance on the scale of y: give "
                         f"the measurement noise's; the noiseless limit (min |B u|_1 subject to X u = y) is a linear "
                         f"program, not a MAP of this model")
    return options


def _smallest_tau(model) -> float:
    return min(model.tau, model.tau_tv) if model.tau_tv is not None else model.tau


def _prior_weight_ratio(model, data) -> float:
    """max |X^T y| over the prior's smallest weight sigma2 tau: beyond 1 / eps the prior is below the rounding of the
    data term (the dual scaling of the Lasso's gap at u = 0)."""
    scores = np.asarray(model.operator_X(data).H @ np.asarray(data.y, dtype=float))
    largest = float(np.max(np.abs(scores))) if scores.size else 0.0
    return largest / (model.sigma2 * _smallest_tau(model))


def choose_solver(model, data, solver: str, owner: str = "MAP") -> str:
    """The solver ``auto`` means for this model and data; a ValueError (naming ``owner``) when the asked one does
    not fit."""
    laplace = model.potential == "laplace"
    dense_x = data.meta.get("X_operator") is None
    fits = {"cd": laplace and model.B == "identity",
            "fista": laplace and model.B in ("identity", "wavelet"), "admm": laplace, "lbfgs": not laplace}
    if solver == "auto":
        if fits["cd"] and dense_x:
            return "cd"          # a dense Lasso: coordinate steps cost one column each
        return "fista" if fits["fista"] else "admm" if fits["admm"] else "lbfgs"
    if not fits[solver]:
        raise ValueError(f"{owner}: solver {solver!r} does not fit potential={model.potential!r}, "
                         f"B={model.B!r} (cd: Laplace with B 'identity'; fista: Laplace with B 'identity' or "
                         f"'wavelet'; admm: Laplace; lbfgs: the smooth potentials)")
    return solver


# ------------------------------------------------------------------------------------- coordinate descent
@numba.njit(cache=True, nogil=True, fastmath=True)
def _dot(a, b):
    total = 0.0
    for i in range(a.size):
        total += a[i] * b[i]
    return total


@numba.njit(cache=True, nogil=True)
def _cd_sweeps(XT, r, u, work, lam, norms2, n_sweeps):
    """``n_sweeps`` cyclic soft-thresholding sweeps over the coordinates ``work`` of
    min ||y - X u||^2 / 2 + sum_j lam_j |u_j|; XT holds the columns of X as rows, r = y - X u is kept current."""
    m = XT.shape[1]
    for _ in range(n_sweeps):
        for j in work:
            nj = norms2[j]
            if nj == 0.0:
                continue
            x = XT[j]
            old = u[j]
            z = _dot(x, r) + nj * old
            if z > lam[j]:
                new = (z - lam[j]) / nj
            elif z < -lam[j]:
                new = (z + lam[j]) / nj
            else:
                new = 0.0
            if new != old:
                step = new - old
                for i in range(m):
                    r[i] -= step * x[i]
                u[j] = new


@numba.njit(cache=True, nogil=True)
def _cd_gap(XT, r, u, y, work, lam):
    """(primal, duality gap) of the Lasso restricted to ``work`` (u is zero elsewhere): the dual point is the
    residual scaled into {theta: |x_j^T theta| <= lam_j, j in work}."""
    scale = 1.0
    penalty = 0.0
    for j in work:
        scale = max(scale, abs(_dot(XT[j], r)) / lam[j])
        penalty += lam[j] * abs(u[j])
    rr = _dot(r, r)
    primal = 0.5 * rr + penalty
    return primal, primal - (_dot(r, y) / scale - 0.5 * rr / scale**2)


class CDState(NamedTuple):
    """Coordinate descent's iterate: ``u`` and the residual ``r`` = y - X u (both updated in place by the sweeps),
    the working set ``work`` (None when the next step checks the whole problem and chooses the next one), its
    ``size`` (it only grows), the whole problem's duality ``gap`` at the last check and that gap relative to the
    objective (``relative``), the sign pattern ``settled`` at the previous check of a working set and the one last
    ``tried`` by a sign-fixed solve (None before the first), the checks ``steady`` since the signs last changed, and
    ``objective``, the Lasso's objective over sigma2 at the last check (None before the first)."""

    u: np.ndarray
    r: np.ndarray
    work: np.ndarray | None
    size: int
    gap: float
    relative: float
    settled: np.ndarray | None
    tried: np.ndarray | None
    steady: int
    objective: float | None


class CDInfo(NamedTuple):
    """One step of coordinate descent: the ``objective`` (the Lasso's over sigma2) at its duality-gap check;
    ``change``, the whole problem's duality gap relative to its objective at the last check of the whole problem
    (the stopping rule's measure: a working set's own gap says nothing about the others); ``used``, the sweeps the
    step made (``CD_SWEEPS_PER_CHECK`` on a working set, none for a check of the whole problem); the working set's
    ``size`` (0 for a check of the whole problem)."""

    objective: float
    change: float
    used: int
    size: int


def _cd(prob, data, max_iter, tol, progress):
    algorithm = coordinate_descent(prob, data, tol)
    run = iterate(algorithm, None, max_iter=max_iter, tol=tol, progress=progress, desc="map (cd)", unit="sweep",
                  change_name="duality gap")
    return algorithm.result(run.state), run.iterations, run.trace, run.converged


def coordinate_descent(prob, data, tol) -> Algorithm:
    """Working-set coordinate descent with a sign-fixed exact solve (module docstring), from u = 0; ``init`` takes
    nothing. Two kinds of step: a check of the whole problem's duality gap, which ends the run when it is within
    ``tol`` of the objective and otherwise chooses the next working set (no sweeps), and ``CD_SWEEPS_PER_CHECK``
    sweeps over the working set followed by its own gap check, which hands back to a check of the whole problem
    once the working set is solved to 0.3 times the last whole gap; ``final``, a check of the whole problem, so a
    run stopped by ``max_iter`` (counted in sweeps) ends on one too."""
    s2 = prob.sigma2
    y = np.ascontiguousarray(prob.y, dtype=float)
    XT = np.ascontiguousarray(np.asarray(data.X, dtype=float).T)      # column j of X contiguous
    n = XT.shape[0]
    lam = s2 * np.asarray(prob.potential.tau, dtype=float)            # the Lasso's weights: sigma2 tau_j
    norms2 = np.einsum("ij,ij->i", XT, XT)
    norms = np.where(norms2 > 0, np.sqrt(norms2), 1.0)

    def init(_):
        return CDState(np.zeros(n), y.copy(), None, 0, np.inf, np.inf, None, None, 0, None)

    def check(state):
        """The whole problem's duality gap at u; the dual point's scores and scale for the next working set."""
        scores = XT @ state.r
        primal, gap, scale = _lasso_gap(state.r, y, scores, lam, state.u)
        relative = gap / primal if primal > 0 else 0.0                # y = 0: u = 0 is exact, primal and gap 0
        checked = state._replace(work=None, gap=gap, relative=relative, objective=primal / s2)
        return checked, CDInfo(primal / s2, relative, 0, 0), scores, scale

    def next_working_set(state):
        state, info, scores, scale = check(state)
        if info.change <= tol:
            return state, info
        support = np.flatnonzero(state.u)
        size = min(n, max(CD_FIRST_WORKING_SET, 2 * support.size, state.size))
        # distance of the dual point to each coordinate's constraint: the closest are the likeliest to enter
        distance = (lam - np.abs(scores) / scale) / norms
        distance[support] = -np.inf
        work = np.sort(np.argpartition(distance, size - 1)[:size]) if size < n else np.arange(n)
        return state._replace(work=work, size=size), info

    def sweeps(state):
        u, r, work, size, gap, relative, settled, tried, steady, _ = state
        _cd_sweeps(XT, r, u, work, lam, norms2, CD_SWEEPS_PER_CHECK)
        inner, inner_gap = _cd_gap(XT, r, u, y, work, lam)
        info = CDInfo(inner / s2, relative, CD_SWEEPS_PER_CHECK, size)   # traced before a sign-fixed solve
        if inner_gap <= max(0.3 * gap, tol * inner):                       # solved: the whole problem's turn
            return state._replace(work=None, objective=inner / s2), info
        signs = np.sign(u)
        steady = steady + 1 if settled is not None and np.array_equal(signs, settled) else 0
        settled = signs
        if (inner_gap < CD_POLISH_BELOW * inner and steady >= CD_STEADY_CHECKS
                and (tried is None or not np.array_equal(signs, tried))):
            tried = signs
            r = _sign_fixed_solve(XT, y, u, r, lam, signs)
            inner, inner_gap = _cd_gap(XT, r, u, y, work, lam)
            if inner_gap <= max(0.3 * gap, tol * inner):
                work = None
        return CDState(u, r, work, size, gap, relative, settled, tried, steady, inner / s2), info

    def step(state):
        return next_working_set(state) if state.work is None else sweeps(state)

    def describe(state, info):
        return f"working set {info.size}" if info.size else ""

    return Algorithm(init, step, result=lambda state: state.u, describe=describe,
                     final=lambda state: check(state)[:2])


def _lasso_gap(r, y, scores, lam, u):
    """(primal, duality gap, scale) of min ||y - A u||^2 / 2 + lam^T |u| at u, with r = y - A u and scores = A^T r:
    the dual point is the residual divided by ``scale`` into {theta: |A^T theta| <= lam} (as scikit-learn's Lasso;
    ``_cd_gap`` is the same on a working set, compiled)."""
    scale = max(1.0, float(np.max(np.abs(scores) / lam)))
    rr = float(r @ r)
    primal = 0.5 * rr + float(lam @ np.abs(u))
    return primal, primal - (float(r @ y) / scale - 0.5 * (rr / scale) / scale), scale


def _sign_fixed_solve(XT, y, u, r, lam, signs):
    """The minimiser of ||y - X u||^2 / 2 + lam^T |u| among u with the sign pattern ``signs`` and zeros elsewhere,
    (X_S^T X_S) u_S = X_S^T y - lam_S signs_S; taken (u updated in place, the new residual returned) when its signs
    are those and it lowers the objective, which makes it the Lasso's solution once the support is right."""
    S = np.flatnonzero(signs)
    if S.size == 0 or S.size > XT.shape[1]:
        return r
    XS = XT[S]
    try:
        factor = cholesky(XS @ XS.T, what="the support's Gram matrix")
    except np.linalg.LinAlgError:       # dependent columns: no exact solve with these signs, coordinate descent goes on
        return r
    v = sla.cho_solve((factor, True), XS @ y - lam[S] * signs[S])
    if not (np.all(np.isfinite(v)) and np.all(np.sign(v) == signs[S])):
        return r
    r_new = y - XS.T @ v
    if 0.5 * (r_new @ r_new) + lam[S] @ np.abs(v) > 0.5 * (r @ r) + lam @ np.abs(u):
        return r
    u[:] = 0.0
    u[S] = v
    return r_new


# ----------------------------------------------------------------------------------------------------- FISTA
def _lipschitz(Op, iters: int = 300, rtol: float = 1e-6) -> float:
    """A bound on the largest eigenvalue of Op^H Op: a seeded power iteration (so the step, and the estimate, do
    not change between runs) until the estimate changes by less than ``rtol``, enlarged by 1 %."""
    v = np.random.default_rng(0).standard_normal(Op.shape[1])
    lam = 0.0
    for _ in range(iters):
        w = Op.rmatvec(Op.matvec(v))
        new = float(np.linalg.norm(w))
        if new == 0.0:
            return 1.0
        v = w / new
        if abs(new - lam) <= rtol * new:
            lam = new
            break
        lam = new
    return 1.01 * lam


class FISTAState(NamedTuple):
    """Greedy FISTA's iterate: the coefficients ``c`` and the previous ones ``c_old`` (the momentum), ``Ac`` and
    ``Ac_old`` (X B^T of each), the step ``size``, the ``first_move`` (the safeguard's yardstick; None before the
    first step), the sign pattern ``signs`` of c, the iterations it has been ``steady``, the pattern last
    ``polished`` (None before the first polish), the iterations to ``wait`` before the next polish may start, and
    ``objective``, ||X u - y||^2 / (2 sigma2) + tau ||c||_1 at c (None before the first step)."""

    c: np.ndarray
    c_old: np.ndarray
    Ac: np.ndarray
    Ac_old: np.ndarray
    size: float
    first_move: float | None
    signs: np.ndarray
    steady: int
    polished: np.ndarray | None
    wait: int
    objective: float | None


class FISTAInfo(NamedTuple):
    """One FISTA step: the objective after it (after a polish that was taken), ``change``: the step's move of c
    relative to c, or the polished point's duality gap when the polish made the objective no larger and its gap is
    the smaller, and that relative duality ``gap`` (None when the step did not polish)."""

    objective: float
    change: float
    gap: float | None = None


def _fista(prob, max_iter, tol, progress, owner):
    # level-1 BLAS on image-sized vectors between transforms: a second thread only adds waits (common.blas_threads)
    with one_blas_thread(0):
        algorithm = greedy_fista(prob, tol)
        run = iterate(algorithm, None, max_iter=max_iter, tol=tol, progress=progress, desc="map (fista)",
                      unit="iteration", owner=owner, change_name="relative move")
        return algorithm.result(run.state), run.iterations, run.trace, run.converged


def greedy_fista(prob, tol) -> Algorithm:
    """Greedy FISTA with restarts, the step's safeguard and polishes on the support (module docstring), from c = 0;
    ``init`` takes nothing. A step ends the run when it moves c by at most ``tol`` relative to c, or when it
    polished to a point with a duality gap of at most ``tol`` and an objective no larger."""
    X, B, y = prob.X, prob.B, prob.y
    lam = prob.sigma2 * np.asarray(prob.potential.tau, dtype=float)    # identity / wavelet: one weight per c_j
    lam = np.broadcast_to(lam, (B.shape[0],))

    def forward(c):                          # X B^T c: B orthonormal, u = B^T c
        return X.matvec(B.rmatvec(c))

    def adjoint(r):
        return B.matvec(X.rmatvec(r))

    def prox_step(z, Az, size):
        v = z - size * adjoint(Az - y)
        return np.sign(v) * np.maximum(np.abs(v) - size * lam, 0.0)

    def objective(c, Ac):
        r = Ac - y
        return 0.5 * (r @ r) + lam @ np.abs(c)

    # rows of an orthonormal DFT: ||X u|| <= ||u|| (Parseval), and B is orthonormal
    L = 1.0 if isinstance(X, FourierSampling) else _lipschitz(LinearOperator((X.shape[0], B.shape[0]), matvec=forward,
                                                                              rmatvec=adjoint, dtype=float))
    most = min(X.shape[0], POLISH_MAX_SUPPORT)              # the largest working set of a polish

    def init(_):
        c, Ac = np.zeros(B.shape[0]), np.zeros(X.shape[0])
        return FISTAState(c, c, Ac, Ac, FISTA_STEP / L, None, np.zeros(B.shape[0], dtype=np.int8), 0, None, 0, None)

    def step(state):
        c, c_old, Ac, Ac_old, size, first_move, signs, steady, polished, wait, _ = state
        z, Az = c + (c - c_old), Ac + (Ac - Ac_old)         # momentum 1 (greedy FISTA)
        c_new = prox_step(z, Az, size)
        if (z - c_new) @ (c_new - c) > 0:                   # the momentum points uphill: restart from c
            z, Az = c, Ac
            c_new = prox_step(z, Az, size)
        Ac_new = forward(c_new)
        f_new = objective(c_new, Ac_new)
        move = float(np.linalg.norm(c_new - c))
        if first_move is None:
            first_move = move
        elif move > first_move:                             # the safeguard: shrink the step towards 1 / L
            size = max(FISTA_SHRINK * size, 1.0 / L)
        c_old, Ac_old, c, Ac = c, Ac, c_new, Ac_new
        change = move / max(np.linalg.norm(c), 1e-300)
        if change <= tol:                                   # the run ends here
            return (FISTAState(c, c_old, Ac, Ac_old, size, first_move, signs, steady, polished, wait,
                               f_new / prob.sigma2), FISTAInfo(f_new / prob.sigma2, change))
        new_signs = np.sign(c).astype(np.int8)
        steady = steady + 1 if np.array_equal(new_signs, signs) else 0
        signs = new_signs
        wait -= 1
        f, gap = f_new, None
        # a solution with at most m nonzeros exists: a larger support is not yet worth a restricted solve
        if (steady >= FISTA_POLISH_STEADY and wait <= 0 and np.count_nonzero(signs) <= most
                and (polished is None or not np.array_equal(signs, polished))):
            polished = signs
            c_p, Ac_p, gap, products = _polish(forward, adjoint, y, lam, c, most)
            wait = products // 2                            # FISTA makes two products an iteration
            f_p = objective(c_p, Ac_p)
            if f_p < f_new:                                 # take it, momentum restarted
                c = c_old = c_p
                Ac = Ac_old = Ac_p
                f = f_p                                     # the trace: the objective after each iteration
                signs, steady = np.sign(c).astype(np.int8), 0
            if f_p <= f_new:
                change = min(change, gap)
        return (FISTAState(c, c_old, Ac, Ac_old, size, first_move, signs, steady, polished, wait, f / prob.sigma2),
                FISTAInfo(f / prob.sigma2, change, gap))

    def describe(state, info):
        return f"polished: duality gap {info.gap:.2g}" if info.gap is not None else ""

    return Algorithm(init, step, result=lambda state: B.rmatvec(state.c), describe=describe, trace_initial=False)


def _polish(forward, adjoint, y, lam, c, most):
    """The problem min ||A v - y||^2 / 2 + lam^T |v| (A = X B^T) solved exactly on a working set: the support of c,
    enlarged by the coordinates whose optimality conditions fail outside it (up to ``POLISH_ROUNDS`` rounds, at most
    ``most`` coordinates).
    Returns (v, A v, relative duality gap of v, products with A or A^T made)."""
    n = c.size
    work = np.flatnonzero(c)
    columns = np.empty((y.size, 0))
    v = c[work].copy()
    products, gap = 0, np.inf
    unit = np.zeros(n)
    for _ in range(POLISH_ROUNDS):
        added = work[columns.shape[1]:]
        new = np.empty((y.size, added.size))
        for k, j in enumerate(added):                      # the working set's columns of A, one product each
            unit[j] = 1.0
            new[:, k] = forward(unit)
            unit[j] = 0.0
        columns = np.hstack([columns, new])
        products += added.size
        gram, rhs = columns.T @ columns, columns.T @ y
        v = feature_sign(gram, rhs, lam[work], v)
        Av = columns @ v
        residual = y - Av
        scores = adjoint(residual)                         # A^T (y - A v): |scores_j| <= lam_j at the optimum
        products += 1
        full = np.zeros(n)
        full[work] = v
        primal, gap, _ = _lasso_gap(residual, y, scores, lam, full)
        gap /= max(primal, 1e-300)
        excess = np.abs(scores) / lam - 1.0
        excess[work] = 0.0
        violators = np.flatnonzero(excess > 0)
        room = most - work.size
        if violators.size == 0 or room <= 0:
            break
        violators = violators[np.argsort(-excess[violators])[:max(1, min(room, work.size))]]
        work = np.concatenate([work, violators])
        v = np.concatenate([v, np.zeros(violators.size)])
    full = np.zeros(n)
    full[work] = v
    return full, columns @ v, gap, products


def feature_sign(gram, rhs, lam, v, rtol=1e-12):
    """min v^T G v / 2 - b^T v + lam^T |v| (G = ``gram``, b = ``rhs``) from ``v``: feature-sign search (Lee, Battle,
    Raina & Ng 2007): on the face of the current signs the quadratic's minimiser nearest v (G may be singular), a
    line search over the points where coordinates change sign, zeros dropped; when the face is optimal, the zero
    coordinate violating its optimality condition most joins. Where the face's linear term has a part in G's null
    space the face objective falls without bound along it: v follows that ray until a coordinate reaches zero."""
    def f(w):
        return 0.5 * (w @ gram @ w) - rhs @ w + lam @ np.abs(w)

    signs = np.sign(v)
    face_optimal = False                                    # v (FISTA's iterate) need not minimise on its face
    for _ in range(4 * v.size + 20):
        if face_optimal:
            grad = gram @ v - rhs
            excess = np.where(signs == 0, np.abs(grad) - lam * (1.0 + rtol), -np.inf)
            j = int(np.argmax(excess)) if v.size else 0
            if not v.size or excess[j] <= 0:
                return v
            signs[j] = -np.sign(grad[j])
        active = np.flatnonzero(signs)
        if active.size == 0:
            face_optimal = True
            continue
        s = signs[active]
        g_a = gram[np.ix_(active, active)]
        linear = rhs[active] - lam[active] * s             # the face objective: w^T G w / 2 - linear^T w
        d, U = np.linalg.eigh(g_a)
        kept = d > 1e-10 * max(d[-1], 1e-300)
        null = U[:, ~kept]
        ray = null @ (null.T @ linear)
        candidates = []
        if np.linalg.norm(ray) > 1e-12 * max(np.linalg.norm(linear), 1e-300):
            falling = s * ray < 0                           # coordinates that the ray takes towards zero
            if np.any(falling):
                t = -v[active][falling] / ray[falling]
                w = v.copy()
                w[active] += t.min() * ray
                w[active[np.flatnonzero(falling)[np.argmin(t)]]] = 0.0
                candidates.append(w)
        step = U[:, kept] @ ((U[:, kept].T @ (linear - g_a @ v[active])) / d[kept])
        target = v[active] + step
        flipped = np.flatnonzero(np.sign(target) != s)
        for k in flipped:                                   # where coordinate k changes sign on the way
            t = v[active][k] / (v[active][k] - target[k])
            w = v.copy()
            w[active] = v[active] + t * step
            w[active[k]] = 0.0
            candidates.append(w)
        w = v.copy()
        w[active] = target
        candidates.append(w)
        best = min(candidates, key=f)
        face_optimal = flipped.size == 0 and best is candidates[-1]
        if f(best) >= f(v) and not face_optimal:
            return v                                        # no progress (rounding): v is as good as it gets
        v = best
        signs = np.sign(v)
    return v


class ADMMState(NamedTuple):
    """ADMM's iterate: ``u``, the split ``z`` (= B u at convergence), the scaled dual ``w`` and ``objective``, the
    negative log joint at u (None before the first step)."""

    u: np.ndarray
    z: np.ndarray
    w: np.ndarray
    objective: float | None


class ADMMInfo(NamedTuple):
    """One ADMM step: the negative log joint at u (``objective``), the primal residual ||B u - z|| relative to the
    larger of ||B u||, ||z|| (``change``), and ``moving``: the dual residual rho ||B^T (z - z_old)|| is still above
    ``tol`` relative to rho ||B^T w|| (Boyd et al. 2011, §3.3: both residuals must be small)."""

    objective: float
    change: float
    moving: bool


def _admm(prob, max_iter, tol, rho, progress, owner):
    algorithm = admm(prob, tol, rho, owner)
    run = iterate(algorithm, None, max_iter=max_iter, tol=tol, progress=progress, desc="map (admm)",
                  unit="iteration", owner=owner, change_name="primal residual")
    return algorithm.result(run.state), run.iterations, run.trace, run.converged


def admm(prob, tol, rho, owner: str = "approximation") -> Algorithm:
    """ADMM with the split s = B u (module docstring) from u = z = w = 0; ``init`` takes nothing; ``rho`` None
    balances the two quadratic terms of the u-step."""
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
        cho = (precision_cholesky(Xd.T @ Xd / s2 + rho * Bd.T @ Bd, owner), True)

        def solve(rhs, _):
            return sla.cho_solve(cho, rhs)
    else:
        A = LinearOperator((n, n), matvec=lambda v: X.H @ (X @ v) / s2 + rho * (B.H @ (B @ v)), dtype=float)

        def solve(rhs, x0):
            return cg(A, rhs, x0=x0, rtol=1e-10, maxiter=5 * n)[0]

    def init(_):
        return ADMMState(np.zeros(n), np.zeros(prob.q), np.zeros(prob.q), None)

    def step(state):
        u, z_old, w, _ = state
        u = check_finite(solve(Xty + rho * (B.H @ (z_old - w)), u), owner, "the ADMM iterate")
        Bu = B @ u
        v = Bu + w
        z = np.sign(v) * np.maximum(np.abs(v) - tau / rho, 0.0)     # prox of (tau / rho) |.|
        w = w + Bu - z
        value = prob.neg_log_joint(u)
        primal = np.linalg.norm(Bu - z)
        dual = rho * np.linalg.norm(B.H @ (z - z_old))
        scale = max(np.linalg.norm(Bu), np.linalg.norm(z), 1e-12)
        info = ADMMInfo(objective=value, change=primal / scale,
                        moving=not dual <= tol * max(rho * np.linalg.norm(B.H @ w), 1e-12))
        return ADMMState(u, z, w, value), info

    return Algorithm(init, step, result=lambda state: state.u)


def _lbfgs(prob, max_iter, tol, bar, owner):
    trace = []
    # L-BFGS-B multiplies gradients together: beyond objectives of ~1e150 (a tiny sigma2) they overflow and it stops
    # at once, reporting success, so it minimises a copy scaled below 1e100 (no change for ordinary problems)
    at_zero = check_finite(prob.neg_log_joint(np.zeros(prob.n)), owner, "the objective at u = 0")
    scale = max(1.0, abs(float(at_zero)) * 1e-100)

    def fun(u):
        value = prob.neg_log_joint(u)
        trace.append(value)
        return value / scale, prob.gradient(u) / scale

    res = minimize(fun, np.zeros(prob.n), jac=True, method="L-BFGS-B", callback=lambda _: bar.update(),
                   options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-12, "maxcor": 20})
    return res.x, int(res.nit), np.asarray(trace), bool(res.success)


def memory(model, data, options) -> Need:
    """ADMM up to n = DENSE_N factorises X^T X / sigma2 + rho B^T B densely; coordinate descent copies X with its
    columns contiguous; FISTA, L-BFGS and ADMM above hold vectors only."""
    solver = choose_solver(model, data, options["solver"])
    if solver == "admm" and data.d <= DENSE_N:
        return dense_memory(model, data, 3)
    if solver == "cd":
        return Need({f"X with contiguous columns ({data.d:,} x {data.n:,})": dense(data.d, data.n)}, MEMORY_ADVICE)
    return Need({})


@register("map", kind="approximation", family="slm", check=_check, memory=memory,
          defaults={**APPROXIMATION_DEFAULTS, "draws": 1, "chains": 1},
          description="MAP / penalised least squares (L1, L1+TV): coordinate descent, FISTA, ADMM or L-BFGS",
          options={"solver": Option("auto", "cd (Laplace, B identity: coordinate descent on working sets), fista "
                                            "(Laplace, orthonormal B), admm (Laplace, any B), lbfgs (smooth "
                                            "potentials) or auto: cd for a dense X (no X_operator) with B "
                                            "identity, else the first of fista, admm, lbfgs that fits",
                                    OneOf(SOLVERS)),
                   "max_iter": Option(5000, "most iterations of the solver (cd: sweeps over working sets)",
                                      POSITIVE_INT),
                   "tol": Option(1e-10, "relative tolerance of the solver's stopping rule (cd: duality gap over "
                                        "objective; fista: that of a polished point, or a step over coefficients)",
                                 POSITIVE),
                   "rho": Option(None, "ADMM penalty (None: balances X^T X / sigma2 against B^T B)",
                                 Interval(float, 0, None, "neither", none=True))})
@blas_threads()
def run(model, data, *, draws, tune, chains, ctx, solver, max_iter, tol, rho):
    """The MAP estimate of u (penalised least squares)."""
    t0 = time.perf_counter()
    solver = choose_solver(model, data, solver, ctx.owner)
    prob = problem(model, data)
    if solver == "fista":
        u, iters, trace, converged = _fista(prob, max_iter, tol, ctx.progress, ctx.owner)
    elif solver == "admm":
        u, iters, trace, converged = _admm(prob, max_iter, tol, rho, ctx.progress, ctx.owner)
    elif solver == "cd":
        u, iters, trace, converged = _cd(prob, data, max_iter, tol, ctx.progress)
    else:
        with progress_bar(total=max_iter, desc="map (lbfgs)", disable=not ctx.progress, unit="iteration") as bar:
            u, iters, trace, converged = _lbfgs(prob, max_iter, tol, bar, ctx.owner)
    check_finite(u, ctx.owner, f"the {solver} estimate")
    trace = np.append(trace, prob.neg_log_joint(u))    # the last entry is the estimate's objective
    estimate = PointEstimate(values={"u": u}, objective={"neg_log_joint": trace}, objective_name="neg_log_joint",
                             iterations=iters, converged=converged)
    warnings = [] if prob.potential.log_concave else [
        "Student's t potentials are not log-concave: the MAP estimate is a local minimum"]
    return approximation_fit(model, data, estimate, ctx=ctx, draws=draws, chains=chains,
                             timing={"tune": time.perf_counter() - t0},
                             info={"solver": solver, "warnings": warnings},
                             limit=f"{iters} {solver} iterations (tol={tol:g})")
