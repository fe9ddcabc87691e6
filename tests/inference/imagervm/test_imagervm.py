"""Numbers for the DFT-domain multikernel image RVM (Tzikas PhD ch. 4): operators, approximations, agreement with the
dense RVM, restoration, object detection, declarations and bad input."""
from __future__ import annotations

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.datasets.imagervm_data import detection_scenes, sinc2d_image, target_image
from bayeszoo.studies import imagervm_detection as D
from bayeszoo.inference.imagervm.operators import ImageDesign
from bayeszoo.inference.imagervm.dft import dft_rvm
from bayeszoo.inference.rvm.em import DEFAULT_OPTIONS as EM_OPTIONS, type2_fit
from bayeszoo.models.imagervm import ImageRVM
from bayeszoo.models.rvm import RVM
from bayeszoo.numerics.special import log_gamma_logpdf

from tests.helpers.declarations import declared_log_densities

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ODD_KERNEL = [[0.0, 1.0, 0.5], [2.0, -1.0, 0.0], [0.3, 0.0, 1.0]]   # not symmetric, not positive: not Mercer


@pytest.fixture(scope="module")
def sinc16():
    return bz.datasets.load("sinc2d_image", size=16, seed=0)


# ------------------------------------------------------------------------------------------------ operators
@pytest.mark.parametrize("shape", [(6, 7), (8, 8)])
def test_fft_operators_equal_the_dense_design(shape):
    model = ImageRVM(kernels=(2.0, ODD_KERNEL, 5.0))
    design = ImageDesign(model.kernel_images(shape))
    Phi = model.dense_design(shape)
    assert Phi.shape == (shape[0] * shape[1], 3 * shape[0] * shape[1])
    rng = np.random.default_rng(1)
    w = rng.normal(size=(3, *shape))
    r = rng.normal(size=shape)
    np.testing.assert_allclose(design.forward(w).ravel(), Phi @ w.ravel(), atol=1e-12)
    np.testing.assert_allclose(design.adjoint(r).ravel(), Phi.T @ r.ravel(), atol=1e-12)
    np.testing.assert_allclose(design.normal(w).ravel(), Phi.T @ (Phi @ w.ravel()), atol=1e-11)
    # column (m, i) is kernel m centred on pixel i: for the odd kernel, pixel (1, 2) of its column 0 is 0.5
    np.testing.assert_allclose(Phi[:, shape[0] * shape[1]].reshape(shape)[-1, 1], ODD_KERNEL[0][2])


def test_diagonal_approximation_is_the_inverse_diagonal_of_the_precision():
    shape, beta = (6, 7), 3.0
    model = ImageRVM(kernels=(2.0, ODD_KERNEL))
    design = ImageDesign(model.kernel_images(shape))
    Phi = model.dense_design(shape)
    alpha = np.random.default_rng(0).uniform(0.5, 4.0, size=(2, *shape))
    H_diag = beta * np.sum(Phi**2, axis=0) + alpha.ravel()
    np.testing.assert_allclose(design.sigma_diagonal(alpha, beta).ravel(), 1.0 / H_diag, rtol=1e-12)   # (4.22)


@pytest.mark.parametrize("shape", [(6, 7), (8, 8)])
def test_circulant_approximation_is_the_diagonal_of_the_per_weight_circulant_inverse(shape):
    """(4.23): Sigma_ii = [(beta Phi_m^T Phi_m + alpha_i I)^-1]_ii, checked by dense inversion, and the log-grid
    interpolation against the direct sum (relative error < 1e-8)."""
    beta = 2.5
    model = ImageRVM(kernels=(3.0, ODD_KERNEL))
    design = ImageDesign(model.kernel_images(shape))
    Phi = model.dense_design(shape)
    N = shape[0] * shape[1]
    rng = np.random.default_rng(2)
    alpha = np.exp(rng.uniform(np.log(1e-3), np.log(1e4), size=(2, *shape)))
    approx = design.sigma_circulant(alpha, beta)
    for m in range(2):
        Pm = Phi[:, m * N:(m + 1) * N]
        for i in (0, 5, N - 1):
            a_i = alpha[m].ravel()[i]
            exact = np.linalg.inv(beta * Pm.T @ Pm + a_i * np.eye(N))[i, i]
            assert approx[m].ravel()[i] == pytest.approx(exact, rel=1e-5)
        direct = np.array([design._circulant_exact(m, np.array([a]), beta)[0] for a in alpha[m].ravel()])
        np.testing.assert_allclose(approx[m].ravel(), direct, rtol=1e-8)


