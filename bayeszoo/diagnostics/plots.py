"""Figures of the comparison report.

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot (so the report never
touches the user's interactive backend) or ``None`` when it has nothing to draw. :func:`family_picture`
dispatches on ``model.family`` to the family's own picture (RVM: fitted curve with the relevance vectors,
decision boundaries, or the posterior |w| per basis).
"""
from __future__ import annotations

import base64
import io
import math
from typing import Callable

import numpy as np
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

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


def _labels(comparison) -> list[str]:
    order = comparison.order or list(comparison.fits)
    return [label for label in order if label in comparison.fits]


def _reference_label(comparison) -> str | None:
    ref = comparison.reference_fit
    if ref is None:
        return None
    for label, fit in comparison.fits.items():
        if fit is ref:
            return label
    return comparison.reference


# ---------------------------------------------------------------------------------- components shown
def select_components(comparison, n_top: int = N_TOP_WEIGHTS) -> list[tuple[str, dict]]:
    """A few scalar components to plot: every scalar canonical variable (e.g. ``log_beta``) and the
    ``n_top`` entries of the first vector variable (``w``) with the largest posterior |mean| (taken from
    the reference, else from the first fit). Returns ``[(var, {dim: coord}), ...]``."""
    model, data = comparison.model, comparison.data
    var_dims = dict(model.var_dims(data))
    base = comparison.reference_fit or next(iter(comparison.fits.values()), None)
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
def ess_per_second_bars(table) -> Figure | None:
    """Horizontal bars of ESS (bulk, min) per second on a log scale, coloured by kind."""
    if "ess_bulk_per_s" not in table:
        return None
    df = table[["backend", "kind", "ess_bulk_per_s"]].copy()
    df = df[np.isfinite(df["ess_bulk_per_s"].astype(float)) & (df["ess_bulk_per_s"].astype(float) > 0)]
    if df.empty:
        return None
    fig = new_figure(7.5, 0.45 * len(df) + 1.2)
    ax = fig.add_subplot()
    colors = ["#4c72b0" if k == "mcmc" else "#dd8452" for k in df["kind"]]
    y = np.arange(len(df))
    ax.barh(y, df["ess_bulk_per_s"].astype(float), color=colors)
    ax.set_yticks(y, list(df["backend"]))
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("bulk ESS (min over components) per second, log scale")
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color="#4c72b0", label="mcmc"), Patch(color="#dd8452", label="approximation")],
              loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3, which="both")
    return fig


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
    ncols = min(3, len(keep))
    nrows = math.ceil(len(keep) / ncols)
    fig = new_figure(3.4 * ncols, 2.3 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(keep):]:
        ax.set_visible(False)
    az.plot_rank(ds[keep], ax=axes[: len(keep)], show=False)
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
        ax.tick_params(labelsize=7)
    axes[0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def objective_figure(comparison) -> Figure | None:
    """ELBO / log-evidence traces (the ``objective`` group) of every fit that has one."""
    traces = []
    for label in _labels(comparison):
        idata = comparison.fits[label].idata
        if "objective" not in idata.groups():
            continue
        for name, da in idata["objective"].data_vars.items():
            traces.append((label, name, da))
    if not traces:
        return None
    ncols = min(3, len(traces))
    nrows = math.ceil(len(traces) / ncols)
    fig = new_figure(3.6 * ncols, 2.5 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(traces):]:
        ax.set_visible(False)
    for ax, (label, name, da) in zip(axes, traces):
        values = np.asarray(da.values, dtype=float)
        values = values.reshape(-1, values.shape[-1]) if values.ndim > 1 else values[None, :]
        for i, row in enumerate(values):
            ax.plot(np.arange(1, row.size + 1), row, lw=1.2, label=f"chain {i}" if values.shape[0] > 1 else None)
        ax.set_title(f"{label}: {name}", fontsize=9)
        ax.set_xlabel("iteration", fontsize=8)
        ax.tick_params(labelsize=7)
        finite = values[np.isfinite(values)]
        if finite.size > 2:  # zoom on the tail: the first iterations often dwarf the converged value
            lo, hi = np.quantile(finite, [0.05, 1.0])
            if hi > lo:
                ax.set_ylim(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo))
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------ family pictures
_FAMILY_PICTURES: dict[str, Callable] = {}


