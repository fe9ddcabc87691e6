"""The backend on a model's NumPyro declaration: numpyro (NumPyro NUTS), compiled once per fit, with its progress
reported from inside the compiled loop.

The fit is laid out as every backend's (:mod:`~bayeszoo.inference.pymc_engines`); what the engines on the
declarations share is :mod:`~bayeszoo.inference.engines_common`.

Timing (``fit.timing``): ``mcmc.warmup(...)`` and ``mcmc.run(...)`` (from ``mcmc.post_warmup_state``) are timed
separately. The data the declaration names (:func:`~bayeszoo.inference.engines_common.numpyro_declaration`) go in
as traced model arguments. JAX reports the time it spends tracing, lowering and compiling through
``jax.monitoring`` (:class:`~bayeszoo.inference.timing.JaxCompileClock`); that time is moved from the phase in which
it happened to ``compile``. ``fit.info["n_grad"]`` is the number of leapfrog steps, warm-up included.

Chain execution: NumPyro chains run ``"sequential"`` by default (one XLA device): on sinc n=20, 2 x (500 + 500) it
took 30.6 s against 34.1 s for ``"vectorized"``, most of it JIT compilation in both cases. Warm-up and sampling
share one compiled NUTS step, also when ``tune`` differs from ``draws`` (``_numpyro_mcmc``).
"""
from __future__ import annotations

import collections
import functools
import threading
import time
import warnings

import numpy as np
import xarray as xr

from bayeszoo.results import Fit, build_fit
from bayeszoo.progress import progress_bar, show
from bayeszoo.checks import OneOf
from bayeszoo.registry import Option, needs_declaration, register
from bayeszoo.inference.engines_common import (JAX_COPIES, MAX_TREE_DEPTH, convergence_info, declaration_memory,
                                               numpyro_declaration, target_accept)
from bayeszoo.inference.timing import JaxCompileClock


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
def _nuts_class():
    """NumPyro's ``NUTS``, initialised by one compiled program and moving a progress bar from inside its loop.

    * **Initialisation.** NumPyro starts a single chain op by op: it runs the model, its potential and gradient
      eagerly to find a valid starting point, and JAX compiles every operation on its first use (a small
      compilation per operation of the model and its gradient: BENCHMARKS.md, "The compiled start"). Here the same
      initialisation runs under one ``jax.jit``, made once per kernel, so the chains after the first reuse it.
    * **Progress.** NumPyro shows progress by running the loop in Python, one dispatch and one diagnostics string
      (read from the device) per iteration, most of a short fit's time. Here NumPyro's loop stays compiled
      (``progress_bar=False``) and, when a ``bar`` is set, every ``every``-th iteration of a chain calls back to it
      with NumPyro's own postfix (steps, step size, acceptance). The draws are the same as without a bar."""
    import jax
    from numpyro.infer import NUTS
    from numpyro.util import is_prng_key, not_jax_tracer

    class CompiledNUTS(NUTS):
        bar = None
        every = 1
        _compiled_init = None

        def init(self, rng_key, num_warmup, init_params=None, model_args=(), model_kwargs=None):
            kwargs = model_kwargs or {}
            # the case run_numpyro makes (one chain's key, no given start, data as keyword arguments), once per kernel
            plain = init_params is None and not model_args and is_prng_key(rng_key) and not_jax_tracer(rng_key)
            if self._compiled_init is None and plain:
                self._compiled_init = (num_warmup, _compiled_call(
                    lambda key, kw: NUTS.init(self, key, num_warmup, None, (), kw), kwargs))
            if not plain or not self._compiled_init or self._compiled_init[0] != num_warmup:
                return super().init(rng_key, num_warmup, init_params, model_args, model_kwargs)
            try:
                return self._compiled_init[1](rng_key, kwargs)
            except jax.errors.JAXTypeError:   # a model that only runs on concrete values: NumPyro's own way
                self._compiled_init = False
                return super().init(rng_key, num_warmup, init_params, model_args, model_kwargs)

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

    return CompiledNUTS


def _compiled_call(fn, kwargs: dict):
    """``jax.jit(fn)`` called as ``(key, kwargs)``: the numeric arrays of ``kwargs`` are the program's inputs, every
    other value (a count, a name, None) is fixed at its value in ``kwargs``, as the model may use it in a shape."""
    import jax

    fixed = {k: v for k, v in kwargs.items() if not _is_numeric_array(v)}
    jitted = jax.jit(lambda key, arrays: fn(key, {**arrays, **fixed}))
    return lambda key, kw: jitted(key, {k: v for k, v in kw.items() if k not in fixed})


def _is_numeric_array(value) -> bool:
    return hasattr(value, "dtype") and hasattr(value, "shape") and np.dtype(value.dtype).kind in "biufc"


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
    "target_accept": target_accept(0.9),
    "chain_method": Option("sequential", "how chains run: 'sequential', 'vectorized' (vmap) or 'parallel' (pmap)",
                           OneOf(("sequential", "vectorized", "parallel"))),
    "max_tree_depth": MAX_TREE_DEPTH})
def run_numpyro(model, data, *, draws, tune, chains, ctx, **opts) -> Fit:
    """NumPyro NUTS."""
    import jax
    from numpyro.infer import NUTS

    fn, arrays = numpyro_declaration(model, data)
    # sequential chains report from inside NumPyro's compiled loop (_nuts_class); the others keep its bar
    reporting = ctx.progress and opts["chain_method"] == "sequential"
    kernel = _nuts_class()(fn, target_accept_prob=opts["target_accept"], max_tree_depth=opts["max_tree_depth"])
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
