"""Figures of the comparison report.

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot (so the report never
touches the user's interactive backend) or ``None`` when it has nothing to draw. :func:`family_picture`
dispatches on ``model.family`` to the family's own picture (RVM: fitted curve with the relevance vectors,
decision boundaries, or the posterior |w| per basis).
"""
from __future__ import annotations

import base64
import importlib
import io
import math
import re

import matplotlib as mpl
import numpy as np
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

N_TOP_WEIGHTS = 4          # vector components shown in trace / rank / marginal plots
MAX_PRED_DRAWS = 400       # posterior draws used for bands and fallback predictions
DPI = 72

_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf"]


# ------------------------------------------------------------------------------------------- helpers
def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def figure_to_base64(fig: Figure, dpi: int = DPI) -> str:
    """PNG of ``fig`` as base64 text (for ``<img src="data:image/png;base64,...">``)."""
    buf = io.BytesIO()
    if fig.canvas is None or not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    # the figure is laid out already: tight_layout leaves a placeholder layout engine behind, and savefig lays out
    # (draws without rendering) a figure with any engine once more before drawing it, so the engine goes first
    with mpl.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)
    fig.savefig(buf, format="png", dpi=dpi)  # not bbox_inches="tight": that would draw twice too
    _close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _close(fig):
    try:  # a figure made by pyplot (e.g. inside ArviZ) must be released from pyplot's registry
        import matplotlib.pyplot as plt

        plt.close(fig)
    except Exception:
        pass


def backend_colors(labels) -> dict[str, str]:
    return {label: _PALETTE[i % len(_PALETTE)] for i, label in enumerate(labels)}


def fit_labels(comparison) -> list[str]:
    """The labels of the comparison's fits, in the grid's order."""
    order = comparison.order or list(comparison.fits)
    return [label for label in order if label in comparison.fits]


def reference_fit(comparison):
    """The reference's draws (a cell's fit, or a catalogue entry's thinned draws), or None."""
    return None if comparison.reference is None else comparison.reference.fit


def reference_label(comparison) -> str | None:
    """The reference's cell label if it ran as a cell, else its name; None without a reference."""
    return None if comparison.reference is None else comparison.reference_cell or comparison.reference.name


def flat_draws(fit, name) -> np.ndarray:
    """Draws of ``name`` with chains and draws merged into the first axis."""
    arr = fit.idata.posterior[name].values
    return arr.reshape(-1, *arr.shape[2:])


# ---------------------------------------------------------------------------------- components shown
def select_components(comparison, n_top: int = N_TOP_WEIGHTS) -> list[tuple[str, dict]]:
    """A few scalar components to plot: every scalar canonical variable (e.g. ``log_beta``) and the
    ``n_top`` entries of the first vector variable (``w``) with the largest posterior |mean| (taken from
    the reference, else from the first fit). Returns ``[(var, {dim: coord}), ...]``."""
    model, data = comparison.model, comparison.data
    var_dims = dict(model.var_dims(data))
    base = reference_fit(comparison) or next(iter(comparison.fits.values()), None)
    if base is None:
        return []
    post = base.idata.posterior
    chosen: list[tuple[str, dict]] = []
    preferred = [v for v in (list(getattr(model, "compare_vars", ())) or list(var_dims)) if v in var_dims]
    vector_vars = [v for v in preferred + list(var_dims) if len(var_dims[v]) == 1 and v in post]
    if vector_vars:
        name = vector_vars[0]
        dim = var_dims[name][0]
        arr = post[name].values.reshape(-1, post[name].shape[-1])
        with np.errstate(invalid="ignore"):
            score = np.abs(np.nanmean(np.where(np.isfinite(arr), arr, np.nan), axis=0))
        score = np.where(np.isfinite(score), score, -1.0)
        top = np.argsort(-score, kind="stable")[:n_top]
        coords = post[name].coords[dim].values
        chosen += [(name, {dim: coords[i].item()}) for i in sorted(top)]
    for name, dims in var_dims.items():
        if len(dims) == 0 and name in post:
            chosen.insert(0, (name, {}))
    return chosen


def component_label(name: str, sel: dict) -> str:
    return name if not sel else f"{name}[{', '.join(str(v) for v in sel.values())}]"