def register_picture(family: str):
    """Decorator registering ``fn(comparison) -> Figure | None`` as the picture of ``family``."""

    def deco(fn):
        _FAMILY_PICTURES[family] = fn
        return fn

    return deco


def family_picture(comparison) -> Figure | None:
    """The family's own picture of a comparison, or None if the family has none."""
    fn = _FAMILY_PICTURES.get(getattr(comparison.model, "family", None))
    return fn(comparison) if fn is not None else None


# ---- RVM
TYPE2_BACKENDS = ("em", "fast")  # hand-written type-II ML backends: pruned bases sit at LOG_ALPHA_PRUNED


def _draws(fit, name) -> np.ndarray:
    arr = fit.idata.posterior[name].values
    return arr.reshape(-1, *arr.shape[2:])


def _thin(draws: np.ndarray, n: int = MAX_PRED_DRAWS) -> np.ndarray:
    if draws.shape[0] <= n:
        return draws
    return draws[np.linspace(0, draws.shape[0] - 1, n).astype(int)]


def rvm_latent_draws(model, fit, X) -> np.ndarray:
    """Draws (S, n) of the latent function Phi(X) w from the fit's posterior ``w`` draws."""
    centers = fit.idata.constant_data["X"].values
    Phi = model.design(np.asarray(X, dtype=float), centers)
    w = _thin(_draws(fit, "w"))
    return w @ Phi.T


def rvm_predict(model, fit, X) -> np.ndarray:
    """``model.predict(fit, X)``; falls back to the posterior average of Phi w (or of the link of it)."""
    try:
        out = np.asarray(model.predict(fit, X), dtype=float)
        if out.shape[0] == np.asarray(X).shape[0]:
            return out.reshape(out.shape[0], -1)[:, 0] if out.ndim > 1 else out
    except Exception:
        pass
    f = rvm_latent_draws(model, fit, X)
    if model.is_classifier:
        if model.link == "probit":
            from scipy.special import ndtr

            return ndtr(f).mean(0)
        from scipy.special import expit

        return expit(f).mean(0)
    return f.mean(0)


def is_type2(fit) -> bool:
    """A type-II ML fit: an ``em`` / ``fast`` backend, or any fit whose ``log_alpha`` is a point estimate
    with some bases pruned (stored at LOG_ALPHA_PRUNED)."""
    from bayeszoo.models.rvm import LOG_ALPHA_PRUNED

    if fit.backend in TYPE2_BACKENDS:
        return True
    la = _draws(fit, "log_alpha")
    return bool(np.all(la == la[:1]) and np.any(la[0] >= LOG_ALPHA_PRUNED - 1e-6))


def relevance_vectors(model, fit) -> np.ndarray:
    """Indices (into the training inputs) of the bases a type-II fit kept: log_alpha < LOG_ALPHA_PRUNED."""
    from bayeszoo.models.rvm import LOG_ALPHA_PRUNED

    la = _draws(fit, "log_alpha")
    with np.errstate(invalid="ignore"):
        kept = np.nanmedian(np.where(np.isnan(la), np.inf, la), axis=0) < LOG_ALPHA_PRUNED - 1e-6
    idx = np.flatnonzero(kept) - int(model.bias)
    return idx[idx >= 0]


