"""The fingerprint of a model of one's own covers everything its posterior depends on, and everything keyed by it
(a resumed grid, the compiled kernels of a registered sampler) follows: two NumPyro models that differ only in a
prior reached through ``functools.partial``, a module-level dict or a list in a closure are two models; a PyMC
model changed by ``pm.set_data`` after wrapping is refused; the same model wrapped twice, or in another process,
has the same fingerprint. Also what a model of one's own may not do (names ArviZ or the harness use, NaN data)
and what a registered sampler must return, each refused before sampling."""
from __future__ import annotations

import functools
import json
import subprocess
import sys

import arviz as az
import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.checks import POSITIVE
from bayeszoo.registry import Option
from bayeszoo.results import build_fit
from tests.helpers import env_with_root

#: y_i ~ N(mu, 1), mu ~ N(0, scale): the posterior of mu is N(sum(y) / (n + 1 / scale^2), 1 / (n + 1 / scale^2))
Y = np.array([0.9, 1.3, 0.2, 1.6, 0.5, 1.1, 0.7, 0.1])
NARROW, WIDE = 0.1, 10.0


def exact(scale: float) -> tuple[float, float]:
    precision = Y.size + 1.0 / scale ** 2
    return float(Y.sum() / precision), float(1.0 / np.sqrt(precision))


def normal_mean(scale, y=None):
    import numpyro
    import numpyro.distributions as dist

    mu = numpyro.sample("mu", dist.Normal(0.0, scale))
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


PRIOR = {"scale": NARROW}   # a module-level dict the model reads its prior from


def dict_prior(y=None):
    import numpyro
    import numpyro.distributions as dist

    mu = numpyro.sample("mu", dist.Normal(0.0, PRIOR["scale"]))
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def list_prior(scales: list):
    def closed(y=None):
        import numpyro
        import numpyro.distributions as dist

        mu = numpyro.sample("mu", dist.Normal(0.0, scales[0]))
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    return closed


def partial_model(scale: float):
    return bz.models.from_numpyro(functools.partial(normal_mean, scale), y=Y)


def dict_model(scale: float):
    PRIOR["scale"] = scale   # as a user sets it before wrapping (restore_prior puts it back after the test)
    return bz.models.from_numpyro(dict_prior, y=Y)


def list_model(scale: float):
    return bz.models.from_numpyro(list_prior([scale]), y=Y)


WAYS = {"functools.partial": partial_model, "module dict": dict_model, "list in a closure": list_model}


@pytest.fixture(autouse=True)
def restore_prior():
    yield
    PRIOR["scale"] = NARROW


@pytest.mark.parametrize("way", WAYS)
def test_a_prior_reached_any_way_is_in_the_numpyro_fingerprint(way):
    make = WAYS[way]
    narrow, wide = make(NARROW), make(WIDE)
    assert narrow.fingerprint != wide.fingerprint and narrow.spec() != wide.spec()
    assert make(NARROW).fingerprint == narrow.fingerprint   # stable: the same model wrapped twice


def test_the_same_model_written_elsewhere_has_the_same_fingerprint():
    """The fingerprint is the traced log density, not the code that produced it: the same prior through a
    partial, a module dict or a closure is one model."""
    assert len({make(WIDE).fingerprint for make in WAYS.values()}) == 1


def test_a_model_with_discrete_latent_sites_is_fingerprinted_by_its_joint_log_density():
    """No generic backend samples it, but a backend of one's own may: a prior in a partial still counts."""
    import numpyro
    import numpyro.distributions as dist

    def mixture(p, y=None):
        z = numpyro.sample("z", dist.Bernoulli(p))
        numpyro.sample("y", dist.Normal(2.0 * z, 1.0), obs=y)

    first, second = (bz.models.from_numpyro(functools.partial(mixture, p), y=Y) for p in (0.3, 0.7))
    assert first.discrete == ["z"] and first.fingerprint != second.fingerprint
    assert bz.models.from_numpyro(functools.partial(mixture, 0.3), y=Y).fingerprint == first.fingerprint


def test_a_model_whose_log_density_cannot_be_traced_has_no_fingerprint_to_share():
    import numpyro
    import numpyro.distributions as dist

    def concrete(y=None):   # float() of a sampled value: runs eagerly, cannot be traced (nor sampled by NUTS)
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(float(mu), 1.0), obs=y)

    with pytest.warns(UserWarning, match="could not be traced.*no fingerprint: a resumed grid refits it"):
        first = bz.models.from_numpyro(concrete, y=Y)
    with pytest.warns(UserWarning):
        second = bz.models.from_numpyro(concrete, y=Y)
    assert first.fingerprint != second.fingerprint


