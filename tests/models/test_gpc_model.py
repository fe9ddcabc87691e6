"""GPC declarations, kernels, prediction, scoring, datasets and the exact two-point posterior."""
import json

import numpy as np
import pytest
from scipy.special import log_ndtr, ndtr

import bayeszoo as bz
from bayeszoo.results import build_fit
from bayeszoo.models import from_spec
from bayeszoo.numerics import gp_kernels
from bayeszoo.models.gpc import (GPC, TWO_POINT_X, gp_conditional, log_predictive_probability, log_sig,
                                 predictive_probability, two_point_exact_moments)

from tests.helpers.declarations import declared_log_densities

KINDS = [(k, 2) for k in gp_kernels.KERNELS if k != "poly"] + [("poly", p) for p in (1, 2, 3)]


def _hyp(kind, d, rng):
    return rng.uniform(-0.6, 0.6, size=gp_kernels.n_hyp(kind, d))


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=12) > 0).astype(float)
    Xt = rng.normal(size=(7, 3))
    yt = (Xt[:, 0] > 0).astype(float)
    return bz.datasets.Dataset(X, y, Xt, yt, name="small", meta={"task": "classification"})


# ---- kernels ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, degree", KINDS)
def test_kernel_gradients_match_finite_differences(kind, degree):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(6, 3))
    hyp = _hyp(kind, 3, rng)
    grads = gp_kernels.kernel_grad(kind, X, hyp, degree)
    assert len(grads) == gp_kernels.n_hyp(kind, 3) == len(gp_kernels.hyp_names(kind, 3))
    h = 1e-6
    for j, G in enumerate(grads):
        e = np.zeros_like(hyp)
        e[j] = h
        fd = (gp_kernels.kernel_matrix(kind, X, X, hyp + e, degree)
              - gp_kernels.kernel_matrix(kind, X, X, hyp - e, degree)) / (2 * h)
        np.testing.assert_allclose(G, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kind, degree", KINDS)
def test_kernel_is_symmetric_psd_and_diag_matches(kind, degree):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 4))
    hyp = _hyp(kind, 4, rng)
    K = gp_kernels.kernel_matrix(kind, X, None, hyp, degree)
    np.testing.assert_allclose(K, K.T, atol=1e-12)
    assert np.linalg.eigvalsh(K).min() > -1e-9 * np.abs(K).max()
    np.testing.assert_allclose(gp_kernels.kernel_diag(kind, X, hyp, degree), np.diag(K), rtol=1e-12)
    Z = rng.normal(size=(5, 4))
    np.testing.assert_allclose(gp_kernels.kernel_matrix(kind, X, Z, hyp, degree),
                               gp_kernels.kernel_matrix(kind, Z, X, hyp, degree).T, atol=1e-12)


def test_kernel_formulas_at_a_point():
    x, z = np.array([[1.0, 2.0]]), np.array([[0.0, 0.5]])
    r = np.sqrt(1 + 2.25)
    ell, sf = 1.5, 0.7
    hyp = np.log([ell, sf])
    assert np.isclose(gp_kernels.kernel_matrix("se", x, z, hyp)[0, 0], sf**2 * np.exp(-r**2 / (2 * ell**2)))
    t = np.sqrt(3) * r / ell
    assert np.isclose(gp_kernels.kernel_matrix("matern32", x, z, hyp)[0, 0], sf**2 * (1 + t) * np.exp(-t))
    t = np.sqrt(5) * r / ell
    assert np.isclose(gp_kernels.kernel_matrix("matern52", x, z, hyp)[0, 0], sf**2 * (1 + t + t**2 / 3) * np.exp(-t))
    assert np.isclose(gp_kernels.kernel_matrix("linear", x, z, [np.log(2.0)])[0, 0], (1.0 + 1.0) / 4)
    assert np.isclose(gp_kernels.kernel_matrix("poly", x, z, np.log([0.5, sf]), 3)[0, 0], sf**2 * 1.5**3)
    s = (1 + 1.0 / ell**2) / np.sqrt((2 + 5 / ell**2) * (2 + 0.25 / ell**2))
    assert np.isclose(gp_kernels.kernel_matrix("nn", x, z, hyp)[0, 0], sf**2 * np.arcsin(s))
    ard = gp_kernels.kernel_matrix("se_ard", x, z, np.log([1.0, 2.0, sf]))[0, 0]
    assert np.isclose(ard, sf**2 * np.exp(-0.5 * (1.0 + 2.25 / 4)))
    with pytest.raises(ValueError, match="needs 3 log-hyperparameters"):
        gp_kernels.kernel_matrix("se_ard", x, z, [0.0, 0.0])


