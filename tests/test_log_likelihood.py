"""ArviZ's log_likelihood group on the built-in families' fits: the values against the likelihood written out for
one draw, az.loo on it, the save / load round trip, and the size limit."""
from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pytest
from scipy import stats
from scipy.special import log_ndtr

import bayeszoo as bz
from bayeszoo import results


def _draw(fit, name, chain=1, draw=3):
    return np.asarray(fit.idata.posterior[name].values[chain, draw], dtype=float)


def test_rvm_regression_values_are_the_gaussian_density_of_each_point(sinc):
    model = bz.models.RVM(width=3.0)
    fit = bz.fit(model, sinc, "vb", draws=20, chains=2, seed=0, progress=False)
    ll = fit.idata.log_likelihood["y"]
    assert ll.dims == ("chain", "draw", "obs") and ll.shape == (2, 20, sinc.n)
    f = model.training_design(sinc) @ _draw(fit, "w")
    sd = np.exp(-0.5 * _draw(fit, "log_beta"))
    np.testing.assert_allclose(ll.values[1, 3], stats.norm.logpdf(sinc.y, f, sd), rtol=1e-10)


def test_gpc_values_are_the_probit_of_each_label():
    data = bz.datasets.load("sonar")
    model = bz.models.GPC(likelihood="probit", log_lengthscale=2.0, log_amplitude=1.0)
    fit = bz.fit(model, data, "gibbs", draws=30, tune=10, chains=2, seed=0, progress=False)
    f = _draw(fit, "f")
    np.testing.assert_allclose(fit.idata.log_likelihood["y"].values[1, 3], log_ndtr((2 * data.y - 1) * f),
                               rtol=1e-12)


def test_slm_values_are_the_gaussian_measurements():
    data = bz.datasets.load("slm_signal", kind="spikes", n=32, m=24, n_test=16, seed=0)
    model = bz.models.SLM(potential="laplace", tau=5.0, sigma2=0.005)
    fit = bz.fit(model, data, "ep", draws=10, chains=2, seed=0, progress=False)
    expected = stats.norm.logpdf(data.y, data.X @ _draw(fit, "u"), np.sqrt(0.005))
    np.testing.assert_allclose(fit.idata.log_likelihood["y"].values[1, 3], expected, rtol=1e-10)


def test_imagervm_values_are_the_gaussian_pixels():
    data = bz.datasets.load("sinc2d_image", size=8, seed=0)
    model = bz.models.ImageRVM(kernels=(2.0,))
    fit = bz.fit(model, data, "dft", draws=10, chains=2, seed=0, progress=False)
    Phi = model.dense_design((8, 8))
    f = Phi @ _draw(fit, "w").ravel()
    sd = np.exp(-0.5 * _draw(fit, "log_beta"))
    np.testing.assert_allclose(fit.idata.log_likelihood["y"].values[1, 3], stats.norm.logpdf(data.y, f, sd),
                               rtol=1e-8, atol=1e-10)


