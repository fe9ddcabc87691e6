"""Generic BlackJAX engines on a model's NumPyro declaration: blackjax_nuts, blackjax_mclmc, blackjax_pathfinder,
blackjax_meanfield_vi.

``numpyro.infer.util.initialize_model`` turns ``model.numpyro_model(data)`` into the log density on the
unconstrained space (minus NumPyro's potential energy, Jacobians included), per-chain initial points (NumPyro's
``init_to_uniform``, as the ``numpyro`` backend) and the map back to the constrained sample sites and the
deterministic sites. The engines work on the flattened unconstrained vector and map every draw back with that
map, so the posterior holds exactly the canonical variables the ``numpyro`` backend writes.

* ``blackjax_nuts``: ``blackjax.window_adaptation`` (Stan's windows: step size and diagonal mass matrix) for
  ``tune`` steps, then NUTS with the adapted parameters for ``draws`` steps, per chain.
* ``blackjax_mclmc``: microcanonical Langevin Monte Carlo, tuned by ``blackjax.mclmc_find_L_and_step_size``
  whose three phases (step size, diagonal preconditioner, momentum decoherence length L) together take ``tune``
  integrator steps, then ``draws`` kept draws ``thin`` steps apart. MCLMC has no Metropolis correction: its
  bias is set by the energy-error target of the tuner. It writes no ``diverging`` statistic; steps the kernel reverted because the energy or the
  position became non-finite are counted in ``info["nan_steps"]``.
* ``blackjax_pathfinder``: one single-path Pathfinder (L-BFGS, normal approximations along the path, the one of
  highest ELBO kept) per chain, each from that chain's initial point; the draws of every chain come from the
  path of highest ELBO, i.i.d. (not importance-resampled: resampling a pool with replacement repeats draws, and an
  approximation promises i.i.d. draws). The other paths' ELBOs and the Pareto k (ArviZ's ``psislw``) of the kept
  approximation's importance ratios go into ``info``.
* ``blackjax_meanfield_vi``: ``blackjax.vi.meanfield_vi`` with Adam (optax) for ``max_iter`` steps, then
  ``chains * draws`` i.i.d. draws from the approximation split into chains, as ``advi``.

Timing (``fit.timing``), as the ``numpyro`` backend: JAX reports the seconds it spends tracing, lowering and
compiling (``JaxCompileClock``); those go to ``compile`` and are taken out of the phase in which they happened.
``tune`` is the remaining wall time of the initial points and the warm-up / tuning (path search, optimisation);
``sample`` that of the kept draws and mapping them to the constrained space.

Seeds: chain c splits its key of the run context (``ctx.chain_keys``, the seed scheme every backend shares) into the
keys of its initial point, warm-up and draws, so a seed gives the same draws bit for bit, and a chain's draws do not
depend on how many chains run.
Pathfinder's draws use the sampling key of the best path's chain; mean-field VI uses chain 0's keys.

Chains run one after another through one compiled function (compiled once, reused). The data a declaration names
(``engines_common.numpyro_declaration``) are arguments of the compiled functions, not constants inside them, so a fit of
other data of the same shapes finds their compilations in JAX's disk cache. vmapping the chains was
slower for NUTS on one CPU device: the vmapped trajectories advance in lockstep, so every step costs the longest
tree of the batch (BENCHMARKS.md, "BlackJAX engines").
"""
from __future__ import annotations

import time
import warnings

import numpy as np

from bayeszoo.checks import POSITIVE, POSITIVE_INT, Flag, Interval
from bayeszoo.results import Fit, build_fit
from bayeszoo.inference.engines_common import (JAX_COPIES, MAX_TREE_DEPTH, convergence_info, declaration_memory,
                                               numpyro_declaration, stochastic_vi_info, target_accept)
from bayeszoo.inference.timing import JaxCompileClock
from bayeszoo.progress import progress_bar
from bayeszoo.registry import Option, needs_declaration, register

_LIBRARY = "blackjax"


