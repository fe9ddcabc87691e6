"""Turn hand-written backends' arrays into a :class:`~bayeszoo.Fit` with canonical names and dims."""
from __future__ import annotations

import numpy as np
import arviz as az
import xarray as xr

from bayeszoo.fit import Fit


def make_fit(model, data, backend: str, kind: str, draws: dict[str, np.ndarray], *, timing: dict,
             sample_stats: dict[str, np.ndarray] | None = None, objective: dict[str, np.ndarray] | None = None,
             info: dict | None = None) -> Fit:
    """Build a Fit from posterior arrays shaped (chain, draw, *var_shape).

    ``draws`` must hold exactly the model's canonical variables (``model.var_dims(data)``).
    ``sample_stats`` arrays are (chain, draw); ``objective`` arrays are traces over iterations, e.g.
    ``{"elbo": (chain, iteration)}`` or ``{"log_evidence": (iteration,)}``; they go to the ``objective`` group.
    """
    var_dims = model.var_dims(data)
    missing = set(var_dims) - set(draws)
    extra = set(draws) - set(var_dims)
    if missing or extra:
        raise ValueError(f"backend {backend!r} returned variables {sorted(draws)}; the model's canonical "
                         f"variables are {sorted(var_dims)}")
    coords = model.coords(data)
    idata = az.from_dict(
        posterior={k: np.asarray(v, dtype=float) for k, v in draws.items()},
        sample_stats={k: np.asarray(v) for k, v in (sample_stats or {}).items()} or None,
        observed_data={"y": data.y},
        constant_data=model.constant_data(data),
        coords={k: v for k, v in coords.items()},
        dims={**{k: list(v) for k, v in var_dims.items()}, "y": ["obs"]},
    )
    if objective:
        group = {}
        for name, trace in objective.items():
            trace = np.asarray(trace, dtype=float)
            dims = ("iteration",) if trace.ndim == 1 else ("chain", "iteration")
            group[name] = xr.DataArray(trace, dims=dims)
        idata.add_groups({"objective": xr.Dataset(group)}, warn_on_custom_groups=False)
    return Fit(idata=idata, backend=backend, kind=kind, timing=dict(timing), model_spec=model.spec(),
               info=dict(info or {}))


def gaussian_draws(rng: np.random.Generator, mean: np.ndarray, cov: np.ndarray, chains: int, draws: int) -> np.ndarray:
    """i.i.d. draws (chains, draws, M) from N(mean, cov) via Cholesky with jitter for near-singular cov."""
    M = mean.shape[0]
    jitter = 0.0
    for _ in range(8):
        try:
            L = np.linalg.cholesky(cov + jitter * np.eye(M))
            break
        except np.linalg.LinAlgError:
            jitter = max(1e-12, 10 * jitter) * max(1.0, float(np.mean(np.diag(cov))))
    else:
        raise np.linalg.LinAlgError("covariance is not positive definite even with jitter")
    z = rng.standard_normal((chains, draws, M))
    return mean + z @ L.T
