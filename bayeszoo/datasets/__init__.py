"""Datasets that load offline.

``load(name, **options)`` returns a frozen :class:`Dataset`; ``names()`` lists what is available.
Every built-in dataset is either generated (with a seed) or read from a file shipped inside the
package, with its source, licence and preprocessing in ``meta``. Users wrap their own arrays in
``Dataset(X=..., y=..., X_test=..., y_test=..., name=..., meta={})``.
"""
from __future__ import annotations

import functools
import hashlib
import html
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from bayeszoo import checks

__all__ = ["Dataset", "load", "names", "register", "describe", "constraints", "loader"]

TASKS = ("regression", "classification", "multiclass", "image")


@dataclass(frozen=True, eq=False)
class Dataset:
    """Training and (possibly empty) test arrays plus provenance.

    ``X`` is (n, d) float64, ``y`` is (n,); the test arrays follow the same layout and may have zero rows.
    ``meta`` holds at least ``task`` (one of ``regression``, ``classification``, ``multiclass``,
    ``image``) when known, and for built-in data ``source``, ``licence``, ``citation`` and ``preprocessing``.
    Construction checks shapes and finiteness and raises a ValueError naming the problem.

    A Dataset owns its arrays: it keeps read-only float64 copies (of the arrays in ``meta`` too), so writing into
    the caller's arrays afterwards changes nothing, and writing into ``data.X`` raises. Real numbers only: complex,
    masked, date / time, string and object arrays are refused, as are sparse matrices; pandas objects with
    numeric or boolean columns are taken as their values (a DataFrame's column names become
    ``meta["feature_names"]``). ``meta=None`` is an empty ``meta``.

    Class names as labels (``y`` and ``y_test`` of strings, or a pandas categorical) become the classes
    0 .. K-1 in sorted order, the names recorded as ``meta["classes"]`` (``{0: "no", 1: "yes"}``) and the task, when
    not given, as ``classification`` (two classes or fewer) or ``multiclass``.
    """

    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    name: str = "data"
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a dataset's name must be a non-empty string, got {self.name!r}")
        meta = _checked_meta(self.name, self.meta)
        names = getattr(self.X, "columns", None)   # a DataFrame's column names become meta["feature_names"]
        if names is not None and "feature_names" not in meta:
            meta["feature_names"] = [str(c) for c in names]
        whose = f"dataset {self.name!r}:"
        y, y_test = _encoded_classes(self.y, self.y_test, whose, meta)   # class names -> 0 .. K-1
        X = _as_matrix(self.X, f"{whose} X")
        y = _as_vector(y, f"{whose} y")
        if X.shape[0] == 0:
            raise ValueError(f"dataset {self.name!r} is empty: X has no rows; give at least one row of data")
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"dataset {self.name!r}: X has {X.shape[0]} rows but y has {y.shape[0]} entries")
        X_test = None if self.X_test is None else _as_matrix(self.X_test, f"{whose} X_test")
        y_test = None if y_test is None else _as_vector(y_test, f"{whose} y_test")
        if X_test is None or X_test.size == 0:
            if y_test is not None and y_test.size:
                raise ValueError(f"dataset {self.name!r}: y_test given without X_test")
            X_test = np.empty((0, X.shape[1]))
            y_test = np.empty((0,), dtype=y.dtype)
        else:
            if y_test is None:
                raise ValueError(f"dataset {self.name!r}: X_test given without y_test")
            if X_test.shape[1] != X.shape[1]:
                raise ValueError(f"dataset {self.name!r}: X_test has {X_test.shape[1]} columns but X has {X.shape[1]}")
            if X_test.shape[0] != y_test.shape[0]:
                raise ValueError(f"dataset {self.name!r}: X_test has {X_test.shape[0]} rows but y_test has "
                                 f"{y_test.shape[0]} entries")
        task = meta.get("task")
        if task is not None and (not isinstance(task, str) or task not in TASKS):
            raise ValueError(f"dataset {self.name!r}: meta['task'] must be one of {TASKS}, got {task!r}")
        for name, array in (("X", X), ("y", y), ("X_test", X_test), ("y_test", y_test)):
            array.flags.writeable = False
            object.__setattr__(self, name, array)
        object.__setattr__(self, "meta", meta)

    def __setstate__(self, state: dict) -> None:
        """Unpickling (a Dask worker, ``copy.deepcopy``) gives writeable arrays back: they are read-only again."""
        self.__dict__.update(state)
        for array in (self.X, self.y, self.X_test, self.y_test,
                      *(v for v in self.meta.values() if isinstance(v, np.ndarray))):
            array.flags.writeable = False

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
        """A digest of the name, the task and every array: equal for equal data, different after any change.
        Hashed once: the arrays are read-only copies; only ``meta``'s task can change afterwards (every fit records
        the fingerprint, and hashing a large X costs more than a small fit)."""
        head = f"{self.name}|{self.task}"
        cached = self.__dict__.get("_fingerprint")
        if cached is not None and cached[0] == head:
            return cached[1]
        digest = hashlib.sha1(head.encode())
        for array in (self.X, self.y, self.X_test, self.y_test):
            array = np.ascontiguousarray(array)
            digest.update(f"{array.dtype}{array.shape}".encode())
            digest.update(array.tobytes())
        object.__setattr__(self, "_fingerprint", (head, digest.hexdigest()))
        return self._fingerprint[1]

    def content_fingerprint(self) -> str:
        """A digest of what a posterior depends on: the task, X and y; not the name nor the test set (a reference
        is matched to a comparison by it, so that the same data under another name are the same problem)."""
        digest = hashlib.sha1(f"{self.task}".encode())
        for array in (self.X, self.y):
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

    def _repr_html_(self) -> str:
        """The dataset in a notebook: name, task, array shapes, class counts (classification) and provenance."""
        return _dataset_html(self)


