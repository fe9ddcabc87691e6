"""The backend contract (docs/architecture.md), checked on every registered backend with a tiny problem per family.

Every backend: canonical variables and dims, ArviZ provenance attributes on every group, the standard info and
timing keys, same seed -> same draws, an unknown option -> ValueError, bad data -> ValueError before the backend
runs, save -> load round trip. Generic backends (PyMC, NumPyro, nutpie) run on the RVM problem; the slow set
runs them on every family's problem too.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo import registry
from bayeszoo.results import INFO_KEYS

# the counts to run every backend with, on its family's tiny problem (``Family.tiny``, declared in the family's
# model module and discovered: a new family is checked here with no edit)
_TINY = dict(draws=15, tune=15, chains=2)


def problems() -> dict:
    """family key -> ``tiny() -> (model, data)``, from the families' declarations."""
    return {key: family.tiny for key, family in bz.models.families().items()}


PROBLEMS = problems()

# options that keep the tiny runs short; everything else at the backend's defaults
FAST = {"advi": {"max_iter": 200}, "fullrank_advi": {"max_iter": 200}}
GENERIC_FAMILY = "rvm"


def _package_backends():
    """The backends bayeszoo registers (not the fakes some tests register)."""
    return [b for b in registry.all_backends() if b.run.__module__.startswith("bayeszoo.")]


def _cases():
    cases = []
    for backend in _package_backends():
        families = [backend.family] if backend.family else list(PROBLEMS)
        for family in families:
            slow = backend.family is None and family != GENERIC_FAMILY
            marks = [pytest.mark.slow] if slow else []
            cases.append(pytest.param(family, backend.name, id=f"{family}-{backend.name}", marks=marks))
    return cases


_CACHE: dict = {}


def _problem(family):
    return PROBLEMS[family]()


def _fit(family, name, seed=0):
    """One fit per (family, backend, seed), shared by the checks below."""
    key = (family, name, seed)
    if key not in _CACHE:
        model, data = _problem(family)
        if not registry.get(model, name).applies_to(model):
            pytest.skip(f"{name} does not apply to the tiny {family} model")
        _CACHE[key] = bz.fit(model, data, name, seed=seed, progress=False, **_TINY, **FAST.get(name, {}))
    return _CACHE[key]


@pytest.mark.parametrize("family", sorted(PROBLEMS))
def test_every_family_s_tiny_problem_is_a_model_of_that_family_and_data_it_takes(family):
    model, data = _problem(family)
    assert type(model) is bz.models.FAMILIES[family]
    model.validate(data)


@pytest.mark.parametrize("family,name", _cases())
def test_backend_contract(family, name, tmp_path):
    model, data = _problem(family)
    if name not in bz.backends(model):
        pytest.skip(f"{name} does not apply to the tiny {family} model")
    spec = registry.get(model, name)
    fit = _fit(family, name)

    # canonical variables with the model's dims, (chain, draw) first
    var_dims = model.var_dims(data)
    assert set(fit.posterior.data_vars) == set(var_dims)
    for var, dims in var_dims.items():
        assert fit.posterior[var].dims == ("chain", "draw", *dims)
    assert (fit.n_chains, fit.n_draws) == (_TINY["chains"], _TINY["draws"])
    assert np.all(np.isfinite(np.concatenate([fit.posterior[v].values.ravel() for v in var_dims])))

    # ArviZ's provenance on every group; sample_stats over (chain, draw)
    for group in fit.idata.groups():
        attrs = fit.idata[group].attrs
        assert {"created_at", "inference_library", "inference_library_version"} <= set(attrs), group
        assert attrs["inference_library"] == spec.library
    if fit.kind == "mcmc":   # every sampler reports per-draw statistics (at least its log density, lp)
        assert "sample_stats" in fit.idata.groups() and fit.idata.sample_stats.data_vars, name
    if "sample_stats" in fit.idata.groups():
        for var in fit.idata.sample_stats.data_vars.values():
            assert var.dims[:2] == ("chain", "draw")
        if "diverging" in fit.idata.sample_stats:
            assert fit.idata.sample_stats["diverging"].dtype == bool

    # the fixed keys the report reads, what bz.fit asked for (recorded by the Fit builder), and the timing
    assert set(INFO_KEYS) | {"seed", "settings", "provenance"} <= set(fit.info)
    assert fit.info["seed"] == 0 and fit.info["settings"]["chains"] == _TINY["chains"]
    assert fit.info["provenance"]["backend"] == name and fit.info["provenance"]["data"] == data.fingerprint()
    for group in ("observed_data", "constant_data"):
        for var in fit.idata[group].data_vars.values():   # arrays over the training set share its obs dim
            assert not var.dims or var.dims[0] == "obs" or var.shape[0] != data.n, (group, var.name, var.dims)
    assert isinstance(fit.info["warnings"], list)
    assert fit.info["converged"] in (True, False, None)
    if fit.info["objective"] is not None:
        assert fit.info["objective"] in fit.idata.objective
    assert {"compile", "tune", "sample", "total"} <= set(fit.timing)
    assert all(v >= 0 for v in fit.timing.values())
    assert fit.kind == spec.kind

    # same seed, same draws
    again = bz.fit(model, data, name, seed=0, progress=False, **_TINY, **FAST.get(name, {}))
    for var in var_dims:
        np.testing.assert_array_equal(again.posterior[var].values, fit.posterior[var].values)

    # save -> load
    back = bz.load_fit(fit.save(tmp_path / "fit.nc"))
    assert (back.backend, back.kind, back.model_spec) == (fit.backend, fit.kind, fit.model_spec)
    for var in var_dims:
        np.testing.assert_array_equal(back.posterior[var].values, fit.posterior[var].values)
    assert back.info["warnings"] == fit.info["warnings"]
    assert back.idata.posterior.attrs["inference_library"] == spec.library


