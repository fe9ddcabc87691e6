"""Property-based tests of the RVM and adaptive-kernel RVM families: generated datasets (sizes, scales over many
orders of magnitude, offsets, constant columns, duplicated rows, labels), model options (including wrong types),
backend options and prediction inputs go through ``bz.fit``, ``predict`` and ``score``. Every input either fits with
finite results or is refused with a ValueError that says what is wrong; no other exception, no hang.

The default suite runs a few derandomised examples per property (``FAST``); ``make test-slow`` runs many random
ones (``SLOW``), including the Gibbs sampler on generated sizes.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import bayeszoo as bz
from bayeszoo.datasets import Dataset
from bayeszoo.models import ARVM, RVM

from tests.helpers.properties import FAST, SLOW, fits_or_refuses, refuses_clearly

#: small settings of Algorithm 1, so that one generated fit takes a fraction of a second
ARVM_SMALL = dict(n_candidates=5, candidate_iter=2, joint_iter=5, max_iter=4, patience=2, hyper_sweeps=3)
QUIET = dict(progress=False, seed=0)


# ------------------------------------------------------------------------------------------- strategies
#: powers of ten: mostly near unit scale, often far from it, sometimes anywhere in double precision's range
exponents = st.one_of(st.integers(-3, 3), st.integers(-120, 120), st.integers(-300, 300))
wrong_types = st.sampled_from(["3", None, True, [1.0], {"a": 1}, float("nan"), float("inf"), -1.0, 0, 1e308])


@st.composite
def inputs(draw, n, d):
    """An (n, d) input matrix: Gaussian at a generated scale and offset, with constant columns and duplicated rows."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.normal(size=(n, d)) * 10.0 ** draw(exponents)
    if draw(st.booleans()):
        X = X + 10.0 ** draw(exponents)                         # far from the origin
    for j in range(d):
        if draw(st.sampled_from([False, False, False, False, True])):
            X[:, j] = draw(st.sampled_from([0.0, 1.0, -3.5, 1e10]))  # a constant column
    if n > 2 and draw(st.booleans()):
        k = draw(st.integers(1, n - 1))
        X[n - k:] = X[:k]                                          # duplicated rows
    return X


def _test_part(rng, X, y, d):
    n_test = int(rng.integers(0, 7))
    if not n_test:
        return None, None
    rows = np.arange(n_test) % X.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        return X[rows] + rng.normal(size=(n_test, d)) * np.std(X), y[rows]


@st.composite
def regression_sets(draw, n=None, max_n=25, max_d=3):
    n = draw(st.integers(1, max_n)) if n is None else n
    d = draw(st.integers(1, max_d))
    X = draw(inputs(n, d))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["smooth", "smooth", "noise", "constant", "zero"]))
    with np.errstate(over="ignore", invalid="ignore"):
        z = np.nan_to_num((X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0))
    y = {"smooth": np.sin(2 * z[:, 0]) + 0.1 * rng.normal(size=n), "noise": rng.normal(size=n),
         "constant": np.full(n, 2.0), "zero": np.zeros(n)}[kind]
    y = y * 10.0 ** draw(exponents) + (10.0 ** draw(exponents) if draw(st.booleans()) else 0.0)
    return _dataset(X, y, *_test_part(rng, X, y, d), "regression")


@st.composite
def classification_sets(draw, n=None, max_n=25, max_d=3):
    n = draw(st.integers(2, max_n)) if n is None else n
    d = draw(st.integers(1, max_d))
    X = draw(inputs(n, d))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    labels = (rng.normal(size=n) + X[:, 0] - X[:, 0].mean() > 0).astype(float)
    labels[:2] = [0.0, 1.0]
    coding = draw(st.sampled_from(["01"] * 6 + ["one class", "-1/1", "0/1/2", "bool"]))
    y = {"01": labels, "one class": np.zeros(n), "-1/1": 2 * labels - 1, "0/1/2": labels + (np.arange(n) % 3 == 2),
         "bool": labels.astype(bool)}[coding]
    return _dataset(X, y, *_test_part(rng, X, y, d), "classification")


