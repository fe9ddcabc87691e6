"""The one chain driver of the hand-written MCMC samplers, in BlackJAX's shape (``SamplingAlgorithm(init, step)``).

A sampler is a :class:`Kernel` of its family's conditionals and nothing else:

* ``init(rng, problem) -> State`` and ``step(rng, state) -> (State, Info)``, State and Info NamedTuples of NumPy
  arrays, or of JAX arrays for a kernel with ``jax=True`` (whose ``step`` is then traced: jittable and
  vmappable, the chains run side by side);
* ``position(state) -> {name: array}``: the canonical variables one kept draw records;
* optionally ``adapt(state, info) -> State``, called after every warm-up sweep of a NumPy kernel that tunes its
  proposals (the tuned scales live in its State and are frozen after warm-up).

:func:`sample` owns everything the samplers used to repeat, the same way for all of them:

* **seeding**, from the run's :class:`~bayeszoo.registry.RunContext` (its seed scheme): chain ``c`` has its own
  stream, whatever the number of chains. A NumPy kernel gets one ``numpy.random.Generator`` per chain
  (``ctx.chain_rngs``: ``default_rng(SeedSequence([s, c]))``), which ``init`` and then every ``step`` draw from in
  order. A JAX kernel gets the key ``fold_in(k_c, i)`` for sweep ``i`` of chain ``c``, ``k_c`` its
  ``ctx.chain_keys`` key (``fold_in(PRNGKey(s), c)``; ``i = 0`` is ``init``, sweeps count from 1), so its draws do
  not depend on how the run is cut into compiled calls either;
* **warm-up and thinning**: ``tune`` sweeps, then ``draws`` kept draws, one every ``thin`` sweeps;
* **timing**: ``compile`` (a JAX kernel's ahead-of-time compilation, once per kernel and shape in a process),
  ``tune`` and ``sample``;
* the **progress bar**, the **non-finite check** (a ValueError naming the variable, chain and draw), and the
  arrays the Fit builder takes (:class:`Chains`, which :func:`chains_fit` turns into a Fit).

Info fields become ``sample_stats`` (under ArviZ's names where the quantity has one: ``lp``,
``acceptance_rate``, ...), one value per kept draw.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, NamedTuple

import numpy as np

from bayeszoo.progress import progress_bar
from bayeszoo.results import build_fit

#: a JAX kernel's warm-up runs in compiled calls of at most this many sweeps per chain slot
MAX_TUNE_SWEEPS_PER_SLOT = 50


class Kernel(NamedTuple):
    """A sampler's conditionals (module docstring)."""

    init: Callable[[Any, Any], Any]
    step: Callable[[Any, Any], tuple]
    position: Callable[[Any], dict]
    adapt: Callable[[Any, Any], Any] | None = None
    jax: bool = False


class Chains(NamedTuple):
    """What :func:`sample` hands to the Fit builder: ``posterior`` name -> (chain, draw, ...) array, ``stats`` name
    -> (chain, draw) array (the Info fields), ``timing`` (compile / tune / sample seconds), ``sweeps`` per chain
    (warm-up included) and the chains' final states: a list, one per chain, for a NumPy kernel; one state whose
    arrays have a leading chain axis, left on the device, for a JAX kernel."""

    posterior: dict
    stats: dict
    timing: dict
    sweeps: int
    states: Any


def sample(kernel: Kernel, problem, ctx, *, draws: int, tune: int, chains: int, thin: int = 1,
           desc: str = "mcmc", chunk: int = 50,
           diagnosis: str = "the problem's scales are too far apart for this sampler (rescale the inputs)") -> Chains:
    """Run ``chains`` chains of ``kernel`` on ``problem``: ``tune`` warm-up sweeps, then ``draws`` draws kept
    every ``thin`` sweeps (module docstring). ``ctx`` (the run's :class:`~bayeszoo.registry.RunContext`) seeds
    the chains, says whether to show progress and names the sampler in errors; ``diagnosis`` says, in the error
    of a chain that leaves double precision, why that happens to this sampler and what to do; ``chunk`` is the
    number of kept draws per compiled call of a JAX kernel (progress is updated between calls)."""
    run = _sample_jax if kernel.jax else _sample_numpy
    return run(kernel, problem, ctx, draws=draws, tune=tune, chains=chains, thin=thin, desc=desc,
               failure=_NonFinite(ctx.owner, diagnosis), chunk=chunk)


