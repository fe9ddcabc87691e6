"""``gibbs``: data-augmentation Gibbs samplers for binary GP classification (not in the thesis; digest ch. 4, item 7).

Prior f ~ N(0, K) at the training inputs, labels y_n in {-1, +1} (0/1 in the Dataset).

Probit (Albert & Chib 1993). Augment z_n = f_n + e_n, e_n ~ N(0, 1), y_n = sign(z_n). One sweep:
    z_n | f_n, y_n ~ N(f_n, 1) truncated to y_n z_n > 0;
    f | z          ~ N(A z, S),  A = K (K + I)^-1,  S = K - K (K + I)^-1 K = (K^-1 + I)^-1.
A and S share the eigenvectors of K (K = U diag(lam) U^T: A = S = U diag(lam / (1 + lam)) U^T), so one
symmetric eigendecomposition, done once, gives the mean map and the square root S^1/2 = U diag(sqrt(lam/(1+lam)))
used every sweep: O(n^2) per sweep, no inverse of K.

Logit (Polson, Scott & Windle 2013). With kappa = y / 2 and omega_n ~ PG(1, f_n):
    omega_n | f_n ~ PG(1, f_n);
    f | omega     ~ N(Sigma kappa, Sigma),  Sigma = (K^-1 + Omega)^-1 = K - K W (I + W K W)^-1 W K,  W = Omega^1/2.
The f draw is Matheron's rule on the pseudo-observation Omega^-1 kappa = f + N(0, Omega^-1), written so that
Omega^-1 never appears: g = L_K xi + K kappa (xi ~ N(0, I), L_K = chol(K)), then
    f = g - K W B^-1 (W g + eps),  B = I + W K W = L_B L_B^T,  eps ~ N(0, I),
one n x n Cholesky of the well-conditioned B (eigenvalues >= 1) per sweep; the same matrix as the thesis's Laplace
and EP numerics (Table 4.3).

PG(1, c) draws come from the ``polyagamma`` package (:func:`bayeszoo.inference.random_draws.polya_gamma`: its
alternating-series method, exact at every c), and the truncated normals are exact inverse-CDF draws in log space.

Implementation: a NumPy :class:`~bayeszoo.inference.chains.Kernel` (one chain's sweep) run by
:func:`bayeszoo.inference.chains.sample`, with the driver's seeding, warm-up, thinning and timing. NumPy, not JAX:
a sweep is two matrix-vector products (probit) or one Cholesky (logit) either way, and JAX's compilation (seconds,
on every cold start) cost more than the whole run. Chains start from independent prior draws f ~ N(0, K) (or the
option ``init``); ``tune`` sweeps are discarded.
``sample_stats["log_lik"]`` is sum_n log sig(y_n f_n) at each kept draw (ArviZ has no name for it; ``lp`` would
be the joint density). ``info["iterations"]`` counts the sweeps, warm-up included.

Options: ``thin`` (keep every thin-th sweep; default 5 for Albert-Chib, 1 for Polya-Gamma), ``init`` (an (n,) array
to start every chain from). The Albert-Chib chain mixes slowly where the prior variance is large (z and f are
strongly coupled), hence its thinning by default; Polya-Gamma sweeps cost more but mix well unthinned (R-hat
figures on sonar: BENCHMARKS.md).
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
from scipy.linalg import cho_solve
from scipy.special import log_ndtr

from bayeszoo.checks import Array, Interval
from bayeszoo.inference.random_draws import normal_sign_truncated, polya_gamma
from bayeszoo.inference.chains import Kernel, chains_fit, sample
from bayeszoo.numerics.blas_threads import one_blas_thread
from bayeszoo.numerics.linalg import jittered_cholesky
from bayeszoo.registry import Option, register

from .common import memory as gpc_memory

OPTIONS = {
    "thin": Option(None, "keep every thin-th sweep (None: 5 for probit / Albert-Chib, 1 for logit / Polya-Gamma)",
                   Interval(int, 1, None, "left", none=True)),
    "init": Option(None, "latent f, one value per training point, that every chain starts from (None: prior draws)",
                   Array(ndim=1, none=True)),
}
DEFAULT_THIN = {"probit": 5, "logit": 1}


# ------------------------------------------------------------------------------------------------ setup
def check(options, model, data, owner):
    """``thin`` None becomes the likelihood's default; ``init`` must hold one f per training point."""
    init = options["init"]
    if init is not None and init.shape != (data.n,):
        raise ValueError(f"{owner}: option 'init' must be {data.n} finite numbers (one f per "
                         f"training point); got {init.shape[0]}")
    thin = DEFAULT_THIN[model.likelihood] if options["thin"] is None else options["thin"]
    return {**options, "thin": thin}


def kernel_and_labels(model, data):
    """(K + jitter I, labels in {-1, +1}) at the training inputs; a ValueError naming the option to change when K
    is numerically singular (:meth:`GPC.cholesky`)."""
    K = np.asarray(model.K(data.X), float)
    model.cholesky(data.X, K=K)
    return K, np.asarray(model.labels_pm(data.y), float)


def log_lik(f, ypm, probit):
    """sum_n log sig(y_n f_n) along the last axis."""
    yf = ypm * f
    return np.sum(log_ndtr(yf) if probit else -np.logaddexp(0.0, -yf), axis=-1)


