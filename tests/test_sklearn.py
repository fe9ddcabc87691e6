"""The scikit-learn estimators (bayeszoo.sklearn): scikit-learn's own estimator checks, predictions equal to the
model's on the same fit, Pipeline and GridSearchCV, DataFrames, and bad input refused before any inference."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import bayeszoo as bz
from bayeszoo.inference.rvm import core as rvm_common
from bayeszoo.sklearn import (AdaptiveRelevanceVectorRegressor, BayesGPClassifier, PMKLClassifier,
                              RelevanceVectorClassifier, RelevanceVectorRegressor)
from bayeszoo.workers import XLA_ONE_THREAD

# The checks fit each estimator some fifty times on problems of up to 300 points. These settings keep that quick:
# EM instead of the fast RVM for regression (the checks' 10-dimensional data with width 1 keep every basis
# function, where the sequential algorithm needs hundreds of actions), fewer VB iterations and posterior draws for
# PMKL (its predictions average over the draws), and a small adaptive RVM (Algorithm 1's cost grows with the bases
# and candidates). Every check passes with these settings; none is expected to fail.
CHECKED = [
    RelevanceVectorRegressor(backend="em"),
    RelevanceVectorClassifier(),
    BayesGPClassifier(),
    PMKLClassifier(backend_options={"max_iter": 10, "draws": 20, "chains": 1}),
    AdaptiveRelevanceVectorRegressor(n_basis=5, backend_options={"n_candidates": 10, "max_iter": 10,
                                                                 "joint_iter": 10, "candidate_iter": 5,
                                                                 "draws": 100, "chains": 2}),
]


@parametrize_with_checks(CHECKED)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def sinc():
    return bz.datasets.load("sinc", n=60, seed=0)


@pytest.fixture(scope="module")
def ripley():
    return bz.datasets.load("ripley")


@pytest.fixture(scope="module")
def iris():
    return bz.datasets.load("iris")


# ----------------------------------------------------------------------------- predictions are the model's
def test_regressor_predictions_are_the_models_on_the_same_fit(sinc):
    est = RelevanceVectorRegressor(width=3.0, seed=4).fit(sinc.X, sinc.y)
    model = bz.models.RVM(task="regression", width=3.0)
    fit = bz.fit(model, sinc, "fast", seed=4, progress=False)
    assert est.model_ == model
    assert est.fit_.backend == "fast" and est.fit_.info["seed"] == 4
    np.testing.assert_array_equal(est.predict(sinc.X_test), model.predict(fit, sinc.X_test))
    mean, std = est.predict(sinc.X_test, return_std=True)
    np.testing.assert_array_equal(std, model.predict_std(fit, sinc.X_test))
    assert np.all(std > 0)
    # a good fit of sinc on its test set, with few relevance vectors; the bias may be the one more relevant basis
    assert np.mean((mean - sinc.y_test) ** 2) < 0.02
    n_vectors = est.relevance_vectors_.size
    assert 3 <= n_vectors < 20
    assert model.n_relevant(fit) - n_vectors in (0, 1)
    # scikit-learn's score is R^2 on the given data
    resid = np.sum((sinc.y_test - mean) ** 2)
    r2 = 1.0 - resid / np.sum((sinc.y_test - sinc.y_test.mean()) ** 2)
    assert est.score(sinc.X_test, sinc.y_test) == pytest.approx(r2, rel=1e-12)
    assert r2 > 0.95


def test_backend_options_and_counts_reach_bz_fit(sinc):
    est = RelevanceVectorRegressor(width=3.0, backend="em",
                                   backend_options={"max_iter": 3, "draws": 20, "chains": 2}).fit(sinc.X, sinc.y)
    assert est.fit_.idata.posterior["w"].shape[:2] == (2, 20)
    assert est.fit_.info["iterations"] == 3 and est.fit_.info["settings"]["max_iter"] == 3
    fit = bz.fit(bz.models.RVM(width=3.0), sinc, "em", max_iter=3, draws=20, chains=2, seed=0, progress=False)
    np.testing.assert_array_equal(est.predict(sinc.X), fit.model().predict(fit, sinc.X))


@pytest.mark.parametrize("make, model, backend, counts", [
    (lambda: RelevanceVectorClassifier(width=0.5), bz.models.RVM(task="classification", width=0.5), "fast", {}),
    (lambda: BayesGPClassifier(log_lengthscale=-1.0), bz.models.GPC(log_lengthscale=-1.0), "ep", {}),
    # PMKL's predictions average over draws: fewer of them keep its 1000 test points quick
    (lambda: PMKLClassifier(backend_options={"draws": 40, "chains": 1}), bz.models.PMKL(), "vb",
     {"draws": 40, "chains": 1}),
])
def test_binary_classifiers_predict_the_models_probabilities(ripley, make, model, backend, counts):
    # string labels: classes_ keeps them, the model sees 0 / 1 in the same (sorted) order
    labels = np.where(ripley.y == 1, "pos", "neg")
    est = make().fit(ripley.X, labels)
    fit = bz.fit(model, ripley, backend, seed=0, progress=False, **counts)
    assert list(est.classes_) == ["neg", "pos"]
    p = model.predict(fit, ripley.X_test)
    p1 = p if p.ndim == 1 else p[:, 1]
    proba = est.predict_proba(ripley.X_test)
    np.testing.assert_array_equal(proba[:, 1], p1)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-12)
    pred = est.predict(ripley.X_test)
    np.testing.assert_array_equal(pred, np.where(p1 > 0.5, "pos", "neg"))
    # Ripley's synthetic problem: the Bayes error is about 8 %, these models reach 8-11 % on its test set
    accuracy = est.score(ripley.X_test, np.where(ripley.y_test == 1, "pos", "neg"))
    assert accuracy == pytest.approx(np.mean(pred == np.where(ripley.y_test == 1, "pos", "neg")))
    assert 0.87 < accuracy < 0.93


def test_pmkl_classifier_is_multiclass_with_column_sources(iris):
    names = np.array(["setosa", "versicolor", "virginica"])
    sources = ({"name": "sepal", "columns": [0, 1]}, {"name": "petal", "columns": [2, 3]})
    counts = {"draws": 40, "chains": 1}
    est = PMKLClassifier(sources=sources, backend_options=counts).fit(iris.X, names[iris.y.astype(int)])
    model = bz.models.PMKL(sources=sources)
    fit = bz.fit(model, iris, "vb", seed=0, progress=False, **counts)
    np.testing.assert_array_equal(est.predict_proba(iris.X), model.predict(fit, iris.X))
    assert list(est.classes_) == list(names)
    assert est.score(iris.X, names[iris.y.astype(int)]) > 0.9
    # the petal measurements separate the species; the convex weights say so
    beta = est.fit_.idata.posterior["beta"].mean(("chain", "draw"))
    assert float(beta.sel(source="petal")) > float(beta.sel(source="sepal"))


def test_binary_classifiers_refuse_several_classes_and_compose_with_one_vs_rest(iris):
    with pytest.raises(ValueError, match="Only binary classification is supported.*PMKLClassifier"):
        RelevanceVectorClassifier().fit(iris.X, iris.y)
    with pytest.raises(ValueError, match="Only binary classification is supported"):
        BayesGPClassifier().fit(iris.X, iris.y)
    ovr = OneVsRestClassifier(BayesGPClassifier(backend="laplace")).fit(iris.X, iris.y)
    assert len(ovr.estimators_) == 3
    assert ovr.score(iris.X, iris.y) > 0.9
    np.testing.assert_allclose(ovr.predict_proba(iris.X).sum(1), 1.0)


def test_adaptive_rvm_regressor_is_the_models_fit(sinc):
    est = AdaptiveRelevanceVectorRegressor(n_basis=10, seed=2).fit(sinc.X, sinc.y)
    model = bz.models.ARVM(n_basis=10)
    fit = bz.fit(model, sinc, "arvm", seed=2, progress=False)
    np.testing.assert_array_equal(est.predict(sinc.X_test), model.predict(fit, sinc.X_test))
    # a handful of adapted Gaussians fit sinc (noise sd 0.1) with R^2 about 0.97 on the noise-free test curve
    assert est.score(sinc.X_test, sinc.y_test) > 0.95
    assert 3 <= model.n_relevant(fit) <= 10


# --------------------------------------------------------------------------------- Pipeline, GridSearchCV
def test_pipeline_and_grid_search_choose_a_sensible_width(sinc):
    # after StandardScaler, sinc's inputs have unit sd (range about +-1.7): a width of 0.01 sees one point per
    # basis function and 20 is nearly constant across the data, so cross-validation must pick 0.5
    pipe = make_pipeline(StandardScaler(), RelevanceVectorRegressor())
    search = GridSearchCV(pipe, {"relevancevectorregressor__width": [0.01, 0.5, 20.0]},
                          cv=KFold(3, shuffle=True, random_state=0))
    search.fit(sinc.X, sinc.y)
    assert search.best_params_ == {"relevancevectorregressor__width": 0.5}
    # held-out R^2 on noisy targets (noise sd 0.1 against a signal of sd about 0.3): about 0.6 for 0.5, below 0
    # for the two others
    scores = search.cv_results_["mean_test_score"]
    assert scores[1] > 0.5 and scores[1] > max(scores[0], scores[2]) + 0.5
    assert search.score(sinc.X_test, sinc.y_test) > 0.95
    # the refitted pipeline's regressor saw the scaled inputs
    scaler, reg = search.best_estimator_[0], search.best_estimator_[-1]
    np.testing.assert_array_equal(search.predict(sinc.X_test), reg.predict(scaler.transform(sinc.X_test)))


def test_grid_search_over_a_classifier(ripley):
    search = GridSearchCV(BayesGPClassifier(backend="laplace"), {"log_lengthscale": [-4.0, -1.0, 3.0]}, cv=3)
    search.fit(ripley.X, ripley.y)
    assert search.best_params_ == {"log_lengthscale": -1.0}
    assert search.score(ripley.X_test, ripley.y_test) > 0.88


# -------------------------------------------------------------------------------------------- DataFrames
def test_dataframes_give_feature_names_and_the_same_predictions(ripley):
    frame = pd.DataFrame(ripley.X, columns=["xs", "ys"])
    labels = pd.Series(ripley.y.astype(int), name="class")
    est = RelevanceVectorClassifier(width=0.5).fit(frame, labels)
    plain = RelevanceVectorClassifier(width=0.5).fit(ripley.X, ripley.y.astype(int))
    assert list(est.feature_names_in_) == ["xs", "ys"] and est.n_features_in_ == 2
    assert not hasattr(plain, "feature_names_in_")
    test = pd.DataFrame(ripley.X_test, columns=["xs", "ys"])
    np.testing.assert_array_equal(est.predict_proba(test), plain.predict_proba(ripley.X_test))
    np.testing.assert_array_equal(est.predict(test), plain.predict(ripley.X_test))
    assert est.predict(test).dtype == labels.dtype
    with pytest.raises(ValueError, match="feature names"):
        est.predict(test[["ys", "xs"]])


# ------------------------------------------------------------------------------------------- bad input
@pytest.fixture
def no_inference(monkeypatch):
    """Fails the test if the RVM's type-II backends (em, fast) start."""
    def refuse(*args, **kwargs):
        raise AssertionError("the backend ran on input that should have been refused")

    monkeypatch.setattr(rvm_common, "run_type2", refuse)


