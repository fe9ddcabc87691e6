"""Public entry points: ``fit``, ``backends``, ``compare``, ``cross_validate``."""
from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import traceback
import warnings
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

import pandas as pd

from bayeszoo import inference  # noqa: F401  (importing it registers every backend)
from bayeszoo import catalogue, checks, memory_guard, registry
from bayeszoo.catalogue import Reference
from bayeszoo.comparison import COMPARISON_FILE, Comparison, fit_filename, folder_lock
from bayeszoo.datasets import Dataset
from bayeszoo.diagnostics.metrics import DEFAULT_TARGETS, checked_targets
from bayeszoo.results import (Fit, ResultExists, jsonable, load_fit, package_version,
                              saved_fit_identity)
from bayeszoo.models import Model, UserModel
from bayeszoo.progress import progress_bar


def _check_model(model):
    if not isinstance(model, Model):
        hint = ("; wrap a PyMC model with bz.models.from_pymc(pm_model)" if type(model).__module__.startswith("pymc")
                else "; wrap a NumPyro model function with bz.models.from_numpyro(fn, *args, **kwargs)"
                if callable(model) else "")
        raise ValueError(f"model must be a bayeszoo model (e.g. bz.models.RVM()), got {type(model).__name__}{hint}")


def _data_of(model, data) -> Dataset:
    """``data``, or for a model of one's own given none the observations it carries (``model.dataset()``)."""
    if data is None and isinstance(model, UserModel):
        return model.dataset()
    if not isinstance(data, Dataset):
        hint = (" (a model from bz.models.from_pymc / from_numpyro carries its data: give the backend by name, "
                "backend=...)" if isinstance(model, UserModel) else "")
        raise ValueError(f"data must be a bayeszoo.datasets.Dataset, got {type(data).__name__}{hint}")
    return data


def backends(model, details: bool = False) -> list[str] | pd.DataFrame:
    """The backends that apply to a model.

    Parameters
    ----------
    model : bayeszoo.models.Model
        A model of any family, e.g. ``bz.models.RVM()``.
    details : bool, default False
        Return the table of the backends' options instead of their names.

    Returns
    -------
    list of str or pandas.DataFrame
        The backend names; with ``details=True`` one row per option of each backend: ``backend``, ``family``,
        ``kind``, ``library``, ``description``, ``defaults`` (its own draws / tune / chains), ``option``,
        ``default`` and ``meaning``.
    """
    _check_model(model)
    names = registry.backends_for(model)
    if not details:
        return names
    return backend_table([registry.get(model, name) for name in names])


def backend_table(specs: list[registry.Backend], model=None, data=None) -> pd.DataFrame:
    """One row per option of each backend (a backend without options has one row with ``option`` None)."""
    rows = []
    for spec in specs:
        own = spec.defaults if isinstance(spec.defaults, dict) else {}
        common = {"backend": spec.name, "family": spec.family or "generic", "kind": spec.kind,
                  "library": spec.library, "description": spec.description,
                  "defaults": "per problem" if callable(spec.defaults) else
                  ", ".join(f"{k}={v}" for k, v in {**registry.HARNESS_DEFAULTS, **own}.items())}
        if not spec.options:
            rows.append({**common, "option": None, "default": None, "meaning": ""})
        for name, opt in spec.options.items():
            rows.append({**common, "option": name, "default": repr(opt.default), "meaning": opt.meaning})
    return pd.DataFrame(rows, columns=["backend", "family", "kind", "library", "description", "defaults", "option",
                                       "default", "meaning"])


REFERENCE_KINDS = ("'auto', 'catalogue', 'catalogue:<key>', a backend name, a Fit, a Reference or the path of a "
                   "saved fit or reference")


def _seed_to_use(seed) -> int:
    """The seed a run uses: ``seed`` itself (already checked), or for None fresh entropy, drawn once here and
    recorded, so that the run can be repeated (NumPy's, PyMC's and scikit-learn's meaning of None)."""
    return checks.fresh_seed() if seed is None else seed


