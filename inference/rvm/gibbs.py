"""``gibbs``: conjugate Gibbs sampler for the RVM (digest §1.7 "Gibbs conditionals").

Regression, one sweep:
    w | alpha, beta, t  ~ N(mu, Sigma), Sigma = (beta Phi^T Phi + A)^-1, mu = beta Sigma Phi^T t   [T 2.13-2.14]
    alpha_i | w_i       ~ Gamma(a + 1/2, b + w_i^2 / 2)
    beta | w, t         ~ Gamma(c + N/2, d + |t - Phi w|^2 / 2)          (Gamma on beta, not sigma^2 [T 2.7])
Probit classification (``RVM(task="classification", link="probit")``), Albert-Chib augmentation:
    z_n | w ~ N(phi_n^T w, 1) truncated to z_n > 0 if t_n = 1 and z_n < 0 if t_n = 0;
    w | z, alpha ~ N((Phi^T Phi + A)^-1 Phi^T z, (Phi^T Phi + A)^-1); alpha as above.
The logit link has no conjugate augmentation here, so the backend applies to regression and probit only.

A JAX :class:`~bayeszoo.inference.chains.Kernel` in float64, run by :func:`bayeszoo.inference.chains.sample`
(jit + vmap over chains; seeding, warm-up, thinning, progress and the non-finite check are the driver's). The
problem's arrays travel in the state, so one compiled sweep serves every problem of the same shape. The w draw
uses Phi^T Phi and Phi^T t computed once, so a regression sweep costs one M x M Cholesky (after unit-diagonal
scaling), O(M^2), and O(N M) for the residual |t - Phi w|^2 of the beta draw (formed directly: its expansion
cancels for targets far from zero). When M > 2N the w draw switches to the Bhattacharya, Chakraborty &
Mallick (2016) sampler (one N x N Cholesky). Chains start from dispersed (alpha, beta) around data-based values,
drawn from the chain's key.

Options: ``thin`` (keep every thin-th sweep), ``fix_alpha`` / ``fix_beta`` (hold alpha (scalar or length-M)
and / or beta fixed at the given values: then w | t is exactly Gaussian, which the tests use), ``init``
(dict with any of ``w``, ``alpha``, ``beta`` to start every chain from).
"""
from __future__ import annotations

import functools
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr
import numpy as np

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Interval, Numbers
from bayeszoo.inference import chains as chain_driver
from bayeszoo.inference._random import normal_sign_truncated
from bayeszoo.registry import Option, owner, register

#: a chain's draws per compiled call: a quarter of them (a twentieth with a progress bar, so that it moves)
CALLS, CALLS_WITH_PROGRESS = 4, 20


class StartingPoint:
    """The ``init`` option: None or a dict with any of ``w`` (a number or one per basis), ``alpha`` (positive, a
    number or one per basis) and ``beta`` (positive); the lengths are checked against the basis with the data."""

    entries = {"w": Numbers(Interval(float), scalar=True), "alpha": Numbers(POSITIVE, scalar=True), "beta": POSITIVE}

    def __call__(self, who: str, name: str, value):
        if value is None:
            return None
        if not isinstance(value, dict) or set(value) - set(self.entries):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise ValueError(f"{who}: {name} must be None or a dict with keys among 'w', 'alpha', 'beta'; got {shown}")
        return {key: self.entries[key](who, f"{name} entry {key!r}", v) for key, v in value.items()}


OPTIONS = {
    "thin": Option(1, "keep every thin-th sweep", POSITIVE_INT),
    "fix_alpha": Option(None, "hold alpha fixed at this value (a number, or one per basis); None: sample it",
                        Numbers(POSITIVE, scalar=True, none=True)),
    "fix_beta": Option(None, "hold the noise precision beta fixed at this value (regression); None: sample it",
                       Interval(float, 0, None, "neither", none=True)),
    "init": Option(None, "starting point of every chain: a dict with any of 'w', 'alpha', 'beta'; None: dispersed",
                   StartingPoint()),
}


