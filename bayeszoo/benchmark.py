"""``bz.benchmark``: backends on a suite of reference posteriors, several seeds, resumable, on any executor.

Each (target, backend, seed) is one task: fit the target's model with the backend (:func:`bayeszoo.fit`), measure
it against the target's reference and write one JSON file, ``<out>/tasks/<suite>/<name>/<backend>/seed<k>.json``.
A task whose file exists is not run again, so a run interrupted anywhere (Ctrl-C, a killed Dask worker) resumes
where it stopped. The tasks go to a ``concurrent.futures.Executor`` (a Dask ``Client`` included) or run here.

What a task measures (the columns of :meth:`Leaderboard.table`):

* the cost of reaching the target accuracy, an estimate worth ``target`` exact draws
  (:mod:`bayeszoo.diagnostics.metrics`): gradient evaluations, the hardware-independent cost the field reports
  (warm-up included; for an MCMC fit read off its running estimates, the draws it took at the sampling stage's
  average cost per draw), and seconds; infinite when the fit never gets there, and for an MCMC fit whose own
  diagnostics fail (an unmixed chain's dip below the target is luck);
* the accuracy at the end: ``worth_draws`` (the bias-aware ESS), the worst mean and sd errors in reference sds;
* the sampler's own diagnostics (R-hat, bulk ESS, divergences, converged);
* a failure with its message, or why the backend does not apply to the target (skipped, not failed).

Per backend (:meth:`Leaderboard.summary`): problems solved, the geometric mean of its cost relative to the best
backend on each problem it solved, and the performance profile (Dolan and More): the share of all problems it
solves within a factor tau of the best.
"""
from __future__ import annotations

import json
import math
import os
import traceback
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from bayeszoo import api, checks, registry
from bayeszoo.catalogue import costs, suites
from bayeszoo.comparison import fit_filename, folder_lock
from bayeszoo.diagnostics import metrics
from bayeszoo.progress import progress_bar
from bayeszoo.results import jsonable, without_log_likelihood, write_atomically
from bayeszoo.workers import process_pool

BENCHMARK_FILE = "benchmark.json"
TARGET_DRAWS = metrics.DEFAULT_TARGETS[1]   # the comparison's precise target: worth 100 exact draws
COSTS = ("gradients", "seconds")
#: the columns of a measured task (:func:`_measure`); a failed or skipped task has none of them, so a table of such
#: tasks only gets them here
MEASURED = ("kind", "seconds", "n_grad", "seconds_to_target", "gradients_to_target", "worth_draws", "mean_err",
            "sd_err", "rhat_max", "ess_bulk_min", "divergences", "converged", "problems")
#: what makes two runs the same benchmark: a folder holding tasks made with other values is refused
_SETTING_KEYS = ("draws", "tune", "chains", "target", "options")


