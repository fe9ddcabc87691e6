"""bz.sbc: simulation-based calibration from the prior predictive. An exact sampler passes, one whose Gibbs step
has its conditional variance doubled fails; bad input and models that cannot simulate are refused before any fit;
the result is saved with a comparison and shown in its report."""
from __future__ import annotations

import dataclasses
import html
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from tests.helpers.scaled_gibbs import registered

import bayeszoo as bz
from bayeszoo import registry
from bayeszoo.diagnostics.calibration import SBCResult
from bayeszoo.results import build_fit

UNIFORM_SD = np.sqrt(1 / 12)


@pytest.fixture(scope="module")
def conjugate():
    """The RVM with its precisions held by the prior (alpha ~ Gamma(1e6, 1e6), beta ~ Gamma(1e6, 4e4): 1 and 25
    to 0.1 %) is the conjugate Gaussian model w ~ N(0, I), t | w ~ N(Phi w, 1 / 25), whose posterior of w a Gibbs
    w-step with alpha = 1, beta = 25 fixed draws exactly and independently: SBC of w alone, no thinning needed."""
    X = np.linspace(-1.0, 1.0, 4)[:, None]
    data = bz.datasets.Dataset(X=X, y=np.array([0.1, -0.4, 0.3, 0.8]), name="four", meta={"task": "regression"})
    model = bz.models.RVM(width=0.7, a=1e6, b=1e6, c=1e6, d=4e4)
    run = dict(n_simulations=150, draws=49, tune=0, chains=1, thin=1, variables=["w"], seed=1, progress=False,
               fix_alpha=1.0, fix_beta=25.0)
    return model, data, run


@pytest.fixture(scope="module")
def exact(conjugate):
    model, data, run = conjugate
    return bz.sbc(model, "gibbs", data, **run)


def test_an_exact_sampler_passes(exact, conjugate):
    model, data, run = conjugate
    assert exact.passed and exact.failed_components == [] and not exact.errors
    assert exact.components == [f"w[{i}]" for i in range(model.n_basis(data))]
    assert exact.ranks.shape == (150, 5) and set(exact.n_ranked) == {49}
    assert exact.ranks.to_numpy().min() >= 0 and exact.ranks.to_numpy().max() <= 49
    u = exact.fractional_ranks().to_numpy()
    # uniform ranks: mean 1/2 and sd 1/sqrt(12), within 4 standard errors of 150 ranks (the components of one
    # simulation may move together); a uniform sample's sd has standard error 0.129 / sqrt(n)
    assert abs(u.mean() - 0.5) < 4 * UNIFORM_SD / np.sqrt(150)
    assert abs(u.std() - UNIFORM_SD) < 4 * 0.129 / np.sqrt(150)
    table = exact.summary()
    assert table["passed"].all() and (table["points_outside"] == 0).all()
    assert table["max_ecdf_difference"].abs().max() < 0.12
    assert exact.component_prob == pytest.approx(1 - 0.05 / 5)
    assert exact.verdict().endswith("Passed: every component's ECDF difference stays inside its band.")


def test_a_gibbs_step_with_doubled_conditional_variance_fails(exact, conjugate):
    model, data, run = conjugate
    with registered("gibbs_wide", 2.0):
        wide = bz.sbc(model, "gibbs_wide", data, **run)
    assert not wide.passed and wide.failed_components and not wide.errors
    u = wide.fractional_ranks().to_numpy()
    # sd 1.41 times the posterior's: the true values sit in the middle of the draws, u = Phi(z / sqrt(2)) has sd
    # sqrt(asin(1/3) / (2 pi)) = 0.233 instead of 0.289
    assert abs(u.std() - np.sqrt(np.arcsin(1 / 3) / (2 * np.pi))) < 0.02
    table = wide.summary().set_index("component")
    failed = table.loc[wide.failed_components]
    assert (failed["max_ecdf_difference"] < -0.1).all() and (failed["at"] < 0.5).all()   # too few low ranks
    # the same simulations as the exact run: the prior draws depend on the seed only
    np.testing.assert_array_equal(wide.n_ranked, exact.n_ranked)
    assert "FAILED" in wide.verdict() and wide.failed_components[0] in wide.verdict()
    fig = wide.plot()
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert len(titles) == 5 and set(titles[:len(wide.failed_components)]) == {
        f"{c} (fails)" for c in wide.failed_components}                     # the failing panels first
    assert "gibbs_wide" not in bz.backends(model)