def _dataset(X, y, X_test, y_test, task):
    return fits_or_refuses(lambda: Dataset(X, y, X_test, y_test, name="generated", meta={"task": task}))


def options_with_one_wrong(valid: dict, wrong=wrong_types):
    """Generated options (each present or not); about one time in five one option gets a wrong type or value."""
    @st.composite
    def build(draw):
        options = draw(st.fixed_dictionaries({}, optional=valid))
        if draw(st.sampled_from([False, False, False, False, True])):
            options[draw(st.sampled_from(sorted(valid)))] = draw(wrong)
        return options
    return build()


powers = lambda lo, hi: st.integers(lo, hi).map(lambda e: 10.0 ** e)   # noqa: E731

#: RVM options other than task, link and width (the width is drawn relative to the inputs)
rvm_options = options_with_one_wrong({
    "kernel": st.sampled_from(["gauss", "gauss", "gauss", "bspline", "poly", "sigmoid", "linear"]),
    "degree": st.integers(1, 8), "offset": st.floats(-5, 5), "bias": st.booleans(),
    "a": st.one_of(powers(-4, 1), powers(-60, 60)), "b": st.one_of(powers(-4, 1), powers(-60, 60)),
    "c": st.one_of(powers(-4, 1), powers(-60, 60)), "d": st.one_of(powers(-4, 1), powers(-60, 60))},
    wrong=st.one_of(wrong_types, st.just("rbf")))

arvm_options = options_with_one_wrong({
    "kernel": st.sampled_from(["iso", "diag"]),
    "sparsity": st.one_of(st.sampled_from(["none", "aic", "bic", "ric", "BIC"]), st.floats(0, 20)),
    "n_basis": st.integers(1, 6), "feature_selection": st.booleans(),
    "width_range": st.tuples(st.floats(1e-4, 0.1), st.floats(0.2, 3.0)),
    "min_width": st.one_of(st.just("spacing"), st.floats(0, 1)), "a": st.floats(1e-3, 10)},
    wrong=st.one_of(wrong_types, st.sampled_from(["full", "aicc", (0.5, 0.1), (0.1, 0.2, 0.3)])))


@st.composite
def widths(draw, data):
    """Mostly near the inputs' scale, sometimes anywhere."""
    with np.errstate(over="ignore", invalid="ignore"):
        spread = float(np.std(data.X)) if data is not None else 1.0
    spread = spread if np.isfinite(spread) and spread > 0 else 1.0
    if draw(st.sampled_from([True, True, True, False])):
        return spread * 10.0 ** draw(st.floats(-1.5, 1.5))
    return 10.0 ** draw(exponents)


# ------------------------------------------------------------------------------------------- checks
def _check_fit(model, data, fit):
    """A fit's predictions and scores are finite, or refused with a clear ValueError."""
    X_new = data.X_test if data.has_test else data.X[:3]
    pred = refuses_clearly(lambda: model.predict(fit, X_new), "predict")
    if pred is not None:
        assert pred.shape == (X_new.shape[0],) and np.all(np.isfinite(pred))
        if model.is_classifier:
            assert np.all((pred >= 0) & (pred <= 1))
    score = refuses_clearly(lambda: model.score(fit, data), "score")
    if score is not None:
        assert all(np.isfinite(v) for v in score.values()), score


def _fit(model, data, backend, **kwargs):
    fit = refuses_clearly(lambda: bz.fit(model, data, backend, **QUIET, **kwargs), f"fit {backend}")
    if fit is not None:
        _check_fit(model, data, fit)
    return fit


def _model(cls, options):
    return refuses_clearly(lambda: cls(**options), cls.__name__)


