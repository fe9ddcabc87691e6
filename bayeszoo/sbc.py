"""Simulation-based calibration of a backend on a model: ``bz.sbc(model, backend, data)`` (Talts, Betancourt,
Simpson, Vehtari and Gelman 2018).

Parameters and observations are drawn from the model's prior predictive through its NumPyro declaration
(``numpyro.infer.Predictive`` on ``numpyro.handlers.uncondition(model.numpyro_model(data))``: the observed site
is sampled too); each simulated observation vector replaces the data's ``y`` (the inputs stay), ``bz.fit`` fits
it with the backend. A model of one's own is simulated by its own library (``pm.sample_prior_predictive``, or
NumPyro's ``Predictive`` on its function) and rebuilt around each simulation's observations
(``model.with_observations``: ``pm.observe`` or ``numpyro.handlers.condition``). Every scalar component of the
canonical variables is ranked among the fit's posterior draws, thinned so that they are nearly independent (by
default each fit's own draws / smallest bulk ESS, the thinning Talts et al. recommend; or a fixed ``thin``). A
backend that samples the posterior gives uniform ranks; :class:`~bayeszoo.diagnostics.calibration.SBCResult`
tests that with ECDF-difference bands (Säilynoja, Bürkner and Vehtari 2022) and draws them. The fits run here one
after another, or on any ``concurrent.futures`` executor or Dask client, as ``bz.compare`` runs its grid.
"""
from __future__ import annotations

import dataclasses
import math
import time
from concurrent.futures import as_completed

import numpy as np
import pandas as pd

from bayeszoo import checks, memory_guard, registry
from bayeszoo.api import as_executor
from bayeszoo.api import fit as run_fit
from bayeszoo.datasets import Dataset
from bayeszoo.diagnostics.calibration import SBCResult
from bayeszoo.models import Model, UserModel
from bayeszoo.progress import progress_bar
from bayeszoo.results import first_line, jsonable, without_log_likelihood

WHO = "sbc"
#: simulations drawn per call of the compiled prior predictive: one shape for every run, so it compiles once (and is
#: then read from JAX's cache), and simulation i's draws depend on the seed and i only, not on n_simulations
BATCH = 50


def sbc(model, backend: str, data: Dataset | None = None, *, n_simulations: int = 100, draws: int | None = None,
        tune: int | None = None, chains: int | None = None, thin: int | None = None, variables=None,
        ci_prob: float = 0.95, seed: int | None = 0, executor=None, progress: bool = True,
        **options) -> SBCResult:
    """Simulation-based calibration of ``backend`` on ``model``, with ``data``'s inputs.

    Everything is checked, and the simulations are drawn and checked against the model, before any fit runs.

    Parameters
    ----------
    model : bayeszoo.models.Model
        A built-in family with a proper prior (its NumPyro declaration simulates the parameters and the
        observations; a vague prior simulates observations no fit can take), or a model of one's own
        (``bz.models.from_pymc`` / ``from_numpyro``) with a proper prior, simulated by its library.
    backend : str
        The backend to calibrate (``bz.backends(model)``).
    data : bayeszoo.datasets.Dataset
        Gives the inputs (``X``) every simulation shares; its ``y`` is replaced by each simulation's. Omitted for a
        model of one's own, which carries its inputs inside it.
    n_simulations : int, default 100
        Simulated datasets, each fitted once; the bands narrow as one over its square root, so subtle errors
        need many.
    draws, tune, chains : int, optional
        Passed to ``bz.fit`` (by default the backend's own); one chain of a few hundred draws is usually enough.
    thin : int, optional
        Rank among every ``thin``-th draw of each chain; by default each fit is thinned by its draws over its
        smallest bulk ESS (approximations, whose draws are independent, are not thinned).
    variables : list of str, optional
        The canonical variables to calibrate (by default all of them): leave out those the backend holds fixed.
    ci_prob : float, default 0.95
        Family-wise coverage of the ECDF bands: each of the C components has a band of 1 - (1 - ci_prob) / C
        (Bonferroni), so a calibrated backend passes with at least this probability.
    seed : int or None, default 0
        Seeds the simulations (a JAX key), each fit (simulation i: ``SeedSequence([seed, i])``) and the ranks'
        tie-breaking and jitter; None draws a fresh one (recorded as ``result.seed``).
    executor : concurrent.futures.Executor or distributed.Client, optional
        Runs the fits, as in ``bz.compare``; by default they run here, one after another.
    progress : bool, default True
        Show a progress bar over the simulations.
    **options
        The backend's options, given to every fit.

    Returns
    -------
    SBCResult
        ``.ranks``, ``.passed``, ``.summary()``, ``.verdict()``, ``.plot()``;
        ``comparison.attach_sbc(result)`` shows it in a comparison's report.

    Raises
    ------
    ValueError
        A bad argument or option; a model without a declaration that can simulate its observations (none in
        NumPyro, improper priors, density terms added with ``numpyro.factor`` or ``pm.Potential``, which forward
        simulation ignores); a simulated dataset the model refuses. All before any fit.
    """
    start = time.perf_counter()
    data = _checked_data(model, data)
    spec = registry.get(model, backend)
    n, ci_prob, seed = _checked_arguments(n_simulations, draws, tune, chains, thin, ci_prob, seed, progress)
    opts = spec.resolve(options, model, data)
    names = _variables(model, data, variables)
    executor = _checked_executor(executor)
    _check_memory(model, data, spec, opts, n, draws, chains, executor)
    seed = checks.fresh_seed() if seed is None else seed
    kwargs = {"draws": draws, "tune": tune, "chains": chains, "progress": False, **options}
    jobs = _jobs(model, data, backend, kwargs, names, n, thin, seed)
    outcomes = _run_simulations(jobs, executor, backend, progress)
    settings = {"n_simulations": n, "draws": draws, "tune": tune, "chains": chains, "thin": thin,
                "variables": names, "options": options}
    return _result(model, data, spec, backend, outcomes, names, settings, ci_prob, seed, thin, start)


