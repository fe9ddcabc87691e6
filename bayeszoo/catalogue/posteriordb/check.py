"""Do a program's PyMC and NumPyro models write the same posterior? Their log densities compared on one space.

Both libraries sample on an unconstrained space, but their transforms need not be the same (a simplex is
stick-breaking in NumPyro and another map in PyMC). The comparison is made on PyMC's space: a point ``u`` of
PyMC's value variables is mapped to the constrained parameters (PyMC's transforms) and on to NumPyro's space
(the inverse of NumPyro's), and NumPyro's log density there gains the log-Jacobian of that map. Where the two
libraries use the same transforms the map is the identity and its log-Jacobian zero.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class LogDensityPair:
    """The two log densities of one program and data as JAX functions of PyMC's unconstrained point."""

    names: list[str]                  # the free variables, in PyMC's order
    shapes: list[tuple[int, ...]]     # PyMC's value variables' shapes
    start: np.ndarray                 # PyMC's initial point, flattened
    pymc: object                      # flat u -> (log density, gradient) (PyMC)
    numpyro: object                   # flat u -> (log density, gradient) (NumPyro, with the map's log-Jacobian)


def log_density_pair(pm_model, numpyro_fn) -> LogDensityPair:
    import jax
    import jax.numpy as jnp
    from numpyro import handlers
    from numpyro.distributions import biject_to
    from numpyro.infer.util import initialize_model, potential_energy
    from pymc.sampling.jax import get_jaxified_graph

    values = pm_model.value_vars
    logp = get_jaxified_graph(inputs=values, outputs=[pm_model.logp()])
    constrain = get_jaxified_graph(inputs=values, outputs=pm_model.replace_rvs_by_values(pm_model.free_RVs))
    names = [rv.name for rv in pm_model.free_RVs]
    point = pm_model.initial_point()
    shapes = [tuple(np.shape(point[v.name])) for v in values]
    sizes = [int(np.prod(s)) for s in shapes]
    start = np.concatenate([np.ravel(point[v.name]) for v in values]).astype(float)

    # initialize_model traces the model at a valid point (a plain seeded trace cannot sample ImproperUniform)
    trace = initialize_model(jax.random.PRNGKey(0), numpyro_fn, dynamic_args=False).model_trace
    latent = {k: s for k, s in trace.items() if s["type"] == "sample" and not s["is_observed"]}
    if sorted(latent) != sorted(names):
        raise ValueError(f"the NumPyro model's latent sites {sorted(latent)} are not PyMC's free variables "
                         f"{sorted(names)}: name them as the Stan program's parameters in both")

    def split(u):
        out, at = [], 0
        for shape, size in zip(shapes, sizes):
            out.append(jnp.reshape(u[at:at + size], shape))
            at += size
        return out

    def pymc_lp(u):
        return logp(*split(u))[0]

    def to_numpyro(u):
        constrained = {name: jnp.asarray(x) for name, x in zip(names, constrain(*split(u)))}
        # each support as the model makes it at this point: a bound may be another parameter (garch11's
        # beta1 < 1 - alpha1)
        sites = handlers.trace(handlers.substitute(numpyro_fn, data=constrained)).get_trace()
        return {name: biject_to(sites[name]["fn"].support).inv(x) for name, x in constrained.items()}

    def flat(params):
        return jnp.concatenate([jnp.ravel(params[name]) for name in names])

    def numpyro_lp(u):
        params = to_numpyro(u)
        lp = -potential_energy(numpyro_fn, (), {}, params)
        _, logdet = jnp.linalg.slogdet(jax.jacfwd(lambda v: flat(to_numpyro(v)))(u))
        return lp + logdet

    return LogDensityPair(names, shapes, start, jax.jit(jax.value_and_grad(pymc_lp)),
                          jax.jit(jax.value_and_grad(numpyro_lp)))


def compare(pair: LogDensityPair, n_points: int = 4, seed: int = 0, scale: float = 0.5) -> dict:
    """Evaluate both at ``n_points`` random points about PyMC's initial point (normal, sd ``scale``): the largest
    relative differences of the log densities (after removing the constant of the first point) and gradients, and
    whether every value and gradient is finite."""
    rng = np.random.default_rng(seed)
    points = pair.start + scale * rng.standard_normal((n_points, pair.start.size))
    a, ga = (np.array(v, dtype=float) for v in zip(*(pair.pymc(u) for u in points)))
    b, gb = (np.array(v, dtype=float) for v in zip(*(pair.numpyro(u) for u in points)))
    constant = a[0] - b[0]
    lp_err = np.abs(a - b - constant) / np.maximum(np.abs(a), 1.0)
    grad_err = np.abs(ga - gb) / np.maximum(np.abs(ga).max(axis=1, keepdims=True), 1.0)
    finite = all(np.isfinite(x).all() for x in (a, b, ga, gb))   # a NaN gradient beside a finite value too
    return {"constant": float(constant), "logp_rel_error": float(lp_err.max()),
            "grad_rel_error": float(grad_err.max()), "logp": a, "finite": finite}