@dataclass
class Leaderboard:
    """The rows of a benchmark's tasks and what they add up to. ``table()`` has a row per (target, backend,
    seed); ``summary()`` a row per backend; ``profile()`` the performance profile; ``verdict()`` says it in words;
    ``report(path)`` writes the self-contained HTML page."""

    rows: pd.DataFrame
    backends: list[str]
    targets: list[str]
    settings: dict = field(default_factory=dict)
    cost: str = "gradients"

    # ------------------------------------------------------------------------------------------ tables
    def table(self) -> pd.DataFrame:
        """One row per task: target, backend, seed, status (``ok``, ``failed``, ``skipped``), the cost to the
        target in gradient evaluations and seconds, the accuracy at the end, the sampler's diagnostics, and the
        message of a failure or a skip."""
        return self.rows.copy()

    def costs(self) -> pd.DataFrame:
        """Target x backend: the median over seeds of the cost (``self.cost``) to the target accuracy; inf where
        the backend never reached it, NaN where it did not run (skipped, or failed on every seed)."""
        column = f"{self.cost}_to_target"
        ran = self.rows[self.rows["status"] != "skipped"]
        out = pd.DataFrame(np.nan, index=self.targets, columns=self.backends)
        for (target, backend), group in ran.groupby(["target", "backend"]):
            values = np.where(group["status"] == "ok", group[column].astype(float), np.inf)
            out.loc[target, backend] = float(np.median(values))
        return out

    def ratios(self) -> pd.DataFrame:
        """:meth:`costs` divided by the best backend's on each target (1 for the best; inf where unsolved)."""
        costs = self.costs()
        best = costs.where(np.isfinite(costs)).min(axis=1)
        # a target nobody solved has no best: who ran there is still inf, who did not run NaN
        return costs.div(best, axis=0).mask(np.isinf(costs), np.inf)

    def summary(self) -> pd.DataFrame:
        """One row per backend: targets solved (of those it ran on), the geometric mean of its relative cost over
        the targets it solved, the median accuracy at the end (worth-N-draws), tasks failed and skipped; sorted
        by targets solved, then relative cost."""
        ratios = self.ratios()
        rows = []
        for backend in self.backends:
            mine = self.rows[self.rows["backend"] == backend]
            r = ratios[backend]
            solved = r[np.isfinite(r)]
            rows.append({"backend": backend, "solved": int(solved.size), "ran_on": int(r.notna().sum()),
                         "relative_cost": float(np.exp(np.mean(np.log(solved)))) if solved.size else math.inf,
                         "worth_draws_median": float(mine["worth_draws"].median()) if len(mine) else math.nan,
                         "failed": int((mine["status"] == "failed").sum()),
                         "skipped": int((mine["status"] == "skipped").sum())})
        df = pd.DataFrame(rows)
        return df.sort_values(["solved", "relative_cost"], ascending=[False, True], kind="stable",
                              ignore_index=True)

    def profile(self, taus: Sequence[float] | None = None) -> pd.DataFrame:
        """The performance profile: for each tau (rows) and backend (columns), the share of all targets the
        backend solved within tau times the best backend's cost. By default tau runs from 1 to the largest finite
        ratio on a log grid."""
        ratios = self.ratios()
        finite = ratios.to_numpy()[np.isfinite(ratios.to_numpy())]
        if taus is None:
            top = max(float(finite.max()) if finite.size else 1.0, 1.0)
            taus = np.unique(np.concatenate([[1.0], np.geomspace(1.0, top * 1.05, 60)]))
        taus = np.asarray(taus, dtype=float)
        n = max(len(self.targets), 1)
        data = {b: [(ratios[b] <= tau).sum() / n for tau in taus] for b in self.backends}
        return pd.DataFrame(data, index=pd.Index(taus, name="tau"))

    def failures(self) -> pd.DataFrame:
        """The failed and skipped tasks with their messages."""
        cols = ["target", "backend", "seed", "status", "message"]
        return self.rows.loc[self.rows["status"] != "ok", cols].reset_index(drop=True)

    # ---------------------------------------------------------------------------------------- in words
    def verdict(self) -> str:
        """Two or three sentences: who solves most targets at the lowest cost, who solves fewest, what failed."""
        summary = self.summary()
        n = len(self.targets)
        unit = "gradient evaluations" if self.cost == "gradients" else "seconds"
        seeds = self.settings.get("seeds", [])
        said = [f"On {n} target{'s' * (n != 1)} with {len(seeds)} seed{'s' * (len(seeds) != 1)} each, cost "
                f"counted in {unit} to an estimate worth {self.settings.get('target', TARGET_DRAWS):g} exact draws:"]
        if summary.empty or summary["solved"].max() == 0:
            said.append("no backend reached the target accuracy on any target.")
            closest = summary.dropna(subset=["worth_draws_median"]).sort_values("worth_draws_median")
            if len(closest):
                best = closest.iloc[-1]
                said.append(f"The closest, {best['backend']}, ends worth {best['worth_draws_median']:.3g} exact draws "
                            f"(median over its tasks).")
        else:
            best = summary.iloc[0]
            said.append(f"{best['backend']} solves the most ({best['solved']} of {n}) at "
                        f"{best['relative_cost']:.2g}x the best backend's cost on each (geometric mean).")
            for _, row in summary.iloc[1:].iterrows():
                if row["solved"] == 0:
                    said.append(f"{row['backend']} reaches the target on none.")
                else:
                    said.append(f"{row['backend']} solves {row['solved']} at {row['relative_cost']:.2g}x.")
        failed = self.rows[self.rows["status"] == "failed"]
        if len(failed):
            who = ", ".join(f"{b} ({k})" for b, k in failed.groupby("backend").size().items())
            said.append(f"Failed tasks: {who}; their messages are listed in the report.")
        nowhere = summary[(summary["ran_on"] == 0) & (summary["skipped"] > 0) & (summary["failed"] == 0)]
        for backend in nowhere["backend"]:
            said.append(f"{backend} does not apply to any of the targets (skipped: failures() says why).")
        return " ".join(said)

    # ----------------------------------------------------------------------------------------- pictures
    def plot(self, kind: str = "profile"):
        """``"profile"`` (the performance profile) or ``"heatmap"`` (target x backend relative cost) as a
        :class:`matplotlib.figure.Figure`."""
        from bayeszoo.diagnostics import leaderboard_plots

        kinds = {"profile": leaderboard_plots.profile_figure, "heatmap": leaderboard_plots.heatmap_figure}
        if kind not in kinds:
            raise ValueError(f"Leaderboard.plot: kind must be one of {', '.join(map(repr, kinds))}; got {kind!r}")
        fig = kinds[kind](self)
        if fig is None:
            raise ValueError(f"Leaderboard.plot: no backend reached the target accuracy on any target, so the "
                             f"{kind} has nothing to draw; see summary() for how close each came")
        return fig

    def report(self, path: str | os.PathLike) -> str:
        """Write the self-contained HTML leaderboard (verdict first, the profile, the cost heatmap, the summary
        and task tables, the failures with their messages) to ``path`` and return it."""
        from bayeszoo.diagnostics.leaderboard_plots import leaderboard_html

        path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return write_atomically(path, leaderboard_html(self))

    def _repr_html_(self) -> str:
        from bayeszoo.diagnostics.leaderboard_plots import leaderboard_html

        return leaderboard_html(self, fragment=True)