@dataclass(frozen=True)
class ExecutorLike:
    """A ``concurrent.futures.Executor`` as it is, or a Dask ``distributed.Client`` through its ``get_executor()``."""

    what = ("a concurrent.futures.Executor (e.g. ProcessPoolExecutor) or a Dask distributed.Client, or None to run "
            "here")

    def __call__(self, owner: str, name: str, value) -> Executor | None:
        if value is None or isinstance(value, Executor):
            return value
        if type(value).__module__.split(".")[0] == "distributed" and callable(getattr(value, "get_executor", None)):
            return value.get_executor()
        raise checks.refusal(owner, name, self.what, value)


@dataclass(frozen=True)
class Targets:
    """The ranking's (rough, precise) targets: :func:`~bayeszoo.diagnostics.metrics.checked_targets`, whose
    messages say what would do, under the caller's name."""

    what = "two numbers of exact draws, (rough, precise)"

    def __call__(self, owner: str, name: str, value) -> tuple:
        try:
            return checked_targets(value)
        except ValueError as exc:
            raise ValueError(f"{owner}: {exc}") from None


def _distinct_names(names) -> bool:
    return len(names) > 0 and all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def _options_by_backend(options) -> bool:
    return all(isinstance(k, str) and isinstance(v, dict) for k, v in options.items())


#: what the arguments of :func:`fit`, :func:`compare` and :func:`cross_validate` may be, checked before anything
#: runs (after scikit-learn's ``_parameter_constraints``); the model, the data and the backend's own options are
#: checked against one another after (a backend that applies, options it knows, data the model takes)
COUNTS = {"draws": [checks.POSITIVE_INT, None], "tune": [checks.NON_NEGATIVE_INT, None],
          "chains": [checks.POSITIVE_INT, None]}
FIT_PARAMETERS = {"backend": checks.Text(), **COUNTS, "seed": checks.Seed(), "progress": checks.Flag()}
COMPARE_PARAMETERS = {
    "backends": [None, checks.Where(checks.Instance((list, tuple), "a list"), _distinct_names,
                                    "a non-empty list of distinct backend names")],
    "reference": [checks.Instance((str, os.PathLike, Fit, Reference), REFERENCE_KINDS), None],
    **COUNTS, "seed": checks.Seed(), "progress": checks.Flag(), "executor": ExecutorLike(),
    "out": [None, checks.Instance((str, os.PathLike), "a folder path")],
    "options": [None, checks.Where(checks.Instance((dict,), "a dict"), _options_by_backend,
                                   "a dict mapping backend names to dicts of options")],
    "reference_draws": [checks.POSITIVE_INT, None], "overwrite": checks.Flag(), "targets": Targets()}
CROSS_VALIDATE_PARAMETERS = {"backend": checks.Text(), "folds": checks.Interval(int, 2, None, "left"),
                             "repeats": checks.POSITIVE_INT, "seed": checks.Seed(), "draws": checks.POSITIVE_INT,
                             "tune": checks.NON_NEGATIVE_INT, "chains": checks.POSITIVE_INT,
                             "progress": checks.Flag()}


