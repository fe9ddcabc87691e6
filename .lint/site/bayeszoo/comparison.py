"""The :class:`Comparison` type: a grid of fits of one model on one dataset, against a reference."""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayeszoo import catalogue
from bayeszoo.catalogue import Reference
from bayeszoo.datasets import Dataset
from bayeszoo.results import Fit, jsonable, load_fit

REFERENCE_FILE = "reference.nc"   # a saved comparison's reference when it is neither in the catalogue nor a cell


@dataclass
class Comparison:
    """A grid of fits of one model on one dataset, as :func:`bayeszoo.compare` returns it.

    Attributes
    ----------
    model : bayeszoo.models.Model
        The model every cell fitted.
    data : bayeszoo.datasets.Dataset
        The data every cell fitted.
    fits : dict of str to Fit
        The fits by cell label (the backend name).
    errors : dict of str to str
        The error of each cell that failed.
    reference : Reference or None
        The :class:`~bayeszoo.catalogue.Reference` the errors are measured against: its ``name`` (a cell's label,
        ``"catalogue: <key>"``, ...), moments, draws for the plots (``reference.fit``) and validation (``trusted``,
        ``problems``). ``bz.compare`` resolves it once, before the grid runs.
    order : list of str
        The cells in the order of the grid.
    notes : dict of str to str
        Per cell: ``"resumed"``, ``"refitted: ..."``, ``"not saved: ..."``.
    """

    model: object
    data: Dataset
    fits: dict[str, Fit]
    errors: dict[str, str] = field(default_factory=dict)
    reference: Reference | None = None
    order: list[str] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)   # per cell: "resumed", "refitted: ...", "not saved: ..."

    def __post_init__(self):
        if self.reference is not None and not isinstance(self.reference, Reference):
            raise ValueError(f"Comparison.reference must be a bayeszoo.catalogue.Reference or None; got "
                             f"{type(self.reference).__name__} (bz.compare turns a backend name, a Fit or a file "
                             f"into one)")

    @property
    def reference_cell(self) -> str | None:
        """The label of the cell whose run is the reference (zero error by construction), or None."""
        name = getattr(self.reference, "name", None)
        return name if name in self.fits else None

    def table(self) -> pd.DataFrame:
        """One row per backend: kind, seconds, ESS, ESS/s, R-hat, divergences, errors vs reference, metrics."""
        # computed once (ESS over every component and the scores are the costly part); save() and the
        # report both ask for it
        if getattr(self, "_table", None) is None:
            self._table = self._compute_table()
        return self._table.copy()

    def _compute_table(self) -> pd.DataFrame:
        from bayeszoo.diagnostics.metrics import TABLE_COLUMNS, table_row

        rows = []
        for label in self.order or list(self.fits) + list(self.errors):
            if label in self.fits:
                try:
                    rows.append(table_row(self.model, self.data, label, self.fits[label], self.reference))
                except Exception as exc:  # a metric that cannot be computed is reported, not raised
                    rows.append({"backend": label, "kind": self.fits[label].kind,
                                 "error": f"scoring failed: {type(exc).__name__}: {exc}"})
            elif label in self.errors:
                rows.append({"backend": label, "error": self.errors[label].strip().split("\n")[0]})
        df = pd.DataFrame(rows)
        first = [c for c in TABLE_COLUMNS if c in df.columns]
        rest = [c for c in df.columns if c not in first and c != "error"]
        if "error" not in df.columns:
            df["error"] = ""
        df["error"] = df["error"].fillna("")
        df["note"] = [self.notes.get(label, "") for label in df["backend"]]
        return df[first + rest + ["note", "error"]]

    def verdict(self) -> str:
        """Two or three plain sentences read off the table: which backend reaches the target accuracy first and
        how many times faster than the best generic sampler, which never reach it and how far off they stay,
        which MCMC fits are not converged (``diagnostics.metrics.verdict``)."""
        from bayeszoo.diagnostics.metrics import verdict

        reference = self.reference
        return " ".join(verdict(self.table(), self.fits, self.reference_cell, getattr(reference, "trusted", None),
                                has_reference=reference is not None))

    def report(self, path: str | os.PathLike) -> str:
        """Write the self-contained HTML report to ``path``."""
        from bayeszoo.diagnostics.report import write_report

        return write_report(self, os.fspath(path))

    def _repr_html_(self) -> str:
        """The comparison in a notebook: the reference banner, the flagged table and the speed figure, as in the
        report."""
        from bayeszoo.diagnostics.display import comparison_html

        return comparison_html(self)

    def plot(self, kind: str, backend: str | None = None, components=None):
        """One of the report's figures as a :class:`matplotlib.figure.Figure`.

        Parameters
        ----------
        kind : str
            ``"accuracy"`` (accuracy against wall time and the ranking), ``"ess_per_second"``, ``"family"`` (the
            family's own picture), ``"objective"`` (ELBO / log-evidence traces), ``"trace"``, ``"rank"`` or
            ``"marginals"`` (one backend's, over the reference's).
        backend : str, optional
            The fit that ``"trace"``, ``"rank"`` and ``"marginals"`` draw; by default the first one they apply to.
        components : list of (variable, {dim: coordinate}), optional
            The components those three show; by default the report's (scalars and the largest weights).

        Raises
        ------
        ValueError
            An unknown ``kind`` (the message lists the names) or ``backend``, or a figure with nothing to draw.
        """
        from bayeszoo.diagnostics.display import figure

        return figure(self, kind, backend=backend, components=components)

    def save(self, directory: str | os.PathLike) -> str:
        """Write ``fits/<backend>.nc``, ``data.npz``, ``comparison.json``, ``table.csv`` and ``report.html``."""
        directory = os.fspath(directory)
        os.makedirs(os.path.join(directory, "fits"), exist_ok=True)

        for label, result in self.fits.items():
            path = os.path.join(directory, "fits", fit_filename(label))
            if not os.path.exists(path):
                result.save(path)
        np.savez_compressed(os.path.join(directory, "data.npz"), X=self.data.X, y=self.data.y,
                            X_test=self.data.X_test, y_test=self.data.y_test)
        meta = {"model_spec": self.model.spec(), "data_name": self.data.name, "data_meta": _jsonable(self.data.meta),
                "reference": getattr(self.reference, "name", None),
                "reference_source": self._save_reference(directory),
                "order": self.order or list(self.fits),
                "files": {label: f"fits/{fit_filename(label)}" for label in self.fits}, "errors": self.errors,
                "notes": self.notes}
        with open(os.path.join(directory, "comparison.json"), "w") as fh:
            json.dump(meta, fh, indent=2)
        self.table().to_csv(os.path.join(directory, "table.csv"), index=False)
        self.report(os.path.join(directory, "report.html"))
        return directory

    def _save_reference(self, directory: str) -> dict | None:
        """How :func:`load_comparison` finds the reference again: a catalogue key, a cell, or a file written here."""
        ref = self.reference
        if ref is None:
            return None
        key = ref.provenance.get("key")
        if ref.provenance.get("source") == "catalogue" and key in catalogue.PROBLEMS:
            return {"catalogue": key}
        if self.reference_cell is not None:
            return {"cell": self.reference_cell}
        ref.save(os.path.join(directory, REFERENCE_FILE))
        return {"file": REFERENCE_FILE}

    def __repr__(self) -> str:
        return (f"Comparison(model={type(self.model).__name__}, data={self.data.name!r}, "
                f"fits={list(self.fits)}, errors={list(self.errors)}, "
                f"reference={getattr(self.reference, 'name', None)!r})")


