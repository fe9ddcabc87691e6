"""Generic backends built from a model's PyMC / NumPyro declarations: nuts, nutpie, numpyro, advi, fullrank_advi.

Every backend returns a :class:`~bayeszoo.Fit` whose ``posterior`` holds exactly the model's canonical
variables with its dims and coords (``model.var_dims`` / ``model.coords``), plus ``sample_stats``
(``diverging`` as bool chain x draw, ``n_steps`` and ``tree_depth`` where the library reports them),
``observed_data`` and ``constant_data`` (``model.constant_data``), all through :func:`bayeszoo.results.build_fit`.

Timing (``fit.timing``: ``compile``, ``tune``, ``sample``, ``total`` seconds, wall clock)
-----------------------------------------------------------------------------------------
* ``nuts`` (PyMC): ``compile`` is ``pm.init_nuts`` (builds the NUTS step, compiling logp and its gradient,
  and draws the jittered initial points). ``pm.sample`` then runs with the warm-up kept
  (``discard_tuned_samples=False``); its wall time is split between ``tune`` and ``sample`` in proportion to the
  number of gradient evaluations (sum of ``n_steps``) in warm-up and in the kept draws. The warm-up draws are
  dropped from the posterior afterwards.
* ``nutpie``: ``compile`` is ``nutpie.compile_pymc_model``; the sampling wall time is split by gradient
  evaluations as for ``nuts`` (warm-up kept with ``save_warmup=True``, then dropped).
* ``numpyro``: ``mcmc.warmup(...)`` and ``mcmc.run(...)`` (from ``mcmc.post_warmup_state``) are timed
  separately. The data the declaration names (:func:`numpyro_declaration`) go in as traced model arguments.
  JAX reports the time it spends tracing, lowering and compiling through ``jax.monitoring``; that time is moved
  from the phase in which it happened to ``compile``.
* ``advi`` / ``fullrank_advi``: ``compile`` is building the ``pm.ADVI`` / ``pm.FullRankADVI`` object and the
  first optimisation step (which compiles the step function); ``tune`` is the remaining ``max_iter - 1``
  optimisation steps; ``sample`` is drawing from the fitted approximation.
``fit.info["n_grad"]`` is the number of gradient evaluations (leapfrog steps for NUTS, warm-up included;
optimisation steps times the number of Monte-Carlo ELBO samples for ADVI).

Chain execution: PyMC runs chains one after another by default (``cores=1``; parallel chains were not
measured against it yet, pass ``cores=2`` to try). NumPyro chains run ``"sequential"`` by default (one XLA
device): on sinc n=20, 2 x (500 + 500) it took 30.6 s against 34.1 s for ``"vectorized"``, most of it JIT
compilation in both cases. Warm-up and sampling share one compiled NUTS step, also when ``tune`` differs from
``draws`` (``_numpyro_mcmc``).
"""
from __future__ import annotations

import collections
import functools
import math
import threading
import time
import warnings
from typing import NamedTuple

import numpy as np
import xarray as xr

from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.results import Fit, build_fit
from bayeszoo.progress import progress_bar, show
from bayeszoo.checks import POSITIVE, POSITIVE_INT, Interval, OneOf
from bayeszoo.registry import Option, needs_declaration, register
from bayeszoo.resources import Need, dense, values_per_draw

_STATS = ("diverging", "n_steps", "tree_depth", "step_size", "acceptance_rate", "energy", "lp")

#: copies of a declaration's dense arrays alive at a fit's peak (peak RSS growth of RVM fits at n = 1500 and 2500 and
#: a GPC fit at n = 2000, 2026-11-26): PyMC 3.2 to 4.9 (the model's arrays, their temporaries, PyTensor's
#: constants); JAX 6.6 above a fixed few hundred MB (XLA embeds the arrays in the program and copies them as it
#: compiles)
PYMC_COPIES, JAX_COPIES = 5, 7