def _checked_data(model, data) -> Dataset:
    """The data every simulation shares, after checking the model can be simulated and accepts it: a model of one's
    own gives its own when ``data`` is None."""
    if not isinstance(model, Model):
        raise ValueError(f"{WHO}: model must be a bayeszoo model (e.g. bz.models.RVM()), got {type(model).__name__}")
    if isinstance(model, UserModel):
        problem = model.declaration_problem(model.library)
        if problem is not None:
            raise ValueError(f"{WHO}: {problem}")
        data = model.dataset() if data is None else data   # validate refuses any other data
    elif data is None:
        raise ValueError(f"{WHO}: needs data, a Dataset whose y the simulated observations replace (its inputs X "
                         f"stay)")
    if not isinstance(data, Dataset):
        raise ValueError(f"{WHO}: data must be a bayeszoo.datasets.Dataset, got {type(data).__name__}")
    model.validate(data)
    return data


def _checked_arguments(n_simulations, draws, tune, chains, thin, ci_prob, seed, progress) -> tuple:
    """The counts, probability, seed and flag of :func:`sbc` checked: ``(n_simulations, ci_prob, seed)``."""
    n = checks.number(WHO, "n_simulations", n_simulations, low=2, low_inclusive=True, integer=True)
    for what, value, low in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1), ("thin", thin, 1)):
        checks.number(WHO, what, value, low=low, low_inclusive=True, integer=True, allow_none=True)
    ci_prob = checks.probability(WHO, "ci_prob", ci_prob)
    seed = checks.seed(WHO, "seed", seed)
    checks.flag(WHO, "progress", progress)
    return n, ci_prob, seed


def _checked_executor(executor):
    """``executor`` as a ``concurrent.futures.Executor`` (a Dask client's), or None to run the fits here."""
    try:
        return as_executor(executor, "sbc")
    except ValueError:
        raise ValueError(f"{WHO}: executor must be a concurrent.futures.Executor (e.g. ProcessPoolExecutor) or a "
                         f"Dask distributed.Client, or None to run the fits here; got "
                         f"{type(executor).__name__}") from None