# ------------------------------------------------------------------------------------- notebook display
# Scoped to the dataset's own block so that a notebook's or a documentation page's styles are left alone; the
# block is a light card so that it stays readable under a dark theme.
_HTML_CSS = """
div.bz-dataset{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;font-size:13px;line-height:1.4;
 color:#222;background:#fff;border:1px solid #ddd;border-radius:4px;padding:.5em .8em;margin:.3em 0;
 max-width:100%;overflow-x:auto}
div.bz-dataset table{border-collapse:collapse;margin:.4em 0;font-size:12px;color:#222}
div.bz-dataset th,div.bz-dataset td{border:1px solid #ddd;padding:.15em .5em;text-align:left;background:#fff;
 color:#222;vertical-align:top}
div.bz-dataset th{background:#f6f6f6} div.bz-dataset td.num{text-align:right}
div.bz-dataset code{background:#f4f4f4;border-radius:3px;padding:0 .25em;color:#222}
div.bz-dataset p{margin:.3em 0} div.bz-dataset summary{cursor:pointer;color:#555}
"""
_PROVENANCE = ("source", "licence", "license", "citation", "preprocessing", "split")
_CLASS_TASKS = ("classification", "multiclass")


def _meta_text(value, limit: int = 100) -> str:
    """A meta value in a few words: an array's shape and dtype, a long list's length and start."""
    if isinstance(value, np.ndarray):
        return f"array {' × '.join(map(str, value.shape))} ({value.dtype})"
    text = str(value)
    if len(text) <= limit:
        return text
    count = f"{len(value)} items: " if isinstance(value, (list, tuple, dict)) else ""
    return f"{count}{text[:limit]}…"


def _class_names(meta: dict) -> dict[float, str]:
    """``meta["classes"]`` keyed by the label as a float; after a JSON round trip (a saved comparison) its keys are
    strings."""
    out = {}
    for key, name in (meta.get("classes") if isinstance(meta.get("classes"), dict) else {}).items():
        try:
            out[float(key)] = name
        except (TypeError, ValueError):
            continue
    return out