# ----------------------------------------------------------------------------------------- the target
class UnconstrainedTarget:
    """The unconstrained log density of a NumPyro declaration and the map back to its sites."""

    def __init__(self, model, data, backend: str, init_keys: list):
        import jax
        import jax.numpy as jnp
        from jax.flatten_util import ravel_pytree
        from numpyro import handlers
        from numpyro.infer.initialization import init_to_uniform
        from numpyro.infer.util import initialize_model

        fn, self.data = numpyro_declaration(model, data)
        # substituted as NumPyro initialises, since improper sites (BID's) cannot be sampled
        trace = handlers.trace(handlers.substitute(handlers.seed(fn, 0), substitute_fn=init_to_uniform)).get_trace(
            **self.data)
        discrete = [name for name, site in trace.items() if site["type"] == "sample" and not site["is_observed"]
                    and site["fn"].support.is_discrete]
        if discrete:
            raise ValueError(f"backend {backend!r} needs continuous latent variables; {type(model).__name__}'s "
                             f"declaration has discrete ones: {discrete}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            info = initialize_model(jnp.stack(init_keys), fn, model_kwargs=self.data, dynamic_args=True)
        params = info.param_info.z
        _, unravel = ravel_pytree(jax.tree.map(lambda x: x[0], params))
        self.positions = jax.vmap(lambda p: ravel_pytree(p)[0])(params)    # (chains, dim)
        potential, postprocess = info.potential_fn, info.postprocess_fn    # given the data, the functions
        # the engines pass the data into their compiled functions: one compilation per shape (numpyro_declaration)
        self.density = lambda data: (lambda x: -potential(**data)(unravel(x)))
        self.logdensity = self.density(self.data)
        # (n, dim) unconstrained -> {site: (n, ...)} constrained sample sites and deterministic sites
        self.constrain_one = lambda x: postprocess(**self.data)(unravel(x))
        self._constrain = jax.jit(jax.vmap(lambda x, data: postprocess(**data)(unravel(x)), in_axes=(0, None)))
        self.constrain = lambda x: self._constrain(x, self.data)

    def posterior(self, flat_by_chain: list) -> dict:
        """Per-chain unconstrained draws (draw, dim) -> {site: (chain, draw, ...)} as NumPy arrays."""
        per_chain = [{k: np.asarray(v) for k, v in self.constrain(x).items()} for x in flat_by_chain]
        return {k: np.stack([c[k] for c in per_chain]) for k in per_chain[0]}


def _ticker(bar, every: int = 1):
    """``tick(i)`` for inside compiled loops: advances ``bar`` by ``every`` when step ``i`` ends a block of
    ``every`` steps (every call if ``i`` is None). Without a bar it adds nothing to the computation, so the
    compiled functions stay cacheable (JAX does not cache executables with host callbacks)."""
    import jax

    if bar is None or bar.disable:
        return lambda i=None: None

    def tick(i=None):
        if i is None:
            jax.debug.callback(lambda: bar.update(1))
        else:
            jax.lax.cond((i + 1) % every == 0, lambda: jax.debug.callback(lambda: bar.update(every)), lambda: None)

    return tick


class _Phases:
    """Wall-clock seconds of the ``tune`` and ``sample`` phases with JAX's compile time moved to ``compile``."""

    def __init__(self):
        self.clocks = {"tune": JaxCompileClock(), "sample": JaxCompileClock()}
        self.wall = {"tune": 0.0, "sample": 0.0}

    def run(self, phase: str, fn, *args):
        import jax

        with self.clocks[phase]:
            t0 = time.perf_counter()
            out = jax.block_until_ready(fn(*args))
            self.wall[phase] += time.perf_counter() - t0
        return out

    def timing(self) -> dict:
        compile_s = sum(c.seconds for c in self.clocks.values())
        return {"compile": compile_s, **{k: self.wall[k] - self.clocks[k].seconds for k in self.wall}}


def _chain_keys(ctx, chains: int) -> list[tuple]:
    """(initial point, warm-up, sampling) keys of every chain, from the chain's own key of the run context."""
    import jax

    return [tuple(jax.random.split(key, 3)) for key in ctx.chain_keys(chains)]


def _counts_or_fail(backend: str, tune: int, least: int, why: str) -> None:
    if tune < least:
        raise ValueError(f"backend {backend!r} needs tune >= {least} ({why}), got tune={tune}")


_MEMORY = declaration_memory(JAX_COPIES)


# ----------------------------------------------------------------------------------------------- NUTS
@register("blackjax_nuts", kind="mcmc", description="BlackJAX NUTS with window adaptation", library=_LIBRARY,
          unavailable=needs_declaration("numpyro"), memory=_MEMORY, options={
              "target_accept": target_accept(0.8), "max_tree_depth": MAX_TREE_DEPTH})
def run_blackjax_nuts(model, data, *, draws, tune, chains, ctx, **opts) -> Fit:
    """BlackJAX NUTS (window adaptation, then NUTS), chains one after another."""
    import blackjax
    import jax
    import jax.numpy as jnp

    _counts_or_fail(ctx.backend, tune, 1, "the step size and mass matrix come from window adaptation")
    keys = _chain_keys(ctx, chains)
    phases = _Phases()
    target = phases.run("tune", UnconstrainedTarget, model, data, ctx.backend, [k[0] for k in keys])
    depth = opts["max_tree_depth"]
    with progress_bar(total=chains * (tune + draws), desc=ctx.backend, disable=not ctx.progress) as bar:
        tick = _ticker(bar)

        def keep_counts(state, info, adaptation_state):   # what the warm-up keeps per step
            tick()
            return info.num_integration_steps, info.is_divergent

        @jax.jit
        def warm(key, x0, data):
            warmup = blackjax.window_adaptation(blackjax.nuts, target.density(data),
                                                target_acceptance_rate=opts["target_accept"],
                                                adaptation_info_fn=keep_counts, max_num_doublings=depth)
            (state, params), (n_steps, diverging) = warmup.run(key, x0, num_steps=tune)
            return state, params["step_size"], params["inverse_mass_matrix"], n_steps, diverging

        tick_draw = _ticker(bar, max(1, draws // 100))

        @jax.jit
        def sample(key, state, step_size, inverse_mass_matrix, data):
            nuts = blackjax.nuts(target.density(data), step_size, inverse_mass_matrix, max_num_doublings=depth)

            def one(state, xs):
                i, k = xs
                state, info = nuts.step(k, state)
                tick_draw(i)
                return state, (state.position, state.logdensity, info.is_divergent, info.num_integration_steps,
                               info.num_trajectory_expansions, info.acceptance_rate, info.energy)

            return jax.lax.scan(one, state, (jnp.arange(draws), jax.random.split(key, draws)))[1]

        flat, stats, warm_steps, warm_div, step_sizes = [], [], 0, 0, []
        for x0, (_, warm_key, draw_key) in zip(target.positions, keys):
            state, step_size, imm, n_steps, diverging = phases.run("tune", warm, warm_key, x0, target.data)
            warm_steps += int(np.sum(n_steps))
            warm_div += int(np.sum(diverging))
            out = phases.run("sample", sample, draw_key, state, step_size, imm, target.data)
            flat.append(out[0])
            stats.append([np.asarray(v) for v in out[1:]])
            step_sizes.append(float(step_size))
        posterior = phases.run("sample", target.posterior, flat)
    lp, diverging, n_steps, depth_used, accept, energy = (np.stack(v) for v in zip(*stats))
    sample_stats = {"lp": lp, "diverging": diverging, "n_steps": n_steps, "tree_depth": depth_used,
                    "acceptance_rate": accept, "energy": energy,
                    "step_size": np.repeat(np.asarray(step_sizes)[:, None], draws, axis=1)}
    draw_steps = int(n_steps.sum())
    info = {"n_grad": warm_steps + draw_steps, "n_grad_tune": warm_steps, "divergences_tune": warm_div,
            "iterations": tune + draws, **convergence_info(diverging)}
    return build_fit(model, data, ctx.backend, "mcmc", posterior, sample_stats=sample_stats, info=info,
                     library=_LIBRARY, timing=phases.timing(), ctx=ctx)


# ---------------------------------------------------------------------------------------------- MCLMC
# The tuner's three phases take these fractions of its num_steps; passing num_steps = tune with fractions whose
# steps add up to one (the preconditioner phase is followed by a third as many steps that re-tune the step size)
# makes tune the number of tuning steps, split 30 / 40 / 30.
_MCLMC_FRACTIONS = {"frac_tune1": 0.3, "frac_tune2": 0.3, "frac_tune3": 0.3}
_MCLMC_FRACTIONS_PLAIN = {"frac_tune1": 0.35, "frac_tune2": 0.35, "frac_tune3": 0.3}   # no re-tuning phase


@register("blackjax_mclmc", kind="mcmc", description="BlackJAX microcanonical Langevin Monte Carlo",
          library=_LIBRARY, unavailable=needs_declaration("numpyro"), memory=_MEMORY, options={
              "desired_energy_var": Option(5e-4, "energy-error variance per dimension the step size is tuned to "
                                                 "(smaller: smaller steps, less bias)", POSITIVE),
              "diagonal_preconditioning": Option(True, "tune a diagonal preconditioner (mass matrix)", Flag()),
              # one MCLMC step is a short move for two gradients: kept draws one step apart are nearly copies
              "thin": Option(10, "MCLMC steps per kept draw (each step costs two gradients)", POSITIVE_INT)})
def run_blackjax_mclmc(model, data, *, draws, tune, chains, ctx, **opts) -> Fit:
    """BlackJAX MCLMC (tuned step size, L and preconditioner), chains one after another."""
    import blackjax
    import jax
    import jax.numpy as jnp
    from blackjax.mcmc import integrators, mclmc

    _counts_or_fail(ctx.backend, tune, 10, "its tuner sets the step size and L from the tuning steps")
    keys = _chain_keys(ctx, chains)
    phases = _Phases()
    target = phases.run("tune", UnconstrainedTarget, model, data, ctx.backend, [k[0] for k in keys])
    energy_var, thin = opts["desired_energy_var"], opts["thin"]
    fractions = _MCLMC_FRACTIONS if opts["diagonal_preconditioning"] else _MCLMC_FRACTIONS_PLAIN
    # the default isokinetic McLachlan integrator: one gradient per position update, two per step
    grads_per_step = len(integrators.mclachlan_coefficients) // 2
    kernel = mclmc.build_kernel(desired_energy_var=energy_var)
    with progress_bar(total=chains * (tune + draws), desc=ctx.backend, disable=not ctx.progress) as bar:
        tick_draw = _ticker(bar, max(1, draws // 100))

        @jax.jit
        def warm(key, x0, data):
            init_key, tune_key = jax.random.split(key)
            logdensity = target.density(data)
            state = mclmc.init(x0, logdensity, init_key)
            state, params, n_tune = blackjax.mclmc_find_L_and_step_size(
                kernel, tune, state, tune_key, logdensity_fn=logdensity, desired_energy_var=energy_var,
                diagonal_preconditioning=opts["diagonal_preconditioning"], **fractions)
            return state, params.L, params.step_size, params.inverse_mass_matrix, n_tune

        @jax.jit
        def sample(key, state, L, step_size, inverse_mass_matrix, data):
            sampler = blackjax.mclmc(target.density(data), L=L, step_size=step_size,
                                     inverse_mass_matrix=inverse_mass_matrix)

            def step(carry, k):
                state, reverted = carry
                state, info = sampler.step(k, state)
                return (state, reverted + ~info.nonans), info.energy_change

            def one(state, xs):   # one kept draw: ``thin`` steps; its energy error is the last step's
                i, step_keys = xs
                (state, reverted), energy_change = jax.lax.scan(step, (state, 0), step_keys)
                tick_draw(i)
                return state, (state.position, state.logdensity, energy_change[-1], reverted)

            step_keys = jax.random.split(key, draws * thin).reshape(draws, thin, -1)
            return jax.lax.scan(one, state, (jnp.arange(draws), step_keys))[1]

        flat, stats, tuned, n_tune_steps = [], [], [], 0
        for x0, (_, warm_key, draw_key) in zip(target.positions, keys):
            state, L, step_size, imm, n_tune = phases.run("tune", warm, warm_key, x0, target.data)
            bar.update(tune)
            n_tune_steps += int(n_tune)
            out = phases.run("sample", sample, draw_key, state, L, step_size, imm, target.data)
            flat.append(out[0])
            stats.append([np.asarray(v) for v in out[1:]])
            tuned.append((float(L), float(step_size)))
        posterior = phases.run("sample", target.posterior, flat)
    lp, energy_error, reverted = (np.stack(v) for v in zip(*stats))
    # MCLMC has no accept / reject step and so no divergences: no ``diverging`` statistic
    sample_stats = {"lp": lp, "energy_error": energy_error,
                    "step_size": np.repeat(np.asarray([s for _, s in tuned])[:, None], draws, axis=1)}
    nan_steps = int(reverted.sum())
    info = {"n_grad": grads_per_step * (n_tune_steps + chains * draws * thin) + chains,   # + one per initial point
            "n_grad_tune": grads_per_step * n_tune_steps + chains, "tuning_steps": n_tune_steps,
            "iterations": tune + draws * thin, "L": [L for L, _ in tuned], "step_size": [s for _, s in tuned],
            "nan_steps": nan_steps,
            "warnings": [f"{nan_steps} steps reverted after a non-finite energy"] if nan_steps else []}
    return build_fit(model, data, ctx.backend, "mcmc", posterior, sample_stats=sample_stats, info=info,
                     library=_LIBRARY, timing=phases.timing(), ctx=ctx)


# ------------------------------------------------------------------------------------------ Pathfinder
def _pathfinder_path(key, logdensity, x0, n_elbo: int, maxiter: int, maxcor: int):
    """One Pathfinder path: ``blackjax.vi.pathfinder.approximate`` with the normal approximations along the
    L-BFGS path built one after another (``lax.map``) instead of vmapped. Vmapped, their batched LAPACK calls
    (inverse, QR, Cholesky) run concurrently on jaxlib's CPU thread pool and can deadlock it on a 2-core machine
    once the path is long enough (BENCHMARKS.md, "BlackJAX engines"). Returns the approximation of highest
    ELBO (a ``PathfinderState`` for ``pathfinder.sample``), the ELBO along the path (-inf after L-BFGS stopped)
    and the number of L-BFGS iterations."""
    import jax
    import jax.numpy as jnp
    from blackjax.optimizers.lbfgs import bfgs_sample, lbfgs_inverse_hessian_factors, minimize_lbfgs
    from blackjax.vi.pathfinder import PathfinderState

    step, history = minimize_lbfgs(lambda x: -logdensity(x), x0, maxiter=maxiter, maxcor=maxcor)
    position, grad, alpha = history.x, history.g, history.alpha
    # position and gradient updates that passed the curvature check, zero-padded in front to a full window
    mask = history.update_mask[1:]
    s = jnp.pad(jnp.where(mask, jnp.diff(position, axis=0), 0.0), ((maxcor, 0), (0, 0)))
    z = jnp.pad(jnp.where(mask, jnp.diff(grad, axis=0), 0.0), ((maxcor, 0), (0, 0)))

    def approximation(args):
        i, key_i = args
        window = i + jnp.arange(maxcor)
        beta, gamma = lbfgs_inverse_hessian_factors(s[window].T, z[window].T, alpha[i])
        phi, logq = bfgs_sample(key_i, n_elbo, position[i], grad[i], alpha[i], beta, gamma)
        return jnp.mean(jax.vmap(logdensity)(phi) - logq), beta, gamma

    n = maxiter + 1
    elbo, beta, gamma = jax.lax.map(approximation, (jnp.arange(n), jax.random.split(key, n)))
    elbo = jnp.where((jnp.arange(n) < step.state.iter_num) & jnp.isfinite(elbo), elbo, -jnp.inf)
    best = jnp.argmax(elbo)
    state = PathfinderState(elbo[best], position[best], grad[best], alpha[best], beta[best], gamma[best])
    return state, elbo, step.state.iter_num


def _gradient_counter():
    """An identity on the position whose backward pass bumps a host counter: ``logdensity(counted(x))`` counts its
    gradient evaluations (L-BFGS's line search makes a variable number). Returns ``counted`` and the counter, a
    one-element list. The price of an exact count: JAX does not cache executables with host callbacks, so the
    path search compiles on every fit."""
    import jax

    count = [0]

    def bump():
        count[0] += 1

    @jax.custom_vjp
    def counted(x):
        return x

    def backward(_, g):
        jax.debug.callback(bump)
        return (g,)

    counted.defvjp(lambda x: (x, None), backward)
    return counted, count


@register("blackjax_pathfinder", kind="approximation", description="BlackJAX Pathfinder (one path per chain)",
          library=_LIBRARY, unavailable=needs_declaration("numpyro"), memory=_MEMORY, defaults={"tune": 0},
          options={
              "max_iter": Option(200, "most L-BFGS iterations per path", POSITIVE_INT),
              "maxcor": Option(10, "L-BFGS history size (rank of the inverse-Hessian update)", POSITIVE_INT),
              "elbo_draws": Option(200, "Monte-Carlo draws that estimate the ELBO of each approximation on a path",
                                   POSITIVE_INT)})
def run_blackjax_pathfinder(model, data, *, draws, tune, chains, ctx, **opts) -> Fit:
    """BlackJAX Pathfinder: one path per chain, i.i.d. draws from the path of highest ELBO."""
    import arviz as az
    import jax
    from blackjax.vi import pathfinder

    keys = _chain_keys(ctx, chains)
    phases = _Phases()
    target = phases.run("tune", UnconstrainedTarget, model, data, ctx.backend, [k[0] for k in keys])
    counted, n_grad = _gradient_counter()
    path = jax.jit(lambda key, x0, data: _pathfinder_path(key, lambda x: target.density(data)(counted(x)), x0,
                                                          opts["elbo_draws"], opts["max_iter"], opts["maxcor"]))

    @jax.jit
    def draw(key, state, data):
        x, logq = pathfinder.sample(key, state, chains * draws)
        return x, jax.vmap(target.density(data))(x) - logq

    with progress_bar(total=chains, desc=ctx.backend, disable=not ctx.progress) as bar:
        paths = []
        for x0, (_, path_key, _) in zip(target.positions, keys):
            paths.append(phases.run("tune", path, path_key, x0, target.data))
            bar.update(1)
    elbos = np.array([float(state.elbo) for state, _, _ in paths])
    if not np.any(np.isfinite(elbos)):
        raise ValueError(f"{ctx.backend}: no path reached an approximation with a finite ELBO")
    best = int(np.argmax(np.where(np.isfinite(elbos), elbos, -np.inf)))
    state, trace, iterations = paths[best]
    x, log_ratio = phases.run("sample", draw, keys[best][2], state, target.data)
    posterior = phases.run("sample", target.posterior, list(np.asarray(x).reshape(chains, draws, -1)))
    # ArviZ's PSIS on the host: a compiled one costs more to compile than to run on a few thousand ratios
    pareto_k = float(phases.run("sample", lambda r: az.psislw(np.array(r, dtype=float), reff=1.0)[1], log_ratio))
    trace = np.asarray(trace)
    warn = []
    if pareto_k > 0.7:
        warn.append(f"Pareto k of the importance ratios is {pareto_k:.2f} > 0.7: the normal approximation "
                    f"misses the posterior's tails")
    spread = float(np.max(elbos) - np.min(elbos))
    if spread > 5.0:
        warn.append(f"the paths' best ELBOs differ by {spread:.1f} nats: they stopped in different optima")
    iterations = int(iterations)
    info = {"n_grad": n_grad[0], "iterations": iterations, "converged": iterations < opts["max_iter"],
            "objective": "elbo", "path_elbo": elbos.tolist(), "best_path": best, "pareto_k": pareto_k,
            "warnings": warn}
    return build_fit(model, data, ctx.backend, "approximation", posterior, info=info, library=_LIBRARY,
                     objective={"elbo": trace[np.isfinite(trace)]}, timing=phases.timing(), ctx=ctx)


# ------------------------------------------------------------------------------------- mean-field VI
@register("blackjax_meanfield_vi", kind="approximation", description="BlackJAX mean-field VI (Adam)",
          library=_LIBRARY, unavailable=needs_declaration("numpyro"), memory=_MEMORY, defaults={"tune": 0},
          options={
              "max_iter": Option(10000, "Adam steps on the ELBO (all of them are taken)",
                                 Interval(int, 2, None, "left")),
              "learning_rate": Option(0.01, "Adam's learning rate", POSITIVE),
              "obj_n_mc": Option(4, "Monte-Carlo samples per ELBO gradient", POSITIVE_INT)})
def run_blackjax_meanfield_vi(model, data, *, draws, tune, chains, ctx, **opts) -> Fit:
    """BlackJAX mean-field Gaussian VI on the unconstrained space (stick-the-landing gradients, Adam)."""
    import blackjax
    import jax
    import jax.numpy as jnp
    import optax

    n_iter = opts["max_iter"]
    (init_key, fit_key, draw_key), = _chain_keys(ctx, 1)     # one approximation, as advi
    phases = _Phases()
    target = phases.run("tune", UnconstrainedTarget, model, data, ctx.backend, [init_key])
    def vi(data):
        return blackjax.meanfield_vi(target.density(data), optax.adam(opts["learning_rate"]),
                                     num_samples=opts["obj_n_mc"])

    with progress_bar(total=n_iter, desc=ctx.backend, disable=not ctx.progress) as bar:
        every = max(1, n_iter // 100)
        tick = _ticker(bar, every)

        @jax.jit
        def optimise(key, x0, data):    # x0 gives the shapes: blackjax starts at mean 0, log-sd -2
            algorithm = vi(data)

            def one(state, xs):
                i, k = xs
                state, info = algorithm.step(k, state)
                tick(i)
                return state, info.elbo      # blackjax's "elbo" is the loss it minimises, E_q[log q - log p]

            return jax.lax.scan(one, algorithm.init(x0), (jnp.arange(n_iter), jax.random.split(key, n_iter)))

        state, losses = phases.run("tune", optimise, fit_key, target.positions[0], target.data)
        bar.update(n_iter % every)
    losses = np.asarray(losses)
    bad = np.flatnonzero(~np.isfinite(losses))
    if bad.size and not np.all(np.isfinite(losses[-1:])):
        raise ValueError(f"{ctx.backend}: the ELBO became {losses[bad[0]]} at iteration {bad[0]}; "
                         f"try a smaller learning_rate")
    draws_fn = jax.jit(lambda key, state: vi(target.data).sample(key, state, chains * draws))
    x = phases.run("sample", draws_fn, draw_key, state)
    posterior = phases.run("sample", target.posterior, list(np.asarray(x).reshape(chains, draws, -1)))
    info = stochastic_vi_info(losses, n_grad=n_iter * opts["obj_n_mc"], learning_rate=opts["learning_rate"])
    return build_fit(model, data, ctx.backend, "approximation", posterior, info=info, library=_LIBRARY,
                     objective={"elbo": -losses, "loss": losses}, timing=phases.timing(), ctx=ctx)
