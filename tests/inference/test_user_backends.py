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


def _prior_draws(model, data, *, draws, tune, chains, seed, progress, label="prior_draws", **options):
    """A 'backend' that returns draws of N(0, 1) for every canonical variable (as backend ``label``)."""
    rng = np.random.default_rng(seed)
    dims = model.var_dims(data)
    coords = model.coords(data)
    post = {v: rng.standard_normal((chains, draws, *(len(coords[d]) for d in dims[v]))) for v in dims}
    return build_fit(model, data, label, "approximation", post, timing={"sample": 0.0})


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



def _mala(logdensity_fn, step_size=0.3):
    """MALA (BlackJAX): one gradient evaluation per step"""
    import blackjax

    return blackjax.mala(logdensity_fn, step_size)


def test_a_sampler_that_declares_its_gradients_per_step_counts_them_as_the_built_in_ones_do(restore_registry):
    """gradients_per_step makes a fit count its gradients (every step of every chain, warm-up and thinned steps
    included), so that bz.benchmark reads its cost to a target in gradients, as it does the built-in samplers'
    (without a count, a benchmark that includes it ranks every backend by seconds)."""
    from bayeszoo.benchmark import gradients_to_target

    bz.register_sampler("mala", _mala, options={"step_size": Option(0.3, "step size", POSITIVE)},
                        gradients_per_step=1)
    data = bz.datasets.load("slm_signal", kind="spikes", n=3, m=4, sigma2=0.5, seed=0)
    model = bz.models.SLM(potential="gaussian", tau=1.0, sigma2=0.5)
    fit = bz.fit(model, data, "mala", draws=300, tune=200, chains=2, seed=0, progress=False, thin=2)
    assert fit.info["n_grad"] == 2 * (200 + 300 * 2) and fit.info["n_grad_tune"] == 2 * 200
    # the sampling stage's gradients in proportion to its time, after the warm-up's
    timing = fit.timing
    halfway = timing["compile"] + timing["tune"] + 0.5 * timing["sample"]
    assert gradients_to_target(fit, halfway) == pytest.approx(2 * 200 + 0.5 * 2 * 300 * 2)
    assert gradients_to_target(fit, halfway + timing["sample"]) == fit.info["n_grad"]

    bz.register_sampler("mala_uncounted", _mala, options={"step_size": Option(0.3, "step size", POSITIVE)})
    uncounted = bz.fit(model, data, "mala_uncounted", draws=300, tune=200, chains=2, seed=0, progress=False,
                       thin=2)   # the same kernel and shapes: compiled once for both
    assert uncounted.info["n_grad"] is None and np.isnan(gradients_to_target(uncounted, halfway))
    for bad in (0, -1, float("nan"), "1", True):   # zero: a cost of nothing would rank a random walk first
        with pytest.raises(ValueError, match="gradients_per_step must be a number > 0"):
            bz.register_sampler("mala_bad", _mala, gradients_per_step=bad)

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


# ----------------------------------------------------------------------------- what a backend returns is checked
def _returning(what: str):
    """A backend that returns something other than the fit asked for."""
    def run(model, data, *, draws, tune, chains, seed, progress):
        if what in ("None", "dict", "int"):
            return {"None": None, "dict": {"w": np.zeros((chains, draws, 3))}, "int": 3}[what]
        if what == "fewer draws":
            return _prior_draws(model, data, draws=draws // 2, tune=tune, chains=chains, seed=seed, progress=progress,
                                label="bad")
        if what == "another model's fit":
            return bz.fit(bz.models.RVM(width=1.0), data, "prior_draws", draws=draws, chains=chains, progress=False)
        if what == "another backend's label":
            return _prior_draws(model, data, draws=draws, tune=tune, chains=chains, seed=seed, progress=progress)
        raise AssertionError(what)
    return run


BAD_RETURNS = {
    "None": "returned NoneType None, not a Fit",
    "dict": r"returned dict \{'w': array.*, not a Fit",
    "int": "returned int 3, not a Fit",
    "fewer draws": "returned a Fit that is not the one asked for: it holds 2 chains x 5 draws, 2 x 10 were asked "
                   "for; run must return",
    "another model's fit": r"it is labelled 'prior_draws', not 'bad'; it is a fit of another model \(width=1.0 "
                           r"instead of 3.0\)",
    "another backend's label": "it is labelled 'prior_draws', not 'bad'",
}


@pytest.mark.parametrize("what", list(BAD_RETURNS))
def test_what_a_backend_returns_is_checked_in_fit_and_in_a_grid(what, sinc, tmp_path, restore_registry):
    """One clear error naming the backend from bz.fit; in a grid a failed cell with that message, and the other
    cells, the table and the saved folder intact."""
    bz.register_backend("prior_draws", _prior_draws, kind="approximation", family="rvm")
    bz.register_backend("bad", _returning(what), kind="approximation", family="rvm")
    model = bz.models.RVM(width=3.0)
    with pytest.raises(registry.BackendError, match=r"^RVM backend 'bad' .*" + BAD_RETURNS[what]):
        bz.fit(model, sinc, "bad", draws=10, chains=2, progress=False)
    cmp = bz.compare(model, sinc, backends=["prior_draws", "bad"], reference=None, draws=10, chains=2,
                     progress=False, out=tmp_path / "grid")
    table = cmp.table().set_index("backend")
    assert list(table.index) == ["prior_draws", "bad"] and list(cmp.fits) == ["prior_draws"]
    assert table.loc["prior_draws", "error"] == "" and table.loc["prior_draws", "ess_bulk_min"] > 0
    assert table.loc["bad", "error"].startswith("BackendError: RVM backend 'bad' returned")
    loaded = bz.load_comparison(tmp_path / "grid").table().set_index("backend")
    assert loaded.loc["bad", "error"] == table.loc["bad", "error"] and loaded.loc["prior_draws", "error"] == ""