def fit(model, data: Dataset | None = None, backend: str = "nuts", *, draws: int | None = None, tune: int | None = None,
        chains: int | None = None, seed: int | None = 0, progress: bool = True, **options) -> Fit:
    """Fit ``model`` to ``data`` with one backend and return a :class:`Fit`.

    Inputs are checked (model, data, backend name, counts, options) before any compilation or sampling starts.

    Parameters
    ----------
    model : bayeszoo.models.Model
        The model, e.g. ``bz.models.RVM(width=3.0)``.
    data : bayeszoo.datasets.Dataset, optional
        Training (and test) data; ``bz.datasets.load(name)`` or a ``Dataset`` of one's own arrays. A model of
        one's own (``bz.models.from_pymc`` / ``from_numpyro``) carries its observations: leave it out.
    backend : str, default "nuts"
        A backend that applies to the model (``bz.backends(model)``).
    draws, tune, chains : int, optional
        Draws per chain, warm-up iterations and chains; by default what the backend declares
        (``bz.backends(model, details=True)``).
    seed : int or None, default 0
        An integer in [0, 2**32): the same seed gives the same draws. None draws a fresh seed from the operating
        system's entropy; the seed used is recorded as ``fit.seed_used``, and ``seed=fit.seed_used`` repeats
        the run.
    progress : bool, default True
        Show a progress bar on long work.
    **options
        Options of the backend (e.g. ``max_iter`` for ``em``); an option it does not know is an error.

    Returns
    -------
    Fit
        The posterior as an ArviZ ``InferenceData`` (``fit.idata``), with timing and the backend's information.

    Raises
    ------
    ValueError
        A bad model, dataset, backend name, count or option, or a fit that would need more memory than this
        process may take (``bayeszoo.memory_guard``), before anything runs.
    bayeszoo.registry.BackendError
        (a ValueError) The backend returned something other than the Fit asked for: not a Fit, another backend's
        or another model's or data's, other chains or draws, or non-finite draws; the message names the backend.
    """
    backend, draws, tune, chains, seed, progress = checks.validate("bz.fit", FIT_PARAMETERS, dict(
        backend=backend, draws=draws, tune=tune, chains=chains, seed=seed, progress=progress)).values()
    _check_model(model)
    data = _data_of(model, data)
    model.validate(data)
    spec = registry.get(model, backend)
    opts = spec.resolve(options, model, data)
    given = {"draws": draws, "tune": tune, "chains": chains}
    counts = {k: (v if v is not None else spec.harness_defaults(model, data)[k]) for k, v in given.items()}
    # the backend's matrices and the stored draws against the machine's memory, before anything is allocated
    memory_guard.check_fit(spec, model, data, draws=counts["draws"], chains=counts["chains"], options=opts)
    seed = _seed_to_use(seed)   # after every check: a refused call draws nothing
    provenance = _provenance(model, data, backend)
    ctx = spec.context(seed=seed, progress=progress, settings=_settings(**counts, seed=seed, **options),
                       provenance=provenance)
    result = spec.call(model, data, ctx, **counts, options=opts)
    if isinstance(result, Fit) and "provenance" not in result.info:
        result.info.update(ctx.record)   # a Fit built without build_fit(..., ctx=ctx) lacks the call's record
    # checked here, so that a grid, cross-validation and SBC never hold what is not this call's fit
    return spec.checked_result(result, model, data, draws=counts["draws"], chains=counts["chains"],
                               provenance=provenance)


def _provenance(model, data: Dataset, backend: str) -> dict:
    """What else a fit depends on besides its settings: a resumed grid reuses a saved fit only when all match."""
    return {"model": jsonable(model.spec()), "data": data.fingerprint(), "backend": backend,
            "version": package_version("bayeszoo")}


def _settings(**kwargs) -> dict:
    """What a fit was asked for (minus ``progress``), so a resumed grid can tell a stale fit from a current one."""
    kwargs.pop("progress", None)
    return {k: _setting(v) for k, v in kwargs.items()}


def _setting(value):
    """A JSON value standing for one setting: scalars as they are, arrays (a dictionary of kernels, a whitening
    matrix) by their shape and a digest of their bytes, anything else by its repr."""
    value = jsonable(value)
    if isinstance(value, (int, float, str, bool, type(None))):
        return value
    text = repr(value)
    if len(text) <= 200:
        return text
    try:
        array = np.ascontiguousarray(np.asarray(value, dtype=float))
        return f"array{array.shape} sha1:{hashlib.sha1(array.tobytes()).hexdigest()[:16]}"
    except (TypeError, ValueError):
        return f"{text[:80]}... sha1:{hashlib.sha1(text.encode()).hexdigest()[:16]}"


# --------------------------------------------------------------------------------------------- compare
def _run_one(model, data, backend, kwargs, path):
    """One cell of a grid; runs in the caller's process or on an executor worker. Never raises.
    Returns (fit or None, error or None, note): a fit that could not be saved is still returned, with a note."""
    from bayeszoo import _config  # noqa: F401  (configures JAX / PyTensor on a fresh worker)

    try:
        result = fit(model, data, backend, **kwargs)
    except Exception as exc:  # one failing backend must not sink the grid
        return None, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}", ""
    if path is None:
        return result, None, ""
    try:
        result.save(path)
    except Exception as exc:
        return result, None, f"not saved to {path}: {type(exc).__name__}: {exc}"
    return result, None, ""