def _check_memory(model, data: Dataset, spec, options: dict, n: int, draws, chains, executor) -> None:
    """Refuse a run whose simulations (and fits, when they run here) would not fit in the machine's memory, before
    anything is built."""
    counts = {k: v if v is not None else spec.harness_defaults(model, data)[k]
              for k, v in (("draws", draws), ("chains", chains))}
    need = memory_need(model, data, spec, options, n_simulations=n, **counts, here=executor is None)
    memory_guard.check(f"{WHO} ({spec.owner})", need, what="the simulations and fits",
                    values=memory_guard.values_per_draw(model, data) if executor is None else None,
                    thin="thin" in spec.options, **counts)


def _jobs(model, data: Dataset, backend: str, kwargs: dict, names: list[str], n: int, thin, seed: int) -> list:
    """The prior predictive's ``n`` simulations, each the arguments of one :func:`simulation`."""
    if isinstance(model, UserModel):   # each simulation is the model rebuilt around its observations, with its data
        truths, observations = user_prior_predictive(model, names, n, seed)
        problems = [(simulated_model(model, observations, i), None) for i in range(n)]
    else:
        truths, observations = prior_predictive(model, data, names, n, seed)
        problems = [(model, simulated_dataset(model, data, y, i)) for i, y in enumerate(observations)]
    return [(*problems[i], backend, kwargs, {v: truths[v][i] for v in names}, names, thin,
             fit_seed(seed, i), [seed, i, 1]) for i in range(n)]


def _run_simulations(jobs: list, executor, backend: str, progress: bool) -> dict[int, dict]:
    """Each job's outcome by its simulation's index, run here or on ``executor``; a worker that died is an error."""
    outcomes: dict[int, dict] = {}
    with progress_bar(total=len(jobs), desc=f"sbc ({backend})", disable=not progress) as bar:
        if executor is None:
            for i, job in enumerate(jobs):
                outcomes[i] = simulation(*job)
                bar.update()
        else:
            futures = {executor.submit(simulation, *job): i for i, job in enumerate(jobs)}
            for future in as_completed(futures):
                try:
                    outcomes[futures[future]] = future.result()
                except Exception as exc:   # the worker itself died
                    outcomes[futures[future]] = {"error": f"{type(exc).__name__}: {exc}"}
                bar.update()
    return outcomes


def _result(model, data: Dataset, spec, backend: str, outcomes: dict[int, dict], names: list[str], settings: dict,
            ci_prob: float, seed: int, thin, start: float) -> SBCResult:
    """The simulations' ranks (one row per simulation that ran, one column per scalar component) and errors, timed
    from ``start`` (``time.perf_counter``)."""
    done = sorted(i for i, o in outcomes.items() if "error" not in o)
    index = pd.Index(done, name="simulation")
    labels = component_labels(model, data, names)
    ranks = pd.DataFrame(np.array([outcomes[i]["ranks"] for i in done], dtype=int).reshape(len(done), len(labels)),
                         index=index, columns=labels)
    ess_min = pd.Series([outcomes[i]["ess_min"] for i in done], index=index, dtype=float)
    return SBCResult(
        backend=backend, ranks=ranks, n_ranked=pd.Series([outcomes[i]["n_ranked"] for i in done], index=index,
                                                         dtype=int),
        ci_prob=ci_prob, seed=seed, model_spec=model.spec(), data=data.fingerprint(), data_name=data.name,
        settings=jsonable(settings),
        errors={i: outcomes[i]["error"] for i in sorted(outcomes) if "error" in outcomes[i]},
        ess_min=ess_min if spec.kind == "mcmc" and thin is None else None,
        seconds=time.perf_counter() - start)


