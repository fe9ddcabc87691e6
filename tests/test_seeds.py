"""Seeds: ``seed=None`` is fresh entropy everywhere (as in NumPy, PyMC and scikit-learn), drawn once per call and
recorded in the fit (``fit.seed_used``) so that the run can be repeated; a seed outside [0, 2**32) or not an
integer is refused before any work."""
from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import bayeszoo as bz
from tests.helpers import fake_backends  # noqa: F401  (registers the fake backends)
from bayeszoo import checks, registry
from bayeszoo.sklearn import RelevanceVectorRegressor

COUNTS = dict(draws=20, tune=10, chains=2)
BAD_SEEDS = [-1, 2**32, 2**64 + 5, 1.5, 2.0, np.float64(3.0), True, np.bool_(False), "3", [1], object()]


@pytest.fixture(scope="module")
def sinc():
    return bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=20, n_test=10, seed=0)


def _draws(fit):
    return np.concatenate([fit.posterior[v].values.ravel() for v in fit.posterior.data_vars])


@pytest.mark.parametrize("backend", ["gibbs", "vb"])
def test_none_is_fresh_and_the_recorded_seed_repeats_the_fit(sinc, backend):
    model, data = sinc
    first = bz.fit(model, data, backend, seed=None, progress=False, **COUNTS)
    second = bz.fit(model, data, backend, seed=None, progress=False, **COUNTS)
    assert first.seed_used != second.seed_used
    assert 0 <= first.seed_used < 2**32 and first.info["settings"]["seed"] == first.seed_used
    assert not np.array_equal(_draws(first), _draws(second))
    again = bz.fit(model, data, backend, seed=first.seed_used, progress=False, **COUNTS)
    np.testing.assert_array_equal(_draws(again), _draws(first))
    assert again.info["settings"] == first.info["settings"]


def test_an_integer_seed_is_recorded_as_given(sinc):
    model, data = sinc
    fit = bz.fit(model, data, "fake_vb", seed=np.int64(2**32 - 1), progress=False, **COUNTS)
    assert fit.seed_used == 2**32 - 1 and isinstance(fit.seed_used, int)


def _seed_id(seed) -> str:
    """repr, but an address-free name for a bare object, so that every test process collects the same ids."""
    return "object()" if type(seed) is object else repr(seed)


@pytest.mark.parametrize("seed", BAD_SEEDS, ids=_seed_id)
def test_bad_seeds_are_refused_before_any_work(sinc, seed, monkeypatch):
    model, data = sinc
    spec = registry.get(model, "fake_ok")
    monkeypatch.setitem(registry._FAMILY, ("rvm", "fake_ok"), dataclasses.replace(spec, run=_must_not_run))
    with pytest.raises(ValueError, match=r"^bz.fit: seed must be None or an integer in \[0, 2\*\*32\); got "):
        bz.fit(model, data, "fake_ok", seed=seed, progress=False)
    with pytest.raises(ValueError, match="seed must be None or an integer"):
        bz.compare(model, data, ["fake_ok"], reference=None, seed=seed, progress=False)
    with pytest.raises(ValueError, match="seed must be None or an integer"):
        bz.cross_validate(model, data, "fake_ok", folds=2, seed=seed, progress=False)


def _must_not_run(*args, **kwargs):
    raise AssertionError("the backend ran although its seed was bad")


def test_the_seed_check_and_fresh_entropy():
    assert checks.seed("X", "seed", None) is None
    assert checks.seed("X", "seed", np.uint32(7)) == 7 and checks.seed("X", "seed", 2**32 - 1) == 2**32 - 1
    fresh = {checks.fresh_seed() for _ in range(20)}
    assert len(fresh) == 20 and all(isinstance(s, int) and 0 <= s < 2**32 for s in fresh)


def test_a_comparison_draws_one_seed_for_every_cell_and_repeats_with_it(sinc):
    model, data = sinc
    kw = dict(backends=["fake_ok", "fake_vb"], reference=None, progress=False, **COUNTS)
    first = bz.compare(model, data, seed=None, **kw)
    seeds = {label: fit.seed_used for label, fit in first.fits.items()}
    assert len(set(seeds.values())) == 1, seeds
    second = bz.compare(model, data, seed=None, **kw)
    assert second.fits["fake_ok"].seed_used != seeds["fake_ok"]
    again = bz.compare(model, data, seed=seeds["fake_ok"], **kw)
    for label, fit in first.fits.items():
        np.testing.assert_array_equal(_draws(again.fits[label]), _draws(fit))
    # the same on an executor: the seed is drawn once, before the cells are submitted
    with ThreadPoolExecutor(2) as pool:
        parallel = bz.compare(model, data, seed=None, executor=pool, **kw)
    assert len({fit.seed_used for fit in parallel.fits.values()}) == 1


