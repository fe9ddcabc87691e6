"""Models of one's own (bz.models.from_pymc / from_numpyro) on eight schools, non-centred: what is read off the
model (variables, dims, coords, observations), the fingerprint (stable across processes, changed by the data or
a prior), the log-likelihood against the normal density written out, bad input refused before sampling; in the
slow set the generic backends on both declarations, their agreement, PSIS-LOO, and a saved comparison read back
and reported in a fresh process."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import warnings

import arviz as az
import numpy as np
import pytest
from scipy import stats

import bayeszoo as bz
from bayeszoo.results import build_fit
from tests.helpers import env_with_root

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
SCHOOLS = ["Choate", "Deerfield", "Phillips Andover", "Phillips Exeter", "Hotchkiss", "Lawrenceville",
           "St. Paul's", "Mt. Hermon"]


def pymc_eight_schools(y=Y, prior_sd=5.0):
    import pymc as pm

    with pm.Model(coords={"school": SCHOOLS}) as model:
        mu = pm.Normal("mu", 0.0, prior_sd)
        tau = pm.HalfCauchy("tau", 5.0)
        theta_tilde = pm.Normal("theta_tilde", 0.0, 1.0, dims="school")
        theta = pm.Deterministic("theta", mu + tau * theta_tilde, dims="school")
        pm.Normal("obs", theta, SIGMA, observed=y, dims="school")
    return model


def eight_schools(sigma, y=None):
    import numpyro
    import numpyro.distributions as dist

    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("school", len(sigma)):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
        theta = numpyro.deterministic("theta", mu + tau * theta_tilde)
        numpyro.sample("obs", dist.Normal(theta, sigma), obs=y)


def eight_schools_wide_prior(sigma, y=None):
    import numpyro
    import numpyro.distributions as dist

    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("school", len(sigma)):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
        theta = numpyro.deterministic("theta", mu + tau * theta_tilde)
        numpyro.sample("obs", dist.Normal(theta, sigma), obs=y)


@pytest.fixture(scope="module")
def pymc_model():
    return bz.models.from_pymc(pymc_eight_schools(), name="eight_schools")


@pytest.fixture(scope="module")
def numpyro_model():
    return bz.models.from_numpyro(eight_schools, SIGMA, y=Y)


def _posterior(rng, chains=2, draws=3, coords=None):
    """A made-up canonical posterior of eight schools over (chain, draw)."""
    import xarray as xr

    coords = {"school": np.arange(8)} if coords is None else coords
    return xr.Dataset({"mu": (("chain", "draw"), rng.normal(size=(chains, draws))),
                       "tau": (("chain", "draw"), rng.gamma(2.0, size=(chains, draws))),
                       "theta_tilde": (("chain", "draw", "school"), rng.normal(size=(chains, draws, 8)))},
                      coords={"chain": np.arange(chains), "draw": np.arange(draws), **coords})


def _expected_log_likelihood(post):
    theta = post["mu"].values[..., None] + post["tau"].values[..., None] * post["theta_tilde"].values
    return stats.norm.logpdf(Y, theta, SIGMA)


# ------------------------------------------------------------------------------------------- reading the model
def test_pymc_model_gives_its_free_variables_dims_coords_and_observations(pymc_model):
    assert pymc_model.var_dims() == {"mu": (), "tau": (), "theta_tilde": ("school",)}   # theta: deterministic
    np.testing.assert_array_equal(pymc_model.coords()["school"], SCHOOLS)
    data = pymc_model.dataset()
    assert (data.name, data.n, data.d) == ("eight_schools", 8, 0)
    np.testing.assert_array_equal(data.y, Y)
    assert bz.backends(pymc_model) == ["nuts", "nutpie", "numpyro", "advi", "fullrank_advi", "blackjax_nuts",
                                       "blackjax_mclmc", "blackjax_pathfinder", "blackjax_meanfield_vi"]
    spec = pymc_model.spec()
    assert spec["family"] == "user" and spec["library"] == "pymc" and spec["observed"] == {"obs": [8]}
    assert json.loads(json.dumps(spec)) == spec


def test_numpyro_model_names_plate_axes_after_the_plate(numpyro_model):
    assert numpyro_model.name == "eight_schools"
    assert numpyro_model.var_dims() == {"mu": (), "tau": (), "theta_tilde": ("school",)}
    np.testing.assert_array_equal(numpyro_model.coords()["school"], np.arange(8))
    np.testing.assert_array_equal(numpyro_model.dataset().y, Y)
    assert bz.backends(numpyro_model) == ["numpyro", "blackjax_nuts", "blackjax_mclmc", "blackjax_pathfinder",
                                          "blackjax_meanfield_vi"]


def test_a_saved_description_reads_fits_but_refuses_to_sample(pymc_model):
    saved = bz.models.from_spec(json.loads(json.dumps(pymc_model.spec())))
    assert isinstance(saved, bz.models.SavedModel) and saved == pymc_model and saved.spec() == pymc_model.spec()
    assert saved.var_dims() == pymc_model.var_dims()
    np.testing.assert_array_equal(saved.coords()["school"], SCHOOLS)
    assert bz.backends(saved) == []
    with pytest.raises(ValueError, match=r"description of a pymc model .* bz\.models\.from_pymc\(pm_model\)"):
        bz.fit(saved, backend="nuts")
    with pytest.raises(ValueError, match="cannot sample"):
        bz.fit(saved, pymc_model.dataset(), backend="advi")


# ------------------------------------------------------------------------------------------------ fingerprint
def test_fingerprint_follows_the_data_and_the_priors(pymc_model, numpyro_model):
    assert bz.models.from_pymc(pymc_eight_schools(), name="eight_schools").spec() == pymc_model.spec()
    changed_y = Y.copy()
    changed_y[3] += 1.0
    assert bz.models.from_pymc(pymc_eight_schools(y=changed_y)).fingerprint != pymc_model.fingerprint
    assert bz.models.from_pymc(pymc_eight_schools(prior_sd=10.0)).fingerprint != pymc_model.fingerprint
    assert bz.models.from_numpyro(eight_schools, SIGMA, y=Y).spec() == numpyro_model.spec()
    assert bz.models.from_numpyro(eight_schools, SIGMA, y=changed_y).fingerprint != numpyro_model.fingerprint
    assert bz.models.from_numpyro(eight_schools, SIGMA * 2, y=Y).fingerprint != numpyro_model.fingerprint
    assert bz.models.from_numpyro(eight_schools_wide_prior, SIGMA, y=Y).fingerprint != numpyro_model.fingerprint
    for model in (pymc_model, numpyro_model):   # what a Dask worker or a process pool receives
        copy = pickle.loads(pickle.dumps(model))
        assert copy.spec() == model.spec()
    rewrapped = bz.models.from_pymc(pickle.loads(pickle.dumps(pymc_model)).pymc_model(), name="eight_schools")
    assert rewrapped.fingerprint == pymc_model.fingerprint


@pytest.mark.slow   # the fresh process imports bayeszoo: several seconds
def test_fingerprints_are_the_same_in_a_fresh_process(pymc_model, numpyro_model):
    script = ("import json\n"
              "import bayeszoo as bz, tests.models.test_user_models as t\n"
              "print(json.dumps([bz.models.from_pymc(t.pymc_eight_schools(), name='eight_schools').spec(),\n"
              "                  bz.models.from_numpyro(t.eight_schools, t.SIGMA, y=t.Y).spec()]))\n")
    # another string-hashing seed too: nothing may depend on the order of a set
    env = env_with_root(PYTHONHASHSEED="12345")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr
    pymc_spec, numpyro_spec = json.loads(res.stdout.strip().splitlines()[-1])
    assert pymc_spec == pymc_model.spec()
    assert numpyro_spec == numpyro_model.spec()


# ------------------------------------------------------------------------------------------ log-likelihood
def test_log_likelihood_is_the_normal_density_of_each_school(pymc_model, numpyro_model):
    rng = np.random.default_rng(0)
    post = _posterior(rng, coords={"school": SCHOOLS})
    for model in (pymc_model, numpyro_model):
        values = model.pointwise_log_likelihood(post)["obs"]
        assert values.shape == (2, 3, 8)
        np.testing.assert_allclose(values, _expected_log_likelihood(post), rtol=1e-10)


def test_a_multivariate_observation_has_one_term_per_event():
    """A to_event observation is one likelihood term for its three values, an MvNormal one term per row: the
    log_likelihood group holds y over ``event`` (the joint densities), and PSIS-LOO leaves out one event at a
    time."""
    import numpyro
    import numpyro.distributions as dist
    import pymc as pm

    def block(y=None):
        mean = numpyro.sample("mean", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(mean, 1.0).expand([3]).to_event(1), obs=y)

    values = np.array([0.2, -0.4, 1.1])
    model = bz.models.from_numpyro(block, y=values)
    post = _posterior(np.random.default_rng(1), draws=4).drop_vars(["tau", "theta_tilde"]).rename({"mu": "mean"})
    terms = model.pointwise_log_likelihood(post)["y"]
    assert terms.shape == (2, 4)
    np.testing.assert_allclose(terms, stats.norm.logpdf(values, post["mean"].values[..., None], 1.0).sum(-1),
                               rtol=1e-10)
    fit = build_fit(model, model.dataset(), "given", "approximation", {"mean": post["mean"].values}, timing={})
    np.testing.assert_allclose(fit.idata.log_likelihood["y"].values, terms[..., None], rtol=1e-12)
    assert fit.idata.log_likelihood["y"].dims == ("chain", "draw", "event") and "one term per event" in \
        fit.info["log_likelihood"]

    rows = np.array([[0.5, -1.0], [1.5, 0.2], [-0.3, 0.8], [0.0, 2.1]])
    cov = np.array([[1.0, 0.6], [0.6, 2.0]])
    with pm.Model() as pm_model:
        centre = pm.Normal("centre", 0.0, 3.0, shape=2)
        pm.MvNormal("rows", centre, cov=cov, observed=rows)
    mv = bz.models.from_pymc(pm_model, name="rows")
    centres = np.random.default_rng(2).normal(size=(2, 50, 2))
    fit = build_fit(mv, mv.dataset(), "given", "approximation", {"centre": centres}, timing={})
    group = fit.idata.log_likelihood["y"]
    assert group.shape == (2, 50, 4) and fit.idata.observed_data["y"].shape == (8,)
    expected = [[[stats.multivariate_normal.logpdf(r, c, cov) for r in rows] for c in chain] for chain in centres]
    np.testing.assert_allclose(group.values, expected, rtol=1e-10)
    loo = bz.diagnostics.metrics.loo_columns(fit)
    assert np.isfinite(loo["elpd_loo"]) and loo["elpd_loo"] < 0


# ------------------------------------------------------------------------------------------------ bad input
def test_bad_input_is_refused_before_sampling(pymc_model, numpyro_model):
    import numpyro
    import numpyro.distributions as dist
    import pymc as pm
    import pytensor.tensor as pt
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op

    with pm.Model() as counts:
        rate = pm.Gamma("rate", 2.0, 1.0)
        k = pm.Poisson("k", rate)
        pm.Normal("y", k, 1.0, observed=np.array([1.0, 2.5, 2.0]))
    discrete = bz.models.from_pymc(counts)
    assert discrete.discrete == ["k"] and bz.backends(discrete) == []
    for backend in ("nuts", "advi", "numpyro", "blackjax_nuts"):
        with pytest.raises(ValueError, match=r"discrete free variable\(s\) \['k'\]"):
            bz.fit(discrete, backend=backend)

    def mixture(y=None):
        z = numpyro.sample("z", dist.Bernoulli(0.3))
        numpyro.sample("y", dist.Normal(2.0 * z, 1.0), obs=y)

    with pytest.raises(ValueError, match=r"discrete free variable\(s\) \['z'\]"):
        bz.fit(bz.models.from_numpyro(mixture, y=np.array([0.1, 1.9])), backend="numpyro")

    with pytest.raises(ValueError, match="is a NumPyro model; the PyMC backends"):
        bz.fit(numpyro_model, backend="nuts")
    with pytest.raises(ValueError, match=r"bz\.models\.from_pymc\(pm_model\)"):
        bz.fit(pymc_model.pymc_model(), backend="nuts")
    with pytest.raises(ValueError, match=r"bz\.models\.from_numpyro"):
        bz.fit(eight_schools, backend="numpyro")
    with pytest.raises(ValueError, match="backend=..."):
        bz.fit(pymc_model, "nuts")
    with pytest.raises(ValueError, match="carries its own observations"):
        bz.fit(pymc_model, bz.datasets.load("sinc", n=8), backend="nuts")
    with pytest.raises(ValueError, match="no observed variables"):
        with pm.Model() as prior_only:
            pm.Normal("x", 0.0, 1.0)
        bz.models.from_pymc(prior_only)

    class Doubled(Op):   # an operation with no JAX version
        def make_node(self, x):
            x = pt.as_tensor_variable(x)
            return Apply(self, [x], [x.type()])

        def perform(self, node, inputs, outputs):
            outputs[0][0] = 2.0 * inputs[0]

    with pm.Model() as not_jax:
        a = pm.Normal("a", 0.0, 1.0)
        pm.Normal("y", Doubled()(a), 1.0, observed=np.array([0.3, 0.5]))
    with pytest.raises(ValueError, match=r"cannot be exported to JAX .* Doubled\); the PyMC backends"):
        bz.fit(bz.models.from_pymc(not_jax), backend="numpyro", draws=10, tune=10, chains=1, progress=False)

    with pm.Model() as mutable:
        y_data = pm.Data("y_data", np.array([0.5, 1.5]))
        mean = pm.Normal("mean", 0.0, 1.0)
        pm.Normal("y", mean, 1.0, observed=y_data)
    wrapped = bz.models.from_pymc(mutable)
    pm.set_data({"y_data": np.array([0.5, 9.5])}, model=mutable)
    with pytest.raises(ValueError, match="changed since bz.models.from_pymc read it"):
        bz.fit(wrapped, backend="nuts")
    assert bz.models.from_pymc(mutable).fingerprint != wrapped.fingerprint


# ------------------------------------------------------------------------------------------------ the fits
def _mean_se(fit, name):
    """Posterior means of each component and their Monte-Carlo standard errors (sd / sqrt(bulk ESS))."""
    x = fit.posterior[name].values
    x = x.reshape(x.shape[0], x.shape[1], -1)
    ess = np.array([az.ess(x[:, :, j]) for j in range(x.shape[2])])
    flat = x.reshape(-1, x.shape[2])
    return flat.mean(0), flat.std(0) / np.sqrt(ess)


def _agree(fit_a, fit_b, limit=4.5):
    """The largest z of the difference of posterior means over every component (two-sided, ten components)."""
    z = []
    for name in ("mu", "tau", "theta_tilde"):
        (m1, s1), (m2, s2) = _mean_se(fit_a, name), _mean_se(fit_b, name)
        z.append(np.abs(m1 - m2) / np.sqrt(s1 ** 2 + s2 ** 2))
    return float(np.max(np.concatenate(z)))


COUNTS = {"draws": 1000, "tune": 1000, "chains": 4, "seed": 11, "progress": False}


@pytest.fixture(scope="module")
def pymc_nuts(pymc_model):
    return bz.fit(pymc_model, backend="nuts", target_accept=0.95, **COUNTS)


@pytest.fixture(scope="module")
def pymc_numpyro(pymc_model):
    return bz.fit(pymc_model, backend="numpyro", target_accept=0.95, **COUNTS)


@pytest.fixture(scope="module")
def numpyro_numpyro(numpyro_model):
    return bz.fit(numpyro_model, backend="numpyro", target_accept=0.95, **COUNTS)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pymc_nuts", "pymc_numpyro", "numpyro_numpyro"])
def test_fit_holds_the_free_variables_and_the_log_likelihood(name, request):
    fit = request.getfixturevalue(name)
    post = fit.posterior
    assert set(post.data_vars) == {"mu", "tau", "theta_tilde"} and post["theta_tilde"].dims[2:] == ("school",)
    expected_coords = SCHOOLS if name.startswith("pymc") else np.arange(8)
    np.testing.assert_array_equal(post["school"].values, expected_coords)
    assert np.all(post["tau"].values > 0)
    ll = fit.idata.log_likelihood["y"]
    assert ll.dims == ("chain", "draw", "obs") and ll.shape == (4, 1000, 8)
    np.testing.assert_allclose(ll.values[2, 17], _expected_log_likelihood(post.isel(chain=2, draw=17)), rtol=1e-10)
    assert fit.info["divergences"] < 10   # non-centred, target_accept 0.95: a few at most
    loo = az.loo(fit.idata, pointwise=True)
    assert -32.5 < loo.elpd_loo < -29.0 and 0.2 < loo.p_loo < 2.5   # eight schools: elpd_loo about -30.7


@pytest.mark.slow
def test_pymc_nuts_and_numpyro_nuts_agree_within_monte_carlo_error(pymc_nuts, pymc_numpyro, numpyro_numpyro):
    assert _agree(pymc_nuts, pymc_numpyro) < 4.5       # one PyMC model: PyMC's NUTS and its JAX export in NumPyro
    assert _agree(pymc_nuts, numpyro_numpyro) < 4.5    # the same posterior declared in NumPyro
    loos = [float(az.loo(f.idata).elpd_loo) for f in (pymc_nuts, pymc_numpyro, numpyro_numpyro)]
    assert np.ptp(loos) < 0.3


@pytest.mark.slow
def test_nutpie_advi_and_blackjax_run_the_pymc_model(pymc_model, numpyro_model, pymc_nuts):
    small = {**COUNTS, "draws": 500, "tune": 500, "chains": 2}
    nutpie = bz.fit(pymc_model, backend="nutpie", **small)
    blackjax = bz.fit(pymc_model, backend="blackjax_nuts", target_accept=0.95, **small)
    blackjax_numpyro = bz.fit(numpyro_model, backend="blackjax_nuts", target_accept=0.95, **small)
    for fit in (nutpie, blackjax, blackjax_numpyro):
        assert _agree(pymc_nuts, fit) < 4.5, fit.backend
        assert "log_likelihood" in fit.idata.groups()
    advi = bz.fit(pymc_model, backend="advi", max_iter=5000, draws=1000, chains=2, seed=3, progress=False)
    assert advi.kind == "approximation" and np.isfinite(advi.idata.objective["elbo"].values[-1])
    for name in ("mu", "tau"):
        sd = float(pymc_nuts.posterior[name].std())
        assert abs(float(advi.posterior[name].mean()) - float(pymc_nuts.posterior[name].mean())) < 0.5 * sd, name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # large Pareto k: the draws are the approximation's
        assert np.isfinite(az.loo(advi.idata).elpd_loo)


@pytest.mark.slow
@pytest.mark.parametrize("backend, options, tolerance", [
    ("fullrank_advi", {"max_iter": 5000}, 0.3),
    ("blackjax_mclmc", {}, 0.2),
    ("blackjax_meanfield_vi", {"max_iter": 3000}, 0.3),
    ("blackjax_pathfinder", {}, 2.0),
])
def test_every_other_generic_backend_runs_the_pymc_model(backend, options, tolerance, pymc_model, pymc_nuts):
    """The remaining engines on the PyMC model: the free variables, the log-likelihood, and the posterior mean of
    mu within ``tolerance`` posterior sds of NUTS's (the approximations' own error; MCLMC has no Metropolis step).
    Pathfinder's normal approximation misses the funnel between tau and theta_tilde: its mean is further off, and
    its own Pareto k says so."""
    fit = bz.fit(pymc_model, backend=backend, draws=500, tune=500, chains=2, seed=4, progress=False, **options)
    assert set(fit.posterior.data_vars) == {"mu", "tau", "theta_tilde"}
    np.testing.assert_array_equal(fit.posterior["school"].values, SCHOOLS)
    assert fit.idata.log_likelihood["y"].shape == (2, 500, 8)
    sd = float(pymc_nuts.posterior["mu"].std())
    assert abs(float(fit.posterior["mu"].mean()) - float(pymc_nuts.posterior["mu"].mean())) < tolerance * sd
    if backend == "blackjax_pathfinder":
        assert fit.info["pareto_k"] > 0.7 and any("Pareto k" in w for w in fit.info["warnings"])


# ------------------------------------------------------------------------------------- saving and the report
_READ_BACK = """
import json, sys
import bayeszoo as bz
out = sys.argv[1]
fit = bz.load_fit(out + "/fits/nuts.nc")
model = fit.model()
cmp = bz.load_comparison(out)
table = cmp.table()
try:
    bz.fit(model, backend="nuts")
    refusal = None