def _applies(model):
    return (not model.is_classifier) or model.link == "probit"


def check(options: dict, model, data) -> dict:
    """The per-basis options must have 1 or M entries (M is known only with the data); beta is regression's."""
    M = model.n_basis(data)
    init = options["init"] or {}
    for name, value in (("option 'fix_alpha'", options["fix_alpha"]), ("option 'init' entry 'w'", init.get("w")),
                        ("option 'init' entry 'alpha'", init.get("alpha"))):
        if value is not None and len(value) not in (1, M):
            raise ValueError(f"{owner('rvm', 'gibbs')}: {name} must be a number or {M} numbers (one per basis); "
                             f"got {len(value)}")
    if model.is_classifier:
        for name, given in (("option 'fix_beta'", options["fix_beta"] is not None),
                            ("option 'init' entry 'beta'", "beta" in init)):
            if given:
                raise ValueError(f"{owner('rvm', 'gibbs')}: {name} applies to regression only (classification has "
                                 f"no beta)")
    return options


# ------------------------------------------------------------------------------------------------ kernels
def _chol_sample(H, rhs, z):
    """mean H^-1 rhs plus H^-1/2-distributed noise, via Cholesky of D^-1 H D^-1 (unit diagonal)."""
    dvec = jnp.sqrt(jnp.diag(H))
    Hs = H / dvec[:, None] / dvec[None, :]
    L = jnp.linalg.cholesky(Hs)
    y = jax.scipy.linalg.solve_triangular(L, rhs / dvec, lower=True)
    # mean = D^-1 L^-T L^-1 D^-1 rhs, noise = D^-1 L^-T z: one back-substitution for both
    return jax.scipy.linalg.solve_triangular(L.T, y + z, lower=False) / dvec


def _bhattacharya(Phi_s, alpha, target, z1, z2):
    """Draw from N(Sigma Phi_s^T target, Sigma), Sigma = (Phi_s^T Phi_s + diag(alpha))^-1, in O(N^2 M)."""
    dinv = 1.0 / alpha
    u = z1 * jnp.sqrt(dinv)
    v = Phi_s @ u + z2
    K = (Phi_s * dinv[None, :]) @ Phi_s.T + jnp.eye(Phi_s.shape[0])
    Lk = jnp.linalg.cholesky(K)
    wp = jax.scipy.linalg.cho_solve((Lk, True), target - v)
    return u + dinv * (Phi_s.T @ wp)


def _gamma(key, shape, size):
    """Standard Gamma(shape) draws: Marsaglia-Tsang with 12 vectorised proposals (acceptance >= 0.95 each, so
    all fail with probability < 1e-15) and the U^(1/k) boost for shape < 1. Compiles in a fraction of the
    time of ``jax.random.gamma``'s rejection loop."""
    shape = jnp.broadcast_to(shape, size)
    boost = shape < 1.0
    k = jnp.where(boost, shape + 1.0, shape)
    dd = k - 1.0 / 3.0
    cc = 1.0 / jnp.sqrt(9.0 * dd)
    k_n, k_u, k_b = jax.random.split(key, 3)
    x = jax.random.normal(k_n, (12,) + tuple(size), dtype=jnp.float64)
    u = jax.random.uniform(k_u, (12,) + tuple(size), dtype=jnp.float64)
    v = (1.0 + cc * x) ** 3
    ok = (v > 0) & (jnp.log(u) < 0.5 * x * x + dd - dd * v + dd * jnp.log(jnp.where(v > 0, v, 1.0)))
    first = jnp.argmax(ok, axis=0)
    g = dd * jnp.take_along_axis(v, first[None], axis=0)[0]
    ub = jax.random.uniform(k_b, tuple(size), dtype=jnp.float64)
    return jnp.where(boost, g * ub ** (1.0 / shape), g)


class Problem(NamedTuple):
    """The arrays one sweep reads (per chain in the state, so that the compiled sweep depends on shapes only)."""

    Phi: jax.Array
    t: jax.Array
    G: jax.Array          # Phi^T Phi
    Pt: jax.Array         # Phi^T t
    hyper: jax.Array      # a, b, c, d