# ------------------------------------------------------------------------------------------------ the algorithm
@pytest.mark.parametrize("kernels", [(2.0,), (1.0, ODD_KERNEL)])
def test_exact_mode_equals_the_rvm_em_on_the_dense_design(kernels):
    """approx='exact' and the RVM family's ``em`` (MacKay updates, same initial values) on the same dense circulant
    design reach the same alpha, beta and mean. Under the sampler-comparison prior (a = 1, b = 1e-2) neither prunes;
    with a = b = 0 the RVM's em also deletes bases by their share of the objective, which this backend does not (it
    prunes by threshold only, as the thesis), so the two may stop in different local optima there."""
    data = bz.datasets.load("sinc2d_image", size=8, seed=0)
    hyper = dict(a=1.0, b=1e-2, c=1.0, d=1e-3)
    model = ImageRVM(kernels=kernels, **hyper)
    g = model.observed_image(data)
    ours = dft_rvm(model, g, {"approx": "exact", "tol": 1e-9, "max_iter": 5000})
    ref = type2_fit(RVM(**hyper), model.dense_design(g.shape), g.ravel(), {**EM_OPTIONS, "tol": 1e-9, "max_iter": 5000})
    assert ours.converged and ref.converged
    assert ours.iterations == ref.iterations
    np.testing.assert_array_equal(np.flatnonzero(ours.active.ravel()), ref.active)
    np.testing.assert_allclose(ours.alpha.ravel()[ref.active], ref.alpha, rtol=1e-8)
    assert ours.beta == pytest.approx(ref.beta, rel=1e-10)
    np.testing.assert_allclose(ours.mu.ravel()[ref.active], ref.post.mu, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(ours.log_evidence, ref.log_evidence, rtol=1e-10)


def test_thesis_prior_prunes_to_a_sparse_fixed_point():
    """a = b = c = d = 0 (4.15-4.16 as printed): most weights are pruned and the kept ones satisfy alpha = gamma / mu^2."""
    data = bz.datasets.load("sinc2d_image", size=8, seed=0)
    model = ImageRVM(kernels=(2.0,))
    res = dft_rvm(model, model.observed_image(data), {"approx": "exact", "tol": 1e-9, "max_iter": 5000})
    act = res.active
    assert res.converged and 1 <= act.sum() < 16
    gamma = 1.0 - res.alpha[act] * res.sigma_diag[act]
    np.testing.assert_allclose(res.alpha[act], gamma / res.mu[act] ** 2, rtol=1e-6)
    assert np.all(res.mu[~act] == 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_diagonal_and_circulant_restorations_are_close_to_the_exact_one(seed):
    """16 x 16 sinc, sigma^2 = 2, noise sd 0.32: each approximation's restored image is within rms 0.1 of the exact
    (dense) DFT-RVM's, its MSE against the truth within a factor 1.6 of the exact one's, and below the noise."""
    data = bz.datasets.load("sinc2d_image", size=16, seed=seed)
    model = ImageRVM(kernels=(2.0,))
    g, f = model.observed_image(data), data.meta["true_image"]
    exact = dft_rvm(model, g, {"approx": "exact", "max_iter": 100})
    mse_exact = np.mean((exact.restored - f) ** 2)
    for approx in ("diagonal", "circulant"):
        res = dft_rvm(model, g, {"approx": approx, "max_iter": 100})
        assert np.sqrt(np.mean((res.restored - exact.restored) ** 2)) < 0.1
        mse = np.mean((res.restored - f) ** 2)
        assert mse < 1.6 * mse_exact
        assert mse < 0.1 / 3


def test_cg_mean_equals_the_dense_solve():
    """With the precisions fixed (max_iter=1 runs one update), the CG mean of the diagonal mode equals the dense mean."""
    data = bz.datasets.load("sinc2d_image", size=10, seed=3)
    model = ImageRVM(kernels=(2.0, 4.0))
    g = model.observed_image(data)
    res = dft_rvm(model, g, {"approx": "diagonal", "max_iter": 1, "cg_tol": 1e-12, "cg_max_iter": 5000})
    Phi = model.dense_design(g.shape)
    A = res.alpha.ravel()
    mu = np.linalg.solve(res.beta * Phi.T @ Phi + np.diag(A), res.beta * Phi.T @ g.ravel())   # (4.20)
    np.testing.assert_allclose(res.mu.ravel(), mu, rtol=1e-6, atol=1e-8 * np.abs(mu).max())


def test_multikernel_denoising_improves_isnr_through_the_harness():
    data = bz.datasets.load("sinc2d_image", size=30, seed=0)
    model = ImageRVM()                                     # sigma^2 = 2, 4, 8
    fit = bz.fit(model, data, backend="dft", draws=20, chains=2, seed=0, progress=False)
    score = model.score(fit, data)
    assert score["isnr"] > 3.0
    assert 0 < score["n_relevant"] < 3 * 900 // 4
    assert "objective" in fit.idata.groups() and fit.idata.objective["log_evidence"].size == fit.info["iterations"] + 1
    restored = model.restored(fit)
    np.testing.assert_allclose(model.predict(fit, data.X[:5]), restored.ravel()[:5])
    truth = sinc2d_image(30)
    assert np.mean((restored - truth) ** 2) == pytest.approx(score["mse"])


def test_draws_depend_on_the_seed_and_sit_at_the_mean_when_asked(sinc16):
    model = ImageRVM(kernels=(2.0,))
    f1 = bz.fit(model, sinc16, backend="dft", draws=5, chains=2, seed=3, progress=False, approx="circulant")
    f3 = bz.fit(model, sinc16, backend="dft", draws=5, chains=2, seed=4, progress=False, approx="circulant")
    w1, w3 = (f.idata.posterior["w"].values for f in (f1, f3))
    assert not np.allclose(w1, w3)
    at_mean = bz.fit(model, sinc16, backend="dft", draws=3, chains=2, seed=3, progress=False, approx="circulant",
                     w_draws="mean")
    mu = dft_rvm(model, model.observed_image(sinc16), {"approx": "circulant"}).mu
    np.testing.assert_array_equal(at_mean.idata.posterior["w"].values, np.broadcast_to(mu, (2, 3, *mu.shape)))


def test_exact_draws_have_the_posterior_covariance():
    data = bz.datasets.load("sinc2d_image", size=6, seed=0)
    model = ImageRVM(kernels=(2.0,), a=1.0, b=1e-2, c=1.0, d=1e-3)
    fit = bz.fit(model, data, backend="dft", draws=4000, chains=2, seed=0, progress=False, approx="exact", tol=1e-8)
    g = model.observed_image(data)
    res = dft_rvm(model, g, {"approx": "exact", "tol": 1e-8})
    w = fit.idata.posterior["w"].values.reshape(8000, -1)
    sd = np.sqrt(res.sigma_diag.ravel())
    assert np.all(np.abs(w.mean(0) - res.mu.ravel()) < 5 * sd / np.sqrt(8000))
    np.testing.assert_allclose(w.std(0), sd, rtol=0.05)


def test_comparison_table_has_the_family_metrics(sinc16):
    model = ImageRVM(kernels=(2.0,))
    cmp = bz.compare(model, sinc16, backends=["dft"], chains=1, draws=10, seed=0, progress=False,
                     options={"dft": {"approx": "circulant"}})
    row = cmp.table().iloc[0]
    assert row["backend"] == "dft" and row["kind"] == "approximation"
    assert np.isfinite(row["isnr"]) and row["isnr"] > 0 and row["n_relevant"] > 0


# ------------------------------------------------------------------------------------------------ detection
def test_lroc_of_the_detector_beats_chance_and_the_curve_is_monotone():
    scenes = detection_scenes(n_present=6, n_absent=6, size=32, seed=0, target_peak=80.0)
    res = D.run_protocol(scenes, "rvm", max_iter=30)
    assert np.all(np.diff(res["p_fa"]) >= 0) and np.all(np.diff(res["p_dl"]) >= 0)
    assert res["p_fa"][0] == 0 and res["p_fa"][-1] == 1
    # chance: a random location is within 3 pixels of the target with probability ~ pi 3^2 / 32^2 = 0.03,
    # so a detector guessing has LROC area ~ 0.014; the RVM localises most targets
    assert res["correct_localisation"] >= 0.8
    assert res["area"] > 0.5
    mf = D.run_protocol(scenes, "matched")
    assert 0 <= mf["area"] < res["area"]


def test_detector_statistic_is_the_target_weight_mean_of_the_dft_rvm():
    scenes = detection_scenes(n_present=1, n_absent=1, size=32, seed=1, target_peak=80.0)
    for image in scenes["images"]:
        stat, loc, mu_t = D.rvm_detect(image, scenes["target"], max_iter=20, approx="circulant")
        res = dft_rvm(D.detector_model(scenes["target"]), image, {"max_iter": 20, "approx": "circulant"})
        np.testing.assert_array_equal(mu_t, res.mu[0])
        assert stat == np.max(np.abs(res.mu[0])) and abs(mu_t[loc]) == stat


def test_lroc_by_hand():
    stat = np.array([0.9, 0.8, 0.3, 0.5, 0.1, 0.2])
    present = np.array([True, True, True, False, False, False])
    loc = np.array([[1, 1], [5, 5], [2, 2], [-1, -1], [-1, -1], [-1, -1]])
    found = np.array([[1, 2], [9, 9], [2, 2], [0, 0], [0, 0], [0, 0]])     # the second is mislocalised
    res = D.lroc(stat, found, present, loc, (16, 16), radius=1.5)
    # thresholds 0.9, 0.8, 0.5, 0.3, 0.2, 0.1
    np.testing.assert_allclose(res["p_fa"], [0, 0, 0, 1 / 3, 1 / 3, 2 / 3, 1, 1])
    np.testing.assert_allclose(res["p_dl"], [0, 1 / 3, 1 / 3, 1 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3])
    assert res["area"] == pytest.approx(1 / 3 * 1 / 3 + 2 / 3 * 2 / 3)


def test_detection_target_is_the_coin_window():
    t = target_image(40.0)
    assert t.shape == (13, 13) and t.max() == pytest.approx(40.0) and t.min() >= 0
    assert t[6, 6] > 0.5 * t.max() and t[0, 0] < 0.2 * t.max()


# ------------------------------------------------------------------------------------------------ declarations
def _exact_logp(model, data, point):
    Phi = model.dense_design(model.image_shape(data))
    u, z, v = point["log_alpha"], point["z"], point["log_beta"]
    f = Phi @ (z * np.exp(-0.5 * u)).ravel()
    lp = np.sum(log_gamma_logpdf(u, model.a, model.b)) - 0.5 * np.sum(z**2) - 0.5 * z.size * np.log(2 * np.pi)
    lp += log_gamma_logpdf(v, model.c, model.d)
    return lp + np.sum(0.5 * (v - np.log(2 * np.pi)) - 0.5 * np.exp(v) * (data.y - f) ** 2)


def test_pymc_and_numpyro_log_densities_agree_exactly():
    data = bz.datasets.load("sinc2d_image", size=5, seed=0)
    model = ImageRVM(kernels=(1.0, 3.0), a=0.5, b=0.02, c=2.0, d=0.1)
    for point, pm_lp, np_lp, _ in declared_log_densities(model, data, n=2, scale=1.5):
        ours = _exact_logp(model, data, point)
        assert np.isclose(pm_lp, ours, rtol=1e-10)
        assert np.isclose(np_lp, ours, rtol=1e-10)


@pytest.mark.slow
def test_nuts_and_numpyro_agree_on_a_small_image():
    data = bz.datasets.load("sinc2d_image", size=6, seed=0)
    model = ImageRVM(kernels=(2.0,), a=1.0, b=1e-2, c=1.0, d=1e-3)
    cmp = bz.compare(model, data, backends=["numpyro", "nuts", "dft"], reference="numpyro", chains=2, draws=1000,
                     tune=1000, seed=0, progress=False)
    table = cmp.table().set_index("backend")
    assert table.loc["nuts", "rhat_max"] < 1.05
    assert table.loc["nuts", "mean_err"] < 0.3         # posterior means within 0.3 reference sd
    assert table.loc["dft", "isnr"] > 0


# ------------------------------------------------------------------------------------------------ bad input
def test_bad_input_raises_value_errors(sinc16):
    with pytest.raises(ValueError, match="positive number"):
        ImageRVM(kernels=(0.0,))
    with pytest.raises(ValueError, match="positive number"):
        ImageRVM(kernels=(2.0, -1.0))
    with pytest.raises(ValueError, match="2-D kernel image"):
        ImageRVM(kernels=(np.ones((3, 3, 3)),))
    with pytest.raises(ValueError, match="odd sides"):
        ImageRVM(kernels=(np.ones((4, 3)),))
    with pytest.raises(ValueError, match="NaN"):
        ImageRVM(kernels=([[1.0, np.nan, 0.0]],))
    with pytest.raises(ValueError, match="kernels must be a non-empty sequence"):
        ImageRVM(kernels=())
    with pytest.raises(ValueError, match="larger than"):
        bz.fit(ImageRVM(kernels=(np.ones((17, 3)),)), sinc16, backend="dft", draws=2, chains=1)
    model = ImageRVM(kernels=(2.0,))
    with pytest.raises(ValueError, match="2-D"):
        dft_rvm(model, np.ones(16))
    bad = np.ones((8, 8))
    bad[2, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        dft_rvm(model, bad)
    with pytest.raises(ValueError, match="image dataset"):
        bz.fit(model, bz.datasets.load("sinc", n=20, seed=0), backend="dft", draws=2, chains=1)
    with pytest.raises(ValueError, match="approx"):
        bz.fit(model, sinc16, backend="dft", draws=2, chains=1, approx="banded")
    with pytest.raises(ValueError, match="at most"):
        dft_rvm(ImageRVM(kernels=(2.0,)), np.ones((70, 70)), {"approx": "exact"})
    with pytest.raises(ValueError, match="proper Gamma"):
        model.pymc_model(sinc16)
    with pytest.raises(ValueError, match="fewer draws"):
        bz.fit(model, sinc16, backend="dft", draws=10**6, chains=4)
    with pytest.raises(ValueError, match="both with and without"):
        D.lroc([1.0, 2.0], [[0, 0], [1, 1]], [True, True], [[0, 0], [1, 1]], (8, 8))


def test_report_picture_and_lroc_figure(tmp_path, sinc16):
    from bayeszoo.diagnostics.imagervm_plots import lroc_figure
    from bayeszoo.diagnostics.plots import family_picture

    model = ImageRVM(kernels=(2.0, 4.0))
    cmp = bz.compare(model, sinc16, backends=["dft"], chains=1, draws=5, seed=0, progress=False)
    fig = family_picture(cmp)
    assert len([ax for ax in fig.axes if ax.get_images()]) == 3 + 2      # observed, true, restored + 2 weight maps
    cmp.save(tmp_path / "run")
    assert (tmp_path / "run" / "report.html").stat().st_size > 10_000
    curve = D.lroc([0.9, 0.2], [[0, 0], [0, 0]], [True, False], [[0, 0], [-1, -1]], (8, 8))
    fig = lroc_figure({"rvm": curve})
    assert fig.axes[0].get_lines()


def test_spec_round_trips_with_a_kernel_image(tmp_path, sinc16):
    from bayeszoo.models import from_spec

    model = ImageRVM(kernels=(ODD_KERNEL, 2.0), a=1.0, b=0.01)
    again = from_spec(model.spec())
    assert again == model and again.kernel_labels() == ["image 3x3", "gauss s2=2"]
    fit = bz.fit(model, sinc16, backend="dft", draws=3, chains=1, seed=0, progress=False)
    fit.save(tmp_path / "f.nc")
    loaded = bz.load_fit(tmp_path / "f.nc")
    np.testing.assert_allclose(model.restored(loaded), model.restored(fit))


# ------------------------------------------------------------------------------------------------ defaults
def test_dft_runs_on_the_demo_image_with_no_counts_or_options():
    from bayeszoo import registry
    from bayeszoo.demo import DEMOS

    demo = DEMOS["imagervm-sinc"]
    model, data = demo["model"](), demo["data"]()
    fit = bz.fit(model, data, backend="dft", progress=False)
    counts = registry.get(model, "dft").harness_defaults(model, data)
    assert (fit.n_chains, fit.n_draws) == (counts["chains"], counts["draws"]) and counts["tune"] == 0
    assert fit.info["converged"] and model.score(fit, data)["isnr"] > 0


def test_default_counts_of_a_large_image_fit_the_draw_budget():
    from bayeszoo import registry
    from bayeszoo.inference.imagervm.dft import DEFAULT_DRAW_VALUES, OPTIONS

    model, data = ImageRVM(), bz.datasets.load("cameraman", psf="uniform", snr_db=40)
    counts = registry.get(model, "dft").harness_defaults(model, data)
    values = counts["chains"] * counts["draws"] * model.n_kernels * data.n
    assert 1 <= values <= DEFAULT_DRAW_VALUES <= OPTIONS["max_draw_values"].default
