"""Pictures of the sparse linear model family: reconstructions (the report's family picture), sequential designs
(:func:`design_figure`) and the error curves of the compressed-sensing study (:func:`error_curves`, Nickisch
thesis Fig. 5.2)."""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from bayeszoo.diagnostics.plots import backend_colors, fit_labels, MAX_PRED_DRAWS, new_figure


def _moments(model, fit) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and sd of u over (at most ``MAX_PRED_DRAWS``) draws of the fit."""
    u = np.asarray(fit.idata.posterior["u"].values, dtype=float)
    u = u.reshape(-1, u.shape[-1])
    if u.shape[0] > MAX_PRED_DRAWS:
        u = u[np.linspace(0, u.shape[0] - 1, MAX_PRED_DRAWS).astype(int)]
    return model.posterior_mean(fit), u.std(0)


def _title(label: str, score: dict) -> str:
    if "l2_error" in score:
        return f"{label}: ||E[u] - u|| = {score['l2_error']:.3g}"
    return f"{label}: test MSE {score['mse']:.3g}"


def family_picture(comparison) -> Figure:
    """Each backend's reconstruction E[u] against the true signal (when known).

    A signal (1-D u): one panel per backend with the posterior mean, a band of +-2 posterior sd and the truth.
    An image (``meta["u_shape"]`` of two sides): the truth and each backend's mean image on one grey scale
    (top row), each backend's posterior sd image below (a ``map`` fit's is zero)."""
    model, data = comparison.model, comparison.data
    labels = fit_labels(comparison)
    fits = {label: comparison.fits[label] for label in labels}
    shape = model.signal_shape(data)
    truth = np.asarray(data.meta["true_u"], dtype=float).ravel() if "true_u" in data.meta else None
    moments = {label: _moments(model, fit) for label, fit in fits.items()}
    titles = {label: _title(label, model.score(fit, data)) for label, fit in fits.items()}
    if len(shape) == 2:
        return _image_picture(shape, truth, moments, titles)
    colors = backend_colors(labels)
    n_cols = 2 if len(labels) > 1 else 1
    n_rows = -(-len(labels) // n_cols)
    fig = new_figure(5.2 * n_cols, 2.2 * n_rows + 0.4)
    axes = fig.subplots(n_rows, n_cols, squeeze=False, sharex=True, sharey=True)
    index = np.arange(1, len(moments[labels[0]][0]) + 1)
    for ax, label in zip(axes.ravel(), labels):
        mean, sd = moments[label]
        if truth is not None:
            ax.plot(index, truth, color="k", lw=0.8, label="true u")
        ax.fill_between(index, mean - 2 * sd, mean + 2 * sd, color=colors[label], alpha=0.25, lw=0,
                        label="+-2 sd")
        ax.plot(index, mean, color=colors[label], lw=1.2, label="E[u]")
        ax.set_title(titles[label], fontsize=8)
        ax.tick_params(labelsize=8)
    for ax in axes.ravel()[len(labels):]:
        ax.set_axis_off()
    axes[0, 0].legend(fontsize=9, loc="upper right")
    for ax in axes[-1]:
        ax.set_xlabel("component j of u", fontsize=8)
    fig.tight_layout()
    return fig


def _image_picture(shape, truth, moments, titles) -> Figure:
    panels = [("true u", truth)] if truth is not None else []
    panels += [(titles[label], mean) for label, (mean, _) in moments.items()]
    n_cols = len(panels)
    fig = new_figure(2.4 * n_cols, 5.0)
    axes = fig.subplots(2, n_cols, squeeze=False)
    scale = truth if truth is not None else np.concatenate([m for m, _ in moments.values()])
    vmin, vmax = float(np.min(scale)), float(np.max(scale))
    for k, (title, image) in enumerate(panels):
        axes[0, k].imshow(image.reshape(shape), cmap="gray", vmin=vmin, vmax=vmax)
        axes[0, k].set_title(title, fontsize=9)
    sd_max = max(float(np.max(sd)) for _, sd in moments.values()) or 1.0
    offset = 1 if truth is not None else 0
    for k, (label, (_, sd)) in enumerate(moments.items()):
        axes[1, offset + k].imshow(sd.reshape(shape), cmap="magma", vmin=0.0, vmax=sd_max)
        axes[1, offset + k].set_title(f"{label}: posterior sd", fontsize=9)
    if truth is not None:
        axes[1, 0].set_axis_off()
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    return fig


def design_figure(design, shape=None) -> Figure:
    """A sequential design (:class:`bayeszoo.experimental_design.Design`): the information gain of each step's
    measurement under the posterior before it (left), and the measured filters (right): for an image (``shape`` of
    two sides) the summed energy |x|^2 of every measured filter as an image (for Fourier lines, the k-space mask),
    otherwise one row per measured filter."""
    filters = np.concatenate([np.atleast_2d(np.asarray(f, dtype=float).reshape(-1, np.shape(f)[-1]))
                              for f in design.filters]) if design.filters else np.zeros((0, 1))
    fig = new_figure(10.0, 3.6)
    ax_gain, ax_filters = fig.subplots(1, 2)
    steps = np.arange(1, design.n_steps + 1)
    ax_gain.plot(steps, np.asarray(design.gains, dtype=float), marker="o", ms=2.5, lw=1)
    ax_gain.set_xlabel("design step", fontsize=8)
    ax_gain.set_ylabel("information gain (nats)", fontsize=8)
    ax_gain.set_title("gain of each chosen measurement" + ("" if design.exact else " (Lanczos estimate)"),
                      fontsize=9)
    ax_gain.tick_params(labelsize=8)
    if shape is not None and len(shape) == 2 and filters.size:
        energy = (filters ** 2).sum(0).reshape(shape)
        ax_filters.imshow(energy, cmap="viridis")
        ax_filters.set_title("energy of the measured filters", fontsize=9)
        ax_filters.set_xticks([])
        ax_filters.set_yticks([])
    elif filters.size:
        lim = float(np.max(np.abs(filters))) or 1.0
        ax_filters.imshow(filters, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
        ax_filters.set_xlabel("component j of the filter", fontsize=8)
        ax_filters.set_ylabel("measured filter (in order)", fontsize=8)
        ax_filters.set_title("measured filters", fontsize=9)
        ax_filters.tick_params(labelsize=8)
    else:
        ax_filters.set_axis_off()
    fig.tight_layout()
    return fig


def error_curves(results) -> Figure:
    """Reconstruction error against the number of measurements, one panel per signal and one line per method
    (mean over runs, with a band of +-1 sd where there are several runs): the layout of Fig. 5.2.
    ``results``: the DataFrame of :func:`bayeszoo.studies.slm_compressed_sensing.run`."""
    signals = list(dict.fromkeys(results["signal"]))
    methods = list(dict.fromkeys(results["method"]))
    colors = backend_colors(methods)
    n_cols = min(3, len(signals))
    n_rows = -(-len(signals) // n_cols)
    fig = new_figure(4.0 * n_cols, 3.0 * n_rows)
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    for ax, signal in zip(axes.ravel(), signals):
        rows = results[results["signal"] == signal]
        for method in methods:
            stats = rows[rows["method"] == method].groupby("m")["l2_error"].agg(["mean", "std", "count"])
            if stats.empty:
                continue
            ax.plot(stats.index, stats["mean"], marker="o", ms=3, color=colors[method], label=method)
            if stats["count"].max() > 1:
                ax.fill_between(stats.index, stats["mean"] - stats["std"], stats["mean"] + stats["std"],
                                color=colors[method], alpha=0.15, lw=0)
        ax.set_title(signal, fontsize=9)
        ax.set_xlabel("measurements m", fontsize=8)
        ax.set_ylabel("||E[u] - u||", fontsize=8)
        ax.tick_params(labelsize=8)
    for ax in axes.ravel()[len(signals):]:
        ax.set_axis_off()
    axes[0, 0].legend(fontsize=9)
    fig.tight_layout()
    return fig
