"""The BID family picture: degraded, true and restored images, and the true, initial and estimated PSFs, side by
side for every backend of a comparison (posterior means of the canonical ``image`` and ``psf``; ISNRs in titles). With
the PSF known (``BID(psf="known")``) every PSF panel shows the given PSF and the titles give ISNR_f alone."""
from __future__ import annotations

import numpy as np

from bayeszoo.diagnostics.plots import fit_labels, new_figure


def bid_panels(model, data, fits: dict) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(title, image, psf window) per panel: the degraded input with h_in (the given PSF when it is known), the truth
    (when known), each fit."""
    from bayeszoo.numerics import fft as _fft

    shape = model.image_shape(data)
    V = model.psf_view_side(shape)

    def view(window):
        return _fft.window(_fft.embed(np.asarray(window, dtype=float), shape), V)

    if model.known:
        panels = [("degraded g / known h", model.observed_image(data), view(model.known_psf(data)))]
    else:
        panels = [("degraded g / initial h_in", model.observed_image(data), view(model.initial_psf(shape)))]
    if "true_image" in data.meta and "true_psf" in data.meta:
        true_psf = np.asarray(data.meta["true_psf"], dtype=float)
        panels.append(("true f / true h", np.asarray(data.meta["true_image"], dtype=float),
                       view(true_psf / true_psf.sum())))     # normalised as the estimates and the given PSF are
    for label, fit in fits.items():
        image, psf = model.restored(fit)
        score = model.score(fit, data)
        scores = f"ISNR_f {score['isnr_f']:.2f} dB" if model.known else \
            f"ISNR_f {score['isnr_f']:.2f}, ISNR_h {score['isnr_h']:.2f} dB"
        panels.append((f"{label}: {scores}", image, psf))
    return panels


def family_picture(comparison):
    model, data = comparison.model, comparison.data
    fits = {label: comparison.fits[label] for label in fit_labels(comparison)}
    panels = bid_panels(model, data, fits)
    n = len(panels)
    fig = new_figure(2.6 * n, 5.4)
    axes = fig.subplots(2, n, squeeze=False)
    vmin, vmax = float(np.min(panels[0][1])), float(np.max(panels[0][1]))
    hmax = max(float(np.max(p[2])) for p in panels)
    for k, (title, image, psf) in enumerate(panels):
        axes[0, k].imshow(image, cmap="gray", vmin=vmin, vmax=vmax)
        axes[0, k].set_title(title, fontsize=9)
        axes[1, k].imshow(psf, cmap="viridis", vmin=min(0.0, float(np.min(psf))), vmax=hmax)
        for ax in axes[:, k]:
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0, 0].set_ylabel("image")
    axes[1, 0].set_ylabel("PSF (normalised, centred window)")
    fig.tight_layout()
    return fig