# --------------------------------------------------------------------------------------------- tasks
def _targets_of(suite) -> list[suites.Target]:
    if isinstance(suite, str):
        return list(suites.suite(suite))
    if isinstance(suite, suites.Target):
        return [suite]
    if isinstance(suite, (list, tuple)) and suite:
        return [item if isinstance(item, suites.Target) else suites.target(item) for item in suite]
    raise ValueError(f"benchmark: suite must be a suite's name ({', '.join(suites.names())}) or a non-empty list of "
                     f"targets ('<suite>/<name>'); got {suite!r}")


def _seeds_of(seeds) -> list[int]:
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        checks.number("benchmark", "seeds", seeds, low=1, low_inclusive=True, integer=True)
        return list(range(int(seeds)))
    if isinstance(seeds, (list, tuple)) and seeds:
        return [checks.seed("benchmark", "seeds", s) for s in seeds]
    raise ValueError(f"benchmark: seeds must be a number of seeds (>= 1) or a non-empty list of seeds; got {seeds!r}")


def _check_backends(backends) -> list[str]:
    if isinstance(backends, str):
        backends = [backends]
    if not isinstance(backends, (list, tuple)) or not backends:
        raise ValueError(f"benchmark: backends must be a non-empty list of backend names; got {backends!r}")
    known = {b.name for b in registry.all_backends()}
    unknown = [b for b in backends if b not in known]
    if unknown:
        named = [repr(name) + (f" ({hint.strip()})" if (hint := checks.did_you_mean(name, known)) else "")
                 for name in unknown]
        raise ValueError(f"benchmark: unknown backend{'s' * (len(unknown) > 1)} {', '.join(named)}; "
                         f"known: {', '.join(sorted(known))} (register your own with bz.register_sampler)")
    if len(set(backends)) != len(backends):
        raise ValueError(f"benchmark: backends listed twice in {list(backends)}")
    return list(backends)


def _user_backends(names: list[str]) -> list[registry.Backend]:
    """The backends registered in this process (not bayeszoo's own): a worker process registers them too."""
    return [b for b in registry.all_backends() if b.name in names and b.library == "user"]


#: where a benchmark's tasks run when not here (a process pool, ``jobs > 1``, or an executor): the words of a
#: refusal and its last remedy
_WORKERS = {"pool": ("the worker processes", "or run with jobs=1"),
            "executor": ("the executor's workers", "or run here, without executor")}


