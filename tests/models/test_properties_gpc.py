"""Property-based tests of GP classification: whatever data, model options, backend options or prediction inputs a
user passes, the answer is a fit with finite results or a ValueError that names the problem (never another
exception type, never a NumPy / SciPy linear-algebra error, never a hang)."""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bayeszoo as bz
from bayeszoo.datasets import gpc_data
from bayeszoo.models.gpc import GPC, KERNELS, LIKELIHOODS
from tests.helpers.properties import FAST, SLOW, fits_or_refuses

APPROXIMATIONS = ("laplace", "ep", "kl", "vb", "fv", "lr")
SAMPLERS = ("gibbs", "ais")
FEW = {"gibbs": {"draws": 4, "tune": 2, "chains": 2}, "ais": {"draws": 2, "chains": 2, "n_temps": 8}}

# anything a user might type for an option
JUNK = st.one_of(st.none(), st.booleans(), st.text(max_size=3), st.lists(st.integers(0, 3), max_size=2),
                 st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6),
                 st.dictionaries(st.text(max_size=1), st.integers(), max_size=1))
INSIDE = st.floats(-20.0, 20.0, allow_nan=False)                    # the documented log-hyperparameter box
EDGES = st.sampled_from([-20.0, 20.0, 11.5, 12.0, -25.0, 25.0, 0.0, 5.0, -8.0])
LOG_HYP = st.one_of(INSIDE, EDGES, st.floats(allow_nan=True, allow_infinity=True), JUNK)


def _strict(call):
    """``call()`` or None after a ValueError; a linear-algebra error (a ValueError subclass in NumPy) fails."""
    def run():
        try:
            return call()
        except np.linalg.LinAlgError as exc:
            raise AssertionError(f"a linear-algebra error reached the user: {exc}") from exc
    return fits_or_refuses(run)