def _label(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def classes_text(meta: dict) -> str:
    """``meta["classes"]`` as ``"0 = no, 1 = yes"`` (empty when there is none): how the labels were numbered."""
    return ", ".join(f"{_label(code)} = {name}" for code, name in sorted(_class_names(meta).items()))


# ------------------------------------------------------------------------------------------ class labels
def _class_labels(a) -> np.ndarray | None:
    """``a`` as an object array when it holds class names (strings, bytes, a pandas categorical), else None:
    numbers and booleans are left to :func:`_real`, and so is what it refuses."""
    if isinstance(a, np.ma.MaskedArray) or (hasattr(a, "toarray") and hasattr(a, "nnz")):
        return None
    if isinstance(a, pd.DataFrame) and a.shape[1] == 1:
        a = a.iloc[:, 0]
    if isinstance(a, pd.Categorical):
        a = pd.Series(a)
    if isinstance(a, pd.Series):
        if isinstance(a.dtype, pd.CategoricalDtype):   # categories are names whatever their type
            return a.astype(object).to_numpy()
        a = a.to_numpy()
    try:
        a = np.asarray(a)
    except (TypeError, ValueError):
        return None
    if a.dtype.kind in "US":
        return a.astype(object)
    if a.dtype.kind == "O" and any(isinstance(v, (str, bytes)) for v in a.ravel()):
        if all(isinstance(v, (str, bytes)) or _is_missing(v) for v in a.ravel()):
            return a
    return None


def _is_missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def _class_name(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (float, np.floating)):
        return _label(value)
    return str(value)


def _encoded_classes(y, y_test, whose: str, meta: dict):
    """(y, y_test) with class names replaced by their codes 0 .. K-1, the labels of both sorted together;
    ``meta`` gets ``classes`` and, when not given, the task. Numeric labels are returned as they are."""
    labels = _class_labels(y)
    test_labels = None if y_test is None else _class_labels(y_test)
    if labels is None and test_labels is None:
        return y, y_test
    if labels is None or (test_labels is None and y_test is not None and np.size(y_test)):
        names_in, numbers_in = ("y_test", "y") if labels is None else ("y", "y_test")
        raise ValueError(f"{whose} {names_in} holds class names but {numbers_in} holds numbers; give both as names "
                         f"(or both as numbers)")
    parts = {"y": labels} if test_labels is None else {"y": labels, "y_test": test_labels}
    for what, values in parts.items():
        if values.ndim == 2 and values.shape[1] == 1:
            values = parts[what] = values[:, 0]
        if values.ndim != 1:
            raise ValueError(f"{whose} {what} must be 1-D (n,), got shape {values.shape}")
        missing = np.flatnonzero([_is_missing(v) for v in values])
        if missing.size:
            raise ValueError(f"{whose} {what} has {missing.size} missing label(s) (the first at row {missing[0]}); "
                             f"drop those rows or fill them in")
    pooled = np.concatenate(list(parts.values()))
    try:
        classes, codes = np.unique(pooled, return_inverse=True)
    except TypeError:   # names of mixed types (numbers and strings in one categorical) sort as text
        classes, codes = np.unique(np.array([_class_name(v) for v in pooled], dtype=object), return_inverse=True)
    names = {code: _class_name(value) for code, value in enumerate(classes)}
    if "classes" in meta and _class_names(meta) != {float(code): name for code, name in names.items()}:
        raise ValueError(f"{whose} meta['classes'] is {meta['classes']!r} but the labels sort into {names}; leave "
                         f"meta['classes'] out: it is made from the labels")
    task = meta.get("task")
    if task in ("regression", "image"):
        raise ValueError(f"{whose} y holds class names ({', '.join(list(names.values())[:5])}) but meta['task'] is "
                         f"{task!r}; give numbers for a {task} problem, or leave the task out")
    meta["classes"] = names
    if task is None:
        meta["task"] = "classification" if len(names) <= 2 else "multiclass"
    codes = codes.astype(np.float64)
    n = parts["y"].shape[0]
    return codes[:n], (codes[n:] if test_labels is not None else y_test)


def _dataset_html(data: Dataset) -> str:
    esc = html.escape
    meta = data.meta
    shapes = "".join(f"<tr><th><code>{name}</code></th><td class=\"num\">{esc(str(array.shape))}</td></tr>"
                     for name, array in (("X", data.X), ("y", data.y), ("X_test", data.X_test),
                                         ("y_test", data.y_test)))
    task = esc(str(data.task or "not given"))
    out = [f'<div class="bz-dataset"><style>{_HTML_CSS}</style>',
           f"<p><strong>Dataset</strong> <code>{esc(str(data.name))}</code> · task: {task}</p>",
           f'<table class="shapes"><thead><tr><th>array</th><th>shape</th></tr></thead><tbody>{shapes}</tbody></table>']
    if data.task in _CLASS_TASKS:
        names = _class_names(meta)
        labels = np.union1d(data.y, data.y_test)
        train = {v: int(c) for v, c in zip(*np.unique(data.y, return_counts=True))}
        test = {v: int(c) for v, c in zip(*np.unique(data.y_test, return_counts=True))}
        rows = "".join(f'<tr><td class="num">{esc(_label(v))}</td><td>{esc(str(names.get(float(v), "")))}</td>'
                       f'<td class="num">{train.get(v, 0)}</td><td class="num">{test.get(v, 0)}</td></tr>'
                       for v in labels)
        out.append(f'<table class="classes"><thead><tr><th>class</th><th>name</th><th>training</th>'
                   f'<th>test</th></tr></thead><tbody>{rows}</tbody></table>')
    provenance = [(k, meta[k]) for k in _PROVENANCE if meta.get(k) not in (None, "")]
    if provenance:
        rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(str(v))}</td></tr>" for k, v in provenance)
        out.append(f'<table class="provenance">{rows}</table>')
    others = {k: v for k, v in meta.items() if k not in _PROVENANCE and k not in ("task", "classes")}
    if others:
        rows = "".join(f"<tr><th>{esc(str(k))}</th><td>{esc(_meta_text(v))}</td></tr>" for k, v in others.items())
        out.append(f"<details><summary>more: {esc(', '.join(map(str, others)))}</summary>"
                   f'<table class="meta">{rows}</table></details>')
    out.append("</div>")
    return "".join(out)