# ------------------------------------------------------------------------------------------- RVM
@pytest.mark.timeout(120)
@FAST
@given(data=regression_sets(), options=rvm_options, backend=st.sampled_from(["em", "fast", "vb"]), draw=st.data())
def test_rvm_regression_fits_or_refuses(data, options, backend, draw):
    model = _model(RVM, {"width": draw.draw(widths(data)), **options})
    if model is not None and data is not None:
        _fit(model, data, backend, draws=20, chains=1)


@pytest.mark.timeout(120)
@FAST
@given(data=classification_sets(), options=rvm_options, link=st.sampled_from(["logit", "probit"]),
       backend=st.sampled_from(["em", "fast", "vb"]), draw=st.data())
def test_rvm_classification_fits_or_refuses(data, options, link, backend, draw):
    model = _model(RVM, {"width": draw.draw(widths(data)), **options, "task": "classification", "link": link})
    if model is not None and data is not None:
        _fit(model, data, backend, draws=20, chains=1)


@pytest.mark.timeout(180)
@FAST
@given(data=st.one_of(regression_sets(n=10), classification_sets(n=10)), draw=st.data())
def test_rvm_gibbs_fits_or_refuses(data, draw):
    """Gibbs at one size (one compiled sampler per size): a proper weight prior, so that a refusal means the inputs."""
    if data is None:
        return
    model = RVM(task=data.task, link="probit", width=draw.draw(widths(data)), a=1.0, b=1e-2)
    _fit(model, data, "gibbs", draws=20, tune=10, chains=1)


BACKEND_OPTIONS = {
    "em": {"update": st.sampled_from(["em", "mackay"]), "max_iter": st.integers(1, 300), "tol": powers(-10, -1),
           "prune_alpha": powers(3, 15), "init_alpha": st.one_of(st.none(), powers(-5, 5)),
           "init_beta": st.one_of(st.none(), powers(-5, 5))},
    "fast": {"max_iter": st.integers(1, 300), "tol": powers(-10, -1), "prune_alpha": powers(3, 15),
             "init_beta": st.one_of(st.none(), powers(-5, 5)), "beta_every": st.integers(1, 20),
             "joint_steps": st.booleans()},
    "vb": {"max_iter": st.integers(1, 300), "tol": powers(-12, -1)},
}
WRONG_OPTIONS = st.one_of(wrong_types, st.sampled_from(["newton", 1.5, -2, 10**30]))


@st.composite
def backend_options(draw, backends=("em", "fast", "vb")):
    backend = draw(st.sampled_from(backends))
    options = draw(options_with_one_wrong(BACKEND_OPTIONS[backend], WRONG_OPTIONS))
    if draw(st.sampled_from([False] * 9 + [True])):
        options["colour"] = "red"                                   # an option the backend does not have
    return backend, options


@pytest.mark.timeout(120)
@FAST
@given(choice=backend_options(), task=st.sampled_from(["regression", "classification"]))
def test_rvm_backend_options_fit_or_refuse(choice, task):
    backend, options = choice
    data = bz.datasets.load("sinc", n=15, n_test=5) if task == "regression" else \
        bz.datasets.load("gaussian_mixture", n_per_class=8, n_test_per_class=3)
    model = RVM(task=task, width=3.0 if task == "regression" else 0.5)
    _fit(model, data, backend, draws=10, chains=1, **options)


def _new_inputs():
    good = st.integers(1, 5).map(lambda n: np.linspace(-5, 5, n)[:, None])
    return st.one_of(good, good.map(lambda X: X * 1e200), good.map(lambda X: X + 1.7e9),
                     st.just(np.array([[np.nan]])), st.just(np.array([[np.inf], [0.0]])), st.just(np.zeros((3, 2))),
                     st.just(np.zeros((0, 1))), st.just(np.array(2.0)), st.just("x"), st.just([[1.0], ["a"]]),
                     st.just(None), st.just(np.zeros((2, 1, 1))))