# ----------------------------------------------------------------------------------------- shared helpers
def declaration_memory(copies: float, *, full_rank: bool = False):
    """The ``memory`` of a backend that runs a family's declaration (``bayeszoo.resources``): ``copies`` of each
    dense array the declaration builds (``model.declaration_memory``); ``full_rank`` adds a dense covariance over
    the draw's values with its gradient and the optimiser's two moments."""
    def need(model, data, options) -> Need:
        parts = {f"{what}, {copies:g} copies": int(copies * size)
                 for what, size in model.declaration_memory(data).items()}
        if full_rank:
            P = values_per_draw(model, data)
            parts[f"full-rank covariance factor ({P:,} x {P:,}), its gradient and 2 optimiser moments"] = dense(P, P, 4)
        return Need(parts, "use one of the family's own backends, which hold no declaration (bz.backends(model)), "
                           "or fit a subset of the data")
    return need


def numpyro_declaration(model, data):
    """``(fn, arrays)``: the model's NumPyro function and the data it takes as keyword arguments.

    A declaration returned as ``functools.partial(fn, *args, **kwargs)`` names its data: the arrays among the
    arguments (and dicts of arrays) come back in ``arrays``, to be passed to ``fn`` as traced arguments, so that
    one compilation serves every data set of the same shapes (CV folds, the simulations of ``bz.sbc``); arrays in
    a closure are constants of the compiled program, compiled again for every data set. The other arguments
    stay bound. A function that cannot take its data traced (NumPy called on an argument, a shape read from its
    values) keeps it bound too, as does any other callable."""
    fn = model.numpyro_model(data)
    if not isinstance(fn, functools.partial):
        return fn, {}
    positional = {f"arg{i}": a for i, a in enumerate(fn.args) if _is_data(a)}
    arrays = {**positional, **{k: v for k, v in fn.keywords.items() if _is_data(v)}}
    if not arrays:
        return fn, {}
    static = {k: v for k, v in fn.keywords.items() if k not in arrays}

    def traced(**given):
        args = [given.pop(f"arg{i}") if f"arg{i}" in positional else a for i, a in enumerate(fn.args)]
        return fn.func(*args, **static, **given)

    if not _traces(traced, arrays):
        return fn, {}
    return traced, arrays


def _is_data(value) -> bool:
    if isinstance(value, dict):
        return bool(value) and all(_is_data(v) for v in value.values())
    return isinstance(value, np.ndarray) and value.dtype.kind in "biuf"


def _traces(fn, arrays: dict) -> bool:
    """Whether ``fn(**arrays)`` runs with its arrays traced by JAX (abstract evaluation: no computation)."""
    import jax
    from numpyro import handlers
    from numpyro.infer.initialization import init_to_uniform

    def run(given):   # substituted as NumPyro initialises: an improper site cannot be sampled from its prior
        seeded = handlers.substitute(handlers.seed(fn, 0), substitute_fn=init_to_uniform)
        return {k: site["value"] for k, site in handlers.trace(seeded).get_trace(**given).items()
                if site["type"] == "sample"}

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jax.eval_shape(run, arrays)
    except Exception:   # NumPy on a tracer, a traced value used as a shape: the bound arrays will do
        return False
    return True


def _split_by_grads(seconds: float, n_tune_grad: float, n_draw_grad: float) -> tuple[float, float]:
    total = n_tune_grad + n_draw_grad
    if total <= 0:
        return 0.0, seconds
    return seconds * n_tune_grad / total, seconds * n_draw_grad / total


def convergence_info(diverging: np.ndarray) -> dict:
    n_div = int(np.sum(diverging))
    warn = [f"{n_div} divergent transitions after warm-up"] if n_div else []
    return {"divergences": n_div, "warnings": warn}


def _stack_stats(source: xr.Dataset, names=_STATS, rename: dict | None = None) -> dict:
    rename = rename or {}
    out = {}
    for name in names:
        src = next((k for k, v in rename.items() if v == name and k in source), name)
        if src in source:
            out[name] = np.asarray(source[src].values)
    return out


# ------------------------------------------------------------------------------------------- PyMC NUTS
_TARGET_ACCEPT = "target mean acceptance probability of the step-size adaptation, in (0, 1)"


_TARGET = Interval(float, 0, 1, "neither")
_TREE_DEPTH = Option(10, "largest tree depth of a NUTS trajectory (2^depth leapfrog steps)", POSITIVE_INT)


