"""The backend contract as a public check, as scikit-learn's ``check_estimator`` is for estimators.

    import bayeszoo as bz
    bz.testing.check_backend("rwm", model, data)      # an AssertionError listing every failed check

Each check runs the backend through ``bz.fit`` on the problem given (keep it small: the backend runs several
times) and reports what it found. The checks are those every built-in backend passes (docs/architecture.md,
"The backend contract"); the package's own tests run them on every registered backend.
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import NamedTuple

import numpy as np

from bayeszoo import registry
from bayeszoo.api import fit as run_fit
from bayeszoo.results import load_fit


class Check(NamedTuple):
    name: str
    passed: bool
    message: str

    def __str__(self) -> str:
        return f"{'ok  ' if self.passed else 'FAIL'} {self.name}" + ("" if self.passed else f": {self.message}")


class _MustNotRun(Exception):
    pass


def _must_not_run(*args, **kwargs):
    raise _MustNotRun


def check_backend(name: str, model, data=None, *, draws: int = 20, tune: int = 20, chains: int = 2,
                  seed: int = 0, raise_on_failure: bool = True, **options) -> list[Check]:
    """Run the contract's checks of backend ``name`` on (``model``, ``data``); ``options`` go to every fit.

    The checks: the backend runs; the posterior holds exactly the model's canonical variables with their dims,
    (chain, draw) first, with finite draws; every group carries ArviZ's provenance attributes; an MCMC backend
    reports per-draw ``sample_stats``; the same seed gives the same draws; an unknown option and a value of the
    wrong type for each declared option are refused with a ValueError before the backend runs; the fit saves
    and loads back unchanged. Returns the checks; with ``raise_on_failure`` an AssertionError lists every
    failed one. Whatever the backend does (returns something that is not a Fit, raises), it is a failed check in
    that list, never another exception; an unknown backend name is a ValueError."""
    counts = dict(draws=draws, tune=tune, chains=chains)
    spec = registry.get(model, name)
    results: list[Check] = []

    def record(check: str, passed: bool, message: str = "") -> bool:
        results.append(Check(check, bool(passed), message))
        return bool(passed)

    try:   # bz.fit checks what the backend returned (registry.Backend.checked_result)
        first = run_fit(model, data, name, seed=seed, progress=False, **counts, **options)
    except Exception as exc:   # everything else needs a fit
        record("runs", False, f"bz.fit raised {type(exc).__name__}: {exc}")
        return _finish(name, results, raise_on_failure)
    record("runs", True)
    for check, run in (("layout", lambda: _check_layout(first, model, data, counts, record)),
                       ("groups", lambda: _check_groups(first, spec, record)),
                       ("same seed, same draws", lambda: _check_seed(first, model, data, name, seed, counts, options,
                                                                     record)),
                       ("options", lambda: _check_options(model, data, spec, record)),
                       ("save / load", lambda: _check_round_trip(first, model, data, record))):
        try:
            run()
        except Exception as exc:   # a backend that raises the second time, or anything else: one more failure
            record(check, False, f"raised {type(exc).__name__}: {exc}")
    return _finish(name, results, raise_on_failure)


def _finish(name: str, results: list[Check], raise_on_failure: bool) -> list[Check]:
    failed = [c for c in results if not c.passed]
    if failed and raise_on_failure:
        raise AssertionError(f"backend {name!r} fails {len(failed)} of {len(results)} checks:\n" +
                             "\n".join(str(c) for c in failed))
    return results


def _check_layout(fit, model, data, counts, record) -> None:
    var_dims = model.var_dims(data)
    have = set(fit.posterior.data_vars)
    if not record("canonical variables", have == set(var_dims),
                  f"posterior has {sorted(have)}, the model's canonical variables are {sorted(var_dims)}"):
        return
    wrong = {v: fit.posterior[v].dims for v, dims in var_dims.items() if fit.posterior[v].dims != ("chain", "draw", *dims)}
    record("dims", not wrong, "; ".join(f"{v} has dims {d}, expected {('chain', 'draw', *var_dims[v])}"
                                        for v, d in wrong.items()))
    record("counts", (fit.n_chains, fit.n_draws) == (counts["chains"], counts["draws"]),
           f"{fit.n_chains} chains x {fit.n_draws} draws, asked for {counts['chains']} x {counts['draws']}")
    bad = [v for v in var_dims if not np.all(np.isfinite(fit.posterior[v].values))]
    record("finite draws", not bad, f"NaN or inf in {bad}")


def _check_groups(fit, spec, record) -> None:
    missing = [g for g in fit.idata.groups()
               if not {"created_at", "inference_library", "inference_library_version"} <= set(fit.idata[g].attrs)]
    record("provenance", not missing, f"groups without ArviZ's provenance attributes: {missing}")
    if fit.kind == "mcmc":
        stats = fit.idata.sample_stats if "sample_stats" in fit.idata.groups() else None
        record("sample_stats", stats is not None and len(stats.data_vars) > 0,
               "an MCMC backend reports per-draw statistics (at least lp, its log density)")
    record("kind", fit.kind == spec.kind, f"the fit says kind {fit.kind!r}, the backend was registered as "
                                          f"{spec.kind!r}")


def _check_seed(fit, model, data, name, seed, counts, options, record) -> None:
    again = run_fit(model, data, name, seed=seed, progress=False, **counts, **options)
    differ = [v for v in fit.posterior.data_vars
              if not np.array_equal(again.posterior[v].values, fit.posterior[v].values, equal_nan=True)]
    record("same seed, same draws", not differ, f"two runs with seed {seed} differ in {differ}")


def _check_options(model, data, spec, record) -> None:
    table, key = (registry._GENERIC, spec.name) if spec.family is None else (registry._FAMILY, (spec.family, spec.name))
    table[key] = dataclasses.replace(spec, run=_must_not_run)
    try:
        for option, value in [("no_such_option", 1)] + [(opt, object()) for opt in spec.options]:
            check = f"option {option!r} refused" if option != "no_such_option" else "unknown option refused"
            try:
                run_fit(model, data, spec.name, progress=False, **{option: value})
            except ValueError:
                record(check, True)
            except _MustNotRun:
                record(check, False, f"{option}={value!r} reached the backend's run; declare a constraint "
                                     f"(bayeszoo.checks) so it is refused before")
            except Exception as exc:
                record(check, False, f"{option}={value!r} raised {type(exc).__name__} ({exc}), not a ValueError")
            else:
                record(check, False, f"{option}={value!r} was accepted")
    finally:
        table[key] = spec


def _check_round_trip(fit, model, data, record) -> None:
    with tempfile.TemporaryDirectory() as folder:
        try:
            back = load_fit(fit.save(os.path.join(folder, "fit.nc")))
        except Exception as exc:
            record("save / load", False, f"{type(exc).__name__}: {exc}")
            return
    same = (back.backend, back.kind, back.model_spec) == (fit.backend, fit.kind, fit.model_spec) and all(
        np.array_equal(back.posterior[v].values, fit.posterior[v].values, equal_nan=True) for v in fit.posterior.data_vars)
    record("save / load", same, "the loaded fit differs from the saved one")
