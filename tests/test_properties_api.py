"""Property-based tests of the public entry points: whatever a user passes, the answer is a result or a ValueError
(never another exception type, never a hang)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

import bayeszoo as bz  # noqa: E402
from tests.helpers import fake_backends  # noqa: F401  (registers the fake backends)
from tests.helpers.properties import FAST, SLOW, fits_or_refuses  # noqa: E402

# anything a user might type for a count, a seed or an option value
ANY_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**7), st.floats(allow_nan=True, allow_infinity=True),
                      st.text(max_size=4), st.lists(st.integers(0, 3), max_size=3))
COUNT = st.one_of(st.none(), st.integers(-2, 40), ANY_VALUE)


@pytest.fixture(scope="module")
def tiny():
    return bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=12, n_test=10, seed=0)


def _fit_args():
    return st.fixed_dictionaries({"draws": COUNT, "tune": COUNT, "chains": COUNT, "seed": COUNT})


def _check_fit(model, data, args):
    kwargs = {k: v for k, v in args.items() if v is not None}
    result = fits_or_refuses(lambda: bz.fit(model, data, "fake_vb", progress=False, **kwargs))
    if result is not None:
        assert np.all(np.isfinite(result.posterior["w"].values))
        for key in ("draws", "chains"):
            if key in kwargs:
                assert getattr(result, f"n_{key}") == kwargs[key]


@pytest.mark.timeout(120)
@FAST
@given(args=_fit_args())
def test_fit_counts_and_seeds(tiny, args):
    _check_fit(*tiny, args)


@pytest.mark.slow
@pytest.mark.timeout(900)
@SLOW
@given(args=_fit_args())
def test_fit_counts_and_seeds_many(tiny, args):
    _check_fit(*tiny, args)


def _check_options(model, data, backend, options):
    fits_or_refuses(lambda: bz.fit(model, data, backend, draws=10, chains=1, progress=False, **options))


OPTION_NAMES = {name: list(bz.registry.get(bz.models.RVM(), name).options) for name in ("em", "fast", "vb")}


@pytest.mark.timeout(180)
@FAST
@given(backend=st.sampled_from(sorted(OPTION_NAMES)), data=st.data())
def test_backend_option_values(tiny, backend, data):
    options = data.draw(st.dictionaries(st.sampled_from(OPTION_NAMES[backend]), ANY_VALUE, max_size=2))
    _check_options(*tiny, backend, options)


@pytest.mark.timeout(120)
@FAST
@given(args=st.fixed_dictionaries({"draws": COUNT, "chains": COUNT, "seed": COUNT,
                                   "backends": st.one_of(st.none(), st.lists(st.sampled_from(
                                       ["fake_ok", "fake_vb", "fake_fail", "nope"]), max_size=3), ANY_VALUE),
                                   "reference": st.one_of(st.none(), st.sampled_from(["fake_ok", "nope"]),
                                                          ANY_VALUE)}))
def test_compare_arguments(tiny, args):
    model, data = tiny
    kwargs = {k: v for k, v in args.items() if v is not None}
    kwargs.setdefault("backends", ["fake_vb"])
    result = fits_or_refuses(lambda: bz.compare(model, data, tune=0, progress=False, **kwargs))
    if result is not None:
        table = result.table()
        assert list(table["backend"])[:len(kwargs["backends"])] == list(kwargs["backends"])


def _arrays(min_rows=0):
    shapes = st.tuples(st.integers(min_rows, 6), st.integers(1, 3))
    elements = st.floats(allow_nan=True, allow_infinity=True, width=64)
    return shapes.flatmap(lambda s: st.lists(st.lists(elements, min_size=s[1], max_size=s[1]),
                                             min_size=s[0], max_size=s[0]))


@pytest.mark.timeout(60)
@FAST
@given(X=_arrays(), y=st.lists(st.one_of(st.floats(allow_nan=True), st.integers(-2, 3)), max_size=7),
       as_frame=st.booleans(), task=st.sampled_from([None, "regression", "classification", "multiclass", "oops"]))
def test_dataset_construction(X, y, as_frame, task):
    X_in = pd.DataFrame(X) if as_frame and len(X) else X
    y_in = pd.Series(y, dtype=float) if as_frame else y
    meta = {} if task is None else {"task": task}
    data = fits_or_refuses(lambda: bz.datasets.Dataset(X=X_in, y=y_in, name="mine", meta=meta))
    if data is not None:
        assert np.all(np.isfinite(data.X)) and np.all(np.isfinite(data.y)) and data.X.shape[0] == data.y.shape[0]


@pytest.mark.timeout(120)
@FAST
@given(name=st.sampled_from(["sinc", "ripley", "iris", "mkl_sources", "doppler"]),
       options=st.dictionaries(st.sampled_from(["n", "n_test", "noise_sd", "seed", "test_fraction", "standardize"]),
                               ANY_VALUE, max_size=2))
def test_dataset_loader_options(name, options):
    data = fits_or_refuses(lambda: bz.datasets.load(name, **options))
    if data is not None:
        assert np.all(np.isfinite(data.X)) and data.n >= 1


@pytest.mark.timeout(180)
@FAST
@given(folds=COUNT, repeats=COUNT)
def test_cross_validate_arguments(tiny, folds, repeats):
    model, data = tiny
    kwargs = {k: v for k, v in {"folds": folds, "repeats": repeats}.items() if v is not None}
    result = fits_or_refuses(lambda: bz.cross_validate(model, data, "fake_vb", draws=5, chains=1, progress=False,
                                                        **kwargs))
    if result is not None:
        assert all(np.all(np.isfinite(v)) for v in result.values())
