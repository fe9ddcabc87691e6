"""Generic backends (nuts, numpyro, nutpie, advi, fullrank_advi) on small RVM problems: numbers, not smoke."""
import arviz as az
import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.models.rvm import RVM

# A well-conditioned RVM for cross-backend checks (moderate hyperprior, wide kernels).
MODEL = RVM(width=3.0, a=1.0, b=1e-2, c=1.0, d=1e-3)


@pytest.fixture(scope="module")
def nuts_fit(sinc):
    return bz.fit(MODEL, sinc, "nuts", draws=500, tune=500, chains=2, seed=1, progress=False)


@pytest.fixture(scope="module")
def numpyro_fit(sinc):
    return bz.fit(MODEL, sinc, "numpyro", draws=500, tune=500, chains=2, seed=1, progress=False)


def _mean_se(fit, name):
    """Posterior means and their Monte-Carlo standard errors (sd / sqrt(bulk ESS)) per component."""
    x = fit.posterior[name].values
    x = x.reshape(x.shape[0], x.shape[1], -1)
    means = x.reshape(-1, x.shape[2]).mean(0)
    sds = x.reshape(-1, x.shape[2]).std(0)
    ess = np.array([az.ess(x[:, :, j]) for j in range(x.shape[2])])
    return means, sds / np.sqrt(ess)


def _draws_se(fit, f):
    """Predictive means and MCSEs from per-draw values f (chain * draw, n)."""
    x = f.reshape(fit.n_chains, fit.n_draws, -1)
    ess = np.array([az.ess(x[:, :, j]) for j in range(x.shape[2])])
    return f.mean(0), f.std(0) / np.sqrt(ess)


@pytest.mark.parametrize("name", ["nuts_fit", "numpyro_fit"])
def test_fit_layout(name, request, sinc):
    fit = request.getfixturevalue(name)
    post = fit.posterior
    assert set(post.data_vars) == {"w", "log_alpha", "log_beta"}
    assert post["w"].dims == ("chain", "draw", "basis") and post["log_alpha"].dims == ("chain", "draw", "basis")
    assert post["log_beta"].dims == ("chain", "draw")
    assert post.sizes["chain"] == 2 and post.sizes["draw"] == 500 and post.sizes["basis"] == sinc.n + 1
    np.testing.assert_array_equal(post["basis"].values, np.arange(sinc.n + 1))
    stats = fit.idata.sample_stats
    assert stats["diverging"].dtype == bool and stats["diverging"].shape == (2, 500)
    assert stats["n_steps"].shape == (2, 500) and "tree_depth" in stats
    np.testing.assert_array_equal(fit.idata.observed_data["y"].values, sinc.y)
    np.testing.assert_array_equal(fit.idata.constant_data["X"].values, sinc.X)
    for key in ("compile", "tune", "sample", "total"):
        assert fit.timing[key] > 0, key
    assert fit.timing["total"] >= fit.timing["compile"] + fit.timing["tune"] + fit.timing["sample"] - 1e-6
    assert fit.info["n_grad"] == int(stats["n_steps"].sum()) + fit.info["n_grad_tune"] > 1000
    assert fit.kind == "mcmc"


def test_nuts_and_numpyro_agree_within_monte_carlo_error(nuts_fit, numpyro_fit, sinc):
    for name in ("w", "log_beta"):
        m1, se1 = _mean_se(nuts_fit, name)
        m2, se2 = _mean_se(numpyro_fit, name)
        z = np.abs(m1 - m2) / np.sqrt(se1**2 + se2**2)
        assert np.max(z) < 4.5, (name, np.max(z))  # 4.5 sd: max over 22 components, two-sided
    p1, s1 = _draws_se(nuts_fit, MODEL.predict_draws(nuts_fit, sinc.X_test))
    p2, s2 = _draws_se(numpyro_fit, MODEL.predict_draws(numpyro_fit, sinc.X_test))
    assert np.max(np.abs(p1 - p2) / np.sqrt(s1**2 + s2**2)) < 4.5
    np.testing.assert_allclose(MODEL.predict(nuts_fit, sinc.X_test), p1)


