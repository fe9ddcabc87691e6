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

Chains run one after another, each from its own seed (``SeedSequence([seed, chain])``), started from a
perturb-and-solve draw at the prior mean precisions.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import LinearOperator, cg

from bayeszoo import checks
from bayeszoo.inference.slm._common import Timer, blas_threads, check_finite, cholesky, owner, problem
from bayeszoo.results import build_fit
from bayeszoo.numerics.operators import to_dense
from bayeszoo.numerics.potentials import GSM_SAMPLERS
from bayeszoo.progress import progress_bar
from bayeszoo.registry import Option, register

SOLVERS = ("auto", "cholesky", "cg")
DENSE_N = 2000          # "auto" uses the dense Cholesky factor up to this n


def _check(opts):
    opts = dict(opts)
    checks.choice(owner("gibbs"), "solver", opts["solver"], SOLVERS)
    opts["thin"] = checks.positive(owner("gibbs"), "thin", opts["thin"], integer=True)
    opts["cg_tol"] = checks.positive(owner("gibbs"), "cg_tol", opts["cg_tol"])
    return opts


class GaussianStep:
    """Draws u | pi by perturb-and-solve (module docstring, step 2)."""

    def __init__(self, prob, solver: str):
        self.prob = prob
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
            return sla.cho_solve((cholesky(self.precision(pi), "gibbs"), True), rhs)
        Q = LinearOperator((p.n, p.n), dtype=float,
                           matvec=lambda v: p.X.H @ (p.X @ v) / p.sigma2 + p.B.H @ (pi * (p.B @ v)))
        return check_finite(cg(Q, rhs, x0=u_prev, rtol=cg_tol, maxiter=10 * p.n)[0], "gibbs", "a CG draw of u")


def _prior_precision(pot) -> np.ndarray:
    """1 / E[gamma] under the mixing distribution: a starting point for the precisions."""
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


@register("gibbs", kind="mcmc", family="slm", check=_check,
          defaults={"draws": 1000, "tune": 500, "chains": 4},
          applies=lambda model: model.potential in GSM_SAMPLERS,
          description="Gaussian scale-mixture Gibbs sampler with perturb-and-solve Gaussian steps",
          options={"solver": Option("auto", "u-step: cholesky (dense), cg (operators) or auto (dense up to "
                                            f"n = {DENSE_N})"),
                   "thin": Option(1, "keep every thin-th sweep"),
                   "cg_tol": Option(1e-10, "relative residual of the CG solves (solver cg)")})
@blas_threads()
def run(model, data, *, draws, tune, chains, seed, progress, **opts):
    """Gibbs sampler on (u, precisions) of the SLM (every potential: module docstring)."""
    timer = Timer()
    prob = problem(model, data)
    pot = prob.potential
    step = GaussianStep(prob, opts["solver"])
    t_setup = timer()
    thin, seed = opts["thin"], 0 if seed is None else int(seed)
    u_out = np.empty((chains, draws, prob.n))
    lp = np.empty((chains, draws))
    t_tune = 0.0
    sweeps = tune + draws * thin
    with progress_bar(total=chains * sweeps, desc="gibbs (slm)", disable=not progress) as bar:
        for c in range(chains):
            rng = np.random.default_rng(np.random.SeedSequence([seed, c]))
            u = step.draw(rng, np.broadcast_to(_prior_precision(pot), (prob.q,)).copy(), np.zeros(prob.n),
                          opts["cg_tol"])
            t0 = timer()
            for i in range(sweeps):
                pi = pot.sample_precision(rng, prob.B @ u)
                u = step.draw(rng, pi, u, opts["cg_tol"])
                if i >= tune and (i - tune + 1) % thin == 0:
                    k = (i - tune + 1) // thin - 1
                    u_out[c, k] = u
                    lp[c, k] = -prob.neg_log_joint(u)
                if i + 1 == tune:
                    t_tune += timer() - t0
                if (i + 1) % 100 == 0 or i + 1 == sweeps:
                    bar.update((i % 100) + 1)
    t_total = timer()
    info = {"iterations": sweeps, "converged": None, "thin": thin,
            "solver": "cholesky" if step.dense else "cg"}
    return build_fit(model, data, "gibbs", "mcmc", {"u": u_out}, sample_stats={"lp": lp}, info=info,
                     timing={"compile": t_setup, "tune": t_tune, "sample": t_total - t_setup - t_tune})