@register_picture("rvm")
def rvm_picture(comparison) -> Figure | None:
    model, data = comparison.model, comparison.data
    labels = _labels(comparison)
    if not labels:
        return None
    colors = backend_colors(labels)
    ref_label = _reference_label(comparison)
    if data.d == 1 and not model.is_classifier:
        return _rvm_curve(comparison, labels, colors, ref_label)
    if data.d == 2 and model.is_classifier:
        return _rvm_boundary(comparison, labels, colors)
    return _rvm_weights(comparison, labels, colors, ref_label)


def _rvm_curve(comparison, labels, colors, ref_label):
    model, data = comparison.model, comparison.data
    X = data.X[:, 0]
    xs = np.concatenate([X, data.X_test[:, 0]]) if data.has_test else X
    lo, hi = xs.min(), xs.max()
    pad = 0.02 * (hi - lo if hi > lo else 1.0)
    grid = np.linspace(lo - pad, hi + pad, 400)
    fig = new_figure(10, 5)
    ax = fig.add_subplot()
    ax.scatter(X, data.y, s=10, color="0.55", zorder=1, label="training data")
    if data.has_test:
        order = np.argsort(data.X_test[:, 0])
        ax.plot(data.X_test[order, 0], data.y_test[order], color="k", lw=0.8, ls=":", label="test targets")
    notes = []
    if ref_label is not None and comparison.reference_fit is not None:
        try:
            f = rvm_latent_draws(model, comparison.reference_fit, grid[:, None])
            band = np.quantile(f, [0.025, 0.975], axis=0)
            ax.fill_between(grid, band[0], band[1], color=colors.get(ref_label, "0.6"), alpha=0.18, lw=0,
                            label=f"{ref_label}: 95% band of f")
        except Exception as exc:
            notes.append(f"reference band: {type(exc).__name__}")
    for label in labels:
        fit = comparison.fits[label]
        try:
            mean = rvm_predict(model, fit, grid[:, None])
        except Exception as exc:
            notes.append(f"{label}: {type(exc).__name__}")
            continue
        ax.plot(grid, mean, color=colors[label], lw=1.8 if label == ref_label else 1.3, label=label)
        if is_type2(fit):
            try:
                rv = relevance_vectors(model, fit)
                if rv.size:
                    xr_ = X[rv]
                    ax.scatter(xr_, rvm_predict(model, fit, xr_[:, None]), s=70, facecolors="none",
                               edgecolors=colors[label], linewidths=1.6, zorder=3,
                               label=f"{label}: {rv.size} relevance vectors")
            except Exception as exc:
                notes.append(f"{label} relevance vectors: {type(exc).__name__}")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(f"{data.name}: predictive mean per backend" + (f"  ({'; '.join(notes)})" if notes else ""),
                 fontsize=10)
    ax.legend(fontsize=8, loc="best", ncol=2)
    fig.tight_layout()
    return fig


def _rvm_boundary(comparison, labels, colors):
    model, data = comparison.model, comparison.data
    X = data.X
    lo, hi = X.min(0), X.max(0)
    pad = 0.05 * np.where(hi > lo, hi - lo, 1.0)
    g1 = np.linspace(lo[0] - pad[0], hi[0] + pad[0], 120)
    g2 = np.linspace(lo[1] - pad[1], hi[1] + pad[1], 120)
    G1, G2 = np.meshgrid(g1, g2)
    grid = np.column_stack([G1.ravel(), G2.ravel()])
    fig = new_figure(8.5, 7)
    ax = fig.add_subplot()
    for cls, marker, c in ((0, "o", "#3b6fb6"), (1, "^", "#c0392b")):
        m = data.y == cls
        ax.scatter(X[m, 0], X[m, 1], s=14, marker=marker, color=c, alpha=0.6, label=f"class {cls}")
    from matplotlib.lines import Line2D

    handles, notes = [], []
    for label in labels:
        fit = comparison.fits[label]
        try:
            p = rvm_predict(model, fit, grid).reshape(G1.shape)
            if np.nanmin(p) < 0.5 < np.nanmax(p):
                ax.contour(G1, G2, p, levels=[0.5], colors=[colors[label]], linewidths=1.6)
            handles.append(Line2D([], [], color=colors[label], label=f"{label}: P = 0.5"))
        except Exception as exc:
            notes.append(f"{label}: {type(exc).__name__}")
            continue
        if is_type2(fit):
            try:
                rv = relevance_vectors(model, fit)
                if rv.size:
                    h = ax.scatter(X[rv, 0], X[rv, 1], s=110, facecolors="none", edgecolors=colors[label],
                                   linewidths=1.6, label=f"{label}: {rv.size} relevance vectors")
                    handles.append(h)
            except Exception as exc:
                notes.append(f"{label} relevance vectors: {type(exc).__name__}")
    h0, _ = ax.get_legend_handles_labels()
    ax.legend(handles=h0[:2] + handles, fontsize=8, loc="best")
    ax.set_xlabel("x1")
    ax.set_ylabel("x2")
    ax.set_title(f"{data.name}: decision boundaries" + (f"  ({'; '.join(notes)})" if notes else ""), fontsize=10)
    fig.tight_layout()
    return fig