def test_same_seed_same_ranks_on_an_executor(conjugate, exact):
    model, data, run = conjugate
    few = {**run, "n_simulations": 6}
    with ThreadPoolExecutor(max_workers=2) as pool:
        there = bz.sbc(model, "gibbs", data, executor=pool, **few)
    assert there.ranks.equals(exact.ranks.iloc[:6])     # simulation i draws and fits the same, however many run
    fresh = bz.sbc(model, "gibbs", data, **{**few, "n_simulations": 3, "seed": None})
    assert fresh.seed != run["seed"] and not fresh.ranks.equals(exact.ranks.iloc[:3])
    assert bz.sbc(model, "gibbs", data, **{**few, "n_simulations": 3, "seed": fresh.seed}).ranks.equals(fresh.ranks)


def test_thinning_follows_each_fits_ess(conjugate):
    model, data, run = conjugate
    auto = bz.sbc(model, "gibbs", data, **{**run, "n_simulations": 5, "thin": None})
    ess = auto.ess_min.to_numpy()
    assert ess.shape == (5,) and np.all(ess > 0)
    np.testing.assert_array_equal(auto.n_ranked, [len(range(0, 49, int(np.ceil(49 / e)))) for e in ess])
    assert auto.ranks.iloc[0].max() <= auto.n_ranked.iloc[0]


def test_bad_input_and_models_that_cannot_simulate_are_refused_before_any_fit(conjugate, monkeypatch):
    model, data, run = conjugate
    spec = registry.get(model, "gibbs")
    monkeypatch.setitem(registry._FAMILY, ("rvm", "gibbs"), dataclasses.replace(spec, run=_must_not_run))
    cases = [
        (dict(data=None), "needs data, a Dataset whose y the simulated observations replace"),
        (dict(backend="nope"), "unknown backend 'nope'"),
        (dict(n_simulations=1), "n_simulations must be an integer >= 2"),
        (dict(ci_prob=1.0), "ci_prob must be a finite number < 1"),
        (dict(thin=0), "thin must be an integer >= 1"),
        (dict(variables=["beta"]), r"\['beta'\] are not canonical variables of RVM"),
        (dict(fix_beta=-1.0), "option 'fix_beta' must be"),
        (dict(max_iter=5), r"unknown option\(s\) \['max_iter'\]"),
        (dict(executor="pool"), "sbc: executor must be a concurrent.futures.Executor"),
    ]
    for change, message in cases:
        kwargs = {"backend": "gibbs", "data": data, **run, **change}
        with pytest.raises(ValueError, match=message):
            bz.sbc(model, **kwargs)
    # a prior too vague to simulate from: the default a = b = 1e-4 draws weights beyond double precision
    with pytest.raises(ValueError, match="the prior predictive of RVM could not be simulated"):
        bz.sbc(bz.models.RVM(width=0.7), "gibbs", data, n_simulations=50, progress=False)
    # a noise prior Gamma(0.001, 1) puts beta below 1e-200 more often than not: targets beyond the RVM's range
    with pytest.raises(ValueError, match=r"simulation [0-9]+ drew observations the model refuses \(RVM: regression "
                                         r"targets y reach"):
        bz.sbc(bz.models.RVM(width=0.7, a=3.0, b=2.0, c=1e-3, d=1.0), "gibbs", data, n_simulations=5, progress=False)


def test_declarations_that_cannot_simulate_their_prior_are_refused():
    slm_data = bz.datasets.load("slm_signal", kind="spikes", n=8, m=6, n_test=2, seed=0)
    with pytest.raises(ValueError, match=r"adds density terms with numpyro.factor \(flat, potentials\)"):
        bz.sbc(bz.models.SLM(potential="gaussian", tau=1.0, sigma2=0.1), "gibbs", slm_data, n_simulations=5,
               progress=False)
    image = bz.datasets.load("sinc2d_image", size=6, seed=0)
    with pytest.raises(ValueError, match="NumPyro declaration, which cannot be used here: .*proper Gamma"):
        bz.sbc(bz.models.ImageRVM(kernels=(2.0,)), "dft", image, n_simulations=5, progress=False)


def _must_not_run(*args, **kwargs):
    raise AssertionError("a fit ran although the SBC's input was refused")


def test_a_comparison_shows_and_keeps_its_sbc(exact, conjugate, tmp_path):
    model, data, _ = conjugate
    cmp = bz.compare(model, data, backends=["gibbs"], reference=None, draws=100, chains=2, progress=False,
                     options={"gibbs": {"fix_alpha": 1.0, "fix_beta": 25.0}})
    assert cmp.attach_sbc(exact) is cmp and cmp.calibration == {"gibbs": exact}
    cmp.save(tmp_path)
    report = (tmp_path / "report.html").read_text()
    assert "<h2>Simulation-based calibration</h2>" in report and html.escape(exact.verdict()) in report
    assert 'alt="gibbs: SBC ECDF differences"' in report
    loaded = bz.load_comparison(tmp_path).calibration["gibbs"]
    assert loaded.ranks.equals(exact.ranks) and loaded.n_ranked.equals(exact.n_ranked)
    assert loaded.passed and loaded.summary().equals(exact.summary()) and loaded.seed == exact.seed
    other = dataclasses.replace(exact, model_spec={**exact.model_spec, "width": 1.0})
    with pytest.raises(ValueError, match="run with another model than this comparison's"):
        cmp.attach_sbc(other)
    with pytest.raises(ValueError, match="takes the result of bz.sbc"):
        cmp.attach_sbc(exact.summary())