def selected_dataset(fit, components) -> xr.Dataset | None:
    """The chosen components of ``fit.idata.posterior`` as scalar (chain, draw) variables."""
    post = fit.idata.posterior
    out = {}
    for name, sel in components:
        if name not in post:
            continue
        try:
            da = post[name].sel(sel) if sel else post[name]
        except (KeyError, IndexError, ValueError):
            continue
        if set(da.dims) != {"chain", "draw"}:
            continue
        out[component_label(name, sel)] = da.drop_vars([c for c in da.coords if c not in ("chain", "draw")])
    return xr.Dataset(out) if out else None


def _finite_varying(values: np.ndarray) -> bool:
    v = values[np.isfinite(values)]
    return v.size > 1 and np.ptp(v) > 0


# ------------------------------------------------------------------------------------------ figures
_KIND_COLORS = {"mcmc": "#4c72b0", "approximation": "#dd8452"}


NOT_CONVERGED = {"facecolor": "0.8", "hatch": "//", "edgecolor": "#b00000"}   # a fit whose own diagnostics fail


def _flags(table) -> np.ndarray:
    """Per row of ``table``: an MCMC fit whose own diagnostics fail (``converged`` False)."""
    if "converged" not in table:
        return np.zeros(len(table), dtype=bool)
    return np.array([value is False or value is np.False_ for value in table["converged"]], dtype=bool)


LEGEND_ROOM = 0.35   # inches under the plots for a legend that covers nothing


def _legend_below(fig, handles, ncol: int):
    """A legend at the foot of the figure, under the plots, so that it covers no bar and no label; the figure's
    layout keeps :data:`LEGEND_ROOM` for it (:func:`_layout`)."""
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8, frameon=False)


def _layout(fig, labelled=()):
    """``tight_layout`` with room for a legend at the foot, then each (axes, texts) of ``labelled`` given room on
    its right (:func:`_room_for_labels`)."""
    for _, texts in labelled:
        for text in texts:
            text.set_in_layout(False)   # the axes keep their size; the axis is widened for the labels instead
    fig.tight_layout(rect=(0, LEGEND_ROOM / fig.get_figheight() if fig.legends else 0, 1, 1))
    for ax, texts in labelled:
        _room_for_labels(ax, texts)


def _room_for_labels(ax, texts, pad: float = 4.0):
    """Widen the log x axis of ``ax`` until each of ``texts`` (placed at a bar's end, in data coordinates) ends
    inside the axes: a text at x spans the same pixels wherever it is, so the decades shown must grow until
    log(x / left) / decades of the axes' width leaves room for it."""
    texts = [t for t in texts if t.get_transform() == ax.transData]
    if not texts:
        return
    renderer = ax.figure.canvas.get_renderer()
    width = ax.get_window_extent(renderer).width
    left, right = ax.get_xlim()
    decades = math.log10(right / left)
    for text in texts:
        room = width - text.get_window_extent(renderer).width - pad
        x = text.get_position()[0]
        if room > 0.2 * width and x > left:
            decades = max(decades, math.log10(x / left) * width / room)
    ax.set_xlim(left, left * 10 ** decades)


def _short_problems(problems: str) -> str:
    """``convergence_problems`` without the limits in parentheses: "R-hat 1.118; 39 divergent transitions"."""
    return re.sub(r" \([^)]*\)", "", problems)


