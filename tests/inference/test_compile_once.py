"""One compilation per shape: every family's NumPyro declaration names its data (``functools.partial``), the
backends pass them as traced arguments, and the program JAX compiles is then the same for any data of those
shapes, so a second data set (a CV fold, an SBC simulation) finds it in the compilation cache."""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.inference.engines_common import numpyro_declaration


def _classes(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(20, 2))
    return bz.datasets.Dataset(X, (X[:, 0] + 0.3 * rng.normal(size=20) > 0).astype(float),
                               meta={"task": "classification"})


def _sources(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(12, 4))
    y = np.arange(12) % 3
    X[:, 0] += 1.5 * y
    return bz.datasets.Dataset(X, y.astype(float), meta={"task": "multiclass", "sources": {"a": [0, 1], "b": [2, 3]}})


def _blocks(seed):
    return bz.datasets.load("bid_blocks", size=16, n_blocks=4, psf="uniform", seed=seed)


CASES = {
    "rvm": (lambda: bz.models.RVM(width=3.0), lambda s: bz.datasets.load("sinc", n=15, seed=s)),
    "arvm": (lambda: bz.models.ARVM(n_basis=4), lambda s: bz.datasets.load("sinc", n=15, seed=s)),
    "gpc": (lambda: bz.models.GPC(), _classes),
    "pmkl": (lambda: bz.models.PMKL(), _sources),
    "slm": (lambda: bz.models.SLM(B="identity"),
            lambda s: bz.datasets.load("slm_signal", kind="spikes", n=32, m=16, design="gaussian", seed=s)),
    "imagervm": (lambda: bz.models.ImageRVM(a=1, b=1e-2, c=1, d=1e-3),
                 lambda s: bz.datasets.load("sinc2d_image", size=8, seed=s)),
    "bid": (lambda: bz.models.BID(psf_size=3, white_level=1.0), _blocks),
    "bid-known-psf": (lambda: bz.models.BID(psf="known", psf_size=3, white_level=1.0), _blocks),
}


def _point(fn, arrays):
    """A value of every latent site (NumPyro's uniform initialisation: improper sites too)."""
    from numpyro import handlers
    from numpyro.infer.initialization import init_to_uniform

    trace = handlers.trace(handlers.substitute(handlers.seed(fn, 0), substitute_fn=init_to_uniform)).get_trace(
        **arrays)
    return {k: site["value"] for k, site in trace.items() if site["type"] == "sample" and not site["is_observed"]}


def _program(fn, arrays, point) -> str:
    """The text of the program JAX compiles for the log density at ``point`` with ``arrays`` as arguments."""
    import jax
    from numpyro.infer.util import log_density

    return jax.jit(lambda a, p: log_density(fn, (), a, p)[0]).lower(arrays, point).as_text()


@pytest.mark.parametrize("family", sorted(CASES))
def test_a_declarations_data_are_arguments_so_its_program_is_the_same_for_other_data_of_that_shape(family):
    from numpyro.infer.util import log_density

    make_model, make_data = CASES[family]
    model, first, second = make_model(), make_data(0), make_data(1)
    fn, arrays = numpyro_declaration(model, first)
    fn_other, arrays_other = numpyro_declaration(model, second)
    assert arrays and set(arrays) == set(arrays_other)
    point = _point(fn, arrays)
    # the traced function is the declaration: the same log density as the bound one, at the same point
    bound = float(log_density(model.numpyro_model(first), (), {}, point)[0])
    traced = float(log_density(fn, (), arrays, point)[0])
    assert traced == pytest.approx(bound, rel=1e-12, abs=1e-12)
    assert not np.allclose(float(log_density(fn_other, (), arrays_other, point)[0]), traced)   # other data
    assert _program(fn, arrays, point) == _program(fn_other, arrays_other, point)    # one program for both


def test_with_the_data_bound_as_constants_each_data_set_has_its_own_program():
    """What the check above would see without the data as arguments (so it can fail)."""
    model, first, second = bz.models.RVM(width=3.0), *(bz.datasets.load("sinc", n=15, seed=s) for s in (0, 1))
    point = _point(*numpyro_declaration(model, first))
    assert _program(model.numpyro_model(first), {}, point) != _program(model.numpyro_model(second), {}, point)