@register("nuts", kind="mcmc", description="PyMC NUTS (pm.sample)", library="pymc",
          unavailable=needs_declaration("pymc"), memory=declaration_memory(PYMC_COPIES), options={
    "target_accept": Option(0.9, _TARGET_ACCEPT, _TARGET),
    "cores": Option(1, "processes running chains in parallel (1: one chain after another)", POSITIVE_INT),
    "max_tree_depth": _TREE_DEPTH})
def run_nuts(model, data, *, draws, tune, chains, ctx, **opts) -> Fit:
    """PyMC NUTS."""
    import pymc as pm

    pm_model = model.pymc_model(data)
    seeds = ctx.chain_seeds(chains)
    t0 = time.perf_counter()
    initial_points, step = pm.init_nuts(init="jitter+adapt_diag", chains=chains, model=pm_model,
                                        random_seed=seeds, progressbar=False,
                                        target_accept=opts["target_accept"], max_treedepth=opts["max_tree_depth"])
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    with pm_model, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=opts["cores"], step=step,
                          initvals=initial_points, random_seed=seeds, progressbar=ctx.progress,
                          discard_tuned_samples=False, compute_convergence_checks=False,
                          return_inferencedata=True, idata_kwargs={"log_likelihood": False})
    t_run = time.perf_counter() - t0
    post = idata.posterior
    stats = _stack_stats(idata.sample_stats)
    warm_steps = float(idata.warmup_sample_stats["n_steps"].sum()) if tune and "warmup_sample_stats" in idata else 0.0
    draw_steps = float(idata.sample_stats["n_steps"].sum())
    t_tune, t_sample = _split_by_grads(t_run, warm_steps, draw_steps)
    info = {"n_grad": int(warm_steps + draw_steps), "n_grad_tune": int(warm_steps),
            **convergence_info(stats["diverging"])}
    return build_fit(model, data, ctx.backend, "mcmc", post, sample_stats=stats, info=info, library="pymc",
                     timing={"compile": t_compile, "tune": t_tune, "sample": t_sample}, ctx=ctx)


# ------------------------------------------------------------------------------------------------ nutpie
@register("nutpie", kind="mcmc", description="nutpie NUTS on the PyMC declaration", library="nutpie",
          unavailable=needs_declaration("pymc"), memory=declaration_memory(PYMC_COPIES),
          options={
              "target_accept": Option(0.8, _TARGET_ACCEPT, _TARGET),
              "cores": Option(1, "threads running chains in parallel", POSITIVE_INT),
              "max_tree_depth": _TREE_DEPTH})
def run_nutpie(model, data, *, draws, tune, chains, ctx, **opts) -> Fit:
    """nutpie (Rust NUTS with its own mass-matrix adaptation)."""
    import nutpie

    pm_model = model.pymc_model(data)
    t0 = time.perf_counter()
    compiled = nutpie.compile_pymc_model(pm_model)
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    idata = nutpie.sample(compiled, draws=draws, tune=tune, chains=chains, seed=ctx.seed,
                          progress_bar=ctx.progress, save_warmup=True, target_accept=opts["target_accept"],
                          cores=opts["cores"], maxdepth=opts["max_tree_depth"])
    t_run = time.perf_counter() - t0
    stats = _stack_stats(idata.sample_stats, rename={"depth": "tree_depth", "mean_tree_accept": "acceptance_rate",
                                                     "logp": "lp"})
    warm_steps = float(idata.warmup_sample_stats["n_steps"].sum()) if tune and "warmup_sample_stats" in idata else 0.0
    draw_steps = float(idata.sample_stats["n_steps"].sum())
    t_tune, t_sample = _split_by_grads(t_run, warm_steps, draw_steps)
    info = {"n_grad": int(warm_steps + draw_steps), "n_grad_tune": int(warm_steps),
            **convergence_info(stats["diverging"])}
    return build_fit(model, data, ctx.backend, "mcmc", idata.posterior, sample_stats=stats, info=info,
                     library="nutpie", timing={"compile": t_compile, "tune": t_tune, "sample": t_sample}, ctx=ctx)