def compare(model, data: Dataset | None = None, backends: list[str] | None = None,
            reference: str | Fit | Reference | os.PathLike | None = "auto", *,
            draws: int | None = None, tune: int | None = None, chains: int | None = None, seed: int | None = 0,
            progress: bool = True, executor: Executor | None = None, out: str | os.PathLike | None = None,
            options: dict[str, dict] | None = None, reference_draws: int | None = None, overwrite: bool = True,
            targets: tuple[float, float] = DEFAULT_TARGETS):
    """Run a grid of backends on one model and dataset and return a :class:`Comparison`.

    Every cell's counts and options are resolved and checked before anything runs. A backend that fails gives a
    table row with its error; the others still run.

    Parameters
    ----------
    model : bayeszoo.models.Model
        The model every backend fits.
    data : bayeszoo.datasets.Dataset, optional
        The data every backend fits; left out for a model of one's own, which carries its observations.
    backends : list of str, optional
        The grid; by default every backend that applies to the model.
    reference : str, Fit, Reference, path or None, default "auto"
        What the errors are measured against (a :class:`~bayeszoo.catalogue.Reference`; one that breaks the
        rules of :mod:`bayeszoo.catalogue.reference` is flagged as untrusted):

        * ``"auto"``: the catalogue's reference when (model, data) is one of its problems, else none;
        * ``"catalogue"`` or ``"catalogue:<key>"``: the catalogue's entry (a ValueError if there is none);
        * a backend name: its fit in the grid; a backend not in ``backends``, or any with ``reference_draws``,
          runs on its own for the reference (e.g. a long NUTS run);
        * a Fit, a Reference, or the path of a saved fit or reference; None: no reference.
    draws, tune, chains : int, optional
        The same for every backend; where None, each backend's own default.
    seed : int or None, default 0
        The seed of every cell, an integer in [0, 2**32). None draws one fresh seed for the whole grid, which
        every cell then uses (each fit records it as ``seed_used``); with ``out``, None first looks for the seed
        of the fits of this model and data already saved there, so that a grid stopped half-way resumes with the
        seed it started with.
    progress : bool, default True
        Show progress bars.
    executor : concurrent.futures.Executor or distributed.Client, optional
        Runs the cells, e.g. a ``ProcessPoolExecutor`` or a Dask client (its ``get_executor()`` is used); by
        default the grid runs here, one backend after another.
    out : path, optional
        Folder; each finished fit is saved there at once, and a grid started again with the same ``out`` loads
        those fits instead of recomputing them (resume) when they were made with the same model, data, backend
        and settings. The table and report are written at the end. One process writes a folder at a time: a
        second grid on the same ``out`` waits (a warning says so) until the first has finished, then resumes from
        its fits, so no fit is computed twice and no half-written file is read.
    options : dict of dict, optional
        Per-backend keyword options, e.g. ``{"em": {"max_iter": 500}}``; ``draws``, ``tune`` and ``chains``
        there override the grid's for that backend.
    reference_draws : int, optional
        Draws of a reference backend run on its own.
    overwrite : bool, default True
        With ``out``: whether a saved fit made with another model, data or settings is refitted and replaced (a
        note in the table says so), and a saved comparison in ``out`` replaced. False refuses both with a
        :class:`~bayeszoo.results.ResultExists` (a ValueError) naming the files, before anything runs; fits
        that match are resumed either way.
    targets : (float, float), default (10, 100)
        The ranking's rough and precise targets, in exact posterior draws the estimate is worth: the table's
        ``seconds_to_target`` and ``seconds_to_precise`` are the wall time until a fit's estimate is worth each
        (the default's: a worst mean about 0.3 and 0.1 reference sds off, over one component), and the verdict
        names the fastest to each and the most accurate fit. Two finite numbers, each at least 1, the rough one
        below the precise one; anything else is a ValueError before anything runs.

    Returns
    -------
    Comparison
        The fits, the errors of the cells that failed, and the reference; ``table()`` tabulates them.
    """
    (data, backends, reference, draws, tune, chains, seed, progress, executor, out, options, reference_draws,
     overwrite, targets) = _checked_arguments(**locals())   # every argument, in the signature's order
    ref_backend, ref_summary = resolve_reference(model, data, reference, reference_draws)
    seed = _grid_seed(model, data, backends, options, ref_backend, seed, out)
    jobs, ref_label = _grid_jobs(model, data, backends, options, ref_backend, ref_summary, reference_draws,
                                 {"draws": draws, "tune": tune, "chains": chains}, seed, progress)
    fits_dir = _checked_out(out, overwrite)
    with folder_lock(out) if out is not None else contextlib.nullcontext():   # one grid writes `out` at a time
        fits, errors, notes = _run_grid(model, data, jobs, out, fits_dir, overwrite, executor, progress)
        cmp = _comparison(model, data, jobs, (fits, errors, notes), ref_backend, ref_label, ref_summary, targets)
        return _saved(cmp, out)


