"""Pictures of the GP-classification family: latent marginals of each backend against the reference, and the
contour panels of the thesis's grid study."""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from bayeszoo.diagnostics.plots import (backend_colors, fit_labels, flat_draws,
                                        new_figure, reference_fit, reference_label)

def _f_moments(fit) -> tuple[np.ndarray, np.ndarray]:
    """Means and sds of f_i: exact for a Gaussian approximation (its idata group ``gaussian``), else from draws."""
    from bayeszoo.models.gpc import GAUSSIAN_GROUP

    if GAUSSIAN_GROUP in fit.idata.groups():
        q = fit.idata[GAUSSIAN_GROUP]
        return q["q_mean"].values, np.sqrt(np.clip(q["q_var"].values, 0.0, None))
    f = flat_draws(fit, "f")
    return f.mean(0), f.std(0)


def family_picture(comparison) -> Figure | None:
    """The thesis's marginals figure: each backend's posterior means and sds of f_i, and its predictive
    probabilities at the test inputs, against the reference's (the diagonal is perfect agreement)."""
    model, data = comparison.model, comparison.data
    labels = fit_labels(comparison)
    ref_label = reference_label(comparison)
    ref = reference_fit(comparison)
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
    axes[2].legend(fontsize=9, loc="upper left")
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
                ax.clabel(cs, fontsize=8, fmt="%.3g")
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