@pytest.fixture(scope="module")
def sinc_fits():
    data = bz.datasets.load("sinc", n=15, n_test=5)
    mixture = bz.datasets.load("gaussian_mixture", n_per_class=8, n_test_per_class=3)
    fits = {}
    for task, d in (("regression", data), ("classification", mixture)):
        for kernel in ("gauss", "poly"):
            model = RVM(task=task, kernel=kernel, width=3.0)
            fits[task, kernel] = (model, bz.fit(model, d, "fast", draws=10, chains=1, **QUIET))
    return fits


@pytest.mark.timeout(60)
@FAST
@given(X_new=_new_inputs(), task=st.sampled_from(["regression", "classification"]),
       kernel=st.sampled_from(["gauss", "poly"]), other=st.sampled_from([None, "width", "task", "kernel"]))
def test_rvm_predict_fits_or_refuses(sinc_fits, X_new, task, kernel, other):
    model, fit = sinc_fits[task, kernel]
    if other == "width":
        model = RVM(task=task, kernel=kernel, width=1.0)
    elif other == "task":
        model = RVM(task="classification" if task == "regression" else "regression", kernel=kernel, width=3.0)
    elif other == "kernel":
        model = RVM(task=task, kernel="bspline", width=3.0)
    pred = refuses_clearly(lambda: model.predict(fit, X_new))
    if other is not None:
        assert pred is None, "a fit made with another model must be refused"
    if pred is not None:
        assert np.all(np.isfinite(pred)) and pred.shape == (np.asarray(X_new).shape[0],)


# ------------------------------------------------------------------------------------------- aRVM
@pytest.mark.timeout(120)
@FAST
@given(data=st.one_of(regression_sets(max_n=20), classification_sets(max_n=20)), options=arvm_options)
def test_arvm_fits_or_refuses(data, options):
    if data is None:
        return
    model = _model(ARVM, {**options, "task": data.task})
    if model is not None:
        _fit(model, data, "arvm", draws=10, chains=1, **ARVM_SMALL)


ARVM_OPTIONS = {"n_candidates": st.integers(1, 8), "candidate_iter": st.integers(0, 3),
                "joint_iter": st.integers(0, 5), "max_iter": st.integers(1, 5), "tol": powers(-8, 0),
                "patience": st.integers(1, 3), "prune_alpha": powers(3, 15),
                "alpha_update": st.sampled_from(["exact", "paper"]), "hyper_sweeps": st.integers(1, 5),
                "beta": st.one_of(st.none(), powers(-3, 3)), "init_beta": st.one_of(st.none(), powers(-3, 3)),
                "delta_max": powers(0, 8), "min_alpha": st.one_of(st.none(), powers(-4, 0)),
                "min_peak": st.floats(0, 0.99), "max_cost": st.one_of(powers(-4, 2)),
                "dictionary": st.one_of(st.none(), st.just((np.linspace(0, 1, 4), np.full(4, 0.3)))),
                "noise_whitener": st.one_of(st.none(), st.just(np.eye(20)))}
WRONG_ARVM_OPTIONS = st.one_of(WRONG_OPTIONS, st.sampled_from(
    ["mackay", (np.zeros((3, 2)), np.ones(3)), np.eye(3), "grid", (np.zeros(3), -np.ones(3))]))


@pytest.mark.timeout(120)
@FAST
@given(options=options_with_one_wrong(ARVM_OPTIONS, WRONG_ARVM_OPTIONS),
       task=st.sampled_from(["regression", "classification"]))
def test_arvm_backend_options_fit_or_refuse(options, task):
    data = bz.datasets.load("doppler", n=20) if task == "regression" else \
        bz.datasets.load("gaussian_mixture", n_per_class=10, n_test_per_class=3)
    _fit(ARVM(task=task, n_basis=4), data, "arvm", draws=5, chains=1, **{**ARVM_SMALL, **options})