except ValueError as exc:
    refusal = str(exc)
print(json.dumps({"model": repr(model), "same_spec": model.spec() == fit.model_spec, "refusal": refusal,
                  "backends": list(table["backend"]), "elpd_loo": [float(v) for v in table["elpd_loo"]],
                  "mean_err": [float(v) for v in table["mean_err"]], "reference": cmp.reference.name}))
"""


@pytest.mark.slow
def test_a_saved_comparison_reads_back_and_reports_in_a_fresh_process(pymc_model, tmp_path):
    out = str(tmp_path / "eight_schools")
    kwargs = {"backends": ["nuts", "numpyro", "advi"], "reference": "nuts", "draws": 500, "tune": 500,
              "chains": 2, "seed": 5, "progress": False, "options": {"advi": {"max_iter": 3000}}}
    cmp = bz.compare(pymc_model, out=out, **kwargs)
    table = cmp.table()
    assert list(table["error"]) == ["", "", ""]
    assert np.all(np.isfinite(table["elpd_loo"])) and table["pareto_k_bad"].dtype.kind in "iu"

    res = subprocess.run([sys.executable, "-c", _READ_BACK, out], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    back = json.loads(res.stdout.strip().splitlines()[-1])
    assert back["model"].startswith("SavedModel(name='eight_schools'") and back["same_spec"]
    assert "Wrap the original model again" in back["refusal"]
    assert back["backends"] == ["nuts", "numpyro", "advi"] and back["reference"] == "nuts"
    np.testing.assert_allclose(back["elpd_loo"], table["elpd_loo"], rtol=1e-12)
    np.testing.assert_allclose(back["mean_err"], table["mean_err"], rtol=1e-12)

    os.remove(os.path.join(out, "report.html"))
    res = subprocess.run([sys.executable, "-m", "bayeszoo", "report", out, "--force"], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    report = open(os.path.join(out, "report.html"), encoding="utf-8").read()
    assert "eight_schools, a PyMC model of one&#x27;s own" in report
    assert "has no picture of a family" in report and "no picture for the" not in report
    assert "elpd LOO" in report and "Pareto k &gt; 0.7" in report

    again = bz.compare(pymc_model, out=out, **kwargs)          # resumed: the same model, wrapped once
    assert again.notes == {"nuts": "resumed", "numpyro": "resumed", "advi": "resumed"}
    rewrapped = bz.models.from_pymc(pymc_eight_schools(), name="eight_schools")
    assert bz.compare(rewrapped, out=out, **kwargs).notes == again.notes   # and wrapped anew
    changed_y = Y.copy()
    changed_y[0] = 27.0
    changed = bz.models.from_pymc(pymc_eight_schools(y=changed_y), name="eight_schools")
    refit = bz.compare(changed, out=out, **{**kwargs, "backends": ["advi"], "reference": None})
    assert refit.notes == {"advi": "refitted: the saved fit was made with another model, data"}


@pytest.mark.slow
def test_loo_of_a_fit_matches_the_table(pymc_nuts):
    from bayeszoo.diagnostics.metrics import loo_columns

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = az.loo(pymc_nuts.idata, pointwise=True)
    row = loo_columns(pymc_nuts)
    assert row["elpd_loo"] == pytest.approx(float(loo.elpd_loo)) and row["p_loo"] == pytest.approx(float(loo.p_loo))
    assert row["pareto_k_bad"] == int(np.sum(loo.pareto_k.values > 0.7))


@pytest.mark.slow
def test_dask_workers_rebuild_the_same_models(pymc_model, numpyro_model):
    """The models travel to a Dask worker (another process) and give there the draws they give here."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None)
    try:
        with distributed.Client(cluster) as client:
            # a NumPyro model function travels by reference: the worker (with this process's sys.path) imports it
            # from this module, tests.models.test_user_models
            for model, backend, options in ((pymc_model, "advi", {"max_iter": 1000}),
                                            (numpyro_model, "numpyro", {})):
                kwargs = {"backends": [backend], "reference": None, "draws": 200, "tune": 200, "chains": 2,
                          "seed": 8, "progress": False, "options": {backend: options}}
                local = bz.compare(model, **kwargs).fits[backend]
                remote = bz.compare(model, executor=client, **kwargs)
                assert remote.errors == {}, remote.errors
                remote = remote.fits[backend]
                assert remote.info["provenance"] == local.info["provenance"]
                for name in ("mu", "tau", "theta_tilde"):
                    np.testing.assert_array_equal(remote.posterior[name].values, local.posterior[name].values)
                np.testing.assert_allclose(remote.idata.log_likelihood["y"].values,
                                           local.idata.log_likelihood["y"].values, rtol=1e-12)
    finally:
        cluster.close()


def test_draws_of_a_model_whose_log_likelihood_pymc_cannot_build_are_kept():
    """PyMC cannot rebuild a model that sets an initval for the pointwise log likelihood (posteriordb's
    low_dim_gauss_mix: NotImplementedError "Cannot convert models with non-default initial_values"): the fit is
    built without its log_likelihood group, and says why, instead of losing the draws."""
    from bayeszoo.results import build_fit

    model = bz.catalogue.suites.target("posteriordb/low_dim_gauss_mix-low_dim_gauss_mix").model("pymc")
    data = model.dataset()
    draws = {"mu": np.tile([-1.0, 1.0], (1, 5, 1)), "sigma": np.ones((1, 5, 2)), "theta": np.full((1, 5), 0.5)}
    fit = build_fit(model, data, "nuts", "mcmc", draws, timing={"sample": 0.0})
    assert "log_likelihood" not in fit.idata.groups()
    assert fit.info["log_likelihood"].startswith("not stored: the pointwise log likelihood cannot be computed")
    np.testing.assert_array_equal(fit.posterior["mu"].values, draws["mu"])
