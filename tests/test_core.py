"""Harness contracts: Dataset checks, model options, Fit round trip, metrics on constructed draws."""
import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.catalogue import Reference
from bayeszoo.datasets import Dataset
from bayeszoo.diagnostics.metrics import reference_errors, sampling_diagnostics
from bayeszoo.results import build_fit
from bayeszoo.inference.approximations import GaussianApproximation


def _fit_from(model, data, draws, kind="mcmc", backend="constructed"):
    return build_fit(model, data, backend, kind, draws, timing={"sample": 2.0})


@pytest.fixture
def tiny():
    return bz.datasets.load("sinc", n=12, n_test=20, seed=1)


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("bad, message", [
    (dict(X=[[0.0], [np.nan]], y=[1.0, 2.0]), "X contains NaN"),
    (dict(X=[[0.0], [1.0]], y=[1.0, np.inf]), "y contains inf"),
    (dict(X=[[0.0], [1.0], [2.0]], y=[1.0, 2.0]), "3 rows but y has 2"),
    (dict(X=np.empty((0, 2)), y=[]), "empty"),
    (dict(X=[[0.0], [1.0]], y=[1.0, 2.0], X_test=[[0.0, 1.0]], y_test=[1.0]), "columns"),
    (dict(X=[[0.0], [1.0]], y=[1.0, 2.0], X_test=[[0.0]], y_test=[1.0, 2.0]), "X_test has 1 rows"),
    (dict(X=[["a"], ["b"]], y=[1.0, 2.0]), "numeric"),
])
def test_dataset_rejects_bad_arrays(bad, message):
    with pytest.raises(ValueError, match=message):
        Dataset(**bad)


def test_unknown_names_raise_before_any_work(tiny):
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        bz.datasets.load("nope")
    with pytest.raises(ValueError, match="does not take option"):
        bz.datasets.load("sinc", colour="red")
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        bz.fit(bz.models.RVM(), tiny, backend="nope")
    with pytest.raises(ValueError, match="draws must be an integer"):
        bz.fit(bz.models.RVM(), tiny, backend="em", draws=0)
    with pytest.raises(ValueError, match="unknown model family"):
        bz.models.from_spec({"family": "nope"})


@pytest.mark.parametrize("options, message", [
    (dict(task="ranking"), "task must be one of"),
    (dict(kernel="rbf2"), "kernel must be one of"),
    (dict(width=-1.0), "width must be a finite number > 0"),
    (dict(a=0.0), "a must be a finite number >= 1e-50"),
    (dict(link="cauchit"), "link must be one of"),
])
def test_rvm_options_are_checked(options, message):
    with pytest.raises(ValueError, match=message):
        bz.models.RVM(**options)


def test_classification_needs_binary_labels(tiny):
    X = np.linspace(0, 1, 6)[:, None]
    data = Dataset(X, [0, 1, 2, 0, 1, 2], name="three", meta={"task": "classification"})
    with pytest.raises(ValueError, match="binary labels 0/1"):
        bz.fit(bz.models.RVM(task="classification"), data, backend="nuts")
    one_class = Dataset(X, np.zeros(6), name="one", meta={"task": "classification"})
    with pytest.raises(ValueError, match="both classes"):
        bz.models.RVM(task="classification").validate(one_class)
    binary_regression = Dataset(X, [0, 1, 1, 0, 1, 0], name="reg", meta={"task": "regression"})
    with pytest.raises(ValueError, match="regression problem"):
        bz.models.RVM(task="classification").validate(binary_regression)


def test_model_spec_round_trips():
    model = bz.models.RVM(task="classification", kernel="bspline", width=0.7, link="probit", a=0.01)
    assert bz.models.from_spec(model.spec()) == model
    with pytest.raises(ValueError, match="no option"):
        bz.models.from_spec({**model.spec(), "colour": 1})


# ------------------------------------------------------------------------------------------ kernels
def test_kernels_exact_values():
    from bayeszoo.models.rvm import kernel_matrix

    X1, X2 = np.array([[0.0], [1.0]]), np.array([[0.0], [2.0]])
    np.testing.assert_allclose(kernel_matrix(X1, X2, "gauss", width=2.0),
                               np.exp(-np.array([[0.0, 4.0], [1.0, 1.0]]) / 4.0))
    np.testing.assert_allclose(kernel_matrix(X1, X2, "poly", degree=2, offset=1.0), [[1.0, 1.0], [1.0, 9.0]])
    # cubic B-spline: B3(0) = 2/3, B3(1) = 1/6, B3(2) = 0, and it integrates to 1
    np.testing.assert_allclose(kernel_matrix(X1, X2, "bspline", width=1.0), [[2 / 3, 0.0], [1 / 6, 1 / 6]])
    r = np.linspace(-2, 2, 4001)[:, None]
    assert abs(np.trapezoid(kernel_matrix(r, [[0.0]], "bspline", width=1.0)[:, 0], r[:, 0]) - 1.0) < 1e-6
    model = bz.models.RVM(width=2.0)
    Phi = model.design(X1, X2)
    assert Phi.shape == (2, 3) and np.all(Phi[:, 0] == 1.0)