def _checked_arguments(model, data, **arguments) -> tuple:
    """``compare``'s arguments checked against :data:`COMPARE_PARAMETERS`, then the model, the data and the
    grid's backends against one another: the data and the other arguments, in the signature's order, as checked."""
    checked = checks.validate("bz.compare", COMPARE_PARAMETERS, arguments)
    _check_model(model)
    data = _data_of(model, data)
    model.validate(data)
    checked["backends"], checked["options"] = _checked_grid(model, checked["backends"], checked["options"])
    return (data, *checked.values())


def _checked_grid(model, backends, options) -> tuple[list[str], dict]:
    """The grid's backend names (every applicable one by default) and per-backend options, their form already
    checked (:data:`COMPARE_PARAMETERS`): a name that does not apply to the model fails here, before anything
    runs."""
    backends = registry.backends_for(model) if backends is None else list(backends)
    for name in backends:
        registry.get(model, name)
    return backends, dict(options or {})


def _grid_seed(model, data, backends, options, ref_backend, seed, out) -> int:
    """The one seed every cell runs with, after the options' backends are checked: a resumed grid's saved seed
    when ``seed`` is None and ``out`` holds one, else ``seed`` or one drawn now."""
    unknown = set(options) - set(backends) - {ref_backend}
    if unknown:
        raise ValueError(f"bz.compare: options are given for backends not in the grid: {sorted(unknown)}; add "
                         f"them to backends or drop their options")
    if seed is None and out is not None:
        seed = _saved_grid_seed(out, model, data)
    return _seed_to_use(seed)


def _grid_jobs(model, data, backends, options, ref_backend, ref_summary, reference_draws, asked, seed, progress):
    """The full keyword arguments of every cell by label (counts resolved, options checked) before anything runs,
    the reference's run among them when it is not a cell already; and the reference's label."""
    def job(name: str) -> dict:
        spec = registry.get(model, name)
        own = dict(options.get(name, {}))
        # a cell may set its own draws / tune / chains, declared as the grid's are
        counts = checks.validate(f"bz.compare: options[{name!r}]", COUNTS,
                                 {k: own.pop(k, v) for k, v in asked.items()})
        spec.resolve(own, model, data)
        defaults = spec.harness_defaults(model, data)
        counts = {k: (v if v is not None else defaults[k]) for k, v in counts.items()}
        return {**counts, "seed": seed, "progress": progress, **own}

    jobs = {name: job(name) for name in backends}
    ref_label = ref_summary.name if ref_summary is not None else None
    if ref_backend is not None:
        if ref_backend in backends and reference_draws is None:
            ref_label = ref_backend
        else:
            ref_label = f"{ref_backend} (reference)"
            jobs[ref_label] = job(ref_backend)
            if reference_draws is not None:
                jobs[ref_label]["draws"] = reference_draws
    return jobs, ref_label