class State(NamedTuple):
    w: jax.Array
    alpha: jax.Array
    beta: jax.Array
    problem: Problem


class Info(NamedTuple):
    """What a sweep reports (sample_stats): the unnormalised log posterior of (w, log alpha, log beta) after it."""

    lp: jax.Array


class Setup(NamedTuple):
    """What ``init`` needs: the problem's arrays, the start's scales and the user's starting / fixed values."""

    problem: Problem
    alpha_scale: float
    beta_scale: float
    init: dict
    fix_alpha: np.ndarray | None
    fix_beta: float | None


@functools.lru_cache(maxsize=32)
def kernel(probit: bool, fix_alpha: bool, fix_beta: bool, woodbury: bool) -> chain_driver.Kernel:
    """The Gibbs kernel of one configuration (one object per configuration, shapes come from the state)."""

    def init(key, setup: Setup) -> State:
        p = setup.problem
        M = p.Phi.shape[1]
        k_a, k_b = jax.random.split(key)
        alpha = setup.alpha_scale * jnp.exp(jax.random.normal(k_a, (M,)))
        beta = setup.beta_scale * jnp.exp(0.5 * jax.random.normal(k_b, ()))
        w = jnp.zeros(M)
        if "alpha" in setup.init:
            alpha = jnp.broadcast_to(jnp.asarray(setup.init["alpha"], float), (M,))
        if "beta" in setup.init:
            beta = jnp.asarray(float(setup.init["beta"]))
        if "w" in setup.init:
            w = jnp.broadcast_to(jnp.asarray(setup.init["w"], float), (M,))
        if fix_alpha:
            alpha = jnp.broadcast_to(jnp.asarray(setup.fix_alpha, float), (M,))
        if fix_beta:
            beta = jnp.asarray(float(setup.fix_beta))
        return State(w, alpha, beta, p)

    def step(key, state: State):
        w, alpha, beta, p = state
        N, M = p.Phi.shape
        k_w, k_a, k_b, k_z, k_z2 = jax.random.split(key, 5)
        a, b, c, d = p.hyper
        if probit:
            zlat = normal_sign_truncated(k_z, p.Phi @ w, 2.0 * p.t - 1.0)
            if woodbury:
                w = _bhattacharya(p.Phi, alpha, zlat, jax.random.normal(k_w, (M,)), jax.random.normal(k_z2, (N,)))
            else:
                w = _chol_sample(p.G + jnp.diag(alpha), p.Phi.T @ zlat, jax.random.normal(k_w, (M,)))
        elif woodbury:
            sb = jnp.sqrt(beta)
            w = _bhattacharya(sb * p.Phi, alpha, sb * p.t, jax.random.normal(k_w, (M,)), jax.random.normal(k_z2, (N,)))
        else:
            w = _chol_sample(beta * p.G + jnp.diag(alpha), beta * p.Pt, jax.random.normal(k_w, (M,)))
        if not fix_alpha:
            alpha = _gamma(k_a, a + 0.5, (M,)) / (b + 0.5 * w * w)
        f = p.Phi @ w
        r = p.t - f      # formed directly: t.t - 2 w.Phi^T t + w.G w cancels for targets far from zero
        if not probit and not fix_beta:
            beta = _gamma(k_b, c + 0.5 * N, ()) / (d + 0.5 * (r @ r))
        # log p(t | w, beta) + log N(w | 0, A^-1) + the Gamma densities of log alpha and log beta (constants dropped)
        lp = jnp.sum(0.5 * jnp.log(alpha) - 0.5 * alpha * w * w + a * jnp.log(alpha) - b * alpha)
        if probit:
            lp += jnp.sum(log_ndtr((2.0 * p.t - 1.0) * f))
        else:
            lp += 0.5 * N * jnp.log(beta) - 0.5 * beta * (r @ r) + c * jnp.log(beta) - d * beta
        return State(w, alpha, beta, p), Info(lp=lp)

    def position(state: State) -> dict:
        out = {"w": state.w, "log_alpha": jnp.log(state.alpha)}
        if not probit:
            out["log_beta"] = jnp.log(state.beta)
        return out

    return chain_driver.Kernel(init=init, step=step, position=position, jax=True)


