"""``gibbs``: conjugate Gibbs sampler for the RVM (digest §1.7 "Gibbs conditionals").

Regression, one sweep:
    w | alpha, beta, t  ~ N(mu, Sigma), Sigma = (beta Phi^T Phi + A)^-1, mu = beta Sigma Phi^T t   [T 2.13-2.14]
    alpha_i | w_i       ~ Gamma(a + 1/2, b + w_i^2 / 2)
    beta | w, t         ~ Gamma(c + N/2, d + |t - Phi w|^2 / 2)          (Gamma on beta, not sigma^2 [T 2.7])
Probit classification (``RVM(task="classification", link="probit")``), Albert-Chib augmentation:
    z_n | w ~ N(phi_n^T w, 1) truncated to z_n > 0 if t_n = 1 and z_n < 0 if t_n = 0;
    w | z, alpha ~ N((Phi^T Phi + A)^-1 Phi^T z, (Phi^T Phi + A)^-1); alpha as above.
The logit link has no conjugate augmentation here, so the backend applies to regression and probit only.

Implementation: JAX, ``jit`` + ``vmap`` over chains + ``lax.scan`` over sweeps, in float64. The w draw uses
Phi^T Phi and Phi^T t computed once, so a regression sweep costs one M x M Cholesky (after unit-diagonal
scaling), O(M^2), and O(N M) for the residual |t - Phi w|^2 of the beta draw (formed directly: its expansion
cancels for targets far from zero). When M > 2N the w draw switches to the Bhattacharya, Chakraborty &
Mallick (2016) sampler (one N x N Cholesky). Chain k, sweep s uses the key fold_in(fold_in(seed_key, k), s),
so the draws do not depend on how the run is split into progress-bar chunks. Chains start from dispersed
(alpha, beta) around data-based values; ``tune`` sweeps are discarded.

Options: ``thin`` (keep every thin-th sweep), ``fix_alpha`` / ``fix_beta`` (hold alpha (scalar or length-M)
and / or beta fixed at the given values: then w | t is exactly Gaussian, which the tests use), ``init``
(dict with any of ``w``, ``alpha``, ``beta`` to start every chain from).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from bayeszoo import checks
from bayeszoo.results import build_fit
from bayeszoo.inference._random import normal_sign_truncated
from bayeszoo.inference._sweeps import run_sweeps
from bayeszoo.registry import Option, register

from . import _common as C

OPTIONS = {
    "thin": Option(1, "keep every thin-th sweep"),
    "fix_alpha": Option(None, "hold alpha fixed at this value (a number, or one per basis); None: sample it"),
    "fix_beta": Option(None, "hold the noise precision beta fixed at this value (regression); None: sample it"),
    "init": Option(None, "starting point of every chain: a dict with any of 'w', 'alpha', 'beta'; None: dispersed"),
}


def _applies(model):
    return (not model.is_classifier) or model.link == "probit"


def _check(opts):
    C.check_positive("gibbs", opts, "thin", integer=True)
    if opts["fix_alpha"] is not None:
        opts["fix_alpha"] = _positive_numbers("fix_alpha", opts["fix_alpha"],
                                              "a positive number or one positive number per basis")
    C.check_positive_or_none("gibbs", opts, "fix_beta")
    init = opts["init"]
    if init is not None:
        if not isinstance(init, dict) or set(init) - {"w", "alpha", "beta"}:
            raise ValueError(f"{C.owner('gibbs')}: init must be a dict with keys among 'w', 'alpha', 'beta', "
                             f"got {init!r}"[:200])
        init = dict(init)
        if "w" in init:
            w = np.asarray(checks.finite_array(C.owner("gibbs"), "init['w']", init["w"]))
            if w.ndim > 1:
                raise ValueError(f"{C.owner('gibbs')}: init['w'] must be a number or one number per basis, "
                                 f"got shape {w.shape}")
            init["w"] = w
        if "alpha" in init:
            init["alpha"] = _positive_numbers("init['alpha']", init["alpha"],
                                              "a positive number or one positive number per basis")
        if "beta" in init:
            init["beta"] = checks.positive(C.owner("gibbs"), "init['beta']", init["beta"])
        opts["init"] = init
    return opts


def _positive_numbers(name, value, what):
    """``value`` as a float array of positive finite numbers (a scalar or a vector), or a ValueError naming it."""
    try:
        arr = np.asarray(value, float)
    except (TypeError, ValueError):
        arr = np.array([np.nan])
    if arr.ndim > 1 or arr.size == 0 or np.any(~np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{C.owner('gibbs')}: {name} must be {what}, got {value!r}"[:300])
    return arr


def _check_sizes(opts, M: int) -> None:
    """The per-basis options must have M entries (M is known only with the data)."""
    for name, value in (("fix_alpha", opts["fix_alpha"]), *((f"init['{k}']", (opts["init"] or {}).get(k))
                                                            for k in ("w", "alpha"))):
        if value is not None and np.ndim(value) == 1 and np.shape(value)[0] != M:
            raise ValueError(f"{C.owner('gibbs')}: {name} must be a number or {M} numbers (one per basis), "
                             f"got {np.shape(value)[0]}")


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


@functools.lru_cache(maxsize=32)
def _build(N, M, probit, fix_alpha, fix_beta, woodbury, chunk):
    """One compiled function per shape / configuration: ``chunk`` slots, each a dynamic number of sweeps."""

    def sweep(state, i, chain_key, consts):
        w, alpha, beta = state
        key = jax.random.fold_in(chain_key, i)
        k_w, k_a, k_b, k_z, k_z2 = jax.random.split(key, 5)
        a, b, c, d = consts["hyper"]
        if fix_alpha:
            alpha = consts["alpha0"]
        if fix_beta and not probit:
            beta = consts["beta0"]
        if probit:
            f = consts["Phi"] @ w
            zlat = normal_sign_truncated(k_z, f, 2.0 * consts["t"] - 1.0)
            if woodbury:
                w = _bhattacharya(consts["Phi"], alpha, zlat, jax.random.normal(k_w, (M,)),
                                  jax.random.normal(k_z2, (N,)))
            else:
                H = consts["G"] + jnp.diag(alpha)
                w = _chol_sample(H, consts["Phi"].T @ zlat, jax.random.normal(k_w, (M,)))
        else:
            if woodbury:
                sb = jnp.sqrt(beta)
                w = _bhattacharya(sb * consts["Phi"], alpha, sb * consts["t"], jax.random.normal(k_w, (M,)),
                                  jax.random.normal(k_z2, (N,)))
            else:
                H = beta * consts["G"] + jnp.diag(alpha)
                w = _chol_sample(H, beta * consts["Pt"], jax.random.normal(k_w, (M,)))
        if not fix_alpha:
            alpha = _gamma(k_a, a + 0.5, (M,)) / (b + 0.5 * w * w)
        if not probit and not fix_beta:
            r = consts["t"] - consts["Phi"] @ w      # formed directly: t.t - 2 w.Phi^T t + w.G w cancels for targets
            rr = r @ r                                # far from zero

            beta = _gamma(k_b, c + 0.5 * N, ()) / (d + 0.5 * rr)
        return (w, alpha, beta)

    def chunk_one(state, chain_key, starts, counts, consts):
        # slot j runs counts[j] sweeps (sweep indices starts[j] ...) and records the state after them
        def body(s, xs):
            start, n = xs
            s = jax.lax.fori_loop(start, start + n, lambda i, st: sweep(st, i, chain_key, consts), s)
            w, alpha, beta = s
            return s, (w, jnp.log(alpha), jnp.log(beta))

        return jax.lax.scan(body, state, (starts, counts))

    return jax.jit(jax.vmap(chunk_one, in_axes=(0, 0, None, None, None)))


@functools.lru_cache(maxsize=32)
def _compiled(N, M, probit, fix_alpha, fix_beta, woodbury, chunk, chains):
    """Ahead-of-time compiled chunk function (so compile seconds are reported apart from sampling)."""
    f = jnp.zeros((chains, M))
    state = (f, f, jnp.zeros(chains))
    keys = jax.vmap(lambda k: jax.random.fold_in(jax.random.PRNGKey(0), k))(jnp.arange(chains))
    zeros = np.zeros(chunk, np.int64)
    consts = {"Phi": jnp.zeros((N, M)), "t": jnp.zeros(N), "G": jnp.zeros((M, M)), "Pt": jnp.zeros(M),
              "hyper": jnp.zeros(4), "alpha0": jnp.zeros(M), "beta0": jnp.asarray(0.0)}
    return _build(N, M, probit, fix_alpha, fix_beta, woodbury, chunk).lower(state, keys, zeros, zeros,
                                                                             consts).compile()


def gibbs_sample(Phi, t, hyper, *, draws, tune, chains, seed, probit=False, thin=1, fix_alpha=None,
                 fix_beta=None, init=None, progress=False, desc="gibbs"):
    """Run the sampler on an explicit design ``Phi``; returns arrays (chains, draws, ...) and timings."""

    timer = C.Timer()
    Phi = np.asarray(Phi, float)
    t = np.asarray(t, float)
    N, M = Phi.shape
    woodbury = M > 2 * N
    G = Phi.T @ Phi
    consts = {"Phi": jnp.asarray(Phi), "t": jnp.asarray(t), "G": jnp.asarray(G), "Pt": jnp.asarray(Phi.T @ t),
              "hyper": jnp.asarray(np.asarray(hyper, float)),
              "alpha0": jnp.asarray(np.broadcast_to(np.asarray(fix_alpha if fix_alpha is not None else 1.0,
                                                               float), (M,)).copy()),
              "beta0": jnp.asarray(float(fix_beta if fix_beta is not None else 1.0))}
    # dispersed starting points, from the seed
    rng = np.random.default_rng(np.random.SeedSequence([seed, 7919]))
    var_t = float(np.var(t)) if (not probit and np.var(t) > 0) else 1.0
    scale = float(np.mean(np.diag(G))) / N
    alpha0 = scale / var_t * np.exp(rng.normal(0.0, 1.0, (chains, M)))
    beta0 = 10.0 / var_t * np.exp(rng.normal(0.0, 0.5, chains))
    w0 = np.zeros((chains, M))
    init = dict(init or {})
    if "alpha" in init:
        alpha0 = np.broadcast_to(np.asarray(init["alpha"], float), (chains, M)).copy()
    if "beta" in init:
        beta0 = np.full(chains, float(init["beta"]))
    if "w" in init:
        w0 = np.broadcast_to(np.asarray(init["w"], float), (chains, M)).copy()
    if fix_alpha is not None:
        alpha0 = np.broadcast_to(np.asarray(consts["alpha0"]), (chains, M)).copy()
    if fix_beta is not None:
        beta0 = np.full(chains, float(fix_beta))
    state = (jnp.asarray(w0), jnp.asarray(alpha0), jnp.asarray(beta0))
    base_key = jax.random.PRNGKey(seed)
    chain_keys = jax.vmap(lambda k: jax.random.fold_in(base_key, k))(jnp.arange(chains))

    # every call runs `chunk` slots; a slot is a dynamic number of sweeps, so tune and sample share one
    # compiled function whatever tune / thin are
    chunk = int(max(1, min(draws, -(-draws // 20) if progress else -(-draws // 4))))
    compiled = _compiled(N, M, bool(probit), fix_alpha is not None, fix_beta is not None, woodbury, chunk,
                         int(chains))
    t_compile = timer()

    state, (w, la, lb), t_tune, t_sample, n_sweeps = run_sweeps(
        lambda st, starts, counts: compiled(st, chain_keys, starts, counts, consts), state,
        tune=tune, draws=draws, thin=thin, chunk=chunk, desc=desc, progress=progress)
    return {"w": w, "log_alpha": la, "log_beta": lb,
            "timing": {"compile": t_compile, "tune": t_tune, "sample": t_sample},
            "sweeps": int(n_sweeps)}


def _explain_overflow(model, out) -> None:
    """A ValueError saying why, when a chain left double precision (before the Fit builder's generic refusal)."""
    bad = ~np.isfinite(out["w"]).all(axis=2)
    for name in ("log_alpha", "log_beta"):
        if name in out:
            values = out[name]
            bad |= ~np.isfinite(values.reshape(values.shape[0], values.shape[1], -1)).all(axis=2)
    if not bad.any():
        return
    chains = np.flatnonzero(bad.any(axis=1))
    first = int(np.argmax(bad[chains[0]]))
    raise ValueError(
        f"{C.owner('gibbs')}: the sampler left double precision (chain {int(chains[0])} from draw {first}; "
        f"{int(bad.sum())} of {bad.size} draws are NaN or inf): the conditional precision of w, "
        f"{'Phi^T Phi' if model.is_classifier else 'beta Phi^T Phi'} + diag(alpha), became singular to working "
        f"precision. This happens when the weight "
        f"prior is nearly flat (here a = {model.a:g}, b = {model.b:g}; some alpha_i then fall below rounding) while "
        f"kernel columns are nearly collinear (here the {model._kernel_text()}). Use a proper weight prior such as "
        f"RVM(a=1, b=1e-2) for sampling, or a kernel that varies more between the inputs")


@register("gibbs", kind="mcmc", family="rvm", applies=_applies, options=OPTIONS, check=_check,
          description="conjugate Gibbs sampler (JAX, vmap over chains); Albert-Chib for probit classification")
def run(model, data, *, draws, tune, chains, seed, progress, **opts):
    """Conjugate Gibbs: w | alpha, beta Gaussian; alpha_i, beta Gamma; probit via Albert-Chib."""
    # what depends on the model, which the option check does not see
    _check_sizes(opts, model.n_basis(data))
    if opts["fix_beta"] is not None and model.is_classifier:
        raise ValueError(f"{C.owner('gibbs')}: fix_beta applies to regression only (classification has no beta)")
    if opts["init"] is not None and "beta" in opts["init"] and model.is_classifier:
        raise ValueError(f"{C.owner('gibbs')}: init['beta'] applies to regression only (classification has no beta)")
    Phi = model.training_design(data)
    t = np.asarray(data.y, float)
    seed = 0 if seed is None else int(seed)
    res = gibbs_sample(Phi, t, (model.a, model.b, model.c, model.d), draws=draws, tune=tune, chains=chains,
                       seed=seed, probit=model.is_classifier, thin=opts["thin"], fix_alpha=opts["fix_alpha"],
                       fix_beta=opts["fix_beta"], init=opts["init"], progress=progress)
    out = {"w": res["w"], "log_alpha": res["log_alpha"]}
    if not model.is_classifier:
        out["log_beta"] = res["log_beta"]
    _explain_overflow(model, out)
    info = {"iterations": res["sweeps"], "thin": opts["thin"], "warnings": [],
            "w_sampler": "bhattacharya" if Phi.shape[1] > 2 * Phi.shape[0] else "cholesky",
            "fixed": [k for k in ("fix_alpha", "fix_beta") if opts[k] is not None]}
    return build_fit(model, data, "gibbs", "mcmc", out, timing=res["timing"], info=info)