# ---- model options --------------------------------------------------------------------------------------
def test_hyperparameters_K_and_spec_round_trip():
    m = GPC(kernel="se", log_lengthscale=0.5, log_amplitude=-0.2)
    np.testing.assert_array_equal(m.hyperparameters(3), [0.5, -0.2])
    np.testing.assert_array_equal(GPC(kernel="se_ard", log_lengthscale=0.5).hyperparameters(2), [0.5, 0.5, 0.0])
    np.testing.assert_array_equal(GPC(kernel="linear", log_amplitude=0.3).hyperparameters(2), [-0.3])
    m2 = GPC(kernel="se_ard", hyp=[0.1, 0.2, 0.3], likelihood="logit")
    assert isinstance(m2.hyp, tuple)
    again = from_spec(json.loads(json.dumps(m2.spec())))
    assert again == m2 and again.hyp == (0.1, 0.2, 0.3)
    X = np.random.default_rng(0).normal(size=(4, 2))
    K = m2.K(X)
    np.testing.assert_allclose(K - m2.kernel_matrix(X), m2.jitter * np.eye(4), atol=1e-15)
    np.testing.assert_array_equal(m2.K(X, X[:2]), m2.kernel_matrix(X, X[:2]))
    np.testing.assert_array_equal(GPC.labels_pm([0, 1, 1]), [-1, 1, 1])
    np.testing.assert_array_equal(GPC.labels_pm([-1, 1]), [-1, 1])


def test_bad_labels_and_hyperparameters_raise(small):
    bad = bz.datasets.Dataset(small.X, 2 * small.y - 1, name="pm")
    with pytest.raises(ValueError, match=r"labels 0/1 in y.*\(y \+ 1\) / 2"):
        GPC().validate(bad)
    with pytest.raises(ValueError, match="labels 0/1 in y_test"):
        GPC().validate(bz.datasets.Dataset(small.X, small.y, small.X_test, small.y_test + 2, name="t"))
    with pytest.raises(ValueError, match="log_amplitude must be a finite number <= 20"):
        GPC(log_amplitude=25.0)
    with pytest.raises(ValueError, match=r"hyp must be None or a non-empty sequence of numbers, each in \[-20, 20\]; "
                                         r"got \(0.0, inf\)"):
        GPC(hyp=(0.0, np.inf))
    with pytest.raises(ValueError, match="needs 4 log-hyperparameters"):
        GPC(kernel="se_ard", hyp=(0.0, 0.0)).validate(small)
    with pytest.raises(ValueError, match="likelihood"):
        GPC(likelihood="cauchit")
    with pytest.raises(ValueError, match="kernel"):
        GPC(kernel="rbf")
    with pytest.raises(ValueError, match="regression"):
        GPC().validate(bz.datasets.load("sinc", n=10, seed=0))


