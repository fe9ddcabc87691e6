"""A user's MCMC algorithm, written in BlackJAX's shape, run on any model by the shared chain driver.

The user writes the algorithm and nothing else::

    def rwm(logdensity_fn, scale=0.5):
        return blackjax.normal_random_walk(logdensity_fn, scale)   # or (init, step)

    bz.register_sampler("rwm", rwm, options={"scale": Option(0.5, "proposal sd", POSITIVE)})

``algorithm(logdensity_fn, **options)`` returns BlackJAX's ``SamplingAlgorithm`` (``init(position)`` and
``step(rng_key, state) -> (state, info)``) or the pair ``(init, step)``; the state has a ``position``.
``logdensity_fn`` is the model's log density on the flat unconstrained vector (:func:`log_density`: NumPyro's
potential of the model's declaration, Jacobians included). :func:`bayeszoo.inference.chains.sample` runs it
(jit + vmap over chains) with the driver's seeding, warm-up (``tune`` steps discarded: the algorithm adapts
nothing unless it does so itself), thinning (option ``thin``), timing, progress and non-finite check; every kept
position is mapped back to the model's canonical (constrained) variables. The scalar fields of ``info`` become
``sample_stats`` (``is_divergent`` as ArviZ's ``diverging``). Each chain starts from a uniform draw on
[-2, 2] in the unconstrained space, NumPyro's ``init_to_uniform``.
"""
from __future__ import annotations

import collections
import functools
import math
from typing import Callable, NamedTuple

from bayeszoo.checks import POSITIVE_INT
from bayeszoo.inference import chains as chain_driver
from bayeszoo.inference.blackjax_engines import UnconstrainedTarget
from bayeszoo.registry import Backend, Option, register_backend

#: sample_stats names of BlackJAX's info fields where ArviZ has its own
ARVIZ_NAMES = {"is_divergent": "diverging"}
INIT_RADIUS = 2.0


class LogDensity(NamedTuple):
    """A model's posterior on the flat unconstrained vector: ``logdensity(x)`` (JAX-traceable, Jacobians
    included; ``jax.grad`` gives its gradient), ``dim``, and ``constrain(x)`` -> the model's variables."""

    logdensity: Callable
    dim: int
    constrain: Callable


def log_density(model, data, who: str = "log_density") -> LogDensity:
    """The unconstrained log density of ``model``'s NumPyro declaration on ``data`` (a ValueError naming the
    variables when some are discrete)."""
    import jax

    target = UnconstrainedTarget(model, data, who, [jax.random.PRNGKey(0)])
    return LogDensity(target.logdensity, int(target.positions.shape[1]), target.constrain_one)


@functools.lru_cache(maxsize=64)
def _info_type(names: tuple[str, ...]):
    return collections.namedtuple("Info", names)


def _scalar_info(info):
    """The scalar fields of a BlackJAX info (a NamedTuple), under ArviZ's names, as a NamedTuple."""
    import jax.numpy as jnp

    fields = {}
    for name, value in (info._asdict().items() if hasattr(info, "_asdict") else ()):
        if hasattr(value, "shape") and jnp.ndim(value) == 0:
            fields[ARVIZ_NAMES.get(name, name)] = value
    return _info_type(tuple(fields))(**fields)


def _init_step(name: str, made) -> tuple[Callable, Callable]:
    """(init, step) of what the algorithm returned, or a ValueError naming the sampler and what it returned."""
    if hasattr(made, "init") and hasattr(made, "step"):
        made = (made.init, made.step)
    if isinstance(made, tuple) and len(made) == 2 and all(callable(f) for f in made):
        return made
    text = repr(made)
    raise ValueError(f"sampler {name!r}: algorithm(logdensity_fn, **options) must return BlackJAX's "
                     f"SamplingAlgorithm (with init and step) or the pair (init, step) of functions; it returned "
                     f"{type(made).__name__} {text[:120]}{'...' if len(text) > 120 else ''}")