# ----------------------------------------------------------------------------------------------- NumPyro
class JaxCompileClock:
    """Sums the tracing / lowering / compilation durations JAX reports through ``jax.monitoring``."""

    _lock = threading.Lock()
    _installed = False
    _active: list["JaxCompileClock"] = []
    EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
              "/jax/core/compile/backend_compile_duration")

    def __init__(self):
        self.seconds = 0.0

    @classmethod
    def _listener(cls, event, duration, **kwargs):
        if event in cls.EVENTS:
            for clock in cls._active:
                clock.seconds += duration

    def __enter__(self):
        import jax.monitoring

        with self._lock:
            if not JaxCompileClock._installed:
                jax.monitoring.register_event_duration_secs_listener(JaxCompileClock._listener)
                JaxCompileClock._installed = True
            self._active.append(self)
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._active.remove(self)


def _numpyro_mcmc(*args, **kwargs):
    """NumPyro's ``MCMC`` (same arguments) made to compile the model's NUTS step once per fit, in the two places
    where NumPyro would compile it again: its jitted loops get one shared jit object per function
    (:func:`_numpyro_jits_once`), and warm-up and sampling collect into arrays of one length
    (:func:`_one_length_mcmc_class`)."""
    _numpyro_jits_once()
    return _one_length_mcmc_class()(*args, **kwargs)


@functools.cache
def _one_length_mcmc_class():
    """A NumPyro ``MCMC`` whose warm-up and sampling collect into arrays of one length, the longer phase's.

    NumPyro compiles the NUTS step together with the arrays it collects into (their length is a shape of the
    compiled step), so a warm-up of ``tune`` collected draws and a sampling phase of ``draws`` compile the whole
    step twice when the two differ: tens of seconds on a fresh machine. With one length they share one compiled
    step; the rows past a phase's own length stay zero, and ``run_numpyro`` keeps the first ``tune`` / ``draws``.
    The draws are the same: the step does not read the collection."""
    from numpyro.infer import MCMC

    class OneLengthMCMC(MCMC):
        def _set_collection_params(self, lower=None, upper=None, collection_size=None, phase=None):
            super()._set_collection_params(lower, upper, collection_size, phase)
            if collection_size is not None and self.thinning == 1:
                self._collection_params["collection_size"] = max(collection_size, self.num_warmup,
                                                                 self.num_samples)

    return OneLengthMCMC


@functools.cache
def _reporting_nuts_class():
    """NumPyro's ``NUTS`` that moves a progress bar from inside the compiled loop.

    NumPyro shows progress by running the loop in Python, one dispatch and one diagnostics string (read from the
    device) per iteration: for 4 chains of 2,000 iterations on sonar that took 8 s of a 12 s run. Here NumPyro's
    loop stays compiled (``progress_bar=False``) and every ``every``-th iteration of a chain calls back to the
    ``bar`` with NumPyro's own postfix (steps, step size, acceptance). The draws are the same."""
    import jax
    from numpyro.infer import NUTS

    class ReportingNUTS(NUTS):
        bar = None
        every = 1

        def sample(self, state, model_args, model_kwargs):
            state = super().sample(state, model_args, model_kwargs)
            if self.bar is None:
                return state
            bar, every = self.bar, self.every

            def tick(num_steps, step_size, accept_prob):
                bar.update(every)
                show(bar, f"{int(num_steps)} steps of size {float(step_size):.2e}. acc. prob={float(accept_prob):.2f}")

            def report(state):
                jax.debug.callback(tick, state.num_steps, state.adapt_state.step_size, state.mean_accept_prob)

            jax.lax.cond(state.i % every == 0, report, lambda state: None, state)
            return state

    return ReportingNUTS


#: jax.jit objects that NumPyro's fori_collect made, by (function, jit arguments): see _numpyro_jits_once
_NUMPYRO_JITS: "collections.OrderedDict" = collections.OrderedDict()
_NUMPYRO_JITS_MAX = 64