def _checked_out(out, overwrite) -> str | None:
    """The folder the grid's fits are saved in (None without ``out``), checked writable."""
    fits_dir = os.path.join(os.fspath(out), "fits") if out is not None else None
    if fits_dir is not None:
        _check_writable(fits_dir)
    return fits_dir


def _run_grid(model, data, jobs, out, fits_dir, overwrite, executor, progress):
    """Run every cell not resumed from ``fits_dir``, here or on ``executor``: (fits, errors, notes) by label."""
    fits, errors, notes = {}, {}, {}
    if not overwrite and out is not None and os.path.exists(os.path.join(out, COMPARISON_FILE)):
        raise ResultExists(os.fspath(out), f"already holds a saved comparison ({COMPARISON_FILE})")
    pending, stale = {}, []
    for label, kwargs in jobs.items():
        name = label.replace(" (reference)", "")
        path = os.path.join(fits_dir, fit_filename(label)) if fits_dir else None
        if path and os.path.exists(path):
            saved, notes[label] = _resume(path, _settings(**kwargs), _provenance(model, data, name))
            if saved is not None:
                fits[label] = saved
                continue
            if os.path.exists(path):   # stale, not unreadable (an unreadable one has been moved aside)
                stale.append(f"{fit_filename(label)} ({notes[label].removeprefix('refitted: the saved fit ')})")
        pending[label] = (name, kwargs, path)
    if stale and not overwrite:
        raise ResultExists(fits_dir, f"holds fits this grid would replace: {'; '.join(stale)}")

    with progress_bar(total=len(jobs), initial=len(fits), desc="grid", disable=not progress) as bar:
        if executor is None:
            for label, (name, kwargs, path) in pending.items():
                bar.set_postfix_str(label)
                _store(fits, errors, notes, label, *_run_one(model, data, name, kwargs, path))
                bar.update()
        else:
            futures = {executor.submit(_run_one, model, data, name, {**kwargs, "progress": False}, path): label
                       for label, (name, kwargs, path) in pending.items()}
            from concurrent.futures import as_completed

            for future in as_completed(futures):
                label = futures[future]
                try:
                    outcome = future.result()
                except Exception as exc:  # the worker itself died
                    outcome = None, f"{type(exc).__name__}: {exc}", ""
                _store(fits, errors, notes, label, *outcome)
                bar.update()
    return fits, errors, notes


def _comparison(model, data, jobs, outcomes, ref_backend, ref_label, ref_summary, targets) -> Comparison:
    """The Comparison of the grid's ``outcomes`` (fits, errors, notes), in the jobs' order; a reference run in the
    grid is summarised here, once it has run."""
    fits, errors, notes = outcomes
    if ref_backend is not None:
        if ref_label in fits:
            ref_summary = Reference.from_fit(fits[ref_label], list(model.var_dims(data)), name=ref_label)
        else:
            errors.setdefault(ref_label, "reference fit failed")
    order = list(jobs)
    return Comparison(model=model, data=data, fits={k: fits[k] for k in order if k in fits},
                      errors={k: errors[k] for k in order if k in errors}, reference=ref_summary, order=order,
                      notes={k: v for k, v in notes.items() if v}, targets=targets)


def _saved(cmp: Comparison, out) -> Comparison:
    """``cmp``, saved to ``out`` when given; a save that fails warns: the fits are in memory, and the returned
    Comparison holds them rather than losing the whole grid."""
    if out is not None:
        try:
            cmp.save(out)
        except Exception as exc:
            warnings.warn(f"compare: the comparison could not be saved to {os.fspath(out)!r} "
                          f"({type(exc).__name__}: {exc}); the returned Comparison holds every fit", stacklevel=3)
    return cmp


def as_executor(executor, caller: str) -> Executor | None:
    """The executor that runs a grid's cells or a benchmark's tasks (:class:`ExecutorLike`); anything else is a
    ValueError before any work."""
    return ExecutorLike()(caller, "executor", executor)