def test_check_backend_reports_what_a_backend_does_wrong_in_its_list(sinc, restore_registry):
    calls = []

    def second_call_fails(model, data, *, draws, tune, chains, seed, progress):
        calls.append(seed)
        if len(calls) > 1:
            raise RuntimeError("out of cheese")
        return _prior_draws(model, data, draws=draws, tune=tune, chains=chains, seed=seed, progress=progress,
                            label="second_call_fails")

    model = bz.models.RVM(width=3.0)
    bz.register_backend("returns_none", _returning("None"), kind="approximation", family="rvm")
    with pytest.raises(AssertionError, match="fails 1 of 1 checks:\nFAIL runs: bz.fit raised BackendError: RVM "
                                             "backend 'returns_none' returned NoneType None, not a Fit"):
        bz.testing.check_backend("returns_none", model, sinc, draws=5, tune=0)
    bz.register_backend("second_call_fails", second_call_fails, kind="approximation", family="rvm")
    with pytest.raises(AssertionError) as caught:
        bz.testing.check_backend("second_call_fails", model, sinc, draws=5, tune=0)
    assert "FAIL same seed, same draws: raised RuntimeError: out of cheese" in str(caught.value)
    calls.clear()
    checks = bz.testing.check_backend("second_call_fails", model, sinc, draws=5, tune=0, raise_on_failure=False)
    assert {c.name for c in checks if c.passed} >= {"runs", "canonical variables", "save / load"}


def test_an_unknown_family_is_refused_naming_the_families(restore_registry):
    with pytest.raises(ValueError, match=r"backend 'mine': unknown family 'rvmm'; did you mean 'rvm'\? the families "
                                         r"are arvm, bid, gpc, imagervm, pmkl, rvm, slm, user"):
        bz.register_backend("mine", _prior_draws, kind="approximation", family="rvmm")
    with pytest.raises(ValueError, match="unknown family 'zebra'; the families are"):
        bz.register_backend("mine", _prior_draws, kind="approximation", family="zebra")
    assert "mine" not in bz.backends(bz.models.RVM())


# ----------------------------------------------------------------------------- plugins that misbehave
MISBEHAVING = {
    "bz_exits": "import sys\nsys.exit('the plugin gave up')\n",
    "bz_base_exception": "class Stop(BaseException):\n    pass\n\nraise Stop('a BaseException of its own')\n",
    "bz_takes_fast": '''
from bayeszoo.registry import register_backend
from bz_plugin import run

register_backend("fast", run, kind="approximation", family="rvm", replace=True)      # refused: bayeszoo's own
register_backend("nuts", run, kind="approximation", family="rvm", replace=True)      # refused: hides generic nuts
register_backend("plugin_extra", run, kind="approximation", family="rvm")            # added
''',
}


@pytest.fixture
def installed(tmp_path, monkeypatch, restore_registry):
    """``installed(entries, modules)``: the packages declaring ``entries`` in the bayeszoo.backends group, with the
    modules ``modules`` (name -> source), found by this process's next backend lookup; gone afterwards."""
    import importlib
    import sys

    names = ["bz_plugin"]

    def install(entries: dict[str, str], modules: dict[str, str]) -> None:
        path = _plugin_path(tmp_path, entries)
        for module, text in modules.items():
            (tmp_path / f"{module}.py").write_text(text)
        names.extend(modules)
        monkeypatch.syspath_prepend(path)
        importlib.invalidate_caches()
        monkeypatch.setattr(registry, "_plugins_loaded", False)

    yield install
    for name in names:
        sys.modules.pop(name, None)


def test_a_plugin_that_exits_or_replaces_a_built_in_backend_is_refused_with_a_warning(installed):
    """A plugin ending the process on import (sys.exit, any BaseException) is skipped with a warning naming it;
    one that registers a built-in name with replace=True is refused, its other backends are kept."""
    installed({"draws": "bz_plugin", "exits": "bz_exits", "base": "bz_base_exception", "takes_fast": "bz_takes_fast"},
              MISBEHAVING)
    model = bz.models.RVM()
    fast = registry._FAMILY[("rvm", "fast")]
    with pytest.warns(RuntimeWarning) as caught:
        names = bz.backends(model)          # the first lookup loads the plugins: the process goes on
    messages = "\n".join(str(w.message) for w in caught)
    assert "the backend plugin 'exits' (bz_exits) failed to load and is skipped: SystemExit: the plugin gave up" \
        in messages
    assert "the backend plugin 'base' (bz_base_exception) failed to load and is skipped: Stop: a BaseException" \
        in messages
    assert ("the backend plugin 'takes_fast' (bz_takes_fast) registers RVM backend 'fast', but backend 'fast' is "
            "already registered for the 'rvm' family") in messages
    assert "registers RVM backend 'nuts', but backend 'nuts' is the name of a generic backend" in messages
    assert registry.get(model, "fast") is fast and registry.get(model, "nuts").family is None
    assert {"plugin_draws", "plugin_extra"} <= set(names)
    # the user's own code may still replace a built-in backend, knowingly
    mine = bz.register_backend("fast", _prior_draws, kind="approximation", family="rvm", replace=True)
    assert registry.get(model, "fast") is mine


def test_ctrl_c_while_plugins_load_goes_through(installed):
    installed({"interrupted": "bz_interrupted"}, {"bz_interrupted": "raise KeyboardInterrupt\n"})
    with pytest.raises(KeyboardInterrupt):
        registry.load_plugins()
    assert registry._plugins_loaded is False     # the next lookup tries again
