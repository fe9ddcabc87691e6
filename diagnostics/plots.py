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
    fig.savefig(buf, format="png", dpi=dpi)  # figures are laid out already; "tight" would draw twice
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


def _kind_legend(ax):
    """The bar colours' key, above the axes: inside them it would cover the labels written on the bars' rows."""
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color=c, label=k) for k, c in _KIND_COLORS.items()], loc="lower left",
              bbox_to_anchor=(0.0, 1.0), ncol=len(_KIND_COLORS), fontsize=8, frameon=False, borderaxespad=0.2)


def ess_per_second_bars(table) -> Figure | None:
    """Horizontal bars of ESS (bulk, min) per second of the MCMC fits on a log scale: the speed figure when
    there is no reference to measure accuracy against (an approximation's ESS only counts its i.i.d. draws)."""
    if "ess_bulk_per_s" not in table:
        return None
    df = table[["backend", "kind", "ess_bulk_per_s"]].copy()
    values = df["ess_bulk_per_s"].astype(float)
    df = df[np.isfinite(values) & (values > 0) & (df["kind"] == "mcmc")]
    if df.empty:
        return None
    df = df.sort_values("ess_bulk_per_s", ascending=False)
    fig = new_figure(7.5, 0.45 * len(df) + 1.2)
    ax = fig.add_subplot()
    y = np.arange(len(df))
    ax.barh(y, df["ess_bulk_per_s"].astype(float), color=_KIND_COLORS["mcmc"])
    ax.set_yticks(y, list(df["backend"]))
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("bulk ESS (min over components) per second, log scale")
    ax.grid(axis="x", alpha=0.3, which="both")
    fig.tight_layout()
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
    from bayeszoo.diagnostics.metrics import (TARGET_DRAWS, compared_components, noise_max,
                                              reference_noise_floor)

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
    target = one_draw / TARGET_DRAWS
    ax.axhline(target, color="#2a7", lw=1, ls=":")
    ax.text(0.01, target, f" target of the ranking: worth {TARGET_DRAWS} exact draws (b² ≤ {target:.2g})",
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
        _ranking_bars(bars, table, skip=comparison.reference_cell)
    fig.tight_layout()
    return fig


def _reciprocal(x):
    with np.errstate(divide="ignore"):
        return 1.0 / np.asarray(x, dtype=float)


def _ranking_bars(ax, table, skip=None):
    """The ranking: ``seconds_to_target`` as horizontal bars on a log scale, fastest first; a fit that never
    reaches the target is listed below them with what it is worth (``ess_ref``), and an MCMC fit whose own
    diagnostics fail (``converged`` False) last, as "not converged". The row ``skip`` (the reference's own run,
    exact by construction) is left out."""
    from bayeszoo.diagnostics.metrics import TARGET_DRAWS

    if table is None or "seconds_to_target" not in table:
        ax.set_visible(False)
        return
    df = table[["backend", "kind", "seconds_to_target", "ess_ref"]].copy()
    df["t"] = df["seconds_to_target"].astype(float)
    df["unconverged"] = (table["converged"] == False) if "converged" in table else False  # noqa: E712 (None kept)
    df = df[~np.isnan(df["t"]) & (df["backend"] != skip)]
    df = df.assign(worth=-df["ess_ref"].astype(float)).sort_values(["unconverged", "t", "worth"], kind="stable")
    if df.empty:
        ax.set_visible(False)
        return
    y = np.arange(len(df))
    reached = df["t"][np.isfinite(df["t"])]
    lo = reached.min() / 3 if reached.size else 1e-2
    ax.barh(y, np.where(np.isfinite(df["t"]), df["t"], np.nan),
            color=[_KIND_COLORS.get(k, "0.5") for k in df["kind"]])
    for yi, t, worth, unconverged in zip(y, df["t"], -df["worth"], df["unconverged"]):
        if np.isfinite(t):
            ax.text(t, yi, f" {t:.3g} s", va="center", fontsize=9)
        elif unconverged:
            ax.text(0.02, yi, "not converged (R-hat, ESS or divergences fail)", va="center", fontsize=9,
                    color="#b00000", transform=ax.get_yaxis_transform())
        else:
            ax.text(0.02, yi, f"never (worth {worth:.3g} exact draws)", va="center", fontsize=9, color="#b00000",
                    transform=ax.get_yaxis_transform())
    ax.set_yticks(y, list(df["backend"]))
    ax.set_ylim(len(df) - 0.5, -0.5)   # fastest on top; a full row each, so no spine strikes an end row's label
    ax.set_xscale("log")
    ax.set_xlim(lo, reached.max() * 20 if reached.size else 1.0)
    ax.xaxis.set_minor_formatter(NullFormatter())   # a narrow log range would label every minor tick
    ax.set_xlabel(f"seconds until worth {TARGET_DRAWS} exact draws")
    ax.grid(axis="x", alpha=0.3, which="both")
    _kind_legend(ax)


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
                ax.hist(ref, bins=bins, density=True, color="0.75", label="reference")
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
    """The family's own picture of a comparison: ``family_picture`` of ``bayeszoo.diagnostics.<family>_plots``,
    or None where the family has no such module."""
    family = getattr(comparison.model, "family", None)
    try:
        module = importlib.import_module(f"bayeszoo.diagnostics.{family}_plots")
    except ModuleNotFoundError:
        return None
    return module.family_picture(comparison)
