"""RVM declarations, prediction and scoring: PyMC and NumPyro densities agree; metrics on constructed draws."""
import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.fit import build_fit
from bayeszoo.models.rvm import LOG_ALPHA_PRUNED, RVM
from bayeszoo.numerics.special import log_gamma_logpdf

from _declarations import declared_log_densities


@pytest.fixture(scope="module")
def sinc():
    return bz.datasets.load("sinc", n=20, n_test=50, seed=3)


@pytest.fixture(scope="module")
def mixture():
    return bz.datasets.load("gaussian_mixture", n_per_class=10, n_test_per_class=30, seed=1)


def _exact_logp(model, data, point):
    """The joint log density written out by hand (all constants), in the sampled coordinates."""
    Phi = model.design(data.X, data.X)
    u, z = point["log_alpha"], point["z"]
    w = z * np.exp(-0.5 * u)
    f = Phi @ w
    lp = np.sum(log_gamma_logpdf(u, model.a, model.b)) - 0.5 * np.sum(z**2) - 0.5 * z.size * np.log(2 * np.pi)
    if model.is_classifier:
        from scipy.special import expit, log_ndtr
        if model.link == "logit":
            lp1, lp0 = np.log(expit(f)), np.log(expit(-f))
        else:
            lp1, lp0 = log_ndtr(f), log_ndtr(-f)
        return lp + np.sum(np.where(data.y == 1, lp1, lp0))
    v = point["log_beta"]
    lp += log_gamma_logpdf(v, model.c, model.d)
    return lp + np.sum(0.5 * (v - np.log(2 * np.pi)) - 0.5 * np.exp(v) * (data.y - f) ** 2)


@pytest.mark.parametrize("task, link", [("regression", "logit"), ("classification", "logit"),
                                        ("classification", "probit")])
def test_pymc_and_numpyro_log_densities_agree_exactly(task, link, sinc, mixture):
    data = sinc if task == "regression" else mixture
    model = RVM(task=task, link=link, width=3.0 if task == "regression" else 0.5, a=0.3, b=0.02, c=2.0, d=0.1)
    for point, pm_lp, np_lp, trace in declared_log_densities(model, data, n=3, scale=2.0):
        ours = _exact_logp(model, data, point)
        assert np.isclose(pm_lp, ours, rtol=1e-10, atol=1e-8)
        assert np.isclose(np_lp, ours, rtol=1e-10, atol=1e-8)
        np.testing.assert_allclose(np.asarray(trace["w"]["value"]), point["z"] * np.exp(-0.5 * point["log_alpha"]))


def test_log_gamma_is_the_gamma_pushed_through_log():
    # integrates to one, and matches Gamma(a, b) on x = e^u times the Jacobian e^u
    from scipy import integrate, stats

    a, b = 0.7, 0.3
    total, _ = integrate.quad(lambda u: np.exp(log_gamma_logpdf(u, a, b)), -80, 10)
    assert abs(total - 1.0) < 1e-7
    u = np.linspace(-3, 2, 7)
    np.testing.assert_allclose(log_gamma_logpdf(u, a, b), stats.gamma(a, scale=1 / b).logpdf(np.exp(u)) + u)


def test_numpyro_log_gamma_sampler_matches_moments():
    import jax
    from bayeszoo.numerics.special import log_gamma_numpyro

    a, b = 0.05, 2.0
    u = np.asarray(log_gamma_numpyro()(a, b).sample(jax.random.PRNGKey(0), (200_000,)))
    # E[log x] = digamma(a) - log b for x ~ Gamma(a, b); Var = trigamma(a)
    from scipy.special import digamma, polygamma
    assert abs(u.mean() - (digamma(a) - np.log(b))) < 4 * np.sqrt(polygamma(1, a) / u.size)
    assert np.all(np.isfinite(u))


def test_declarations_carry_canonical_dims(sinc):
    model = RVM(width=3.0)
    pm_model = model.pymc_model(sinc)
    assert pm_model.named_vars_to_dims["w"] == ("basis",)
    assert pm_model.named_vars_to_dims["log_alpha"] == ("basis",)
    assert "log_beta" in pm_model.named_vars and "log_beta" not in pm_model.named_vars_to_dims
    assert len(pm_model.coords["basis"]) == sinc.n + 1