def _rvm_weights(comparison, labels, colors, ref_label):
    fig = new_figure(10, 4.5)
    ax = fig.add_subplot()
    first = True
    for label in labels:
        fit = comparison.fits[label]
        w = _draws(fit, "w")
        with np.errstate(invalid="ignore"):
            mag = np.abs(np.nanmean(w, axis=0))
        idx = np.arange(mag.size)
        if label == ref_label or (ref_label is None and first):
            ax.bar(idx, mag, color=colors[label], alpha=0.45, width=1.0, label=label)
        else:
            ax.plot(idx, mag, ls="none", marker="o", ms=3.5, color=colors[label], label=label)
        first = False
    ax.set_xlabel("basis (0 = bias)" if comparison.model.bias else "basis")
    ax.set_ylabel("|posterior mean of w|")
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_title(f"{comparison.data.name}: posterior |w| per basis", fontsize=10)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


# ---- GPC
def _f_moments(fit) -> tuple[np.ndarray, np.ndarray]:
    """Means and sds of f_i: exact for a Gaussian approximation (its idata group ``gaussian``), else from draws."""
    from bayeszoo.models.gpc import GAUSSIAN_GROUP

    if GAUSSIAN_GROUP in fit.idata.groups():
        q = fit.idata[GAUSSIAN_GROUP]
        return q["q_mean"].values, np.sqrt(np.clip(np.diag(q["q_cov"].values), 0.0, None))
    f = _draws(fit, "f")
    return f.mean(0), f.std(0)


@register_picture("gpc")
def gpc_picture(comparison) -> Figure | None:
    """The thesis's marginals figure: each backend's posterior means and sds of f_i, and its predictive
    probabilities at the test inputs, against the reference's (the diagonal is perfect agreement)."""
    model, data = comparison.model, comparison.data
    labels = _labels(comparison)
    ref_label = _reference_label(comparison)
    ref = comparison.reference_fit
    if ref is None or not labels:
        return None
    colors = backend_colors(labels)
    X_eval = data.X_test if data.has_test else data.X
    ref_p = model.predict(ref, X_eval)
    fig = new_figure(13.5, 4.3)
    axes = fig.subplots(1, 3)
    for k, (ax, title) in enumerate(zip(axes[:2], ("posterior mean of f_i", "posterior sd of f_i"))):
        ref_value = _f_moments(ref)[k]
        for label in labels:
            if label == ref_label:
                continue
            ax.scatter(ref_value, _f_moments(comparison.fits[label])[k], s=9, alpha=0.7,
                       color=colors[label], label=label)
        lo, hi = float(np.min(ref_value)), float(np.max(ref_value))
        ax.plot([lo, hi], [lo, hi], color="k", lw=0.8)
        ax.set_title(title)
        ax.set_xlabel(f"reference ({ref_label})")
    for label in labels:
        if label != ref_label:
            axes[2].scatter(ref_p, model.predict(comparison.fits[label], X_eval), s=9, alpha=0.7,
                            color=colors[label], label=label)
    axes[2].plot([0, 1], [0, 1], color="k", lw=0.8)
    axes[2].set_title("P(y* = 1) at the test inputs")
    axes[2].set_xlabel(f"reference ({ref_label})")
    axes[0].set_ylabel("backend")
    axes[2].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