def ess_per_second_bars(table) -> Figure | None:
    """Horizontal bars of ESS (bulk, min) per second of the MCMC fits on a log scale: the speed figure when
    there is no reference to measure accuracy against (an approximation's ESS only counts its i.i.d. draws). A fit
    whose own diagnostics fail (``converged`` False) is listed after the others, hatched, with "not converged" and
    its problems beside its bar: its ESS is not to be trusted, so its speed ranks nothing."""
    from matplotlib.patches import Patch

    if "ess_bulk_per_s" not in table:
        return None
    df = table[["backend", "kind", "ess_bulk_per_s"]].copy()
    df["flagged"] = _flags(table)
    df["problems"] = table["convergence_problems"].fillna("") if "convergence_problems" in table else ""
    values = df["ess_bulk_per_s"].astype(float)
    df = df[np.isfinite(values) & (values > 0) & (df["kind"] == "mcmc")]
    if df.empty:
        return None
    df = df.sort_values(["flagged", "ess_bulk_per_s"], ascending=[True, False], kind="stable")
    fig = new_figure(7.5, 0.45 * len(df) + 1.2 + (LEGEND_ROOM if df["flagged"].any() else 0))
    ax = fig.add_subplot()
    y = np.arange(len(df))
    value = df["ess_bulk_per_s"].astype(float).to_numpy()
    labels = []
    for yi, v, bad, problems in zip(y, value, df["flagged"], df["problems"]):
        ax.barh(yi, v, **(NOT_CONVERGED if bad else {"facecolor": _KIND_COLORS["mcmc"]}))
        if bad:
            text = " not converged" + (f": {_short_problems(problems)}" if problems else "")
            labels.append(ax.text(v, yi, text, va="center", fontsize=9, color="#b00000"))
    ax.set_yticks(y, list(df["backend"]))
    for tick, bad in zip(ax.get_yticklabels(), df["flagged"]):
        if bad:
            tick.set_color("#b00000")
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(value.min() / 3, value.max() * 3)
    ax.set_xlabel("bulk ESS (min over components) per second, log scale")
    ax.grid(axis="x", alpha=0.3, which="both")
    if df["flagged"].any():
        _legend_below(fig, [Patch(facecolor=_KIND_COLORS["mcmc"], label="diagnostics pass"),
                            Patch(**NOT_CONVERGED, label="not converged: R-hat, ESS or divergences fail")], ncol=2)
    _layout(fig, [(ax, labels)])
    return fig


def _is_reference(comparison, label, fit, reference) -> bool:
    return fit is getattr(reference, "fit", None) or label == comparison.reference_cell


def accuracy_curves(comparison, reference) -> list[dict]:
    """What the accuracy figure draws, per fit other than the reference's own: ``label``, ``kind``,
    ``seconds`` and ``bias2`` (arrays: the running error of an MCMC fit; one value for an approximation)."""
    from bayeszoo.diagnostics.metrics import effective_bias2, reference_errors, running_bias2

    model, data = comparison.model, comparison.data
    names = list(model.compare_vars) or list(model.var_dims(data))
    out = []
    for label in fit_labels(comparison):
        fit = comparison.fits[label]
        if _is_reference(comparison, label, fit, reference):
            continue   # measured against itself: zero error by construction
        if fit.kind == "mcmc":
            run = running_bias2(fit, reference, names)
            seconds, b2 = run["seconds"], run["bias2"]
        else:
            err = reference_errors(fit, reference, names)
            seconds = np.array([fit.seconds])
            b2 = np.atleast_1d(effective_bias2(err["bias2_mean_max"], err["bias2_sd_max"]))
        out.append({"label": label, "kind": fit.kind, "seconds": np.asarray(seconds, dtype=float),
                    "bias2": np.asarray(b2, dtype=float)})
    return out