def test_scores_are_finite_and_accurate(nuts_fit, numpyro_fit, sinc):
    for fit in (nuts_fit, numpyro_fit):
        s = MODEL.score(fit, sinc)
        assert set(s) == {"mse", "log_pred", "n_relevant"}
        assert np.isfinite(s["mse"]) and np.isfinite(s["log_pred"])
        assert s["mse"] < 0.02          # noise-free test targets; 20 training points with noise sd 0.1
        assert s["log_pred"] > 0.0      # predictive density above 1 on average: sd well below 0.4
        assert 1 <= s["n_relevant"] <= sinc.n + 1
        sd = MODEL.predict_std(fit, sinc.X_test)
        assert np.all(sd > 0.05) and np.all(sd < 0.3)  # noise sd 0.1 plus function uncertainty


@pytest.mark.slow
@pytest.mark.parametrize("method", ["advi", "fullrank_advi"])
def test_advi_converges_and_shows_the_known_mean_field_bias(method, nuts_fit, sinc):
    """ADVI's optimum on this hierarchy over-shrinks: it explains part of the signal as noise.

    Measured (sinc n=20): ADVI's E[log_beta] is about 2.5 against NUTS's 4.5, test MSE about 0.06 against
    0.009. The test pins the plumbing (ELBO climbs to a plateau, i.i.d. draws with canonical names) and that
    bias direction, with tolerances wide enough for the optimiser's noise.
    """
    fit = bz.fit(MODEL, sinc, method, draws=250, chains=2, seed=0, progress=False, max_iter=8000, learning_rate=0.01)
    assert fit.kind == "approximation" and fit.posterior.sizes["chain"] == 2 and fit.posterior.sizes["draw"] == 250
    assert set(fit.posterior.data_vars) == {"w", "log_alpha", "log_beta"}
    elbo = fit.idata.objective["elbo"].values
    assert elbo.shape == (8000,) and np.mean(elbo[-800:]) > np.mean(elbo[:800]) + 10
    assert abs(np.mean(elbo[-800:]) - np.mean(elbo[-1600:-800])) < 2.0      # plateau
    diff = MODEL.predict(fit, sinc.X_test) - MODEL.predict(nuts_fit, sinc.X_test)
    assert np.sqrt(np.mean(diff**2)) < 0.35                                 # same shape of function
    assert float(fit.posterior["log_beta"].mean()) < float(nuts_fit.posterior["log_beta"].mean()) - 0.5
    assert MODEL.score(fit, sinc)["mse"] < 0.15
    assert fit.timing["compile"] > 0 and fit.timing["tune"] > 0 and fit.info["n_grad"] == 8000


def test_advi_refuses_an_elbo_that_leaves_double_precision_naming_the_step_and_the_remedy():
    """PyMC's Adam steps run on the iteration driver, every one of them (min_iter = max_iter); a non-finite loss is
    a ValueError naming the step and the remedy, not the driver's advice to rescale the inputs."""
    from bayeszoo.inference.pymc_engines import adam_steps
    from bayeszoo.inference.iterative import iterate

    losses = iter([3.0, 2.0, float("nan"), 1.0])
    with pytest.raises(ValueError, match=r"^advi: the ELBO became nan at iteration 3; try a smaller learning_rate$"):
        iterate(adam_steps(lambda: next(losses), "advi"), None, max_iter=4, min_iter=4, tol=0.0)
    losses = iter([4.0, 3.0, 3.0, 2.0])
    run = iterate(adam_steps(lambda: next(losses), "advi"), None, max_iter=4, min_iter=4, tol=0.0)
    assert run.iterations == 4 and run.trace.tolist() == [-4.0, -3.0, -3.0, -2.0]    # the unchanged step: no stop