def test_a_numpyro_model_whose_module_value_changed_since_wrapping_is_refused():
    model = dict_model(NARROW)
    PRIOR["scale"] = WIDE   # the function would now sample another posterior than the one fingerprinted
    refused = "NumPyro model 'dict_prior' changed since bz.models.from_numpyro read it.*Wrap it again"
    with pytest.raises(ValueError, match=refused):
        bz.fit(model, backend="numpyro", draws=10, tune=10, chains=1, progress=False)
    with pytest.raises(ValueError, match=refused):
        model.numpyro_model()
    PRIOR["scale"] = NARROW   # back as it was wrapped: accepted again
    model.validate(model.dataset())


def test_a_prior_inside_a_pymc_custom_dist_logp_is_in_the_fingerprint():
    import pymc as pm

    def model(scale):
        def logp(value, mu):   # the scale is not in the variable's graph, only in its log density
            return pm.logp(pm.Normal.dist(mu, scale), value)

        with pm.Model() as built:
            mu = pm.Normal("mu", 0.0, 1.0)
            pm.CustomDist("y", mu, logp=logp, observed=Y)
        return bz.models.from_pymc(built)

    assert model(NARROW).fingerprint != model(WIDE).fingerprint
    assert model(WIDE).fingerprint == model(WIDE).fingerprint


@pytest.mark.slow   # the fresh process imports bayeszoo: several seconds
def test_numpyro_fingerprints_are_the_same_in_a_fresh_process():
    script = ("import json\n"
              "import tests.models.test_fingerprints as t\n"
              "print(json.dumps([make(t.WIDE).fingerprint for make in t.WAYS.values()]))\n")
    env = env_with_root(PYTHONHASHSEED="4321")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == [make(WIDE).fingerprint for make in WAYS.values()]


# ------------------------------------------------------------------------------- what the fingerprint keys
def _rwm(logdensity_fn, scale=0.5):
    """random-walk Metropolis (BlackJAX)"""
    import blackjax

    return blackjax.normal_random_walk(logdensity_fn, scale)


@pytest.fixture
def rwm(restore_registry):
    bz.register_sampler("rwm", _rwm, options={"scale": Option(0.5, "proposal sd", POSITIVE)})
    return {"draws": 2000, "tune": 300, "chains": 2, "seed": 3, "progress": False}


def _check_posterior(fit, scale: float) -> None:
    """The draws of mu agree with the exact posterior within Monte-Carlo error."""
    mean, sd = exact(scale)
    mcse = float(az.mcse(fit.idata, var_names=["mu"])["mu"])
    draws = fit.posterior["mu"].values
    assert abs(draws.mean() - mean) < 4 * mcse, (scale, draws.mean(), mean, mcse)
    assert draws.std() == pytest.approx(sd, rel=0.2)


@pytest.mark.parametrize("way", WAYS)
def test_a_registered_sampler_samples_each_models_own_posterior(way, rwm):
    make = WAYS[way]
    for scale in (NARROW, WIDE):   # the second model must not find the first one's compiled kernel
        _check_posterior(bz.fit(make(scale), backend="rwm", scale=0.3, **rwm), scale)


def test_a_resumed_grid_refits_a_model_with_another_prior(rwm, tmp_path):
    grid = {"backends": ["rwm"], "reference": None, "out": tmp_path, "options": {"rwm": {"scale": 0.3}}, **rwm}
    first = bz.compare(partial_model(NARROW), **grid)
    assert first.errors == {}
    second = bz.compare(partial_model(WIDE), **grid)
    assert second.errors == {} and second.notes["rwm"].startswith("refitted: the saved fit was made with another "
                                                                  "model"), second.notes
    _check_posterior(second.fits["rwm"], WIDE)
    again = bz.compare(partial_model(WIDE), **grid)   # the same model: resumed
    assert again.notes["rwm"] == "resumed"
    np.testing.assert_array_equal(again.fits["rwm"].posterior["mu"].values, second.fits["rwm"].posterior["mu"].values)


# ----------------------------------------------------------------------------------------------- PyMC data
def _regression(x, y):
    import pymc as pm

    with pm.Model() as model:
        data = pm.Data("x", x)
        slope = pm.Normal("slope", 0.0, 1.0)
        pm.Normal("y", slope * data, 1.0, observed=y)
    return model


def _prior_draws(model, data, *, draws, tune, chains, seed, progress):
    """A cheap 'backend': N(0, 1) draws of every canonical variable."""
    rng = np.random.default_rng(seed)
    coords = model.coords(data)
    post = {v: rng.standard_normal((chains, draws, *(len(coords[d]) for d in dims)))
            for v, dims in model.var_dims(data).items()}
    return build_fit(model, data, "prior_draws", "approximation", post, timing={})


