"""A user's own backend: bz.register_backend (names taken are refused), bz.register_sampler (an algorithm in
BlackJAX's shape on the model's unconstrained log density), backends of installed packages (the
``bayeszoo.backends`` entry-point group) and bz.testing.check_backend."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo import registry
from bayeszoo.checks import POSITIVE, Flag
from bayeszoo.registry import Option
from bayeszoo.results import build_fit


def _prior_draws(model, data, *, draws, tune, chains, seed, progress, **options):
    """A 'backend' that returns draws of N(0, 1) for every canonical variable."""
    rng = np.random.default_rng(seed)
    dims = model.var_dims(data)
    coords = model.coords(data)
    post = {v: rng.standard_normal((chains, draws, *(len(coords[d]) for d in dims[v]))) for v in dims}
    return build_fit(model, data, "prior_draws", "approximation", post, timing={"sample": 0.0})


def test_a_taken_name_is_refused_unless_replaced(restore_registry):
    with pytest.raises(ValueError, match="already registered for the 'rvm' family.*replace=True"):
        bz.register_backend("gibbs", _prior_draws, kind="approximation", family="rvm")
    with pytest.raises(ValueError, match="generic backend.*would hide"):
        bz.register_backend("nuts", _prior_draws, kind="approximation", family="rvm")
    with pytest.raises(ValueError, match="backend of the .*rvm.* family"):
        bz.register_backend("gibbs", _prior_draws, kind="approximation")
    backend = bz.register_backend("gibbs", _prior_draws, kind="approximation", family="rvm", replace=True)
    assert registry.get(bz.models.RVM(), "gibbs") is backend


@pytest.mark.parametrize("name,run,match", [("my sampler", _prior_draws, "identifier"), ("ok", 3, "must be a function")])
def test_bad_registrations(name, run, match, restore_registry):
    with pytest.raises(ValueError, match=match):
        bz.register_backend(name, run, kind="approximation")


def test_a_registered_backend_runs_and_passes_the_contract(sinc, restore_registry):
    bz.register_backend("prior_draws", _prior_draws, kind="approximation", family="rvm",
                        options={"scale": Option(1.0, "unused", POSITIVE)})
    model = bz.models.RVM(width=3.0)
    assert "prior_draws" in bz.backends(model)
    checks = bz.testing.check_backend("prior_draws", model, sinc, draws=5, tune=0)
    assert all(c.passed for c in checks) and {"same seed, same draws", "option 'scale' refused"} <= \
        {c.name for c in checks}


def test_check_backend_names_what_a_broken_backend_gets_wrong(sinc, restore_registry):
    def unseeded(model, data, *, draws, tune, chains, seed, progress, scale, nan):
        rng = np.random.default_rng()               # ignores the seed
        coords = model.coords(data)
        post = {v: rng.standard_normal((chains, draws, *(len(coords[d]) for d in dims)))
                for v, dims in model.var_dims(data).items()}
        post["log_beta"][0, 0] = np.nan if nan else 0.0
        return build_fit(model, data, "unseeded", "approximation", post, timing={})

    # 'scale' declares a constraint that accepts anything: the option checks must catch it
    bz.register_backend("unseeded", unseeded, kind="approximation", family="rvm",
                        options={"scale": Option(1.0, "anything goes", lambda who, name, value: value),
                                 "nan": Option(False, "return a NaN", Flag())})
    with pytest.raises(AssertionError) as caught:
        bz.testing.check_backend("unseeded", bz.models.RVM(width=3.0), sinc, draws=5, tune=0)
    message = str(caught.value)
    assert "fails 2 of" in message
    for failed in ("same seed, same draws: two runs with seed 0 differ in", "option 'scale' refused: "):
        assert failed in message, message
    checks = bz.testing.check_backend("unseeded", bz.models.RVM(width=3.0), sinc, draws=5, tune=0,
                                      raise_on_failure=False)
    assert {c.name for c in checks if c.passed} >= {"runs", "canonical variables", "unknown option refused",
                                                     "option 'nan' refused", "save / load"}
    with pytest.raises(AssertionError, match="FAIL runs: bz.fit raised ValueError.*non-finite draws of log_beta"):
        bz.testing.check_backend("unseeded", bz.models.RVM(width=3.0), sinc, draws=5, tune=0, nan=True)


def _rwm(logdensity_fn, scale=0.5):
    """random-walk Metropolis (BlackJAX)"""
    import blackjax

    return blackjax.normal_random_walk(logdensity_fn, scale)


def test_a_user_sampler_recovers_an_exact_gaussian_posterior(restore_registry):
    """BlackJAX's random-walk Metropolis, registered in three lines, on an SLM whose posterior is exactly
    Gaussian: the posterior means agree with the exact ones within Monte-Carlo error."""
    import arviz as az

    bz.register_sampler("rwm", _rwm, options={"scale": Option(0.5, "proposal sd", POSITIVE)})
    data = bz.datasets.load("slm_signal", kind="spikes", n=3, m=4, sigma2=0.5, seed=0)
    model = bz.models.SLM(potential="gaussian", tau=1.0, sigma2=0.5)
    fit = bz.fit(model, data, "rwm", draws=3000, tune=500, chains=4, seed=1, progress=False, scale=0.6, thin=2)
    mean, cov = model.gaussian_posterior(data)
    u = fit.posterior["u"].values
    mcse = az.mcse(fit.idata, var_names=["u"])["u"].values
    assert np.all(np.abs(u.mean((0, 1)) - mean) < 4 * mcse), (u.mean((0, 1)), mean, mcse)
    np.testing.assert_allclose(u.reshape(-1, 3).std(0), np.sqrt(np.diag(cov)), rtol=0.1)
    stats = fit.idata.sample_stats
    assert 0.1 < float(stats["acceptance_rate"].mean()) < 0.9 and fit.info["library"] if "library" in fit.info \
        else 0.1 < float(stats["acceptance_rate"].mean()) < 0.9
    # the same seed again: the same draws; the option reached the algorithm
    again = bz.fit(model, data, "rwm", draws=50, tune=10, chains=2, seed=1, progress=False, scale=0.6)
    other = bz.fit(model, data, "rwm", draws=50, tune=10, chains=2, seed=1, progress=False, scale=0.01)
    assert float(other.idata.sample_stats["acceptance_rate"].mean()) > float(
        again.idata.sample_stats["acceptance_rate"].mean())


def test_register_sampler_refuses_bad_input(restore_registry):
    with pytest.raises(ValueError, match="'thin' is the driver's option"):
        bz.register_sampler("rwm", _rwm, options={"thin": Option(1, "x", POSITIVE)})
    with pytest.raises(ValueError, match="algorithm must be a function"):
        bz.register_sampler("rwm", "rmh")
    with pytest.raises(ValueError, match="already registered"):
        bz.register_sampler("gibbs", _rwm, family="rvm")


PLUGIN = '''
import numpy as np
from bayeszoo.registry import register_backend
from bayeszoo.results import build_fit

def run(model, data, *, draws, tune, chains, seed, progress):
    rng = np.random.default_rng(seed)
    coords = model.coords(data)
    post = {v: rng.standard_normal((chains, draws, *(len(coords[d]) for d in dims)))
            for v, dims in model.var_dims(data).items()}
    return build_fit(model, data, "plugin_draws", "approximation", post, timing={})

register_backend("plugin_draws", run, kind="approximation", family="rvm", description="a plugin's backend")
'''


def _plugin_path(tmp_path, entries: dict[str, str]) -> str:
    """A folder on which importlib.metadata finds a distribution declaring ``entries`` in the bayeszoo.backends
    group, and the plugin module."""
    (tmp_path / "bz_plugin.py").write_text(textwrap.dedent(PLUGIN))
    info = tmp_path / "bz_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bz-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[bayeszoo.backends]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))
    return str(tmp_path)


def _run(code: str, path: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": path + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_an_installed_plugin_is_found_by_the_api_and_the_cli(tmp_path):
    path = _plugin_path(tmp_path, {"draws": "bz_plugin", "broken": "no_such_module_here"})
    out = _run("import bayeszoo as bz; print(bz.backends(bz.models.RVM()))", path)
    assert out.returncode == 0, out.stderr
    assert "plugin_draws" in out.stdout
    assert "backend plugin 'broken'" in out.stderr and "ModuleNotFoundError" in out.stderr
    cli = _run("from bayeszoo.cli import main; raise SystemExit(main(['list']))", path)
    assert cli.returncode == 0 and "plugin_draws" in cli.stdout, cli.stdout + cli.stderr


def test_a_model_of_ones_own_has_no_family_picture(restore_registry):
    import pymc as pm

    with pm.Model() as pm_model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=np.array([0.1, 0.5]))
    bz.register_backend("prior_draws", _prior_draws, kind="approximation")
    cmp = bz.compare(bz.models.from_pymc(pm_model), backends=["prior_draws"], reference=None, draws=20, chains=2,
                     progress=False)
    with pytest.raises(ValueError, match="a model of one's own has none: see 'marginals'"):
        cmp.plot("family")
    assert cmp.plot("trace") is not None