def load_comparison(directory: str | os.PathLike) -> Comparison:
    """Rebuild a Comparison from a folder written by :meth:`Comparison.save`."""
    from bayeszoo.models import from_spec

    directory = os.fspath(directory)
    meta_path = os.path.join(directory, "comparison.json")
    if not os.path.exists(meta_path):
        raise ValueError(f"{directory!r} holds no comparison.json (not a saved comparison)")
    with open(meta_path) as fh:
        meta = json.load(fh)
    arrays = np.load(os.path.join(directory, "data.npz"))
    data = Dataset(arrays["X"], arrays["y"], arrays["X_test"], arrays["y_test"], name=meta["data_name"],
                   meta=meta.get("data_meta", {}))
    fits, errors = {}, dict(meta.get("errors", {}))
    for label, rel in meta["files"].items():
        try:
            fits[label] = load_fit(os.path.join(directory, rel))
        except Exception as exc:   # a missing or damaged file is a row with its error, not a row dropped
            errors[label] = f"saved fit {rel} could not be read: {type(exc).__name__}: {exc}"
    model = from_spec(meta["model_spec"])
    ref = meta.get("reference")
    source = meta.get("reference_source") or ({"cell": ref} if ref is not None else {})
    reference = None
    try:
        if "catalogue" in source:
            reference = catalogue.load(source["catalogue"])
        elif "file" in source:
            reference = Reference.load(os.path.join(directory, source["file"]))
        elif source.get("cell") in fits:
            reference = Reference.from_fit(fits[source["cell"]], list(model.var_dims(data)), name=source["cell"])
    except ValueError as exc:    # the fits are still worth reading: the table then has no reference
        warnings.warn(f"the reference {ref!r} of the saved comparison could not be read: {exc}", stacklevel=2)
    return Comparison(model=model, data=data, fits=fits, errors=errors, reference=reference,
                      order=meta.get("order", list(fits)), notes=meta.get("notes", {}))


def fit_filename(label: str) -> str:
    """The file name of a grid cell's fit: the label with anything but letters, digits, - and _ replaced."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in label) + ".nc"


def _jsonable(obj):
    """``obj`` as JSON values (``results.jsonable``); a mapping that still does not encode, as strings."""
    try:
        json.dumps(jsonable(obj))
        return jsonable(obj)
    except TypeError:
        return {k: str(v) for k, v in obj.items()}
