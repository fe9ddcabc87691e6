"""Pictures of the RVM family: the fitted curve with its band and relevance vectors (1-D regression), the
decision boundary (2-D classification), or the weights' magnitudes; helpers for type-II fits."""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from bayeszoo.diagnostics.plots import (backend_colors, fit_labels, flat_draws,
                                        MAX_PRED_DRAWS, new_figure, reference_fit, reference_label)

TYPE2_BACKENDS = ("em", "fast")  # hand-written type-II ML backends: pruned bases sit at LOG_ALPHA_PRUNED


def _thin(draws: np.ndarray, n: int = MAX_PRED_DRAWS) -> np.ndarray:
    if draws.shape[0] <= n:
        return draws
    return draws[np.linspace(0, draws.shape[0] - 1, n).astype(int)]


def rvm_latent_draws(model, fit, X) -> np.ndarray:
    """Draws (S, n) of the latent function Phi(X) w from the fit's posterior ``w`` draws."""
    centers = fit.idata.constant_data["X"].values
    Phi = model.design(np.asarray(X, dtype=float), centers)
    w = _thin(flat_draws(fit, "w"))
    return w @ Phi.T


def rvm_predict(model, fit, X) -> np.ndarray:
    """``model.predict(fit, X)`` as a vector (P(y = 1) or the predictive mean) for the plots."""
    out = np.asarray(model.predict(fit, X), dtype=float)
    return out.reshape(out.shape[0], -1)[:, 0] if out.ndim > 1 else out


def is_type2(fit) -> bool:
    """A type-II ML fit: an ``em`` / ``fast`` backend, or any fit whose ``log_alpha`` is a point estimate
    with some bases pruned (stored at LOG_ALPHA_PRUNED)."""
    from bayeszoo.models.rvm import LOG_ALPHA_PRUNED

    if fit.backend in TYPE2_BACKENDS:
        return True
    la = flat_draws(fit, "log_alpha")
    return bool(np.all(la == la[:1]) and np.any(la[0] >= LOG_ALPHA_PRUNED - 1e-6))


def relevance_vectors(model, fit) -> np.ndarray:
    """Indices (into the training inputs) of the bases a type-II fit kept: log_alpha < LOG_ALPHA_PRUNED."""
    from bayeszoo.models.rvm import LOG_ALPHA_PRUNED

    la = flat_draws(fit, "log_alpha")
    with np.errstate(invalid="ignore"):
        kept = np.nanmedian(np.where(np.isnan(la), np.inf, la), axis=0) < LOG_ALPHA_PRUNED - 1e-6
    idx = np.flatnonzero(kept) - int(model.bias)
    return idx[idx >= 0]


def family_picture(comparison) -> Figure | None:
    model, data = comparison.model, comparison.data
    labels = fit_labels(comparison)
    if not labels:
        return None
    colors = backend_colors(labels)
    ref_label = reference_label(comparison)
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
    if ref_label is not None and reference_fit(comparison) is not None:
        try:
            f = rvm_latent_draws(model, reference_fit(comparison), grid[:, None])
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


N_BASES_SHOWN = 20   # the weights picture shows the bases that matter, not hundreds of pruned ones


def _rvm_weights(comparison, labels, colors, ref_label):
    """A forest plot: for the :data:`N_BASES_SHOWN` bases with the largest posterior |mean| of w in the reference
    (else the first fit), each backend's mean +- 1 sd, side by side."""
    base_label = ref_label if ref_label in comparison.fits else labels[0]
    base = reference_fit(comparison) if reference_fit(comparison) is not None else comparison.fits[base_label]
    with np.errstate(invalid="ignore"):
        magnitude = np.abs(np.nanmean(flat_draws(base, "w"), axis=0))
    order = np.argsort(-np.where(np.isfinite(magnitude), magnitude, -1.0), kind="stable")[:N_BASES_SHOWN]
    k = order.size
    fig = new_figure(10, 1.2 + 0.32 * k)
    ax = fig.add_subplot()
    spread = 0.7 / max(len(labels), 1)
    for j, label in enumerate(labels):
        w = flat_draws(comparison.fits[label], "w")[:, order]
        with np.errstate(invalid="ignore"):
            mean, sd = np.nanmean(w, axis=0), np.nanstd(w, axis=0)
        y = np.arange(k) + (j - (len(labels) - 1) / 2) * spread
        ax.errorbar(mean, y, xerr=sd, fmt="o", ms=3.5, lw=1.0, color=colors[label], label=label)
    first = int(comparison.model.bias)
    ax.set_yticks(np.arange(k), [("bias" if i < first else f"basis {i - first}") for i in order], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0.0, color="0.6", lw=0.8)
    ax.set_xlabel("posterior mean of w ± 1 sd")
    total = magnitude.size
    source = "the reference" if reference_fit(comparison) is not None else base_label
    ax.set_title(f"{comparison.data.name}: the {k} of {total} weights with the largest |mean| in {source}",
                 fontsize=10)
    ax.legend(fontsize=8, ncol=min(4, len(labels)), loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
