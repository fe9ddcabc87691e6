"""The PMKL family picture: posterior of the kernel weights per backend (and of the rbf parameters theta when
they are inferred), and decision regions on 2-D data (otherwise each backend's predictive probability of the
true class against the reference's)."""
from __future__ import annotations

import numpy as np

from bayeszoo.diagnostics.plots import backend_colors, fit_labels, new_figure, reference_fit, reference_label

PICTURE_DRAWS = 100      # posterior draws averaged over in the decision-region grids
GRID = 60                # grid points per axis of the decision regions
MAX_REGION_PANELS = 4


PANEL_TEXT = {"beta": ("kernel weight beta (mean, 5-95 %)", "posterior of the combination weights"),
              "theta": ("kernel parameter theta (mean, 5-95 %)", "posterior of the rbf parameters theta_sd")}


def weights_panel(ax, comparison, labels, colors, var="beta"):
    """Posterior mean and 5-95 % interval of every component of ``var`` (beta over sources, or theta over the
    rbf sources' columns), one offset marker per backend."""
    sources = None
    width = 0.8 / max(len(labels), 1)
    for k, label in enumerate(labels):
        beta = comparison.fits[label].idata.posterior[var]
        dim = [d for d in beta.dims if d not in ("chain", "draw")][0]
        sources = [str(s) for s in beta.coords[dim].values]
        draws = beta.values.reshape(-1, len(sources))
        x = np.arange(len(sources)) - 0.4 + width * (k + 0.5)
        lo, hi = np.percentile(draws, [5, 95], axis=0)
        mean = draws.mean(0)
        ax.errorbar(x, mean, yerr=[np.clip(mean - lo, 0, None), np.clip(hi - mean, 0, None)], fmt="o", ms=4, capsize=2, color=colors[label], label=label)
    ax.set_xticks(np.arange(len(sources or [])))
    ax.set_xticklabels(sources or [], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(PANEL_TEXT[var][0])
    ax.set_title(PANEL_TEXT[var][1], fontsize=9)
    ax.legend(fontsize=9)


def region_panel(ax, model, fit, data, label):
    """Argmax of the predictive probabilities on a grid over the 2-D inputs, with the training points."""
    X = np.vstack([data.X, data.X_test]) if data.has_test else data.X
    lo, hi = X.min(0), X.max(0)
    pad = 0.05 * (hi - lo)
    g0, g1 = np.meshgrid(np.linspace(lo[0] - pad[0], hi[0] + pad[0], GRID),
                         np.linspace(lo[1] - pad[1], hi[1] + pad[1], GRID))
    P = model.predict(fit, np.column_stack([g0.ravel(), g1.ravel()]), max_draws=PICTURE_DRAWS)
    C = P.shape[1]
    ax.contourf(g0, g1, np.argmax(P, 1).reshape(g0.shape), levels=np.arange(C + 1) - 0.5, cmap="Pastel1", alpha=0.8)
    ax.scatter(data.X[:, 0], data.X[:, 1], c=data.y, cmap="Set1", s=10, edgecolor="k", linewidth=0.3,
               vmin=0, vmax=max(C - 1, 1))
    ax.set_title(f"{label}: decision regions", fontsize=9)
    ax.tick_params(labelsize=8)


def true_class_panel(ax, comparison, labels, colors, ref_label):
    """Each backend's predictive probability of the true class at the test points against the reference's."""
    model, data = comparison.model, comparison.data
    X, y = (data.X_test, data.y_test) if data.has_test else (data.X, data.y)
    y = y.astype(int)
    ref = model.predict(reference_fit(comparison), X)[np.arange(len(y)), y]
    for label in labels:
        if label == ref_label:
            continue
        p = model.predict(comparison.fits[label], X)[np.arange(len(y)), y]
        ax.scatter(ref, p, s=8, color=colors[label], label=label, alpha=0.7)
    ax.plot([0, 1], [0, 1], color="0.5", lw=0.8)
    ax.set_xlabel(f"reference ({ref_label})")
    ax.set_ylabel("backend")
    ax.set_title("predictive probability of the true class", fontsize=9)
    ax.legend(fontsize=9)


def family_picture(comparison):
    labels = fit_labels(comparison)
    if not labels:
        return None
    model, data = comparison.model, comparison.data
    colors = backend_colors(labels)
    ref_label = reference_label(comparison)
    if getattr(model, "infer_theta", False):
        fig = new_figure(15.0, 4.2)
        axes = fig.subplots(1, 3)
        weights_panel(axes[0], comparison, labels, colors)
        weights_panel(axes[1], comparison, labels, colors, var="theta")
        if reference_fit(comparison) is not None:
            true_class_panel(axes[2], comparison, labels, colors, ref_label)
        else:
            axes[2].set_axis_off()
    elif data.d == 2:
        shown = labels[:MAX_REGION_PANELS]
        fig = new_figure(4.2 * (1 + len(shown)), 4.0)
        axes = fig.subplots(1, 1 + len(shown))
        weights_panel(axes[0], comparison, labels, colors)
        for ax, label in zip(axes[1:], shown):
            region_panel(ax, model, comparison.fits[label], data, label)
    else:
        fig = new_figure(11.0, 4.2)
        axes = fig.subplots(1, 2)
        weights_panel(axes[0], comparison, labels, colors)
        if reference_fit(comparison) is not None:
            true_class_panel(axes[1], comparison, labels, colors, ref_label)
        else:
            axes[1].set_axis_off()
    fig.tight_layout()
    return fig