# ------------------------------------------------------------------------------------------------ kernel
class AlbertChib(NamedTuple):
    """The probit sweep's constants: labels, the mean map A = K (K + I)^-1 and S^1/2 (module docstring)."""

    y: np.ndarray
    A: np.ndarray
    S_half: np.ndarray


class PolyaGamma(NamedTuple):
    """The logit sweep's constants: labels, K, chol(K) and K kappa (module docstring)."""

    y: np.ndarray
    K: np.ndarray
    LK: np.ndarray
    Kkappa: np.ndarray


class Problem(NamedTuple):
    """What the chains start from: the sweep's constants, chol(K) for prior draws, and ``init`` (or None)."""

    constants: AlbertChib | PolyaGamma
    LK: np.ndarray
    init: np.ndarray | None


class State(NamedTuple):
    f: np.ndarray
    constants: AlbertChib | PolyaGamma


class Info(NamedTuple):
    log_lik: float


def gibbs_problem(K, ypm, *, probit: bool, owner: str, init=None) -> Problem:
    """The sweep's constants for kernel matrix ``K`` and labels ``ypm`` in {-1, +1}: one eigendecomposition
    (probit) or the products with kappa (logit), made once; ``owner`` names the sampler in errors."""
    K = np.asarray(K, float)
    ypm = np.asarray(ypm, float)
    if not np.all(np.isfinite(K)):
        raise ValueError(f"{owner}: the kernel matrix K has NaN or inf entries")
    LK = jittered_cholesky(K, what=f"{owner}: the kernel matrix")
    if probit:
        lam, U = np.linalg.eigh(0.5 * (K + K.T))
        r = np.maximum(lam, 0.0) / (1.0 + np.maximum(lam, 0.0))
        constants = AlbertChib(ypm, (U * r) @ U.T, U * np.sqrt(r))
    else:
        constants = PolyaGamma(ypm, K, LK, K @ (0.5 * ypm))
    return Problem(constants, LK, None if init is None else np.asarray(init, float))


def _init(rng, problem: Problem) -> State:
    if problem.init is None:
        f = problem.LK @ rng.standard_normal(problem.LK.shape[0])
    else:
        f = problem.init.copy()
    return State(f, problem.constants)


def _step(rng, state: State) -> tuple[State, Info]:
    """One sweep of one chain (module docstring)."""
    c, f = state.constants, state.f
    n = f.shape[0]
    if isinstance(c, AlbertChib):
        z = normal_sign_truncated(rng, f, c.y)
        f = c.A @ z + c.S_half @ rng.standard_normal(n)
    else:
        w = np.sqrt(polya_gamma(rng, 1, f))
        g = c.LK @ rng.standard_normal(n) + c.Kkappa
        LB = np.linalg.cholesky(np.eye(n) + w[:, None] * c.K * w[None, :])
        v = cho_solve((LB, True), w * g + rng.standard_normal(n), check_finite=False)
        f = g - c.K @ (w * v)
    return State(f, c), Info(float(log_lik(f, c.y, isinstance(c, AlbertChib))))


KERNEL = Kernel(init=_init, step=_step, position=lambda state: {"f": state.f})


class GibbsDraws(NamedTuple):
    """The draws of :func:`gibbs_sample`.

    f
        The latent function at the training inputs, (chains, draws, n).
    log_likelihood
        log p(y | f) of every draw, (chains, draws).
    timing
        Seconds by phase (the chain driver's ``compile``, ``tune``, ``sample``).
    iterations
        The sweeps made per chain, warm-up included.
    """

    f: np.ndarray
    log_likelihood: np.ndarray
    timing: dict
    iterations: int


def gibbs_sample(K, ypm, ctx, *, probit, draws, tune, chains, thin=1, init=None, desc="gibbs") -> GibbsDraws:
    """Run the sampler on an explicit kernel matrix ``K`` and labels ``ypm`` in {-1, +1}, seeded by the run
    context ``ctx``: its :class:`GibbsDraws`."""
    problem = gibbs_problem(K, ypm, probit=probit, init=init, owner=ctx.owner)
    with one_blas_thread(problem.LK.shape[0]):
        res = sample(KERNEL, problem, ctx, draws=draws, tune=tune, chains=chains, thin=thin, desc=desc)
    return GibbsDraws(f=res.posterior["f"], log_likelihood=res.stats["log_lik"], timing=res.timing,
                      iterations=res.sweeps)


@register("gibbs", kind="mcmc", family="gpc", options=OPTIONS, check=check, memory=gpc_memory(5.5, approximation=False),
          description="data-augmentation Gibbs (Albert-Chib for probit, Polya-Gamma for logit)")
def run(model, data, *, draws, tune, chains, ctx, thin, init):
    """Gibbs sampler on f: Albert-Chib (probit) or exact Polya-Gamma (logit) augmentation."""
    t0 = time.perf_counter()
    probit = model.likelihood == "probit"
    problem = gibbs_problem(*kernel_and_labels(model, data), probit=probit, init=init, owner=ctx.owner)
    setup = time.perf_counter() - t0
    with one_blas_thread(problem.LK.shape[0]):
        res = sample(KERNEL, problem, ctx, draws=draws, tune=tune, chains=chains, thin=thin,
                     desc=f"gibbs ({model.likelihood})")
    return chains_fit(model, data, res, ctx=ctx, setup=setup,
                      info={"thin": thin, "augmentation": "albert-chib" if probit else "polya-gamma"})
