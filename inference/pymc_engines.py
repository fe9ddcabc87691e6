"""The backends on a model's PyMC declaration: nuts (PyMC NUTS), nutpie, advi, fullrank_advi.

Every backend returns a :class:`~bayeszoo.Fit` whose ``posterior`` holds exactly the model's canonical
variables with its dims and coords (``model.var_dims`` / ``model.coords``), plus ``sample_stats``
(``diverging`` as bool chain x draw, ``n_steps`` and ``tree_depth`` where the library reports them),
``observed_data`` and ``constant_data`` (``model.constant_data``), all through :func:`bayeszoo.results.build_fit`.
NumPyro NUTS on the NumPyro declaration is :mod:`~bayeszoo.inference.numpyro_engines`; what they share is
:mod:`~bayeszoo.inference.engines_common`.

Timing (``fit.timing``: ``compile``, ``tune``, ``sample``, ``total`` seconds, wall clock)
-----------------------------------------------------------------------------------------
* ``nuts`` (PyMC): ``compile`` is ``pm.init_nuts`` (builds the NUTS step, compiling logp and its gradient,
  and draws the jittered initial points). ``pm.sample`` then runs with the warm-up kept
  (``discard_tuned_samples=False``); its wall time is split between ``tune`` and ``sample`` in proportion to the
  number of gradient evaluations (sum of ``n_steps``) in warm-up and in the kept draws. The warm-up draws are
  dropped from the posterior afterwards.
* ``nutpie``: ``compile`` is ``nutpie.compile_pymc_model``; the sampling wall time is split by gradient
  evaluations as for ``nuts`` (warm-up kept with ``save_warmup=True``, then dropped).
* ``advi`` / ``fullrank_advi``: ``compile`` is building the ``pm.ADVI`` / ``pm.FullRankADVI`` object and the
  first optimisation step (which compiles the step function); ``tune`` is the remaining ``max_iter - 1``
  optimisation steps; ``sample`` is drawing from the fitted approximation.
``fit.info["n_grad"]`` is the number of gradient evaluations (leapfrog steps for NUTS, warm-up included;
optimisation steps times the number of Monte-Carlo ELBO samples for ADVI).

Chain execution: PyMC runs chains one after another by default (``cores=1``; parallel chains were not
measured against it yet, pass ``cores=2`` to try).
"""
from __future__ import annotations

import math
import time
import warnings
from typing import NamedTuple

import numpy as np
import xarray as xr

from bayeszoo.inference.iterative import Algorithm, iterate
from bayeszoo.results import Fit, build_fit
from bayeszoo.checks import POSITIVE, POSITIVE_INT, Interval
from bayeszoo.registry import Option, needs_declaration, register
from bayeszoo.inference.engines_common import (MAX_TREE_DEPTH, PYMC_COPIES, convergence_info, declaration_memory,
                                               stochastic_vi_info, target_accept)

_STATS = ("diverging", "n_steps", "tree_depth", "step_size", "acceptance_rate", "energy", "lp")


def _split_by_grads(seconds: float, n_tune_grad: float, n_draw_grad: float) -> tuple[float, float]:
    total = n_tune_grad + n_draw_grad
    if total <= 0:
        return 0.0, seconds
    return seconds * n_tune_grad / total, seconds * n_draw_grad / total


def _stack_stats(source: xr.Dataset, names=_STATS, rename: dict | None = None) -> dict:
    rename = rename or {}
    out = {}
    for name in names:
        src = next((k for k, v in rename.items() if v == name and k in source), name)
        if src in source:
            out[name] = np.asarray(source[src].values)
    return out


# ------------------------------------------------------------------------------------------- PyMC NUTS
@register("nuts", kind="mcmc", description="PyMC NUTS (pm.sample)", library="pymc",
          unavailable=needs_declaration("pymc"), memory=declaration_memory(PYMC_COPIES), options={
    "target_accept": target_accept(0.9),
    "cores": Option(1, "processes running chains in parallel (1: one chain after another)", POSITIVE_INT),
    "max_tree_depth": MAX_TREE_DEPTH})
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
              "target_accept": target_accept(0.8),
              "cores": Option(1, "threads running chains in parallel", POSITIVE_INT),
              "max_tree_depth": MAX_TREE_DEPTH})
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


# NumPyro NUTS registers here, so that the backends are listed as before: the declarations' samplers (nuts, nutpie,
# numpyro), then their approximations
from bayeszoo.inference import numpyro_engines  # noqa: E402, F401


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
        run = iterate(adam_steps(step_fn, method), None, max_iter=n_iter - 1, min_iter=n_iter - 1, tol=0.0,
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


def adam_steps(step_fn, method: str) -> Algorithm:
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
