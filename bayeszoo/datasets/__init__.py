"""Datasets that load offline.

``load(name, **options)`` returns a frozen :class:`Dataset`; ``names()`` lists what is available.
Every built-in dataset is either generated (with a seed) or read from a file shipped inside the
package, with its source, licence and preprocessing in ``meta``. Users wrap their own arrays in
``Dataset(X=..., y=..., X_test=..., y_test=..., name=..., meta={})``.
"""
from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from bayeszoo import checks

__all__ = ["Dataset", "load", "names", "register", "describe"]

TASKS = ("regression", "classification", "multiclass", "image")


@dataclass(frozen=True, eq=False)
class Dataset:
    """Training and (possibly empty) test arrays plus provenance.

    ``X`` is (n, d) float64, ``y`` is (n,); the test arrays follow the same layout and may have zero rows.
    ``meta`` holds at least ``task`` (one of ``regression``, ``classification``, ``multiclass``,
    ``image``) when known, and for built-in data ``source``, ``licence``, ``citation`` and ``preprocessing``.
    Construction checks shapes and finiteness and raises a ValueError naming the problem.
    """

    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    name: str = "data"
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        X = _as_matrix(self.X, "X")
        y = _as_vector(self.y, "y")
        if X.shape[0] == 0:
            raise ValueError(f"dataset {self.name!r} is empty: X has no rows")
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"dataset {self.name!r}: X has {X.shape[0]} rows but y has {y.shape[0]} entries")
        if self.X_test is None or (np.size(self.X_test) == 0):
            X_test = np.empty((0, X.shape[1]))
            y_test = np.empty((0,), dtype=y.dtype)
        else:
            X_test = _as_matrix(self.X_test, "X_test")
            if self.y_test is None:
                raise ValueError(f"dataset {self.name!r}: X_test given without y_test")
            y_test = _as_vector(self.y_test, "y_test")
            if X_test.shape[1] != X.shape[1]:
                raise ValueError(f"dataset {self.name!r}: X_test has {X_test.shape[1]} columns but X has {X.shape[1]}")
            if X_test.shape[0] != y_test.shape[0]:
                raise ValueError(f"dataset {self.name!r}: X_test has {X_test.shape[0]} rows but y_test has "
                                 f"{y_test.shape[0]} entries")
        task = self.meta.get("task")
        if task is not None and task not in TASKS:
            raise ValueError(f"dataset {self.name!r}: meta['task'] must be one of {TASKS}, got {task!r}")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "X_test", X_test)
        object.__setattr__(self, "y_test", y_test)
        object.__setattr__(self, "meta", dict(self.meta))

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    @property
    def has_test(self) -> bool:
        return self.X_test.shape[0] > 0

    @property
    def task(self) -> str | None:
        return self.meta.get("task")

    def fingerprint(self) -> str:
        """A digest of the name, the task and every array: equal for equal data, different after any change."""
        digest = hashlib.sha1(f"{self.name}|{self.task}".encode())
        for array in (self.X, self.y, self.X_test, self.y_test):
            array = np.ascontiguousarray(array)
            digest.update(f"{array.dtype}{array.shape}".encode())
            digest.update(array.tobytes())
        return digest.hexdigest()

    def subset(self, train_idx, test_idx=None, name: str | None = None) -> "Dataset":
        """A new dataset whose training (and test) rows are rows of this one's training set."""
        train_idx = np.asarray(train_idx)
        if test_idx is None:
            X_t, y_t = None, None
        else:
            test_idx = np.asarray(test_idx)
            X_t, y_t = self.X[test_idx], self.y[test_idx]
        return Dataset(self.X[train_idx], self.y[train_idx], X_t, y_t, name or self.name, dict(self.meta))

    def __repr__(self) -> str:
        return (f"Dataset(name={self.name!r}, task={self.task!r}, n={self.n}, d={self.d}, "
                f"n_test={self.X_test.shape[0]})")


def _as_matrix(a, what: str) -> np.ndarray:
    try:
        a = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numeric: {exc}") from exc
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{what} must be 2-D (n, d), got shape {a.shape}")
    _check_finite(a, what)
    return a


def _as_vector(a, what: str) -> np.ndarray:
    try:
        a = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numeric: {exc}") from exc
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise ValueError(f"{what} must be 1-D (n,), got shape {a.shape}")
    _check_finite(a, what)
    return a


def _check_finite(a: np.ndarray, what: str) -> None:
    if np.isnan(a).any():
        raise ValueError(f"{what} contains NaN ({int(np.isnan(a).sum())} entries)")
    if np.isinf(a).any():
        raise ValueError(f"{what} contains inf ({int(np.isinf(a).sum())} entries)")


# ---------------------------------------------------------------------------------------------- registry
_LOADERS: dict[str, Callable[..., Dataset]] = {}


def register(name: str):
    """Decorator registering a loader ``fn(**options) -> Dataset`` under ``name``."""

    def deco(fn):
        _LOADERS[name] = fn
        return fn

    return deco


def _ensure_loaded():
    from bayeszoo.datasets import synthetic, real, gpc_data  # noqa: F401  (importing registers the loaders)
    from bayeszoo.datasets import bid_data  # noqa: F401
    from bayeszoo.datasets import pmkl_data  # noqa: F401
    from bayeszoo.datasets import imagervm_data  # noqa: F401
    from bayeszoo.datasets import slm_data  # noqa: F401


def names() -> list[str]:
    """Names accepted by :func:`load`."""
    _ensure_loaded()
    return sorted(_LOADERS)


def load(name: str, **options) -> Dataset:
    """Load a built-in dataset by name (offline). Options are passed to its loader (e.g. ``seed``)."""
    _ensure_loaded()
    if not isinstance(name, str) or name not in _LOADERS:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(names())}")
    loader = _LOADERS[name]
    accepted = inspect.signature(loader).parameters
    unknown = [k for k in options if k not in accepted]
    if unknown:
        raise ValueError(f"dataset {name!r} does not take option(s) {unknown}; it takes {list(accepted)}")
    for key, value in options.items():
        _check_like_default(f"dataset {name!r}", key, value, accepted[key].default)
    return loader(**options)


def _check_like_default(owner: str, key: str, value, default) -> None:
    """A loader option must have the type of its default (an int where the default is an int, ...); a seed is a
    non-negative integer. Ranges are the loader's own to check."""
    if key == "seed":
        checks.non_negative(owner, key, value, integer=True)
    elif isinstance(default, bool):
        checks.flag(owner, key, value)
    elif isinstance(default, int):
        checks.number(owner, key, value, integer=True)
    elif isinstance(default, float):
        checks.number(owner, key, value)
    elif isinstance(default, str) and not isinstance(value, str):
        raise ValueError(f"{owner}: {key} must be a string, got {value!r}")


def describe(name: str) -> str:
    """One line on where a dataset comes from."""
    _ensure_loaded()
    doc = (_LOADERS[name].__doc__ or "").strip().split("\n")[0]
    return doc