def test_pmkl_values_are_log_class_probabilities_that_sum_to_one_over_classes():
    data = bz.datasets.load("mkl_sources", n=30, n_test=30, seed=0)
    model = bz.models.PMKL(rule="convex")
    fit = bz.fit(model, data, "vb", draws=10, chains=2, seed=0, progress=False)
    ll = fit.idata.log_likelihood["y"].values
    assert ll.shape == (2, 10, data.n) and np.all(ll <= 0)
    # the class probabilities of one draw at the training inputs: the stored value is the true class's
    from bayeszoo.numerics import probit

    latent = model.latent_draws(fit, data.X, max_draws=20)
    all_classes = probit.log_class_probs(latent)
    np.testing.assert_allclose(np.exp(all_classes).sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(ll.reshape(20, -1), np.take_along_axis(all_classes, data.y.astype(int)[None, :, None],
                                                                      axis=2)[..., 0], rtol=1e-12)


def test_loo_runs_and_the_group_survives_saving(sinc, tmp_path):
    fit = bz.fit(bz.models.RVM(width=3.0), sinc, "gibbs", draws=200, tune=100, chains=2, seed=1, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = az.loo(fit.idata, pointwise=True)
    # elpd_loo is the sum of the pointwise values, each below the in-sample log predictive density
    np.testing.assert_allclose(loo.elpd_loo, loo.loo_i.values.sum())
    lpd = np.log(np.exp(fit.idata.log_likelihood["y"].values).mean((0, 1)))
    assert np.all(loo.loo_i.values <= lpd + 1e-9)
    back = bz.load_fit(fit.save(tmp_path / "f.nc"))
    np.testing.assert_array_equal(back.idata.log_likelihood["y"].values, fit.idata.log_likelihood["y"].values)


def test_a_group_too_large_is_left_out_and_said(sinc, monkeypatch):
    monkeypatch.setattr(results, "MAX_LOG_LIKELIHOOD_VALUES", 2 * 10 * sinc.n - 1)
    fit = bz.fit(bz.models.RVM(width=3.0), sinc, "vb", draws=10, chains=2, seed=0, progress=False)
    assert "log_likelihood" not in fit.idata.groups()
    assert "not stored" in fit.info["log_likelihood"]


@pytest.mark.parametrize("task", ["probit", "logit"])
def test_rvm_classification_values(task):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = (X[:, 0] > 0).astype(float)
    data = bz.datasets.Dataset(X, y, name="blobs", meta={"task": "classification"})
    model = bz.models.RVM(task="classification", link=task, width=2.0)
    fit = bz.fit(model, data, "vb", draws=10, chains=2, seed=0, progress=False)
    f = model.training_design(data) @ _draw(fit, "w")
    expected = stats.norm.logcdf((2 * y - 1) * f) if task == "probit" else -np.logaddexp(0, -(2 * y - 1) * f)
    np.testing.assert_allclose(fit.idata.log_likelihood["y"].values[1, 3], expected, rtol=1e-10)


@pytest.mark.parametrize("psf", ["known", "blind"])
def test_bid_values_are_student_t_residuals_of_the_declaration(psf):
    """St noise: each pixel's residual g - h * f under a Student-t with nu = 2 a_beta, scale sqrt(b_beta / a_beta)
    (the noise precision integrated out); h * f computed without the FFT (a gather over the PSF's offsets), so
    the FFT convolution of log_likelihood is checked against a direct sum."""
    from bayeszoo.numerics import fft as _fft

    data = bz.datasets.load("cameraman", psf="uniform", snr_db=30, seed=0, crop=(40, 90, 16))
    model = bz.models.BID(variant="StStSt", psf=psf, psf_size=3, sigma_phi2=1.0)
    fit = bz.fit(model, data, "vb", draws=4, chains=2, seed=0, progress=False)
    ll = fit.idata.log_likelihood["y"].values
    assert ll.shape == (2, 4, 16 * 16)
    g = model.observed_image(data)
    f = _draw(fit, "image")
    h = model.known_psf(data) if psf == "known" else _draw(fit, "psf")
    H = _fft.embed(h, g.shape)
    rows, cols = np.indices(g.shape)
    sr, sc = np.nonzero(H)
    gather = ((rows.ravel()[:, None] - sr) % 16) * 16 + (cols.ravel()[:, None] - sc) % 16
    resid = g.ravel() - f.ravel()[gather] @ H[sr, sc]
    prior = model.precision_priors(g)
    a, b = prior["a_beta"], prior["b_beta"]
    np.testing.assert_allclose(ll[1, 3], stats.t.logpdf(resid, df=2 * a, scale=np.sqrt(b / a)), rtol=1e-9)


def test_bid_with_one_shared_noise_precision_has_no_pointwise_likelihood():
    data = bz.datasets.load("bid_blocks", size=16, n_blocks=3, seed=0)
    fit = bz.fit(bz.models.BID(variant="StGSt", psf_size=3), data, "vb", draws=4, chains=1, seed=0, progress=False)
    assert "log_likelihood" not in fit.idata.groups()


def test_arvm_values_are_the_gaussian_density_of_each_point():
    data = bz.datasets.load("sinc", n=16, n_test=20, seed=0)
    model = bz.models.ARVM(n_basis=4)
    fit = bz.fit(model, data, "arvm", draws=6, chains=2, seed=0, progress=False)
    expected = stats.norm.logpdf(data.y, _draw(fit, "f"), np.exp(-0.5 * _draw(fit, "log_beta")))
    np.testing.assert_allclose(fit.idata.log_likelihood["y"].values[1, 3], expected, rtol=1e-10)


def test_a_map_estimate_has_no_loo_and_the_table_says_why():
    """SLM's map backend repeats one estimate: every draw gives each measurement the same log likelihood, so
    az.loo's numbers are its in-sample density with p_loo 0 (every Pareto k bad); the LOO columns are NaN and
    loo_note says why, while the EP fit of the same model keeps its numbers."""
    from bayeszoo.diagnostics.metrics import LOO_COLUMNS, loo_columns

    data = bz.datasets.load("slm_signal", kind="spikes", n=32, m=24, n_test=16, seed=0)
    model = bz.models.SLM(potential="laplace", tau=5.0, sigma2=0.005)
    point = bz.fit(model, data, "map", draws=10, chains=2, seed=0, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = az.loo(point.idata, pointwise=True, reff=1.0)
    lpd = float(point.idata.log_likelihood["y"].values[0, 0].sum())
    assert abs(float(loo.p_loo)) < 1e-9 and float(loo.elpd_loo) == pytest.approx(lpd, rel=1e-9)
    cols = loo_columns(point)
    assert all(np.isnan(cols[c]) for c in LOO_COLUMNS) and "in-sample" in cols["loo_note"]
    ep = loo_columns(bz.fit(model, data, "ep", draws=10, chains=2, seed=0, progress=False))
    assert np.isfinite(ep["elpd_loo"]) and ep["loo_note"] == ""
