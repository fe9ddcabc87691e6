"""Property-based tests of the sparse linear model family (``SLM``): generated measurement problems (n = 2 to 64
unknowns, m = 1 to 40 measurements, fewer or more than the unknowns; X and y at scales over many orders of
magnitude, constant and zero columns, duplicated rows; ``meta["u_shape"]`` right and wrong, ``meta["true_u"]``
present or not, ``meta["B"]`` for ``B="meta"``), generated model options (potentials, scales, operators and
wavelet depths that do or do not divide the signal, and wrong values or types) and backend options, through
``bz.fit`` with the hand-written backends (``map``, ``sbl``, ``dloop``, ``ep``, ``gibbs``; few iterations and
draws), ``predict`` and ``score``. Whatever is generated, the answer is a fit with finite draws, predictions and
scores, or a plain ValueError raised by bayeszoo that says what is wrong: never another exception type, never a
NumPy / SciPy / PyLops error passing through, never NaN, never a hang.

Also: with Gaussian potentials on well-conditioned measurements, ``dloop`` and ``ep`` give the closed-form posterior
mean at any scale of X, y, sigma2 and tau (1e-40 to 1e40 each); the information gain of ``bz.design`` on ``ep`` and
``dloop`` fits is finite and >= 0 for generated candidate filters and blocks (exact and by Lanczos), and candidates
of the wrong shape are refused. The last section keeps the problems these properties found as plain tests.

The default suite runs a few derandomised examples per property (``FAST``); ``make test-slow`` runs many random
ones (``SLOW``) with larger iteration budgets.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, strategies as st

import bayeszoo as bz
from bayeszoo import design
from bayeszoo.datasets import Dataset
from bayeszoo.models.slm import SLM
from tests.helpers.properties import FAST, SLOW, refuses_clearly

BACKENDS = ("map", "sbl", "dloop", "ep", "gibbs")
POTENTIALS = ("laplace", "student", "logistic", "gaussian")
OPERATORS = ("identity", "tv", "wavelet", "wavelet+tv", "meta")
NAN, INF = float("nan"), float("inf")


def refusal(call, what: str = ""):
    """``(call(), None)``, or ``(None, message)`` after a clear refusal (as in :func:`refuses_clearly`)."""
    said = []

    def noting():
        try:
            return call()
        except ValueError as exc:
            said.append(str(exc))
            raise
    out = strictly_refuses(noting, what)
    return out, (said[-1] if out is None else None)


def strictly_refuses(call, what: str = ""):
    """:func:`refuses_clearly` with the ValueError raised in bayeszoo's own code."""
    return refuses_clearly(call, what, from_bayeszoo=True)


# ------------------------------------------------------------------------------------------- strategies
#: powers of ten: mostly near unit scale, often far from it, sometimes anywhere in double precision's range
EXPONENTS = st.sampled_from([3] * 6 + [40] * 3 + [300]).flatmap(lambda e: st.integers(-e, e))
powers = lambda lo, hi: st.integers(lo, hi).map(lambda e: 10.0 ** e)   # noqa: E731
#: sizes whose signals (and 8 x 8 images) the wavelet transform takes at its default depth
WAVELET_SIZES = (8, 12, 16, 24, 32, 40, 64)


