"""Self-contained HTML report of a :class:`~bayeszoo.Comparison`.

One file, readable offline: inline CSS, figures embedded as base64 PNG (matplotlib Agg, no pyplot
state), no scripts and no external links to resources. Any figure that cannot be drawn becomes a short
note in the report instead of an exception.
"""
from __future__ import annotations

import html
import math
import os
import time

import numpy as np

MAX_IMAGE_BYTES = 4_500_000  # images stop being embedded past this total, keeping the file under ~5 MB
RHAT_FLAG = 1.01

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;color:#222;
     line-height:1.45;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.8em}
h3{margin-bottom:.3em} code,pre{background:#f4f4f4;border-radius:3px;padding:.1em .3em;font-size:.92em}
pre{padding:.6em;overflow-x:auto;white-space:pre-wrap}
table{border-collapse:collapse;font-size:.85em;margin:.6em 0}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:right;white-space:nowrap}
th{background:#f0f0f0;position:sticky;top:0} td.txt,th.txt{text-align:left}
td.err{color:#a00;text-align:left;white-space:normal}
.scroll{overflow-x:auto}
tr.failed td{background:#fff0f0}
td.flag{background:#ffd9d9;color:#900;font-weight:bold}
td.na{color:#888;font-style:italic}
.meta td{text-align:left;white-space:normal} .meta th{text-align:left}
.note{color:#8a5a00;background:#fff8e6;border-left:3px solid #e0a800;padding:.3em .6em;font-size:.9em}
.fig{margin:.5em 0} .fig img{max-width:100%;border:1px solid #eee}
.backend{border:1px solid #e2e2e2;border-radius:4px;padding:.2em 1em .8em;margin:1em 0}
.small{font-size:.85em;color:#555}
"""

_INT_COLUMNS = {"divergences", "n_relevant"}
_TEXT_COLUMNS = {"backend", "kind", "error"}


# ------------------------------------------------------------------------------------------ helpers
class _Images:
    """Embeds figures while keeping count of the bytes spent."""

    def __init__(self, budget: int = MAX_IMAGE_BYTES):
        self.budget = budget
        self.used = 0

    def render(self, what: str, make) -> str:
        """HTML for the figure ``make()`` returns; a note if it fails, returns None, or is over budget."""
        from bayeszoo.diagnostics.plots import _close, figure_to_base64

        try:
            fig = make()
        except Exception as exc:
            return _note(f"{what}: could not be drawn ({type(exc).__name__}: {_first_line(exc)})")
        if fig is None:
            return ""
        if self.used >= self.budget:
            _close(fig)
            return _note(f"{what}: left out to keep the report small")
        try:
            data = figure_to_base64(fig)
        except Exception as exc:
            return _note(f"{what}: could not be rendered ({type(exc).__name__}: {_first_line(exc)})")
        self.used += len(data)
        return (f'<div class="fig"><img alt="{html.escape(what)}" '
                f'src="data:image/png;base64,{data}"></div>')


def _note(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


def _first_line(exc, n: int = 200) -> str:
    """The first line of an error message, cut to ``n`` characters."""
    text = str(exc).strip().split("\n")[0]
    return text if len(text) <= n else text[: n - 1] + "…"


def _is_missing(value) -> bool:
    if value is None:
        return True
    try:
        return isinstance(value, float) and math.isnan(value) or (np.ndim(value) == 0 and np.isnan(value))
    except TypeError:
        return False


def _fmt(column: str, value) -> str:
    if _is_missing(value) or (isinstance(value, str) and value == ""):
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)) or (column in _INT_COLUMNS and float(value).is_integer()):
        return f"{int(value):d}"
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        if column == "seconds":
            return f"{v:.2f}"
        if column == "rhat_max":
            return f"{v:.3f}"
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.2e}"
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return str(value)


def table_html(table, comparison=None) -> str:
    """The comparison table as HTML with flags: R-hat > 1.01 and divergences > 0 highlighted, R-hat of
    approximations shown as not applicable, a failed backend's row holding its error message."""
    cols = [c for c in table.columns if c != "error"]
    head = "".join(f'<th class="{"txt" if c in _TEXT_COLUMNS else ""}">{html.escape(c)}</th>' for c in cols)
    rows = []
    for _, row in table.iterrows():
        error = str(row.get("error", "") or "").strip()
        cells = []
        for i, c in enumerate(cols):
            value = row[c]
            if error and c not in ("backend", "kind"):  # failed: the rest of the row is the message
                cells.append(f'<td class="err" colspan="{len(cols) - i}">error: {html.escape(error)}</td>')
                break
            cls = "txt" if c in _TEXT_COLUMNS else ""
            text = _fmt(c, value)
            if c == "rhat_max" and row.get("kind") == "approximation":
                cls, text = "na", "n/a (i.i.d. draws)"
            elif c == "rhat_max" and not _is_missing(value) and float(value) > RHAT_FLAG:
                cls = "flag"
                text += " ⚠"
            elif c == "divergences" and not _is_missing(value) and float(value) > 0:
                cls = "flag"
                text += " ⚠"
            cells.append(f'<td class="{cls}">{html.escape(text)}</td>')
        rows.append(f'<tr class="{"failed" if error else ""}">{"".join(cells)}</tr>')
    return (f'<div class="scroll"><table class="cmp"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _truncated(value, limit: int = 120) -> str:
    """A meta value as text, long ones (per-feature statistics, name lists) cut to ``limit`` characters."""
    text = str(value)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


def _meta_html(comparison) -> str:
    data, model = comparison.data, comparison.model
    meta = dict(data.meta or {})
    items = [("dataset", data.name), ("training points", f"{data.n} × {data.d}"),
             ("test points", str(data.X_test.shape[0]))]
    for key in ("task", "source", "licence", "license", "citation", "preprocessing"):
        if key in meta and meta[key] not in (None, ""):
            items.append((key, str(meta[key])))
    others = {k: v for k, v in meta.items()
              if k not in ("task", "source", "licence", "license", "citation", "preprocessing")}
    if others:
        items.append(("options", ", ".join(f"{k}={_truncated(v)}" for k, v in others.items())))
    try:
        spec = model.spec()
        items.insert(0, ("model", ", ".join(f"{k}={v!r}" for k, v in spec.items())))
    except Exception:
        items.insert(0, ("model", type(model).__name__))
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in items)
    return f'<table class="meta">{rows}</table>'


def _reference_sentence(comparison) -> str:
    ref, ref_fit = comparison.reference, comparison.reference_fit
    if ref_fit is None and ref is None:
        return ("No reference posterior was given, so <code>mean_err</code> and <code>sd_err</code> are empty.")
    if ref_fit is None:
        return (f"The reference <code>{html.escape(str(ref))}</code> failed, so <code>mean_err</code> and "
                f"<code>sd_err</code> are empty.")
    what = f"backend <code>{html.escape(str(ref or ref_fit.backend))}</code>"
    if ref and ref.endswith("(reference)"):
        what += " run on its own for the reference"
    elif ref is None:
        what = f"a fit supplied by the user (backend <code>{html.escape(ref_fit.backend)}</code>)"
    return (f"The reference posterior is {what} ({ref_fit.kind}, {ref_fit.n_chains} chain(s) × "
            f"{ref_fit.n_draws} draws). <code>mean_err</code> and <code>sd_err</code> are the largest "
            f"|mean − mean<sub>ref</sub>| / sd<sub>ref</sub> and |sd − sd<sub>ref</sub>| / sd<sub>ref</sub> over "
            f"all components of {', '.join(f'<code>{html.escape(v)}</code>' for v in comparison.model.compare_vars) or 'the canonical variables'}.")


def _fit_summary(fit) -> str:
    timing = ", ".join(f"{k} {float(v):.2f}s" for k, v in fit.timing.items() if isinstance(v, (int, float)))
    parts = [f"{fit.kind}", f"{fit.n_chains} chain(s) × {fit.n_draws} draws", timing]
    info = fit.info   # a Fit always carries the keys of bayeszoo.fit.INFO_KEYS
    for key in ("converged", "iterations", "n_grad", "divergences"):
        if info[key] is not None:
            parts.append(f"{key} = {info[key]}")
    text = " · ".join(html.escape(p) for p in parts if p)
    if info["warnings"]:
        text += "".join(_note(f"warning: {w}") for w in info["warnings"][:5])
    return f'<p class="small">{text}</p>'


# --------------------------------------------------------------------------------------------- main
def write_report(comparison, path: str) -> str:
    """Write the HTML report of ``comparison`` to ``path`` and return the path."""
    from bayeszoo.diagnostics import plots
    from bayeszoo.diagnostics.metrics import ESS_METHOD

    path = os.fspath(path)
    images = _Images()
    model, data = comparison.model, comparison.data
    title = f"{type(model).__name__} on {data.name}"
    out = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
           f"<title>bayeszoo: {html.escape(title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>bayeszoo comparison: {html.escape(title)}</h1>",
           f"<p class='small'>written {time.strftime('%Y-%m-%d %H:%M')} · backends: "
           f"{html.escape(', '.join(comparison.order or list(comparison.fits)))}</p>",
           _meta_html(comparison)]

    # table
    out.append("<h2>Comparison table</h2>")
    try:
        table = comparison.table()
        out.append(table_html(table, comparison))
    except Exception as exc:
        table = None
        out.append(_note(f"table could not be computed ({type(exc).__name__}: {_first_line(exc)})"))
    out.append(f"<p>ESS estimator: {html.escape(ESS_METHOD)}. <code>ess_bulk_per_s</code> divides the smallest "
               f"bulk ESS over all components of the canonical variables by the fit's total wall time "
               f"(compile + tune + sample). R-hat (rank-normalised, split) is computed for MCMC fits with "
               f"two or more chains only: draws of an approximation are i.i.d. and are not judged by it. "
               f"R-hat &gt; {RHAT_FLAG} and divergences &gt; 0 are flagged in red.</p>")
    out.append(f"<p>{_reference_sentence(comparison)}</p>")
    if comparison.errors:
        out.append("<h3>Failed backends</h3>")
        for label, err in comparison.errors.items():
            out.append(f"<details open><summary><code>{html.escape(label)}</code>: "
                       f"{html.escape(str(err).strip().splitlines()[0] if str(err).strip() else 'failed')}"
                       f"</summary><pre>{html.escape(str(err))}</pre></details>")

    # ESS/s
    out.append("<h2>ESS per second</h2>")
    if table is not None:
        out.append(images.render("ESS per second", lambda: plots.ess_per_second_bars(table))
                   or _note("no backend has a finite ESS per second"))

    # family picture
    out.append("<h2>The model's picture</h2>")
    out.append(images.render("family picture", lambda: plots.family_picture(comparison))
               or _note(f"no picture for the {getattr(model, 'family', '?')} family"))

    # objective traces
    obj = images.render("objective traces", lambda: plots.objective_figure(comparison))
    if obj:
        out.append("<h2>Objective traces (ELBO / log evidence)</h2>")
        out.append(obj)

    # per backend
    out.append("<h2>Per backend</h2>")
    try:
        components = plots.select_components(comparison)
    except Exception as exc:
        components = []
        out.append(_note(f"components to plot could not be chosen ({type(exc).__name__}: {_first_line(exc)})"))
    if components:
        names = ", ".join(plots.component_label(n, s) for n, s in components)
        out.append(f"<p>Components shown: <code>{html.escape(names)}</code> (scalars, and the "
                   f"{plots.N_TOP_WEIGHTS} weights with the largest posterior |mean| in the reference). "
                   f"Marginal histograms are drawn over the reference's (grey).</p>")
    colors = plots.backend_colors([lbl for lbl in (comparison.order or list(comparison.fits))
                                   if lbl in comparison.fits])
    ref = comparison.reference_fit
    for label in comparison.order or list(comparison.fits):
        if label not in comparison.fits:
            continue
        fit = comparison.fits[label]
        out.append(f'<div class="backend"><h3>{html.escape(label)}</h3>{_fit_summary(fit)}')
        if components:
            out.append(images.render(f"{label}: trace plot", lambda: plots.trace_figure(fit, components))
                       or _note(f"{label}: no varying component to trace (point estimates)"))
            if fit.kind == "mcmc" and fit.n_chains >= 2:
                out.append(images.render(f"{label}: rank plot", lambda: plots.rank_figure(fit, components)))
            if ref is not None and fit is not ref:
                out.append(images.render(f"{label}: marginals vs reference",
                                         lambda: plots.marginals_figure(fit, ref, components,
                                                                        color=colors.get(label, "#1f77b4"),
                                                                        label=label)))
        out.append("</div>")
    out.append("<p class='small'>Generated by bayeszoo. Self-contained: figures are embedded PNG images.</p>")
    out.append("</body></html>")

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("\n".join(out))
    os.replace(tmp, path)
    return path