def _numpyro_jits_once() -> None:
    """Make NumPyro's ``maybe_jit`` hand back the same ``jax.jit`` object for the same function and arguments,
    and compile its loop once for any number of iterations.

    NumPyro's ``fori_collect`` (run once per chain of ``"sequential"`` chains, and again for the sampling after the
    warm-up) wraps its cached loop body in a new ``jax.jit`` object on every call, and that object is a static
    argument of the jitted loop: so every chain traced, lowered and compiled the model's whole NUTS kernel again,
    eight times for 4 chains (JAX's persistent cache turns the compilations after the first into disk reads, but
    not the tracing and lowering; without it each is a full compilation). With the same object, the chains after
    the first run the first one's executable. Its compiled loop also takes the number of iterations as a static
    argument, so a warm-up shorter than the sampling compiled the loop twice; here the count is traced. The
    computation is the same; only the wrapper is shared."""
    import numpyro.util

    original = numpyro.util.maybe_jit
    if getattr(original, "_bayeszoo_shared", False):
        return
    lock = threading.Lock()

    def maybe_jit(fn, *args, **kwargs):
        if fn is numpyro.util._fori_collect_loop and kwargs.get("static_argnums") == (0, 1):
            fn, kwargs = _fori_collect_loop_any_length, {**kwargs, "static_argnums": (0,)}
        try:
            key = (fn, args, tuple(sorted(kwargs.items())))
            hash(key)
        except TypeError:      # an unhashable jit argument: NumPyro's own behaviour
            return original(fn, *args, **kwargs)
        with lock:
            if key in _NUMPYRO_JITS:
                _NUMPYRO_JITS.move_to_end(key)
                return _NUMPYRO_JITS[key]
            jitted = _NUMPYRO_JITS[key] = original(fn, *args, **kwargs)
            while len(_NUMPYRO_JITS) > _NUMPYRO_JITS_MAX:
                _NUMPYRO_JITS.popitem(last=False)
            return jitted

    maybe_jit._bayeszoo_shared = True
    maybe_jit.__wrapped__ = original
    numpyro.util.maybe_jit = maybe_jit


def _fori_collect_loop_any_length(body_fn, upper, init_val, collection, start_idx, thinning):
    """NumPyro's ``_fori_collect_loop`` with ``upper`` a traced argument (one compilation for every length)."""
    import jax
    return jax.lax.fori_loop(0, upper, lambda i, vals: body_fn(i, *vals), (init_val, collection, start_idx, thinning))


@register("numpyro", kind="mcmc", description="NumPyro NUTS", library="numpyro",
          unavailable=needs_declaration("numpyro"), memory=declaration_memory(JAX_COPIES), options={
    "target_accept": Option(0.9, _TARGET_ACCEPT, _TARGET),
    "chain_method": Option("sequential", "how chains run: 'sequential', 'vectorized' (vmap) or 'parallel' (pmap)",
                           OneOf(("sequential", "vectorized", "parallel"))),
    "max_tree_depth": _TREE_DEPTH})