def _image_shapes(n):
    return [(r, n // r) for r in range(1, n + 1) if n % r == 0]


@st.composite
def u_shapes(draw, n):
    """``meta["u_shape"]``: absent, (n,), an image r x c = n (1 x n and n x 1 too), or one that does not hold n."""
    kind = draw(st.sampled_from(["absent"] * 3 + ["signal"] * 2 + ["image"] * 2 + ["wrong"]))
    if kind == "absent":
        return None
    if kind == "signal":
        return (n,)
    if kind == "image":
        return draw(st.sampled_from(_image_shapes(n)))
    return draw(st.sampled_from([(n + 1,), (2, n), (n - 1, 1), (0,), (n, 1, 1), (), (-n,), "x", [[n]]]))


@st.composite
def measurement_matrices(draw, m, n, scale):
    """An (m, n) measurement matrix at ``scale``: Gaussian, with constant or zero columns and duplicated rows."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.standard_normal((m, n)) * scale
    for j in range(n):
        if draw(st.sampled_from([False] * 7 + [True])):
            X[:, j] = draw(st.sampled_from([0.0, 0.0, 1.0, -3.5, 1e10])) * draw(st.sampled_from([1.0, scale]))
    if m > 1 and draw(st.booleans()):
        k = draw(st.integers(1, m - 1))
        X[m - k:] = X[:k]                                           # duplicated rows
    return X


@st.composite
def meta_B(draw, n):
    """``meta["B"]`` for ``B="meta"``: absent, a random matrix (possibly of low rank), or of the wrong shape or
    with NaN."""
    kind = draw(st.sampled_from(["absent"] + ["random"] * 4 + ["low rank", "wrong columns", "nan", "vector"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    q = draw(st.integers(1, 2 * n))
    if kind == "absent":
        return None
    if kind == "random":
        return rng.standard_normal((q, n)) * 10.0 ** draw(st.integers(-3, 3))
    if kind == "low rank":
        return np.outer(rng.standard_normal(q), rng.standard_normal(n))
    if kind == "wrong columns":
        return rng.standard_normal((q, n + 1))
    if kind == "nan":
        return np.full((q, n), NAN)
    return rng.standard_normal(n)


@st.composite
def slm_problems(draw, max_n=40, max_m=40):
    """A Dataset for the SLM (or None when Dataset itself refused the arrays, e.g. after an overflow)."""
    n = draw(st.one_of(st.integers(2, max_n), st.sampled_from(WAVELET_SIZES)))
    m = draw(st.integers(1, max_m))
    x_scale = 10.0 ** draw(EXPONENTS)
    X = draw(measurement_matrices(m, n, x_scale))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    u = np.where(rng.random(n) < 0.3, rng.laplace(size=n), 0.0) * 10.0 ** draw(EXPONENTS)   # a sparse signal
    kind = draw(st.sampled_from(["measured", "measured", "noise", "constant", "zero"]))
    noise = 10.0 ** draw(EXPONENTS)
    with np.errstate(all="ignore"):
        y = {"measured": X @ u + noise * rng.standard_normal(m), "noise": noise * rng.standard_normal(m),
             "constant": np.full(m, noise), "zero": np.zeros(m)}[kind]
        X_test = y_test = None
        if draw(st.booleans()):
            k = draw(st.integers(1, 6))
            X_test = draw(measurement_matrices(k, n, x_scale))
            y_test = X_test @ u + noise * rng.standard_normal(k)
    meta = {"task": draw(st.sampled_from(["regression"] * 19 + ["classification"]))}
    shape = draw(u_shapes(n))
    if shape is not None:
        meta["u_shape"] = shape
    truth = draw(st.sampled_from(["absent"] * 3 + ["present"] * 4 + ["wrong size"]))
    if truth == "present":
        image = isinstance(shape, tuple) and len(shape) == 2 and shape[0] * shape[1] == n
        meta["true_u"] = u.reshape(shape) if image else u
    elif truth == "wrong size":
        meta["true_u"] = np.append(u, 1.0)
    B = draw(meta_B(n))
    if B is not None:
        meta["B"] = B
    return strictly_refuses(lambda: Dataset(X=X, y=y, X_test=X_test, y_test=y_test, name="generated", meta=meta),
                           "dataset")


WRONG_NUMBERS = st.sampled_from([0, 0.0, -1.0, -1e-300, NAN, INF, -INF, "1", None, True, [1.0], {"a": 1},
                                 np.float64(NAN), 1j])
VALID_MODEL_OPTIONS = {
    "potential": st.sampled_from(POTENTIALS),
    "tau": EXPONENTS.map(lambda e: 10.0 ** e),
    "tau_tv": st.one_of(st.none(), EXPONENTS.map(lambda e: 10.0 ** e)),
    "nu": st.one_of(st.floats(0.5, 30.0), EXPONENTS.map(lambda e: 10.0 ** e)),
    "sigma2": EXPONENTS.map(lambda e: 10.0 ** e),
    "B": st.sampled_from(OPERATORS),
    "wavelet_level": st.one_of(st.none(), st.integers(1, 4)),
}
WRONG_MODEL_OPTIONS = {
    "potential": st.sampled_from(["cauchy", "Laplace", "", None, 3, ["laplace"]]),
    "B": st.sampled_from(["curvelet", "wavelet + tv", "TV", None, 0, ("identity",)]),
    "wavelet_level": st.sampled_from([0, -1, 2.5, "2", True, NAN]),
}


@st.composite
def model_options(draw, valid=VALID_MODEL_OPTIONS):
    """SLM options, each present or not; about one time in five one of them gets a wrong value or type."""
    options = draw(st.fixed_dictionaries({}, optional=valid))
    if draw(st.sampled_from([False] * 4 + [True])):
        name = draw(st.sampled_from(sorted(valid)))
        options[name] = draw(WRONG_MODEL_OPTIONS.get(name, WRONG_NUMBERS))
    return options


def backend_options(fast: bool):
    """The backends' options, valid (iteration budgets kept small in the default suite) and, one time in five, one
    of them wrong; one time in ten an option the backend does not have."""
    cap = 30 if fast else 300
    budget = lambda hi: st.integers(1, min(hi, cap))        # noqa: E731
    tols = powers(-12, -1)
    valid = {
        "map": {"solver": st.sampled_from(["auto", "fista", "admm", "lbfgs"]), "max_iter": budget(5000),
                "tol": tols, "rho": st.one_of(st.none(), powers(-6, 6))},
        "sbl": {"max_iter": budget(1000), "tol": tols, "learn_noise": st.booleans(),
                "prune": st.one_of(powers(1, 14), powers(1, 300))},
        "dloop": {"n_outer": st.integers(1, 5), "n_inner": budget(30), "lanczos_k": st.integers(1, 70),
                  "exact_variances": st.booleans(), "outer_tol": tols, "inner_tol": tols, "cg_tol": tols,
                  "cg_max_iter": budget(300)},
        "ep": {"eta": st.floats(0.05, 1.0), "damping": st.floats(0.0, 0.9), "max_sweeps": budget(200),
               "tol": tols, "schedule": st.sampled_from(["sweep", "selective"])},
        "gibbs": {"solver": st.sampled_from(["auto", "cholesky", "cg"]), "thin": st.integers(1, 3), "cg_tol": tols},
    }
    # (an integer budget of 10**30 is valid: it asks for a run that does not end, so it is not among these)
    wrong = st.one_of(WRONG_NUMBERS, st.sampled_from(["newton", 1e30, 2.5, 1.5, -2, 1e400, 0.999e-300]))

    #: the iteration budgets are always given in the default suite (the defaults run up to 1000 iterations)
    budgets = {"map": ["max_iter"], "sbl": ["max_iter"], "ep": ["max_sweeps"]} if fast else {}

    @st.composite
    def build(draw, backend):
        required = {k: v for k, v in valid[backend].items() if k in budgets.get(backend, [])}
        optional = {k: v for k, v in valid[backend].items() if k not in required}
        options = draw(st.fixed_dictionaries(required, optional=optional))
        if draw(st.sampled_from([False] * 4 + [True])):
            options[draw(st.sampled_from(sorted(valid[backend])))] = draw(wrong)
        if draw(st.sampled_from([False] * 9 + [True])):
            options["colour"] = "red"
        return options
    return build


def count_options(backend):
    """Few draws and chains (the approximations' draws are i.i.d.; Gibbs runs a short chain)."""
    tune = st.integers(0, 5) if backend == "gibbs" else st.just(0)
    return st.fixed_dictionaries({"draws": st.integers(1, 5), "chains": st.integers(1, 2), "tune": tune})


# ------------------------------------------------------------------------------------------- checks
def _new_inputs(data, rng):
    """Rows to predict at: the test rows, or perturbed training rows at the training scale."""
    if data.has_test:
        return data.X_test
    k = int(rng.integers(1, 4))
    rows = data.X[np.arange(k) % data.n]
    scale = float(np.max(np.abs(data.X))) or 1.0
    return rows + 0.1 * scale * rng.standard_normal(rows.shape)


def _check_fit(model, data, fit, counts):
    """A fit's draws, predictions and scores are finite (or the score refuses a wrong meta['true_u'])."""
    u = np.asarray(fit.posterior["u"].values)
    assert u.shape == (counts["chains"], counts["draws"], data.d)
    assert np.all(np.isfinite(u))
    X_new = _new_inputs(data, np.random.default_rng(0))
    pred = strictly_refuses(lambda: model.predict(fit, X_new), "predict")
    assert pred is not None, "predict refused rows of the training shape"
    assert pred.shape == (X_new.shape[0],) and np.all(np.isfinite(pred)), pred
    score = strictly_refuses(lambda: model.score(fit, data), "score")
    true_u = data.meta.get("true_u")
    if true_u is not None and (np.size(true_u) != data.d or np.max(np.abs(true_u)) > 1e100):
        assert score is None, "a meta['true_u'] of the wrong size or beyond |u| = 1e100 must be refused"
        return
    assert score is not None, "score refused the data the model was fitted to"
    keys = {"mse"} if true_u is None else {"mse", "l2_error"} if not np.any(true_u) else {"mse", "l2_error",
                                                                                          "rel_error"}
    assert set(score) == keys, score
    assert all(isinstance(v, float) and not math.isnan(v) and v >= 0 for v in score.values()), score
    assert math.isfinite(score["mse"]) and math.isfinite(score.get("l2_error", 0.0)), score
    if not math.isfinite(score.get("rel_error", 0.0)):         # only when the ratio leaves double precision
        assert score["l2_error"] > 1e300 * np.max(np.abs(true_u)), score


def _fit_or_refuse(data, options, backend, counts, backend_options, seed=0):
    """Model, fit, predict and score; a refused model or backend option is named in the refusal."""
    if data is None:
        return None
    model, why = refusal(lambda: SLM(**options), "SLM")
    if model is None:
        assert any(f" {name} " in why for name in options), why
        return None
    assert bz.models.from_spec(model.spec()) == model                # what was accepted rebuilds from its spec
    resolved, why = refusal(lambda: bz.registry.get(model, backend).resolve(backend_options, model, data))
    if resolved is None:                                             # a backend that does not apply, or an option
        assert f"{backend!r}" in why and (backend in ("gibbs", "dloop") or any(name in why for name in
                                                                                  backend_options)), why
    fit = strictly_refuses(lambda: bz.fit(model, data, backend, seed=seed, progress=False, **counts,
                                         **backend_options), f"fit {backend}")
    assert resolved is not None or fit is None, "bz.fit ran with options its backend refuses"
    if fit is not None:
        _check_fit(model, data, fit, counts)
    return fit


# ------------------------------------------------------------------------------------------- fits
FAST_OPTIONS = backend_options(fast=True)
SLOW_OPTIONS = backend_options(fast=False)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
@FAST
@given(data=st.data())
def test_generated_problems_fit_or_refuse(backend, data):
    _fit_or_refuse(data.draw(slm_problems()), data.draw(model_options()), backend, data.draw(count_options(backend)),
                   data.draw(FAST_OPTIONS(backend)), data.draw(st.integers(0, 10**6)))


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("backend", BACKENDS)
@SLOW
@given(data=st.data())
def test_generated_problems_fit_or_refuse_many(backend, data):
    _fit_or_refuse(data.draw(slm_problems()), data.draw(model_options()), backend, data.draw(count_options(backend)),
                   data.draw(SLOW_OPTIONS(backend)), data.draw(st.integers(0, 10**6)))


# ------------------------------------------------------------------------------------------- exact at any scale
@st.composite
def gaussian_problems(draw):
    """Gaussian potentials (B = I) on well-conditioned measurements (m >= n + 2 Gaussian rows), X, y, sigma2 and tau
    each at a scale from 1e-40 to 1e40: the posterior is Gaussian, with mean and covariance in closed form."""
    n = draw(st.integers(1, 12))
    m = n + draw(st.integers(2, 10))
    ex, ey, es, et = (draw(st.integers(-40, 40)) for _ in range(4))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    data = Dataset(X=rng.standard_normal((m, n)) * 10.0 ** ex, y=rng.standard_normal(m) * 10.0 ** ey,
                   name="generated", meta={"task": "regression"})
    return SLM(potential="gaussian", tau=10.0 ** et, sigma2=10.0 ** es), data


def _exact_at_any_scale(problem):
    """``dloop`` (exact and Lanczos variances) and ``ep`` are exact for Gaussian potentials: their mean, and the
    double loop's marginal variances where it says they are exact, equal the closed form A^-1 X^T y / sigma2,
    diag A^-1 (A = X^T X / sigma2 + tau I) to 1e-6, whatever the scales."""
    model, data = problem
    cho = sla.cho_factor(data.X.T @ data.X / model.sigma2 + model.tau * np.eye(data.d))
    mean = sla.cho_solve(cho, data.X.T @ data.y / model.sigma2)
    variances = np.diag(sla.cho_solve(cho, np.eye(data.d)))
    for backend, options in (("dloop", {"exact_variances": True}), ("dloop", {}), ("ep", {})):
        fit = bz.fit(model, data, backend, draws=2, chains=1, progress=False, **options)
        np.testing.assert_allclose(model.posterior_mean(fit), mean, rtol=1e-6, atol=1e-6 * np.max(np.abs(mean)))
        if backend == "dloop" and fit.info["variances_exact"]:   # Lanczos may stop early in a smaller space
            np.testing.assert_allclose(fit.idata["gaussian"]["q_var"].values, variances, rtol=1e-6)


@pytest.mark.timeout(60)
@FAST
@given(problem=gaussian_problems())
def test_gaussian_potentials_are_exact_at_any_scale(problem):
    _exact_at_any_scale(problem)


@pytest.mark.slow
@pytest.mark.timeout(900)
@SLOW
@given(problem=gaussian_problems())
def test_gaussian_potentials_are_exact_at_any_scale_many(problem):
    _exact_at_any_scale(problem)


# ------------------------------------------------------------------------------------------- predict inputs
@pytest.fixture(scope="module")
def small_fit():
    data = bz.datasets.load("slm_signal", kind="spikes", n=16, m=8, sigma2=0.01, seed=1)
    model = SLM(tau=2.0, sigma2=0.01)
    return model, data, bz.fit(model, data, "map", progress=False)


X_NEW = st.one_of(
    st.builds(lambda k, e: np.random.default_rng(k).standard_normal((k, 16)) * 10.0 ** e, st.integers(1, 4),
              st.integers(-40, 40)),
    st.sampled_from([np.zeros(16), np.zeros((2, 15)), np.zeros((2, 16, 1)), np.zeros((0, 16)),
                     np.full((1, 16), NAN), np.full((2, 16), INF), "x", None, [[0.0] * 15 + ["a"]], 3.0]))
OTHER_MODELS = st.sampled_from([None, {"tau": 1.0}, {"B": "tv"}, {"potential": "student"}])


def _predict_inputs(small_fit, X_new, other):
    """Predictions at any input: finite, or a ValueError; a model with other options refuses the fit."""
    model, data, fit = small_fit
    user = model if other is None else SLM(**{"tau": 2.0, "sigma2": 0.01, **other})
    pred = strictly_refuses(lambda: user.predict(fit, X_new), "predict")
    if other is not None:
        assert pred is None, "a fit made with other options must be refused"
        assert strictly_refuses(lambda: user.score(fit, data)) is None
    if pred is not None:
        assert np.all(np.isfinite(pred)) and pred.shape == (np.asarray(X_new).shape[0],)


@pytest.mark.timeout(60)
@FAST
@given(X_new=X_NEW, other=OTHER_MODELS)
def test_predict_inputs_of_any_kind(small_fit, X_new, other):
    _predict_inputs(small_fit, X_new, other)


@pytest.mark.slow
@pytest.mark.timeout(600)
@SLOW
@given(X_new=X_NEW, other=OTHER_MODELS)
def test_predict_inputs_of_any_kind_many(small_fit, X_new, other):
    _predict_inputs(small_fit, X_new, other)


# ------------------------------------------------------------------------------------------- information gain
@st.composite
def candidate_sets(draw, n):
    """Candidates for ``information_gain``: (c, n) filters or (c, r, n) blocks at a scale over many orders of
    magnitude, with zero rows; or an input of the wrong shape or with NaN (``bad`` True)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    c, r = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    scale = 10.0 ** draw(st.one_of(st.integers(-3, 3), st.integers(-100, 100)))
    kind = draw(st.sampled_from(["filters", "filters", "blocks", "blocks", "wrong"]))
    if kind != "wrong":
        C = rng.standard_normal((c, n) if kind == "filters" else (c, r, n)) * scale
        if draw(st.booleans()):
            C[0] = 0.0                                                  # a filter that measures nothing
        return C, False
    bad = draw(st.sampled_from(["columns", "vector", "empty", "empty block", "4-d", "nan", "inf", "text", "ragged"]))
    return {"columns": rng.standard_normal((c, n + 1)), "vector": rng.standard_normal(n),
            "empty": np.zeros((0, n)), "empty block": np.zeros((c, 0, n)), "4-d": np.zeros((c, r, n, 1)),
            "nan": np.full((c, n), NAN), "inf": np.full((c, r, n), INF), "text": [["a"] * n],
            "ragged": [[0.0] * n, [0.0] * (n - 1)]}[bad], True


@st.composite
def design_problems(draw, max_n=16):
    """A valid Laplace / logistic / Gaussian SLM problem and the Gaussian-approximation backend to fit it."""
    n = draw(st.one_of(st.integers(2, max_n), st.sampled_from([8, 16])))
    m = draw(st.integers(1, 12))
    X = draw(measurement_matrices(m, n, 10.0 ** draw(st.integers(-3, 3))))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    data = Dataset(X=X, y=rng.standard_normal(m) * 10.0 ** draw(st.integers(-3, 3)), name="generated",
                   meta={"task": "regression"})
    model = SLM(potential=draw(st.sampled_from(["laplace", "logistic", "gaussian"])), tau=draw(powers(-2, 2)),
                sigma2=draw(powers(-4, 1)),
                B=draw(st.sampled_from(["identity", "tv"] + (["wavelet+tv"] if n in WAVELET_SIZES else []))))
    backend = draw(st.sampled_from(["ep", "dloop"]))
    options = {"ep": {"max_sweeps": 20}, "dloop": {"exact_variances": draw(st.booleans())}}[backend]
    return model, data, backend, options


def _information_gain(problem, candidates, lanczos_k):
    model, data, backend, options = problem
    fit = strictly_refuses(lambda: bz.fit(model, data, backend, draws=2, chains=1, progress=False, **options),
                          f"design fit {backend}")
    if fit is None:
        return
    C, bad = candidates
    gains, why = refusal(lambda: design.information_gain(model, data, fit, C, lanczos_k=lanczos_k), "gain")
    if bad:
        assert gains is None, "candidates of the wrong shape or with NaN must be refused"
        return
    k_ok = lanczos_k is None or (isinstance(lanczos_k, int) and not isinstance(lanczos_k, bool) and lanczos_k >= 1)
    if not k_ok:
        assert gains is None and "lanczos_k" in why, why
    elif gains is None:            # only a precision matrix too badly conditioned to factorise may be refused
        assert "not positive definite in double precision" in why, why
    else:
        assert gains.shape == (C.shape[0],)
        assert np.all(np.isfinite(gains)) and np.all(gains >= 0), gains
        if not np.any(C[0]):
            assert gains[0] == 0.0                                      # a filter that measures nothing gains nothing


LANCZOS_K = st.one_of(st.none(), st.integers(1, 20), st.sampled_from([0, -1, 2.5, "3", True]))


@pytest.mark.timeout(120)
@FAST
@given(problem=design_problems(), data=st.data(), lanczos_k=LANCZOS_K)
def test_information_gain_is_finite_and_non_negative(problem, data, lanczos_k):
    _information_gain(problem, data.draw(candidate_sets(problem[1].d)), lanczos_k)


@pytest.mark.slow
@pytest.mark.timeout(1200)
@SLOW
@given(problem=design_problems(max_n=40), data=st.data(), lanczos_k=LANCZOS_K)
def test_information_gain_is_finite_and_non_negative_many(problem, data, lanczos_k):
    _information_gain(problem, data.draw(candidate_sets(problem[1].d)), lanczos_k)


# ------------------------------------------------------------------------------------------- found by the above
def _regression(X, y, **meta):
    return Dataset(X=X, y=y, name="found", meta={"task": "regression", **meta})


@pytest.mark.parametrize("shape", [[[12]], "x", (3.5, 4.2)])
def test_a_u_shape_that_is_not_integers_is_named(shape):
    # a nested list or a string raised TypeError / int()'s ValueError, floats were truncated silently
    with pytest.raises(ValueError, match=r"meta\['u_shape'\] must be a tuple of one or two positive integers"):
        SLM().validate(_regression(np.ones((2, 12)), np.ones(2), u_shape=shape))


@pytest.mark.parametrize("backend", ["sbl", "gibbs", "ep", "dloop"])
def test_a_precision_matrix_beyond_double_precision_is_refused_by_name(backend):
    # rank-deficient measurements at 1e40: the Cholesky factor failed with NumPy's LinAlgError
    rng = np.random.default_rng(1)
    X = rng.standard_normal((7, 6)) * 1e40
    X[:, 2] = -3.5e40
    X[4:] = X[:3]
    options = {"exact_variances": True} if backend == "dloop" else {}
    with pytest.raises(ValueError, match=f"'{backend}': the posterior precision matrix is not positive definite in "
                                         f"double precision"):
        bz.fit(SLM(), _regression(X, rng.standard_normal(7)), backend, draws=2, chains=1, progress=False, **options)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")        # the overflow itself, before it is reported
def test_overflowing_lanczos_variances_and_cg_draws_are_refused_by_name():
    # both returned NaN draws (the Lanczos norms of A v overflow at |X| ~ 3e92; tau_tv = 1e299 in the CG products)
    rng = np.random.default_rng(0)
    data = _regression(rng.standard_normal((29, 16)) * 3e92, np.zeros(29), u_shape=(16, 1))
    with pytest.raises(ValueError, match="'dloop': the Lanczos variance estimates left double precision"):
        bz.fit(SLM(potential="gaussian", B="tv"), data, "dloop", draws=2, chains=1, progress=False, lanczos_k=10)
    data = _regression(rng.standard_normal((26, 12)) * 3e3, rng.standard_normal(26) * 4e4)
    with pytest.raises(ValueError, match="'gibbs': a CG draw of u left double precision"):
        bz.fit(SLM(potential="gaussian", B="tv", tau_tv=1e299, sigma2=10.0), data, "gibbs", draws=2, chains=1,
               progress=False, solver="cg")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_ep_skips_site_updates_that_overflow():
    # Student's t sites at measurements ~1e37 overflowed to inf and NaN reached the Cholesky factor
    rng = np.random.default_rng(107)
    n = int(rng.integers(4, 16))
    m = int(rng.integers(n, 40))
    X = rng.standard_normal((m, n)) * 10.0 ** rng.integers(0, 10)
    y = rng.standard_normal(m) * 10.0 ** rng.integers(20, 60)
    model = SLM(potential="student")
    fit = bz.fit(model, _regression(X, y), "ep", draws=2, chains=1, progress=False, max_sweeps=30)
    assert fit.info["converged"] and fit.info["skipped_updates"] > 0
    assert np.all(np.isfinite(fit.posterior["u"].values)) and np.isfinite(model.score(fit, _regression(X, y))["mse"])


def test_scores_of_a_zero_a_tiny_and_a_huge_true_signal():
    # a zero signal's rel_error was ||E u|| * 1e300; a tiny one's ratio is reported as it is; |u| > 1e100 is refused
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((5, 8)), rng.standard_normal(5)
    fit = bz.fit(SLM(), _regression(X, y), "map", progress=False)
    mean = SLM().posterior_mean(fit)
    zero = SLM().score(fit, _regression(X, y, true_u=np.zeros(8)))
    assert set(zero) == {"mse", "l2_error"} and zero["l2_error"] == pytest.approx(np.linalg.norm(mean), rel=1e-12)
    tiny = SLM().score(fit, _regression(X, y, true_u=np.full(8, 1e-300)))
    assert tiny["rel_error"] == pytest.approx(np.linalg.norm(mean) / (np.sqrt(8) * 1e-300), rel=1e-12)
    with pytest.raises(ValueError, match=r"meta\['true_u'\] reaches 1e\+200"):
        SLM().score(fit, _regression(X, y, true_u=np.full(8, 1e200)))


def test_an_indefinite_lanczos_tridiagonal_is_refused_by_name():
    # one measurement with an entry of 1e10: T = Q^T A Q lost definiteness to rounding (NumPy's LinAlgError)
    X = np.random.default_rng(0).standard_normal((1, 30))
    X[0, 0] = 1e10
    data = _regression(X, np.random.default_rng(0).standard_normal(1))
    fit = bz.fit(SLM(), data, "ep", draws=2, chains=1, progress=False, max_sweeps=20)
    candidates = np.random.default_rng(0).standard_normal((1, 30))
    with pytest.raises(ValueError, match="Lanczos tridiagonal matrix is not positive definite in double precision"):
        design.information_gain(SLM(), data, fit, candidates, lanczos_k=2)
    exact = design.information_gain(SLM(), data, fit, candidates)
    assert exact.shape == (1,) and np.isfinite(exact[0]) and exact[0] > 0


@pytest.mark.parametrize("sigma2", [1e-150, 1e-227])
def test_newton_and_quasi_newton_steps_at_a_tiny_noise_variance(sigma2):
    # dloop: CG's inner products overflowed, the fallback step sent u to ~1e218 and the inner loop took the increase
    # of its objective for convergence; map (L-BFGS-B): its products of gradients overflowed and it stopped at u = 0
    rng = np.random.default_rng(0)
    data = _regression(rng.standard_normal((25, 8)) * 1e3, rng.standard_normal(25))
    model = SLM(potential="gaussian", tau=1e3, sigma2=sigma2)
    exact, _ = model.gaussian_posterior(data)
    fit = bz.fit(model, data, "dloop", draws=2, chains=1, progress=False, exact_variances=True)
    np.testing.assert_allclose(model.posterior_mean(fit), exact, rtol=1e-8)
    fit = bz.fit(model, data, "map", progress=False)
    assert fit.info["converged"] and fit.info["iterations"] > 1
    np.testing.assert_allclose(model.posterior_mean(fit), exact, rtol=1e-6)
