"""The :class:`Fit` type (one backend's answer for one model on one dataset) and :func:`build_fit`, the one
place where every backend's arrays become a Fit (docs/architecture.md, "Fit and InferenceData")."""
from __future__ import annotations

import contextlib
import contextvars
import datetime
import errno
import functools
import html
import json
import math
import os
import shutil
import sys
import uuid
import warnings
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import arviz as az
import numpy as np
import xarray as xr

KINDS = ("mcmc", "approximation")
_ATTR = "bayeszoo_fit"  # JSON blob stored in idata.posterior.attrs so a saved fit is self-describing

#: The info keys every fit carries, with their value when a backend has nothing to say. The report, the
#: comparison table and the CLI read these and nothing else; a backend may add its own keys beside them.
INFO_KEYS: dict[str, Any] = {
    "iterations": None,   # optimisation iterations, EP sweeps or sampler sweeps (warm-up included)
    "converged": None,    # True / False where the algorithm has a stopping rule, else None
    "objective": None,    # name of the variable in the ``objective`` group the algorithm optimises
    "n_grad": None,       # gradient evaluations (leapfrog steps, ADVI steps x MC samples); None without gradients
    "divergences": None,  # divergent transitions after warm-up (gradient-based samplers)
    "warnings": [],       # messages for the user: non-convergence, divergences, uneven weights
}
#: sample_stats names of ArviZ's schema; a backend uses these for the quantities they name.
ARVIZ_SAMPLE_STATS = ("lp", "acceptance_rate", "step_size", "step_size_bar", "tree_depth", "n_steps", "diverging",
                      "energy", "energy_error", "max_energy_error", "largest_eigval", "smallest_eigval")