def sample(Phi, t, hyper, *, draws, tune, chains, seed, probit=False, thin=1, fix_alpha=None, fix_beta=None,
           init=None, progress=False, diagnosis: str | None = None) -> chain_driver.Chains:
    """The chains on an explicit design ``Phi`` with hyperparameters ``hyper = (a, b, c, d)``."""
    Phi = np.asarray(Phi, float)
    t = np.asarray(t, float)
    N, M = Phi.shape
    G = Phi.T @ Phi
    problem = Problem(jnp.asarray(Phi), jnp.asarray(t), jnp.asarray(G), jnp.asarray(Phi.T @ t),
                      jnp.asarray(np.asarray(hyper, float)))
    var_t = float(np.var(t)) if (not probit and np.var(t) > 0) else 1.0
    setup = Setup(problem, float(np.mean(np.diag(G))) / N / var_t, 10.0 / var_t, dict(init or {}),
                  None if fix_alpha is None else np.asarray(fix_alpha, float), fix_beta)
    calls = CALLS_WITH_PROGRESS if progress else CALLS
    return chain_driver.sample(kernel(bool(probit), fix_alpha is not None, fix_beta is not None, M > 2 * N), setup,
                               draws=draws, tune=tune, chains=chains, seed=seed, thin=thin, progress=progress,
                               desc="gibbs", owner=owner("rvm", "gibbs"), chunk=-(-draws // calls),
                               **({"diagnosis": diagnosis} if diagnosis else {}))


def gibbs_sample(Phi, t, hyper, **kwargs) -> dict:
    """:func:`sample`'s draws as arrays (chains, draws, ...) by variable, with ``timing`` and ``sweeps``."""
    res = sample(Phi, t, hyper, **kwargs)
    return {**res.posterior, "timing": res.timing, "sweeps": res.sweeps}


def _singular_precision(model) -> str:
    """Why a chain of this model leaves double precision, and what to do."""
    return (f"the conditional precision of w, {'Phi^T Phi' if model.is_classifier else 'beta Phi^T Phi'} + "
            f"diag(alpha), became singular to working precision. This happens when the weight prior is nearly flat "
            f"(here a = {model.a:g}, b = {model.b:g}; some alpha_i then fall below rounding) while kernel columns are "
            f"nearly collinear (here the {model._kernel_text()}). Use a proper weight prior such as RVM(a=1, b=1e-2) "
            f"for sampling, or a kernel that varies more between the inputs")


@register("gibbs", kind="mcmc", family="rvm", applies=_applies, options=OPTIONS, check=check,
          description="conjugate Gibbs sampler (JAX, vmap over chains); Albert-Chib for probit classification")
def run(model, data, *, draws, tune, chains, seed, progress, **opts):
    """Conjugate Gibbs: w | alpha, beta Gaussian; alpha_i, beta Gamma; probit via Albert-Chib."""
    t0 = time.perf_counter()
    Phi = model.training_design(data)
    setup = time.perf_counter() - t0
    res = sample(Phi, data.y, (model.a, model.b, model.c, model.d), draws=draws, tune=tune, chains=chains,
                 seed=seed, probit=model.is_classifier, thin=opts["thin"], fix_alpha=opts["fix_alpha"],
                 fix_beta=opts["fix_beta"], init=opts["init"], progress=progress,
                 diagnosis=_singular_precision(model))
    info = {"thin": opts["thin"], "w_sampler": "bhattacharya" if Phi.shape[1] > 2 * Phi.shape[0] else "cholesky",
            "fixed": [k for k in ("fix_alpha", "fix_beta") if opts[k] is not None]}
    return chain_driver.chains_fit(model, data, "gibbs", res, info=info, setup=setup)
