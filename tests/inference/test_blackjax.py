"""BlackJAX engines (blackjax_nuts, blackjax_mclmc, blackjax_pathfinder, blackjax_meanfield_vi): numbers, not smoke.

The reference is an RVM regression whose Gamma hyperpriors pin every precision at 1 (shape = rate = 1e4: sd 1%),
so the posterior of the weights is, to far below the Monte-Carlo error, the Gaussian N(m, S) with
S = (Phi^T Phi + I)^-1 and m = S Phi^T y.
"""
from __future__ import annotations

import arviz as az
import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo import registry
from bayeszoo.models.rvm import RVM

PINNED = RVM(width=3.0, a=1e4, b=1e4, c=1e4, d=1e4)
COUNTS = dict(draws=500, tune=500, chains=2)


@pytest.fixture(scope="module")
def data():
    return bz.datasets.load("sinc", n=10, n_test=10, seed=3)


def _exact(model, data):
    Phi = model.design(data.X, data.X)
    S = np.linalg.inv(Phi.T @ Phi + np.eye(Phi.shape[1]))
    return S @ Phi.T @ data.y, np.sqrt(np.diag(S))


@pytest.fixture(scope="module")
def exact(data):
    return _exact(PINNED, data)


@pytest.fixture(scope="module")
def fits(data):
    cache = {}

    def get(name, **kw):
        key = (name, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = bz.fit(PINNED, data, name, seed=0, progress=False, **{**COUNTS, **kw})
        return cache[key]

    return get


def _w_summary(fit):
    w = fit.posterior[["w"]]
    return (w["w"].mean(("chain", "draw")).values, w["w"].std(("chain", "draw")).values,
            az.mcse(w, method="mean")["w"].values)


@pytest.mark.parametrize("name", ["blackjax_nuts", "blackjax_mclmc"])
def test_samplers_match_the_exact_posterior_within_monte_carlo_error(name, fits, exact):
    mean, sd = exact
    fit = fits(name)
    est, est_sd, mcse = _w_summary(fit)
    z = np.abs(est - mean) / mcse
    assert np.max(z) < 4.0, (name, z.round(2))          # 11 components, two-sided
    # sd from a few hundred effective draws: about 4% error each, max over 11; MCLMC's bias is below that
    np.testing.assert_allclose(est_sd, sd, rtol=0.15)
    assert float(az.rhat(fit.posterior[["w"]])["w"].max()) < 1.05


def test_nuts_sample_stats_and_counts(fits):
    fit = fits("blackjax_nuts")
    stats = fit.idata.sample_stats
    assert stats["diverging"].dtype == bool and stats["diverging"].shape == (2, 500)
    assert {"lp", "n_steps", "tree_depth", "acceptance_rate", "energy", "step_size"} <= set(stats)
    assert np.all(stats["n_steps"].values >= 1) and np.all(stats["n_steps"].values < 2 ** stats["tree_depth"].values)
    assert 0.6 < float(stats["acceptance_rate"].mean()) <= 1.0                  # target_accept 0.8
    assert fit.info["n_grad"] == int(stats["n_steps"].sum()) + fit.info["n_grad_tune"]
    assert fit.info["n_grad_tune"] > 500 * 2                                     # every warm-up step took a leapfrog
    assert fit.info["divergences"] == int(stats["diverging"].sum())
    assert fit.idata.posterior.attrs["inference_library"] == "blackjax"
    for key in ("compile", "tune", "sample"):
        assert fit.timing[key] > 0, key
    assert fit.timing["total"] >= fit.timing["compile"] + fit.timing["tune"] + fit.timing["sample"] - 1e-6


def test_mclmc_counts_and_no_divergence_statistic(fits):
    fit = fits("blackjax_mclmc")
    stats = fit.idata.sample_stats
    assert "diverging" not in stats and {"lp", "energy_error", "step_size"} <= set(stats)
    assert fit.info["tuning_steps"] == 2 * 500                                   # tune steps per chain, 2 chains
    thin = registry.get(PINNED, "blackjax_mclmc").options["thin"].default
    assert fit.info["n_grad"] == 2 * (fit.info["tuning_steps"] + 2 * 500 * thin) + 2
    assert fit.info["divergences"] is None and fit.info["nan_steps"] == 0


def test_meanfield_vi_finds_the_mean_and_shrinks_the_spread(fits, exact):
    """Mean-field VI on a Gaussian posterior: the optimum has the exact mean and too small marginal sds."""
    mean, sd = exact
    fit = fits("blackjax_meanfield_vi")
    est, est_sd, _ = _w_summary(fit)
    assert np.max(np.abs(est - mean) / sd) < 0.2                 # Adam's noise at lr 0.01 and 1000 draws of q
    assert np.all(est_sd < 1.05 * sd) and np.mean(est_sd / sd) < 0.8
    elbo = fit.idata.objective["elbo"].values
    n_iter, n_mc = (registry.get(PINNED, "blackjax_meanfield_vi").options[k].default for k in ("max_iter", "obj_n_mc"))
    assert elbo.shape == (n_iter,) and fit.info["objective"] == "elbo" and fit.info["n_grad"] == n_iter * n_mc
    assert np.mean(elbo[-n_iter // 10:]) > np.mean(elbo[:n_iter // 10]) + 100 and fit.info["converged"]
    np.testing.assert_allclose(fit.idata.objective["loss"].values, -elbo)


def test_pathfinder_finds_the_mean(data):
    """Pathfinder on a moderately pinned RVM: means within 0.1 sd of m. The precisions' 10% spread moves the
    posterior mean of w by much less than that; the pinned model's stiff 1% spread slows L-BFGS down instead."""
    model = RVM(width=3.0, a=1e2, b=1e2, c=1e2, d=1e2)
    mean, sd = _exact(model, data)
    fit = bz.fit(model, data, "blackjax_pathfinder", draws=500, chains=2, seed=0, progress=False)
    est, est_sd, _ = _w_summary(fit)
    assert np.max(np.abs(est - mean) / sd) < 0.1
    assert np.all(est_sd < 1.1 * sd)
    assert fit.kind == "approximation" and fit.info["converged"] and 0 < fit.info["iterations"] < 200
    assert len(fit.info["path_elbo"]) == 2 and fit.info["best_path"] == int(np.argmax(fit.info["path_elbo"]))
    assert fit.info["n_grad"] > fit.info["iterations"] and np.isfinite(fit.info["pareto_k"])
    assert np.all(np.isfinite(fit.idata.objective["elbo"].values))


def test_same_seed_same_draws_and_chains_do_not_depend_on_their_number(fits, data):
    fit = fits("blackjax_nuts")
    again = bz.fit(PINNED, data, "blackjax_nuts", seed=0, progress=False, **COUNTS)
    np.testing.assert_array_equal(again.posterior["w"].values, fit.posterior["w"].values)
    one = bz.fit(PINNED, data, "blackjax_nuts", seed=0, progress=False, **{**COUNTS, "chains": 1})
    np.testing.assert_array_equal(one.posterior["w"].values[0], fit.posterior["w"].values[0])
    other = bz.fit(PINNED, data, "blackjax_nuts", seed=1, progress=False, **{**COUNTS, "chains": 1})
    assert not np.array_equal(other.posterior["w"].values[0], fit.posterior["w"].values[0])


def test_meanfield_vi_is_seeded(fits, data):
    fit = fits("blackjax_meanfield_vi")
    again = bz.fit(PINNED, data, "blackjax_meanfield_vi", seed=0, progress=False, **COUNTS)
    np.testing.assert_array_equal(again.posterior["w"].values, fit.posterior["w"].values)
    np.testing.assert_array_equal(again.idata.objective["elbo"].values, fit.idata.objective["elbo"].values)


@pytest.mark.parametrize("name,options,option", [
    ("blackjax_nuts", {"target_accept": 1.5}, "target_accept"),
    ("blackjax_nuts", {"target_accept": "high"}, "target_accept"),
    ("blackjax_nuts", {"max_tree_depth": 0}, "max_tree_depth"),
    ("blackjax_nuts", {"max_tree_depth": 2.5}, "max_tree_depth"),
    ("blackjax_mclmc", {"desired_energy_var": -1e-3}, "desired_energy_var"),
    ("blackjax_mclmc", {"diagonal_preconditioning": 1}, "diagonal_preconditioning"),
    ("blackjax_mclmc", {"thin": 0}, "thin"),
    ("blackjax_pathfinder", {"max_iter": 0}, "max_iter"),
    ("blackjax_pathfinder", {"maxcor": -2}, "maxcor"),
    ("blackjax_pathfinder", {"elbo_draws": 1.5}, "elbo_draws"),
    ("blackjax_meanfield_vi", {"max_iter": 1}, "max_iter"),
    ("blackjax_meanfield_vi", {"learning_rate": 0.0}, "learning_rate"),
    ("blackjax_meanfield_vi", {"obj_n_mc": True}, "obj_n_mc"),
])
def test_bad_options_are_refused_naming_the_option(name, options, option, data):
    with pytest.raises(ValueError, match=rf"backend '{name}': option '{option}' must be .*; got"):
        bz.fit(PINNED, data, name, progress=False, **options)


@pytest.mark.parametrize("name,tune", [("blackjax_nuts", 0), ("blackjax_mclmc", 5)])
def test_too_little_tuning_is_refused(name, tune, data):
    with pytest.raises(ValueError, match="tune >="):
        bz.fit(PINNED, data, name, tune=tune, draws=10, chains=1, progress=False)


ENGINES = ("blackjax_nuts", "blackjax_mclmc", "blackjax_pathfinder", "blackjax_meanfield_vi")


GENERIC = ("nuts", "nutpie", "numpyro", "advi", "fullrank_advi")


@pytest.mark.parametrize("model, reason", [(bz.models.PMKL(rule="binary"), "discrete kernel weights"),
                                           (bz.models.ImageRVM(), "needs proper Gamma hyperpriors")],
                         ids=["pmkl-binary", "imagervm-improper"])
def test_no_declaration_backend_is_offered_where_the_declaration_cannot_be_sampled(model, reason):
    assert not set(ENGINES + GENERIC) & set(bz.backends(model))
    assert model.declaration_problem("numpyro") is not None and reason in model.declaration_problem("pymc")
    data = (bz.datasets.load("mkl_sources", n=12, n_test=12, seed=0) if model.family == "pmkl"
            else bz.datasets.load("sinc2d_image", size=8, seed=0))
    for backend in ("blackjax_nuts", "numpyro", "nuts"):
        with pytest.raises(ValueError, match=f"backend '{backend}' cannot run this {type(model).__name__}: .*{reason}"):
            bz.fit(model, data, backend, progress=False)
    # the same models with a samplable configuration are offered all of them
    samplable = (bz.models.PMKL(rule="convex") if model.family == "pmkl"
                 else bz.models.ImageRVM(a=1, b=1e-2, c=1, d=1e-3))
    assert samplable.declaration_problem("pymc") is None
    assert set(ENGINES + GENERIC) <= set(bz.backends(samplable))


def test_discrete_latent_sites_are_refused(data):
    class DiscreteRVM(RVM):
        """An RVM whose declaration also has a discrete latent switch."""

        def numpyro_model(self, data):
            import numpyro
            import numpyro.distributions as dist

            inner = super().numpyro_model(data)

            def model():
                numpyro.sample("switch", dist.Bernoulli(0.5))
                inner()

            return model

    model = DiscreteRVM(width=3.0)
    assert "blackjax_nuts" in bz.backends(model)     # only the declaration tells, and only with data
    with pytest.raises(ValueError, match=r"discrete ones: \['switch'\]"):
        bz.fit(model, data, "blackjax_nuts", draws=10, tune=10, chains=1, progress=False)


# --------------------------------------------------------------------------- other families, against numpyro
def _gpc_problem():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 2))
    y = (X[:, 0] + 0.3 * rng.standard_normal(16) > 0).astype(int)
    return bz.models.GPC(), bz.datasets.Dataset(X=X, y=y, name="tiny_gpc", meta={"task": "classification"})


def _pmkl_problem():
    return bz.models.PMKL(rule="mean"), bz.datasets.load("mkl_sources", n=12, n_test=12, seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("family,name", [("gpc", "blackjax_nuts"), ("gpc", "blackjax_mclmc"),
                                         ("pmkl", "blackjax_nuts"), ("pmkl", "blackjax_mclmc")])
def test_other_families_agree_with_numpyro(family, name):
    model, data = _gpc_problem() if family == "gpc" else _pmkl_problem()
    counts = dict(draws=1000, tune=1000, chains=2, progress=False)
    ref = bz.fit(model, data, "numpyro", seed=1, **counts)
    fit = bz.fit(model, data, name, seed=2, **counts)
    var = model.compare_vars[0]
    means = [f.posterior[var].mean(("chain", "draw")).values.ravel() for f in (ref, fit)]
    ses = [az.mcse(f.posterior[[var]], method="mean")[var].values.ravel() for f in (ref, fit)]
    z = np.abs(means[0] - means[1]) / np.sqrt(ses[0] ** 2 + ses[1] ** 2)
    assert np.max(z) < 4.5, (family, name, np.sort(z)[-3:].round(2))   # max over 16 / 36 components