@pytest.fixture(scope="module")
def arvm_fit():
    data = bz.datasets.load("doppler", n=20)
    model = ARVM(n_basis=4)
    return model, bz.fit(model, data, "arvm", draws=10, chains=1, **QUIET, **ARVM_SMALL)


@pytest.mark.timeout(60)
@FAST
@given(X_new=_new_inputs(), other=st.sampled_from([None, "sparsity", "task", "n_basis"]))
def test_arvm_predict_fits_or_refuses(arvm_fit, X_new, other):
    model, fit = arvm_fit
    if other is not None:
        model = ARVM(**{"sparsity": "aic"} if other == "sparsity" else
                     {"task": "classification", "n_basis": 4} if other == "task" else {"n_basis": 5})
    for predict in (model.predict, model.latent_mean):
        pred = refuses_clearly(lambda: predict(fit, X_new))
        if other is not None:
            assert pred is None, "a fit made with another model must be refused"
        if pred is not None:
            assert np.all(np.isfinite(pred)) and pred.shape == (np.asarray(X_new).shape[0],)


# ------------------------------------------------------------------------------------------- loaders
LOADERS = {
    "sinc": {"n": st.integers(-1, 50), "n_test": st.integers(-1, 50), "noise_sd": st.floats(-1, 1)},
    "doppler": {"n": st.integers(-1, 50), "noise_var": st.floats(-1, 1), "delta": st.floats(-1, 1)},
    "doppler2d": {"grid": st.integers(-1, 12), "train_fraction": st.floats(-0.5, 1.5), "noise_var": st.floats(-1, 1),
                  "delta": st.floats(-1, 1)},
    "sinc2d": {"grid": st.integers(-1, 12), "extent": st.floats(-5, 20), "noise_var": st.floats(-1, 1)},
    "gaussian_mixture": {"n_per_class": st.integers(-1, 30), "n_test_per_class": st.integers(-1, 30)},
}


@st.composite
def loader_calls(draw):
    name = draw(st.sampled_from(sorted(LOADERS)))
    options = draw(st.fixed_dictionaries({}, optional={**{k: st.one_of(v, wrong_types)
                                                           for k, v in LOADERS[name].items()},
                                                        "seed": st.one_of(st.integers(-1, 5), wrong_types)}))
    return name, options


@pytest.mark.timeout(60)
@FAST
@given(call=loader_calls(), direct=st.booleans())
def test_synthetic_loaders_load_or_refuse(call, direct):
    """Through bz.datasets.load and called directly: a Dataset of finite arrays, or a ValueError naming the option."""
    from bayeszoo.datasets import synthetic

    name, options = call
    loader = getattr(synthetic, name) if direct else (lambda **kw: bz.datasets.load(name, **kw))
    data = refuses_clearly(lambda: loader(**options), "load")
    if data is not None:
        assert data.n >= 1 and np.all(np.isfinite(data.X)) and np.all(np.isfinite(data.y))


# ------------------------------------------------------------------------------------------- slow set
@pytest.mark.slow
@pytest.mark.timeout(900)
@SLOW
@given(data=st.one_of(regression_sets(max_n=80, max_d=5), classification_sets(max_n=80, max_d=5)),
       options=rvm_options, link=st.sampled_from(["logit", "probit"]), backend=st.sampled_from(["em", "fast", "vb"]),
       draw=st.data())
def test_rvm_fits_or_refuses_slow(data, options, link, backend, draw):
    if data is None:
        return
    model = _model(RVM, {"width": draw.draw(widths(data)), **options, "task": data.task, "link": link})
    if model is not None:
        _fit(model, data, backend, draws=20, chains=2)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@SLOW
@given(data=st.one_of(regression_sets(n=12, max_d=3), classification_sets(n=12, max_d=3)), options=rvm_options,
       draw=st.data())