def resolve_reference(model, data: Dataset, reference, reference_draws) -> tuple[str | None, Reference | None]:
    """(the backend whose fit is the reference, or None; the ready Reference, or None), checked before anything
    runs. A Reference made for another model or other data is refused."""
    if reference_draws is not None:
        checks.check("bz.compare", "reference_draws", COMPARE_PARAMETERS["reference_draws"], reference_draws)
    if isinstance(reference, str) and reference in registry.backends_for(model):
        return reference, None
    if reference_draws is not None:
        raise ValueError(f"reference_draws needs a backend name as the reference, got reference={reference!r}")
    if reference is None:
        return None, None
    names = list(model.var_dims(data))
    if isinstance(reference, Reference):
        summary = reference
    elif isinstance(reference, Fit):
        model.check_fit(reference)
        summary = Reference.from_fit(reference, names, name=f"{reference.backend} (given)")
    elif isinstance(reference, str) and reference == "auto":
        return None, catalogue.lookup(model, data)
    elif isinstance(reference, str) and (reference == "catalogue" or reference.startswith("catalogue:")):
        key = reference.partition(":")[2]
        if not key:
            found = catalogue.find(model, data)
            if found is None:
                raise ValueError("reference='catalogue': this model and dataset are not a catalogue problem "
                                 f"({', '.join(catalogue.keys())}); see bayeszoo.catalogue.problems")
            key = found.key
        summary = catalogue.load(key)
    elif isinstance(reference, (str, os.PathLike)) and os.path.isfile(reference):
        summary = Reference.load(reference, names)   # a saved Reference (bz.catalogue.build_reference) or Fit
    elif isinstance(reference, os.PathLike):
        raise ValueError(f"reference file {os.fspath(reference)!r} does not exist")
    elif isinstance(reference, str):
        raise ValueError(f"reference {reference!r} is not a backend of {type(model).__name__} "
                         f"({', '.join(registry.backends_for(model))}) nor a file; it must be {REFERENCE_KINDS}")
    else:
        raise ValueError(f"reference must be {REFERENCE_KINDS}, got {type(reference).__name__}")
    differ = summary.matches(model, data)
    if differ:
        what = " and ".join(("other " if d.startswith("data") else "another ") + d for d in differ)
        raise ValueError(f"reference {summary.name!r} was made for {what} than this comparison's; build one for "
                         f"this problem, bz.catalogue.build_reference(model, data)")
    return None, summary.for_model(model, data)


def _store(fits, errors, notes, label, result, error, note):
    if error is None:
        fits[label] = result
    else:
        errors[label] = error
    if note:
        notes[label] = f"{notes[label]}; {note}" if notes.get(label) else note


def _check_writable(directory: str) -> None:
    """A ValueError naming ``directory`` unless files can be written there (checked before any work)."""
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise ValueError(f"compare: cannot write fits to {directory!r} ({type(exc).__name__}: {exc})") from None


def _saved_grid_seed(out, model, data) -> int | None:
    """The seed of the fits of ``model`` on ``data`` saved under ``out``/fits (the newest, if they differ), or None:
    a grid run with ``seed=None`` and stopped resumes with the seed its first run drew."""
    fits_dir = os.path.join(os.fspath(out), "fits")
    if not os.path.isdir(fits_dir):
        return None
    model_spec, fingerprint, found = jsonable(model.spec()), data.fingerprint(), []
    for name in os.listdir(fits_dir):
        if not name.endswith(".nc"):
            continue
        try:
            saved = saved_fit_identity(os.path.join(fits_dir, name))
        except ValueError:   # an unreadable file is the resume's business, not the seed's
            continue
        provenance, settings = saved["provenance"] or {}, saved["settings"] or {}
        if provenance.get("model") == model_spec and provenance.get("data") == fingerprint and \
                isinstance(settings.get("seed"), int):
            found.append((str(saved["created_at"] or ""), settings["seed"]))
    return max(found)[1] if found else None