def chains_fit(model, data, result: Chains, *, ctx, info: dict | None = None, setup: float = 0.0,
               library: str = "bayeszoo", **build):
    """The Fit of a sampler's :class:`Chains`, under the backend ``ctx`` names, with the call's record:
    ``setup`` seconds (the problem's set-up before the chains) count as compile time; ``info["iterations"]`` is
    the sweeps per chain; ``build`` goes to ``build_fit``."""
    timing = dict(result.timing)
    timing["compile"] = timing.get("compile", 0.0) + setup
    info = {"iterations": result.sweeps, "converged": None, **(info or {})}
    return build_fit(model, data, ctx.backend, "mcmc", result.posterior, sample_stats=result.stats, timing=timing,
                     info=info, library=library, ctx=ctx, **build)


class _NonFinite(NamedTuple):
    """The error of a chain that leaves double precision: whose sampler, and why that happens to it."""

    owner: str
    diagnosis: str

    def check(self, position: dict, chain: int, draw: int) -> None:
        for name, value in position.items():
            if not np.all(np.isfinite(value)):
                raise ValueError(f"{self.owner}: chain {chain} left double precision (NaN or inf) in {name} at draw "
                                 f"{draw}; {self.diagnosis}")

    def singular(self, chain: int, sweep: int, error: Exception) -> ValueError:
        """A NumPy kernel's factorisation failed: the same story, told from LAPACK's side."""
        return ValueError(f"{self.owner}: chain {chain} left double precision at sweep {sweep} ({error}); "
                          f"{self.diagnosis}")


# --------------------------------------------------------------------------------------------- NumPy
def _sample_numpy(kernel, problem, ctx, *, draws, tune, chains, thin, desc, failure, chunk):
    sweeps = tune + draws * thin
    post, stats, states = {}, {}, []   # (chain, draw, ...) arrays, allocated at the first kept draw

    def keep(out, values, c, k):
        for name, value in values.items():
            if name not in out:
                out[name] = np.empty((chains, draws, *np.shape(value)), dtype=np.result_type(value, float))
            out[name][c, k] = value

    t_tune = t_sample = 0.0
    with progress_bar(total=chains * sweeps, desc=desc, disable=not ctx.progress, unit="sweep") as bar:
        for c, rng in enumerate(ctx.chain_rngs(chains)):
            t0 = time.perf_counter()
            state = kernel.init(rng, problem)
            k = 0
            for i in range(sweeps):
                try:
                    state, info = kernel.step(rng, state)
                except np.linalg.LinAlgError as error:     # scipy's LinAlgError is numpy's
                    raise failure.singular(c, i + 1, error) from error
                if i < tune:
                    if kernel.adapt is not None:
                        state = kernel.adapt(state, info)
                    if i + 1 == tune:
                        t_tune += time.perf_counter() - t0
                        t0 = time.perf_counter()
                elif (i - tune + 1) % thin == 0:
                    position = kernel.position(state)
                    failure.check(position, c, k)
                    keep(post, position, c, k)
                    keep(stats, info._asdict(), c, k)
                    k += 1
                bar.update()
            t_sample += time.perf_counter() - t0
            states.append(state)
    return Chains(posterior=post, stats=stats, timing={"compile": 0.0, "tune": t_tune, "sample": t_sample},
                  sweeps=sweeps, states=states)


# ----------------------------------------------------------------------------------------------- JAX
#: compiled blocks by (kernel, the shapes and dtypes of keys, states and slots): a second fit of the same kernel
#: on a problem of the same shapes compiles nothing (a kernel that keeps its constants in its State, rather than
#: in closures over one problem's arrays, is reused across problems of one size)
_COMPILED: dict = {}
MAX_COMPILED = 32