def _ship(backends: list[registry.Backend], via: str) -> tuple[tuple[str, bytes], ...]:
    """Each backend registered here as (name, bytes) for the workers, pickled as Dask pickles a task: by value
    what a worker could not import (a function of a notebook or a script's ``__main__``, a closure such as
    ``register_sampler``'s, a module the command line loaded from FILE.py), by name what it can. A worker unpickles
    them inside the task (:func:`_adopt`), where a failure is an answer rather than a broken pool. What does not
    pickle at all (it holds an open file, a lock) is refused here."""
    import cloudpickle

    where, remedy = _WORKERS[via]
    shipped = []
    for spec in backends:
        try:
            shipped.append((spec.name, cloudpickle.dumps(spec)))
        except Exception as exc:   # pickle's own TypeError, PicklingError, AttributeError, or an object's
            raise ValueError(f"benchmark: the backend {spec.name} cannot be sent to {where} "
                             f"({type(exc).__name__}: {exc}): make what it holds at its definition picklable (open "
                             f"a file or a connection inside the function), {remedy}") from None
    return tuple(shipped)


#: in a worker: backend name -> (the bytes it last came in, the backend registered from them)
_ADOPTED: dict[str, tuple[bytes, registry.Backend]] = {}


def _adopt(shipped: Sequence[tuple[str, bytes]]) -> dict[str, str]:
    """In a worker: register the backends of :func:`_ship`; returns backend -> why it could not be loaded here (a
    module the worker cannot import). A backend of the name registered here stays (the session's own, when the
    tasks run in its process), unless it came from an earlier benchmark in other bytes: a worker outlives a
    benchmark (Dask's), and the session may have defined the backend again since (a notebook cell run again, a
    sampler file edited). The same bytes again keep the backend registered, and with it its compiled kernels."""
    import pickle

    problems = {}
    for name, blob in shipped:
        try:
            backend = pickle.loads(blob)
        except Exception as exc:
            problems[name] = f"{type(exc).__name__}: {exc}"
            continue
        before = _ADOPTED.get(name)
        replacing = before[1] if before is not None and before[0] != blob else None
        if registry.adopt(backend, replacing) is backend:
            _ADOPTED[name] = (blob, backend)
    return problems


def _check_workers_load(submit, shipped: tuple, via: str, probes: int) -> None:
    """Before any task: ``probes`` calls of :func:`_adopt` through ``submit`` (a process pool starts a worker for
    each call while none is idle, so that each worker loads them; every task loads them again); a backend a worker
    cannot load is refused, naming it and the remedy."""
    if not shipped:
        return
    problems = {}
    for future in [submit(_adopt, shipped) for _ in range(probes)]:
        problems.update(future.result())
    if problems:
        where, remedy = _WORKERS[via]
        name, why = next(iter(problems.items()))
        raise ValueError(f"benchmark: the backend {name} cannot be loaded in {where} ({why}): make the module it "
                         f"needs importable there (installed, or its folder on PYTHONPATH), send it by value "
                         f"(cloudpickle.register_pickle_by_value(module)), {remedy}")


def task_path(out: str, target_key: str, backend: str, seed: int) -> str:
    suite, _, name = target_key.partition("/")
    return os.path.join(out, "tasks", suite, fit_filename(name)[:-3], fit_filename(backend)[:-3], f"seed{seed}.json")


def _library_for(target: suites.Target, backend: str) -> tuple[str | None, str]:
    """The library whose model ``backend`` samples (NumPyro's where it applies, the backend's own engine), or
    (None, why not)."""
    for library in ("numpyro", "pymc", suites.FAMILY):
        if library in target.libraries and backend in registry.backends_for(target.model(library)):
            return library, ""
    if suites.FAMILY in target.libraries:
        return None, f"{backend} does not apply to {target.key}: it is not a backend of the {target.kind} family"
    return None, f"{backend} does not apply to {target.key} (written in {' and '.join(target.libraries)})"