# ------------------------------------------------------------------------------------------ Fit
def test_fit_save_load_round_trip(tmp_path, tiny):
    model = bz.models.RVM(width=3.0)
    rng = np.random.default_rng(0)
    M = model.n_basis(tiny)
    draws = {"w": rng.normal(size=(2, 30, M)), "log_alpha": rng.normal(size=(2, 30, M)),
             "log_beta": rng.normal(size=(2, 30))}
    fit = build_fit(model, tiny, "constructed", "approximation", draws, timing={"compile": 1.0, "sample": 0.5},
                   objective={"elbo": np.arange(5.0)}, info={"iterations": np.int64(5)})
    assert fit.timing["total"] == pytest.approx(1.5)
    path = fit.save(tmp_path / "f.nc")
    back = bz.load_fit(path)
    assert back.backend == "constructed" and back.kind == "approximation" and back.info["iterations"] == 5
    np.testing.assert_array_equal(back.posterior["w"].values, draws["w"])
    np.testing.assert_array_equal(back.idata.objective["elbo"].values, np.arange(5.0))
    assert back.model() == model
    assert back.posterior["w"].dims == ("chain", "draw", "basis")
    with pytest.raises(ValueError, match="missing.nc.* cannot be read as a saved fit: there is no such file"):
        bz.load_fit(tmp_path / "missing.nc")


def test_make_fit_insists_on_canonical_variables(tiny):
    model = bz.models.RVM()
    with pytest.raises(ValueError, match="canonical"):
        build_fit(model, tiny, "x", "mcmc", {"w": np.zeros((1, 2, model.n_basis(tiny)))}, timing={})


# ------------------------------------------------------------------------------------------ metrics
def test_reference_errors_in_reference_sd_units(tiny):
    model = bz.models.RVM()
    M = model.n_basis(tiny)
    rng = np.random.default_rng(3)
    base = rng.standard_normal((4, 4000, M))
    flat = base.reshape(-1, M)
    base = ((flat - flat.mean(0)) / flat.std(0, ddof=1)).reshape(base.shape)  # exactly mean 0, sd 1
    ref = {"w": 2.0 * base, "log_alpha": base, "log_beta": base[..., 0]}
    shifted = {"w": 2.0 * base + 1.0, "log_alpha": base, "log_beta": 3.0 * base[..., 0]}
    errs = reference_errors(_fit_from(model, tiny, shifted), Reference.from_fit(_fit_from(model, tiny, ref)),
                            ["w", "log_beta"])
    assert errs["mean_err"] == pytest.approx(0.5, abs=1e-9)   # shift 1 over reference sd 2
    assert errs["sd_err"] == pytest.approx(2.0, rel=1e-9)     # log_beta sd 3x the reference's


def test_sampling_diagnostics_known_answers(tiny):
    model = bz.models.RVM()
    M = model.n_basis(tiny)
    rng = np.random.default_rng(4)
    iid = {"w": rng.standard_normal((4, 1000, M)), "log_alpha": rng.standard_normal((4, 1000, M)),
           "log_beta": rng.standard_normal((4, 1000))}
    row = sampling_diagnostics(_fit_from(model, tiny, iid), ["w", "log_alpha", "log_beta"])
    assert 2500 < row["ess_bulk_median"] < 5500          # i.i.d. draws: ESS close to 4000
    assert row["rhat_max"] < 1.01
    assert row["ess_bulk_per_s"] == pytest.approx(row["ess_bulk_min"] / 2.0)
    stuck = dict(iid, w=iid["w"] + np.arange(4)[:, None, None])   # chains at different places
    assert sampling_diagnostics(_fit_from(model, tiny, stuck), ["w"])["rhat_max"] > 1.5
    approx = sampling_diagnostics(_fit_from(model, tiny, stuck, kind="approximation"), ["w"])
    assert np.isnan(approx["rhat_max"])                    # i.i.d. approximations are not judged by R-hat


@pytest.mark.parametrize("given", ["cov", "factor", "var", "sampler"])
def test_gaussian_approximation_draws_have_its_moments(given):
    rng = np.random.default_rng(0)
    mean = np.array([1.0, -1.0])
    cov = np.array([[2.0, 0.9], [0.9, 1.0]]) if given != "var" else np.diag([2.0, 1.0])
    L = np.linalg.cholesky(cov)
    how = {"cov": {"cov": cov}, "factor": {"factor": L}, "var": {"var": np.diag(cov)},
           "sampler": {"var": np.diag(cov), "sampler": lambda r, n: mean + r.standard_normal((n, 2)) @ L.T}}[given]
    q = GaussianApproximation("w", mean, **how)
    x = q.draws(rng, 50000, "toy")
    np.testing.assert_allclose(x.mean(0), mean, atol=0.03)    # 4 standard errors at most
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.04)
    np.testing.assert_allclose(q.variances(), np.diag(cov))


def test_cross_validate_checks_folds(tiny):
    with pytest.raises(ValueError, match="folds"):
        bz.cross_validate(bz.models.RVM(), tiny, backend="em", folds=1)
