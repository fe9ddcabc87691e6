"""Per-fit numbers of the comparison table.

ESS is ArviZ's rank-normalised split-chain estimator (``az.ess(method="bulk")`` and ``method="tail"``,
Vehtari et al. 2021), R-hat is ``az.rhat`` (rank-normalised, split). ESS per second divides the smallest
bulk ESS over all components of the canonical variables by the fit's total wall time (compile + tune + sample).
"""
from __future__ import annotations

import math

import arviz as az
import numpy as np

ESS_METHOD = "ArviZ rank-normalised split-chain ESS (bulk and tail), Vehtari et al. (2021)"

TABLE_COLUMNS = ["backend", "kind", "seconds", "ess_bulk_min", "ess_bulk_median", "ess_tail_min",
                 "ess_bulk_per_s", "rhat_max", "divergences", "mean_err", "sd_err"]


def _components(fit, names) -> dict[str, np.ndarray]:
    """Posterior draws of each variable flattened to (chain, draw, n_components)."""
    post = fit.idata.posterior
    out = {}
    for name in names:
        if name in post:
            arr = post[name].values
            out[name] = arr.reshape(arr.shape[0], arr.shape[1], -1)
    return out


def _scalar_ess(fit, names, method: str) -> np.ndarray:
    comps = _components(fit, names)
    if not comps:
        return np.array([np.nan])
    values = []
    for arr in comps.values():
        for j in range(arr.shape[2]):
            x = arr[:, :, j]
            if np.ptp(x) == 0 or not np.all(np.isfinite(x)):
                values.append(np.nan)  # a constant (point-estimated) component has no ESS
            else:
                values.append(float(az.ess(x, method=method)))
    return np.asarray(values)


def sampling_diagnostics(fit, names) -> dict:
    """ESS bulk / tail, ESS per second, R-hat and divergences of one fit."""
    bulk = _scalar_ess(fit, names, "bulk")
    tail = _scalar_ess(fit, names, "tail")
    finite = bulk[np.isfinite(bulk)]
    ess_min = float(finite.min()) if finite.size else math.nan
    row = {
        "ess_bulk_min": ess_min,
        "ess_bulk_median": float(np.median(finite)) if finite.size else math.nan,
        "ess_tail_min": float(np.nanmin(tail)) if np.isfinite(tail).any() else math.nan,
        "ess_bulk_per_s": ess_min / fit.seconds if fit.seconds > 0 and finite.size else math.nan,
        "rhat_max": math.nan,
        "divergences": math.nan,
    }
    if fit.kind == "mcmc" and fit.n_chains >= 2:
        rhats = []
        for arr in _components(fit, names).values():
            for j in range(arr.shape[2]):
                x = arr[:, :, j]
                if np.ptp(x) > 0 and np.all(np.isfinite(x)):
                    rhats.append(float(az.rhat(x)))
        row["rhat_max"] = max(rhats) if rhats else math.nan
    stats = getattr(fit.idata, "sample_stats", None)
    if stats is not None and "diverging" in stats:
        row["divergences"] = int(stats["diverging"].values.sum())
    return row


def reference_errors(fit, reference, names) -> dict:
    """Largest |mean - mean_ref| / sd_ref and |sd - sd_ref| / sd_ref over all components of ``names``."""
    if reference is None:
        return {"mean_err": math.nan, "sd_err": math.nan}
    mine, ref = _components(fit, names), _components(reference, names)
    mean_err, sd_err = [], []
    for name in set(mine) & set(ref):
        a, r = mine[name], ref[name]
        if a.shape[2] != r.shape[2]:
            continue
        ref_sd = r.reshape(-1, r.shape[2]).std(0, ddof=1)
        ref_mean = r.reshape(-1, r.shape[2]).mean(0)
        scale = np.where(ref_sd > 0, ref_sd, np.nan)
        a_flat = a.reshape(-1, a.shape[2])
        my_sd = a_flat.std(0, ddof=1) if a_flat.shape[0] > 1 else np.zeros(a.shape[2])
        mean_err.append(np.nanmax(np.abs(a_flat.mean(0) - ref_mean) / scale))
        sd_err.append(np.nanmax(np.abs(my_sd - ref_sd) / scale))
    if not mean_err:
        return {"mean_err": math.nan, "sd_err": math.nan}
    return {"mean_err": float(max(mean_err)), "sd_err": float(max(sd_err))}


def table_row(model, data, name: str, fit, reference) -> dict:
    """One row of ``Comparison.table()``: diagnostics, errors against the reference, family metrics."""
    names = list(model.var_dims(data))
    row = {"backend": name, "kind": fit.kind, "seconds": fit.seconds}
    row.update(sampling_diagnostics(fit, names))
    row.update(reference_errors(fit, reference, list(model.compare_vars) or names))
    row.update({k: v for k, v in model.score(fit, data).items()})
    row["error"] = ""
    return row