def run_numpyro(model, data, *, draws, tune, chains, ctx, **opts) -> Fit:
    """NumPyro NUTS."""
    import jax
    from numpyro.infer import NUTS

    fn, arrays = numpyro_declaration(model, data)
    # sequential chains report from inside NumPyro's compiled loop (_reporting_nuts_class); the others keep its bar
    reporting = ctx.progress and opts["chain_method"] == "sequential"
    nuts = _reporting_nuts_class() if reporting else NUTS
    kernel = nuts(fn, target_accept_prob=opts["target_accept"], max_tree_depth=opts["max_tree_depth"])
    mcmc = _numpyro_mcmc(kernel, num_warmup=max(tune, 0), num_samples=draws, num_chains=chains,
                         chain_method=opts["chain_method"], progress_bar=ctx.progress and not reporting,
                         jit_model_args=bool(arrays))
    rng_key = ctx.jax_key()
    fields = ("diverging", "num_steps", "energy", "potential_energy", "adapt_state.step_size",
              "accept_prob")
    bar = progress_bar(total=chains * (max(tune, 0) + draws), desc="numpyro", disable=not reporting, unit="step")
    if reporting:
        kernel.bar, kernel.every = bar, max(1, (tune + draws) // 100)

    def phase_done(iterations):   # the callbacks have all run; the bar shows the phase's last iterations too
        if reporting:
            jax.effects_barrier()
            bar.update(chains * iterations - bar.n)

    with bar, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "not enough devices to run parallel chains"
        with JaxCompileClock() as clock_w:
            t0 = time.perf_counter()
            if tune > 0:
                # the same extra_fields in warm-up and sampling lets JAX reuse one compiled kernel
                mcmc.warmup(rng_key, extra_fields=fields, collect_warmup=True, **arrays)
                warm = mcmc.get_extra_fields(group_by_chain=True)
                jax.block_until_ready(warm)
                warm_steps = float(np.sum(np.asarray(warm["num_steps"])[:, :tune]))
                rng_key = mcmc.post_warmup_state.rng_key
                phase_done(tune)
            else:
                warm_steps = 0.0
            t_warm = time.perf_counter() - t0
        with JaxCompileClock() as clock_s:
            t0 = time.perf_counter()
            mcmc.run(rng_key, extra_fields=fields, **arrays)
            samples = mcmc.get_samples(group_by_chain=True)
            jax.block_until_ready(samples)
            phase_done(max(tune, 0) + draws)
            t_run = time.perf_counter() - t0
    # the first ``draws`` rows: the collection is as long as the longer phase (_numpyro_mcmc)
    samples = {k: np.asarray(v)[:, :draws] for k, v in samples.items()}
    extra = {k: np.asarray(v)[:, :draws] for k, v in mcmc.get_extra_fields(group_by_chain=True).items()}
    n_steps = extra["num_steps"].astype(int)
    stats = {"diverging": extra["diverging"], "n_steps": n_steps,
             "tree_depth": np.floor(np.log2(np.maximum(n_steps, 1))).astype(int) + 1,
             "step_size": extra["adapt_state.step_size"], "acceptance_rate": extra["accept_prob"],
             "energy": extra["energy"], "lp": -extra["potential_energy"]}
    posterior = xr.Dataset({k: xr.DataArray(np.asarray(v), dims=("chain", "draw", *[f"{k}_{i}" for i in range(np.ndim(v) - 2)]))
                            for k, v in samples.items()})
    t_compile = clock_w.seconds + clock_s.seconds
    draw_steps = float(n_steps.sum())
    info = {"n_grad": int(warm_steps + draw_steps), "n_grad_tune": int(warm_steps),
            **convergence_info(stats["diverging"])}
    return build_fit(model, data, ctx.backend, "mcmc", posterior, sample_stats=stats, info=info, library="numpyro",
                     timing={"compile": t_compile, "tune": t_warm - clock_w.seconds,
                             "sample": t_run - clock_s.seconds}, ctx=ctx)


# -------------------------------------------------------------------------------------------------- ADVI
def _run_advi(model, data, ctx, *, draws, chains, **opts) -> Fit:
    import pymc as pm

    method = ctx.backend
    n_iter = int(opts["max_iter"])
    pm_model = model.pymc_model(data)
    seeds = ctx.chain_seeds(2)
    with pm_model, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        t0 = time.perf_counter()
        approx_cls = pm.ADVI if method == "advi" else pm.FullRankADVI
        inference = approx_cls(random_seed=seeds[0])
        optimizer = pm.adam(learning_rate=opts["learning_rate"])
        step_fn = inference.objective.step_function(obj_optimizer=optimizer, obj_n_mc=opts["obj_n_mc"],
                                                    total_grad_norm_constraint=opts["total_grad_norm_constraint"],
                                                    score=True)
        first = float(step_fn())                    # the first step compiles the step function
        t_compile = time.perf_counter() - t0
        t0 = time.perf_counter()
        # every step is taken (min_iter = max_iter): ADVI's convergence is judged afterwards (stochastic_vi_info)
        run = iterate(_adam_steps(step_fn, method), None, max_iter=n_iter - 1, min_iter=n_iter - 1, tol=0.0,
                      progress=ctx.progress, desc=method, unit="step", owner=method,
                      change_name="relative change of the ELBO")
        losses = np.concatenate([[first], -run.trace])
        t_tune = time.perf_counter() - t0
        t0 = time.perf_counter()
        approx = inference.approx
        trace = approx.sample(draws=draws * chains, random_seed=seeds[1], return_inferencedata=True)
        t_sample = time.perf_counter() - t0
    flat = trace.posterior.isel(chain=0)
    posterior = xr.Dataset({name: xr.DataArray(
        np.asarray(flat[name].values).reshape(chains, draws, *flat[name].shape[1:]),
        dims=("chain", "draw", *flat[name].dims[1:])) for name in flat.data_vars})
    info = stochastic_vi_info(losses, n_grad=n_iter * opts["obj_n_mc"], learning_rate=opts["learning_rate"])
    return build_fit(model, data, method, "approximation", posterior, info=info, library="pymc",
                     objective={"elbo": -losses, "loss": losses},
                     timing={"compile": t_compile, "tune": t_tune, "sample": t_sample}, ctx=ctx)


class AdamState(NamedTuple):
    """The driver's state of PyMC's ADVI (its parameters live in the compiled step function): the Adam steps
    made (``iteration``) and ``objective``, the ELBO estimate of the last one (None before the first)."""

    iteration: int
    objective: float | None


class AdamInfo(NamedTuple):
    """One Adam step: the ELBO estimate (``objective``, minus PyMC's loss) and ``change``, its change relative to
    it (shown, not a stopping rule: the estimate is noisy)."""

    objective: float
    change: float


def _adam_steps(step_fn, method: str) -> Algorithm:
    """The Adam steps of PyMC's ``step_fn`` (its first one made, the compiling step); a non-finite ELBO is a
    ValueError with the remedy (the driver's would say to rescale the inputs)."""
    def step(s):
        it, loss = s.iteration + 1, float(step_fn())
        if not math.isfinite(loss):
            raise ValueError(f"{method}: the ELBO became {loss} at iteration {it}; try a smaller learning_rate")
        elbo = -loss
        change = math.inf if s.objective is None else abs(elbo - s.objective) / max(abs(elbo), 1e-300)
        return AdamState(it, elbo), AdamInfo(elbo, change)

    return Algorithm(lambda _: AdamState(0, None), step)


_ADVI_OPTIONS = {
    "max_iter": Option(20000, "Adam steps on the ELBO (all of them are taken)", Interval(int, 2, None, "left")),
    "learning_rate": Option(0.01, "Adam's learning rate", POSITIVE),
    "total_grad_norm_constraint": Option(100.0, "gradients are rescaled to at most this total norm", POSITIVE),
    "obj_n_mc": Option(1, "Monte-Carlo samples per ELBO gradient", POSITIVE_INT)}
# ``tune`` is unused: the optimisation length is max_iter
_ADVI_DEFAULTS = {"tune": 0}


def stochastic_vi_info(losses: np.ndarray, *, n_grad: int, learning_rate: float) -> dict:
    """The info of a stochastic-gradient VI run (ADVI, BlackJAX mean-field VI): it has converged when the mean loss
    of the last tenth of the steps is within 1 % of the tenth before it."""
    n_iter = losses.size
    tenth = max(1, n_iter // 10)
    tail = losses[-tenth:]
    head = losses[-2 * tenth:-tenth] if n_iter >= 20 else tail
    rel_change = abs(np.mean(tail) - np.mean(head)) / max(abs(np.mean(tail)), 1e-12)
    converged = bool(rel_change < 1e-2)
    return {"n_grad": int(n_grad), "iterations": n_iter, "converged": converged, "objective": "elbo",
            "final_loss": float(np.mean(tail)), "learning_rate": learning_rate,
            "warnings": [] if converged else [f"mean loss still changing by {rel_change:.2%} over the last 10%"]}


@register("advi", kind="approximation", description="PyMC mean-field ADVI", library="pymc",
          unavailable=needs_declaration("pymc"), memory=declaration_memory(PYMC_COPIES),
          options=_ADVI_OPTIONS, defaults=_ADVI_DEFAULTS)
def run_advi(model, data, *, draws, tune, chains, ctx, **opts) -> Fit:
    """Mean-field ADVI (pm.ADVI)."""
    return _run_advi(model, data, ctx, draws=draws, chains=chains, **opts)


@register("fullrank_advi", kind="approximation", description="PyMC full-rank ADVI", library="pymc",
          unavailable=needs_declaration("pymc"), memory=declaration_memory(PYMC_COPIES, full_rank=True),
          options=_ADVI_OPTIONS, defaults=_ADVI_DEFAULTS)
def run_fullrank_advi(model, data, *, draws, tune, chains, ctx, **opts) -> Fit:
    """Full-rank ADVI (pm.FullRankADVI)."""
    return _run_advi(model, data, ctx, draws=draws, chains=chains, **opts)
