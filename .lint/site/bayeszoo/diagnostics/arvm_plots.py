"""Pictures of the adaptive-kernel RVM: fitted curve or decision boundary with the learned bases drawn (centre
and width), and fMRI activation maps. Registered as the ``arvm`` family's report picture."""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Ellipse

from bayeszoo.diagnostics.plots import backend_colors, fit_labels, new_figure


def _point_bases(model, fit):
    """(mean weight, centre, width) of the bases a point-estimate fit kept; None for sampled fits."""
    if not model.is_point_estimate(fit):
        return None
    from bayeszoo.models.rvm import LOG_ALPHA_PRUNED

    w, m, v = model.basis_draws(fit)
    kept = model._draws(fit, "log_alpha")[0] < LOG_ALPHA_PRUNED - 1e-9
    with np.errstate(divide="ignore"):
        h = np.where(v[0, kept] > 0, 1.0 / v[0, kept], np.inf)
    return w[:, kept].mean(0), m[0, kept], h


def draw_fit(model, fit, data, ax=None, color="#1f77b4", label=None):
    """One fit on ``ax``: 1-D regression curve with each basis w_i phi_i(x) drawn under it and its centre +- h;
    2-D classification boundary with each basis as an ellipse of half-axes h; else |w| per basis."""
    if ax is None:
        fig = new_figure(8, 5)
        ax = fig.add_subplot()
    label = label or fit.backend
    bases = _point_bases(model, fit)
    if data.d == 1 and not model.is_classifier:
        x = data.X[:, 0]
        grid = np.linspace(x.min(), x.max(), 600)
        ax.plot(grid, model.predict(fit, grid[:, None]), color=color, lw=1.6, label=f"{label}: mean")
        if bases is not None:
            w, m, h = bases
            base_line = ax.get_ylim()[0] if ax.lines else float(np.min(data.y))
            for wi, mi, hi in zip(w, m[:, 0], h[:, 0]):
                bump = wi * np.exp(-((grid - mi) / hi) ** 2)
                ax.plot(grid, bump, color=color, lw=0.7, alpha=0.6)
                ax.errorbar([mi], [base_line], xerr=[[hi], [hi]], fmt="|", color=color, alpha=0.8, capsize=2)
            ax.plot([], [], color=color, lw=0.7, alpha=0.6, label=f"{label}: {len(w)} adaptive bases w_i phi_i (centre +- h)")
    elif data.d == 2 and model.is_classifier:
        lo, hi_ = data.X.min(0), data.X.max(0)
        g1, g2 = np.meshgrid(np.linspace(lo[0], hi_[0], 100), np.linspace(lo[1], hi_[1], 100))
        p = model.predict(fit, np.column_stack([g1.ravel(), g2.ravel()])).reshape(g1.shape)
        if p.min() < 0.5 < p.max():
            ax.contour(g1, g2, p, levels=[0.5], colors=[color], linewidths=1.6)
        if p.min() < 0.75 < p.max():
            ax.contour(g1, g2, p, levels=[0.25, 0.75], colors=[color], linewidths=0.8, linestyles=":")
        if bases is not None:
            w, m, h = bases
            for wi, mi, hi in zip(w, m, h):
                hx, hy = (hi[0], hi[-1]) if np.ndim(hi) else (hi, hi)
                ax.add_patch(Ellipse(mi, 2 * hx, 2 * hy, fill=False, ls="-" if wi > 0 else "--", color=color))
        ax.plot([], [], color=color, label=f"{label}: P = 0.5" + (f", {len(bases[0])} bases (ellipse = centre +- h)"
                                                                  if bases is not None else ""))
    else:
        w = np.abs(model._draws(fit, "w").mean(0))
        ax.bar(np.arange(w.size), w, color=color, alpha=0.6, label=label)
        ax.set_xlabel("basis slot")
        ax.set_ylabel("|posterior mean of w|")
    return ax


def family_picture(comparison) -> Figure | None:
    model, data = comparison.model, comparison.data
    labels = fit_labels(comparison)
    if not labels:
        return None
    colors = backend_colors(labels)
    fig = new_figure(10, 5.5)
    ax = fig.add_subplot()
    if data.d == 1 and not model.is_classifier:
        ax.scatter(data.X[:, 0], data.y, s=9, color="0.6", label="training data")
        if data.has_test:
            order = np.argsort(data.X_test[:, 0])
            ax.plot(data.X_test[order, 0], data.y_test[order], "k:", lw=0.8, label="test targets")
    elif data.d == 2 and model.is_classifier:
        for cls, marker, c in ((0, "o", "#3b6fb6"), (1, "^", "#c0392b")):
            sel = data.y == cls
            ax.scatter(data.X[sel, 0], data.X[sel, 1], s=12, marker=marker, color=c, alpha=0.5, label=f"class {cls}")
        ax.set_aspect("equal", adjustable="datalim")
    notes = []
    for label in labels:
        try:
            draw_fit(model, comparison.fits[label], data, ax=ax, color=colors[label], label=label)
        except Exception as exc:  # one fit that cannot be drawn must not lose the others
            notes.append(f"{label}: {type(exc).__name__}")
    ax.set_title(f"{data.name}: aRVM fits with their adaptive bases" + (f" ({'; '.join(notes)})" if notes else ""),
                 fontsize=10)
    ax.legend(fontsize=9, loc="best")
    fig.tight_layout()
    return fig


def activation_maps(maps: dict, truth=None, title: str = "") -> Figure:
    """Side-by-side images of detection maps (name -> 2-D array), with the true active region outlined."""
    n = len(maps) + (truth is not None)
    fig = new_figure(3.2 * n, 3.4)
    axes = fig.subplots(1, n, squeeze=False)[0]
    items = ([("true activation", truth)] if truth is not None else []) + list(maps.items())
    for ax, (name, img) in zip(axes, items):
        im = ax.imshow(img, cmap="magma" if name == "true activation" else "RdBu_r", origin="lower",
                       **({} if name == "true activation" else {"vmin": -np.max(np.abs(img)) or -1,
                                                                 "vmax": np.max(np.abs(img)) or 1}))
        if truth is not None and name != "true activation":
            ax.contour(truth > 0.1 * truth.max(), levels=[0.5], colors="k", linewidths=0.7)
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
