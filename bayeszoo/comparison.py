"""The :class:`Comparison` type: a grid of fits of one model on one dataset, against a reference."""
from __future__ import annotations

import contextlib
import io
import json
import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from filelock import FileLock, Timeout

from bayeszoo import catalogue
from bayeszoo.catalogue import Reference
from bayeszoo.datasets import Dataset
from bayeszoo.diagnostics.metrics import DEFAULT_TARGETS, checked_targets
from bayeszoo.results import (Fit, UnreadableFit, checked_path, fit_identity, identity_differences, jsonable,
                              load_fit, saved_fit_identity, write_atomically)

REFERENCE_FILE = "reference.nc"   # a saved comparison's reference when it is neither in the catalogue nor a cell
COMPARISON_FILE = "comparison.json"
#: the lock file of a folder being written (``bz.compare(out=...)``, ``Comparison.save``, ``bayeszoo report``)
LOCK_FILE = ".bayeszoo.lock"


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
    calibration : dict of str to SBCResult
        Simulation-based calibration results shown in the report, by backend (:meth:`attach_sbc`).
    targets : (float, float), default (10, 100)
        The rough and precise targets of the ranking, in exact posterior draws an estimate is worth: the table's
        ``seconds_to_target`` and ``seconds_to_precise`` time the way to each (``bz.compare(targets=...)``).
    """

    model: object
    data: Dataset
    fits: dict[str, Fit]
    errors: dict[str, str] = field(default_factory=dict)
    reference: Reference | None = None
    order: list[str] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)   # per cell: "resumed", "refitted: ...", "not saved: ..."
    calibration: dict = field(default_factory=dict)        # backend -> SBCResult (attach_sbc)
    targets: tuple = DEFAULT_TARGETS

    def __post_init__(self):
        self.targets = checked_targets(self.targets)
        if self.reference is not None and not isinstance(self.reference, Reference):
            raise ValueError(f"Comparison.reference must be a bayeszoo.catalogue.Reference or None; got "
                             f"{type(self.reference).__name__} (bz.compare turns a backend name, a Fit or a file "
                             f"into one)")

    def attach_sbc(self, result) -> "Comparison":
        """Show ``result`` (``bz.sbc(model, backend, data)``, made with this comparison's model and data) in the
        report and keep it in the saved comparison; a second result for the same backend replaces the first.
        Returns the comparison."""
        from bayeszoo.diagnostics.calibration import SBCResult

        if not isinstance(result, SBCResult):
            raise ValueError(f"Comparison.attach_sbc takes the result of bz.sbc; got {type(result).__name__}")
        differ = [what for what, mine, theirs in (("model", self.model.spec(), result.model_spec),
                                                  ("data", self.data.fingerprint(), result.data)) if mine != theirs]
        if differ:
            raise ValueError(f"Comparison.attach_sbc: the SBC of {result.backend!r} was run with another "
                             f"{' and '.join(differ)} than this comparison's")
        self.calibration[result.backend] = result
        return self

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
                    rows.append(table_row(self.model, self.data, label, self.fits[label], self.reference,
                                          self.targets))
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
        """The verdict read off the table, as one paragraph (:meth:`verdict_lines` joined)."""
        return " ".join(self.verdict_lines())

    def verdict_lines(self) -> list[str]:
        """The verdict, one plain sentence a line (``diagnostics.metrics.verdict``): the fastest backend to the
        rough target, the fastest to the precise one and the most accurate (each named when they differ), which
        never reach the targets and how far off they stay, and the MCMC fits whose own diagnostics fail, ranked
        after every fit whose diagnostics pass, with their problems and times."""
        from bayeszoo.diagnostics.metrics import compared_components, noise_max, verdict

        reference = self.reference
        names = list(self.model.compare_vars) or list(self.model.var_dims(self.data))
        return verdict(self.table(), self.fits, self.reference_cell, getattr(reference, "trusted", None),
                       has_reference=reference is not None, targets=self.targets,
                       one_draw=noise_max(compared_components(reference, names)))

    def report(self, path: str | os.PathLike) -> str:
        """Write the self-contained HTML report to ``path``."""
        from bayeszoo.diagnostics.report import write_report

        return write_report(self, checked_path(path, "Comparison.report"))

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
        """Write ``fits/<backend>.nc``, ``data.npz``, ``comparison.json``, ``table.csv`` and ``report.html``.

        One process writes a folder at a time (:func:`folder_lock`: another one waits, and a warning says so), and
        every file is written under a temporary name and renamed into place. A fit file already in ``fits/`` is
        kept only when it holds this very fit; one made with another backend, model, data or settings is
        replaced, with a warning, so that the folder never pairs this comparison with another experiment's fits.
        ``comparison.json`` records what every fit must match, which :func:`load_comparison` checks; it is
        written last, so a folder whose saving was interrupted (Ctrl-C, a full disk) holds no comparison, only
        finished fits, and ``bz.compare(out=...)`` resumes there. A full disk is a
        :class:`~bayeszoo.results.DiskFull` naming the folder and the bytes needed; the comparison in memory keeps
        its fits and table.
        """
        directory = _folder_argument(directory, "Comparison.save")
        with folder_lock(directory):
            os.makedirs(os.path.join(directory, "fits"), exist_ok=True)
            for label, result in self.fits.items():
                path = os.path.join(directory, "fits", fit_filename(label))
                if os.path.exists(path):
                    keep, replaced = _holds(path, result)
                    if keep:
                        continue
                    if replaced:
                        warnings.warn(f"Comparison.save: {path} held {replaced}; replaced by this comparison's "
                                      f"{label!r} fit", stacklevel=2)
                result.save(path)
            table = self.table()
            write_atomically(os.path.join(directory, "data.npz"), self._data_bytes())
            meta = {"model_spec": self.model.spec(), "data_name": self.data.name,
                    "data_meta": _jsonable(self.data.meta), "data_fingerprint": self.data.fingerprint(),
                    "reference": getattr(self.reference, "name", None),
                    "reference_source": self._save_reference(directory),
                    "order": self.order or list(self.fits),
                    "files": {label: f"fits/{fit_filename(label)}" for label in self.fits},
                    "cells": {label: {"backend": fit.backend, "settings": fit.info.get("settings")}
                              for label, fit in self.fits.items()},
                    "errors": self.errors, "notes": self.notes,
                    "calibration": {backend: r.to_dict() for backend, r in self.calibration.items()},
                    "targets": list(self.targets)}
            write_atomically(os.path.join(directory, "table.csv"), table.to_csv(index=False))
            self.report(os.path.join(directory, "report.html"))
            # last: a folder with comparison.json holds a finished comparison (the command line then refuses to
            # replace it without --force); one without it holds fits that a grid resumes from
            write_atomically(os.path.join(directory, COMPARISON_FILE), json.dumps(jsonable(meta), indent=2))
        return directory

    def _data_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez_compressed(buffer, X=self.data.X, y=self.data.y, X_test=self.data.X_test, y_test=self.data.y_test)
        return buffer.getvalue()

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
    """Rebuild a Comparison from a folder written by :meth:`Comparison.save`.

    Every fit is checked against what ``comparison.json`` recorded (the model, the data's fingerprint, the cell's
    backend and settings): a fit file that is missing, cannot be read, or was made for another experiment becomes
    a row with its error (and a warning names the mixed files), never a row silently taken from elsewhere.

    Raises
    ------
    ValueError
        When the folder cannot be read as a saved comparison, naming the file and the reason: not a folder, no or
        damaged ``comparison.json`` (not JSON, not a mapping, keys missing), a missing or damaged ``data.npz``, a
        model spec that makes no model, or an argument that is not a path.
    """
    from bayeszoo.models import from_spec

    directory = checked_path(directory, "load_comparison")
    if not os.path.isdir(directory):
        raise ValueError(f"{directory!r} cannot be read as a saved comparison: "
                         f"{'it is a file, not a folder' if os.path.exists(directory) else 'there is no such folder'}")
    meta_path = os.path.join(directory, COMPARISON_FILE)
    if not os.path.isfile(meta_path):
        raise ValueError(f"{directory!r} holds no {COMPARISON_FILE} (not a saved comparison)")
    meta = _comparison_metadata(meta_path)
    data = _saved_data(os.path.join(directory, "data.npz"), meta)
    fingerprint = meta.get("data_fingerprint") or data.fingerprint()
    if fingerprint != data.fingerprint():
        raise _unreadable(os.path.join(directory, "data.npz"), f"it does not hold the data {COMPARISON_FILE} was "
                                                                "saved with (its fingerprint differs)")
    try:
        model = from_spec(meta["model_spec"])
    except (TypeError, ValueError, KeyError) as exc:
        raise _unreadable(meta_path, f"its model_spec makes no model ({type(exc).__name__}: {exc})") from None
    fits, errors = _saved_fits(directory, meta, fingerprint)
    reference = _saved_reference(directory, meta, fits, model, data)
    calibration = _saved_calibration(meta, meta_path)
    try:
        targets = checked_targets(meta.get("targets", DEFAULT_TARGETS))
    except ValueError as exc:
        raise _unreadable(meta_path, str(exc)) from None
    return Comparison(model=model, data=data, fits=fits, errors=errors, reference=reference,
                      order=meta.get("order", list(fits)), notes=meta.get("notes", {}), calibration=calibration,
                      targets=targets)


def _saved_fits(directory: str, meta: dict, fingerprint: str) -> tuple[dict, dict]:
    """The saved comparison's fits and error rows: a fit file that is missing, damaged or made for another experiment
    is an error row (and a warning names the mixed files), never a row taken from elsewhere."""
    cells = meta.get("cells", {})
    fits, errors, mixed = {}, dict(meta["errors"]), []
    for label, rel in meta["files"].items():
        try:
            fit = load_fit(os.path.join(directory, rel))
        except ValueError as exc:   # a missing or damaged file is a row with its error, not a row dropped
            errors[label] = f"saved fit {rel} could not be read: {getattr(exc, 'reason', exc)}"
            continue
        cell = cells.get(label) or {}
        expected = {"backend": cell.get("backend"), "model_spec": meta["model_spec"],
                    "provenance": {"data": fingerprint}, "settings": cell.get("settings")}
        differ = identity_differences(fit_identity(fit), expected)
        if differ:
            errors[label] = (f"saved fit {rel} was made with another {', '.join(differ)} than this comparison "
                             f"(the folder mixes two experiments)")
            mixed.append(f"{rel} ({', '.join(differ)})")
            continue
        fits[label] = fit
    if mixed:   # stacklevel 3: the warning points at load_comparison's caller
        warnings.warn(f"load_comparison: {directory!r} holds fits of another experiment than its {COMPARISON_FILE}: "
                      f"{'; '.join(mixed)}; they are error rows", stacklevel=3)
    return fits, errors


def _saved_reference(directory: str, meta: dict, fits: dict, model, data) -> Reference | None:
    """The saved comparison's reference (the catalogue's, a saved file or one of its cells), or None with a warning
    when it cannot be read: the fits are still worth reading."""
    ref = meta.get("reference")
    source = meta.get("reference_source") or ({"cell": ref} if ref is not None else {})
    try:
        if "catalogue" in source:
            return catalogue.load(source["catalogue"])
        if "file" in source:
            return Reference.load(os.path.join(directory, source["file"]))
        if source.get("cell") in fits:
            return Reference.from_fit(fits[source["cell"]], list(model.var_dims(data)), name=source["cell"])
    except ValueError as exc:
        warnings.warn(f"the reference {ref!r} of the saved comparison could not be read: {exc}", stacklevel=3)
    return None


def _saved_calibration(meta: dict, meta_path: str) -> dict:
    """The saved SBC results by backend; one that cannot be read is left out with a warning (the rest of the
    comparison is still worth reading)."""
    calibration = {}
    for backend, saved in meta.get("calibration", {}).items():
        try:
            from bayeszoo.diagnostics.calibration import SBCResult

            calibration[backend] = SBCResult.from_dict(saved)
        except (KeyError, TypeError, ValueError) as exc:
            warnings.warn(f"the SBC result of {backend!r} in {meta_path!r} could not be read ({type(exc).__name__}: "
                          f"{exc})", stacklevel=3)
    return calibration


@contextlib.contextmanager
def folder_lock(directory: str | os.PathLike):
    """Hold the lock of ``directory`` (its file :data:`LOCK_FILE`) for the block, so that one process at a time
    writes there: ``bz.compare(out=...)`` for its whole grid, :meth:`Comparison.save`, ``bayeszoo report``.
    Another process holding it is waited for, and a warning says so. Re-entrant within a thread; the operating
    system drops the lock of a process that ends, however it ends, so no stale lock stays behind."""
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(os.path.realpath(directory), LOCK_FILE)
    lock = _LOCKS.setdefault(path, FileLock(path))   # one object per file: re-entrant in this process
    try:
        lock.acquire(timeout=0)
    except Timeout:
        warnings.warn(f"{directory!r} is being written by another process; waiting until it has finished "
                      f"(lock file {path})", stacklevel=3)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


_LOCKS: dict[str, FileLock] = {}

#: keys of comparison.json and the JSON types they must have (the others are optional)
_REQUIRED = {"model_spec": dict, "data_name": str, "files": dict}
_OPTIONAL = {"data_meta": dict, "order": list, "errors": dict, "notes": dict, "cells": dict,
             "reference_source": (dict, type(None)), "data_fingerprint": (str, type(None)), "calibration": dict,
             "targets": list}


def _unreadable(path: str, reason: str) -> ValueError:
    return ValueError(f"{path!r} cannot be read as a saved comparison: {reason}")


def _comparison_metadata(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            meta = json.load(fh)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _unreadable(path, f"it is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise _unreadable(path, f"it holds a JSON {type(meta).__name__}, not a mapping")
    missing = [key for key in _REQUIRED if key not in meta]
    if missing:
        raise _unreadable(path, f"it lacks {', '.join(map(repr, missing))}")
    for key, types in {**_REQUIRED, **_OPTIONAL}.items():
        if key in meta and not isinstance(meta[key], types):
            raise _unreadable(path, f"its {key!r} is a JSON {type(meta[key]).__name__}")
    for key in ("files", "errors", "notes"):
        if not all(isinstance(text, str) for text in meta.get(key, {}).values()):
            raise _unreadable(path, f"its {key!r} must map cell labels to text")
    if not all(isinstance(label, str) for label in meta.get("order", [])):
        raise _unreadable(path, "its 'order' must list cell labels")
    meta.setdefault("errors", {})
    return meta


def _saved_data(path: str, meta: dict) -> Dataset:
    if not os.path.isfile(path):
        raise _unreadable(path, "the comparison's data file is missing")
    keys = ("X", "y", "X_test", "y_test")
    try:
        with np.load(path, allow_pickle=False) as arrays:
            missing = [key for key in keys if key not in arrays.files]
            if not missing:
                X, y, X_test, y_test = (arrays[key] for key in keys)
    except Exception as exc:   # a truncated or foreign file: zipfile, numpy and the OS each have their own errors
        raise _unreadable(path, f"not a readable .npz archive ({type(exc).__name__}: {exc})") from None
    if missing:
        raise _unreadable(path, f"it lacks the array(s) {', '.join(map(repr, missing))}")
    try:
        return Dataset(X, y, X_test, y_test, name=meta["data_name"], meta=meta.get("data_meta", {}))
    except ValueError as exc:
        raise _unreadable(path, f"its arrays make no dataset ({exc})") from None


def _holds(path: str, fit: Fit) -> tuple[bool, str]:
    """(whether the file at ``path`` already holds ``fit`` itself: the same run; what it holds instead when that
    is worth a warning: another experiment's fit or an unreadable file, "" for the same computation run again)."""
    try:
        saved = saved_fit_identity(path)
    except UnreadableFit as exc:
        return False, f"a file that cannot be read as a fit ({exc.reason})"
    mine = fit_identity(fit)
    differ = identity_differences(saved, mine)
    if differ:
        return False, f"a fit made with another {', '.join(differ)}"
    return mine["created_at"] is not None and saved["created_at"] == mine["created_at"], ""


def _folder_argument(directory, what: str) -> str:
    """``directory`` as a string; a ValueError for something that is not a path, or for a path that is a file."""
    directory = checked_path(directory, what)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ValueError(f"{what}: {directory!r} is a file, not a folder")
    return directory


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