def _resume(path: str, settings: dict, provenance: dict) -> tuple[Fit | None, str]:
    """The fit saved at ``path`` if it was made with these settings and provenance, and a note for the table.
    A file that cannot be read is moved aside (kept) and the cell refitted; a stale one is refitted."""
    try:
        saved = load_fit(path)
    except ValueError as exc:
        aside = _move_aside(path)
        return None, f"refitted: the saved fit could not be read and was moved to {aside} ({exc})"
    changed = [key for key in ("model", "data", "backend", "version")
               if saved.info.get("provenance", {}).get(key) != provenance[key]]
    if saved.info.get("settings") != settings:
        changed.append("settings")
    if not changed:
        return saved, "resumed"
    return None, f"refitted: the saved fit was made with another {', '.join(changed)}"


def _move_aside(path: str) -> str:
    aside, k = f"{path}.unreadable", 1
    while os.path.exists(aside):
        k += 1
        aside = f"{path}.unreadable{k}"
    os.replace(path, aside)
    return aside


# ------------------------------------------------------------------------------------- cross-validation
def cross_validate(model, data: Dataset, backend: str = "em", *, folds: int = 10, repeats: int = 1,
                   seed: int | None = 0,
                   draws: int = 500, tune: int = 500, chains: int = 2, progress: bool = True,
                   **options) -> dict[str, np.ndarray]:
    """K-fold cross-validation on the training set (the test set is ignored).

    Parameters
    ----------
    model : bayeszoo.models.Model
        The model refitted on each fold.
    data : bayeszoo.datasets.Dataset
        Its training set is split into ``folds`` parts, each held out once.
    backend : str, default "em"
        The backend of every fit.
    folds : int, default 10
        Number of folds, at least 2 and at most the number of training points.
    repeats : int, default 1
        Repetitions with a new random split each.
    seed : int or None, default 0
        Seeds the splits and the fits (an integer in [0, 2**32); None draws a fresh one). The fit of fold k of
        repeat r has seed ``seed + 1000 r + k`` (modulo 2**32), recorded in ``seed``.
    draws, tune, chains : int
        Counts of every fit.
    progress : bool, default True
        Show a progress bar over the folds.
    **options
        Options of the backend.

    Returns
    -------
    dict of str to numpy.ndarray
        One array per metric of ``model.score`` (and ``seconds``), one entry per fold and repeat, and ``seed``:
        the seed of each fold's fit (its first entry is the seed of the whole run, which repeats it).
    """
    backend, folds, repeats, seed, draws, tune, chains, progress = checks.validate(
        "bz.cross_validate", CROSS_VALIDATE_PARAMETERS, dict(backend=backend, folds=folds, repeats=repeats, seed=seed,
                                                             draws=draws, tune=tune, chains=chains,
                                                             progress=progress)).values()
    _check_model(model)
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a bayeszoo.datasets.Dataset, got {type(data).__name__}")
    model.validate(data)
    registry.get(model, backend)
    if folds > data.n:
        raise ValueError(f"bz.cross_validate: folds must be at most the {data.n} training points (each fold holds "
                         f"out one at least); got {folds}")
    seed = _seed_to_use(seed)
    rng = np.random.default_rng(seed)
    results: dict[str, list] = {}
    with progress_bar(total=folds * repeats, desc=f"cv {backend}", disable=not progress) as bar:
        for r in range(repeats):
            perm = rng.permutation(data.n)
            for k, test_idx in enumerate(np.array_split(perm, folds)):
                train_idx = np.setdiff1d(perm, test_idx)
                split = data.subset(train_idx, test_idx, name=f"{data.name}[cv{r}.{k}]")
                fold_seed = (seed + 1000 * r + k) % checks.SEED_LIMIT
                result = fit(model, split, backend, draws=draws, tune=tune, chains=chains,
                             seed=fold_seed, progress=False, **options)
                for key, value in model.score(result, split).items():
                    results.setdefault(key, []).append(value)
                results.setdefault("seconds", []).append(result.seconds)
                results.setdefault("seed", []).append(fold_seed)
                del result   # freed before the next fold's fit, whose memory guard counts one fit at a time
                bar.update()
    return {k: np.asarray(v) for k, v in results.items()}