def test_pm_set_data_after_wrapping_is_refused_everywhere_the_model_is_used(restore_registry, tmp_path):
    import pymc as pm

    bz.register_backend("prior_draws", _prior_draws, kind="approximation")
    x = np.linspace(-1.0, 1.0, 6)
    pm_model = _regression(x, 0.3 * x)
    model = bz.models.from_pymc(pm_model)
    grid = {"backends": ["prior_draws"], "reference": None, "draws": 10, "chains": 1, "progress": False,
            "out": tmp_path}
    assert bz.compare(model, **grid).errors == {}
    pm.set_data({"x": 2.0 * x}, model=pm_model)   # a covariate, not the observations
    refused = r"data container 'x' \(pm.set_data\?\)\. Wrap it again, bz\.models\.from_pymc\(pm_model\)"
    with pytest.raises(ValueError, match=refused):
        bz.compare(model, **grid)   # rather than resume the fit of the old data
    with pytest.raises(ValueError, match=refused):
        bz.fit(model, backend="prior_draws", draws=10, chains=1, progress=False)
    for declaration in (model.pymc_model, model.numpyro_model):   # what every PyMC / JAX backend and SBC reads
        with pytest.raises(ValueError, match=refused):
            declaration()
    rewrapped = bz.models.from_pymc(pm_model)
    assert rewrapped.fingerprint != model.fingerprint
    again = bz.compare(rewrapped, **grid)
    assert again.errors == {} and again.notes["prior_draws"].startswith("refitted"), again.notes


# ------------------------------------------------------------------------------------- refused at wrapping
def test_names_that_collide_in_the_inference_data_are_refused():
    import numpyro
    import numpyro.distributions as dist
    import pymc as pm

    for name in ("chain", "draw"):
        with pm.Model() as named:
            pm.Normal(name, 0.0, 1.0)
            pm.Normal("y", 0.0, 1.0, observed=Y)
        with pytest.raises(ValueError, match=f"free variable '{name}' is named like ArviZ's '{name}' dim.*rename"):
            bz.models.from_pymc(named)

    def site_named_draw(y=None):
        mu = numpyro.sample("draw", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    with pytest.raises(ValueError, match="NumPyro model 'site_named_draw': the free variable 'draw' is named like"):
        bz.models.from_numpyro(site_named_draw, y=Y)

    with pm.Model(coords={"y_dim_0": range(3)}) as observed_dim:   # PyMC's name for the observations' axis
        b = pm.Normal("b", 0.0, 1.0, dims="y_dim_0")
        pm.Normal("y", b.sum(), 1.0, observed=Y)
    with pytest.raises(ValueError, match="free variable 'b' has a dim 'y_dim_0' of length 3, and the observed "
                                         "variable 'y' a dim of that name of length 8; rename one"):
        bz.models.from_pymc(observed_dim)
    with pm.Model(coords={"obs": range(3)}) as obs_dim:   # the harness's name for every observed value
        b = pm.Normal("b", 0.0, 1.0, dims="obs")
        pm.Normal("y", b.sum(), 1.0, observed=Y)
    with pytest.raises(ValueError, match="dim 'obs' of the free variable 'b' of length 3 is named like the "
                                         "observations' dim 'obs', which has 8.*rename it"):
        bz.models.from_pymc(obs_dim)
    with pm.Model(coords={"school": range(8)}) as shared:   # the same dim and length: allowed
        theta = pm.Normal("theta", 0.0, 1.0, dims="school")
        pm.Normal("y", theta, 1.0, observed=Y, dims="school")
    assert bz.models.from_pymc(shared).var_dims() == {"theta": ("school",)}


def test_nan_in_a_covariate_is_refused_naming_where_it_is():
    import pymc as pm

    x = np.linspace(-1.0, 1.0, 8)
    with_nan = x.copy()
    with_nan[2] = np.nan
    pm_model = _regression(x, Y)
    pm.set_data({"x": with_nan}, model=pm_model)   # pm.Data itself refuses NaN when created, set_data does not
    with pytest.raises(ValueError, match=r"data container 'x' holds NaN \(1 NaN value\(s\), the first at index "
                                         r"\(2,\)\); remove or impute"):
        bz.models.from_pymc(pm_model)
    with pm.Model() as constant:   # a NumPy covariate is a constant of the graph
        slope = pm.Normal("slope", 0.0, 1.0)
        pm.Normal("y", slope * with_nan, 1.0, observed=Y)
    with pytest.raises(ValueError, match=r"an array of shape \(8,\) in the graph of \['y'\] holds NaN"):
        bz.models.from_pymc(constant)


def test_a_sampler_that_does_not_return_init_and_step_is_refused_before_sampling(restore_registry):
    import blackjax

    bz.register_sampler("broken", lambda logdensity_fn: blackjax.normal_random_walk(logdensity_fn, 0.5).step)
    with pytest.raises(ValueError, match=r"sampler 'broken': algorithm\(logdensity_fn, \*\*options\) must return "
                                         r"BlackJAX's SamplingAlgorithm .* or the pair \(init, step\).* it returned "
                                         r"function"):
        bz.fit(partial_model(WIDE), backend="broken", draws=10, tune=0, chains=1, progress=False)
    bz.register_sampler("triple", lambda logdensity_fn: (None, None, None))
    with pytest.raises(ValueError, match=r"sampler 'triple'.*it returned tuple \(None, None, None\)"):
        bz.fit(partial_model(WIDE), backend="triple", draws=10, tune=0, chains=1, progress=False)