@dataclass
class Fit:
    """Result of :func:`bayeszoo.fit`.

    Attributes
    ----------
    idata : arviz.InferenceData
        ``posterior`` (``chain`` x ``draw`` x the model's canonical variables), ``sample_stats``,
        ``observed_data``, ``constant_data`` and, for optimisation-based methods, an ``objective``
        group holding the trace of the ELBO or log evidence over iterations.
    backend : str
        Registered backend name that produced it.
    kind : {"mcmc", "approximation"}
        Draws of an approximation are i.i.d. from the approximating distribution and are not judged by R-hat.
    timing : dict
        Seconds spent in ``compile``, ``tune`` and ``sample``, and ``total``.
    model_spec : dict
        ``model.spec()``: enough to rebuild the model with :func:`bayeszoo.models.from_spec`.
    info : dict
        The standard keys of :data:`INFO_KEYS` (``iterations``, ``converged``, ``objective``, ``n_grad``,
        ``divergences``, ``warnings``), plus ``seed`` (the seed the backend ran with: :attr:`seed_used`) and
        ``settings`` (what the fit was asked for) and any backend-specific counts and flags.
    """

    idata: az.InferenceData
    backend: str
    kind: str
    timing: dict = field(default_factory=dict)
    model_spec: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Fit.kind must be one of {KINDS}, got {self.kind!r}")
        for key in ("compile", "tune", "sample"):
            self.timing.setdefault(key, 0.0)
        for key, default in INFO_KEYS.items():
            self.info.setdefault(key, list(default) if isinstance(default, list) else default)
        if isinstance(self.info["warnings"], str):
            self.info["warnings"] = [self.info["warnings"]]
        self.timing.setdefault("total", self.timing["compile"] + self.timing["tune"] + self.timing["sample"])

    @property
    def posterior(self):
        return self.idata.posterior

    @property
    def seed_used(self) -> int | None:
        """The seed the backend ran with (``seed=None`` draws a fresh one): ``bz.fit(..., seed=fit.seed_used)``
        with the same model, data, backend and settings repeats the fit. None for a fit that ``bz.fit`` did not
        make."""
        return self.info.get("seed")

    @property
    def seconds(self) -> float:
        return float(self.timing["total"])

    @property
    def n_chains(self) -> int:
        return int(self.idata.posterior.sizes["chain"])

    @property
    def n_draws(self) -> int:
        return int(self.idata.posterior.sizes["draw"])

    def model(self):
        """Rebuild the model object that produced this fit."""
        from bayeszoo.models import from_spec

        return from_spec(self.model_spec)

    def save(self, path: str | os.PathLike, *, overwrite: bool = True) -> str:
        """Write the fit to one NetCDF file (``.nc``); read it back with :func:`bayeszoo.load_fit`.

        The file is made in memory, written under a temporary name of its own and renamed into place, so a reader,
        or another process saving to the same path, never sees a half-written fit, and a full disk is a
        :class:`DiskFull` (an ``OSError`` naming the folder and the bytes needed) that leaves the files already
        there as they were. ``overwrite=False`` refuses (a :class:`ResultExists`) to replace a file already at
        ``path``, also one that appears while this one is written. A ``path`` that is a folder, or not a path at
        all, is a ValueError.
        """
        path = checked_path(path, "Fit.save")
        if os.path.isdir(path):
            raise ValueError(f"cannot save the fit to {path!r}: it is a folder; give a file name such as "
                             f"{os.path.join(path, 'fit.nc')!r}")
        if not overwrite and os.path.lexists(path):
            raise ResultExists(path, "already exists")
        folder = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(folder, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ValueError(f"cannot save the fit to {path!r}: {folder!r} is not a folder") from None
        meta = {"backend": self.backend, "kind": self.kind, "timing": self.timing,
                "model_spec": self.model_spec, "info": jsonable(self.info)}
        self.idata.posterior.attrs[_ATTR] = json.dumps(meta)
        write_atomically(path, netcdf_image(self.idata), overwrite=overwrite)
        return path

    def __repr__(self) -> str:
        shapes = {k: tuple(v.shape[2:]) for k, v in self.idata.posterior.data_vars.items()}
        return (f"Fit(backend={self.backend!r}, kind={self.kind!r}, chains={self.n_chains}, "
                f"draws={self.n_draws}, seconds={self.seconds:.2f}, vars={shapes})")

    def _repr_html_(self) -> str:
        """The fit in a notebook: backend, library, timing, counts, the standard info keys and warnings, then
        ``az.summary`` of the canonical variables (the first :data:`HTML_ROWS_PER_VARIABLE` components of each)."""
        return _fit_html(self)


# ------------------------------------------------------------------------------------- notebook display
#: Rows of ``az.summary`` shown per variable in a notebook; a larger variable (an image, hundreds of weights)
#: shows its first components in C order and says how many were left out, so the cell stays small.
HTML_ROWS_PER_VARIABLE = 10
HTML_WARNINGS = 10   # warnings listed; the rest are counted

# Scoped to the fit's own block so that a notebook's or a documentation page's styles are left alone; the block
# is a light card so that it stays readable under a dark theme.
_HTML_CSS = """
div.bz-fit{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;font-size:13px;line-height:1.4;
 color:#222;background:#fff;border:1px solid #ddd;border-radius:4px;padding:.5em .8em;margin:.3em 0;
 max-width:100%;overflow-x:auto}
div.bz-fit table{border-collapse:collapse;margin:.4em 0;font-size:12px;color:#222}
div.bz-fit th,div.bz-fit td{border:1px solid #ddd;padding:.15em .5em;text-align:right;white-space:nowrap;
 background:#fff;color:#222}
div.bz-fit thead th{background:#f0f0f0}
div.bz-fit th.txt,div.bz-fit td.txt{text-align:left;white-space:normal}
div.bz-fit table.meta th{text-align:left;background:#f6f6f6}
div.bz-fit td.flag{background:#ffd9d9;color:#900;font-weight:bold}
div.bz-fit td.na{color:#888;font-style:italic}
div.bz-fit code{background:#f4f4f4;border-radius:3px;padding:0 .25em;color:#222}
div.bz-fit ul.warn{margin:.3em 0;padding:.3em .6em .3em 1.8em;background:#fff8e6;border-left:3px solid #e0a800;
 color:#6a4500}
div.bz-fit p{margin:.3em 0} div.bz-fit .small{color:#555;font-size:12px}
"""
#: R-hat at or above this fails: the fit's own table flags it, the comparison does not rank the fit
#: (``diagnostics.metrics``), a reference breaks its rules (``catalogue.reference``); PyMC warns from here on
RHAT_MAX = 1.01
_INFO_SHOWN = ("iterations", "converged", "n_grad", "divergences", "objective", "seed")


def _fit_html(fit: Fit) -> str:
    esc = html.escape
    attrs = fit.idata.posterior.attrs
    library = f"{attrs.get('inference_library', '?')} {attrs.get('inference_library_version', '')}".strip()
    spec = dict(fit.model_spec)
    family = spec.pop("family", "?")
    options = ", ".join(f"{k}={v!r}" for k, v in spec.items())
    model = f"{family} ({options[:117] + '…' if len(options) > 120 else options})" if options else str(family)
    standard = ("compile", "tune", "sample", "total")
    timing = [f"{k} {float(fit.timing[k]):.2f} s" for k in (*standard, *(k for k in fit.timing if k not in standard))
              if isinstance(fit.timing.get(k), (int, float))]
    info = [f"{k} = {fit.info[k]}" for k in _INFO_SHOWN if fit.info.get(k) is not None]
    counts = f"{fit.n_chains} chain{'s' * (fit.n_chains != 1)} × {fit.n_draws} draw{'s' * (fit.n_draws != 1)}"
    rows = [("library", library), ("model", model), ("draws", counts),
            ("timing", " · ".join(timing)), ("info", " · ".join(info) or "–")]
    meta = "".join(f"<tr><th>{esc(k)}</th><td class=\"txt\">{esc(v)}</td></tr>" for k, v in rows)
    out = [f'<div class="bz-fit"><style>{_HTML_CSS}</style>',
           f"<p><strong>Fit</strong> <code>{esc(fit.backend)}</code> · {esc(fit.kind)}</p>",
           f'<table class="meta">{meta}</table>']
    shown = fit.info["warnings"][:HTML_WARNINGS]
    if shown:
        more = len(fit.info["warnings"]) - len(shown)
        items = "".join(f"<li>{esc(str(w))}</li>" for w in shown) + (f"<li>… and {more} more</li>" if more else "")
        out.append(f'<ul class="warn">{items}</ul>')
    out.append(_summary_html(fit, HTML_ROWS_PER_VARIABLE))
    out.append("</div>")
    return "".join(out)


def _leading_components(da: xr.DataArray, k: int) -> xr.DataArray:
    """The part of a (chain, draw, *shape) variable that holds its first ``k`` components in C order (a few more
    when the last dimension is shorter than ``k``), so a large variable is never summarised whole."""
    sel, need = {}, k
    for dim in reversed([d for d in da.dims if d not in ("chain", "draw")]):
        size = da.sizes[dim]
        sel[dim] = slice(0, need) if need <= size else slice(None)
        need = 1 if need <= size else -(-need // size)
    return da.isel(sel)


def _summary_cell(column: str, value, kind: str) -> str:
    if column == "r_hat" and kind == "approximation":
        return '<td class="na" title="an approximation\'s draws are i.i.d.: R-hat does not apply">n/a</td>'
    if value is None or not math.isfinite(float(value)):
        return "<td>–</td>"
    value = float(value)
    if column.startswith("ess"):
        return f"<td>{value:.0f}</td>"
    if column == "r_hat":
        flag = kind == "mcmc" and value >= RHAT_MAX
        return f'<td class="flag">{value:.3f} ⚠</td>' if flag else f"<td>{value:.3f}</td>"
    return f"<td>{value:.4g}</td>"


def _summary_html(fit: Fit, rows: int) -> str:
    """``az.summary`` of every canonical variable as an HTML table, at most ``rows`` rows per variable."""
    esc = html.escape
    frames, notes = [], []
    for name, da in fit.idata.posterior.data_vars.items():
        size = int(np.prod(da.shape[2:], dtype=int))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # one chain, or point-estimated components: R-hat / ESS are NaN
                summary = az.summary(xr.Dataset({name: _leading_components(da, rows)}), round_to="none")
        except Exception as exc:
            notes.append(f"{name}: no summary ({type(exc).__name__}: {str(exc).strip().splitlines()[0][:160]})")
            continue
        frames.append(summary.head(rows))
        if size > rows:
            notes.append(f"{name}: first {rows} of {size} components shown ({size - rows} left out)")
    out = []
    if frames:
        columns = list(frames[0].columns)
        head = "".join(f"<th>{esc(str(c))}</th>" for c in columns)
        body = "".join(f'<tr><th class="txt">{esc(str(label))}</th>'
                       + "".join(_summary_cell(c, row[c], fit.kind) for c in columns) + "</tr>"
                       for frame in frames for label, row in frame.iterrows())
        out.append(f'<table class="summary"><thead><tr><th class="txt">variable</th>{head}</tr></thead>'
                   f"<tbody>{body}</tbody></table>")
    out += [f'<p class="small">{esc(n)}</p>' for n in notes]
    return "".join(out)


def load_fit(path: str | os.PathLike) -> Fit:
    """Read a fit written by :meth:`Fit.save`.

    Raises
    ------
    ValueError
        Whenever ``path`` cannot be read as a saved fit, naming the file and the reason: no such file, a folder,
        an empty or truncated file, a NetCDF file that is not a bayeszoo fit (no posterior, no ``bayeszoo_fit``
        metadata, metadata that is not a JSON mapping or lacks keys, no ``constant_data``), or not a path at all.
    """
    path = checked_path(path, "load_fit")
    if not os.path.exists(path):
        raise UnreadableFit(path, "there is no such file")
    if os.path.isdir(path):
        raise UnreadableFit(path, "it is a folder")
    if os.path.getsize(path) == 0:
        raise UnreadableFit(path, "it is empty (0 bytes)")
    try:
        with az.rc_context({"data.load": "eager"}):   # read into memory and close the file
            idata = az.from_netcdf(path, engine="h5netcdf")
    except Exception as exc:   # any content at all may be there: a truncated, foreign or damaged file
        raise UnreadableFit(path, f"not a complete NetCDF file ({type(exc).__name__}: {first_line(exc)})") from exc
    groups = idata.groups()
    if "posterior" not in groups:
        raise UnreadableFit(path, f"a NetCDF file without a posterior group (groups: {groups or 'none'}), "
                                  f"not a bayeszoo fit")
    meta = _fit_metadata(path, idata.posterior.attrs.get(_ATTR))
    if "constant_data" not in groups:
        raise UnreadableFit(path, "it has no constant_data group (the model's inputs, which predict needs)")
    try:
        return Fit(idata=idata, backend=meta["backend"], kind=meta["kind"], timing=dict(meta["timing"]),
                   model_spec=meta["model_spec"], info=dict(meta.get("info", {})))
    except (TypeError, ValueError) as exc:
        raise UnreadableFit(path, f"its metadata does not make a Fit ({first_line(exc)})") from exc


class UnreadableFit(ValueError):
    """A file that cannot be read as a saved fit; the message names the file and the reason."""

    def __init__(self, path: str, reason: str):
        self.path, self.reason = path, reason
        super().__init__(f"{path!r} cannot be read as a saved fit: {reason}")


class ResultExists(ValueError):
    """A save refused because it would replace an earlier result (``overwrite=False``; the command line without
    ``--force``). ``path`` is the file or folder, ``what`` says what is there."""

    def __init__(self, path: str, what: str):
        self.path, self.what = path, what
        super().__init__(f"{path!r} {what}; pass overwrite=True to replace it")


#: keys of the ``bayeszoo_fit`` metadata and the JSON types they must have
_META_TYPES = {"backend": (str,), "kind": (str,), "timing": (dict,), "model_spec": (dict,), "info": (dict,)}


def _fit_metadata(path: str, text) -> dict:
    """The ``bayeszoo_fit`` metadata of the file at ``path`` (its posterior attribute), checked."""
    if text is None:
        raise UnreadableFit(path, "an InferenceData file without bayeszoo's metadata (the posterior's "
                                  f"{_ATTR!r} attribute), not a bayeszoo fit")
    try:
        meta = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise UnreadableFit(path, f"its {_ATTR!r} metadata is not valid JSON ({first_line(exc)})") from None
    if not isinstance(meta, dict):
        raise UnreadableFit(path, f"its {_ATTR!r} metadata is a JSON {type(meta).__name__}, not a mapping")
    missing = [key for key in _META_TYPES if key not in meta and key != "info"]
    if missing:
        raise UnreadableFit(path, f"its {_ATTR!r} metadata lacks {', '.join(map(repr, missing))}")
    for key, types in _META_TYPES.items():
        if key in meta and not isinstance(meta[key], types):
            raise UnreadableFit(path, f"its {_ATTR!r} metadata has {key!r} of type {type(meta[key]).__name__}, "
                                      f"expected {types[0].__name__}")
    return meta


def saved_fit_identity(path: str | os.PathLike) -> dict:
    """What a saved fit says it is, read from its metadata alone (no draws): ``backend``, ``model_spec``,
    ``settings``, ``provenance`` (None where not recorded) and ``created_at`` (when its posterior was made).
    A ValueError as :func:`load_fit` gives when the file cannot be read as a fit."""
    import h5netcdf

    path = checked_path(path, "saved_fit_identity")
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        raise UnreadableFit(path, "there is no such file" if not os.path.exists(path) else
                            "it is a folder" if os.path.isdir(path) else "it is empty (0 bytes)")
    try:
        with h5netcdf.File(path, "r") as handle:
            attrs = dict(handle["posterior"].attrs)
    except Exception as exc:   # as in load_fit: anything may be in the file
        raise UnreadableFit(path, f"not a NetCDF file with a posterior group ({type(exc).__name__}: "
                                  f"{first_line(exc)})") from exc
    meta = _fit_metadata(path, attrs.get(_ATTR))
    info = meta.get("info", {})
    return {"backend": meta["backend"], "model_spec": meta["model_spec"], "settings": info.get("settings"),
            "provenance": info.get("provenance"), "created_at": attrs.get("created_at")}


def fit_identity(fit: Fit) -> dict:
    """The same keys as :func:`saved_fit_identity`, for a fit in memory."""
    return {"backend": fit.backend, "model_spec": jsonable(fit.model_spec), "settings": fit.info.get("settings"),
            "provenance": fit.info.get("provenance"), "created_at": fit.idata.posterior.attrs.get("created_at")}


def identity_differences(saved: dict, expected: dict) -> list[str]:
    """Which of backend, model, data and settings differ between two identities (``saved_fit_identity``,
    ``fit_identity``); a key that ``expected`` does not record (None) is not compared."""
    def data(identity):
        return (identity.get("provenance") or {}).get("data")

    out = []
    if expected.get("backend") is not None and saved.get("backend") != expected["backend"]:
        out.append("backend")
    if expected.get("model_spec") is not None and saved.get("model_spec") != expected["model_spec"]:
        out.append("model")
    if data(expected) is not None and data(saved) != data(expected):
        out.append("data")
    if expected.get("settings") is not None and saved.get("settings") != expected["settings"]:
        out.append("settings")
    return out


#: how a fit's numbers are compressed in its file: HDF5's byte shuffle, then zlib at its fastest level. Draws are
#: noisy doubles that zlib alone barely shrinks at any level; shuffled bytes give it the exponents' regularity, so
#: its fastest level writes smaller files than its default level did unshuffled, in a fraction of the time.
COMPRESSION = {"zlib": True, "complevel": 1, "shuffle": True}


def netcdf_image(idata: az.InferenceData) -> memoryview:
    """The NetCDF file that ``idata.to_netcdf`` writes (every group, numbers compressed), made in memory.

    Why not ``to_netcdf(path)``: the HDF5 library under it crashes the whole process (SIGSEGV while it closes the
    file) when the disk fills as it writes, and every fit the process holds is lost; a Python write of the
    finished image fails with an ordinary ``OSError`` instead (:func:`write_atomically`)."""
    groups = {f"/{name}": idata[name] for name in idata.groups()}
    tree = xr.DataTree.from_dict({"/": xr.Dataset(attrs=dict(idata.attrs or {})), **groups})
    encoding = {path: {name: dict(COMPRESSION) for name, var in group.variables.items() if var.dtype.kind in "biufcS"}
                for path, group in groups.items()}
    with _local_write_lock():
        return tree.to_netcdf(None, engine="h5netcdf", encoding=encoding)


def _local_write_lock():
    """While a Dask distributed client is the default scheduler, xarray takes a distributed lock named after the
    file it writes, which fails for an in-memory file (no name); this process's own lock is the right one."""
    dask = sys.modules.get("dask")   # not imported: no client either
    return dask.config.set(scheduler="synchronous") if dask is not None else contextlib.nullcontext()


#: what ``errno`` says when a file does not fit: a full disk, a full quota, a file larger than the file system
#: or this process's file-size limit (``ulimit -f``) allows
_NO_ROOM = {code: why for code, why in (
    (errno.ENOSPC, "the disk is full"), (getattr(errno, "EDQUOT", None), "the disk quota is used up"),
    (errno.EFBIG, "the file is larger than the file system or this process's file-size limit allows"))
    if code is not None}


class DiskFull(OSError):
    """A file that did not fit in its folder. The message names the folder, the file and the bytes it needs;
    nothing in the folder was changed (its temporary file is removed), so the files already there are intact.
    ``folder`` and ``needed`` (bytes) say the same to a program."""

    def __init__(self, code: int, folder: str, name: str, needed: int):
        self.folder, self.file, self.needed = folder, name, needed
        try:
            free = f"{shutil.disk_usage(folder).free:,} bytes are free there"
        except OSError:
            free = "the free space there is unknown"
        super().__init__(code, f"cannot write {name} in {folder!r}: {_NO_ROOM.get(code, os.strerror(code))}; it "
                               f"needs {needed:,} bytes and {free}. The files already there are intact: free some "
                               f"space or write to another folder")

    def __reduce__(self):   # across processes (a grid's workers) with its own arguments, not OSError's
        return DiskFull, (self.errno, self.folder, self.file, self.needed)


def write_atomically(path: str, content, *, overwrite: bool = True) -> str:
    """Write ``content`` (``bytes``, a ``memoryview``, or ``str`` written as UTF-8) to the file ``path`` under a
    temporary name of its own beside it, then rename it to ``path`` in one step, so that no reader and no other
    writer ever sees a half-written file; the temporary file is removed if writing fails. The content is made
    before the file is opened, so a full disk is an ordinary write error, raised as a :class:`DiskFull` naming
    the folder and the bytes needed. ``overwrite=False``: a :class:`ResultExists` if ``path`` exists, even if it
    appeared while writing (the rename is then a hard link, which never replaces a file)."""
    folder, name = os.path.split(os.path.abspath(path))
    content = content.encode("utf-8") if isinstance(content, str) else content
    tmp = os.path.join(folder, f".{name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.part")
    try:
        try:
            _write_bytes(tmp, content)
        except OSError as exc:
            if exc.errno not in _NO_ROOM:
                raise
            raise DiskFull(exc.errno, folder, name, memoryview(content).nbytes) from exc
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise ResultExists(path, "already exists") from None
            except OSError:   # a file system without hard links: check, then rename
                if os.path.lexists(path):
                    raise ResultExists(path, "already exists") from None
                os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
    return path


def _write_bytes(path: str, content) -> None:
    """``content`` into a new file at ``path`` through ``os.write``, whose failure is an ordinary OSError."""
    view = memoryview(content).cast("B")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def checked_path(path, what: str) -> str:
    """``path`` as a string, or a ValueError naming ``what`` was given instead of a path."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{what} expects a path (str or os.PathLike); got {type(path).__name__} {path!r}")
    path = os.fspath(path)
    if not path:
        raise ValueError(f"{what} expects a path; got an empty string")
    return path


def first_line(exc: BaseException) -> str:
    """An exception's first line (at most 200 characters): PyTensor, NetCDF and JSON append pages of context."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def jsonable(obj: Any):
    """Best-effort conversion of numpy scalars / arrays in ``info`` to JSON types."""
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


# ------------------------------------------------------------------------------------------ the builder
_RENAMED_INFO = {"n_iter": "iterations", "sweeps": "iterations", "grad_evals": "n_grad"}


def build_fit(model, data, backend: str, kind: str, posterior, *, timing: dict, sample_stats: dict | None = None,
              objective: dict | None = None, info: dict | None = None, library: str = "bayeszoo",
              extra_groups: dict[str, xr.Dataset] | None = None, ctx=None) -> Fit:
    """The one way a backend turns its results into a :class:`Fit`.

    posterior : mapping (or ``xarray.Dataset``) name -> array shaped (chain, draw, *var_shape); it must hold every
        canonical variable of ``model.var_dims(data)``; other variables (a declaration's auxiliaries) are dropped.
    sample_stats : name -> array (chain, draw, ...), under ArviZ's names where the quantity has one
        (:data:`ARVIZ_SAMPLE_STATS`); ``diverging`` is stored as bool.
    objective : name -> trace over iterations, (iteration,) or (chain, iteration): the ``objective`` group.
    info : the backend's counts and flags, scalars and short lists (arrays go into a group); the keys of
        :data:`INFO_KEYS` are filled in where missing.
    ctx : the :class:`~bayeszoo.registry.RunContext` that ``bz.fit`` handed the backend: the seed, settings and
        provenance of the call (its ``record``) are added to ``info`` here.
    library : the distribution that did the inference ("bayeszoo" for the hand-written algorithms, "pymc",
        "numpyro", "nutpie"), recorded with its version in every group's provenance attributes.
    extra_groups : a family's own groups (e.g. GPC's ``gaussian``: the approximation's mean and covariance).
    """
    obs_coords = model.coords(data).get("obs", np.arange(data.n))
    groups = {"posterior": _canonical_posterior(model, data, backend, posterior)}
    n_chain, n_draw = groups["posterior"].sizes["chain"], groups["posterior"].sizes["draw"]
    indexes = _Indexes(groups["posterior"].coords, obs=obs_coords)
    if sample_stats:
        stats = {}
        for name, values in sample_stats.items():
            values = np.asarray(values)
            if values.shape[:2] != (n_chain, n_draw):
                raise ValueError(f"backend {backend!r}: sample_stats[{name!r}] has shape {values.shape}, "
                                 f"expected (chain, draw, ...) = {(n_chain, n_draw)}")
            dims = ("chain", "draw", *(f"{name}_dim_{i}" for i in range(values.ndim - 2)))
            stats[name] = (dims, values.astype(bool) if name == "diverging" else values)
        groups["sample_stats"] = indexes.dataset(stats)
    groups["observed_data"] = indexes.dataset({"y": (("obs",), np.asarray(data.y))})
    groups["constant_data"] = indexes.dataset({name: _constant(name, value, data, indexes)
                                               for name, value in model.constant_data(data).items()})
    if objective:
        for name, trace in objective.items():   # the final value is the result; early ones may be -inf (ADVI)
            final = np.asarray(trace, dtype=float)[..., -1:]
            if final.size and not np.all(np.isfinite(final)):
                raise ValueError(f"backend {backend!r} ended with a non-finite objective {name} ({final.ravel()[0]})")
        groups["objective"] = xr.Dataset({
            name: xr.DataArray(np.asarray(trace, dtype=float),
                               dims=("iteration",) if np.ndim(trace) == 1 else ("chain", "iteration"))
            for name, trace in objective.items()})
    groups.update(extra_groups or {})
    attrs = _provenance(library)
    for group in groups.values():
        group.attrs.update(attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the custom groups (``objective``, a family's own)
        idata = az.InferenceData(**groups)
    timing = {k: float(max(v, 0.0)) for k, v in timing.items()}
    fit = Fit(idata=idata, backend=backend, kind=kind, timing=timing, model_spec=model.spec(),
              info={**_standard_info(backend, info or {}), **(ctx.record if ctx is not None else {})})
    _add_log_likelihood(fit, model, data, indexes)
    return fit


#: the largest log_likelihood group stored with a fit (values: chains x draws x observations, 8 bytes each)
MAX_LOG_LIKELIHOOD_VALUES = 25_000_000


def _add_log_likelihood(fit: Fit, model, data, indexes: "_Indexes") -> None:
    """ArviZ's ``log_likelihood`` group (variable ``y`` over chain, draw, obs; over ``event`` for a multivariate
    likelihood) from the model's pointwise log likelihood, so ``az.loo`` / ``az.compare`` work on the fit; too
    large a group is left out, and ``info`` says so."""
    pointwise = getattr(model, "log_likelihood", None)
    if pointwise is None or not stores_log_likelihood():
        return
    size = fit.n_chains * fit.n_draws * data.n
    if size > MAX_LOG_LIKELIHOOD_VALUES:
        fit.info["log_likelihood"] = (f"not stored: {size:,} values (chains x draws x observations) exceed "
                                      f"{MAX_LOG_LIKELIHOOD_VALUES:,}; thin the draws for LOO")
        return
    try:
        values = pointwise(fit, data)
    except NotImplementedError as exc:   # e.g. PyMC cannot rebuild a model that sets initval: keep the draws
        fit.info["log_likelihood"] = f"not stored: the pointwise log likelihood cannot be computed ({exc})"
        return
    if values is None:
        return
    values = np.asarray(values, dtype=float).reshape(fit.n_chains, fit.n_draws, -1)
    if values.shape[-1] == data.n:
        dim = "obs"
    else:   # a multivariate likelihood: one term per event, which holds several observed values
        dim = "event"
        indexes.add("event", np.arange(values.shape[-1]))
        fit.info["log_likelihood"] = (f"one term per event: {values.shape[-1]} terms for {data.n} observed values "
                                      f"(a multivariate likelihood); PSIS-LOO leaves out one event at a time")
    group = indexes.dataset({"y": (("chain", "draw", dim), values)})
    group.attrs.update(fit.idata.posterior.attrs)
    fit.idata.add_groups(log_likelihood=group)


def _constant(name: str, value, data, indexes: "_Indexes") -> tuple:
    """A constant_data array as (dims, values); an axis as long as the training set shares the ``obs`` dim, the
    columns of an (n, d) array are ``feature`` (named by ``data.meta["feature_names"]`` when it has them)."""
    value = np.asarray(value)
    dims = [f"{name}_dim_{i}" for i in range(value.ndim)]
    if value.ndim and value.shape[0] == data.n:
        dims[0] = "obs"
        if value.ndim == 2 and value.shape[1] == data.d:
            dims[1] = "feature"
            names = data.meta.get("feature_names")
            if names is not None and len(names) == data.d:
                indexes.add("feature", [str(n) for n in names])
    return tuple(dims), value


class _Indexes:
    """The coordinates of one fit's groups, each dimension's index built once and shared by every group that has
    the dimension: building pandas indexes is most of what an xarray Dataset costs, more than a small fit."""

    def __init__(self, coords: xr.Coordinates, **more):
        self._variables = {name: coords[name].variable for name in coords}
        self._indexes = dict(coords.xindexes)
        for dim, values in more.items():
            self.add(dim, values)

    def add(self, dim: str, values) -> None:
        built = xr.Coordinates({dim: values})
        self._variables[dim], self._indexes[dim] = built[dim].variable, built.xindexes[dim]

    def dataset(self, variables: dict) -> xr.Dataset:
        """``variables``: name -> (dims, values); the coordinates are those of the dims they use."""
        dims = {d for var_dims, _ in variables.values() for d in var_dims}
        used = [d for d in self._variables if d in dims]
        coords = xr.Coordinates(coords={d: self._variables[d] for d in used},
                                indexes={d: self._indexes[d] for d in used})
        return xr.Dataset(variables, coords=coords)


_LOG_LIKELIHOOD: contextvars.ContextVar[bool] = contextvars.ContextVar("bayeszoo_log_likelihood", default=True)


@contextlib.contextmanager
def without_log_likelihood():
    """Within this block, :func:`build_fit` leaves out the ``log_likelihood`` group: for fits whose predictive
    scores nobody reads (simulation-based calibration's hundreds, a benchmark's tasks), where it would cost more
    than the fit."""
    token = _LOG_LIKELIHOOD.set(False)
    try:
        yield
    finally:
        _LOG_LIKELIHOOD.reset(token)


def stores_log_likelihood() -> bool:
    """Whether the fits made here get the ``log_likelihood`` group (not within :func:`without_log_likelihood`)."""
    return _LOG_LIKELIHOOD.get()


def _chain_draw(n_chain: int, n_draw: int) -> dict:
    return {"chain": np.arange(n_chain), "draw": np.arange(n_draw)}


def _canonical_posterior(model, data, backend: str, posterior) -> xr.Dataset:
    var_dims, coords = model.var_dims(data), model.coords(data)
    names = set(posterior.data_vars) if isinstance(posterior, xr.Dataset) else set(posterior)
    missing = set(var_dims) - names
    if missing:
        raise ValueError(f"backend {backend!r} returned variables {sorted(names)}, which lack the canonical "
                         f"variable(s) {sorted(missing)} of {type(model).__name__}")
    out = {}
    for name, dims in var_dims.items():
        values = np.asarray(posterior[name], dtype=float)
        if values.ndim != 2 + len(dims):
            raise ValueError(f"backend {backend!r}: {name} has shape {values.shape[2:]} per draw, expected dims {dims}")
        if not np.all(np.isfinite(values)):
            raise ValueError(f"backend {backend!r} returned non-finite draws of {name} "
                             f"({int(np.sum(~np.isfinite(values)))} of {values.size} values are NaN or inf)")
        out[name] = (("chain", "draw", *dims), values)
    n_chain, n_draw = next(iter(out.values()))[1].shape[:2]
    used = dict.fromkeys(d for dims in var_dims.values() for d in dims if d in coords)   # in the variables' order
    return xr.Dataset(out, coords=xr.Coordinates({**_chain_draw(n_chain, n_draw), **{d: coords[d] for d in used}}))


@functools.lru_cache(maxsize=None)
def package_version(name: str) -> str:
    """An installed distribution's version ("unknown" when it is not installed), read once per process: reading
    the installed packages' metadata costs milliseconds, more than a small fit."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def _provenance(library: str) -> dict:
    """ArviZ's provenance attributes for every group."""
    version = package_version(library)
    return {"created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "arviz_version": az.__version__, "inference_library": library,
            "inference_library_version": version}


MAX_INFO_LIST = 32   # info is stored as JSON in the posterior's attributes: longer arrays belong in a group


def _standard_info(backend: str, info: dict) -> dict:
    renamed = sorted(set(info) & set(_RENAMED_INFO))
    if renamed:
        raise ValueError(f"backend {backend!r} reports info keys {renamed}; the standard names are "
                         f"{[_RENAMED_INFO[k] for k in renamed]} (bayeszoo.results.INFO_KEYS)")
    long = sorted(k for k, v in info.items() if (isinstance(v, np.ndarray) and v.size > 1)
                  or (isinstance(v, (list, tuple)) and len(v) > MAX_INFO_LIST))
    if long:
        raise TypeError(f"backend {backend!r} puts arrays into info ({long}); arrays go into a group of the "
                        f"InferenceData (build_fit's extra_groups), info holds scalars and short lists")
    out = dict(info)
    out["warnings"] = [out["warnings"]] if isinstance(out.get("warnings"), str) else list(out.get("warnings") or [])
    return out   # Fit fills in the other standard keys
