"""Shared check of the PyMC and NumPyro declarations: both log densities at the same points of the value space."""
from __future__ import annotations

import numpy as np


def random_points(pm_model, rng, n: int, scale: float = 1.0) -> list[dict]:
    """``n`` points with the shapes of the PyMC model's value variables, entries N(0, scale^2)."""
    shapes = {k: np.shape(v) for k, v in pm_model.initial_point().items()}
    return [{k: rng.normal(scale=scale, size=s) for k, s in shapes.items()} for _ in range(n)]


def declared_log_densities(model, data, points=None, *, rng=None, n: int = 2, scale: float = 1.0):
    """(PyMC log p, NumPyro log p, NumPyro trace) at each point; both models are built and compiled once.

    Without ``points``, ``n`` random points (``random_points``) are used. The points are value-space values, the
    same for both libraries when a declaration has no transformed variables.
    """
    from numpyro.infer.util import log_density

    pm_model = model.pymc_model(data)
    logp = pm_model.compile_logp()
    fn = model.numpyro_model(data)
    if points is None:
        points = random_points(pm_model, rng if rng is not None else np.random.default_rng(0), n, scale)
    out = []
    for point in points:
        np_lp, trace = log_density(fn, (), {}, point)
        out.append((point, float(logp(point)), float(np_lp), trace))
    return out
