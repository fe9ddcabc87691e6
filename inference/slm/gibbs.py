"""Gibbs sampler for the SLM through the potentials' Gaussian scale mixtures (Nickisch thesis §3.2, (3.1)).

Each potential is a mixture T_j(s_j) ∝ int N(s_j | 0, gamma_j) P(gamma_j) dgamma_j, so with the precisions
pi_j = 1/gamma_j as auxiliary variables the sweep alternates

1. pi_j | u ~ its full conditional given s_j = (B u)_j (:meth:`Potential.sample_precision`): Laplace, exponential
   mixing of the variances, 1/gamma | s ~ InverseGaussian(tau / |s|, tau^2) (Park & Casella 2008); Student's t,
   Gamma mixing of the precisions, pi | s ~ Gamma((nu + 1) / 2, nu / (2 tau) + s^2 / 2); logistic, Polya-Gamma
   mixing, pi = 4 tau^2 omega with omega | s ~ PG(2, 2 tau s) (Polson, Scott & Windle 2013); Gaussian, pi = tau;
2. u | pi ~ N(Q^-1 X^T y / sigma2, Q^-1), Q = X^T X / sigma2 + B^T diag(pi) B, drawn by perturb-and-solve
   (Papandreou & Yuille 2010): u = Q^-1 [X^T (y + sigma e1) / sigma2 + B^T (sqrt(pi) e2)], e1, e2 ~ N(0, I), with
   a dense Cholesky factor (``solver="cholesky"``) or conjugate gradients on the operators (``"cg"``, for large n:
   the draw is then exact only up to the CG tolerance).

This module is the two conditionals and the :class:`~bayeszoo.inference.chains.Kernel` that alternates them; the
chain driver (:func:`bayeszoo.inference.chains.sample`) does the seeding, warm-up, thinning, timing and progress.
A chain starts from a perturb-and-solve draw at the prior mean precisions.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import LinearOperator, cg

from bayeszoo.checks import POSITIVE, POSITIVE_INT, OneOf
from bayeszoo.inference.chains import Kernel, chains_fit, sample
from bayeszoo.inference.slm.common import (blas_threads, check_finite, dense_memory, precision_cholesky,
                                            prior_precision, problem)
from bayeszoo.memory_guard import Need
from bayeszoo.numerics.linalg import DENSE_N
from bayeszoo.numerics.operators import to_dense
from bayeszoo.numerics.potentials import GSM_SAMPLERS
from bayeszoo.registry import Option, register

SOLVERS = ("auto", "cholesky", "cg")


class GaussianStep:
    """Draws u | pi by perturb-and-solve (module docstring, step 2); ``owner`` names who asks in its errors."""

    def __init__(self, prob, solver: str, owner: str):
        self.prob, self.owner = prob, owner
        self.sigma = float(np.sqrt(prob.sigma2))
        self.Xty = prob.X.H @ prob.y / prob.sigma2
        self.dense = solver == "cholesky" or (solver == "auto" and prob.n <= DENSE_N)
        if self.dense:
            self.Xd, self.Bd = to_dense(prob.X), to_dense(prob.B)
            self.XtX = self.Xd.T @ self.Xd / prob.sigma2
            self.identity_B = prob.q == prob.n and np.array_equal(self.Bd, np.eye(prob.n))

    def precision(self, pi) -> np.ndarray:
        if self.identity_B:
            return self.XtX + np.diag(pi)
        return self.XtX + self.Bd.T @ (pi[:, None] * self.Bd)

    def draw(self, rng, pi, u_prev, cg_tol) -> np.ndarray:
        p = self.prob
        e1 = rng.standard_normal(p.y.size)
        e2 = rng.standard_normal(p.q)
        rhs = self.Xty + p.X.H @ e1 / self.sigma + p.B.H @ (np.sqrt(pi) * e2)
        if self.dense:
            return sla.cho_solve((precision_cholesky(self.precision(pi), self.owner), True), rhs)
        Q = LinearOperator((p.n, p.n), dtype=float,
                           matvec=lambda v: p.X.H @ (p.X @ v) / p.sigma2 + p.B.H @ (pi * (p.B @ v)))
        return check_finite(cg(Q, rhs, x0=u_prev, rtol=cg_tol, maxiter=10 * p.n)[0], self.owner,
                            "a CG draw of u")


class State(NamedTuple):
    """Where a chain is: u, and s = B u (the next precision draw and lp both need it)."""

    u: np.ndarray
    s: np.ndarray


class Info(NamedTuple):
    """What a sweep reports (sample_stats): the unnormalised log posterior of u."""

    lp: float


def kernel(step: GaussianStep, cg_tol: float) -> Kernel:
    """One sweep draws the precisions given u, then u given the precisions (module docstring)."""
    prob = step.prob
    pot = prob.potential

    def init(rng, prob):
        pi = np.broadcast_to(prior_precision(pot), (prob.q,)).copy()
        u = step.draw(rng, pi, np.zeros(prob.n), cg_tol)
        return State(u, prob.B @ u)

    def sweep(rng, state):
        pi = pot.sample_precision(rng, state.s)
        u = step.draw(rng, pi, state.u, cg_tol)
        s = prob.B @ u
        return State(u, s), Info(lp=-prob.neg_log_joint(u, s))

    return Kernel(init=init, step=sweep, position=lambda state: {"u": state.u})


def memory(model, data, options) -> Need:
    """Dense (solver cholesky, or auto up to n = DENSE_N): X^T X, the precision and its factor, dense B and X; the
    CG draws hold vectors only."""
    if options["solver"] == "cholesky" or (options["solver"] == "auto" and data.d <= DENSE_N):
        return dense_memory(model, data, 3)
    return Need({})


@register("gibbs", kind="mcmc", family="slm", memory=memory,
          defaults={"draws": 1000, "tune": 500, "chains": 4},
          applies=lambda model: model.potential in GSM_SAMPLERS,
          description="Gaussian scale-mixture Gibbs sampler with perturb-and-solve Gaussian steps",
          options={"solver": Option("auto", "u-step: cholesky (dense), cg (operators) or auto (dense up to "
                                            f"n = {DENSE_N})", OneOf(SOLVERS)),
                   "thin": Option(1, "keep every thin-th sweep", POSITIVE_INT),
                   "cg_tol": Option(1e-10, "relative residual of the CG solves (solver cg)", POSITIVE)})
@blas_threads()
def run(model, data, *, draws, tune, chains, ctx, solver, thin, cg_tol):
    """Gibbs sampler on (u, precisions) of the SLM (every potential: module docstring)."""
    t0 = time.perf_counter()
    prob = problem(model, data)
    step = GaussianStep(prob, solver, ctx.owner)
    setup = time.perf_counter() - t0
    result = sample(kernel(step, cg_tol), prob, ctx, draws=draws, tune=tune, chains=chains, thin=thin,
                    desc="gibbs (slm)")
    return chains_fit(model, data, result, ctx=ctx, setup=setup,
                      info={"thin": thin, "solver": "cholesky" if step.dense else "cg"})
