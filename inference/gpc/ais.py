"""``ais``: annealed importance sampling of the GPC log evidence from the prior (Nickisch thesis §4.10; digest §3.11).

Path of tempered posteriors  p_t(f) ∝ N(f | 0, K) prod_n sig(y_n f_n)^beta_t,  0 = beta_0 < ... < beta_T = 1,
started from the prior as in the thesis's reported evidence evaluations. One run r:
    f_0 ~ N(0, K);  for t = 1..T:  log w_r += (beta_t - beta_{t-1}) log P(y | f_{t-1});  f_t ~ T_t(f_{t-1}),
where T_t leaves p_t invariant; Z_r = exp(log w_r) is an unbiased estimate of Z (4.22 with one sample per
temperature). R independent runs are combined as log Z = log (1/R) sum_r Z_r (Neal 2001), with the delta-method
standard error  se = sd_r(Z_r) / (sqrt(R) mean_r(Z_r))  (computed on exp(log w_r - max log w) for stability).

Transitions: elliptical slice sampling (Murray, Adams & MacKay 2010) in the prior's whitened coordinates
f = L u, u ~ N(0, I), L = chol(K + jitter I). ESS is exact for a Gaussian prior times any likelihood (here
likelihood^beta_t), needs no step size and no tuning, and at beta = 0 it is an exact prior draw; the thesis used
HMC, whose step sizes it does not report. ``n_steps`` ESS updates are made at each temperature.

Schedules (``schedule``): ``"power"`` (default) beta_t = (t / T)^4, dense near the prior where the increments of
log w are largest; ``"geometric"`` beta_t log-spaced from 1e-6 to 1 (beta_0 = 0); ``"linear"``; or an explicit
increasing array starting at 0 and ending at 1 (``n_temps`` is then ignored).

As a backend, runs are laid out as (chains, draws): n_runs = chains * draws by default (``n_runs`` must be a
multiple of ``chains``; the posterior then has n_runs / chains draws). The posterior ``f`` holds the
final-temperature states as they are, not resampled: each is a draw from an AIS run whose importance weight is
``sample_stats["log_weight"]``; self-normalised weighted moments are exact in the limit, unweighted ones are
accurate when the weights are even (``info["weight_ess"]`` reports their effective sample size). ``tune`` is
unused (AIS from the prior has no burn-in). ``info["log_evidence"]`` and ``info["log_evidence_se"]``.

Implementation: JAX, ``vmap`` over runs, ``lax.scan`` over temperatures in 20 fixed-size blocks (for the progress
bar; block boundaries do not affect the draws). Run r, temperature t uses key fold_in(k_r, t), k_r the run context's
key of chain r (``ctx.chain_keys``: fold_in(PRNGKey(seed), r)).
"""
from __future__ import annotations

import functools
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeszoo import checks
from bayeszoo.checks import POSITIVE_INT
from bayeszoo.results import build_fit
from bayeszoo.progress import progress_bar
from bayeszoo import registry
from bayeszoo.registry import Option, register

from .common import memory as gpc_memory
from .gibbs import kernel_and_labels

SCHEDULES = ("power", "geometric", "linear")
N_BLOCKS = 20


def log_lik(f, ypm, probit):
    """sum_n log sig(y_n f_n) along the last axis (JAX: traced inside the compiled annealing runs)."""
    from jax.scipy.special import log_ndtr

    yf = ypm * f
    return jnp.sum(log_ndtr(yf) if probit else -jnp.logaddexp(0.0, -yf), axis=-1)


def schedule_constraint(owner: str, name: str, value):
    """One of :data:`SCHEDULES`, or an array of temperatures non-decreasing from 0 to 1 (at least 2 values),
    returned as a float array (a constraint, ``bayeszoo.checks``)."""
    if isinstance(value, str):
        return checks.choice(owner, name, value, SCHEDULES)
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise ValueError(f"{owner}: {name} must be one of {SCHEDULES} or an array of temperatures; got {value!r}")
    betas = checks.finite_array(owner, name, value, ndim=1)
    if betas.size < 2 or betas[0] != 0.0 or betas[-1] != 1.0 or np.any(np.diff(betas) < 0):
        raise ValueError(f"{owner}: {name} as an array must be non-decreasing from 0 to 1 (at least 2 values); "
                         f"got {value!r}")
    return betas


OPTIONS = {
    "n_temps": Option(1000, "number of temperatures T after the prior (ignored for an explicit schedule)",
                      POSITIVE_INT),
    "schedule": Option("power", "'power' (beta = (t/T)^4), 'geometric', 'linear', or an increasing array from 0 to 1",
                       schedule_constraint),
    "n_steps": Option(1, "elliptical slice updates at each temperature", POSITIVE_INT),
}