def _constructed(model, data, w, log_alpha, log_beta=None, chains=2):
    draws = {"w": w, "log_alpha": log_alpha}
    if log_beta is not None:
        draws["log_beta"] = log_beta
    return build_fit(model, data, "constructed", "mcmc", draws, timing={"sample": 1.0})


def test_predict_and_score_regression_on_constructed_draws(sinc):
    model = RVM(width=3.0)
    M = model.n_basis(sinc)
    rng = np.random.default_rng(0)
    w = rng.normal(size=(2, 30, M))
    log_beta = np.full((2, 30), np.log(25.0))
    fit = _constructed(model, sinc, w, np.zeros((2, 30, M)), log_beta)
    Phi = model.design(sinc.X_test, sinc.X)
    f = w.reshape(60, M) @ Phi.T
    np.testing.assert_allclose(model.predict_draws(fit, sinc.X_test), f)
    np.testing.assert_allclose(model.predict(fit, sinc.X_test), f.mean(0))
    np.testing.assert_allclose(model.predict_std(fit, sinc.X_test), np.sqrt(f.var(0) + 1 / 25.0))
    s = model.score(fit, sinc)
    assert np.isclose(s["mse"], np.mean((f.mean(0) - sinc.y_test) ** 2))
    dens = np.sqrt(25 / (2 * np.pi)) * np.exp(-12.5 * (sinc.y_test - f) ** 2)
    assert np.isclose(s["log_pred"], np.mean(np.log(dens.mean(0))))


def test_n_relevant_same_rule_for_point_estimates_and_draws(sinc):
    model = RVM(width=3.0)
    M = model.n_basis(sinc)
    log_alpha = np.full((1, 1, M), LOG_ALPHA_PRUNED)
    w = np.zeros((1, 1, M))
    keep = [0, 4, 9]
    log_alpha[..., keep] = 0.0
    w[..., keep] = 0.5
    point = _constructed(model, sinc, w, log_alpha, np.zeros((1, 1)))
    assert model.score(point, sinc)["n_relevant"] == 3
    # draws: bases 0, 4, 9 have small alpha; the rest sit far in the prior's right tail most of the time
    rng = np.random.default_rng(1)
    la = rng.normal(14.0, 3.0, size=(2, 200, M))
    la[..., keep] = rng.normal(0.0, 1.0, size=(2, 200, 3))
    drawn = _constructed(model, sinc, rng.normal(size=(2, 200, M)), la, np.zeros((2, 200)))
    assert model.n_relevant(drawn, sinc) == 3


def test_classification_scores_on_constructed_draws(mixture):
    model = RVM(task="classification", width=0.5, link="probit")
    M = model.n_basis(mixture)
    w = np.zeros((1, 4, M))
    w[..., 0] = 1.0  # f = 1 everywhere: P(y=1) = Phi(1)
    fit = _constructed(model, mixture, w, np.zeros((1, 4, M)))
    from scipy.stats import norm
    p = norm.cdf(1.0)
    np.testing.assert_allclose(model.predict(fit, mixture.X_test), p)
    s = model.score(fit, mixture)
    yt = mixture.y_test
    assert np.isclose(s["error_rate"], np.mean(yt == 0))
    p_true = np.where(yt == 1, p, 1 - p)
    assert np.isclose(s["log_pred"], np.mean(np.log(p_true)))
    assert np.isclose(s["info_bits"], np.mean(np.log2(p_true) - np.log2(0.5)))  # balanced training set
    assert s["n_relevant"] == M


def test_prediction_rejects_mismatched_basis(sinc):
    fit = _constructed(RVM(width=3.0), sinc, np.zeros((1, 2, sinc.n + 1)), np.zeros((1, 2, sinc.n + 1)),
                       np.zeros((1, 2)))
    with pytest.raises(ValueError, match="bias=True"):
        RVM(width=3.0, bias=False).predict(fit, sinc.X_test)