# ------------------------------------------------------------------------------------------------ data
@st.composite
def arrays(draw, n, d):
    """Inputs at a scale over many orders of magnitude, optionally offset, with constant columns and duplicated
    rows."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    X = rng.normal(size=(n, d)) * 10.0 ** draw(st.integers(-300, 300))
    offset = draw(st.one_of(st.none(), st.integers(-300, 300)))
    if offset is not None:
        X = X + 10.0 ** offset
    if draw(st.booleans()):
        X[:, draw(st.integers(0, d - 1))] = draw(st.sampled_from([0.0, 1.0, -3e5, 1e200]))
    dup = draw(st.integers(0, n))
    if dup > 1:
        X[:dup] = X[0]
    return X


LABELS = ("random", "random", "one_class", "separable", "plus_minus", "bool", "other")


def _labels(kind, X, rng):
    n = X.shape[0]
    if kind == "one_class":
        return np.ones(n)
    if kind == "separable":
        return (X[:, 0] > np.median(X[:, 0])).astype(float)
    y = (rng.random(n) < 0.5).astype(float)
    if kind == "plus_minus":
        return 2 * y - 1
    if kind == "bool":
        return y.astype(bool)
    if kind == "other":
        return y * 3
    return y


@st.composite
def datasets(draw, max_n=20, sizes=None):
    n = draw(st.sampled_from(sizes)) if sizes else draw(st.integers(1, max_n))
    d = draw(st.integers(1, 4))
    X = draw(arrays(n, d))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    kind = draw(st.sampled_from(LABELS))
    n_test = draw(st.integers(0, 6))
    X_test = draw(arrays(n_test, d)) if n_test else None
    y_test = None if X_test is None else _labels("random" if kind in ("one_class", "separable") else kind,
                                                X_test, rng)
    return {"X": X, "y": _labels(kind, X, rng), "X_test": X_test, "y_test": y_test}


def _dataset(arrays):
    return bz.datasets.Dataset(name="generated", meta={"task": "classification"}, **arrays)


# ------------------------------------------------------------------------------------------------ model options
def _model_options(within=False):
    """GPC keyword options: inside the documented bounds, or also outside them and of the wrong type."""
    hyp_value = INSIDE if within else LOG_HYP
    opts = {
        "likelihood": st.sampled_from(LIKELIHOODS) if within else st.one_of(st.sampled_from(LIKELIHOODS), JUNK),
        "kernel": st.sampled_from(KERNELS) if within else st.one_of(st.sampled_from(KERNELS), JUNK),
        "log_lengthscale": hyp_value,
        "log_amplitude": hyp_value,
        "jitter": st.sampled_from([0.0, 1e-8, 1e-4, 1.0]) if within else
        st.one_of(st.sampled_from([0.0, 1e-8, 1.0, -1e-8, 1e11]), JUNK),
        "degree": st.sampled_from([1, 2, 3]) if within else st.one_of(st.sampled_from([1, 2, 3, 0, 4, 2.0]), JUNK),
        "hyp": st.one_of(st.none(), st.lists(hyp_value, min_size=1, max_size=5)) if within else
        st.one_of(st.none(), st.lists(LOG_HYP, max_size=5), JUNK),
    }
    return st.fixed_dictionaries({}, optional=opts)


def _model(options):
    return GPC(**options)


#: options inside the documented bounds half of the time, anything the other half
ANY_OPTIONS = st.one_of(_model_options(within=True), _model_options())


def _check_model_options(options):
    """Construction refuses bad options with a ValueError naming one of them; a model that is built has a JSON
    spec that rebuilds it."""
    try:
        model = GPC(**options)
    except np.linalg.LinAlgError as exc:
        raise AssertionError(exc) from exc
    except ValueError as exc:
        assert any(name in str(exc) for name in options), (options, str(exc))
        return
    assert bz.models.from_spec(model.spec()) == model


@pytest.mark.timeout(60)
@FAST
@given(options=_model_options())
def test_model_options_are_checked(options):
    _check_model_options(options)


@pytest.mark.slow
@pytest.mark.timeout(600)
@settings(SLOW, max_examples=500)
@given(options=_model_options())
def test_model_options_are_checked_many(options):
    _check_model_options(options)


# ------------------------------------------------------------------------------------------------ fits
def _check_fit(arrays, options, backend, extra=None):
    """Fit, predict and score: finite results or a ValueError."""
    def run():
        data = _dataset(arrays)
        model = _model(options)
        fit = bz.fit(model, data, backend, progress=False, **(extra or {}))
        assert np.all(np.isfinite(fit.posterior["f"].values))
        p = model.predict(fit, data.X)
        assert p.shape == (data.n,) and np.all((p >= 0) & (p <= 1))
        scores = model.score(fit, data)
        for key in ("error_rate", "log_pred", "info_bits"):
            assert np.isfinite(scores[key]), (key, scores)
        return fit

    return _strict(run)


def _few(backend):
    return dict(FEW.get(backend, {"draws": 5, "chains": 1}))


@pytest.mark.timeout(120)
@FAST
@given(arrays=datasets(max_n=12), options=_model_options(within=True), backend=st.sampled_from(APPROXIMATIONS))
def test_generated_data_and_models_fit_or_refuse(arrays, options, backend):
    _check_fit(arrays, options, backend, _few(backend))


@pytest.mark.timeout(120)
@FAST
@given(arrays=datasets(sizes=[5]), options=_model_options(within=True), backend=st.sampled_from(SAMPLERS))
def test_samplers_on_generated_data_fit_or_refuse(arrays, options, backend):
    _check_fit(arrays, options, backend, _few(backend))


@pytest.mark.slow
@pytest.mark.timeout(1800)
@settings(SLOW, max_examples=1000)
@given(arrays=datasets(max_n=30), options=ANY_OPTIONS, backend=st.sampled_from(APPROXIMATIONS))
def test_generated_data_and_models_fit_or_refuse_many(arrays, options, backend):
    _check_fit(arrays, options, backend, _few(backend))


@pytest.mark.slow
@pytest.mark.timeout(1800)
@settings(SLOW, max_examples=150)
@given(arrays=datasets(sizes=[1, 2, 7, 16]), options=_model_options(within=True), backend=st.sampled_from(SAMPLERS))
def test_samplers_on_generated_data_fit_or_refuse_many(arrays, options, backend):
    _check_fit(arrays, options, backend, _few(backend))


# ------------------------------------------------------------------------------------------------ backend options
def _small():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(8, 2))
    return {"X": X, "y": (X[:, 0] > 0).astype(float), "X_test": None, "y_test": None}


OPTION_VALUES = st.one_of(JUNK, st.sampled_from([0, 1, 2, 5, 50, 0.5, 1e-3, 1e-12, 1e-300, 1.0, 2.0, 1e6, 1e300,
                                                 -1, (0.5, 2.0), (1e-3, 1e3), (2.0, 0.5), [0.0, 0.5, 1.0],
                                                 "power", "linear", "geometric", "cosine"]))
SMALL_COUNTS = st.sampled_from([1, 2, 3, 10, 0, -1, 2.5, True, None, "5"])   # iteration caps kept short
OPTION_NAMES = {b: sorted(bz.registry.get(GPC(), b).options) for b in APPROXIMATIONS + SAMPLERS}
COUNT_OPTIONS = {"max_iter", "max_sweeps", "min_sweeps", "thin", "n_temps", "n_steps"}


@st.composite
def backend_options(draw, backends):
    backend = draw(st.sampled_from(backends))
    names = draw(st.lists(st.sampled_from(OPTION_NAMES[backend]), max_size=3, unique=True))
    return backend, {name: draw(SMALL_COUNTS if name in COUNT_OPTIONS else OPTION_VALUES) for name in names}


def _check_backend_options(backend, options, likelihood):
    """Wrong option values are refused with a ValueError naming one of them (before any work); others fit."""
    try:
        model = GPC(likelihood=likelihood)
        bz.registry.get(model, backend).resolve(options, model, _dataset(_small()))
    except ValueError as exc:
        assert not isinstance(exc, np.linalg.LinAlgError)
        assert any(name in str(exc) for name in options), (options, str(exc))
        return
    _check_fit(_small(), {"likelihood": likelihood}, backend, {**_few(backend), **options})


@pytest.mark.timeout(120)
@FAST
@given(choice=backend_options(APPROXIMATIONS), likelihood=st.sampled_from(LIKELIHOODS))
def test_backend_option_values(choice, likelihood):
    _check_backend_options(*choice, likelihood)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@settings(SLOW, max_examples=300)
@given(choice=backend_options(APPROXIMATIONS + SAMPLERS), likelihood=st.sampled_from(LIKELIHOODS))
def test_backend_option_values_many(choice, likelihood):
    _check_backend_options(*choice, likelihood)


# ------------------------------------------------------------------------------------------------ predict / score
@pytest.fixture(scope="module")
def fitted():
    data = _dataset(_small())
    model = GPC(log_lengthscale=0.5)
    return model, data, bz.fit(model, data, "ep", draws=5, chains=1, progress=False)


X_NEW = st.one_of(
    st.builds(lambda n, d, e: np.random.default_rng(n).normal(size=(n, d)) * 10.0 ** e,
              st.integers(0, 6), st.integers(1, 3), st.integers(-300, 300)),
    st.sampled_from([np.array([[np.nan, 0.0]]), np.array([[np.inf, 0.0]]), np.zeros(2), np.zeros((2, 2, 2)),
                     "x", None, [[0.0, 1.0]], [[0.0, "a"]]]))


def _check_predict(fitted, X_new, other):
    """Predictions at any input, and with any model: finite probabilities or a ValueError; a model with other
    options than the fit's refuses it."""
    model, data, fit = fitted
    try:
        user = GPC(**other)
    except ValueError:
        return
    p = _strict(lambda: user.predict(fit, X_new))
    if user.spec() != model.spec():
        assert p is None
    if p is not None:
        assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))
    s = _strict(lambda: user.score(fit, data))
    if s is not None:
        assert all(np.isfinite(s[k]) for k in ("error_rate", "log_pred", "info_bits"))


