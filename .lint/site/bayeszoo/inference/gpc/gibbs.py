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

PG(1, c) draws use the exact alternating-series method of Devroye as specialised by Polson, Scott & Windle (2013,
Sec. 4 and the BayesLogit code): PG(1, c) = J*(1, |c|/2) / 4, proposal = mixture of a truncated exponential
(x > t = 0.64) and a truncated inverse Gaussian (x < t), accepted by the alternating series of the J* density.
The truncated inverse Gaussian with mean 1/z > t is drawn as a Levy variable 1 / N^2 with |N| > t^-1/2 (an exact
truncated-normal draw instead of BayesLogit's nested exponential loop) accepted with probability exp(-z^2 x / 2).
No truncation of the infinite series is involved.

Implementation: a JAX :class:`~bayeszoo.inference.chains.Kernel` (one chain's sweep, in float64) that
:func:`bayeszoo.inference.chains.sample` jits and vmaps over chains, with the driver's seeding, warm-up,
thinning and timing; a logit sweep draws n PG variables (vectorised rejection loops) and factorises one B.
The sweep's constant matrices ride in the chain's State, so the compiled sweep depends on the shapes alone.
Chains start from independent prior draws f ~ N(0, K) (or the option ``init``); ``tune`` sweeps are discarded.
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

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, ndtri
from scipy.special import ndtr as _ndtr

from bayeszoo.checks import Array, Interval
from bayeszoo.inference._random import normal_sign_truncated
from bayeszoo.inference.chains import Kernel, chains_fit, sample
from bayeszoo.numerics.linalg import jittered_cholesky
from bayeszoo.registry import Option, owner, register

OPTIONS = {
    "thin": Option(None, "keep every thin-th sweep (None: 5 for probit / Albert-Chib, 1 for logit / Polya-Gamma)",
                   Interval(int, 1, None, "left", none=True)),
    "init": Option(None, "latent f, one value per training point, that every chain starts from (None: prior draws)",
                   Array(ndim=1, none=True)),
}
DEFAULT_THIN = {"probit": 5, "logit": 1}
TRUNC = 0.64          # Devroye's switch point t between the two proposal pieces
PI = float(np.pi)
TAIL = float(_ndtr(-1.0 / np.sqrt(TRUNC)))   # P(N > t^-1/2), N ~ N(0, 1)


# ------------------------------------------------------------------------------------------------ setup
def check(options, model, data):
    """``thin`` None becomes the likelihood's default; ``init`` must hold one f per training point."""
    init = options["init"]
    if init is not None and init.shape != (data.n,):
        raise ValueError(f"{owner('gpc', 'gibbs')}: option 'init' must be {data.n} finite numbers (one f per "
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
    """sum_n log sig(y_n f_n) along the last axis (JAX)."""
    yf = ypm * f
    return jnp.sum(log_ndtr(yf) if probit else -jnp.logaddexp(0.0, -yf), axis=-1)


# ------------------------------------------------------------------------------------------------ PG(1, c)
def _a_coef(n, x):
    """n-th term of the J*(1, 0) density's alternating series (piecewise at TRUNC)."""
    k = (n + 0.5) * PI
    left = jnp.exp(-1.5 * (jnp.log(0.5 * PI) + jnp.log(jnp.maximum(x, 1e-300))) + jnp.log(k)
                   - 2.0 * (n + 0.5) ** 2 / jnp.maximum(x, 1e-300))
    right = k * jnp.exp(-0.5 * k * k * x)
    return jnp.where(x > TRUNC, right, jnp.where(x > 0, left, 0.0))


def _mass_texpon(z):
    """Probability of the truncated-exponential piece of the proposal."""
    t = TRUNC
    fz = 0.125 * PI ** 2 + 0.5 * z * z
    b = jnp.sqrt(1.0 / t) * (t * z - 1.0)
    a = -jnp.sqrt(1.0 / t) * (t * z + 1.0)
    x0 = jnp.log(fz) + fz * t
    xb = x0 - z + log_ndtr(b)
    xa = x0 + z + log_ndtr(a)
    qdivp = 4.0 / PI * (jnp.exp(xb) + jnp.exp(xa))
    return 1.0 / (1.0 + qdivp)


def _uniforms(key, m):
    """m uniforms in (0, 1) (never exactly 0, so logs and inverse CDFs stay finite)."""
    return jax.random.uniform(key, (m,), dtype=jnp.float64, minval=np.finfo(float).tiny, maxval=1.0)


def _rtigauss(key, z):
    """Inverse Gaussian(mean 1/z, shape 1) truncated to (0, TRUNC).

    One rejection loop serves both regimes (``lax.cond`` would run both loops under ``vmap``): for mean > t a
    Levy proposal 1 / N^2 truncated to (0, t), accepted w.p. exp(-z^2 x / 2); for mean <= t Michael-Schucany-Haas
    draws until one falls below t.
    """
    t = TRUNC
    mu = 1.0 / jnp.maximum(z, 1e-300)
    levy = mu > t

    def cond(s):
        return ~s[2]

    def body(s):
        k, _, _ = s
        k, sub = jax.random.split(k)
        uu = _uniforms(sub, 3)
        nrm = -ndtri(uu[0] * TAIL)                   # N(0, 1) truncated to N > t^-1/2, by inversion
        x_levy = 1.0 / (nrm * nrm)
        u = uu[1]
        ok_levy = u <= jnp.exp(-0.5 * z * z * x_levy)
        yy = ndtri(uu[2]) ** 2
        mus = jnp.where(levy, 1.0, mu)
        muy = mus * yy
        x = mus + 0.5 * mus * muy - 0.5 * mus * jnp.sqrt(4.0 * muy + muy * muy)
        x = jnp.where(u > mus / (mus + x), mus * mus / x, x)
        return k, jnp.where(levy, x_levy, x), jnp.where(levy, ok_levy, x < t)

    return jax.lax.while_loop(cond, body, (key, jnp.asarray(t / 2), jnp.asarray(False)))[1]


def _pg1_scalar(key, c):
    """One exact PG(1, c) draw."""
    z = 0.5 * jnp.abs(c)
    fz = 0.125 * PI ** 2 + 0.5 * z * z
    p_exp = _mass_texpon(z)

    def series(x, y):
        # alternating-series accept / reject of proposal x with uniform height y in (0, a_0(x))
        def cond(s):
            return ~s[2]

        def body(s):
            n, S, _, acc = s
            n = n + 1
            an = _a_coef(n, x)
            odd = (n % 2) == 1
            S = jnp.where(odd, S - an, S + an)
            acc_now = odd & (y <= S)
            rej_now = (~odd) & (y > S)
            return n, S, acc_now | rej_now, acc_now

        S0 = _a_coef(0, x)
        return jax.lax.while_loop(cond, body, (0, S0, False, False))[3]

    def cond(s):
        return ~s[2]

    def body(s):
        k, _, _ = s
        k, sub, k_ig = jax.random.split(k, 3)
        uu = _uniforms(sub, 3)
        x_exp = TRUNC - jnp.log(uu[1]) / fz
        x = jnp.where(uu[0] < p_exp, x_exp, _rtigauss(k_ig, z))
        y = uu[2] * _a_coef(0, x)
        return k, x, series(x, y)

    x = jax.lax.while_loop(cond, body, (key, jnp.asarray(1.0), jnp.asarray(False)))[1]
    return 0.25 * x


def pg1_sample(key, c):
    """Exact Polya-Gamma PG(1, c) draws, one per element of ``c`` (any shape). JAX, jittable, vmappable."""
    c = jnp.asarray(c, dtype=jnp.float64)
    keys = jax.random.split(key, c.size)
    return jax.vmap(_pg1_scalar)(keys, c.reshape(-1)).reshape(c.shape)


def pg1_mean(c):
    """E[PG(1, c)] = tanh(c/2) / (2c) (1/4 at c = 0)."""
    c = np.abs(np.asarray(c, float))
    small = c < 1e-6
    cs = np.where(small, 1.0, c)
    return np.where(small, 0.25 - c ** 2 / 48.0, np.tanh(cs / 2) / (2 * cs))


def pg1_var(c):
    """Var[PG(1, c)] = (sinh(c) - c) / (4 c^3 cosh^2(c/2)) (1/24 at c = 0)."""
    c = np.abs(np.asarray(c, float))
    small = c < 1e-4
    cs = np.where(small, 1.0, c)
    v = (np.sinh(cs) - cs) / (4 * cs ** 3 * np.cosh(cs / 2) ** 2)
    return np.where(small, 1.0 / 24.0, v)


# ------------------------------------------------------------------------------------------------ kernel
def truncated_normal_latent(key, f, ypm):
    """z ~ N(f, 1) truncated to y z > 0 (the Albert-Chib latent), elementwise; exact in the far tail."""
    return normal_sign_truncated(key, f, ypm)


class AlbertChib(NamedTuple):
    """The probit sweep's constants: labels, the mean map A = K (K + I)^-1 and S^1/2 (module docstring)."""

    y: jax.Array
    A: jax.Array
    S_half: jax.Array


class PolyaGamma(NamedTuple):
    """The logit sweep's constants: labels, K, chol(K) and K kappa (module docstring)."""

    y: jax.Array
    K: jax.Array
    LK: jax.Array
    Kkappa: jax.Array


class Problem(NamedTuple):
    """What the chains start from: the sweep's constants, chol(K) for prior draws, and ``init`` (or None)."""

    constants: AlbertChib | PolyaGamma
    LK: np.ndarray
    init: np.ndarray | None


class State(NamedTuple):
    f: jax.Array
    constants: AlbertChib | PolyaGamma


class Info(NamedTuple):
    log_lik: jax.Array


def gibbs_problem(K, ypm, *, probit: bool, init=None) -> Problem:
    """The sweep's constants for kernel matrix ``K`` and labels ``ypm`` in {-1, +1}: one eigendecomposition
    (probit) or the products with kappa (logit), made once."""
    K = np.asarray(K, float)
    ypm = np.asarray(ypm, float)
    if not np.all(np.isfinite(K)):
        raise ValueError(f"{owner('gpc', 'gibbs')}: the kernel matrix K has NaN or inf entries")
    LK = jittered_cholesky(K, what=f"{owner('gpc', 'gibbs')}: the kernel matrix")
    if probit:
        lam, U = np.linalg.eigh(0.5 * (K + K.T))
        r = np.maximum(lam, 0.0) / (1.0 + np.maximum(lam, 0.0))
        constants = AlbertChib(jnp.asarray(ypm), jnp.asarray((U * r) @ U.T), jnp.asarray(U * np.sqrt(r)))
    else:
        constants = PolyaGamma(jnp.asarray(ypm), jnp.asarray(K), jnp.asarray(LK), jnp.asarray(K @ (0.5 * ypm)))
    return Problem(constants, LK, None if init is None else np.asarray(init, float))


def _init(key, problem: Problem) -> State:
    n = problem.LK.shape[0]
    if problem.init is None:
        f = jnp.asarray(problem.LK) @ jax.random.normal(key, (n,), dtype=jnp.float64)
    else:
        f = jnp.asarray(problem.init)
    return State(f, problem.constants)


def _step(key, state: State) -> tuple[State, Info]:
    """One sweep of one chain (module docstring)."""
    k1, k2, k3 = jax.random.split(key, 3)
    c, f = state.constants, state.f
    n = f.shape[0]
    if isinstance(c, AlbertChib):
        z = truncated_normal_latent(k1, f, c.y)
        f = c.A @ z + c.S_half @ jax.random.normal(k2, (n,), dtype=jnp.float64)
    else:
        w = jnp.sqrt(pg1_sample(k1, f))
        g = c.LK @ jax.random.normal(k2, (n,), dtype=jnp.float64) + c.Kkappa
        LB = jnp.linalg.cholesky(jnp.eye(n) + w[:, None] * c.K * w[None, :])
        v = jax.scipy.linalg.cho_solve((LB, True), w * g + jax.random.normal(k3, (n,), dtype=jnp.float64))
        f = g - c.K @ (w * v)
    return State(f, c), Info(log_lik(f, c.y, isinstance(c, AlbertChib)))


KERNEL = Kernel(init=_init, step=_step, position=lambda state: {"f": state.f}, jax=True)


def gibbs_sample(K, ypm, *, probit, draws, tune, chains, seed, thin=1, init=None, progress=False, desc="gibbs"):
    """Run the sampler on an explicit kernel matrix ``K`` and labels ``ypm`` in {-1, +1}.

    Returns ``{"f": (chains, draws, n), "log_likelihood": (chains, draws), "timing": ..., "iterations": ...}``
    (``iterations``: sweeps made, warm-up included).
    """
    problem = gibbs_problem(K, ypm, probit=probit, init=init)
    res = sample(KERNEL, problem, draws=draws, tune=tune, chains=chains, seed=seed, thin=thin, progress=progress,
                 desc=desc, owner=owner("gpc", "gibbs"))
    return {"f": res.posterior["f"], "log_likelihood": res.stats["log_lik"], "timing": res.timing,
            "iterations": res.sweeps}


@register("gibbs", kind="mcmc", family="gpc", options=OPTIONS, check=check,
          description="data-augmentation Gibbs (Albert-Chib for probit, Polya-Gamma for logit); JAX, vmap over chains")
def run(model, data, *, draws, tune, chains, seed, progress, thin, init):
    """Gibbs sampler on f: Albert-Chib (probit) or exact Polya-Gamma (logit) augmentation."""
    t0 = time.perf_counter()
    probit = model.likelihood == "probit"
    problem = gibbs_problem(*kernel_and_labels(model, data), probit=probit, init=init)
    setup = time.perf_counter() - t0
    res = sample(KERNEL, problem, draws=draws, tune=tune, chains=chains, seed=seed, thin=thin, progress=progress,
                 desc=f"gibbs ({model.likelihood})", owner=owner("gpc", "gibbs"))
    return chains_fit(model, data, "gibbs", res, setup=setup,
                      info={"thin": thin, "augmentation": "albert-chib" if probit else "polya-gamma"})