def run_task(target: suites.Target, backend: str, seed: int, settings: dict, path: str | None,
             user_backends: Sequence[tuple[str, bytes]] = ()) -> dict:
    """One task, in this process or on a worker: fit, measure, write ``path``; a task that ``path`` holds done
    already is read back, not run. Never raises. ``user_backends``: the backends registered where the benchmark
    was called, pickled for a worker (:func:`_ship`).

    The read-back is for a cluster: Dask keeps a task's result on the worker that ran it until the client fetches
    it, and runs the task again if that worker dies first, although its file is written."""
    from bayeszoo import _config  # noqa: F401  (configures JAX / PyTensor on a fresh worker)

    done = None if path is None else _saved_row(path, settings)
    if done is not None:
        return done
    unloaded = _adopt(user_backends)
    row = {"target": target.key, "backend": backend, "seed": int(seed), "status": "ok", "message": "",
           "library": None}
    try:
        library, why = _library_for(target, backend)
        if backend in unloaded:   # a Dask worker that joined after the check, without the backend's module
            row.update(status="failed", message=f"the backend could not be loaded here: {unloaded[backend]}")
        elif library is None:
            row.update(status="skipped", message=why)
        else:
            row["library"] = library
            row.update(_measure(target, library, backend, seed, settings))
    except Exception as exc:   # one failing backend must not sink the benchmark
        row.update(status="failed", message=f"{type(exc).__name__}: {exc}",
                   traceback=traceback.format_exc(limit=6))
    if path is not None:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_atomically(path, json.dumps(jsonable({"settings": settings, "row": row}), indent=1))
        except OSError as exc:
            row["message"] = (row["message"] + f"; not saved to {path}: {exc}").lstrip("; ")
    return row


def _measure(target: suites.Target, library: str, backend: str, seed: int, settings: dict) -> dict:
    model = target.model(library)
    data = target.data()
    counts = {k: settings[k] for k in ("draws", "tune", "chains") if settings.get(k) is not None}
    options = dict((settings.get("options") or {}).get(backend, {}))
    with without_log_likelihood():   # a task scores the draws against the reference; nothing reads its LOO
        fit = api.fit(model, data, backend, seed=seed, progress=False, **counts, **options)
    data = data if data is not None else model.dataset()
    reference = target.reference()
    names = list(model.compare_vars) or list(model.var_dims(data))
    diag = metrics.sampling_diagnostics(fit, names)
    acc = metrics.accuracy(fit, reference, names, diag["ess_bulk_min"], (settings["target"],) * 2)
    seconds = acc["seconds_to_target"]
    grads = gradients_to_target(fit, seconds)
    if fit.kind == "mcmc" and diag["converged"] is False:
        seconds, grads = math.inf, math.inf
    return {"kind": fit.kind, "seconds": float(fit.seconds), "n_grad": _number(fit.info.get("n_grad")),
            "seconds_to_target": seconds, "gradients_to_target": grads, "worth_draws": acc["ess_ref"],
            "mean_err": acc["mean_err"], "sd_err": acc["sd_err"], "rhat_max": diag.get("rhat_max"),
            "ess_bulk_min": diag.get("ess_bulk_min"), "divergences": diag.get("divergences"),
            "converged": diag.get("converged"),
            "problems": "; ".join(metrics.convergence_problems(fit, diag))}


def _number(value) -> float:
    return math.nan if value is None else float(value)


def gradients_to_target(fit, seconds_to_target: float) -> float:
    """The gradient evaluations a fit had used after ``seconds_to_target`` (``metrics.seconds_to_targets``): all of
    an approximation's; for an MCMC fit the warm-up's and the sampling stage's in proportion to its time, which
    is how the running estimates are timed (:func:`bayeszoo.diagnostics.metrics.running_bias2`). inf if never,
    NaN for a backend that does not count them."""
    n_grad = _number(fit.info.get("n_grad"))
    if math.isnan(seconds_to_target) or math.isinf(seconds_to_target):
        return seconds_to_target
    if fit.kind != "mcmc" or fit.n_draws < 2:
        return n_grad
    timing = fit.timing
    tune_grads = _number(fit.info.get("n_grad_tune"))
    tune_grads = 0.0 if math.isnan(tune_grads) else tune_grads
    share = (seconds_to_target - timing["compile"] - timing["tune"]) / timing["sample"] if timing["sample"] > 0 else 1.0
    return float(tune_grads + (n_grad - tune_grads) * min(max(share, 0.0), 1.0))