def make_schedule(schedule="power", n_temps=1000, owner: str = "AIS") -> np.ndarray:
    """beta_0 = 0 < ... < beta_T = 1 (length n_temps + 1); ``owner`` names the backend in errors."""
    schedule = schedule_constraint(owner, "option 'schedule'", schedule)
    if isinstance(schedule, str):
        T = POSITIVE_INT(owner, "option 'n_temps'", n_temps)
        s = np.arange(T + 1) / T
        if schedule == "power":
            return s ** 4
        if schedule == "linear":
            return s
        return np.concatenate([[0.0], np.geomspace(1e-6, 1.0, T)])
    return schedule


def _ess_step(key, u, ll, beta, L, ypm, probit):
    """One elliptical slice sampling update of u for the target N(u | 0, I) P(y | L u)^beta."""
    k_nu, k_y, k_th = jax.random.split(key, 3)
    nu = jax.random.normal(k_nu, u.shape, dtype=jnp.float64)
    log_y = beta * ll + jnp.log(jax.random.uniform(k_y, dtype=jnp.float64))
    theta = jax.random.uniform(k_th, minval=0.0, maxval=2 * np.pi, dtype=jnp.float64)

    def propose(theta):
        up = u * jnp.cos(theta) + nu * jnp.sin(theta)
        return up, log_lik(L @ up, ypm, probit)

    up, llp = propose(theta)

    def cond(s):
        return ~s[5]

    def body(s):
        k, lo, hi, th, _, _, _ = s[0], s[1], s[2], s[3], s[4], s[5], s[6]
        lo = jnp.where(th < 0, th, lo)
        hi = jnp.where(th < 0, hi, th)
        k, k1 = jax.random.split(k)
        th = jax.random.uniform(k1, minval=lo, maxval=hi, dtype=jnp.float64)
        upn, llpn = propose(th)
        return k, lo, hi, th, upn, beta * llpn > log_y, llpn

    init = (jax.random.fold_in(key, 1), theta - 2 * np.pi, theta, theta, up, beta * llp > log_y, llp)
    out = jax.lax.while_loop(cond, body, init)
    return out[4], out[6]


@functools.lru_cache(maxsize=32)
def _build(n, probit, n_steps):
    def block_one(state, run_key, ts, betas_prev, betas, L, ypm):
        def body(s, xs):
            u, ll, logw = s
            t, bp, b = xs
            logw = logw + (b - bp) * ll
            key = jax.random.fold_in(run_key, t)
            for j in range(n_steps):
                u, ll = _ess_step(jax.random.fold_in(key, j), u, ll, b, L, ypm, probit)
            return (u, ll, logw), None

        return jax.lax.scan(body, state, (ts, betas_prev, betas))[0]

    return jax.jit(jax.vmap(block_one, in_axes=(0, 0, None, None, None, None, None)))


