"""The thesis's hyperparameter grid study and its contour panels."""
from __future__ import annotations

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.diagnostics.gpc_plots import grid_contours
from bayeszoo.studies.gpc_grid import best_point, grid_study

ELLS = np.array([0.0, 1.0, 2.0])
SFS = np.array([-0.5, 0.5, 1.5])


def small_data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(24, 2))
    y = (X[:, 0] + 0.6 * rng.normal(size=24) > 0).astype(float)
    Xt = rng.normal(size=(30, 2))
    yt = (Xt[:, 0] > 0).astype(float)
    return bz.datasets.Dataset(X=X, y=y, X_test=Xt, y_test=yt, name="small", meta={"task": "classification"})


@pytest.fixture(scope="module")
def study():
    model = bz.models.GPC(likelihood="logit", kernel="se")
    data = small_data()
    return model, data, grid_study(model, data, methods=("laplace", "ep"), log_lengthscales=ELLS,
                                   log_amplitudes=SFS, progress=False)


def test_grid_values_equal_single_fits(study):
    model, data, ds = study
    assert ds["log_evidence"].shape == (2, 3, 3) and not ds.attrs["errors"]
    assert ds.attrs["n_test"] == 30
    point = bz.models.GPC(likelihood="logit", kernel="se", log_lengthscale=1.0, log_amplitude=1.5)
    fit = bz.fit(point, data, backend="ep", draws=1, chains=1, seed=0, progress=False)
    scores = point.score(fit, data)
    cell = ds.sel(backend="ep", log_lengthscale=1.0, log_amplitude=1.5)
    for q in ("log_evidence", "jensen_bound", "info_bits", "log_pred", "n_errors", "error_rate"):
        assert float(cell[q]) == pytest.approx(scores[q], rel=1e-9, abs=1e-12), q


def test_jensen_bound_below_ep_evidence_everywhere(study):
    _, _, ds = study
    ep = ds["log_evidence"].sel(backend="ep")
    assert np.all(ds["jensen_bound"].values <= ep.values[None] + 1e-8)
    assert np.all(ds["error_rate"].values >= 0) and np.all(ds["error_rate"].values <= 1)


def test_best_point_is_the_argmax(study):
    _, _, ds = study
    best = best_point(ds, "log_evidence")
    for name in ("laplace", "ep"):
        values = ds["log_evidence"].sel(backend=name).values
        i, j = np.unravel_index(np.argmax(values), values.shape)
        assert best[name] == {"log_lengthscale": ELLS[i], "log_amplitude": SFS[j],
                              "log_evidence": values[i, j]}
    worst_errors = best_point(ds, "n_errors", "ep")["ep"]["n_errors"]
    assert worst_errors == ds["n_errors"].sel(backend="ep").min()


def test_contour_panels(study):
    _, _, ds = study
    fig = grid_contours(ds, quantities=("log_evidence", "info_bits"))
    assert len(fig.axes) >= 4
    with pytest.raises(ValueError, match="unknown quantities"):
        grid_contours(ds, quantities=("nope",))


@pytest.mark.parametrize("kwargs, match", [
    (dict(methods=("gibbs",)), "sampler"),
    (dict(methods=()), "non-empty"),
    (dict(methods=("ep",), options={"laplace": {}}), "options given"),
    (dict(methods=("ep",), log_lengthscales=[]), "log_lengthscales"),
    (dict(methods=("ep",), log_amplitudes=[0.0, np.nan]), "log_amplitudes"),
    (dict(methods=("nope",)), "unknown backend"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        grid_study(bz.models.GPC(), small_data(), progress=False, **kwargs)


def test_kernel_without_lengthscale_and_other_family_rejected():
    with pytest.raises(ValueError, match="lengthscale"):
        grid_study(bz.models.GPC(kernel="linear"), small_data(), progress=False)
    with pytest.raises(ValueError, match="GPC"):
        grid_study(bz.models.RVM(), small_data(), progress=False)