# --------------------------------------------------------------------------------------------- the run
def _settings_of(draws, tune, chains, target, options, seeds) -> dict:
    for what, value, low in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1)):
        if value is not None:
            checks.number("benchmark", what, value, low=low, low_inclusive=True, integer=True)
    checks.number("benchmark", "target", target, low=1, low_inclusive=True)
    if options is not None and not (isinstance(options, dict) and all(isinstance(v, dict) for v in options.values())):
        raise ValueError("benchmark: options must map a backend's name to a dict of its options, e.g. "
                         "{'numpyro': {'target_accept': 0.9}}")
    return {"draws": draws, "tune": tune, "chains": chains, "target": float(target), "options": options or {},
            "seeds": seeds}


def _check_folder(out: str, settings: dict) -> None:
    """A folder written by another benchmark (other counts, target or options) is refused: its tasks would be
    mixed with this one's."""
    path = os.path.join(out, BENCHMARK_FILE)
    if os.path.exists(os.path.join(out, "comparison.json")):
        raise ValueError(f"benchmark: {out} holds a comparison (bz.compare), not a benchmark; give another folder")
    if not os.path.exists(path):
        return
    with open(path) as fh:
        saved = json.load(fh).get("settings", {})
    mine = jsonable({k: settings[k] for k in _SETTING_KEYS})
    differ = [k for k in _SETTING_KEYS if saved.get(k) != mine[k]]
    if differ:
        said = "; ".join(f"{k}: {saved.get(k)!r} there, {mine[k]!r} here" for k in differ)
        raise ValueError(f"benchmark: {out} holds another benchmark ({said}); give another folder, or the same "
                         f"settings to resume it")


def _saved_row(path: str, settings: dict) -> dict | None:
    try:
        with open(path) as fh:
            saved = json.load(fh)
    except (OSError, ValueError):
        return None   # missing or half-written (never: files are renamed into place): run the task
    mine = jsonable({k: settings[k] for k in _SETTING_KEYS})
    if any(saved.get("settings", {}).get(k) != mine[k] for k in _SETTING_KEYS):
        return None
    return saved["row"]


def benchmark(suite="posteriordb-quick", backends: Sequence[str] = ("nuts",), *, seeds=1, draws: int | None = None,
              tune: int | None = None, chains: int | None = None, target: float = TARGET_DRAWS,
              options: dict | None = None, out: str | os.PathLike | None = None, executor=None,
              jobs: int = 1, cost: str | None = None, progress: bool = True) -> Leaderboard:
    """Run ``backends`` on every target of ``suite`` with ``seeds`` seeds and rank them.

    Parameters
    ----------
    suite : str or list
        A suite's name (``bz.catalogue.suites.names()``: ``"posteriordb"``, ``"posteriordb-quick"``, ``"exact"``,
        ``"thesis"``) or a list of targets named ``"<suite>/<name>"``.
    backends : list of str
        Built-in backends or ones registered with ``bz.register_sampler`` / ``bz.register_backend``. A backend
        that does not apply to a target is skipped there, with the reason in the table.
    seeds : int or list of int, default 1
        The number of seeds (0, 1, ...) or the seeds themselves; each (target, backend, seed) is one task.
    draws, tune, chains : int, optional
        The same for every backend; by default each backend's own.
    target : float, default 100
        The accuracy every cost is measured to: an estimate worth this many exact draws.
    options : dict, optional
        Backend name -> its options, e.g. ``{"numpyro": {"target_accept": 0.9}}``.
    out : path, optional
        The folder of the task files (resumable) and, at the end, ``leaderboard.csv``, ``tasks.csv`` and
        ``report.html``. A folder of another benchmark (other counts, target or options) is refused.
    executor : concurrent.futures.Executor or distributed.Client, optional
        Runs the tasks (a Dask client's ``get_executor()`` is used); by default they run here, one after another.
    jobs : int, default 1
        Tasks at a time, each in one of ``jobs`` worker processes on this machine (a process pool; not with
        ``executor``). The seeds of one target and backend run in the same worker, one after another, so each
        model is compiled once per backend, and each worker's libraries get ``cores // jobs`` threads (one on
        two cores with ``jobs=2``), so that the workers do not fight for the cores; the tasks expected to take
        longest go first (:func:`largest_first`), as on an executor. The results are those of one process, up to
        the timings. The backends registered in this session go to the workers (by value where they could not
        import them: a notebook's, a script's, a sampler file's), as to an executor's; one that a
        worker cannot load is refused before any task.
    cost : {"gradients", "seconds"}, optional
        What the ranking counts; by default gradient evaluations when every backend that reached a target
        counts them, else seconds.
    progress : bool, default True
        A progress bar over the tasks.

    Returns
    -------
    Leaderboard
    """
    targets = _targets_of(suite)
    names = _check_backends(backends)
    seeds = _seeds_of(seeds)
    settings = _settings_of(draws, tune, chains, target, options, seeds)
    _check_options_and_cost(settings, names, cost)
    executor = api.as_executor(executor, "benchmark")
    checks.number("benchmark", "jobs", jobs, low=1, low_inclusive=True, integer=True)
    if jobs > 1 and executor is not None:
        raise ValueError(f"benchmark: give jobs (worker processes on this machine) or an executor, not both; got "
                         f"jobs={jobs} and {type(executor).__name__}: drop jobs to run on the executor")
    # the workers of a pool or an executor get the backends registered here; this process has them
    shipped = () if jobs == 1 and executor is None else _ship(_user_backends(names), "pool" if jobs > 1 else "executor")
    out = None if out is None else os.fspath(out)
    keys = [t.key for t in targets]
    if len(set(keys)) != len(keys):
        raise ValueError(f"benchmark: targets listed twice in {keys}")
    tasks = [(key, backend, seed) for key in keys for backend in names for seed in seeds]
    rows = {} if out is None else _open_folder(out, settings, keys, names, tasks)
    todo = [t for t in tasks if t not in rows]
    bar = _bar(len(tasks), len(rows), progress)
    try:
        if jobs > 1 and todo:
            _run_in_workers(todo, {t.key: t for t in targets}, settings, out, shipped, jobs, bar, rows)
        else:
            _run_tasks(todo, {t.key: t for t in targets}, settings, out, shipped, executor, bar, rows)
    finally:
        bar.close()
    table = _table([rows[t] for t in tasks if t in rows])
    board = Leaderboard(table, names, keys, settings, cost or _default_cost(table))
    if out is not None:
        write_atomically(os.path.join(out, "tasks.csv"), board.table().to_csv(index=False))
        write_atomically(os.path.join(out, "leaderboard.csv"), board.summary().to_csv(index=False))
        board.report(os.path.join(out, "report.html"))
    return board