# ---- log_lengthscale="scale" -----------------------------------------------------------------------------
def test_scale_lengthscale_is_svc_gamma_scale_on_a_tiny_x():
    from sklearn.metrics.pairwise import rbf_kernel

    from bayeszoo.models.gpc import scale_log_lengthscale

    X = np.array([[0.0, 0.0], [1.0, 2.0], [2.0, 4.0]])
    # entries 0, 0, 1, 2, 2, 4: mean 1.5, variance 11.5 / 6, so d var(X) = 23 / 6 and ell^2 = d var(X) / 2 = 23 / 12
    assert GPC().log_lengthscale == "scale"
    assert GPC().at(X).log_lengthscale == 0.5 * np.log(23.0 / 12.0) == scale_log_lengthscale(X)
    assert GPC(kernel="matern52").at(X).log_lengthscale == 0.5 * np.log(23.0 / 12.0)
    assert GPC(kernel="nn").at(X).log_lengthscale == 0.5 * np.log(23.0 / 6.0)
    np.testing.assert_array_equal(GPC(kernel="se_ard").at(X).hyperparameters(2), [0.5 * np.log(23.0 / 12.0)] * 2 + [0])
    # exp(-|x - x'|^2 / (2 ell^2)) is SVC's rbf kernel with gamma="scale" = 1 / (d var(X))
    np.testing.assert_allclose(GPC().kernel_matrix(X), rbf_kernel(X, gamma=6.0 / 23.0), rtol=1e-14, atol=0)
    # numbers, and kernels without a lengthscale, are left as they are
    assert GPC(log_lengthscale=0.7).at(X).log_lengthscale == 0.7
    for model in (GPC(kernel="linear"), GPC(kernel="poly"), GPC(hyp=(0.3, 0.1))):
        assert model.at(X) is model and model.resolved
    np.testing.assert_array_equal(GPC(hyp=(0.3, 0.1)).hyperparameters(2), [0.3, 0.1])
    # the numerics on other inputs need the resolved model
    with pytest.raises(ValueError, match=r"log_lengthscale='scale' is set from the training inputs.*model.at\(X\)"):
        GPC().hyperparameters(2)


def test_scale_lengthscale_is_stored_with_the_fit_and_predictions_use_it(small, tmp_path):
    log_ell = 0.5 * np.log(small.d * np.var(small.X) / 2)
    fit = bz.fit(GPC(), small, "ep", draws=20, chains=1, seed=0, progress=False)
    same = bz.fit(GPC(log_lengthscale=log_ell), small, "ep", draws=20, chains=1, seed=0, progress=False)
    assert float(fit.idata.constant_data["log_lengthscale"]) == log_ell
    assert "log_lengthscale" not in same.idata.constant_data       # a number is in the model spec already
    np.testing.assert_array_equal(fit.posterior["f"].values, same.posterior["f"].values)
    p = GPC().predict(fit, small.X_test)
    np.testing.assert_allclose(p, GPC(log_lengthscale=log_ell).predict(same, small.X_test), rtol=1e-12, atol=0)
    # predictions come from the stored number, not from the prediction inputs nor a lengthscale of 1
    assert not np.allclose(p, GPC(log_lengthscale=0.0).predict(
        bz.fit(GPC(log_lengthscale=0.0), small, "ep", draws=20, chains=1, seed=0, progress=False), small.X_test))
    assert GPC().fitted(fit) == GPC(log_lengthscale=log_ell)
    back = bz.load_fit(fit.save(tmp_path / "scale.nc"))
    assert back.model() == GPC() and float(back.idata.constant_data["log_lengthscale"]) == log_ell
    np.testing.assert_array_equal(back.model().predict(back, small.X_test), p)
    assert GPC().score(back, small)["error_rate"] == GPC().score(fit, small)["error_rate"]


@pytest.mark.parametrize("value, message", [
    ("auto", r"log_lengthscale must be a finite number in \[-20, 20\] or 'scale'; got 'auto'"),
    ("Scale", "log_lengthscale must be a finite number"), (None, "log_lengthscale must be a finite number"),
    (np.nan, "or 'scale'; got nan"), (21.0, r"in \[-20, 20\] or 'scale'; got 21.0")])