@pytest.mark.parametrize("est, X, y, match", [
    (RelevanceVectorRegressor(), [[0.0], [np.nan], [2.0]], [0.0, 1.0, 2.0], "NaN"),
    (RelevanceVectorRegressor(), [[0.0], [1.0], [2.0]], [0.0, 1.0], "inconsistent numbers of samples"),
    (RelevanceVectorRegressor(), [[0.0]], [1.0], "1 sample"),
    (RelevanceVectorRegressor(width=-1.0), [[0.0], [1.0]], [0.0, 1.0], "width"),
    (RelevanceVectorRegressor(kernel="cubic"), [[0.0], [1.0]], [0.0, 1.0], "kernel"),
    (RelevanceVectorRegressor(backend="nonesuch"), [[0.0], [1.0]], [0.0, 1.0], "nonesuch"),
    (RelevanceVectorRegressor(backend_options={"max_iters": 5}), [[0.0], [1.0]], [0.0, 1.0], "max_iters"),
    (RelevanceVectorRegressor(backend_options=[("max_iter", 5)]), [[0.0], [1.0]], [0.0, 1.0], "dict"),
    (RelevanceVectorRegressor(backend_options={"seed": 1}), [[0.0], [1.0]], [0.0, 1.0], "seed"),
    (RelevanceVectorRegressor(backend_options={1: 5}), [[0.0], [1.0]], [0.0, 1.0], "option names"),
    (RelevanceVectorRegressor(seed=-1), [[0.0], [1.0]], [0.0, 1.0], "seed"),
    (RelevanceVectorRegressor(), [[0.0], [1.0]], [1e200, 0.0], "targets"),
    (RelevanceVectorClassifier(), [[0.0], [1.0], [2.0]], [0.0, 0.5, 1.0], "Unknown label type"),
    (RelevanceVectorClassifier(), [[0.0], [1.0], [2.0]], ["a", "a", "a"], "only one class"),
    (RelevanceVectorClassifier(), [[0.0], [1.0], [2.0]], ["a", "b", "c"], "Only binary"),
    (RelevanceVectorClassifier(link="cauchit"), [[0.0], [1.0]], [0, 1], "link"),
])
def test_bad_input_is_a_value_error_before_any_inference(no_inference, est, X, y, match):
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)
    assert not hasattr(est, "fit_") and not hasattr(est, "model_")