def _check_options_and_cost(settings: dict, names: list[str], cost) -> None:
    """Refuse options given for a backend not in the run, and a ranking cost that is not one of :data:`COSTS`."""
    unknown_opts = sorted(set(settings["options"]) - set(names))
    if unknown_opts:
        raise ValueError(f"benchmark: options given for {', '.join(map(repr, unknown_opts))}, which "
                         f"{'is' if len(unknown_opts) == 1 else 'are'} not among the backends {names}")
    if cost is not None and cost not in COSTS:
        raise ValueError(f"benchmark: cost must be one of {', '.join(map(repr, COSTS))}; got {cost!r}")


def _open_folder(out: str, settings: dict, keys: list[str], names: list[str], tasks: list[tuple]) -> dict[tuple, dict]:
    """Claim ``out`` for this benchmark (refusing one of another), record what it runs, and return the rows of the
    tasks already finished there."""
    os.makedirs(out, exist_ok=True)
    with folder_lock(out):
        _check_folder(out, settings)
        write_atomically(os.path.join(out, BENCHMARK_FILE),
                         json.dumps(jsonable({"settings": settings, "targets": keys, "backends": names}), indent=1))
    rows = {}
    for task in tasks:
        saved = _saved_row(task_path(out, *task), settings)
        if saved is not None:
            rows[task] = saved
    return rows


def _run_tasks(todo: list[tuple], by_key: dict, settings: dict, out: str | None, shipped: tuple, executor, bar,
               rows: dict[tuple, dict]) -> None:
    """Run the tasks of ``todo`` here or on ``executor``, each row into ``rows`` as it finishes (so an
    interruption keeps those)."""
    def arguments(task):
        return _task_arguments(task, by_key, settings, out, shipped)

    if executor is None:
        for task in todo:
            bar.set_postfix_str(f"{task[0]} {task[1]} seed {task[2]}", refresh=True)
            rows[task] = run_task(*arguments(task))
            bar.update(1)
    else:
        if todo:
            _check_workers_load(executor.submit, shipped, "executor", probes=1)
        futures = {executor.submit(run_task, *arguments(task)): task for task in largest_first(todo)}
        for future in as_completed(futures):
            rows[futures[future]] = future.result()
            bar.update(1)