@functools.lru_cache(maxsize=MAX_COMPILED)
def _jax_block(kernel):
    """One compiled call for every chain (vmap): slot j runs ``counts[j]`` sweeps numbered from ``starts[j]``
    and records the position and the Info after them. Warm-up and sampling share this one function."""
    import jax
    import jax.numpy as jnp

    def chain_slots(key, state, starts, counts):
        info_shape = jax.eval_shape(kernel.step, key, state)[1]
        info0 = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), info_shape)

        def slot(state, start_count):
            start, count = start_count

            def sweep(i, carry):
                return kernel.step(jax.random.fold_in(key, start + i), carry[0])

            state, info = jax.lax.fori_loop(0, count, sweep, (state, info0))
            return state, (kernel.position(state), info)

        return jax.lax.scan(slot, state, (starts, counts))

    return jax.jit(jax.vmap(chain_slots, in_axes=(0, 0, None, None)))


def _sample_jax(kernel, problem, ctx, *, draws, tune, chains, thin, desc, failure, chunk):
    import jax
    import jax.numpy as jnp

    keys = ctx.chain_keys(chains)
    t0 = time.perf_counter()
    per_chain = [kernel.init(jax.random.fold_in(keys[c], 0), problem) for c in range(chains)]
    state = jax.tree.map(lambda *xs: jnp.stack(xs), *per_chain)
    chunk = max(1, min(chunk, draws))
    starts_counts = (jnp.zeros(chunk, jnp.int64), jnp.zeros(chunk, jnp.int64))
    shapes = jax.tree.map(lambda x: (jnp.shape(x), str(jnp.result_type(x))), (keys, state, starts_counts))
    key = (kernel, str(shapes))
    if key not in _COMPILED:
        if len(_COMPILED) >= MAX_COMPILED:
            _COMPILED.pop(next(iter(_COMPILED)))
        _COMPILED[key] = _jax_block(kernel).lower(keys, state, *starts_counts).compile()
    block = _COMPILED[key]
    t_compile = time.perf_counter() - t0

    def call(state, first, counts):
        counts = np.asarray(counts, np.int64)
        starts = first + np.concatenate([[0], np.cumsum(counts)[:-1]])
        return block(keys, state, jnp.asarray(starts), jnp.asarray(counts))

    sweeps = tune + draws * thin
    pieces = []
    t0 = time.perf_counter()
    with progress_bar(total=sweeps, desc=desc, disable=not ctx.progress, unit="sweep") as bar:
        n_calls = -(-tune // (chunk * MAX_TUNE_SWEEPS_PER_SLOT)) if tune else 0
        done = 0
        for k in range(n_calls):
            n = (tune * (k + 1)) // n_calls - done
            state, _ = call(state, 1 + done, np.full(chunk, n // chunk) + (np.arange(chunk) < n % chunk))
            done += n
            bar.update(n)
        jax.block_until_ready(state)
        t_tune = time.perf_counter() - t0
        got = 0
        while got < draws:
            n = min(chunk, draws - got)   # the last call's spare slots run no sweep: the same compiled shape
            state, (position, info) = call(state, 1 + tune + got * thin, np.where(np.arange(chunk) < n, thin, 0))
            pieces.append(({k: np.asarray(v)[:, :n] for k, v in position.items()},
                           {k: np.asarray(v)[:, :n] for k, v in info._asdict().items()}))
            bar.update(n * thin)
            got += n
    t_sample = time.perf_counter() - t0 - t_tune
    posterior = {k: np.concatenate([p[0][k] for p in pieces], axis=1) for k in pieces[0][0]}
    stats = {k: np.concatenate([p[1][k] for p in pieces], axis=1) for k in pieces[0][1]}
    for name, values in posterior.items():
        bad = np.argwhere(~np.isfinite(values.reshape(chains, draws, -1)).all(-1))
        if bad.size:
            failure.check({name: np.nan}, int(bad[0][0]), int(bad[0][1]))
    return Chains(posterior=posterior, stats=stats, timing={"compile": t_compile, "tune": t_tune, "sample": t_sample},
                  sweeps=sweeps, states=state)
