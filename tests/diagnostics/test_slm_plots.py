"""The sparse linear model family's pictures: what each panel shows, for signals, images, designs and the
compressed-sensing error curves."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bayeszoo as bz
from bayeszoo.comparison import Comparison
from bayeszoo.diagnostics import slm_plots
from bayeszoo.diagnostics.plots import family_picture
from bayeszoo.results import build_fit


def _fits(model, data, means, spread=0.1):
    """Fits whose draws are ``mean`` plus seeded noise of sd ``spread``, one per label."""
    rng = np.random.default_rng(0)
    return {label: build_fit(model, data, label, "approximation",
                             {"u": mean + spread * rng.standard_normal((1, 200, mean.size))},
                             timing={"total": 1.0}) for label, mean in means.items()}


def test_signal_picture_has_one_panel_per_backend_with_its_error_and_band():
    data = bz.datasets.load("slm_signal", kind="spikes", n=16, m=8, seed=0)
    model = bz.models.SLM(sigma2=0.005)
    truth = np.asarray(data.meta["true_u"])
    fits = _fits(model, data, {"ep": truth + 1.0, "map": truth})
    fig = family_picture(Comparison(model=model, data=data, fits=fits, order=["ep", "map"]))
    axes = fig.get_axes()
    assert len(axes) == 2
    error = np.linalg.norm(model.posterior_mean(fits["ep"]) - truth)
    assert axes[0].get_title() == f"ep: ||E[u] - u|| = {error:.3g}"
    band = axes[0].collections[0].get_paths()[0].vertices[:, 1]     # the +-2 sd band around E[u] ~ truth + 1
    assert band.max() == pytest.approx((truth + 1).max() + 0.2, abs=0.08)
    assert [line.get_label() for line in axes[0].get_lines()] == ["true u", "E[u]"]


def test_image_picture_shows_truth_means_and_sd_images():
    data = bz.datasets.load("slm_image", size=8, m=40, seed=0)
    model = bz.models.SLM(sigma2=0.005)
    truth = np.asarray(data.meta["true_u"]).ravel()
    fits = _fits(model, data, {"dloop": truth, "map": truth - 0.5}, spread=0.2)
    fig = family_picture(Comparison(model=model, data=data, fits=fits, order=["dloop", "map"]))
    axes = fig.get_axes()
    assert len(axes) == 2 * 3                        # truth, dloop, map; means above, sd images below
    assert axes[0].get_title() == "true u" and axes[2].get_title().startswith("map: ||E[u] - u||")
    sd_image = axes[4].get_images()[0].get_array()
    assert sd_image.shape == (8, 8) and float(np.mean(sd_image)) == pytest.approx(0.2, rel=0.15)


def test_design_figure_plots_the_gains_and_the_measured_filters():
    data = bz.datasets.load("slm_signal", kind="spikes", n=16, m=6, seed=0)
    model = bz.models.SLM(potential="gaussian", sigma2=0.01)
    truth = np.asarray(data.meta["true_u"])
    d = bz.design.sequential_design(model, data, lambda X: X @ truth, 3, backend="dloop", progress=False)
    fig = slm_plots.design_figure(d)
    gain_ax, filter_ax = fig.get_axes()
    np.testing.assert_allclose(gain_ax.get_lines()[0].get_ydata(), d.gains)
    np.testing.assert_allclose(filter_ax.get_images()[0].get_array(), np.concatenate(d.filters))
    image_fig = slm_plots.design_figure(d, shape=(4, 4))
    energy = image_fig.get_axes()[1].get_images()[0].get_array()
    np.testing.assert_allclose(energy, (np.concatenate(d.filters) ** 2).sum(0).reshape(4, 4))


def test_error_curves_average_over_runs_per_signal_and_method():
    rows = [{"signal": s, "run": r, "method": meth, "m": m, "l2_error": 1.0 + r + (meth == "b") + m / 100}
            for s in ("spikes", "laplace") for r in (0, 1) for meth in ("a", "b") for m in (40, 80)]
    fig = slm_plots.error_curves(pd.DataFrame(rows))
    axes = fig.get_axes()
    assert [ax.get_title() for ax in axes] == ["spikes", "laplace"]
    lines = {line.get_label(): line for line in axes[0].get_lines()}
    np.testing.assert_allclose(lines["b"].get_ydata(), [2.5 + 0.4, 2.5 + 0.8])