def _task_arguments(task, by_key: dict, settings: dict, out: str | None, shipped: tuple) -> tuple:
    return by_key[task[0]], *task[1:], settings, None if out is None else task_path(out, *task), shipped


def run_tasks(arguments: Sequence[tuple]) -> list[dict]:
    """:func:`run_task` on each of ``arguments`` in turn, in one (worker) process: the seeds of one target and
    backend, whose compiled model the process keeps between them."""
    return [run_task(*args) for args in arguments]


def _run_in_workers(todo: list[tuple], by_key: dict, settings: dict, out: str | None, shipped: tuple, jobs: int, bar,
                    rows: dict[tuple, dict]) -> None:
    """Run ``todo`` in a pool of ``jobs`` worker processes (:func:`~bayeszoo.workers.process_pool`), each (target,
    backend)'s seeds in one worker, the longest expected first; each row into ``rows`` as its group finishes (each
    task's file is written as it finishes). A worker that dies fails its tasks, which are not saved, so a rerun
    runs them."""
    groups: dict[tuple, list[tuple]] = {}
    for task in todo:
        groups.setdefault(task[:2], []).append(task)
    with process_pool(jobs) as pool:
        _check_workers_load(pool.submit, shipped, "pool", probes=jobs)
        futures = {pool.submit(run_tasks, [_task_arguments(t, by_key, settings, out, shipped) for t in group]): group
                   for group in largest_first(list(groups.values()))}
        for future in as_completed(futures):
            group = futures[future]
            try:
                done = future.result()
            except Exception as exc:   # the worker died (killed, out of memory) or could not load the task
                done = [{"target": t[0], "backend": t[1], "seed": int(t[2]), "status": "failed", "library": None,
                         "message": f"the worker process could not run it: {type(exc).__name__}: {exc}"}
                        for t in group]
            for task, row in zip(group, done):
                rows[task] = row
            bar.update(len(group))


def largest_first(work: list) -> list:
    """``work`` (tasks, or groups of one target and backend's tasks) with the longest expected first
    (:func:`~bayeszoo.catalogue.costs.expected_seconds`): the longest-processing-time rule, so that the short ones
    fill in around the long ones instead of a long one starting last and running alone. Ties keep their order."""
    def seconds(item) -> float:
        tasks = item if isinstance(item, list) else [item]
        return sum(costs.expected_seconds(key, backend) for key, backend, _ in tasks)

    return sorted(work, key=seconds, reverse=True)


def _table(rows: list[dict]) -> pd.DataFrame:
    """The tasks' rows as a table with every measured column, NaN where a task was not measured."""
    table = pd.DataFrame(rows)
    for column in MEASURED:
        if column not in table:
            table[column] = math.nan
    return table


def _default_cost(table: pd.DataFrame) -> str:
    solved = table[(table["status"] == "ok") & np.isfinite(table["seconds_to_target"].astype(float))]
    return "gradients" if len(solved) and solved["gradients_to_target"].notna().all() else "seconds"


def _bar(total: int, done: int, progress: bool):
    return progress_bar(total=total, initial=done, desc="benchmark", unit="task", disable=not progress)


def load_leaderboard(out: str | os.PathLike, cost: str | None = None) -> Leaderboard:
    """The leaderboard of the benchmark saved in ``out`` (the tasks finished so far)."""
    out = os.fspath(out)
    path = os.path.join(out, BENCHMARK_FILE)
    if not os.path.exists(path):
        raise ValueError(f"load_leaderboard: {out} holds no benchmark ({BENCHMARK_FILE} missing)")
    with open(path) as fh:
        meta = json.load(fh)
    settings = meta["settings"]
    rows = []
    for key in meta["targets"]:
        for backend in meta["backends"]:
            for seed in settings["seeds"]:
                row = _saved_row(task_path(out, key, backend, seed), settings)
                if row is not None:
                    rows.append(row)
    table = _table(rows)
    return Leaderboard(table, meta["backends"], meta["targets"], settings, cost or _default_cost(table))


__all__ = ["Leaderboard", "benchmark", "gradients_to_target", "load_leaderboard", "run_task", "TARGET_DRAWS"]
