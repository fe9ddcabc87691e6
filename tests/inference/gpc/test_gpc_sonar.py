"""Sonar (Nickisch thesis ch. 4): MCMC backends agree with each other, EP agrees with NUTS (slow)."""
from __future__ import annotations

import arviz as az
import numpy as np
import pytest
import xarray as xr

import bayeszoo as bz
from bayeszoo.inference.gpc import common as C
from bayeszoo.inference.gpc import ep as EP
from bayeszoo.models.gpc import predictive_probability

SONAR_MODEL = dict(likelihood="probit", kernel="se", log_lengthscale=2.0, log_amplitude=1.0)


@pytest.fixture(scope="module")
def sonar_fits():
    data = bz.datasets.load("sonar")
    model = bz.models.GPC(**SONAR_MODEL)
    fits = {b: bz.fit(model, data, backend=b, seed=0, progress=False) for b in ("nuts", "numpyro", "gibbs")}
    return model, data, fits


@pytest.mark.slow
def test_mcmc_backends_converge_and_agree_at_default_settings(sonar_fits):
    model, data, fits = sonar_fits
    for name, fit in fits.items():
        assert fit.idata.posterior.sizes["chain"] == 4 and fit.idata.posterior.sizes["draw"] == 1000
        assert az.rhat(fit.idata)["f"].values.max() < 1.01, name
    # all twelve chains pooled: R-hat compares the backends' chains with one another
    pooled = xr.concat([fit.idata.posterior["f"].drop_vars("chain") for fit in fits.values()], dim="chain")
    assert az.rhat(az.convert_to_dataset(pooled.to_dataset()))["f"].values.max() < 1.01


@pytest.mark.slow
def test_ep_predictive_probabilities_agree_with_nuts(sonar_fits):
    model, data, fits = sonar_fits
    res, _, _ = EP.fit_ep(model, data)
    mu, var = C.predict_latent(model, data.X, data.X_test, res.alpha, res.sW, res.L)
    p_ep = predictive_probability(mu, var, "probit")
    # NUTS: average over draws of P(y* = 1 | f) = Phi(m(f) / sqrt(1 + v)), m(f) = K*^T K^-1 f
    K = C.kernel_and_grads(model, data.X, grads=False)[0]
    Ks = C.cross_kernel(model, data.X, data.X_test)
    A = np.linalg.solve(K, Ks)
    cond_var = C.kss_diag(model, data.X_test) - np.sum(Ks * A, 0)
    post = fits["nuts"].idata.posterior["f"]
    f = post.values.reshape(-1, data.n)
    p_draws = predictive_probability(f @ A, cond_var[None, :], "probit").reshape(post.sizes["chain"], -1,
                                                                               data.X_test.shape[0])
    p_nuts = p_draws.mean((0, 1))
    mcse = az.mcse(az.convert_to_dataset({"p": p_draws}))["p"].values
    z = (p_ep - p_nuts) / mcse
    # EP is a Gaussian approximation: its error is allowed on top of Monte-Carlo error, 0.01 in probability
    assert np.all(np.abs(p_ep - p_nuts) < 4 * mcse + 0.01), (np.abs(z).max(), np.abs(p_ep - p_nuts).max())
    assert np.mean(np.abs(z) < 2) > 0.8