def memory_need(model, data: Dataset, spec, options: dict, *, n_simulations: int, draws: int, chains: int,
                here: bool) -> memory_guard.Need:
    """What a run of :func:`sbc` holds in this process (``bayeszoo.memory_guard``): the dense arrays of the declaration
    that simulates (NumPyro's, or a model of one's own in its library, in that library's copies), the simulated
    parameters and observations (as drawn and as kept), and, when the fits run ``here`` (no executor), one fit's
    need as ``bz.fit`` counts it; on an executor each worker's ``bz.fit`` guards its own fits."""
    from bayeszoo.inference.engines_common import JAX_COPIES, PYMC_COPIES

    copies = PYMC_COPIES if isinstance(model, UserModel) and model.library == "pymc" else JAX_COPIES
    parts = {f"the prior predictive's {what}, {copies} copies": copies * size
             for what, size in model.declaration_memory(data).items()}
    values, observed = memory_guard.values_per_draw(model, data), int(np.size(data.y))
    parts[f"{n_simulations:,} simulations of {values:,} parameters and {observed:,} observations, drawn and kept"] = \
        2 * memory_guard.BYTES_PER_VALUE * n_simulations * (values + observed)
    advice = ("calibrate on a random subset of the data's points (data.subset): a small problem shows a backend's "
              "calibration as well")
    if here:
        fit = memory_guard.fit_need(spec, model, data, draws=draws, chains=chains, options=options)
        parts.update(fit.parts)
        advice = f"{advice}; {fit.advice}" if fit.advice else advice
    return memory_guard.Need(parts, advice)


def _variables(model, data, variables) -> list[str]:
    canonical = list(model.var_dims(data))
    if variables is None:
        return canonical
    if isinstance(variables, str) or not isinstance(variables, (list, tuple)) or not variables:
        raise ValueError(f"{WHO}: variables must be a non-empty list of canonical variables ({canonical}); "
                         f"got {variables!r}")
    unknown = [v for v in variables if v not in canonical]
    if unknown:
        raise ValueError(f"{WHO}: {unknown} are not canonical variables of {type(model).__name__}; they are "
                         f"{canonical}")
    return list(dict.fromkeys(variables))


def fit_seed(seed: int, simulation: int) -> int:
    """The seed of simulation ``simulation``'s fit."""
    return int(np.random.SeedSequence([int(seed), int(simulation)]).generate_state(1)[0])


def _shapes(model, data, names) -> dict[str, tuple[int, ...]]:
    coords = model.coords(data)
    dims = model.var_dims(data)
    return {v: tuple(len(coords[d]) for d in dims[v]) for v in names}


def component_labels(model, data, names) -> list[str]:
    """``name`` for a scalar, ``name[i, j]`` for each entry of an array variable (C order, as the ranks)."""
    out = []
    for name, shape in _shapes(model, data, names).items():
        out += [name] if not shape else [f"{name}[{', '.join(map(str, idx))}]" for idx in np.ndindex(*shape)]
    return out


def prior_predictive(model, data: Dataset, names: list[str], n: int, seed: int):
    """``n`` draws of the canonical variables ``names`` and of the observations from the model's NumPyro
    declaration: ({name: (n, *shape)}, (n, len(data.y))). A ValueError when the declaration cannot simulate them."""
    problem = model.declaration_problem("numpyro")
    if problem is not None:
        raise ValueError(f"{WHO}: the simulations come from the model's NumPyro declaration, which cannot be used "
                         f"here: {problem}")
    draws, observed = _numpyro_simulations(model, model.numpyro_model(data), names, n, seed)
    if len(observed) != 1 or next(iter(observed.values())) != data.y.size:
        found = ", ".join(f"{k} ({size} values)" for k, size in observed.items()) or "none"
        raise ValueError(f"{WHO}: {type(model).__name__}'s NumPyro declaration cannot simulate the observations: "
                         f"it needs one observed site as large as y ({data.y.size} values); it has {found}")
    y = np.asarray(draws[next(iter(observed))], dtype=float)
    return _truths(model, data, names, draws, n), y.reshape(n, -1)


def user_prior_predictive(model: UserModel, names: list[str], n: int, seed: int):
    """``n`` draws of the free variables ``names`` and of every observed variable of a model of one's own, from its
    own library: ({name: (n, *shape)}, {observed name: (n, *shape)})."""
    observed = list(model.spec()["observed"])
    if model.library == "pymc":
        draws = _pymc_simulations(model, [*names, *observed], n, seed)
    else:
        draws, found = _numpyro_simulations(model, model.numpyro_model(), names, n, seed)
        if set(found) != set(observed):
            raise ValueError(f"{WHO}: {model!r}'s forward simulation gives the observed sites {sorted(found)}, not "
                             f"the model's {sorted(observed)}")
    return _truths(model, None, names, draws, n), {k: draws[k] for k in observed}