def ais_log_weights(K, ypm, ctx, *, probit, n_runs, schedule="power", n_temps=1000, n_steps=1, desc="ais"):
    """Run ``n_runs`` independent AIS runs, run r from the key of chain r of the run context ``ctx`` (which also
    says whether to show progress and names the backend in errors); returns ``(log_w (R,), f_final (R, n),
    timing)``."""
    t0 = time.perf_counter()
    betas = make_schedule(schedule, n_temps, ctx.owner)
    T = betas.size - 1
    K = np.asarray(K, float)
    n = K.shape[0]
    if not np.all(np.isfinite(K)):      # NaN log-likelihoods would keep the slice sampler shrinking for ever
        raise ValueError(f"{ctx.owner}: the kernel matrix K has NaN or inf entries")
    L = np.linalg.cholesky(K)
    Lj, yj = jnp.asarray(L), jnp.asarray(np.asarray(ypm, float))
    run_keys = ctx.chain_keys(n_runs)
    u0 = jax.vmap(lambda k: jax.random.normal(jax.random.fold_in(k, 2**31 - 1), (n,), dtype=jnp.float64))(run_keys)
    state = (u0, log_lik(u0 @ Lj.T, yj, probit), jnp.zeros(n_runs))
    fn = _build(n, bool(probit), int(n_steps))
    block = -(-T // N_BLOCKS)
    # pad to whole blocks with zero-increment steps at beta = 1 (extra exact transitions; weights unchanged)
    pad = block * -(-T // block) - T
    b_all = np.concatenate([betas, np.ones(pad)])
    t_all = np.arange(1, T + pad + 1)
    jax.block_until_ready(fn(state, run_keys, t_all[:block], b_all[:block], b_all[:block], Lj, yj))
    t_compile = time.perf_counter() - t0
    with progress_bar(total=T, desc=desc, disable=not ctx.progress, unit="temperature") as bar:
        for start in range(0, T + pad, block):
            idx = slice(start, start + block)
            state = fn(state, run_keys, jnp.asarray(t_all[idx]), jnp.asarray(b_all[start:start + block]),
                       jnp.asarray(b_all[start + 1:start + block + 1]), Lj, yj)
            bar.update(min(block, T - start))
        jax.block_until_ready(state)
    u, _, logw = state
    f = np.asarray(u) @ L.T
    return np.asarray(logw), f, {"compile": t_compile, "tune": 0.0, "sample": time.perf_counter() - t0 - t_compile}


def combine_log_weights(log_w):
    """(log mean_r exp(log_w_r), delta-method standard error, effective sample size of the weights)."""
    log_w = np.asarray(log_w, float)
    R = log_w.size
    mx = np.max(log_w)
    w = np.exp(log_w - mx)
    mean = w.mean()
    log_z = float(mx + np.log(mean))
    se = float(np.std(w, ddof=1) / (np.sqrt(R) * mean)) if R > 1 else float("inf")
    ess = float(w.sum() ** 2 / np.sum(w ** 2))
    return log_z, se, ess


class AISEstimate(NamedTuple):
    """What :func:`ais_log_evidence` returns.

    log_evidence
        The estimate of log P(y | X, theta): the log of the mean importance weight.
    log_evidence_se
        Its standard error (delta method on the weights).
    log_weights
        The log importance weight of every run, (n_runs,).
    weight_ess
        The weights' effective sample size (n_runs when they are even).
    f
        The runs' final states, (n_runs, n).
    """

    log_evidence: float
    log_evidence_se: float
    log_weights: np.ndarray
    weight_ess: float
    f: np.ndarray


def ais_log_evidence(model, data, *, n_runs=64, n_temps=1000, schedule="power", n_steps=1, seed=0,
                     progress=False) -> AISEstimate:
    """Gold-standard log evidence log P(y | X, theta) by AIS from the prior: an :class:`AISEstimate`. Seeded as
    the ``ais`` backend is (the run context's seed scheme)."""
    model.validate(data)
    ctx = registry.get(model, "ais").context(seed=checks.seed("bayeszoo", "seed", seed), progress=progress)
    n_runs = POSITIVE_INT(ctx.owner, "n_runs", n_runs)
    n_steps = POSITIVE_INT(ctx.owner, "n_steps", n_steps)
    betas = make_schedule(schedule, n_temps, ctx.owner)
    K, ypm = kernel_and_labels(model, data)
    log_w, f, _ = ais_log_weights(K, ypm, ctx, probit=model.likelihood == "probit", n_runs=n_runs,
                                  schedule=betas, n_steps=int(n_steps))
    log_z, se, ess = combine_log_weights(log_w)
    return AISEstimate(log_evidence=log_z, log_evidence_se=se, log_weights=log_w, weight_ess=ess, f=f)


@register("ais", kind="mcmc", family="gpc", options=OPTIONS, defaults={"tune": 0},
          memory=gpc_memory(3.5, approximation=False),
          description="annealed importance sampling of the log evidence from the prior (elliptical slice moves)")
def run(model, data, *, draws, tune, chains, ctx, **opts):
    """AIS from the prior: log evidence with standard error; final-temperature states as the posterior of f."""
    betas = make_schedule(opts["schedule"], opts["n_temps"], ctx.owner)
    n_runs = chains * draws   # one posterior draw per run: the fit holds the draws it was asked for
    if n_runs < 2:
        raise ValueError(f"{ctx.owner}: needs at least 2 runs for a standard error (chains x draws >= 2)")
    n_steps = int(opts["n_steps"])
    K, ypm = kernel_and_labels(model, data)
    log_w, f, timing = ais_log_weights(K, ypm, ctx, probit=model.likelihood == "probit", n_runs=n_runs,
                                       schedule=betas, n_steps=n_steps, desc=f"ais ({model.likelihood})")
    log_z, se, ess = combine_log_weights(log_w)
    per = n_runs // chains
    ll = np.asarray(log_lik(jnp.asarray(f), jnp.asarray(ypm), model.likelihood == "probit"))
    info = {"iterations": int(betas.size - 1), "converged": None, "warnings": [],
            "log_evidence": log_z, "log_evidence_se": se, "weight_ess": ess, "n_runs": n_runs,
            "n_temps": int(betas.size - 1), "n_steps": n_steps,
            "schedule": opts["schedule"] if isinstance(opts["schedule"], str) else "array"}
    if ess < 0.1 * n_runs:
        info["warnings"].append(f"AIS importance weights are uneven (ESS {ess:.1f} of {n_runs} runs); "
                                "increase n_temps")
    return build_fit(model, data, ctx.backend, "mcmc", {"f": f.reshape(chains, per, -1)}, timing=timing,
                     sample_stats={"log_weight": log_w.reshape(chains, per),
                                   "log_lik": ll.reshape(chains, per)},
                     objective={"log_evidence": np.array([log_z])}, info=info, ctx=ctx)