def test_rvm_gibbs_fits_or_refuses_slow(data, options, draw):
    """Any prior, including the nearly flat default: the sampler either fits or says why it left double precision."""
    if data is None:
        return
    model = _model(RVM, {"width": draw.draw(widths(data)), **options, "task": data.task, "link": "probit"})
    if model is not None:
        _fit(model, data, "gibbs", draws=20, tune=10, chains=2)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@SLOW
@given(data=st.one_of(regression_sets(max_n=60, max_d=5), classification_sets(max_n=60, max_d=5)),
       options=arvm_options)
def test_arvm_fits_or_refuses_slow(data, options):
    if data is None:
        return
    model = _model(ARVM, {**options, "task": data.task})
    if model is not None:
        _fit(model, data, "arvm", draws=10, chains=1, n_candidates=20, candidate_iter=5, joint_iter=20, max_iter=15,
             patience=3, hyper_sweeps=5)


@pytest.mark.slow
@pytest.mark.timeout(900)
@SLOW
@given(options=options_with_one_wrong(ARVM_OPTIONS, WRONG_ARVM_OPTIONS),
       task=st.sampled_from(["regression", "classification"]))
def test_arvm_backend_options_fit_or_refuse_slow(options, task):
    test_arvm_backend_options_fit_or_refuse.hypothesis.inner_test(options, task)


@pytest.mark.slow
@pytest.mark.timeout(900)
@SLOW
@given(X_new=_new_inputs(), task=st.sampled_from(["regression", "classification"]),
       kernel=st.sampled_from(["gauss", "poly"]), other=st.sampled_from([None, "width", "task", "kernel"]))
def test_rvm_predict_fits_or_refuses_slow(sinc_fits, X_new, task, kernel, other):
    test_rvm_predict_fits_or_refuses.hypothesis.inner_test(sinc_fits, X_new, task, kernel, other)


@pytest.mark.slow
@pytest.mark.timeout(900)
@SLOW
@given(X_new=_new_inputs(), other=st.sampled_from([None, "sparsity", "task", "n_basis"]))
def test_arvm_predict_fits_or_refuses_slow(arvm_fit, X_new, other):
    test_arvm_predict_fits_or_refuses.hypothesis.inner_test(arvm_fit, X_new, other)


@pytest.mark.slow
@pytest.mark.timeout(900)
@SLOW
@given(choice=backend_options(), task=st.sampled_from(["regression", "classification"]))
def test_rvm_backend_options_fit_or_refuse_slow(choice, task):
    test_rvm_backend_options_fit_or_refuse.hypothesis.inner_test(choice, task)


@pytest.mark.slow
@pytest.mark.timeout(900)
@SLOW
@given(call=loader_calls(), direct=st.booleans())
def test_synthetic_loaders_load_or_refuse_slow(call, direct):
    test_synthetic_loaders_load_or_refuse.hypothesis.inner_test(call, direct)


# ------------------------------------------------------------------------------------------- found by the above
@pytest.mark.parametrize("name, options, option", [
    ("sinc", {"noise_sd": 1e308}, "noise_sd"), ("doppler", {"delta": 1e308}, "delta"),
    ("doppler", {"delta": -0.5}, "delta"), ("sinc2d", {"extent": 1e308}, "extent"), ("sinc", {"n": "5"}, "n"),
    ("gaussian_mixture", {"n_per_class": 2.5}, "n_per_class"), ("sinc", {"noise_sd": -1.0}, "noise_sd"),
    ("doppler2d", {"grid": 2, "train_fraction": 0.1}, "train_fraction")])
def test_synthetic_loaders_name_the_option(name, options, option):
    # called directly, these raised TypeErrors, made NaN / inf data that Dataset refused without naming the option,
    # or (a negative noise sd) were accepted
    from bayeszoo.datasets import synthetic

    with pytest.raises(ValueError, match=f"^dataset '{name}': {option}"):
        getattr(synthetic, name)(**options)