def test_the_result_round_trips_through_json(exact):
    import json

    again = SBCResult.from_dict(json.loads(json.dumps(exact.to_dict())))
    assert again.ranks.equals(exact.ranks) and again.settings == exact.settings
    np.testing.assert_array_equal(again.fractional_ranks(), exact.fractional_ranks())
    assert again.verdict() == exact.verdict()


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_rvm_gibbs_sampler_is_calibrated_and_a_wide_one_is_not():
    """The whole hierarchical RVM (w, alpha, beta sampled): thinned by each fit's ESS, the package's Gibbs sampler
    passes; with the w-step's variance doubled, the error feeds back through alpha and beta and shows at once."""
    X = np.linspace(-1.0, 1.0, 4)[:, None]
    data = bz.datasets.Dataset(X=X, y=np.array([0.1, -0.4, 0.3, 0.8]), name="four", meta={"task": "regression"})
    model = bz.models.RVM(width=0.7, a=3.0, b=2.0, c=10.0, d=1.0)
    run = dict(n_simulations=300, draws=400, tune=200, chains=1, seed=5, progress=False)
    exact = bz.sbc(model, "gibbs", data, **run)
    assert exact.passed, exact.summary()
    with registered("gibbs_wide", 2.0):
        wide = bz.sbc(model, "gibbs_wide", data, **run)
    assert not wide.passed and "log_beta" in wide.failed_components


def test_ranks_among_too_few_draws_are_not_judged(conjugate):
    """A sampler whose fits keep 5 draws after thinning is neither passed nor failed: the ranks cannot tell."""
    model, data, run = conjugate
    few = bz.sbc(model, "gibbs", data, **{**run, "n_simulations": 20, "draws": 10, "thin": 2})
    assert set(few.n_ranked) == {5} and few.too_few_ranked and not few.passed
    assert "NOT JUDGED" in few.verdict() and "fewest: 5" in few.verdict()


# ------------------------------------------------------------------------------------ a model of one's own
SCHOOL_SIGMA = np.array([1.0, 2.0, 0.5])
SCHOOL_Y = np.array([0.3, -1.0, 1.2])


def _pymc_means():
    import pymc as pm

    with pm.Model(coords={"school": ["a", "b", "c"]}) as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        pm.Normal("y", mu, SCHOOL_SIGMA, observed=SCHOOL_Y, dims="school")
    return bz.models.from_pymc(model, name="means")


def _numpyro_means_fn(sigma, y=None):
    import numpyro
    import numpyro.distributions as dist

    mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
    with numpyro.plate("school", len(sigma)):
        numpyro.sample("y", dist.Normal(mu, sigma), obs=y)


def _conjugate_mean(name: str, scale: float):
    """Backend ``name``: mu ~ N(0, 4), y_j ~ N(mu, sigma_j^2): the exact posterior of mu from the model's own
    observations, drawn independently; ``scale`` multiplies its sd (1.5: a sampler too wide)."""
    def run(model, data, *, draws, tune, chains, seed, progress):
        y = np.asarray(model.observed_values()["y"], dtype=float)
        precision = 1 / 4 + np.sum(1 / SCHOOL_SIGMA ** 2)
        mean = np.sum(y / SCHOOL_SIGMA ** 2) / precision
        noise = np.random.default_rng(seed).standard_normal((chains, draws))
        return build_fit(model, data, name, "approximation",
                         {"mu": mean + scale * noise / np.sqrt(precision)}, timing={"sample": 0.0})
    return run


@pytest.fixture
def conjugate_backends(restore_registry):
    bz.register_backend("mean_exact", _conjugate_mean("mean_exact", 1.0), kind="approximation",
                        description="exact posterior")
    bz.register_backend("mean_wide", _conjugate_mean("mean_wide", 1.5), kind="approximation",
                        description="sd 1.5 times too wide")