def test_observations_given_to_a_numpyro_model_of_ones_own_are_arguments_too():
    """``with_observations`` (what ``bz.sbc`` refits) passes the new values traced: one program for all of them."""
    import numpyro
    import numpyro.distributions as dist

    def regression(x, y=None):
        slope = numpyro.sample("slope", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(slope * x, 0.5), obs=y)

    x = np.linspace(-1, 1, 6)
    model = bz.models.from_numpyro(regression, x, y=np.zeros(6))
    first, second = model.with_observations({"y": np.ones(6)}), model.with_observations({"y": -np.ones(6)})
    (fn, arrays), (fn2, arrays2) = numpyro_declaration(first, None), numpyro_declaration(second, None)
    assert set(arrays) == {"arg0", "y", "bayeszoo_observed"}
    point = {"slope": np.asarray(0.3)}
    assert _program(fn, arrays, point) == _program(fn2, arrays2, point)
    # conditioning again replaces the values, not stacks conditions
    again = first.with_observations({"y": -np.ones(6)})
    assert _program(*numpyro_declaration(again, None), point) == _program(fn2, arrays2, point)
    from numpyro.infer.util import log_density

    expected = -0.5 * np.sum(((-1.0 - 0.3 * x) / 0.5) ** 2) - 6 * np.log(0.5 * np.sqrt(2 * np.pi))
    expected += -0.5 * 0.3**2 - 0.5 * np.log(2 * np.pi)
    assert float(log_density(fn2, (), arrays2, point)[0]) == pytest.approx(expected, rel=1e-12)


def test_a_function_that_needs_its_data_concrete_keeps_them_bound():
    """NumPy on an argument fails on a traced value: such a function keeps its arrays as constants."""
    import numpyro
    import numpyro.distributions as dist

    def uses_numpy(x, y=None):
        centre = float(np.mean(x))          # needs concrete values
        mu = numpyro.sample("mu", dist.Normal(centre, 1.0))
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    model = bz.models.from_numpyro(uses_numpy, np.arange(4.0), y=np.zeros(4))
    fn, arrays = numpyro_declaration(model, None)
    assert arrays == {} and isinstance(fn, functools.partial)
    fit = bz.fit(model, backend="numpyro", draws=50, tune=50, chains=1, progress=False)
    assert np.isfinite(fit.idata.posterior["mu"].values).all()


def test_numpyro_compiles_its_nuts_step_once_when_the_warm_up_is_shorter_than_the_draws(caplog):
    """NumPyro compiles the NUTS step together with the arrays it collects draws into, whose length is a shape of
    the program: a warm-up of another length than the draws compiled the whole step a second time (tens of seconds
    on a fresh machine for each of the demo's arvm, BID and SLM problems). The draws kept are the phases' own."""
    import logging

    import jax
    import numpyro
    import numpyro.distributions as dist

    def regression(x, y=None):      # shapes of its own (7 points), so no other test compiled its step already
        slope = numpyro.sample("slope", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(slope * x, 0.5), obs=y)

    x = np.linspace(-1, 1, 7)
    model = bz.models.from_numpyro(regression, x, y=0.8 * x)
    with jax.log_compiles(True), caplog.at_level(logging.WARNING):
        fit = bz.fit(model, backend="numpyro", draws=9, tune=4, chains=2, seed=3, progress=True)
    # traced (then compiled, or read from the persistent cache when an earlier run compiled it) at most once: not
    # at all when this process already holds the program (NumPyro caches its loop body by the kernel's functions)
    steps = [r for r in caplog.records if re.match(r"Finished tracing .*_body_fn", r.getMessage())]
    assert len(steps) <= 1
    loops = [r for r in caplog.records if re.match(r"Finished tracing .*_fori_collect_loop", r.getMessage())]
    assert len(loops) <= 1     # the loop over iterations too: its count is traced, not a static argument
    assert fit.posterior["slope"].shape == (2, 9)
    assert fit.idata.sample_stats["n_steps"].shape == (2, 9)
    assert np.all(fit.idata.sample_stats["n_steps"].values >= 1)      # no padding row among the draws kept
    assert 0 < fit.info["n_grad_tune"] < fit.info["n_grad"]


