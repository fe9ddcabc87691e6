"""The real-data protocol of Tzikas, Likas, Galatsanos (2009, §IV-B) and Tzikas PhD §6.4.2.

Outer ``folds``-fold cross-validation (10 in the sources); inside each training part, an inner
``inner_folds``-fold cross-validation (9: train on 8 folds, validate on 1) selects the RVM width h on the grid
0.5, 1, ..., 10 or the aRVM sparsity c in {1, log(N)/2, log(N)}; the selected value is then refitted on the
whole training part and scored on the test fold. Reported per outer fold: the test error (MSE for regression,
fraction misclassified for classification), the number of relevance vectors, and seconds (the selection and
the final fit).

Choices the sources leave open, made here and written down: inputs are standardised with the mean and sd of
each training part (the widths h = 0.5..10 only make sense on a common scale); regression targets are
centred and scaled the same way and the MSE is reported in the original units; the selected model is refitted
on all training folds (the sources do not say whether it is); folds are random with the given seed.
"""
from __future__ import annotations

import time

import numpy as np
from tqdm.auto import tqdm

import bayeszoo as bz
from bayeszoo.datasets import Dataset

DRAWS = 200  # draws of w per fit: the predictive mean averages over them, so their Monte-Carlo error must be small
WIDTH_GRID = tuple(np.round(np.arange(0.5, 10.0 + 1e-9, 0.5), 10))
SPARSITY_GRID = (1.0, "bic", "ric")


def _standardise(train: Dataset, test_X, test_y, regression: bool):
    mx, sx = train.X.mean(0), train.X.std(0)
    sx = np.where(sx > 0, sx, 1.0)
    my, sy = (float(train.y.mean()), float(train.y.std()) or 1.0) if regression else (0.0, 1.0)
    tr = Dataset((train.X - mx) / sx, (train.y - my) / sy, (test_X - mx) / sx, (test_y - my) / sy,
                 name=train.name, meta=train.meta)
    return tr, sy**2


def _fit_score(model, backend, train: Dataset, options: dict, seed: int):
    """Fit on ``train`` and score on its test part: (error in standardised units, relevance vectors, seconds)."""
    t0 = time.perf_counter()
    result = bz.fit(model, train, backend, draws=DRAWS, chains=1, seed=seed, progress=False, **options)
    seconds = time.perf_counter() - t0
    score = model.score(result, train)
    error = score["error_rate"] if "error_rate" in score else score["mse"]
    return error, score["n_relevant"], seconds


def nested_cv(make_model, grid, data: Dataset, *, backend: str, folds: int = 10, inner_folds: int = 9,
              options: dict | None = None, seed: int = 0, progress: bool = True) -> dict:
    """Nested cross-validation of ``make_model(value)`` over ``grid`` (the sources' protocol).

    ``make_model``: value -> model (e.g. ``lambda h: RVM(width=h)``); ``backend``: the backend that fits it.
    Returns per-outer-fold arrays ``error``, ``n_relevant``, ``selected``, ``seconds`` (selection + final fit)
    and ``fit_seconds`` (the final fit alone), plus the per-value mean inner validation errors
    ``inner_error`` (folds x len(grid)).
    """
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a bayeszoo.datasets.Dataset, got {type(data).__name__}")
    grid = list(grid)
    if not grid:
        raise ValueError("nested_cv needs a non-empty grid of parameter values")
    for name, k, minimum in (("folds", folds, 2), ("inner_folds", inner_folds, 2)):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {k!r}")
    if folds * inner_folds > 2 * data.n:
        raise ValueError(f"{folds} x {inner_folds} folds is too many for {data.n} points")
    options = dict(options or {})
    models = [make_model(v) for v in grid]
    for m in models:
        m.validate(data)
    regression = not models[0].is_classifier
    rng = np.random.default_rng(seed)
    outer = np.array_split(rng.permutation(data.n), folds)
    out = {k: [] for k in ("error", "n_relevant", "selected", "seconds", "fit_seconds", "inner_error")}
    total = folds * (inner_folds * len(grid) + 1)
    with tqdm(total=total, desc=f"nested cv {backend}", disable=not progress, leave=False, dynamic_ncols=True) as bar:
        for k, test_idx in enumerate(outer):
            train_idx = np.setdiff1d(np.arange(data.n), test_idx)
            t0 = time.perf_counter()
            inner = np.array_split(rng.permutation(train_idx), inner_folds)
            inner_err = np.zeros(len(grid))
            for j, val_idx in enumerate(inner):
                fit_idx = np.setdiff1d(train_idx, val_idx)
                part = data.subset(fit_idx, val_idx, name=f"{data.name}[{k}.{j}]")
                split, _ = _standardise(part, part.X_test, part.y_test, regression)
                for g, model in enumerate(models):
                    inner_err[g] += _fit_score(model, backend, split, options, seed + 100 * k + j)[0] / inner_folds
                    bar.update()
            best = int(np.argmin(inner_err))
            part = data.subset(train_idx, test_idx, name=f"{data.name}[{k}]")
            split, scale = _standardise(part, part.X_test, part.y_test, regression)
            err, n_rv, fit_s = _fit_score(models[best], backend, split, options, seed + 100 * k)
            bar.update()
            out["error"].append(err * scale if regression else err)
            out["n_relevant"].append(n_rv)
            out["selected"].append(grid[best])
            out["seconds"].append(time.perf_counter() - t0)
            out["fit_seconds"].append(fit_s)
            out["inner_error"].append(inner_err * (scale if regression else 1.0))
    return {k: np.asarray(v, dtype=object if k == "selected" else float) for k, v in out.items()}


def rvm_versus_arvm(data: Dataset, *, folds: int = 10, inner_folds: int = 9, widths=WIDTH_GRID,
                    sparsities=SPARSITY_GRID, rvm_backend: str = "fast", arvm_options: dict | None = None,
                    arvm_model: dict | None = None, seed: int = 0, progress: bool = True) -> dict:
    """The sources' comparison on one data set: RVM (inner-CV width) against aRVM (inner-CV c).

    Returns ``{"rvm": nested_cv(...), "arvm": nested_cv(...)}``; both use the same outer and inner folds.
    """
    task = data.task if data.task in ("regression", "classification") else "regression"
    arvm_model = dict(arvm_model or {})
    res = {"rvm": nested_cv(lambda h: bz.models.RVM(task=task, width=float(h)), widths, data, backend=rvm_backend,
                            folds=folds, inner_folds=inner_folds, seed=seed, progress=progress),
           "arvm": nested_cv(lambda c: bz.models.ARVM(task=task, sparsity=c, **arvm_model), sparsities, data,
                             backend="arvm", folds=folds, inner_folds=inner_folds, options=arvm_options,
                             seed=seed, progress=progress)}
    return res