@pytest.mark.parametrize("library", ["pymc", "numpyro"])
def test_a_model_of_ones_own_is_simulated_by_its_library_and_refitted(library, conjugate_backends):
    """The user's model is rebuilt around each simulation's observations (pm.observe / numpyro's condition): the
    exact conjugate posterior passes, one 1.5 times too wide fails, and the user's model is left as it was."""
    model = _pymc_means() if library == "pymc" else bz.models.from_numpyro(_numpyro_means_fn, SCHOOL_SIGMA,
                                                                          y=SCHOOL_Y)
    run = dict(n_simulations=120, draws=49, chains=1, seed=3, progress=False)
    exact = bz.sbc(model, "mean_exact", **run)
    assert exact.passed and not exact.errors and exact.components == ["mu"] and set(exact.n_ranked) == {49}
    assert exact.model_spec == model.spec() and exact.data_name == model.name
    u = exact.fractional_ranks().to_numpy()
    assert abs(u.mean() - 0.5) < 4 * UNIFORM_SD / np.sqrt(120)
    wide = bz.sbc(model, "mean_wide", **run)
    assert not wide.passed and wide.failed_components == ["mu"]
    # u = Phi(z / 1.5): sd sqrt(asin(a^2 / (1 + a^2)) / (2 pi)) with a = 1 / 1.5, 0.223 instead of 0.289
    a2 = 1 / 1.5 ** 2
    assert abs(wide.fractional_ranks().to_numpy().std() - np.sqrt(np.arcsin(a2 / (1 + a2)) / (2 * np.pi))) < 0.025
    np.testing.assert_array_equal(model.dataset().y, SCHOOL_Y)      # the user's observations are untouched
    again = bz.sbc(model, "mean_exact", **{**run, "n_simulations": 5})
    assert again.ranks.equals(exact.ranks.iloc[:5])                  # simulation i depends on the seed and i only


def test_a_model_rebuilt_with_other_observations():
    model = _pymc_means()
    other = model.with_observations({"y": np.array([5.0, 6.0, 7.0])}, name="other")
    np.testing.assert_array_equal(other.dataset().y, [5.0, 6.0, 7.0])
    assert other.fingerprint != model.fingerprint and other.var_dims() == model.var_dims()
    assert tuple(other.pymc_model().named_vars_to_dims["y"]) == ("school",)
    assert list(other.pymc_model().coords["school"]) == ["a", "b", "c"]
    np.testing.assert_array_equal(model.dataset().y, SCHOOL_Y)
    same = model.with_observations({"y": SCHOOL_Y.copy()})
    assert same.fingerprint == model.fingerprint
    numpyro_model = bz.models.from_numpyro(_numpyro_means_fn, SCHOOL_SIGMA, y=SCHOOL_Y)
    moved = numpyro_model.with_observations({"y": np.array([5.0, 6.0, 7.0])})
    np.testing.assert_array_equal(moved.dataset().y, [5.0, 6.0, 7.0])
    assert moved.fingerprint != numpyro_model.fingerprint
    for wrong, message in [({"z": SCHOOL_Y}, r"must give every observed variable, \['y'\]"),
                           ({"y": np.zeros(4)}, r"observations of 'y' must have shape \(3,\); got \(4,\)")]:
        with pytest.raises(ValueError, match=message):
            model.with_observations(wrong)
        with pytest.raises(ValueError, match=message):
            numpyro_model.with_observations(wrong)


def test_models_of_ones_own_that_cannot_be_simulated_are_refused(conjugate_backends, tmp_path):
    import pymc as pm

    with pm.Model() as potential:
        mu = pm.Normal("mu", 0.0, 2.0)
        pm.Potential("soft_bound", -mu ** 2)
        pm.Normal("y", mu, 1.0, observed=SCHOOL_Y)
    with pytest.raises(ValueError, match=r"adds density terms with pm.Potential \(soft_bound\)"):
        bz.sbc(bz.models.from_pymc(potential), "mean_exact", n_simulations=5, progress=False)
    with pm.Model() as flat:
        mu = pm.Flat("mu")
        pm.Normal("y", mu, 1.0, observed=SCHOOL_Y)
    with pytest.raises(ValueError, match="cannot be simulated from its prior .*proper priors"):
        bz.sbc(bz.models.from_pymc(flat), "mean_exact", n_simulations=5, progress=False)
    model = _pymc_means()
    with pytest.raises(ValueError, match="carries its own observations"):
        bz.sbc(model, "mean_exact", bz.datasets.load("sinc", n=10, seed=0), n_simulations=5, progress=False)
    fit = bz.fit(model, backend="mean_exact", draws=5, chains=1, progress=False)
    fit.save(tmp_path / "fit.nc")
    saved = bz.load_fit(tmp_path / "fit.nc").model()
    with pytest.raises(ValueError, match="cannot sample. Wrap the original model again"):
        bz.sbc(saved, "mean_exact", n_simulations=5, progress=False)