def _numpyro_simulations(model, declaration, names: list[str], n: int, seed: int):
    """Draws of ``names`` and of every observed site of a NumPyro ``declaration``: ({site: (n, *shape)},
    {observed site: its number of values})."""
    import jax
    from numpyro.handlers import seed as seeded, trace, uncondition
    from numpyro.infer import Predictive

    label = _label(model)
    try:
        sites = trace(seeded(uncondition(declaration), jax.random.PRNGKey(0))).get_trace()
    except NotImplementedError:   # a density-only Distribution subclass
        raise ValueError(f"{WHO}: {label}'s NumPyro declaration has a distribution without a sampler, so it cannot "
                         f"simulate the model's prior") from None
    except (ValueError, FloatingPointError) as exc:   # NumPyro's checks of a distribution's parameters
        raise _too_vague(model, exc) from None
    samples = {k: s for k, s in sites.items() if s["type"] == "sample"}
    factors = [k for k, s in samples.items() if type(s["fn"]).__name__ == "Unit"]
    if factors:
        raise ValueError(f"{WHO}: {label}'s NumPyro declaration adds density terms with numpyro.factor "
                         f"({', '.join(factors)}), which forward simulation ignores, so it cannot simulate the "
                         f"model's prior: SBC needs a declaration whose every term is a distribution")
    observed = {k: int(np.size(s["value"])) for k, s in samples.items() if s["infer"].get("was_observed")}
    missing = [v for v in names if v not in sites]
    if missing:
        raise ValueError(f"{WHO}: {label}'s NumPyro declaration has no site for the canonical variable(s) "
                         f"{missing}, so their prior draws are unknown")
    if not observed:
        raise ValueError(f"{WHO}: {label}'s NumPyro declaration has no observed site to simulate")
    predictive = Predictive(uncondition(declaration), num_samples=BATCH, return_sites=[*names, *observed])
    batches = []
    for b in range(-(-n // BATCH)):
        try:
            batches.append(predictive(jax.random.fold_in(jax.random.PRNGKey(seed), b)))
        except (ValueError, FloatingPointError) as exc:
            raise _too_vague(model, exc) from None
    return {k: np.concatenate([np.asarray(batch[k]) for batch in batches])[:n] for k in batches[0]}, observed


def _pymc_simulations(model, variables: list[str], n: int, seed: int) -> dict[str, np.ndarray]:
    """``pm.sample_prior_predictive`` of ``variables``: {name: (n, *shape)}, in the variables' own dtypes (an
    integer observation stays an integer for ``pm.observe``)."""
    import logging

    import pymc as pm

    pm_model = model.pymc_model()
    if pm_model.potentials:
        raise ValueError(f"{WHO}: {model!r} adds density terms with pm.Potential "
                         f"({', '.join(p.name or '?' for p in pm_model.potentials)}), which forward simulation "
                         f"ignores, so it cannot simulate the model's prior: SBC needs a model whose every term is a "
                         f"distribution")
    pymc_log = logging.getLogger("pymc")
    level = pymc_log.level
    pymc_log.setLevel(logging.WARNING)   # its "Sampling: [...]" line
    try:
        idata = pm.sample_prior_predictive(draws=n, model=pm_model, var_names=variables, random_seed=seed)
    except NotImplementedError as exc:   # pm.Flat / pm.HalfFlat have no sampler
        raise ValueError(f"{WHO}: {model!r} cannot be simulated from its prior ({first_line(exc)}); SBC needs "
                         f"proper priors") from None
    except (ValueError, FloatingPointError, OverflowError) as exc:
        raise _too_vague(model, first_line(exc)) from None
    finally:
        pymc_log.setLevel(level)
    out = {}
    for name in variables:
        group = idata.prior if name in idata.prior else idata.prior_predictive
        out[name] = np.asarray(group[name].values)[0]   # one chain of n draws
    return out


def _label(model) -> str:
    return repr(model) if isinstance(model, UserModel) else type(model).__name__


def _truths(model, data, names: list[str], draws: dict, n: int) -> dict[str, np.ndarray]:
    """The canonical variables' draws as floats, each checked against its canonical shape."""
    shapes = _shapes(model, data, names)
    truths = {}
    for v in names:
        truths[v] = np.asarray(draws[v], dtype=float)
        if truths[v].shape != (n, *shapes[v]):
            raise ValueError(f"{WHO}: the declaration's {v} has shape {truths[v].shape[1:]}, the canonical one "
                             f"{shapes[v]}")
    return truths


def _too_vague(model, exc) -> ValueError:
    return ValueError(f"{WHO}: the prior predictive of {_label(model)} could not be simulated ({exc}); a "
                      f"prior this vague draws parameters beyond double precision: use a proper prior on the data's "
                      f"scale")


def simulated_dataset(model, data: Dataset, y: np.ndarray, simulation: int) -> Dataset:
    """``data`` with the simulated observations ``y`` (same inputs and test set), checked by the model."""
    try:
        out = dataclasses.replace(data, y=y.reshape(data.y.shape), name=f"{data.name} (simulation {simulation})")
        model.validate(out)
    except ValueError as exc:
        raise ValueError(f"{WHO}: simulation {simulation} drew observations the model refuses ({exc}); a prior "
                         f"this vague or this far from the data's scale cannot be calibrated: use a proper prior on "
                         f"the data's scale") from None
    return out


def simulated_model(model: UserModel, observations: dict, simulation: int) -> UserModel:
    """``model`` rebuilt around simulation ``simulation``'s observations, checked as its data would be."""
    values = {k: v[simulation] for k, v in observations.items()}
    try:
        out = model.with_observations(values, name=f"{model.name} (simulation {simulation})")
        out.dataset()   # the Dataset's checks: finite observations
    except ValueError as exc:
        raise ValueError(f"{WHO}: simulation {simulation} drew observations the model refuses ({exc}); a prior "
                         f"this vague or this far from the data's scale cannot be calibrated: use a proper prior on "
                         f"the data's scale") from None
    return out


def simulation(model, data, backend, kwargs, truth, names, thin, seed, stream) -> dict:
    """One simulation's fit and ranks; runs here or on an executor worker. Never raises: a failed fit is
    ``{"error": ...}``."""
    from bayeszoo import _config  # noqa: F401  (configures JAX / PyTensor on a fresh worker)

    try:
        with without_log_likelihood():
            fit = run_fit(model, data, backend, seed=seed, **kwargs)
        ranks, n_ranked, ess_min = rank_draws(fit, truth, names, thin,
                                              np.random.default_rng(np.random.SeedSequence(stream)))
    except Exception as exc:   # a failing fit is the result's, not the run's: every other simulation still runs
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"ranks": ranks, "n_ranked": n_ranked, "ess_min": ess_min}


def rank_draws(fit, truth: dict, names: list[str], thin: int | None, rng) -> tuple[np.ndarray, int, float]:
    """(ranks of the true values among the kept draws, one per component; the number of kept draws; the smallest
    bulk ESS, NaN for an approximation or a given ``thin``). Each chain keeps every k-th draw, k = ``thin`` or, for
    MCMC, the draws over the smallest bulk ESS; ties are broken at random."""
    import arviz as az

    post = fit.posterior[names]
    ess_min = math.nan
    if fit.kind == "mcmc" and thin is None:
        ess = az.ess(post, method="bulk")
        values = np.concatenate([np.ravel(ess[v].values) for v in names])
        values = values[np.isfinite(values) & (values > 0)]
        ess_min = float(values.min()) if values.size else math.nan
    step = thin or (max(1, math.ceil(fit.n_chains * fit.n_draws / ess_min)) if np.isfinite(ess_min) else 1)
    kept = np.concatenate([post[v].values[:, ::step].reshape(-1, max(int(np.prod(post[v].shape[2:])), 1))
                           for v in names], axis=1)
    true = np.concatenate([np.ravel(np.asarray(truth[v], dtype=float)) for v in names])
    below = np.sum(kept < true, axis=0)
    ties = np.sum(kept == true, axis=0)
    return below + rng.integers(0, ties + 1), int(kept.shape[0]), ess_min