def test_bad_lengthscales_are_refused(value, message):
    with pytest.raises(ValueError, match=message):
        GPC(log_lengthscale=value)


def test_scale_lengthscale_of_inputs_that_do_not_vary_is_refused_before_any_work():
    same = bz.datasets.Dataset(np.full((4, 2), 3.0), np.array([0.0, 1.0, 0.0, 1.0]), name="same")
    with pytest.raises(ValueError, match=r"log_lengthscale='scale'.*all 4 training inputs are the same point.*"
                                         r"give log_lengthscale a number"):
        bz.fit(GPC(), same, "ep", progress=False)
    assert bz.fit(GPC(log_lengthscale=0.0), same, "ep", draws=5, chains=1, progress=False) is not None


# ---- declarations ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("likelihood, kernel", [("probit", "se"), ("logit", "matern52"), ("probit", "nn")])
def test_pymc_and_numpyro_log_densities_agree(likelihood, kernel, small):
    model = GPC(likelihood=likelihood, kernel=kernel, log_lengthscale=0.3, log_amplitude=1.0)
    L = model.cholesky(small.X)
    ypm = GPC.labels_pm(small.y)
    rng = np.random.default_rng(0)
    points = [{"z": rng.normal(scale=scale, size=small.n)} for scale in (0.5, 3.0, 10.0)]
    for point, pm_lp, np_lp, trace in declared_log_densities(model, small, points):
        z = point["z"]
        f = L @ z
        exact = -0.5 * z @ z - 0.5 * small.n * np.log(2 * np.pi) + np.sum(log_sig(ypm * f, likelihood))
        assert np.isclose(pm_lp, exact, rtol=1e-10, atol=1e-8)
        assert np.isclose(np_lp, exact, rtol=1e-10, atol=1e-8)
        np.testing.assert_allclose(np.asarray(trace["f"]["value"]), f, rtol=1e-12, atol=1e-12)
        # in f coordinates the density differs by the constant log |L|
        assert np.isclose(model.log_joint(f, small), exact - np.sum(np.log(np.diag(L))), rtol=1e-10)


# ---- prediction and scores -----------------------------------------------------------------------------
def _fit_with_draws(model, data, f):
    return build_fit(model, data, "fake", "approximation", {"f": f}, timing={"total": 0.0},
                    info={"log_evidence": -3.5})


def test_predictive_probability():
    mu, var = np.array([-2.0, 0.0, 1.0, 30.0]), np.array([0.0, 4.0, 0.5, 2.0])
    np.testing.assert_allclose(predictive_probability(mu, var, "probit"), ndtr(mu / np.sqrt(1 + var)))
    from scipy import integrate
    from scipy.special import expit
    for m, v in zip(mu[:3], var[:3]):
        if v == 0:
            ref = expit(m)
        else:
            ref = integrate.quad(lambda t: expit(t) * np.exp(-(t - m)**2 / (2 * v)) / np.sqrt(2 * np.pi * v),
                                 m - 12 * np.sqrt(v), m + 12 * np.sqrt(v), epsabs=1e-13)[0]
        assert abs(predictive_probability(m, v, "logit") - ref) < 1e-10
    assert np.isclose(log_predictive_probability(-40.0, 1.0, "probit", 1.0), log_ndtr(-40 / np.sqrt(2)))
    assert np.isfinite(log_predictive_probability(-60.0, 1.0, "logit", 1.0))


