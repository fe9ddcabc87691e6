"""Pictures of the multikernel image RVM: observed / true / restored images, the weight image of every kernel, and
the LROC curves of the object detector. Registered as the ``imagervm`` family's report picture."""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from bayeszoo.diagnostics.plots import backend_colors, fit_labels, new_figure


def family_picture(comparison) -> Figure:
    """Row 1: observed image, true image (when known), each backend's restored image with its ISNR.
    Rows 2..: |posterior mean weight| of every kernel (kernel per row, backend per column; white = pruned)."""
    model, data = comparison.model, comparison.data
    labels = fit_labels(comparison)
    fits = [comparison.fits[label] for label in labels]
    g = model.observed_image(data)
    top = [("observed", g)]
    if "true_image" in data.meta:
        top.append(("true", np.asarray(data.meta["true_image"], dtype=float)))
    for label, fit in zip(labels, fits):
        score = model.score(fit, data)
        top.append((f"{label}: ISNR {score['isnr']:.2f} dB, {score['n_relevant']} RVs", model.restored(fit)))
    n_cols = max(len(top), len(fits))
    n_rows = 1 + model.n_kernels
    fig = new_figure(2.4 * n_cols, 2.4 * n_rows)
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    vmin, vmax = float(np.min(g)), float(np.max(g))
    for k, (title, image) in enumerate(top):
        axes[0, k].imshow(image, cmap="gray", vmin=vmin, vmax=vmax)
        axes[0, k].set_title(title, fontsize=9)
    kernel_names = model.kernel_labels()
    for j, (label, fit) in enumerate(zip(labels, fits)):
        w = np.abs(model.weight_means(fit))
        for m in range(model.n_kernels):
            ax = axes[1 + m, j]
            ax.imshow(np.where(w[m] > 0, w[m], np.nan), cmap="magma")
            ax.set_title(f"{label}: |E w| kernel {kernel_names[m]}", fontsize=9)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    for k in range(len(top), n_cols):
        axes[0, k].set_axis_off()
    for j in range(len(fits), n_cols):
        for m in range(model.n_kernels):
            axes[1 + m, j].set_axis_off()
    fig.tight_layout()
    return fig


def lroc_figure(curves: dict, ax=None) -> Figure | None:
    """LROC curves (P_DL against P_FA) of several detectors: ``curves`` maps a name to the dict of
    :func:`bayeszoo.studies.imagervm_detection.lroc` (``p_fa``, ``p_dl``, ``area``)."""
    fig = None
    if ax is None:
        fig = new_figure(4.5, 4.2)
        ax = fig.add_subplot()
    colors = backend_colors(list(curves))
    for name, curve in curves.items():
        ax.step(curve["p_fa"], curve["p_dl"], where="post", color=colors[name],
                label=f"{name} (area {curve['area']:.3f})")
    ax.plot([0, 1], [0, 1], color="0.7", lw=0.8, ls=":")
    ax.set_xlabel("P_FA (false alarm)")
    ax.set_ylabel("P_DL (detection and localisation)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8, loc="lower right")
    return fig