def _checked_meta(name: str, meta) -> dict:
    """A copy of ``meta`` (None: empty): a dict keyed by strings (it is stored as JSON with a comparison); its
    arrays are copied and made read-only like the data's."""
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise ValueError(f"dataset {name!r}: meta must be a dict (or None), got {type(meta).__name__}")
    keys = [k for k in meta if not isinstance(k, str)]
    if keys:
        raise ValueError(f"dataset {name!r}: meta must be keyed by strings, got the key(s) {keys[:5]}")
    out = dict(meta)
    for key, value in out.items():
        if isinstance(value, np.ndarray):
            value = value.copy()
            value.flags.writeable = False
            out[key] = value
    return out


#: what each refused kind of array holds, and what to do instead (keys: NumPy's dtype.kind)
_NOT_REAL = {
    "c": ("complex numbers", "give the real and imaginary parts as separate columns"),
    "M": ("dates or times", "convert them to numbers first (e.g. days since a reference date)"),
    "m": ("time differences", "convert them to numbers first (e.g. seconds)"),
    "O": ("Python objects", "convert them to numbers first (None, strings and mixed types make an object array)"),
    "U": ("strings", "encode them as numbers first"),
    "S": ("bytes", "encode them as numbers first"),
    "V": ("structured records", "pass the numeric fields as columns"),
}


