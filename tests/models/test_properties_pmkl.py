"""Property-based tests of the PMKL family: generated datasets (sizes, classes, column scales over many orders of
magnitude, offsets, constant columns, sources and precomputed kernels), generated model options (and wrong types)
and backend options, through ``bz.fit`` with the hand-written backends (few draws / iterations), ``predict`` and
``score``. Whatever is generated, the answer is a fit with finite results or a ValueError raised by bayeszoo itself
(never another exception type, never a library's message passing through, never a hang)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import event, given, strategies as st

import bayeszoo as bz
from bayeszoo import registry
from bayeszoo.datasets import pmkl_data
from bayeszoo.models.pmkl import PMKL
from tests.helpers.properties import FAST, SLOW, refused_by_bayeszoo


# anything a user might type for an option
ANY_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                      st.text(max_size=4), st.lists(st.integers(0, 3), max_size=3), st.just(np.array([1.0, 2.0])),
                      st.just({"a": 1}))
# a scale far from 1 (in both directions), over many orders of magnitude
SCALE = st.tuples(st.sampled_from([-300, -100, -30, -12, -6, 4, 6, 12, 30, 100, 300]),
                  st.floats(-0.5, 0.5)).map(lambda t: float(10.0 ** (t[0] + t[1])))
# a positive number, mostly of moderate size, sometimes extreme
POSITIVE = st.sampled_from([3, 3, 3, 300]).flatmap(lambda e: st.floats(-e, e)).map(lambda e: float(10.0 ** e))


# ------------------------------------------------------------------------------------------ generated problems
@st.composite
def problems(draw):
    """(model options, dataset): sizes 2-24, 2-4 classes, 1-4 columns of any scale / offset, constant columns,
    a test set or none, sources from the data's meta, from the model or one precomputed gram matrix."""
    n = draw(st.integers(2, 24))
    C = draw(st.integers(2, min(4, n)))
    d = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    n_test = draw(st.integers(0, 6))
    y = rng.permutation(np.arange(n) % C).astype(float)
    y_test = rng.integers(0, C, n_test).astype(float)
    X = rng.standard_normal((n, d))
    X_test = rng.standard_normal((n_test, d))
    X[:, 0] += 1.5 * y
    X_test[:, 0] += 1.5 * y_test
    # most problems on a moderate scale; some with one scale for every column, some with a scale per column
    regime = draw(st.sampled_from(["unit", "unit", "one", "each", "flat", "repeated"]))
    common = draw(SCALE)
    for j in range(d):
        scale = {"one": common, "each": draw(SCALE)}.get(regime, 10.0 ** draw(st.floats(-3, 2)))
        offset = draw(st.sampled_from([0.0, 0.0, 1e3, -1e6, 1e200])) if regime == "each" else 0.0
        if regime == "flat" or draw(st.sampled_from([False, False, False, True])):      # a constant column
            X[:, j] = X_test[:, j] = draw(st.sampled_from([0.0, 1.0, -3.5]))
        else:
            X[:, j], X_test[:, j] = X[:, j] * scale + offset, X_test[:, j] * scale + offset
    if regime == "repeated":                              # every object twice or more: rank-deficient kernels
        X, X_test = X[np.arange(n) % max(1, n // 2)], X_test[np.arange(n_test) % max(1, n // 2)]
    options = draw(model_options())
    meta = {"task": "multiclass"}
    layout = draw(st.sampled_from(["whole", "meta", "model", "gram"]))
    if layout == "meta":
        cut = draw(st.integers(0, d - 1))
        meta["sources"] = {"a": list(range(cut + 1))} if cut == d - 1 else \
            {"a": list(range(cut + 1)), "b": list(range(cut + 1, d))}
    elif layout == "model":
        n_src = draw(st.integers(1, 3))
        options["sources"] = tuple(
            {"name": f"s{i}", "columns": sorted(set(draw(st.lists(st.integers(0, d - 1), min_size=1, max_size=d)))),
             **draw(st.fixed_dictionaries({}, optional={
                 "kernel": st.sampled_from(["rbf", "poly", "linear"]),
                 "theta": POSITIVE, "degree": st.integers(1, 4)}))} for i in range(n_src))
    elif layout == "gram":                                # object indices into a kernel over training and test
        Z = rng.standard_normal((n + n_test, 3)) * 10.0 ** draw(st.floats(-3, 3))
        gram = Z @ Z.T + draw(st.sampled_from([0.0, 1e-3, 1.0])) * np.eye(n + n_test)
        X = np.column_stack([X, np.arange(n)])
        X_test = np.column_stack([X_test, n + np.arange(n_test)])
        options["sources"] = ({"name": "g", "columns": [d], "kernel": "precomputed", "gram": gram},) + \
            (({"name": "f", "columns": [0]},) if draw(st.booleans()) else ())
    data = bz.datasets.Dataset(X=X, y=y, X_test=X_test if n_test else None, y_test=y_test if n_test else None,
                               name="generated", meta=meta)
    return options, data


def model_options():
    return st.fixed_dictionaries({
        "rule": st.sampled_from(["convex", "mean", "convex", "mean", "binary", "product", "wproduct"]),
        "kernel": st.sampled_from(["rbf", "poly", "linear"])}, optional={
        "degree": st.integers(1, 6),
        "tau": POSITIVE, "nu": POSITIVE, "rho": POSITIVE, "mu": POSITIVE, "lam": POSITIVE,
        "kernel_params": st.sampled_from(["fixed", "infer"]),
        "omega": POSITIVE, "phi": POSITIVE, "infer_rho": st.sampled_from([False, False, False, True])})


FIT_COUNTS = {"gibbs": st.fixed_dictionaries({"draws": st.integers(1, 4), "tune": st.integers(0, 4),
                                              "chains": st.integers(1, 2)}),
              "vb": st.fixed_dictionaries({"draws": st.integers(1, 4), "chains": st.integers(1, 2)})}
BACKEND_OPTIONS = {
    "gibbs": st.fixed_dictionaries({}, optional={
        "thin": st.integers(1, 2), "beta_steps": st.integers(1, 2), "theta_steps": st.integers(1, 2),
        "beta_update": st.sampled_from(["marginal", "conditional"]),
        "y_step": st.sampled_from(["collapsed", "conditional"]),
        "fix_alpha": st.one_of(st.none(), POSITIVE)}),
    "vb": st.fixed_dictionaries({"max_iter": st.integers(1, 4), "is_samples": st.integers(2, 20)}, optional={
        "tol": POSITIVE, "is_pool": st.sampled_from(["accumulate", "fresh"]), "exact_alpha": st.booleans(),
        "fix_alpha": st.one_of(st.none(), POSITIVE), "theta_proposal": st.sampled_from(["prior", "local"])}),
    "em": st.fixed_dictionaries({"max_iter": st.integers(1, 5)}, optional={"tol": POSITIVE,
                                                                           "learn_beta": st.booleans()}),
    "mrvm1": st.fixed_dictionaries({"max_iter": st.integers(1, 15)}, optional={
        "min_iter": st.one_of(st.none(), st.integers(1, 5)), "threshold": POSITIVE, "learn_beta": st.booleans()}),
    "mrvm2": st.fixed_dictionaries({"max_iter": st.integers(1, 5)}, optional={
        "tol": POSITIVE, "tau": POSITIVE, "nu": POSITIVE, "prune": POSITIVE, "learn_beta": st.booleans()}),
}
BACKEND_OPTIONS["map"] = BACKEND_OPTIONS["em"]
BACKENDS = sorted(BACKEND_OPTIONS)


def _fit_predict_score(options: dict, data, backend: str, backend_options: dict, counts: dict, seed: int) -> None:
    model = refused_by_bayeszoo(lambda: PMKL(**options))
    if model is None or backend not in bz.backends(model):
        return
    fit = refused_by_bayeszoo(lambda: bz.fit(model, data, backend, seed=seed, progress=False, **counts,
                                             **backend_options))
    if fit is None:
        return
    event(f"fitted by {backend}")
    X = data.X_test if data.has_test else data.X
    C = model.n_classes(data)
    probs = model.predict(fit, X)
    assert probs.shape == (X.shape[0], C) and np.all(np.isfinite(probs))
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-6)
    scores = model.score(fit, data)
    assert all(math.isfinite(v) for v in scores.values()), scores
    # inputs that cannot be predicted at, and a model with other options, are refused by name
    bad = X[:1].copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="X_new"):
        model.predict(fit, bad)
    with pytest.raises(ValueError, match="column"):
        model.predict(fit, np.zeros((1, X.shape[1] + 1)))
    other = PMKL(**{**options, "tau": float(model.tau) * 2.0})
    with pytest.raises(ValueError, match="other PMKL options"):
        other.predict(fit, X)
    with pytest.raises(ValueError, match="other PMKL options"):
        other.score(fit, data)