@pytest.mark.slow
@pytest.mark.parametrize("link", ["logit", "probit"])
def test_classification_samples_and_classifies(link):
    data = bz.datasets.load("gaussian_mixture", n_per_class=20, n_test_per_class=200, seed=0)
    model = RVM(task="classification", width=0.5, link=link, a=1.0, b=1e-2)
    fit = bz.fit(model, data, "numpyro", draws=300, tune=300, chains=2, seed=0, progress=False)
    assert set(fit.posterior.data_vars) == {"w", "log_alpha"}
    s = model.score(fit, data)
    assert set(s) == {"error_rate", "log_pred", "info_bits", "n_relevant"}
    assert s["error_rate"] < 0.25      # Bayes error 0.119
    assert s["info_bits"] > 0.2 and np.isfinite(s["log_pred"])
    p = model.predict(fit, data.X_test)
    assert p.shape == (400,) and np.all((p > 0) & (p < 1))


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_classification_with_pymc_nuts(link):
    data = bz.datasets.load("gaussian_mixture", n_per_class=15, n_test_per_class=100, seed=1)
    model = RVM(task="classification", width=0.5, link=link, a=1.0, b=1e-2)
    fit = bz.fit(model, data, "nuts", draws=200, tune=200, chains=2, seed=0, progress=False)
    assert set(fit.posterior.data_vars) == {"w", "log_alpha"}
    s = model.score(fit, data)
    assert s["error_rate"] < 0.3 and s["info_bits"] > 0.1 and np.isfinite(s["log_pred"])


@pytest.mark.slow
def test_nutpie_agrees_with_numpyro(numpyro_fit, sinc):
    fit = bz.fit(MODEL, sinc, "nutpie", draws=500, tune=500, chains=2, seed=1, progress=False)
    assert set(fit.posterior.data_vars) == {"w", "log_alpha", "log_beta"}
    assert fit.idata.sample_stats["diverging"].dtype == bool
    assert fit.timing["compile"] > 0 and fit.info["n_grad"] > 0
    p1, s1 = _draws_se(fit, MODEL.predict_draws(fit, sinc.X_test))
    p2, s2 = _draws_se(numpyro_fit, MODEL.predict_draws(numpyro_fit, sinc.X_test))
    assert np.max(np.abs(p1 - p2) / np.sqrt(s1**2 + s2**2)) < 4.5



@pytest.mark.slow
def test_numpyro_compiles_the_model_once_for_all_its_chains(caplog, monkeypatch):
    """NumPyro runs each sequential chain, and the sampling after the warm-up, through a loop it jits again on every
    call: left to itself, 2 chains trace, lower and compile the model's NUTS kernel 4 times (4 chains 8 times).
    With bayeszoo's shared jit objects they compile it once, and draw exactly the same draws."""
    import jax
    import numpyro.util

    from bayeszoo.inference import numpyro_engines

    model = bz.catalogue.exact.load("banana", library="numpyro")

    def fit_counting_compiles():
        caplog.clear()
        jax.config.update("jax_log_compiles", True)
        try:
            with caplog.at_level("WARNING"):
                fit = bz.fit(model, None, "numpyro", draws=30, tune=30, chains=2, seed=3, progress=False)
        finally:
            jax.config.update("jax_log_compiles", False)
        return fit, sum(r.getMessage().startswith("Compiling") and "_fori_collect_loop" in r.getMessage()
                        for r in caplog.records)

    with monkeypatch.context() as patch:   # NumPyro's own jit, as before
        patch.setattr(numpyro_engines, "_numpyro_jits_once", lambda: None)
        patch.setattr(numpyro.util, "maybe_jit", getattr(numpyro.util.maybe_jit, "__wrapped__",
                                                         numpyro.util.maybe_jit))
        alone, compiles_alone = fit_counting_compiles()
    shared, compiles_shared = fit_counting_compiles()
    assert (compiles_alone, compiles_shared) == (4, 1)
    np.testing.assert_array_equal(alone.posterior["x"].values, shared.posterior["x"].values)
