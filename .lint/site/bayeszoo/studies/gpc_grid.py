"""The thesis's hyperparameter grid study (Nickisch ch. 4, Figs. 4.9-4.11; §4.4 uses a 16 x 16 grid).

For every (ln ell, ln sf) on a grid and every chosen Gaussian method, fit the method at those fixed
hyperparameters and record its own log-evidence approximation, the generic Jensen lower bound (4.13), and the
test-set information score (bits), log predictive probability, number and rate of errors, and the fit time.
The predictions come from the method's Gaussian Q itself (exact, no Monte-Carlo error).

    ds = grid_study(model, data, methods=("laplace", "ep", "kl", "vb"))
    bz.diagnostics.gpc_plots.grid_contours(ds)          # the thesis's panels: evidence, bound, information, errors
"""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import xarray as xr

import bayeszoo as bz
from bayeszoo.progress import progress_bar

QUANTITIES = ("log_evidence", "jensen_bound", "info_bits", "log_pred", "n_errors", "error_rate", "seconds")
# axis ranges of the thesis's contour plots (ticks 1-5 for ln ell, 0-5 for ln sf), 16 x 16 as in §4.4
DEFAULT_LOG_LENGTHSCALES = np.linspace(1.0, 5.0, 16)
DEFAULT_LOG_AMPLITUDES = np.linspace(0.0, 5.0, 16)
GRID_KERNELS = ("se", "se_ard", "matern32", "matern52", "nn")   # kernels with a lengthscale and an amplitude


def _axis(values, name) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be a non-empty 1-d sequence of finite numbers")
    return arr


def grid_study(model, data, methods=("laplace", "ep"), log_lengthscales=None, log_amplitudes=None, *,
               options: dict | None = None, progress: bool = True) -> xr.Dataset:
    """Evidence, Jensen bound, information and test errors of ``methods`` over a (ln ell, ln sf) grid.

    Parameters
    ----------
    model : GPC
        Likelihood and kernel to study; its own hyperparameters are replaced at every grid point (``hyp`` is
        ignored). The kernel must have a lengthscale and an amplitude (``GRID_KERNELS``).
    data : Dataset
        Scores are computed on its test set (on the training set if it has none).
    methods : sequence of str
        Gaussian-approximation backends of the family (e.g. ``laplace``, ``ep``, ``kl``, ``vb``, ``fv``, ``lr``).
    log_lengthscales, log_amplitudes : 1-d sequences
        Grid axes; defaults are the thesis's 16 x 16 grid over [1, 5] x [0, 5].
    options : dict, optional
        Per-method backend options, e.g. ``{"ep": {"tol": 1e-6}}``.

    Returns
    -------
    xarray.Dataset with the variables ``QUANTITIES`` over (backend, log_lengthscale, log_amplitude); a grid point
    where a method failed holds NaN and its message is in ``attrs["errors"]``.
    """
    if getattr(model, "family", None) != "gpc":
        raise ValueError(f"grid_study needs a GPC model, got {type(model).__name__}")
    if model.kernel not in GRID_KERNELS:
        raise ValueError(f"grid_study needs a kernel with a lengthscale and an amplitude {GRID_KERNELS}, "
                         f"got {model.kernel!r}")
    if isinstance(methods, str) or len(methods) == 0:
        raise ValueError("methods must be a non-empty sequence of backend names")
    methods = list(methods)
    table = bz.backends(model, details=True)
    kinds = dict(zip(table["backend"], table["kind"]))
    for name in methods:
        if name not in kinds:
            raise ValueError(f"unknown backend {name!r} for {type(model).__name__}; available: {', '.join(kinds)}")
        if kinds[name] != "approximation":
            raise ValueError(f"grid_study compares Gaussian approximations; {name!r} is a sampler")
    options = dict(options or {})
    unknown = set(options) - set(methods)
    if unknown:
        raise ValueError(f"options given for methods not in the study: {sorted(unknown)}")
    ells = _axis(DEFAULT_LOG_LENGTHSCALES if log_lengthscales is None else log_lengthscales, "log_lengthscales")
    sfs = _axis(DEFAULT_LOG_AMPLITUDES if log_amplitudes is None else log_amplitudes, "log_amplitudes")
    model.validate(data)

    shape = (len(methods), ells.size, sfs.size)
    out = {q: np.full(shape, np.nan) for q in QUANTITIES}
    errors = []
    cells = [(k, i, j) for k in range(len(methods)) for i in range(ells.size) for j in range(sfs.size)]
    with progress_bar(total=len(cells), desc="grid study", disable=not progress) as bar:
        for k, i, j in cells:
            point = dataclasses.replace(model, hyp=None, log_lengthscale=float(ells[i]),
                                        log_amplitude=float(sfs[j]))
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fit = bz.fit(point, data, backend=methods[k], draws=1, chains=1, seed=0, progress=False,
                                 **options.get(methods[k], {}))
                scores = point.score(fit, data)
                for q in QUANTITIES:
                    out[q][k, i, j] = fit.timing.get("total", np.nan) if q == "seconds" else scores[q]
            except Exception as exc:  # one failing grid point must not lose the rest of the study
                errors.append(f"{methods[k]} at ln ell={ells[i]:.3g}, ln sf={sfs[j]:.3g}: "
                              f"{type(exc).__name__}: {exc}")
            bar.update(1)
    n_test = (data.X_test if data.has_test else data.X).shape[0]
    return xr.Dataset(
        {q: (("backend", "log_lengthscale", "log_amplitude"), v) for q, v in out.items()},
        coords={"backend": methods, "log_lengthscale": ells, "log_amplitude": sfs},
        attrs={"dataset": data.name, "likelihood": model.likelihood, "kernel": model.kernel,
               "n_test": int(n_test), "errors": errors},
    )


def best_point(ds: xr.Dataset, quantity: str = "log_evidence", method: str | None = None) -> dict:
    """Grid point that maximises ``quantity`` (minimises it for ``n_errors`` / ``error_rate``), per method."""
    if quantity not in ds:
        raise ValueError(f"unknown quantity {quantity!r}; the study has {list(ds.data_vars)}")
    best = {}
    for name in ([method] if method else [str(m) for m in ds["backend"].values]):
        values = ds[quantity].sel(backend=name).values
        if not np.any(np.isfinite(values)):
            continue
        flat = np.where(np.isfinite(values), values, np.inf if quantity in ("n_errors", "error_rate") else -np.inf)
        i, j = np.unravel_index(np.argmin(flat) if quantity in ("n_errors", "error_rate") else np.argmax(flat),
                                values.shape)
        best[str(name)] = {"log_lengthscale": float(ds["log_lengthscale"][i]),
                           "log_amplitude": float(ds["log_amplitude"][j]), quantity: float(values[i, j])}
    return best