def _case(draw_case, backend: str):
    options, data = draw_case(problems())
    counts = draw_case(FIT_COUNTS.get(backend, FIT_COUNTS["vb"]))
    return options, data, backend, draw_case(BACKEND_OPTIONS[backend]), counts, draw_case(st.integers(0, 10**6))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
@FAST
@given(case=st.data())
def test_fit_predict_score_finite_or_refused(backend, case):
    _fit_predict_score(*_case(case.draw, backend))


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("backend", BACKENDS)
@SLOW
@given(case=st.data())
def test_fit_predict_score_finite_or_refused_many(backend, case):
    _fit_predict_score(*_case(case.draw, backend))


@st.composite
def degenerate_cases(draw, backend: str):
    """Inputs that carry little or no information: every column constant (zero included) or tiny, or two distinct
    objects repeated; any kernel."""
    n = draw(st.integers(2, 12))
    C = draw(st.integers(2, min(3, n)))
    d = draw(st.integers(1, 3))
    y = (np.arange(n) % C).astype(float)
    value = draw(st.sampled_from([0.0, 1e-300, 1e-12, 1.0, -3.5]))
    X = np.full((n, d), value)
    if draw(st.booleans()):
        X[::2] += draw(st.sampled_from([1e-300, 1e-8, 1.0]))
    options = {"rule": draw(st.sampled_from(["convex", "mean", "product", "binary"])),
               "kernel": draw(st.sampled_from(["rbf", "poly", "linear"]))}
    counts = draw(FIT_COUNTS.get(backend, FIT_COUNTS["vb"]))
    return (options, bz.datasets.Dataset(X=X, y=y, meta={"task": "multiclass"}), backend,
            draw(BACKEND_OPTIONS[backend]), counts, draw(st.integers(0, 100)))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