def test_predict_matches_analytic_probit_formula(small):
    model = GPC(likelihood="probit", log_lengthscale=0.2, log_amplitude=0.5)
    rng = np.random.default_rng(3)
    K = model.K(small.X)
    m = rng.normal(size=small.n)
    f = m + rng.normal(size=(2, 500, small.n)) @ np.linalg.cholesky(0.3 * K).T
    fit = _fit_with_draws(model, small, f)
    p = model.predict(fit, small.X_test)
    # by hand: per draw Phi(mu_s / sqrt(1 + s2)) with mu_s = K*^T K^-1 f_s, s2 = k** - K*^T K^-1 K*
    Ks = model.kernel_matrix(small.X, small.X_test)
    mu = f.reshape(-1, small.n) @ np.linalg.solve(K, Ks)
    s2 = model.kernel_diag(small.X_test) - np.einsum("ij,ij->j", Ks, np.linalg.solve(K, Ks))
    np.testing.assert_allclose(p, ndtr(mu / np.sqrt(1 + s2)).mean(0), rtol=1e-9)
    # at the training inputs the conditional is (numerically) a point mass: P = mean Phi(f)
    np.testing.assert_allclose(model.predict(fit, small.X), ndtr(f.reshape(-1, small.n)).mean(0), atol=1e-6)
    A, var = gp_conditional(model, small.X, small.X_test)
    np.testing.assert_allclose(var, s2, atol=1e-10)
    sc = model.score(fit, small)
    assert set(sc) >= {"error_rate", "n_errors", "info_bits", "log_pred", "log_evidence", "jensen_bound"}
    assert sc["log_evidence"] == -3.5 and np.isnan(sc["jensen_bound"])
    assert sc["n_errors"] == int(np.sum((p > 0.5) != (small.y_test == 1)))
    p_true = np.where(small.y_test == 1, p, 1 - p)
    assert np.isclose(sc["log_pred"], np.mean(np.log(p_true)), rtol=1e-9)
    # thesis form of the information score (§4.12): I = B + 1/(2n) sum[(1+y)log2 p + (1-y)log2(1-p)]
    ypm = 2 * small.y_test - 1
    b_tr = np.mean(small.y)
    B = -(np.mean(small.y_test == 1) * np.log2(b_tr) + np.mean(small.y_test == 0) * np.log2(1 - b_tr))
    info = B + np.mean((1 + ypm) * np.log2(p) + (1 - ypm) * np.log2(1 - p)) / 2
    assert np.isclose(sc["info_bits"], info, rtol=1e-9)


def test_information_score_base_rate_zero_perfect_one():
    from bayeszoo.models.gpc import classification_scores

    y_tr = np.array([1, 1, 1, 0.0])
    y = np.array([1, 0, 0, 1, 1.0])
    p = np.full(5, 0.75)
    s = classification_scores(p, np.log(np.where(y == 1, p, 1 - p)), y, y_tr)
    assert abs(s["info_bits"]) < 1e-12
    y_bal = np.array([1, 0, 1, 0.0])
    s = classification_scores(y_bal, np.zeros(4), y_bal, y_bal)
    assert np.isclose(s["info_bits"], 1.0) and s["error_rate"] == 0 and s["log_pred"] == 0