def test_a_grid_with_a_fresh_seed_resumes_with_the_seed_it_started_with(sinc, tmp_path):
    """Stopped after its first cell (no comparison.json yet), a grid run with seed=None resumes from ``out`` with
    the seed its first run drew: the saved cell is reused and the next one runs with the same seed."""
    import os

    model, data = sinc
    kw = dict(reference=None, progress=False, out=tmp_path, **COUNTS)
    first = bz.compare(model, data, backends=["fake_ok"], seed=None, **kw)
    os.remove(tmp_path / "comparison.json")                 # as if stopped before the grid was saved
    resumed = bz.compare(model, data, backends=["fake_ok", "fake_vb"], seed=None, **kw)
    assert resumed.notes == {"fake_ok": "resumed"}
    assert resumed.fits["fake_vb"].seed_used == resumed.fits["fake_ok"].seed_used == first.fits["fake_ok"].seed_used
    os.remove(tmp_path / "comparison.json")
    other = bz.datasets.Dataset(X=data.X, y=data.y + 1.0, name="shifted", meta=data.meta)
    replaced = bz.compare(model, other, backends=["fake_ok"], seed=None, overwrite=True, **kw)
    # the saved fits are of other data: not this grid's seed, so a fresh one
    assert replaced.fits["fake_ok"].seed_used != first.fits["fake_ok"].seed_used
    assert replaced.notes["fake_ok"].startswith("refitted: the saved fit was made with another data")


def test_cross_validation_records_the_seed_of_each_fold(sinc):
    model, data = sinc
    kw = dict(folds=3, repeats=2, draws=5, chains=1, progress=False)
    first = bz.cross_validate(model, data, "fake_vb", seed=None, **kw)
    base = int(first["seed"][0])
    np.testing.assert_array_equal(first["seed"], [(base + 1000 * r + k) % 2**32 for r in range(2) for k in range(3)])
    again = bz.cross_validate(model, data, "fake_vb", seed=base, **kw)
    np.testing.assert_array_equal(again["mse"], first["mse"])
    top = bz.cross_validate(model, data, "fake_vb", seed=2**32 - 1, **kw)   # fold seeds wrap into the range
    assert top["seed"].max() < 2**32 and top["seed"][1] == 0


def test_the_sklearn_estimators_follow_random_state_conventions():
    rng = np.random.default_rng(0)
    X = rng.uniform(-5, 5, (30, 1))
    y = np.sinc(X[:, 0] / np.pi) + 0.1 * rng.standard_normal(30)
    opts = {"draws": 20, "tune": 10, "chains": 1}
    one = RelevanceVectorRegressor(width=2.0, backend="gibbs", seed=None, backend_options=opts).fit(X, y)
    two = RelevanceVectorRegressor(width=2.0, backend="gibbs", seed=None, backend_options=opts).fit(X, y)
    assert one.fit_.seed_used != two.fit_.seed_used
    assert not np.array_equal(_draws(one.fit_), _draws(two.fit_))
    same = RelevanceVectorRegressor(width=2.0, backend="gibbs", seed=one.fit_.seed_used, backend_options=opts)
    np.testing.assert_array_equal(same.fit(X, y).predict(X), one.predict(X))
    # a RandomState or Generator gives the next integer it draws, as scikit-learn's random_state does
    for make in (np.random.RandomState, np.random.default_rng):
        est = RelevanceVectorRegressor(width=2.0, seed=make(5), backend_options={"draws": 5})
        seeds = [est.fit(X, y).fit_.seed_used for _ in range(2)]
        replay = RelevanceVectorRegressor(width=2.0, seed=make(5), backend_options={"draws": 5})
        assert seeds[0] != seeds[1] and [replay.fit(X, y).fit_.seed_used for _ in range(2)] == seeds
    with pytest.raises(ValueError, match="seed"):
        RelevanceVectorRegressor(seed=2**32).fit(X, y)