def test_prediction_input_is_checked(sinc):
    est = RelevanceVectorRegressor(width=3.0).fit(sinc.X, sinc.y)
    with pytest.raises(ValueError, match="features"):
        est.predict(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="NaN"):
        est.predict([[np.nan]])
    with pytest.raises(ValueError, match="2D array"):
        est.predict(np.zeros(3))


def test_clone_and_set_params_rebuild_the_model(sinc):
    est = RelevanceVectorRegressor(width=3.0, backend_options={"max_iter": 50})
    copy = clone(est).set_params(width=1.5)
    assert est.width == 3.0 and copy.backend_options == {"max_iter": 50}
    copy.fit(sinc.X, sinc.y)
    assert copy.model_.width == 1.5 and copy.fit_.info["settings"]["max_iter"] == 50
    assert copy.get_params()["width"] == 1.5


def test_default_width_is_scale_resolved_from_the_training_inputs(ripley):
    est = RelevanceVectorClassifier().fit(ripley.X, ripley.y.astype(int))
    assert est.width == "scale" and est.model_.width == "scale"
    # SVC's gamma="scale" = 1 / (n_features X.var()) as a width: sqrt(n_features X.var())
    assert float(est.fit_.idata.constant_data["kernel_width"]) == np.sqrt(ripley.d * np.var(ripley.X))
    assert RelevanceVectorRegressor().get_params()["width"] == "scale"