# ---- two-point toy ----------------------------------------------------------------------------------------
def test_two_point_exact_moments_probit_evidence_symmetry_and_monte_carlo():
    data = bz.datasets.load("gpc_two_point")
    np.testing.assert_array_equal(data.X, TWO_POINT_X)
    for ll, ls in [(0.0, -1.5), (1.0, 0.0), (2.5, 1.5)]:
        model = GPC(likelihood="probit", log_lengthscale=ll, log_amplitude=ls)
        m, C, log_Z = two_point_exact_moments(model)
        K = model.K(data.X)
        # closed form: Z = P(u1 < f1, u2 < -f2) = 1/4 + asin(rho) / (2 pi), rho = -K12 / sqrt((1+K11)(1+K22))
        rho = -K[0, 1] / np.sqrt((1 + K[0, 0]) * (1 + K[1, 1]))
        assert abs(log_Z - np.log(0.25 + np.arcsin(rho) / (2 * np.pi))) < 1e-10
        assert abs(m[0] + m[1]) < 1e-10 and abs(C[0, 0] - C[1, 1]) < 1e-10 and C[0, 1] == C[1, 0]
        assert m[0] > 0 and np.all(np.linalg.eigvalsh(C) > 0)
        # refining the rule changes nothing at 1e-8
        m2, C2, lz2 = two_point_exact_moments(model, panels=200, order=12)
        assert np.abs(m2 - m).max() < 1e-8 and np.abs(C2 - C).max() < 1e-8 and abs(lz2 - log_Z) < 1e-10
    # Monte Carlo by importance sampling from the prior, logit likelihood
    model = GPC(likelihood="logit", log_lengthscale=1.0, log_amplitude=0.5)
    m, C, log_Z = two_point_exact_moments(model)
    rng = np.random.default_rng(0)
    f = rng.normal(size=(400_000, 2)) @ model.cholesky(data.X).T
    w = np.exp(log_sig(f[:, 0], "logit") + log_sig(-f[:, 1], "logit"))
    Z = w.mean()
    assert abs(np.log(Z) - log_Z) < 4 * w.std() / np.sqrt(w.size) / Z
    mc_m = (w[:, None] * f).sum(0) / w.sum()
    se = np.sqrt(np.diag(C) / (w.size / np.mean(w**2) * Z**2))   # effective sample size
    assert np.all(np.abs(mc_m - m) < 5 * se)
    mc_C = np.cov(f.T, aweights=w)
    assert np.abs(mc_C - C).max() < 0.02 * np.abs(C).max()


# ---- datasets ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, n, n_test, d", [("crabs", 100, 100, 6), ("breast_wisconsin", 300, 383, 9),
                                                ("ionosphere", 200, 151, 33), ("sonar", 108, 100, 60),
                                                ("usps35_standin", 182, 183, 64), ("gpc_two_point", 2, 0, 1)])
def test_gpc_datasets_load_with_documented_sizes(name, n, n_test, d):
    data = bz.datasets.load(name)
    assert (data.n, data.X_test.shape[0], data.d) == (n, n_test, d)
    assert set(np.unique(np.concatenate([data.y, data.y_test]))) == {0.0, 1.0}
    for key in ("source", "licence", "citation", "preprocessing"):
        assert data.meta[key]
    GPC().validate(data)
    if name != "gpc_two_point":
        np.testing.assert_allclose(data.X.mean(0), 0.0, atol=1e-10)
        again = bz.datasets.load(name)
        np.testing.assert_array_equal(again.X_test, data.X_test)
        assert "Table 4.8" in data.meta["split"]
    if name == "usps35_standin":
        assert "stand-in" in data.meta["source"].lower() or "stand_in_for" in data.meta


def test_gpc_dataset_class_counts():
    counts = {}
    for name in ("crabs", "breast_wisconsin", "ionosphere", "sonar", "usps35_standin"):
        d = bz.datasets.load(name)
        counts[name] = int(d.y.sum() + d.y_test.sum())
    assert counts == {"crabs": 100, "breast_wisconsin": 239, "ionosphere": 225, "sonar": 111,
                      "usps35_standin": 183}


# ---- a real fit ------------------------------------------------------------------------------------------------
def test_nuts_on_crabs_gives_a_sensible_error_rate():
    data = bz.datasets.load("crabs")
    model = GPC(likelihood="probit", kernel="se", log_lengthscale=1.0, log_amplitude=1.0)
    fit = bz.fit(model, data, "nuts", draws=200, tune=200, chains=2, seed=0, progress=False)
    s = model.score(fit, data)
    assert s["error_rate"] < 0.15 and s["info_bits"] > 0.3