@FAST
@given(data=st.data())
def test_degenerate_inputs_fit_or_are_refused(backend, data):
    _fit_predict_score(*data.draw(degenerate_cases(backend)))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("backend", BACKENDS)
@SLOW
@given(data=st.data())
def test_degenerate_inputs_fit_or_are_refused_many(backend, data):
    _fit_predict_score(*data.draw(degenerate_cases(backend)))


# --------------------------------------------------------------------------------- option values of any type
MODEL_OPTION_NAMES = ["rule", "kernel", "sources", "degree", "tau", "nu", "rho", "mu", "lam", "kernel_params",
                      "omega", "phi", "infer_rho"]
SOURCE_FIELDS = ["name", "columns", "kernel", "theta", "degree", "gram", "other"]


def _model_options_of_any_type(options: dict) -> None:
    model = refused_by_bayeszoo(lambda: PMKL(**options))
    if model is not None:                                    # what was accepted has a JSON spec that rebuilds it
        assert bz.models.from_spec(model.spec()).spec() == model.spec()


def _any_sources():
    source = st.dictionaries(st.sampled_from(SOURCE_FIELDS), ANY_VALUE, max_size=4)
    return st.one_of(ANY_VALUE, st.lists(st.one_of(source, ANY_VALUE), max_size=3))


@pytest.mark.timeout(60)
@FAST
@given(options=st.dictionaries(st.sampled_from(MODEL_OPTION_NAMES), ANY_VALUE, max_size=3),
       sources=st.one_of(st.none(), _any_sources()))
def test_model_options_of_any_type(options, sources):
    _model_options_of_any_type({**options, **({"sources": sources} if sources is not None else {})})


@pytest.mark.slow
@pytest.mark.timeout(600)
@SLOW
@given(options=st.dictionaries(st.sampled_from(MODEL_OPTION_NAMES), ANY_VALUE, max_size=4),
       sources=st.one_of(st.none(), _any_sources()))
def test_model_options_of_any_type_many(options, sources):
    _model_options_of_any_type({**options, **({"sources": sources} if sources is not None else {})})


def _backend_options_of_any_type(backend: str, options: dict, small) -> None:
    model = PMKL(rule="convex")
    spec = registry.get(model, backend)
    resolved = refused_by_bayeszoo(lambda: spec.resolve(options, model, small))
    if resolved is not None and backend in ("vb", "em", "map", "mrvm2"):
        # accepted options run (iterations capped, so that a large accepted max_iter does not make the test slow)
        capped = {**options, **{k: min(v, 3) for k, v in options.items() if k in ("max_iter",)}}
        refused_by_bayeszoo(lambda: bz.fit(model, small, backend, draws=2, chains=1, progress=False, **capped))


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(3)
    y = np.arange(12) % 3
    return bz.datasets.Dataset(X=rng.standard_normal((12, 2)) + y[:, None], y=y.astype(float),
                               meta={"task": "multiclass"})