def _real(a, what: str) -> np.ndarray:
    """A new float64 array of the real numbers in ``a`` (array, list, pandas object); a ValueError naming what is
    refused (complex, masked, dates, strings, objects, sparse) and what to do instead."""
    if isinstance(a, np.ma.MaskedArray):
        raise ValueError(f"{what} is a masked array, whose mask a Dataset cannot keep: drop the masked rows "
                         f"(or fill them) and pass a plain array")
    if hasattr(a, "toarray") and hasattr(a, "nnz"):
        raise ValueError(f"{what} is a sparse matrix; pass a dense array (its .toarray())")
    if isinstance(a, (pd.DataFrame, pd.Series)):
        if len(a) == 0:   # no rows (a CSV file's header only): its columns' types say nothing
            return np.empty(a.shape, dtype=np.float64)
        items = a.dtypes.items() if isinstance(a, pd.DataFrame) else [(a.name, a.dtype)]
        bad = [f"{column!r} ({dtype})" for column, dtype in items
               if not (pd.api.types.is_bool_dtype(dtype) or (pd.api.types.is_numeric_dtype(dtype)
                                                             and not pd.api.types.is_complex_dtype(dtype)))]
        if bad:
            raise ValueError(f"{what} has columns that are not real numbers or booleans: {', '.join(bad[:5])}; "
                             f"convert or drop them first")
        return np.array(a.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
    try:
        raw = np.asarray(a)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be a rectangular numeric array: {exc}") from None
    if raw.dtype.kind not in "biuf":
        noun, advice = _NOT_REAL.get(raw.dtype.kind, ("no numbers", "convert it to numbers first"))
        raise ValueError(f"{what} holds {noun} (dtype {raw.dtype}); a Dataset takes real numeric values: {advice}")
    return np.array(raw, dtype=np.float64)   # always a copy: the caller's array stays the caller's


def _as_matrix(a, what: str) -> np.ndarray:
    a = _real(a, what)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{what} must be 2-D (n, d), got shape {a.shape}")
    _check_finite(a, what)
    return a


def _as_vector(a, what: str) -> np.ndarray:
    a = _real(a, what)
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


def register(name: str, constraints: dict | None = None):
    """Decorator registering a loader ``fn(**options) -> Dataset`` under ``name``. ``constraints`` declare what its
    options may be, in the vocabulary of :mod:`bayeszoo.checks` (e.g. ``{"n": checks.Interval(int, 1, 1000,
    "both")}``); an option left out is declared by its default (:func:`constraints`). The registered loader checks
    its options against them before it runs, however it is called, and passes them on as the constraints convert
    them; what relates an option to the data (a crop that fits the image) is the loader's own to check."""

    def deco(fn):
        signature = inspect.signature(fn)
        declared = {key: constraints[key] if key in (constraints or {}) else _constraint_like(key, p.default)
                    for key, p in signature.parameters.items()}
        declared = {key: c for key, c in declared.items() if c is not None}
        unknown = set(constraints or {}) - set(signature.parameters)
        if unknown:
            raise TypeError(f"dataset {name!r}: constraints for option(s) {sorted(unknown)} the loader does not take")

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            given = signature.bind(*args, **kwargs).arguments
            given.update(checks.validate(f"dataset {name!r}", declared,
                                         {k: v for k, v in given.items() if k in declared}))
            return fn(**given)

        checked.constraints = declared
        _LOADERS[name] = checked
        return checked

    return deco


def loader(name: str) -> Callable[..., Dataset]:
    """The registered loader of dataset ``name`` (what :func:`load` calls; it checks its declared options first,
    and ``__wrapped__`` is the function as written)."""
    _ensure_loaded()
    if name not in _LOADERS:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(names())}")
    return _LOADERS[name]


def constraints(name: str) -> dict:
    """What each option of dataset ``name`` may be (the declarations of :func:`register`), by option name; an
    option whose default says nothing (None) and that declares nothing is the loader's own to check."""
    return dict(loader(name).constraints)


def _ensure_loaded():
    """Import every module of this package (each registers its loaders with :func:`register`): a family's loaders
    are found by their module alone (its ``Family.datasets`` names them), with no list to edit."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__, f"{__name__}."):
        importlib.import_module(info.name)


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
    return loader(**options)   # which checks the options against its declaration first


#: the split and standardisation options every real-data loader shares (and the generated data sets of the pMKL
#: experiments), and every loader's seed: ``seed`` an integer >= 0, ``test_fraction`` None or in (0, 1),
#: ``standardize`` a flag
SPLIT_OPTIONS = {"seed": checks.NON_NEGATIVE_INT, "test_fraction": [None, checks.PROBABILITY],
                 "standardize": checks.Flag()}


def _constraint_like(key: str, default):
    """What a loader option that declares nothing may be: a shared option as :data:`SPLIT_OPTIONS` says, else read
    off its default (an int where the default is an int, ...), or None where the default says nothing (None)."""
    if key in SPLIT_OPTIONS:
        return SPLIT_OPTIONS[key]
    for kind, constraint in ((bool, checks.Flag()), (int, checks.Interval(int)), (float, checks.Interval(float)),
                             (str, checks.Text())):
        if isinstance(default, kind):   # bool before int: True is an int
            return constraint
    return None


def describe(name: str) -> str:
    """One line on where a dataset comes from."""
    _ensure_loaded()
    doc = (_LOADERS[name].__doc__ or "").strip().split("\n")[0]
    return doc