def test_evidence_width_is_chosen_at_fit_and_is_the_model_at_that_number(sinc):
    est = RelevanceVectorRegressor(width="evidence").fit(sinc.X, sinc.y)
    h = float(est.fit_.idata.constant_data["kernel_width"])
    assert est.width == "evidence" and est.model_.width == "evidence"
    assert h == est.model_.evidence_search(sinc.X, sinc.y)[0]
    np.testing.assert_allclose(est.predict(sinc.X_test), RelevanceVectorRegressor(width=h).fit(sinc.X, sinc.y)
                               .predict(sinc.X_test), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match=r"RelevanceVectorClassifier: width must be a finite number > 0 or one of "
                                         r"\('scale', 'evidence'\); got 'evidense'"):
        RelevanceVectorClassifier(width="evidense").fit(sinc.X, sinc.y > 0)


def test_gp_classifier_default_lengthscale_is_scale_resolved_from_the_training_inputs(ripley):
    X, y = ripley.X[::3], ripley.y[::3].astype(int)
    est = BayesGPClassifier().fit(X, y)
    assert est.log_lengthscale == "scale" and est.model_.log_lengthscale == "scale"
    # SVC's gamma="scale" = 1 / (n_features X.var()) as an SE lengthscale: ell^2 = n_features X.var() / 2
    log_ell = float(est.fit_.idata.constant_data["log_lengthscale"])
    assert log_ell == 0.5 * np.log(ripley.d * np.var(X) / 2)
    np.testing.assert_array_equal(est.predict_proba(X[:10]),
                                  BayesGPClassifier(log_lengthscale=log_ell).fit(X, y).predict_proba(X[:10]))
    with pytest.raises(ValueError, match=r"BayesGPClassifier: log_lengthscale must be a finite number in \[-20, 20\] "
                                         r"or 'scale'"):
        BayesGPClassifier(log_lengthscale="auto").fit(X, y)