@pytest.mark.timeout(60)
@FAST
@given(backend=st.sampled_from(BACKENDS), data=st.data())
def test_backend_options_of_any_type(small, backend, data):
    names = list(registry.get(PMKL(), backend).options)
    options = data.draw(st.dictionaries(st.sampled_from(names), ANY_VALUE, max_size=2))
    _backend_options_of_any_type(backend, options, small)


@pytest.mark.slow
@pytest.mark.timeout(600)
@SLOW
@given(backend=st.sampled_from(BACKENDS), data=st.data())
def test_backend_options_of_any_type_many(small, backend, data):
    names = list(registry.get(PMKL(), backend).options)
    options = data.draw(st.dictionaries(st.sampled_from(names), ANY_VALUE, max_size=3))
    _backend_options_of_any_type(backend, options, small)


# --------------------------------------------------------------------------------------------- predict inputs
@pytest.fixture(scope="module")
def small_fit(small):
    model = PMKL()
    return model, bz.fit(model, small, "vb", draws=5, chains=1, progress=False, max_iter=3)


X_NEW = st.one_of(
    ANY_VALUE,
    st.lists(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=3), max_size=3),
    st.integers(0, 3).flatmap(lambda k: st.lists(st.lists(st.floats(-1e300, 1e300), min_size=k, max_size=k),
                                                 min_size=1, max_size=3)))


def _predict_inputs(small_fit, X_new) -> None:
    model, fit = small_fit
    probs = refused_by_bayeszoo(lambda: model.predict(fit, X_new))
    if probs is not None:
        assert np.all(np.isfinite(probs)) and probs.shape[1] == 3


@pytest.mark.timeout(60)
@FAST
@given(X_new=X_NEW)
def test_predict_inputs_of_any_kind(small_fit, X_new):
    _predict_inputs(small_fit, X_new)


@pytest.mark.slow
@pytest.mark.timeout(600)
@SLOW
@given(X_new=X_NEW)
def test_predict_inputs_of_any_kind_many(small_fit, X_new):
    _predict_inputs(small_fit, X_new)


# --------------------------------------------------------------------------------------------- dataset loaders
LOADERS = {"iris": pmkl_data.iris, "wine": pmkl_data.wine, "crabs4": pmkl_data.crabs4, "neal3": pmkl_data.neal3,
           "neal_ellipses": pmkl_data.neal_ellipses, "mkl_sources": pmkl_data.mkl_sources,
           "mfeat_standin": pmkl_data.mfeat_standin}
LOADER_VALUES = {"seed": st.one_of(st.integers(0, 10**6), ANY_VALUE),
                 "test_fraction": st.one_of(st.none(), st.floats(0, 1), ANY_VALUE),
                 "standardize": st.one_of(st.booleans(), ANY_VALUE),
                 "n": st.one_of(st.integers(-2, 60), ANY_VALUE), "n_test": st.one_of(st.integers(-2, 60), ANY_VALUE),
                 "n_per_class": st.one_of(st.integers(-2, 90), ANY_VALUE),
                 "n_test_per_class": st.one_of(st.integers(-2, 90), ANY_VALUE),
                 "noise_partial": st.one_of(st.floats(0, 10), ANY_VALUE)}


def _loader(name: str, options: dict) -> None:
    data = refused_by_bayeszoo(lambda: LOADERS[name](**options))
    if data is not None:
        assert data.task == "multiclass" and np.all(np.isfinite(data.X))


def _loader_options(data, name):
    import inspect

    params = list(inspect.signature(LOADERS[name]).parameters)
    return data.draw(st.fixed_dictionaries({}, optional={p: LOADER_VALUES[p] for p in params}))


@pytest.mark.timeout(120)
@FAST
@given(name=st.sampled_from(sorted(LOADERS)), data=st.data())
def test_loader_options(name, data):
    _loader(name, _loader_options(data, name))


@pytest.mark.slow
@pytest.mark.timeout(900)
@SLOW
@given(name=st.sampled_from(sorted(LOADERS)), data=st.data())
def test_loader_options_many(name, data):
    _loader(name, _loader_options(data, name))