OTHER_MODELS = st.one_of(st.just({"log_lengthscale": 0.5}), _model_options(within=True))


@pytest.mark.timeout(60)
@FAST
@given(X_new=X_NEW, other=OTHER_MODELS)
def test_predict_and_score_inputs(fitted, X_new, other):
    _check_predict(fitted, X_new, other)


@pytest.mark.slow
@pytest.mark.timeout(900)
@settings(SLOW, max_examples=300)
@given(X_new=X_NEW, other=OTHER_MODELS)
def test_predict_and_score_inputs_many(fitted, X_new, other):
    _check_predict(fitted, X_new, other)


# ------------------------------------------------------------------------------------------------ loaders
LOADER_OPTIONS = st.fixed_dictionaries({}, optional={"seed": st.one_of(st.integers(-3, 2**40), JUNK),
                                                     "test_fraction": st.one_of(st.floats(-1, 2), JUNK),
                                                     "standardize": st.one_of(st.booleans(), JUNK)})


def _check_loader(options):
    try:
        data = gpc_data.crabs(**options)
    except ValueError as exc:
        assert any(name in str(exc) for name in options), (options, str(exc))
        return
    assert np.all(np.isfinite(data.X)) and data.n > 0


@pytest.mark.timeout(60)
@FAST
@given(options=LOADER_OPTIONS)
def test_loader_options(options):
    _check_loader(options)


@pytest.mark.slow
@pytest.mark.timeout(600)
@settings(SLOW, max_examples=200)
@given(options=LOADER_OPTIONS)
def test_loader_options_many(options):
    _check_loader(options)
