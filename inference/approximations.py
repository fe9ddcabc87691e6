"""Typed results of the hand-written approximations and the one builder that turns them into a Fit.

After GPML, where every approximate inference method returns the same posterior struct, an approximation returns
one of two types:

* :class:`GaussianApproximation`: q(v) = N(mean, cov) over one canonical variable ``variable`` (GPC's latent
  ``f``, the SLM's ``u``, the RVM's weights ``w``), the covariance given as a matrix (``cov``), as a factor
  (``factor``, cov = factor factor^T), by its diagonal alone (``var``, a mean-field approximation), or, for a
  Gaussian known only by its precision operator, by ``sampler(rng, n)`` drawing from it (with ``var`` for the
  variances); the other canonical variables point-estimated in ``fixed`` (the RVM's ``log_alpha``), or drawn
  with each draw by ``others(rng, draws) -> {name: (n, ...)}`` (an aRVM's f = Phi w, the Gamma factors of the
  RVM's variational q(alpha) and q(beta));
* :class:`PointEstimate`: every canonical variable at one value (MAP, type-II maximum likelihood).

Both carry the log evidence the method computes (None where it has none), the traces of the objectives it
optimises (name -> values over iterations; ``objective`` names the one it maximises), its iteration count and
whether its stopping rule was met. :func:`approximation_fit` draws ``chains`` x ``draws`` i.i.d. draws (chain c
of seed s from the same stream as the samplers' chain c, the run context's ``chain_rngs``; a point
estimate repeats itself) and keeps the Gaussian's own mean, variance and (dense, up to ``DENSE_N``) covariance in
the ``gaussian`` group, so that predictions use q itself rather than averages over draws.
"""
from __future__ import annotations

import time
from typing import Callable, NamedTuple

import numpy as np
import xarray as xr

from bayeszoo.numerics.linalg import DENSE_N, jittered_cholesky
from bayeszoo.results import build_fit

GAUSSIAN_GROUP = "gaussian"


class GaussianApproximation(NamedTuple):
    """q(variable) = N(mean, covariance); the rest of the canonical variables fixed (module docstring)."""

    variable: str
    mean: np.ndarray
    cov: np.ndarray | None = None
    factor: np.ndarray | None = None
    var: np.ndarray | None = None
    fixed: dict = {}
    log_evidence: float | None = None
    objective: dict = {}
    objective_name: str | None = None
    iterations: int | None = None
    converged: bool | None = None
    sampler: Callable[[np.random.Generator, int], np.ndarray] | None = None
    others: Callable[[np.random.Generator, np.ndarray], dict] | None = None

    def variances(self) -> np.ndarray:
        if self.cov is not None:
            return np.diag(np.asarray(self.cov, float)).copy()
        if self.factor is not None:
            return np.sum(np.asarray(self.factor, float) ** 2, axis=1)
        return np.asarray(self.var, float)

    def draws(self, rng: np.random.Generator, n: int, owner: str) -> np.ndarray:
        """``n`` i.i.d. draws (n, size)."""
        if self.sampler is not None:
            return np.asarray(self.sampler(rng, n), dtype=float).reshape(n, -1)
        mean = np.asarray(self.mean, float).reshape(-1)
        z = rng.standard_normal((n, mean.size))
        if self.cov is not None:
            L = jittered_cholesky(self.cov, what=f"{owner}: the covariance of its Gaussian approximation")
            return mean + z @ L.T
        if self.factor is not None:
            factor = np.asarray(self.factor, float)
            return mean + rng.standard_normal((n, factor.shape[1])) @ factor.T
        return mean + z * np.sqrt(np.asarray(self.var, float).reshape(-1))


class PointEstimate(NamedTuple):
    """Every canonical variable at one value (module docstring)."""

    values: dict
    log_evidence: float | None = None
    objective: dict = {}
    objective_name: str | None = None
    iterations: int | None = None
    converged: bool | None = None


def approximation_fit(model, data, result: GaussianApproximation | PointEstimate, *, ctx, draws: int, chains: int,
                      timing: dict, info: dict | None = None, limit: str | None = None, **build):
    """The Fit of an approximation (module docstring), under the backend the run context ``ctx`` names, seeded
    by it, with the call's record. ``timing`` holds the algorithm's seconds (compile / tune); drawing is timed
    here as ``sample``. ``limit`` names the iteration cap in the warning when the stopping rule was not met;
    ``info`` adds the backend's own keys; ``build`` goes to ``build_fit``."""
    backend = ctx.backend
    t0 = time.perf_counter()
    extra = {}
    if isinstance(result, GaussianApproximation):
        shape = np.shape(result.mean)
        per_chain = []
        for rng in ctx.chain_rngs(chains):   # chain c draws from its own stream: the Gaussian, then the rest
            values = result.draws(rng, draws, ctx.owner)
            with_it = result.others(rng, values) if result.others is not None else {}
            per_chain.append({result.variable: values.reshape(draws, *shape), **with_it})
        posterior = {k: _repeat(v, chains, draws) for k, v in result.fixed.items()}
        posterior.update({k: np.stack([c[k] for c in per_chain]) for k in per_chain[0]})
        extra[GAUSSIAN_GROUP] = _gaussian_group(model, data, result, model.var_dims(data)[result.variable])
    else:
        posterior = {k: _repeat(v, chains, draws) for k, v in result.values.items()}
    timing = {"compile": 0.0, "tune": 0.0, **timing, "sample": time.perf_counter() - t0}
    converged = result.converged
    info = dict(info or {})
    warnings = [] if converged is not False else [f"{backend} did not converge" + (f" in {limit}" if limit else "")]
    warnings += list(info.pop("warnings", []))   # the backend's own, after the standard one
    standard = {"iterations": result.iterations, "converged": converged, "objective": result.objective_name,
                "warnings": warnings}
    if result.log_evidence is not None:
        standard["log_evidence"] = float(result.log_evidence)
    objective = {k: np.asarray(v, float) for k, v in result.objective.items()} or None
    groups = {**extra, **build.pop("extra_groups", {})}
    return build_fit(model, data, backend, "approximation", posterior, timing=timing, objective=objective,
                     info={**standard, **info}, extra_groups=groups or None, ctx=ctx, **build)


def _repeat(value, chains: int, draws: int) -> np.ndarray:
    value = np.asarray(value, float)
    return np.array(np.broadcast_to(value, (chains, draws, *value.shape)))


def _gaussian_group(model, data, q: GaussianApproximation, dims: tuple) -> xr.Dataset:
    """q's mean and variances over the variable's dims, and its covariance when it is given dense and small."""
    coords = model.coords(data)
    shape = np.shape(q.mean)
    own = {d: coords[d] for d in dims if d in coords}
    out = {"q_mean": xr.DataArray(np.asarray(q.mean, float), dims=dims, coords=own),
           "q_var": xr.DataArray(q.variances().reshape(shape), dims=dims, coords=own)}
    if q.cov is not None and len(dims) == 1 and shape[0] <= DENSE_N:
        cov = np.asarray(q.cov, float)
        out["q_cov"] = xr.DataArray(0.5 * (cov + cov.T), dims=(dims[0], f"{dims[0]}_"))
    return xr.Dataset(out)
