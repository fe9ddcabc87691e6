"""Self-contained HTML report of a :class:`~bayeszoo.Comparison`.

One file, readable offline: inline CSS, figures embedded as base64 PNG (matplotlib Agg, no pyplot
state), no scripts and no external links to resources. Any figure that cannot be drawn becomes a short
note in the report instead of an exception. A banner at the top names the reference posterior and says whether
it passes its validation rules; the speed figure plots accuracy against wall time
(``bayeszoo.diagnostics.metrics`` defines the accuracy columns).
"""
from __future__ import annotations

import html
import math
import os
import time

import numpy as np

from bayeszoo.catalogue.reference import reruns
from bayeszoo.datasets import classes_text
from bayeszoo.diagnostics.metrics import (DEFAULT_TARGETS, ESS_PER_CHAIN_MIN, LOO_COLUMNS, PARETO_K_MAX,
                                          POINT_ESTIMATE_LOO, RHAT_MAX, flagged)
from bayeszoo.models.user import LIBRARY_NAMES, USER_FAMILY
from bayeszoo.results import write_atomically

MAX_IMAGE_BYTES = 4_500_000  # images stop being embedded past this total, keeping the file under ~5 MB

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;color:#222;
     line-height:1.45;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.8em}
h3{margin-bottom:.3em} code,pre{background:#f4f4f4;border-radius:3px;padding:.1em .3em;font-size:.92em}
pre{padding:.6em;overflow-x:auto;white-space:pre-wrap}
table{border-collapse:collapse;font-size:.85em;margin:.6em 0}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:right;white-space:nowrap}
table.cmp{font-size:.82em} table.cmp th,table.cmp td{padding:.2em .4em}
th{background:#f0f0f0;position:sticky;top:0;white-space:normal;vertical-align:bottom;min-width:3.2em}
td.txt,th.txt{text-align:left} td.wrap{white-space:normal;text-align:left;max-width:22em}
table.cmp td:first-child{white-space:normal;min-width:6em}
td.err{color:#a00;text-align:left;white-space:normal}
.scroll{overflow-x:auto}
tr.failed td{background:#fff0f0}
td.flag{background:#ffd9d9;color:#900;font-weight:bold}
th.group{text-align:center;border-bottom:2px solid #36c;font-size:.95em;background:#f4f8ff}
th[title]{cursor:help;text-decoration:underline dotted}
details.glossary dt{font-weight:bold;margin-top:.3em}
details.glossary dd{margin:0 0 0 1.5em}
p.verdict{font-size:15px;background:#f4f8ff;border-left:4px solid #36c;padding:.4em .8em}
td.na{color:#888;font-style:italic}
td.untrusted{background:#f6f0f0;color:#999;font-style:italic}
td.untrusted[colspan],td.na[colspan]{text-align:center}
.meta td{text-align:left;white-space:normal;overflow-wrap:anywhere} .meta th{text-align:left}
.meta caption{text-align:left;font-weight:bold;padding:.2em 0}
.meta-pair{display:flex;flex-wrap:wrap;gap:0 2em;align-items:flex-start} .meta-pair table{max-width:36em}
details.more{margin:.3em 0 .8em} details.more summary{cursor:pointer;color:#555;font-size:.9em}
.banner{border-radius:4px;padding:.5em 1em;margin:.8em 0;border-left:5px solid}
.banner.ok{background:#eef6ee;border-color:#3a8a3a} .banner.unchecked{background:#fff8e6;border-color:#e0a800}
.banner.bad{background:#fde8e8;border-color:#c00000;color:#700} .banner.none{background:#f4f4f4;border-color:#999}
.banner ul{margin:.3em 0 .2em 1.2em;padding:0}
.note{color:#8a5a00;background:#fff8e6;border-left:3px solid #e0a800;padding:.3em .6em;font-size:.9em}
.fig{margin:.5em 0} .fig img{max-width:100%;border:1px solid #eee}
.backend{border:1px solid #e2e2e2;border-radius:4px;padding:.2em 1em .8em;margin:1em 0}
.small{font-size:.85em;color:#555}
"""

_INT_COLUMNS = {"divergences", "n_relevant", "pareto_k_bad"}
_TEXT_COLUMNS = {"backend", "kind", "error"}


# ------------------------------------------------------------------------------------------ helpers
class Images:
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
            return note(f"{what}: could not be drawn ({type(exc).__name__}: {first_line(exc)})")
        if fig is None:
            return ""
        if self.used >= self.budget:
            _close(fig)
            return note(f"{what}: left out to keep the report small")
        try:
            data = figure_to_base64(fig)
        except Exception as exc:
            return note(f"{what}: could not be rendered ({type(exc).__name__}: {first_line(exc)})")
        self.used += len(data)
        return (f'<div class="fig"><img alt="{html.escape(what)}" '
                f'src="data:image/png;base64,{data}"></div>')


def note(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


def first_line(exc, n: int = 200) -> str:
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


NOT_APPLICABLE = "n/a"
POINT_ESTIMATE = "point estimate"
_TIPS = {NOT_APPLICABLE: "an approximation's draws are i.i.d.: neither R-hat nor their ESS per second applies",
         "untrusted": "measured against a reference that fails its validation rules (see the banner)",
         "reference": "the reference's own run: not measured against itself (see the banner)",
         POINT_ESTIMATE: POINT_ESTIMATE_LOO}
#: columns the cells or the text around the table show in other words: the error spans its row, the banner says
#: whether to trust the reference, the verdict names the convergence problems, a point estimate's LOO cells say why
_HIDDEN_COLUMNS = {"error", "reference_trusted", "convergence_problems", "loo_note"}


def target_help(targets) -> dict[str, tuple[str, str]]:
    """The headers and meanings of the two ranking columns for the comparison's (rough, precise) ``targets``."""
    def meaning(which, draws):
        return (f"wall time after which the estimate is worth {draws} exact draws (the {which} target) and stays "
                f"so; ∞: never. ⚠: an MCMC fit whose own diagnostics fail, ranked after every fit that passes")
    rough, precise = targets
    return {"seconds_to_target": (f"s to {rough} draws", meaning("rough", rough)),
            "seconds_to_precise": (f"s to {precise} draws", meaning("precise", precise))}


#: the report's main table: its columns in groups, each with a short header and what it means in plain words
#: (the header's tooltip and the glossary under the table). ``Comparison.table()`` and table.csv keep every column.
COLUMN_GROUPS = {
    "": {"backend": ("backend", "the grid cell: a backend (with the options it was given)"),
         "kind": ("kind", "mcmc: a Markov chain sampler; approximation: i.i.d. draws from an approximating "
                          "distribution, or a point estimate repeated")},
    "Sampling": {
        "seconds": ("seconds", "wall time of the fit: compile + warm-up + sampling"),
        "ess_bulk_min": ("bulk ESS", "smallest bulk effective sample size over the components (ArviZ's "
                                     "rank-normalised estimator); for an approximation its number of draws "
                                     "(chains × draws), since they are i.i.d."),
        "ess_bulk_per_s": ("ESS / s", "bulk ESS per second of wall time (MCMC only)"),
        "rhat_max": ("R-hat", "largest rank-normalised split R-hat over the components (MCMC, two or more "
                              f"chains); {RHAT_MAX} or more is flagged"),
        "divergences": ("divergent", "divergent transitions after warm-up (gradient-based samplers); any is "
                                     "flagged"),
        "converged": ("converged", f"an MCMC fit whose R-hat, bulk ESS ({ESS_PER_CHAIN_MIN} per chain) and "
                                   f"divergences pass; one that fails is ranked after every fit that passes")},
    "Accuracy against the reference": {
        "mean_err": ("mean error", "largest |mean − reference mean| over the compared components, in reference "
                                   "sds"),
        "sd_err": ("sd error", "largest |sd − reference sd| over the compared components, in reference sds"),
        "ess_ref": ("worth N draws", "how many exact posterior draws the fit's error is worth, at most its own "
                                     "ESS (MCMC) or its draws (approximation); 0 below one draw"),
        **target_help(DEFAULT_TARGETS)},
}
#: the PSIS-LOO columns that head the predictive scores (``metrics.loo_columns``): short header and meaning
LOO_HEADERS = {
    "elpd_loo": ("elpd LOO", "PSIS-LOO expected log predictive density of the training observations (ArviZ's "
                             "az.loo on the fit's log_likelihood group); higher is better"),
    "elpd_loo_se": ("± se", "standard error of elpd LOO"),
    "p_loo": ("p LOO", "effective number of parameters: the draws' log predictive density minus elpd LOO"),
    "pareto_k_bad": (f"Pareto k > {PARETO_K_MAX}", f"observations whose Pareto k exceeds {PARETO_K_MAX}: their "
                                                   f"LOO estimate is unreliable; any is flagged"),
}
_GROUP_OF = {c: g for g, cols in COLUMN_GROUPS.items() for c in cols}
_SHORT = {c: v[0] for cols in (*COLUMN_GROUPS.values(), LOO_HEADERS) for c, v in cols.items()}
_MEANING = {c: v[1] for cols in (*COLUMN_GROUPS.values(), LOO_HEADERS) for c, v in cols.items()}


def _help(column: str, targets) -> tuple[str | None, str | None]:
    """(short header, meaning) of ``column`` in a comparison with these ``targets``; None for a column without."""
    return target_help(targets).get(column) or (_SHORT.get(column), _MEANING.get(column))


def glossary_html(targets=DEFAULT_TARGETS) -> str:
    """The glossary under the main table: every header in plain words (the ranking columns' for ``targets``), and
    where the other columns are."""
    items = "".join(f"<dt>{html.escape(short)}</dt><dd>{html.escape(meaning)}</dd>"
                    for cols in COLUMN_GROUPS.values() for c in cols if c not in ("backend", "kind")
                    for short, meaning in [_help(c, targets)])
    return (f'<details class="glossary"><summary>What the columns mean</summary><dl>{items}</dl>'
            f"<p>More columns (tail ESS, ESS per gradient, the squared biases, worth per second) are in "
            f"<code>table.csv</code> and <code>Comparison.table()</code>.</p></details>")


def _header(column: str) -> str:
    # long column names may break after an underscore (or, for a long word, in its middle with a hyphen), so
    # the numbers rather than the names set the columns' widths and the table fits the page
    parts = [html.escape(p) for p in column.split("_")]
    return "_<wbr>".join(p if len(p) < 9 else f"{p[:len(p) // 2]}&shy;{p[len(p) // 2:]}" for p in parts)


def _head_rows(cols: list[str], targets=DEFAULT_TARGETS) -> str:
    """The table's header: a row of group names over the grouped columns (when any are), then one header per
    column, its short name with the plain-words meaning as a tooltip."""
    cells = []
    for c in cols:
        cls = "txt" if c in _TEXT_COLUMNS else ""
        short, meaning = _help(c, targets)
        tip = f' title="{html.escape(meaning)}"' if meaning else ""
        name = html.escape(short) if short else _header(c)
        cells.append(f'<th class="{cls}"{tip}>{name}</th>')
    row = f"<tr>{''.join(cells)}</tr>"
    if not any(_GROUP_OF.get(c) for c in cols):
        return row
    groups, spans = [], []
    for c in cols:
        g = _GROUP_OF.get(c, "")
        if groups and groups[-1] == g:
            spans[-1] += 1
        else:
            groups.append(g)
            spans.append(1)
    top = "".join(f'<th class="group" colspan="{n}">{html.escape(g)}</th>' for g, n in zip(groups, spans))
    return f"<tr>{top}</tr>{row}"


def _merged(cells: list[tuple]) -> str:
    """``<td>``s of (column, class, text) or (column, class, text, tooltip), runs of the same "untrusted" /
    "reference" / "point estimate" text merged into one cell; an error cell spans the rest of its row (its
    "column" is the span)."""
    out, i = [], 0
    while i < len(cells):
        column, cls, text, *own_tip = cells[i]
        span = 1
        if cls == "err":
            out.append(f'<td class="err" colspan="{column}">{html.escape(text)}</td>')
            break
        if text in ("untrusted", "reference", POINT_ESTIMATE):
            while i + span < len(cells) and cells[i + span][1:] == (cls, text):
                span += 1
        tip_text = (own_tip[0] if own_tip else None) or _TIPS.get(text) or _TIPS.get(cls)
        tip = f' title="{html.escape(tip_text)}"' if tip_text else ""
        colspan = f' colspan="{span}"' if span > 1 else ""
        out.append(f'<td class="{cls}"{colspan}{tip}>{html.escape(text)}</td>')
        i += span
    return "".join(out)


def _loo_note(row) -> str:
    """Why the row's PSIS-LOO columns are left out (``metrics.loo_columns``); empty when they are not."""
    note_ = row.get("loo_note")
    return note_ if isinstance(note_, str) else ""


def split_columns(table) -> tuple[list[str], list[str]]:
    """The report's two tables: sampling and accuracy (``metrics.TABLE_COLUMNS``), then the family's predictive
    scores and notes, each headed by backend and kind, so that neither needs a horizontal scroll at 1280 px."""
    from bayeszoo.diagnostics.metrics import TABLE_COLUMNS

    keys = ["backend", "kind"]
    sampling = [c for c in table.columns if c in _GROUP_OF]
    scores = keys + [c for c in table.columns if c not in TABLE_COLUMNS and c not in _HIDDEN_COLUMNS]
    return sampling + ["error"], (scores + ["error"] if len(scores) > len(keys) else [])


def table_html(table, comparison=None, columns=None) -> str:
    """The comparison table (or its ``columns``) as HTML with flags: R-hat >= RHAT_MAX and divergences > 0
    highlighted, R-hat and ESS per second of approximations shown as not applicable, the accuracy columns shown as
    "untrusted" when the reference fails its validation rules and as "reference" in the reference's own row, a
    failed backend's row holding its error message."""
    from bayeszoo.diagnostics.metrics import ACCURACY_COLUMNS

    columns = columns or split_columns(table)[0]
    cols = [c for c in columns if c in table.columns and c not in _HIDDEN_COLUMNS]
    head = _head_rows(cols, getattr(comparison, "targets", DEFAULT_TARGETS))
    reference_label = getattr(comparison, "reference_cell", None)
    reference = getattr(comparison, "reference", None)
    untrusted_reference = getattr(reference, "trusted", None) is False
    rows = []
    for _, row in table.iterrows():
        error = str(row.get("error", "") or "").strip()
        flag = row.get("reference_trusted")
        untrusted = untrusted_reference or (isinstance(flag, (bool, np.bool_)) and not flag)
        cells = []
        for i, c in enumerate(cols):
            value = row[c]
            if error and c not in ("backend", "kind"):  # failed: the rest of the row is the message
                cells.append((str(len(cols) - i), "err", f"error: {error}"))
                break
            cls = "txt" if c in _TEXT_COLUMNS else "wrap" if c == "note" else ""
            text = _fmt(c, value)
            if c in ACCURACY_COLUMNS and reference_label is not None and row.get("backend") == reference_label:
                cls, text = "na", "reference"
            elif c in LOO_COLUMNS and _loo_note(row):
                cls, text = "na", POINT_ESTIMATE
            elif c in ACCURACY_COLUMNS and untrusted:
                cls = "untrusted"   # the number, greyed: measured against a posterior that may be wrong
            elif c in ("rhat_max", "ess_bulk_per_s") and row.get("kind") == "approximation":
                cls, text = "na", NOT_APPLICABLE
            elif c == "rhat_max" and not _is_missing(value) and float(value) >= RHAT_MAX:
                cls = "flag"
                text += " ⚠"
            elif c in ("divergences", "pareto_k_bad") and not _is_missing(value) and float(value) > 0:
                cls = "flag"
                text += " ⚠"
            elif c == "converged" and value is False:
                cls = "flag"
                text += " ⚠"
            elif c in ("seconds_to_target", "seconds_to_precise") and flagged(row) and not _is_missing(value):
                # the flag beside the time: measured, and ranked after every fit whose diagnostics pass
                cells.append((c, "flag", text + " ⚠", f"its own diagnostics fail "
                              f"({row.get('convergence_problems') or 'see converged'}): ranked after every fit "
                              f"whose diagnostics pass"))
                continue
            cells.append((c, cls, text))
        rows.append(f'<tr class="{"failed" if error else ""}">{_merged(cells)}</tr>')
    return (f'<div class="scroll"><table class="cmp"><thead>{head}</thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _truncated(value, limit: int = 120) -> str:
    """A meta value as text, long ones (per-feature statistics, name lists) cut to ``limit`` characters."""
    text = str(value)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


SHORT_VALUE = 40   # meta values longer than this (arrays, name lists) go to a folded block


def _describe(value) -> str:
    """A long meta value in a few words: an array's shape, a list's length, then its start."""
    if isinstance(value, np.ndarray):
        flat = np.ravel(value)
        head = np.array2string(flat[:6], precision=4, separator=", ")[1:-1] + (", …" if flat.size > 6 else "")
        return f"array {' × '.join(map(str, value.shape))} ({value.dtype}): [{head}]"
    if isinstance(value, (list, tuple)):
        return f"{len(value)} items: {_truncated(value, 100)}"
    return _truncated(value, 160)


def _is_short(value) -> bool:
    return not isinstance(value, (np.ndarray, list, tuple, dict)) and len(str(value)) <= SHORT_VALUE


def _spec_value(value) -> str:
    """One setting of a model's spec in plain words: numbers in short form, sequences and mappings listed."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_spec_value(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_spec_value(v) for v in value)
    return str(value)


def _sizes(dims, shape) -> str:
    """A variable's dims with their sizes, "school: 8", or "scalar"."""
    return ", ".join(f"{d}: {n}" for d, n in zip(dims, shape)) or "scalar"


def model_rows(model) -> list[tuple[str, str]]:
    """The model's spec as (setting, value) rows in plain words: a built-in family's settings one per row; a model
    of one's own by its name and library, its posterior variables with their sizes, its observed variables and
    its fingerprint (the JSON spec is what a saved fit carries)."""
    try:
        spec = model.spec()
    except Exception:   # a model that cannot describe itself still gets its name
        return [("model", type(model).__name__)]
    if spec.get("family") == USER_FAMILY:
        library = LIBRARY_NAMES.get(spec.get("library"), spec.get("library"))
        variables = "; ".join(f"{name} ({_sizes(v['dims'], v['shape'])})"
                              for name, v in spec.get("variables", {}).items())
        observed = "; ".join(f"{name} ({' × '.join(map(str, shape)) or 'scalar'})"
                             for name, shape in spec.get("observed", {}).items())
        return [("model", f"{spec.get('name')}, a {library} model of one's own"),
                ("posterior variables", _truncated(variables, 300)), ("observed", _truncated(observed, 300)),
                ("fingerprint", str(spec.get("fingerprint", ""))[:12])]
    rows = [("model", f"{type(model).__name__} ({spec.get('family', '?')} family)")]
    rows += [(str(k), _truncated(_spec_value(v), 120)) for k, v in spec.items() if k != "family"]
    return rows


def data_rows(data, model) -> tuple[list[tuple[str, str]], dict]:
    """The dataset as (item, value) rows, and its long meta values (arrays, name lists) to fold away. A model of
    one's own carries its observations and has no inputs: its size is the number of observed values."""
    meta = dict(data.meta or {})
    if getattr(model, "family", None) == USER_FAMILY:
        for key in ("model", "observed"):   # the model table names it and its observed variables' shapes
            meta.pop(key, None)
        items = [("dataset", data.name), ("observed values", str(data.n))]
    else:
        items = [("dataset", data.name), ("training points", f"{data.n} × {data.d}"),
                 ("test points", str(data.X_test.shape[0]))]
    described = ("task", "source", "licence", "license", "citation", "preprocessing")
    for key in described:
        if key in meta and meta[key] not in (None, ""):
            items.append((key, str(meta[key])))
    classes = classes_text(meta)
    if classes:   # which label is which number
        items.append(("classes", _truncated(classes, 160)))
    others = {k: v for k, v in meta.items() if k not in described and not (k == "classes" and classes)}
    short = {k: v for k, v in others.items() if _is_short(v)}
    long = {k: v for k, v in others.items() if k not in short}
    if short:
        items.append(("options", ", ".join(f"{k}={v}" for k, v in short.items())))
    return items, long


def meta_html(comparison) -> str:
    """The model and the data, side by side: two tables of settings, and the data's long values folded away."""
    items, long = data_rows(comparison.data, comparison.model)

    def table(caption, rows):
        body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
        return f'<table class="meta"><caption>{caption}</caption>{body}</table>'

    out = (f'<div class="meta-pair">{table("Model", model_rows(comparison.model))}'
           f'{table("Data", items)}</div>')
    if long:
        inner = "".join(f"<tr><th>{html.escape(str(k))}</th><td><code>{html.escape(_describe(v))}</code></td></tr>"
                        for k, v in long.items())
        out += (f'<details class="more"><summary>more about the data: {html.escape(", ".join(map(str, long)))}'
                f'</summary><table class="meta">{inner}</table></details>')
    return out


def verdict_html(comparison) -> str:
    """The comparison's verdict (``Comparison.verdict``) as the report's and the notebook block's first lines."""
    try:
        text = comparison.verdict()
    except Exception as exc:  # the rest of the report is still worth showing
        return note(f"verdict could not be computed ({type(exc).__name__}: {first_line(exc)})")
    return f'<p class="verdict"><strong>Verdict.</strong> {html.escape(text)}</p>' if text else ""


def _num(value, digits: int = 4) -> str:
    if value is None or _is_missing(value):
        return "?"
    return f"{value:.{digits}g}" if isinstance(value, (float, np.floating)) else str(value)


def _provenance_parts(prov: dict) -> list[str]:
    """Engine, draws, R-hat max and smallest ESS of a reference's run, as short phrases."""
    run = prov.get("run", {}) or {}
    diag = prov.get("diagnostics", {}) or {}
    pick = lambda key: run.get(key, prov.get(key))   # noqa: E731  (flat provenance dicts too)
    parts = []
    engine = pick("engine")
    if engine is not None:
        chains = pick("chains")
        draws = f"{chains} chain{'' if chains == 1 else 's'} × {pick('draws')} draws" if pick("draws") else ""
        counts = ", ".join(p for p in (str(pick("kind") or ""), draws) if p)
        parts.append(f"engine {engine}" + (f" ({counts})" if counts else ""))
    if diag or "rhat_max" in prov:   # None there: not computable (one chain, an approximation)
        rhat = diag.get("rhat_max", prov.get("rhat_max"))
        ess, tail = diag.get("ess_bulk_min", prov.get("ess_bulk_min")), diag.get("ess_tail_min")
        parts.append(f"R-hat max {'n/a' if rhat is None or _is_missing(rhat) else f'{float(rhat):.4f}'}")
        parts.append(f"min bulk ESS {'n/a' if ess is None else _num(ess, 5)}"
                     + (f", tail {_num(tail, 5)}" if tail is not None else ""))
    check = prov.get("crosscheck")
    if isinstance(check, dict) and check.get("run"):
        agree = check.get("agreement", {}) or {}
        parts.append(f"cross-checked by {check['run'].get('engine', '?')} (largest difference "
                     f"{_num(agree.get('z_max'), 3)} combined MCSEs, limit {_num(agree.get('z_limit'), 3)})")
    elif prov.get("cross_checked") is False:
        parts.append("not cross-checked by a second engine")
    parts += reruns(prov)
    if prov.get("source"):
        parts.append(f"source: {prov['source']}")
    return parts


#: the guide page on references (a built-in family's own page, ``Family.page``, says it for that family)
REFERENCE_GUIDE = "docs/guide/reference.md"


def reference_page(family) -> str:
    """The documentation page that says how to get a trusted reference for a model of ``family``: the family's
    own page for a built-in family, the reference guide for a model of one's own (which has no family page)."""
    from bayeszoo.models import families

    declared = families().get(family)
    return declared.page if declared is not None else REFERENCE_GUIDE


def untrusted_advice(family) -> tuple[str, ...]:
    """What to try when a reference breaks its rules, for a model of ``family`` (the model's ``reference_advice``
    adds its own)."""
    build = (f"Build a cross-checked reference first, bz.build_reference(model, data), and pass it as reference= "
             f"({REFERENCE_GUIDE}).")
    if family in (None, USER_FAMILY):
        where = REFERENCE_GUIDE
    else:
        where = reference_page(family)
        build = ("Use a catalogue problem, whose reference two engines have validated (bayeszoo.catalogue), or "
                 + build[0].lower() + build[1:])
    return ("Run the reference longer: more draws and tune (reference_draws=, or options={'nuts': {...}}), four "
            "chains.",
            f"Divergences: raise target_accept (options={{'nuts': {{'target_accept': 0.95}}}}) or use a "
            f"reparameterised or better-conditioned model ({where} says how).",
            build)


def reference_banner(reference, advice: str = "", *, cell: str | None = None, family: str | None = None) -> str:
    """The box at the top of the report: the reference's name and provenance, and whether its numbers can be
    trusted (red, with every rule it breaks and what to try, ``advice`` the family's own, when they cannot).
    ``cell`` is the grid label of the reference's own run when a grid member is the reference (one run, checked
    by nothing else in the grid); ``family`` the model's, for the page the advice points to."""
    from bayeszoo.diagnostics.metrics import ACCURACY_COLUMNS

    if reference is None:
        return ('<div class="banner none"><strong>No reference posterior.</strong> The accuracy columns are '
                'empty, nothing is ranked, and the speed figure shows ESS per second of the MCMC fits only. To get '
                'one: <code>bz.build_reference(model, data)</code> builds a cross-checked one to pass as '
                '<code>reference=</code>; <code>reference="nuts"</code> (or another backend) uses a single run in '
                'the grid; a catalogue problem brings its own (<code>bayeszoo.catalogue</code>). See '
                f'<code>{REFERENCE_GUIDE}</code>.</div>')
    prov = dict(getattr(reference, "provenance", {}) or {})
    parts = _provenance_parts(prov)
    head = (f"<strong>Reference posterior: {html.escape(str(reference.name))}</strong>"
            + (f" — {html.escape(' · '.join(parts))}" if parts else ""))
    if cell is not None:
        head += (f"<p>The reference is this grid's own <code>{html.escape(cell)}</code> run: a <strong>single run, "
                 f"not cross-checked</strong> by a second engine, and its row shows <em>reference</em> instead of "
                 f"an error against itself. For a reference that two engines agree on, build one first with "
                 f"<code>bz.build_reference(model, data)</code> and pass it as <code>reference=</code> "
                 f"(<code>{REFERENCE_GUIDE}</code>).</p>")
    trusted = getattr(reference, "trusted", None)
    columns = ", ".join(f"<code>{c}</code>" for c in ACCURACY_COLUMNS)
    if trusted is False:
        problems = "".join(f"<li>{html.escape(str(p))}</li>" for p in getattr(reference, "problems", []))
        tries = "".join(f"<li>{html.escape(t)}</li>"
                        for t in (*untrusted_advice(family), *([advice] if advice else [])))
        return (f'<div class="banner bad">{head}<p><strong>UNTRUSTED REFERENCE</strong>: it breaks the validation '
                f'rules below, so the accuracy columns ({columns}) are greyed (measured against a posterior that '
                f'may be wrong) and nothing is ranked.</p><ul>{problems}</ul><p><strong>What to try</strong></p>'
                f'<ul>{tries}</ul></div>')
    if trusted is None:
        return (f'<div class="banner unchecked">{head}<p>A fit given as the reference: its draws\' means and sds '
                f'are used as they are, and no validation rule (R-hat, ESS, MCSE, divergences, a second engine) '
                f'has checked them.</p></div>')
    if prov.get("cross_checked") is False or cell is not None:   # one run's rules hold; nothing confirms it
        lead = "It" if cell is not None else "<strong>Single run, not cross-checked</strong>: it"
        return (f'<div class="banner unchecked">{head}<p>{lead} passes the single-run validation rules (R-hat, ESS, '
                f'MCSE, no divergences), but no second engine has confirmed that it samples this posterior.</p>'
                f'</div>')
    return f'<div class="banner ok">{head} · passes the validation rules.</div>'


def comparison_banner(comparison) -> str:
    """The reference banner of ``comparison`` (:func:`reference_banner`), as the report and the notebook block
    show it."""
    model = comparison.model
    return reference_banner(comparison.reference, getattr(model, "reference_advice", ""),
                            cell=comparison.reference_cell, family=getattr(model, "family", None))


def _reference_sentence(comparison, reference) -> str:
    from bayeszoo.diagnostics.metrics import compared_components, noise_max

    if reference is None:
        return ("There is no reference posterior, so the accuracy columns are empty and nothing is ranked. To get "
                "one: <code>reference=\"nuts\"</code> (or another backend) runs it in the grid, a Fit or a saved "
                "reference can be given, and a catalogue problem brings its own "
                "(<code>bayeszoo.catalogue</code>).")
    variables = ", ".join(f"<code>{html.escape(v)}</code>" for v in comparison.model.compare_vars)
    names = list(comparison.model.compare_vars) or list(comparison.model.var_dims(comparison.data))
    d = compared_components(reference, names)
    c = noise_max(d)
    rough, precise = getattr(comparison, "targets", DEFAULT_TARGETS)
    return (f"Accuracy is measured against the reference <code>{html.escape(str(reference.name))}</code> over all "
            f"components of {variables or 'the canonical variables'}: b² of a mean is "
            f"(mean − mean<sub>ref</sub>)² / var<sub>ref</sub>, of an sd (sd − sd<sub>ref</sub>)² / "
            f"var<sub>ref</sub>; <code>bias2_mean_max</code> and <code>bias2_sd_max</code> are their largest values "
            f"and <code>mean_err</code>, <code>sd_err</code> their square roots (in reference sds). "
            f"<code>ess_ref</code> is the number of exact posterior draws the fit's error is worth, "
            f"c / max(b²<sub>mean</sub>, 2·b²<sub>sd</sub>) with c = {c:.3g}, the median of that maximum for one "
            f"exact draw over these {d} components (so n exact draws are worth n), at most the fit's own bulk ESS "
            f"(MCMC) or its number of draws (approximation), and 0 when below one draw: a biased approximation is "
            f"worth little however fast it ran. <code>ess_ref_per_s</code> divides it by the total wall time; "
            f"<code>seconds_to_target</code> and <code>seconds_to_precise</code> are the wall time after which "
            f"the fit's estimate is worth {rough} exact draws (the rough target: b² ≤ {c / rough:.3g}, a worst "
            f"mean about {math.sqrt(c / rough):.2g} reference sds off) and {precise} (the precise target: "
            f"b² ≤ {c / precise:.3g}, about {math.sqrt(c / precise):.2g} sds) and stays so (∞: never), what the "
            f"figure and the verdict rank by (<code>bz.compare(targets=({rough}, {precise}))</code>); "
            f"<code>ess_per_grad</code> is an MCMC fit's bulk ESS per gradient evaluation.")


def _components_sentence(comparison, components) -> str:
    """What the per-backend plots show, in words that fit this comparison."""
    from bayeszoo.diagnostics import plots

    names = ", ".join(plots.component_label(n, s) for n, s in components)
    vectors = sorted({n for n, sel in components if sel})
    scalars = [n for n, sel in components if not sel]
    parts = []
    if scalars:
        parts.append("the scalar variables " + ", ".join(scalars))
    for name in vectors:
        k = sum(1 for n, sel in components if n == name)
        source = "the reference" if comparison.reference is not None else "the first fit"
        parts.append(f"the {k} components of {name} with the largest posterior |mean| in {source}")
    text = f"Components shown: {names} ({'; '.join(parts)})."
    if comparison.reference is not None:
        text += " Each fit's marginal histograms are drawn over the reference's, in grey."
    return text


def _fit_summary(fit) -> str:
    timing = ", ".join(f"{k} {float(v):.2f}s" for k, v in fit.timing.items() if isinstance(v, (int, float)))
    parts = [f"{fit.kind}", f"{fit.n_chains} chain(s) × {fit.n_draws} draws", timing]
    info = fit.info   # a Fit always carries the keys of bayeszoo.results.INFO_KEYS
    for key in ("converged", "iterations", "n_grad", "divergences"):
        if info[key] is not None:
            parts.append(f"{key} = {info[key]}")
    text = " · ".join(html.escape(p) for p in parts if p)
    if info["warnings"]:
        text += "".join(note(f"warning: {w}") for w in info["warnings"][:5])
    return f'<p class="small">{text}</p>'


def _scores_sentence(model, table, scores: list[str]) -> str:
    """What the predictive scores table holds: the PSIS-LOO columns, the Pareto k warnings, the family's own
    metrics."""
    parts = []
    if any(c in LOO_COLUMNS for c in scores):
        parts.append("<code>elpd_loo</code> is ArviZ's PSIS-LOO estimate (<code>az.loo</code>, Pareto-smoothed "
                     "importance sampling over each fit's draws) of the expected log predictive density of the "
                     "training observations, each left out in turn, with its standard error and "
                     "<code>p_loo</code>, the effective number of parameters; – where a fit has no "
                     "<code>log_likelihood</code> group.")
        if "loo_note" in table.columns:
            points = [str(r["backend"]) for _, r in table.iterrows() if _loo_note(r)]
            if points:
                parts.append(f"<strong>Left out</strong> for {html.escape(', '.join(points))}: "
                             f"{html.escape(POINT_ESTIMATE_LOO)} (the cells read <em>{POINT_ESTIMATE}</em>).")
        if "pareto_k_bad" in table.columns:
            bad = [(str(r["backend"]), int(r["pareto_k_bad"])) for _, r in table.iterrows()
                   if not _is_missing(r.get("pareto_k_bad")) and float(r["pareto_k_bad"]) > 0]
            if bad:
                listed = "; ".join(f"{html.escape(b)} ({k} observation{'s' if k != 1 else ''})" for b, k in bad)
                parts.append(f"<strong>Pareto k above {PARETO_K_MAX}</strong>, so elpd_loo is unreliable, for: "
                             f"{listed}. Those observations are too influential for importance sampling from "
                             f"the draws (or the draws are an approximation's): refit with "
                             f"each left out (K-fold) or use a more robust model.")
    own = [c for c in scores if c not in LOO_COLUMNS and c not in ("backend", "kind", "note", "error")]
    if own:
        parts.append(f"The other columns are the {html.escape(str(getattr(model, 'family', '?')))} family's own "
                     f"metrics on the test set (the training set if there is none), computed by the model's "
                     f"<code>score</code> from each fit's draws.")
    return " ".join(parts)


def _sbc_sentence() -> str:
    return ("<p>Each backend fitted datasets simulated from the model's prior predictive (the inputs of this "
            "comparison's data, new observations), and each simulated true value was ranked among its fit's "
            "thinned posterior draws (Talts et al. 2018). A backend that samples the posterior gives uniform "
            "ranks: the ECDF of the fractional ranks minus the uniform CDF stays inside the simultaneous band "
            "(Säilynoja, Bürkner and Vehtari 2022), drawn in each panel. A component fails when it leaves its band; "
            "the bands are Bonferroni-corrected over the components, so a calibrated backend passes with the "
            "stated family-wise probability. A dip then a hump (too few low and too few high ranks) means a "
            "posterior too wide; a hump then a dip, too narrow; a difference of one sign throughout, a shifted "
            "mean.</p>")


# --------------------------------------------------------------------------------------------- main
def write_report(comparison, path: str) -> str:
    """Write the HTML report of ``comparison`` to ``path`` (atomically: :func:`bayeszoo.results.write_atomically`)
    and return the path."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return write_atomically(path, report_html(comparison))


def report_html(comparison) -> str:
    """The self-contained HTML report of ``comparison``: its head and verdict, the table, accuracy against time,
    calibration, the model's picture, objective traces, and each backend's figures."""
    images = Images()
    out = _head_html(comparison)
    table = _table_section(comparison, out)
    _speed_section(comparison, table, images, out)
    _calibration_section(comparison, images, out)
    _picture_section(comparison, images, out)
    _per_backend_section(comparison, images, out)
    out.append("<p class='small'>Generated by bayeszoo. Self-contained: figures are embedded PNG images.</p>")
    out.append("</body></html>")
    return "\n".join(out)


def _head_html(comparison) -> list[str]:
    """The report's opening: title, what ran, the verdict, the banner and the run's details (a list to extend)."""
    model, data = comparison.model, comparison.data
    title = (f"{type(model).__name__} on {data.name}" if getattr(model, "family", None) != USER_FAMILY else
             f"{model.name}, a {LIBRARY_NAMES.get(model.library, model.library)} model of one's own")
    out = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
           f"<title>bayeszoo: {html.escape(title)}</title><style>{CSS}</style></head><body>",
           f"<h1>bayeszoo comparison: {html.escape(title)}</h1>",
           f"<p class='small'>written {time.strftime('%Y-%m-%d %H:%M')} · backends: "
           f"{html.escape(', '.join(comparison.order or list(comparison.fits)))}</p>",
           verdict_html(comparison),
           comparison_banner(comparison),
           meta_html(comparison)]
    return out


def _table_section(comparison, out: list):
    """The comparison table, its glossary and predictive scores, and the failed backends; the table (None if it
    could not be computed)."""
    from bayeszoo.diagnostics.metrics import ESS_METHOD

    model, reference = comparison.model, comparison.reference
    out.append("<h2>Comparison table</h2>")
    try:
        table = comparison.table()
        sampling, scores = split_columns(table)
        out.append(table_html(table, comparison, sampling))
        out.append(glossary_html(comparison.targets))
    except Exception as exc:
        table, scores = None, []
        out.append(note(f"table could not be computed ({type(exc).__name__}: {first_line(exc)})"))
    out.append(f"<p>ESS estimator: {html.escape(ESS_METHOD)}. <code>ess_bulk_per_s</code> divides the smallest "
               f"bulk ESS over all components of the canonical variables by the fit's total wall time "
               f"(compile + tune + sample). R-hat (rank-normalised, split) is computed for MCMC fits with "
               f"two or more chains only. Both are {NOT_APPLICABLE} for an approximation: its draws are i.i.d., "
               f"so R-hat cannot judge them and their ESS only counts them, whatever the approximation's bias. "
               f"R-hat &ge; {RHAT_MAX} and divergences &gt; 0 are flagged in red. An MCMC fit is "
               f"<code>converged</code> when its R-hat is below {RHAT_MAX}, its smallest bulk ESS at least "
               f"{ESS_PER_CHAIN_MIN} per chain and it has no divergences; one that is not is ranked after every fit "
               f"that is, its times flagged ⚠.</p>")
    out.append(f"<p>{_reference_sentence(comparison, reference)}</p>")
    if scores:
        out.append("<h3>Predictive scores</h3>")
        out.append(table_html(table, comparison, scores))
        out.append(f"<p>{_scores_sentence(model, table, scores)}</p>")
    if comparison.errors:
        out.append("<h3>Failed backends</h3>")
        for label, err in comparison.errors.items():
            out.append(f"<details open><summary><code>{html.escape(label)}</code>: "
                       f"{html.escape(str(err).strip().splitlines()[0] if str(err).strip() else 'failed')}"
                       f"</summary><pre>{html.escape(str(err))}</pre></details>")
    return table


def _speed_section(comparison, table, images: Images, out: list) -> None:
    """Accuracy against wall time when there is a reference, else the samplers' ESS per second."""
    from bayeszoo.diagnostics import plots

    reference = comparison.reference
    if reference is not None:
        out.append("<h2>Accuracy against wall time</h2>")
        out.append(images.render("accuracy against wall time",
                                 lambda: plots.accuracy_figure(comparison, reference, table))
                   or note("no fit other than the reference's own could be measured against it"))
        out.append("<p>Left, log-log: the worst squared bias max(b²<sub>mean</sub>, 2·b²<sub>sd</sub>) over the "
                   "compared components against wall time; the right axis reads it as the number of exact "
                   "posterior draws the estimate is worth (<code>ess_ref</code> without its bound). Each MCMC fit is a line: its running means and sds over "
                   "the kept draws, chains pooled, at compile + tune + the matching fraction of its sampling time. "
                   "Each approximation is one marker at its total time; it does not improve with more time. The "
                   "reference's own run is not drawn. Right, the ranking: the wall time after which a fit's "
                   f"estimate is worth {comparison.targets[0]} exact draws (the rough target, light bars) and "
                   f"{comparison.targets[1]} (the precise target, solid bars; the dotted green lines on the left) "
                   "and stays so, fastest to the precise target first; a fit that never gets there ranks below, "
                   "with what it is worth, and an MCMC fit whose own diagnostics fail ranks after every fit "
                   "whose diagnostics pass, hatched, with its times and \"not converged\" beside them.</p>")
    elif table is not None:
        out.append("<h2>ESS per second</h2>")
        out.append(images.render("ESS per second", lambda: plots.ess_per_second_bars(table))
                   or note("no MCMC fit has a finite ESS per second"))


def _calibration_section(comparison, images: Images, out: list) -> None:
    """Simulation-based calibration, when ``bz.sbc`` results were attached (``Comparison.attach_sbc``)."""
    calibration = getattr(comparison, "calibration", None) or {}
    if calibration:
        out.append("<h2>Simulation-based calibration</h2>")
        out.append(_sbc_sentence())
        for backend, result in calibration.items():
            out.append(f'<div class="backend"><h3>{html.escape(backend)}</h3>{result.html()}')
            if len(result.ranks):
                out.append(images.render(f"{backend}: SBC ECDF differences", result.plot))
            out.append("</div>")


def _picture_section(comparison, images: Images, out: list) -> None:
    """The family's picture of every fit against the reference, and the objective traces."""
    from bayeszoo.diagnostics import plots

    model, reference = comparison.model, comparison.reference
    out.append("<h2>The model's picture</h2>")
    family = getattr(model, "family", "?")
    if family == USER_FAMILY:
        out.append("<p>A model of one's own (<code>bz.models.from_pymc</code> / <code>from_numpyro</code>) has no "
                   "picture of a family: its variables are drawn per backend below (traces, ranks, marginals).</p>")
    else:
        why = (f"the {family} family's picture compares every fit with the reference posterior, and this "
               f"comparison has none (see the banner for how to get one)" if reference is None else
               f"no picture for the {family} family")
        out.append(images.render("family picture", lambda: plots.family_picture(comparison)) or note(why))
    obj = images.render("objective traces", lambda: plots.objective_figure(comparison))
    if obj:
        out.append("<h2>Objective traces (ELBO / log evidence)</h2>")
        out.append(obj)


def _per_backend_section(comparison, images: Images, out: list) -> None:
    """Each backend's summary with its trace, rank (MCMC) and marginal (against the reference) figures."""
    from bayeszoo.diagnostics import plots

    out.append("<h2>Per backend</h2>")
    try:
        components = plots.select_components(comparison)
    except Exception as exc:
        components = []
        out.append(note(f"components to plot could not be chosen ({type(exc).__name__}: {first_line(exc)})"))
    if components:
        out.append(f"<p>{html.escape(_components_sentence(comparison, components))}</p>")
    colors = plots.backend_colors([lbl for lbl in (comparison.order or list(comparison.fits))
                                   if lbl in comparison.fits])
    ref = plots.reference_fit(comparison)
    if comparison.reference is not None and ref is None and components:
        out.append(note(f"the reference {comparison.reference.name!r} holds moments only (published without its "
                        f"draws): no marginals are drawn against it"))
    for label in comparison.order or list(comparison.fits):
        if label not in comparison.fits:
            continue
        fit = comparison.fits[label]
        out.append(f'<div class="backend"><h3>{html.escape(label)}</h3>{_fit_summary(fit)}')
        if components:
            out.append(images.render(f"{label}: trace plot", lambda: plots.trace_figure(fit, components))
                       or note(f"{label}: no varying component to trace (point estimates)"))
            if fit.kind == "mcmc" and fit.n_chains >= 2:
                out.append(images.render(f"{label}: rank plot", lambda: plots.rank_figure(fit, components)))
            if ref is not None and fit is not ref:
                out.append(images.render(f"{label}: marginals vs reference",
                                         lambda: plots.marginals_figure(fit, ref, components,
                                                                        color=colors.get(label, "#1f77b4"),
                                                                        label=label)))
        out.append("</div>")