def test_shipped_gpc_files_are_intact():
    import hashlib
    from pathlib import Path

    data_dir = Path(bz.datasets.__file__).parent / "data"
    sums = {"gpc_biopsy.csv": "131e30ba1cad5f98ef9181e5d459bf4020648729d9ba533652bba24cd0a4f62c",
            "gpc_crabs.csv": "c112a5e147591d8e04f32dbf3f3e2be2eb74860119c6f6b5e33191ef84ee16aa",
            "gpc_ionosphere.csv": "1f980b2d1eac0233f8586844abd4e6c299b884f52f7f3bbc15b7bfc6af361736",
            "gpc_sonar.csv": "d8e2a4acbec4420527f321d25b033eed4c5bb15e854eba01e35b83d47b5eb0f8"}
    for name, digest in sums.items():
        assert hashlib.sha256((data_dir / name).read_bytes()).hexdigest() == digest, name


def test_pytensor_log_ndtr_value_and_gradient_are_finite_in_both_tails():
    """Regression test: an overflowing unused switch branch once made the gradient NaN for large |f|."""
    import pytensor
    import pytensor.tensor as pt
    from scipy.special import log_ndtr, ndtr

    from bayeszoo.numerics.special import pt_log_ndtr

    x = pt.dvector("x")
    y = pt_log_ndtr(x)
    fn = pytensor.function([x], [y, pt.grad(y.sum(), x)])
    pts = np.array([-60.0, -5.0, -1.0, -0.3, 0.0, 2.0, 30.0, 400.0])
    val, grad = fn(pts)
    np.testing.assert_allclose(val, log_ndtr(pts), rtol=1e-10, atol=1e-300)
    mills = np.exp(-0.5 * pts**2 - 0.5 * np.log(2 * np.pi) - log_ndtr(pts))   # d/dx log Phi(x) = phi / Phi
    np.testing.assert_allclose(grad, mills, rtol=1e-8, atol=1e-300)
    assert np.all(np.isfinite(grad)) and ndtr(0.0) == 0.5


@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), (1, True), (0, False)])
def test_pytensor_logsumexp_and_its_gradient_are_stable_where_every_term_underflows(axis, keepdims):
    """PMKL's likelihood sums its quadrature nodes with it: full-rank ADVI's draws made every node of a data point
    underflow, and PyTensor's own logsumexp gave a NaN gradient there (0 / 0)."""
    import pytensor
    import pytensor.tensor as pt
    from scipy.special import logsumexp, softmax

    from bayeszoo.numerics.special import pt_logsumexp

    x = pt.dmatrix("x")
    y = pt_logsumexp(x, axis=axis, keepdims=keepdims)
    fn = pytensor.function([x], [y, pt.grad(y.sum(), x)])
    pts = np.array([[-1e4, -1e4 - np.log(3.0), -2e4], [1.0, 2.0, 3.0], [-np.inf, 0.0, -np.inf]])
    val, grad = fn(pts)
    np.testing.assert_allclose(val, logsumexp(pts, axis=axis, keepdims=keepdims), rtol=1e-12)
    np.testing.assert_allclose(grad, softmax(pts, axis=axis), rtol=1e-12, atol=1e-300)   # d lse / dx = softmax
    if axis == 1:
        np.testing.assert_allclose(grad[0], [0.75, 0.25, 0.0], rtol=1e-12)


def test_non_positive_definite_kernel_and_nan_features_raise_before_sampling():
    X = np.repeat([[0.5, -1.0]], 4, axis=0)                 # identical rows: K = sf^2 11^T, rank one
    data = bz.datasets.Dataset(X=X, y=np.array([1.0, 0.0, 1.0, 0.0]), name="dup")
    with pytest.raises(ValueError, match="not positive definite.*increase jitter"):
        GPC(jitter=0.0).cholesky(X)
    with pytest.raises(ValueError, match="not positive definite"):
        bz.fit(GPC(jitter=0.0), data, "nuts", draws=5, tune=5, chains=1, progress=False)
    # the default jitter makes the same problem well posed
    assert np.all(np.isfinite(GPC().cholesky(X)))
    with pytest.raises(ValueError, match="NaN"):
        bz.datasets.Dataset(X=np.array([[0.0, np.nan], [1.0, 2.0]]), y=np.array([1.0, 0.0]), name="nan")