def accuracy_figure(comparison, reference, table) -> Figure | None:
    """Accuracy against wall time (left) and bias-aware ESS per second (right).

    Left, log-log: y is the worst squared bias max(b2 of the means, 2 x b2 of the sds) over the compared
    components, in reference-variance units (``bayeszoo.diagnostics.metrics``), so 1 / y is the number of exact
    posterior draws the estimate is worth (right-hand axis). An MCMC fit is a line: its running estimates over
    the kept draws, chains pooled, at compile + tune + the matching fraction of its sampling time. An
    approximation is one marker at its total time, and a dotted line marks the ranking's target. Right: the
    ranking, ``seconds_to_target`` from the table, fastest first."""
    from bayeszoo.diagnostics.metrics import compared_components, noise_max, reference_noise_floor

    if reference is None:
        return None
    curves = [c for c in accuracy_curves(comparison, reference) if np.any(np.isfinite(c["bias2"]) & (c["bias2"] > 0))]
    if not curves:
        return None
    colors = backend_colors(fit_labels(comparison))
    untrusted = getattr(reference, "trusted", None) is False
    fig = new_figure(12, 4.6)
    if untrusted:   # no ranking against a reference that may be wrong
        ax, bars = fig.subplots(1, 1), None
    else:
        ax, bars = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.5, 1]})
    for c in curves:
        ok = np.isfinite(c["bias2"]) & (c["bias2"] > 0) & (c["seconds"] > 0)
        x, y = c["seconds"][ok], c["bias2"][ok]
        if c["kind"] == "mcmc" and x.size > 1:
            ax.plot(x, y, color=colors.get(c["label"]), lw=1.6, label=c["label"])
            ax.plot(x[-1:], y[-1:], "o", color=colors.get(c["label"]), ms=4)
        else:
            ax.plot(x, y, "D" if c["kind"] == "approximation" else "o", color=colors.get(c["label"]), ms=8,
                    mec="k", mew=0.6, ls="none", label=f"{c['label']} ({c['kind']})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    names = list(comparison.model.compare_vars) or list(comparison.model.var_dims(comparison.data))
    one_draw = noise_max(compared_components(reference, names))   # the b2 one exact draw gives (median)
    for which, draws in zip(("rough", "precise"), comparison.targets):
        target = one_draw / draws
        ax.axhline(target, color="#2a7", lw=1, ls=":")
        ax.text(0.01, target, f" {which} target: worth {draws} exact draws (b² ≤ {target:.2g})",
                transform=ax.get_yaxis_transform(), fontsize=8, va="bottom", ha="left", color="#2a7")
    ax.axhline(one_draw, color="0.3", lw=1, ls=":")
    ax.text(0.5, one_draw, "one exact draw: a fit above this line is worth 0", transform=ax.get_yaxis_transform(),
            fontsize=8, va="top", ha="center", color="0.3")
    floor = reference_noise_floor(reference, names)
    if math.isfinite(floor) and floor > 0:
        ax.axhline(floor, color="0.5", lw=1, ls="--")
        ax.text(0.99, floor, "reference's own Monte-Carlo error ", transform=ax.get_yaxis_transform(), fontsize=9,
                va="bottom", ha="right", color="0.4")
    ax.set_xlabel("wall time, seconds (compile + tune + sampling so far)")
    ax.set_ylabel("worst squared bias: max(b²(mean), 2·b²(sd))\nin reference-variance units")
    worth = (lambda y: one_draw * _reciprocal(y))   # c / y is its own inverse
    ax.secondary_yaxis("right", functions=(worth, worth)).set_ylabel(f"exact draws worth ({one_draw:.2g} / y)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=9, loc="lower left")
    if untrusted:
        ax.set_title("REFERENCE UNTRUSTED: errors against a reference that fails validation; nothing is ranked",
                     color="#b00000", fontsize=10, fontweight="bold")
    else:
        ax.set_title(f"accuracy against wall time (reference: {getattr(reference, 'name', '?')})", fontsize=10)
        labels = _ranking_bars(bars, table, comparison.targets, skip=comparison.reference_cell)
    _layout(fig, [(bars, labels)] if bars is not None else [])
    return fig


def _reciprocal(x):
    with np.errstate(divide="ignore"):
        return 1.0 / np.asarray(x, dtype=float)


def _ranking_bars(ax, table, targets, skip=None):
    """The ranking: per fit, the seconds to the rough target (light bar) and to the precise one (solid bar) of
    ``targets`` on a log scale, fastest to the precise target first, then to the rough one; a fit that never
    reaches a target is listed below with what it is worth (``ess_ref``). An MCMC fit whose own diagnostics fail
    (``converged`` False) comes after every fit whose diagnostics pass, its bars hatched and "not converged"
    beside its times. The row ``skip`` (the reference's own run, exact by construction) is left out."""
    from matplotlib.patches import Patch

    if table is None or "seconds_to_target" not in table or "seconds_to_precise" not in table:
        ax.set_visible(False)
        return []
    df = table[["backend", "kind", "seconds_to_target", "seconds_to_precise", "ess_ref"]].copy()
    df["rough"] = df["seconds_to_target"].astype(float)
    df["precise"] = df["seconds_to_precise"].astype(float)
    df["flagged"] = _flags(table)
    df = df[~np.isnan(df["rough"]) & (df["backend"] != skip)]
    df = df.assign(worth=-df["ess_ref"].astype(float)).sort_values(["flagged", "precise", "rough", "worth"],
                                                                   kind="stable")
    if df.empty:
        ax.set_visible(False)
        return []
    y = np.arange(len(df))
    labels = []   # the texts at the bars' ends, for which the axis leaves room (_layout)
    times = np.concatenate([df["rough"], df["precise"]])
    reached = times[np.isfinite(times)]
    h = 0.4
    for yi, kind, rough, precise, worth, bad in zip(y, df["kind"], df["rough"], df["precise"], -df["worth"],
                                                     df["flagged"]):
        color = _KIND_COLORS.get(kind, "0.5")
        style = {**NOT_CONVERGED, "facecolor": color} if bad else {"facecolor": color}
        for dy, t, alpha in ((-h / 2, rough, 0.45), (h / 2, precise, 1.0)):
            if np.isfinite(t):
                ax.barh(yi + dy, t, height=h, alpha=alpha, **style)
        flag = ", not converged" if bad else ""
        red = {"color": "#b00000"} if bad else {}
        if not np.isfinite(rough):
            ax.text(0.02, yi, f"never (worth {worth:.3g} exact draws){flag}", va="center", fontsize=9,
                    color="#b00000", transform=ax.get_yaxis_transform())
            continue
        labels.append(ax.text(rough, yi - h / 2, f" {rough:.3g} s", va="center", fontsize=8, **red))
        if np.isfinite(precise):
            labels.append(ax.text(precise, yi + h / 2, f" {precise:.3g} s{flag}", va="center", fontsize=8, **red))
        else:
            labels.append(ax.text(rough, yi + h / 2, f" never the precise target (worth {worth:.3g} draws){flag}",
                                  va="center", fontsize=8, color="#b00000"))
    ax.set_yticks(y, list(df["backend"]))
    for tick, bad in zip(ax.get_yticklabels(), df["flagged"]):
        if bad:
            tick.set_color("#b00000")
    ax.set_ylim(len(df) - 0.5, -0.5)   # fastest on top; a full row each, so no spine strikes an end row's label
    ax.set_xscale("log")
    # room on the right for the labels beside the longest bars
    ax.set_xlim(reached.min() / 3 if reached.size else 1e-2, reached.max() * 3 if reached.size else 1.0)
    ax.xaxis.set_minor_formatter(NullFormatter())   # a narrow log range would label every minor tick
    rough, precise = targets
    ax.set_xlabel(f"seconds until worth {rough} (light) and {precise} (solid) exact draws")
    ax.grid(axis="x", alpha=0.3, which="both")
    handles = [Patch(facecolor=c, label=k) for k, c in _KIND_COLORS.items()]
    if df["flagged"].any():
        handles.append(Patch(**NOT_CONVERGED, label="not converged"))
    _legend_below(ax.figure, handles, ncol=len(handles))
    return labels


def _panels(n: int, width: float, height: float, ncols: int = 3):
    """A figure with ``n`` panels of ``width`` x ``height`` inches, at most ``ncols`` a row; (figure, the n axes)."""
    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    fig = new_figure(width * ncols, height * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def trace_figure(fit, components) -> Figure | None:
    """``az.plot_trace`` of the chosen components (density left, trace right)."""
    import arviz as az

    ds = selected_dataset(fit, components)
    if ds is None:
        return None
    keep = [v for v in ds.data_vars if _finite_varying(ds[v].values)]
    const = [v for v in ds.data_vars if v not in keep]
    if not keep:
        return None
    ds = ds[keep]
    fig = new_figure(10, 1.7 * len(keep) + 0.3)
    axes = fig.subplots(len(keep), 2, squeeze=False)
    az.plot_trace(ds, axes=axes, compact=False, show=False)
    if const:
        fig.suptitle("constant (point-estimated): " + ", ".join(const), fontsize=8)
    fig.tight_layout()
    return fig


def rank_figure(fit, components) -> Figure | None:
    """``az.plot_rank`` of the chosen components; only for MCMC fits with at least 2 chains."""
    import arviz as az

    if fit.kind != "mcmc" or fit.n_chains < 2:
        return None
    ds = selected_dataset(fit, components)
    if ds is None:
        return None
    keep = [v for v in ds.data_vars if _finite_varying(ds[v].values)]
    if not keep:
        return None
    fig, axes = _panels(len(keep), 3.4, 2.3)
    az.plot_rank(ds[keep], ax=axes, show=False)
    fig.tight_layout()
    return fig


def marginals_figure(fit, reference, components, color: str = "#1f77b4", label: str = "") -> Figure | None:
    """Histograms of the chosen components for ``fit`` (line) over the reference's (filled grey)."""
    ds = selected_dataset(fit, components)
    ref_ds = selected_dataset(reference, components) if reference is not None else None
    if ds is None:
        return None
    names = list(ds.data_vars)
    ncols = min(5, len(names))
    nrows = math.ceil(len(names) / ncols)
    fig = new_figure(2.6 * ncols, 2.0 * nrows + 0.4)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(names):]:
        ax.set_visible(False)
    for ax, name in zip(axes, names):
        mine = ds[name].values.ravel()
        mine = mine[np.isfinite(mine)]
        ref = None
        if ref_ds is not None and name in ref_ds:
            ref = ref_ds[name].values.ravel()
            ref = ref[np.isfinite(ref)]
        pool = np.concatenate([mine] + ([ref] if ref is not None else []))
        if pool.size == 0:
            ax.set_title(f"{name}: no finite draws", fontsize=8)
            continue
        lo, hi = np.quantile(pool, [0.001, 0.999])
        if hi <= lo:
            lo, hi = lo - 0.5 * max(abs(lo), 1e-3), hi + 0.5 * max(abs(hi), 1e-3)
        bins = np.linspace(lo, hi, 40)
        if ref is not None and ref.size:
            if _finite_varying(ref):
                # one filled outline, not a rectangle per bin: the same picture, one artist to lay out and draw
                ax.hist(ref, bins=bins, density=True, histtype="stepfilled", color="0.75", label="reference")
            else:
                ax.axvline(ref[0], color="0.5", lw=3, label="reference")
        if mine.size:
            if _finite_varying(mine):
                ax.hist(mine, bins=bins, density=True, histtype="step", color=color, lw=1.6, label=label)
            else:
                ax.axvline(mine[0], color=color, lw=1.6, label=f"{label} (point)")
        ax.set_title(name, fontsize=9)
        ax.set_yticks([])
        ax.tick_params(labelsize=8)
    axes[0].legend(fontsize=9, loc="upper left")
    fig.tight_layout()
    return fig


MAX_OBJECTIVE_POINTS = 500   # a trace longer than this is drawn as its running mean (a stochastic ELBO is noise)


def objective_figure(comparison) -> Figure | None:
    """The objective each fit optimises (``fit.info["objective"]``, else its first trace in the ``objective``
    group): one panel per backend. A long trace (stochastic-gradient VI over thousands of steps) is drawn as its
    running mean over windows of 1 % of its length, thinned to :data:`MAX_OBJECTIVE_POINTS`, over the raw values
    in light grey."""
    traces = []
    for label in fit_labels(comparison):
        fit = comparison.fits[label]
        if "objective" not in fit.idata.groups():
            continue
        group = fit.idata["objective"]
        name = fit.info.get("objective") if fit.info.get("objective") in group else next(iter(group.data_vars), None)
        if name is not None:
            traces.append((label, name, group[name]))
    if not traces:
        return None
    fig, axes = _panels(len(traces), 4.2, 2.9)
    for ax, (label, name, da) in zip(axes, traces):
        values = np.asarray(da.values, dtype=float)
        values = values.reshape(-1, values.shape[-1]) if values.ndim > 1 else values[None, :]
        n = values.shape[-1]
        for i, row in enumerate(values):
            x, y = np.arange(1, n + 1), row
            if n > MAX_OBJECTIVE_POINTS:
                step = n // MAX_OBJECTIVE_POINTS
                ax.plot(x[::step], y[::step], lw=0.5, color="0.75", zorder=1)
                window = max(2, n // 100)
                smooth = np.convolve(np.nan_to_num(y, nan=np.nanmean(y)), np.ones(window) / window, mode="valid")
                x, y = x[window - 1::step], smooth[::step]
            ax.plot(x, y, lw=1.4, zorder=2, label=f"chain {i}" if values.shape[0] > 1 else None)
        smoothed = " (running mean)" if n > MAX_OBJECTIVE_POINTS else ""
        ax.set_title(f"{label}: {name}{smoothed}", fontsize=10)
        ax.set_xlabel("iteration", fontsize=9)
        ax.tick_params(labelsize=8)
        finite = values[np.isfinite(values)]
        if finite.size > 2:  # zoom on the tail: the first iterations often dwarf the converged value
            lo, hi = np.quantile(finite, [0.05, 1.0])
            if hi > lo:
                ax.set_ylim(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo))
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------ family pictures
def family_picture(comparison) -> Figure | None:
    """The family's own picture of a comparison: ``family_picture`` of its pictures module (``Family.plots``,
    ``bayeszoo.diagnostics.<family>_plots``), or None for a model of no declared family or a family without one."""
    from bayeszoo.models import families

    declared = families().get(getattr(comparison.model, "family", None))
    if declared is None:
        return None
    try:
        module = importlib.import_module(declared.plots)
    except ModuleNotFoundError:
        return None
    return module.family_picture(comparison)