GRID_TITLES = {"log_evidence": "log evidence (own approximation)", "jensen_bound": "Jensen lower bound (4.13)",
               "info_bits": "information [bits]", "n_errors": "test errors", "log_pred": "test log predictive",
               "error_rate": "test error rate", "seconds": "seconds per fit"}


def grid_contours(ds, quantities=("log_evidence", "jensen_bound", "info_bits", "n_errors"), methods=None,
                  levels: int = 12) -> Figure:
    """Contour panels of a :func:`bayeszoo.studies.gpc_grid.grid_study` result, as in the thesis's
    Figs. 4.9-4.11: one row per method, one column per quantity, the same contour levels down each column
    (so methods can be compared by eye); the best grid point of each panel is marked."""
    if methods is None:
        methods = [str(m) for m in ds["backend"].values]
    unknown = [q for q in quantities if q not in ds]
    if unknown:
        raise ValueError(f"unknown quantities {unknown}; the study has {list(ds.data_vars)}")
    ell, sf = ds["log_lengthscale"].values, ds["log_amplitude"].values
    fig = new_figure(3.3 * len(quantities), 2.8 * len(methods))
    axes = np.atleast_2d(fig.subplots(len(methods), len(quantities), squeeze=False))
    for c, q in enumerate(quantities):
        values = ds[q].sel(backend=methods).values
        finite = values[np.isfinite(values)]
        if finite.size == 0:
            continue
        lo, hi = np.percentile(finite, [2, 100]) if q in ("log_evidence", "jensen_bound", "log_pred") else (
            finite.min(), finite.max())
        lv = np.linspace(lo, hi, levels) if hi > lo else None
        minimise = q in ("n_errors", "error_rate", "seconds")
        for r, name in enumerate(methods):
            ax = axes[r, c]
            z = ds[q].sel(backend=name).values.T        # rows: log_amplitude, columns: log_lengthscale
            if np.isfinite(z).sum() >= 4 and lv is not None:
                cs = ax.contour(ell, sf, np.clip(z, lo, hi), levels=lv, linewidths=0.8, cmap="viridis")
                ax.clabel(cs, fontsize=6, fmt="%.3g")
                flat = np.where(np.isfinite(z), z, np.inf if minimise else -np.inf)
                j, i = np.unravel_index(np.argmin(flat) if minimise else np.argmax(flat), z.shape)
                ax.plot(ell[i], sf[j], "r+", ms=9, mew=1.5)
            ax.set_title(f"{name}: {GRID_TITLES.get(q, q)}", fontsize=8)
            if r == len(methods) - 1:
                ax.set_xlabel("ln lengthscale")
            if c == 0:
                ax.set_ylabel("ln amplitude")
    fig.suptitle(f"{ds.attrs.get('dataset', '')} ({ds.attrs.get('likelihood', '')}, {ds.attrs.get('kernel', '')}): "
                 f"+ marks each panel's best grid point", fontsize=9)
    fig.tight_layout()
    return fig


from bayeszoo.diagnostics import bid_plots  # noqa: E402,F401  (registers the BID picture)
from bayeszoo.diagnostics import pmkl_plots  # noqa: E402,F401  (registers the PMKL picture)
from bayeszoo.diagnostics import arvm_plots  # noqa: E402,F401  (registers the arvm family's picture)
from bayeszoo.diagnostics import imagervm_plots  # noqa: E402,F401  (registers the imagervm picture)