@pytest.mark.parametrize("family,name", [c for c in _cases() if not c.marks])
def test_bad_options_and_data_fail_before_the_backend_runs(family, name, monkeypatch):
    model, data = _problem(family)
    if name not in bz.backends(model):
        pytest.skip(f"{name} does not apply to the tiny {family} model")
    spec = registry.get(model, name)

    table, key = (registry._GENERIC, name) if spec.family is None else (registry._FAMILY, (spec.family, name))
    monkeypatch.setitem(table, key, dataclasses.replace(spec, run=_must_not_run))
    with pytest.raises(ValueError, match="unknown option"):
        bz.fit(model, data, name, no_such_option=1, progress=False)
    other = "sinc" if family in ("bid", "imagervm") else "cameraman"
    wrong = bz.datasets.load(other, n=10) if other == "sinc" else bz.datasets.load(other, size=16)
    with pytest.raises(ValueError):
        bz.fit(model, wrong, name, progress=False)
    with pytest.raises(ValueError, match="draws"):
        bz.fit(model, data, name, draws=0, progress=False)


def test_every_option_declares_a_meaning_and_a_constraint_its_default_meets():
    for backend in _package_backends():
        for opt_name, opt in backend.options.items():
            assert isinstance(opt, registry.Option) and opt.meaning, (backend.name, opt_name)
            assert callable(opt.constraint), (backend.name, opt_name)
            checked = opt.constraint(backend.owner, f"option {opt_name!r}", opt.default)   # raises if it breaks it
            assert checked is None if opt.default is None else np.array_equal(np.asarray(checked, dtype=object),
                                                                                np.asarray(opt.default, dtype=object))


def test_backend_checks_take_the_options_the_model_and_the_data():
    import inspect

    for backend in _package_backends():
        if backend.check is not None:
            assert list(inspect.signature(backend.check).parameters)[:3] == ["options", "model", "data"], backend


# one vocabulary across backends: each name means one thing, with one kind of value
VOCABULARY = {"max_iter": "a positive integer (an iteration cap or count)", "tol": "a positive number",
              "cg_max_iter": "a positive integer", "cg_tol": "a positive number", "thin": "a positive integer",
              "max_tree_depth": "a positive integer", "target_accept": "a number in (0, 1)"}


def test_one_vocabulary_of_option_names():
    for backend in _package_backends():
        retired = set(backend.options) & set(registry.RENAMED_OPTIONS)
        assert not retired, f"{backend.owner} declares retired option names {retired}"
        for opt_name in set(backend.options) & set(VOCABULARY):
            constraint = backend.options[opt_name].constraint
            for bad in (0, -1, "1"):
                with pytest.raises(ValueError, match=rf"option '{opt_name}' must be"):
                    constraint(backend.owner, f"option {opt_name!r}", bad)
            integer = "integer" in VOCABULARY[opt_name]
            if integer:
                with pytest.raises(ValueError):
                    constraint(backend.owner, f"option {opt_name!r}", 1.5)
            default = backend.options[opt_name].default
            assert constraint(backend.owner, f"option {opt_name!r}", default) == default


@pytest.mark.parametrize("family", sorted(PROBLEMS))
def test_option_errors_read_the_same_everywhere_and_come_before_the_run(family, monkeypatch):
    """A retired name names its successor; a value of the wrong type is refused by the option's constraint with
    "<owner>: option '<name>' must be ...; got ..." for every option of every backend, before anything runs."""
    model, data = _problem(family)
    for name in bz.backends(model):
        spec = registry.get(model, name)
        if spec.family is None and family != GENERIC_FAMILY:
            continue
        table, key = (registry._GENERIC, name) if spec.family is None else (registry._FAMILY, (spec.family, name))
        monkeypatch.setitem(table, key, dataclasses.replace(spec, run=_must_not_run))
        for old, new in registry.RENAMED_OPTIONS.items():
            if new in spec.options:
                with pytest.raises(ValueError, match=rf"option '{old}' is now called '{new}'"):
                    bz.fit(model, data, name, progress=False, **{old: 1})
        for opt_name in spec.options:
            with pytest.raises(ValueError) as caught:
                bz.fit(model, data, name, progress=False, **{opt_name: object()})
            message = str(caught.value)
            assert message.startswith(f"{spec.owner}: option {opt_name!r} must be "), message
            assert "; got <object object" in message, message


def _must_not_run(*args, **kwargs):
    raise AssertionError("the backend ran although its input was bad")


@pytest.mark.parametrize("family,name", [c for c in _cases() if not c.marks])
def test_chain_k_does_not_depend_on_how_many_chains_run(family, name):
    """The seeding scheme (chain c of seed s) of every hand-written sampler and approximation."""
    model, data = _problem(family)
    spec = registry.get(model, name)
    if spec.library != "bayeszoo" or name not in bz.backends(model):
        pytest.skip("the generic backends follow their libraries' seeding")
    two = _fit(family, name)
    one = bz.fit(model, data, name, seed=0, progress=False, **{**_TINY, "chains": 1})
    for var in model.var_dims(data):
        np.testing.assert_allclose(one.posterior[var].values[0], two.posterior[var].values[0], rtol=1e-10,
                                   atol=1e-12, err_msg=f"{name}: chain 0 changed with the number of chains")


def test_backends_details_lists_options():
    table = bz.backends(bz.models.RVM(), details=True)
    assert set(table["backend"]) == set(bz.backends(bz.models.RVM()))
    nuts = table[table["backend"] == "nuts"].set_index("option")
    assert nuts.loc["target_accept", "default"] == "0.9" and "acceptance" in nuts.loc["target_accept", "meaning"]