def _kernel(name: str, algorithm, target: LogDensity, options: dict) -> chain_driver.Kernel:
    import jax

    init, step = _init_step(name, algorithm(target.logdensity, **options))

    def start(key, problem):
        return init(jax.random.uniform(key, (target.dim,), minval=-INIT_RADIUS, maxval=INIT_RADIUS))

    def sweep(key, state):
        state, info = step(key, state)
        return state, _scalar_info(info)

    return chain_driver.Kernel(init=start, step=sweep, position=lambda state: target.constrain(state.position),
                               jax=True)


#: kernels by (algorithm, model, data, options): the chain driver compiles once per kernel object and shape, so a
#: second fit of the same problem (a seed check, a grid cell, SBC's refits share the model) reuses the compiled sweep
_KERNELS: dict = {}
MAX_KERNELS = 16


def _problem_kernel(algorithm, model, data, who: str, options: dict) -> chain_driver.Kernel:
    import json

    try:
        key = (algorithm, json.dumps(model.spec(), sort_keys=True), data.fingerprint(), tuple(sorted(options.items())))
        hash(key)
    except TypeError:   # an option value that cannot be a key (an array): build afresh
        return _kernel(who, algorithm, log_density(model, data, who), options)
    if key not in _KERNELS:
        if len(_KERNELS) >= MAX_KERNELS:
            _KERNELS.pop(next(iter(_KERNELS)))
        _KERNELS[key] = _kernel(who, algorithm, log_density(model, data, who), options)
    return _KERNELS[key]


def register_sampler(name: str, algorithm: Callable, *, options: dict | None = None, description: str = "",
                     family: str | None = None, gradients_per_step: float | None = None,
                     replace: bool = False) -> Backend:
    """Register ``algorithm`` (module docstring) as the MCMC backend ``name`` for every model with a NumPyro
    declaration (or one ``family``'s). ``options``: name -> :class:`~bayeszoo.registry.Option`, passed to
    ``algorithm`` as keywords; ``thin`` is added. ``gradients_per_step``: the gradient evaluations one step costs
    (1 for MALA); when given, a fit counts them (``info["n_grad"]``, warm-up and thinned steps included, the initial
    point's not), as the built-in samplers do, so that ``bz.benchmark`` can rank it by gradients. A name already
    taken is refused unless ``replace=True``."""
    options = dict(options or {})
    if gradients_per_step is not None and not (
            isinstance(gradients_per_step, (int, float)) and not isinstance(gradients_per_step, bool)
            and math.isfinite(gradients_per_step) and gradients_per_step > 0):
        raise ValueError(f"sampler {name!r}: gradients_per_step must be a number > 0 (the gradient evaluations of "
                         f"one step, e.g. 1 for MALA), or None for a sampler that uses no gradients (a random walk; "
                         f"a benchmark then ranks by seconds); got {gradients_per_step!r}")
    if "thin" in options:
        raise ValueError(f"sampler {name!r}: 'thin' is the driver's option (keep every thin-th step); rename yours")
    if not callable(algorithm):
        raise ValueError(f"sampler {name!r}: algorithm must be a function algorithm(logdensity_fn, **options) "
                         f"returning (init, step); got {type(algorithm).__name__}")
    declared = {**options, "thin": Option(1, "keep every thin-th step", POSITIVE_INT)}

    def run(model, data, *, draws, tune, chains, ctx, thin, **opts):
        import time

        start = time.perf_counter()
        kernel = _problem_kernel(algorithm, model, data, name, opts)
        setup = time.perf_counter() - start
        res = chain_driver.sample(kernel, None, ctx, draws=draws, tune=tune, chains=chains, thin=thin, desc=name)
        info = {"thin": thin}
        if gradients_per_step is not None:   # every step of every chain, warm-up and thinned ones included
            info.update(n_grad=gradients_per_step * chains * res.sweeps, n_grad_tune=gradients_per_step * chains * tune)
        return chain_driver.chains_fit(model, data, res, ctx=ctx, setup=setup, library="user", info=info)

    # the identity the registry compares: the same algorithm defined again (a re-run notebook cell) replaces
    run.__qualname__ = f"register_sampler.<{getattr(algorithm, '__qualname__', name)}>"
    run.__module__ = getattr(algorithm, "__module__", __name__)
    return register_backend(name, run, kind="mcmc", family=family, options=declared,
                            description=description or (algorithm.__doc__ or f"user sampler {name}").strip()
                            .split("\n")[0], library="user", replace=replace)