def test_numpyro_progress_is_reported_from_the_compiled_loop_and_leaves_the_draws_alone(monkeypatch):
    """NumPyro's own bar ran sequential chains as a Python loop with one dispatch and one diagnostics string read from
    the device per iteration (8 s of a 12 s sonar fit); the bar is now moved by a callback inside the compiled loop,
    which must neither change a step nor leave the bar short of its total. The step is compared one call at a time
    (the same operations with and without the callback), not as two differently compiled runs."""
    import jax
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import NUTS

    from bayeszoo.inference import numpyro_engines
    from bayeszoo.progress import progress_bar

    def regression(x, y=None):
        slope = numpyro.sample("slope", dist.Normal(0.0, 1.0))
        noise = numpyro.sample("noise", dist.HalfNormal(1.0))
        numpyro.sample("y", dist.Normal(slope * x, noise), obs=y)

    x = np.linspace(-1, 1, 9)
    y = 0.8 * x + 0.1 * np.cos(7 * x)
    shown = []
    monkeypatch.setattr(numpyro_engines, "show", lambda bar, text: shown.append((bar.n, bar.total, text)))
    model = bz.models.from_numpyro(regression, x, y=y)
    bz.fit(model, backend="numpyro", draws=60, tune=40, chains=2, seed=5, progress=True)
    assert len(shown) == 2 * (40 + 60)             # every iteration of both chains: (tune + draws) // 100 = 1
    assert all(total == 200 for _, total, _ in shown) and max(n for n, _, _ in shown) == 200
    assert all(re.fullmatch(r"\d+ steps of size \S+\. acc\. prob=\d\.\d\d", text) for _, _, text in shown)

    reporting = numpyro_engines._nuts_class()(regression)
    reporting.bar = progress_bar(total=1, disable=True)
    plain = NUTS(regression)
    kwargs = {"x": x, "y": y}
    start = plain.init(jax.random.PRNGKey(3), 10, None, (), kwargs)
    NUTS.init(reporting, jax.random.PRNGKey(3), 10, None, (), kwargs)  # sets up its step; both go on from `start`
    states = [start, start]
    for _ in range(2):
        states = [kernel.sample(state, (), kwargs) for kernel, state in zip((reporting, plain), states)]
        assert np.array_equal(states[0].z["slope"], states[1].z["slope"])
        assert np.array_equal(states[0].adapt_state.step_size, states[1].adapt_state.step_size)


def test_numpyro_initialises_a_chain_in_one_compiled_program_that_its_chains_share(monkeypatch):
    """NumPyro starts a single chain op by op (about a hundred one-operation compilations per model on a fresh
    machine); the kernel runs the same initialisation under one jit, traced once for all its chains, and finds
    NumPyro's own starting point (up to rounding: one program against many)."""
    import jax
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import NUTS

    from bayeszoo.inference import numpyro_engines

    def regression(x, y=None):
        slope = numpyro.sample("slope", dist.Normal(0.0, 1.0))
        noise = numpyro.sample("noise", dist.HalfNormal(1.0))
        numpyro.sample("y", dist.Normal(slope * x, noise), obs=y)

    x = np.linspace(-1, 1, 9)
    kwargs = {"x": x, "y": 0.8 * x + 0.1 * np.cos(7 * x)}
    traced = []
    original = NUTS.init
    monkeypatch.setattr(NUTS, "init", lambda self, *args, **kw: traced.append(args[0]) or original(self, *args, **kw))
    compiled = numpyro_engines._nuts_class()(regression)
    states = [compiled.init(jax.random.PRNGKey(seed), 10, None, (), kwargs) for seed in (3, 4)]
    assert len(traced) == 1 and isinstance(traced[0], jax.core.Tracer)   # one trace, under jit, for both chains
    for seed, state in zip((3, 4), states):
        eager = original(NUTS(regression), jax.random.PRNGKey(seed), 10, None, (), kwargs)
        for name in ("slope", "noise"):
            np.testing.assert_allclose(state.z[name], eager.z[name], rtol=1e-6)
        np.testing.assert_allclose(state.potential_energy, eager.potential_energy, rtol=1e-6)
        np.testing.assert_allclose(state.adapt_state.step_size, eager.adapt_state.step_size, rtol=1e-6)
    # a given starting point takes NumPyro's own path
    given = compiled.init(jax.random.PRNGKey(5), 10, {"slope": 0.1, "noise": 0.2}, (), kwargs)
    assert not isinstance(traced[-1], jax.core.Tracer) and np.isfinite(given.potential_energy)


def test_numpyro_compiled_initialisation_keeps_counts_fixed_and_falls_back_for_concrete_models():
    """A keyword that is not a numeric array (a count used in a shape) stays a Python value in the compiled
    initialisation; a model that needs concrete values (Python control flow on data) starts the eager way."""
    import jax
    import numpyro
    import numpyro.distributions as dist

    from bayeszoo.inference import numpyro_engines

    def counted(n, y=None):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0).expand([n]))
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    def concrete(y=None):
        scale = 2.0 if float(np.sum(y)) > 0 else 1.0      # needs y's value: cannot be traced
        numpyro.sample("y", dist.Normal(numpyro.sample("mu", dist.Normal(0.0, scale)), 1.0), obs=y)

    kernel = numpyro_engines._nuts_class()(counted)
    state = kernel.init(jax.random.PRNGKey(0), 10, None, (), {"n": 3, "y": np.arange(3.0)})
    assert state.z["mu"].shape == (3,) and kernel._compiled_init
    kernel = numpyro_engines._nuts_class()(concrete)
    state = kernel.init(jax.random.PRNGKey(0), 10, None, (), {"y": np.arange(3.0)})
    assert kernel._compiled_init is False and np.isfinite(state.potential_energy)
