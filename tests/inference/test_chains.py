"""The one chain driver (bayeszoo.inference.chains), tested once for every hand-written sampler: seeds, chains that
do not depend on how many run, warm-up and thinning counts, timing, the non-finite check, and the same for a
JAX kernel (whose draws also do not depend on how the run is cut into compiled calls)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

import bayeszoo  # noqa: F401  (float64 JAX)
from bayeszoo.inference.chains import Kernel, chains_fit, sample
from bayeszoo.registry import RunContext


def _ctx(seed):
    """The run context bz.fit would give a generic backend "toy"."""
    return RunContext(family=None, backend="toy", kind="mcmc", seed=seed)


class Counter(NamedTuple):
    sweeps: np.ndarray
    x: np.ndarray


class Accept(NamedTuple):
    acceptance_rate: np.ndarray


def _ar1(rho=0.5, adapt=None):
    """x' = rho x + sqrt(1 - rho^2) e, counting its sweeps; Info: a made-up acceptance rate (the draw's uniform)."""
    def init(rng, problem):
        return Counter(np.array(0.0), rng.standard_normal(problem["d"]))

    def step(rng, state):
        x = rho * state.x + np.sqrt(1 - rho ** 2) * rng.standard_normal(state.x.shape)
        return Counter(state.sweeps + 1, x), Accept(np.array(rng.uniform()))

    return Kernel(init=init, step=step, position=lambda s: {"x": s.x, "sweeps": s.sweeps}, adapt=adapt)


def test_the_same_seed_gives_the_same_draws_and_another_seed_others():
    a = sample(_ar1(), {"d": 3}, _ctx(7), draws=20, tune=5, chains=2)
    b = sample(_ar1(), {"d": 3}, _ctx(7), draws=20, tune=5, chains=2)
    c = sample(_ar1(), {"d": 3}, _ctx(8), draws=20, tune=5, chains=2)
    assert np.array_equal(a.posterior["x"], b.posterior["x"])
    assert not np.allclose(a.posterior["x"], c.posterior["x"])
    assert not np.allclose(a.posterior["x"][0], a.posterior["x"][1])    # chains differ


def test_chain_k_does_not_depend_on_how_many_chains_run():
    two = sample(_ar1(), {"d": 2}, _ctx(3), draws=15, tune=3, chains=2)
    four = sample(_ar1(), {"d": 2}, _ctx(3), draws=15, tune=3, chains=4)
    assert np.array_equal(two.posterior["x"], four.posterior["x"][:2])
    # chain c of seed s is SeedSequence([s, c]): the stream a user can rebuild
    rng = np.random.default_rng(np.random.SeedSequence([3, 1]))
    x = rng.standard_normal(2)
    for _ in range(4):   # 3 warm-up sweeps and the first kept one
        x = 0.5 * x + np.sqrt(0.75) * rng.standard_normal(2)
        rng.uniform()
    assert np.allclose(four.posterior["x"][1, 0], x)


@pytest.mark.parametrize("tune, thin", [(0, 1), (4, 1), (5, 3)])
def test_warm_up_and_thinning_counts(tune, thin):
    out = sample(_ar1(), {"d": 1}, _ctx(0), draws=6, tune=tune, chains=2, thin=thin)
    expected = tune + thin * np.arange(1, 7)          # the sweep after which each kept draw was taken
    assert np.array_equal(out.posterior["sweeps"], np.tile(expected, (2, 1)))
    assert out.sweeps == tune + 6 * thin and out.posterior["x"].shape == (2, 6, 1)
    assert out.stats["acceptance_rate"].shape == (2, 6)
    assert set(out.timing) == {"compile", "tune", "sample"} and all(v >= 0 for v in out.timing.values())
    assert (out.timing["tune"] > 0) == (tune > 0)


def test_adapt_runs_after_every_warm_up_sweep_only():
    calls = []

    def adapt(state, info):
        calls.append(int(state.sweeps))
        return state

    sample(_ar1(adapt=adapt), {"d": 1}, _ctx(0), draws=4, tune=3, chains=2)
    assert calls == [1, 2, 3, 1, 2, 3]


def test_a_chain_that_leaves_double_precision_is_named():
    def step(rng, state):
        return Counter(state.sweeps + 1, state.x * 1e200), Accept(np.array(0.0))

    kernel = _ar1()._replace(step=step)
    with pytest.raises(ValueError, match=r"backend 'toy': chain 0 left double precision \(NaN or inf\) in x at draw 1"):
        sample(kernel, {"d": 1}, _ctx(0), draws=5, tune=0, chains=2)


def test_chains_fit_hands_the_arrays_to_the_fit_builder():
    import bayeszoo as bz

    model, data = bz.models.RVM(width=3.0), bz.datasets.load("sinc", n=8, seed=0)
    M = model.n_basis(data)

    def init(rng, problem):
        return Counter(np.array(0.0), rng.standard_normal(2 * M + 1))

    kernel = _ar1()._replace(init=init, position=lambda s: {"w": s.x[:M], "log_alpha": s.x[M:2 * M],
                                                           "log_beta": s.x[-1]})
    out = sample(kernel, None, _ctx(1), draws=10, tune=2, chains=3)
    fit = chains_fit(model, data, out, ctx=RunContext("rvm", "toy", "mcmc", seed=1), setup=0.5)
    assert fit.kind == "mcmc" and fit.n_chains == 3 and fit.n_draws == 10
    assert fit.info["iterations"] == 12 and fit.timing["compile"] >= 0.5
    assert fit.idata.sample_stats["acceptance_rate"].shape == (3, 10)


# ----------------------------------------------------------------------------------------------- JAX
def _jax_ar1(rho=0.5):
    import jax
    import jax.numpy as jnp

    def init(key, problem):
        return Counter(jnp.array(0.0), jax.random.normal(key, (problem["d"],)))

    def step(key, state):
        k1, k2 = jax.random.split(key)
        x = rho * state.x + jnp.sqrt(1 - rho ** 2) * jax.random.normal(k1, state.x.shape)
        return Counter(state.sweeps + 1, x), Accept(jax.random.uniform(k2))

    return Kernel(init=init, step=step, position=lambda s: {"x": s.x, "sweeps": s.sweeps}, jax=True)


def test_a_jax_kernel_counts_seeds_and_chunks_like_a_numpy_one():
    out = sample(_jax_ar1(), {"d": 2}, _ctx(4), draws=7, tune=5, chains=2, thin=2, chunk=3)
    assert np.array_equal(out.posterior["sweeps"], np.tile(5 + 2 * np.arange(1, 8), (2, 1)))
    assert out.posterior["x"].shape == (2, 7, 2) and out.stats["acceptance_rate"].shape == (2, 7)
    assert out.sweeps == 19 and out.timing["compile"] > 0
    # the same draws whatever the chunk, and chain 0 whatever the number of chains
    other = sample(_jax_ar1(), {"d": 2}, _ctx(4), draws=7, tune=5, chains=3, thin=2, chunk=50)
    assert np.allclose(out.posterior["x"], other.posterior["x"][:2], rtol=0, atol=1e-12)
    again = sample(_jax_ar1(), {"d": 2}, _ctx(5), draws=7, tune=5, chains=2, thin=2, chunk=3)
    assert not np.allclose(out.posterior["x"], again.posterior["x"])


def test_an_ar1_chain_has_the_stationary_moments():
    # exact answer: the AR(1) started from N(0, 1) stays N(0, 1); 4 x 4000 draws with rho 0.5 (ESS ~ 9600)
    out = sample(_ar1(), {"d": 1}, _ctx(11), draws=4000, tune=0, chains=4)
    x = out.posterior["x"].ravel()
    assert abs(x.mean()) < 4 / np.sqrt(9600) and abs(x.var() - 1) < 4 * np.sqrt(2 / 9600)


def test_a_jax_kernel_compiles_once_per_shape():
    from bayeszoo.inference import chains

    kernel = _jax_ar1()
    before = len(chains._COMPILED)
    sample(kernel, {"d": 3}, _ctx(0), draws=5, tune=2, chains=2)
    sample(kernel, {"d": 3}, _ctx(1), draws=5, tune=2, chains=2)       # same shapes: the compiled block is reused
    assert len(chains._COMPILED) == before + 1
    other = sample(kernel, {"d": 4}, _ctx(0), draws=5, tune=2, chains=2)   # another shape: compiled anew
    assert len(chains._COMPILED) == before + 2 and other.posterior["x"].shape == (2, 5, 4)