@pytest.mark.slow
def test_default_classifier_is_as_good_as_svc_on_breast_cancer():
    # with the former default width 1 (too narrow for 30 standardised features) this scored 0.845
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import cross_val_score

    X, y = load_breast_cancer(return_X_y=True)
    scores = cross_val_score(make_pipeline(StandardScaler(), RelevanceVectorClassifier()), X[:200], y[:200], cv=3)
    assert scores.mean() >= 0.94


# ------------------------------------------------------------------------------- under an address-space cap
CAP = 6 * 2**30     # 6 GiB of address space (ulimit -v), as a small container or a shared machine gives
#: what importing bayeszoo, JAX (with XLA's first reservation) and scikit-learn may reserve under the cap, one
#: thread each (THREAD_PINNING); the checks below are meaningful while it leaves most of the cap
IMPORT_FLOOR = 3 * 2**30

THREAD_PINNING = {"MALLOC_ARENA_MAX": "2", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                  "MKL_NUM_THREADS": "1",
                  "XLA_FLAGS": XLA_ONE_THREAD}

_CAPPED = """
import resource, sys, warnings
warnings.simplefilter("ignore")

def vm_size():
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize"))

cap, room = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
import jax.numpy as jnp
import numpy as np
import bayeszoo.sklearn as wrappers
from sklearn.utils.estimator_checks import check_estimator
jnp.ones(3).block_until_ready()
print("imported", vm_size(), flush=True)
if room:        # a lower cap: this many bytes above what the imports took
    resource.setrlimit(resource.RLIMIT_AS, (vm_size() + room, vm_size() + room))
"""


def _run_capped(code: str, room: int = 0, timeout: float = 600) -> tuple[int, list[str]]:
    """``code`` after the imports in a fresh interpreter whose address space is capped at :data:`CAP` (with
    ``room``, then at ``room`` bytes above what the imports took): (the imports' address space, the output lines
    after them). A failure shows its traceback."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])),
           # address space reserved per core (malloc arenas, BLAS and XLA thread stacks) grows with the machine's
           # cores: one thread each, so the cap measures the arrays, on 2 cores or 64
           **THREAD_PINNING}
    done = subprocess.run([sys.executable, "-c", _CAPPED + code, str(CAP), str(room)], capture_output=True,
                          text=True, timeout=timeout, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    return int(lines[0].split()[1]), lines[1:]


def test_pmkl_classifier_fits_in_a_gib_above_its_imports():
    """JAX and XLA reserve address space at import: that floor leaves most of a 6 GiB cap. Then with the default
    4 x 1,000 draws on 150 objects of 3 classes, the log likelihood's quadrature all at once took arrays of
    4,000 draws x 150 x 20 nodes x 3 x 3 (824 MiB each, 3 GiB in all); in blocks the fit takes a few hundred MiB."""
    floor, lines = _run_capped("""
rng = np.random.default_rng(0)
X, y = rng.standard_normal((150, 20)), np.arange(150) % 3
est = wrappers.PMKLClassifier(backend_options={"max_iter": 5}).fit(X, y)
print("ok", est.fit_.idata.log_likelihood["y"].shape, est.predict_proba(X[:3]).sum(axis=1).round(6).tolist())
""", room=2**30)
    assert 0 < floor < IMPORT_FLOOR
    assert lines == ["ok (4, 1000, 150) [1.0, 1.0, 1.0]"]


@pytest.mark.slow
def test_sklearn_estimators_pass_check_estimator_under_a_6_gib_cap():
    """scikit-learn's checks as a user runs them, under ulimit -v 6 GiB: PMKLClassifier with its defaults (VB, 4 x
    1,000 draws: its log likelihood on 300 x 20 took 6.4 GB at once) and the others as the checks above run them."""
    configured = ", ".join(repr(est) for est in CHECKED)
    floor, lines = _run_capped(f"""
from bayeszoo.sklearn import *
for est in [PMKLClassifier(), {configured}]:
    check_estimator(est)
    print("passed", type(est).__name__, flush=True)
""", timeout=3600)
    assert floor < IMPORT_FLOOR
    assert lines == [f"passed {name}" for name in ["PMKLClassifier", *(type(est).__name__ for est in CHECKED)]]
