"""BID with the PSF known (``BID(psf="known")``): the declarations' density, the Gibbs f-draw and the VB updates
against dense exact answers, the near-Gaussian posterior against its closed form, the catalogue problem's
reference, and what is refused."""
import math

import numpy as np
import pytest
from scipy import stats

import bayeszoo as bz
from bayeszoo import catalogue
from bayeszoo.catalogue import reference as rules
from bayeszoo.datasets.bid_data import degrade, image_problem
from bayeszoo.inference.bid import common as C
from bayeszoo.inference.bid import gibbs, vb
from bayeszoo.models.bid import BID, F_SCALE
from bayeszoo.numerics import fft as _fft
from bayeszoo.results import build_fit

from tests.helpers.declarations import declared_log_densities

SHAPE = (4, 5)
M = SHAPE[0] * SHAPE[1]
KNOWN_PSF_KEY = "bid-cameraman-crop-known-psf"
# a 3 x 3 PSF that is not symmetric (a flipped kernel or a transposed convolution would show) and not normalised
# (the model divides it by its sum)
PSF = np.array([[0.1, 0.4, 0.2], [0.3, 1.0, 0.5], [0.05, 0.25, 0.2]])


def _matrix(fn, shape=SHAPE):
    n = shape[0] * shape[1]
    return np.column_stack([fn(e.reshape(shape)).ravel() for e in np.eye(n)])


def _problem(shape=SHAPE, seed=0, snr_db=30.0):
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0, 1, shape)
    g, _ = degrade(truth, PSF, snr_db=snr_db, seed=seed)
    return image_problem(g, name="tiny", true_image=truth, true_psf=PSF)


def _blur_matrix(shape=SHAPE):
    h_hat = _fft.otf(PSF / PSF.sum(), shape)
    return _matrix(lambda x: _fft.conv(x, h_hat), shape)


# ------------------------------------------------------------------------------------------- the model
def test_known_psf_mode_reports_the_image_alone_and_keeps_the_psf_with_the_fit():
    data = _problem()
    model = BID(psf="known", psf_size=3, white_level=1.0)
    assert model.var_dims(data) == {"image": ("row", "col")} and model.compare_vars == ("image",)
    assert BID(psf_size=3).compare_vars == ("image", "psf")
    np.testing.assert_allclose(model.known_psf(data), PSF / PSF.sum())
    fit = bz.fit(model, data, "vb", draws=4, chains=1, seed=0, progress=False)
    assert list(fit.posterior.data_vars) == ["image"]
    image, psf = model.restored(fit)
    V = model.psf_view_side(SHAPE)
    np.testing.assert_allclose(psf, _fft.window(_fft.embed(PSF / PSF.sum(), SHAPE), V))
    score = model.score(fit, data)
    assert math.isfinite(score["isnr_f"]) and math.isnan(score["isnr_h"])      # nothing is estimated for h
    np.testing.assert_allclose(model.predict(fit, [[1, 2]]), [image[1, 2]])
    # the model, its fits and the catalogue tell the two modes apart
    assert model.spec()["psf"] == "known" and BID(psf_size=3, white_level=1.0).spec() != model.spec()


def test_known_psf_gibbs_reproduces_and_its_fits_reload(tmp_path):
    data = _problem()
    model = BID(psf="known", white_level=1.0)
    kw = dict(draws=6, tune=2, chains=2, progress=False)
    fit = bz.fit(model, data, "gibbs", seed=3, **kw)
    np.testing.assert_array_equal(bz.fit(model, data, "gibbs", seed=3, **kw).posterior["image"].values,
                                  fit.posterior["image"].values)
    assert not np.array_equal(bz.fit(model, data, "gibbs", seed=4, **kw).posterior["image"].values,
                              fit.posterior["image"].values)
    assert fit.info["cg_hit_limit"] == 0 and fit.info["cg_iterations_f"] > 0 and fit.info["cg_iterations_w"] == 0
    back = bz.load_fit(fit.save(tmp_path / "known.nc"))
    np.testing.assert_array_equal(back.posterior["image"].values, fit.posterior["image"].values)
    np.testing.assert_array_equal(model.restored(back)[1], model.restored(fit)[1])      # the PSF came along


def test_known_psf_needs_a_true_psf_and_refuses_other_modes():
    g = _problem().y.reshape(SHAPE)
    model = BID(psf="known", psf_size=3)
    for backend in ("vb", "gibbs", "numpyro"):
        with pytest.raises(ValueError, match=r"data.meta\['true_psf'\].*has none"):
            bz.fit(model, image_problem(g, name="no psf"), backend, draws=2, tune=2, chains=1, progress=False)
    with pytest.raises(ValueError, match=r"psf must be one of \('blind', 'known'\); got 'given'"):
        BID(psf="given")
    # vb_sparse estimates the PSF: it is not offered, and asking for it names why
    assert "vb_sparse" not in bz.backends(model) and "vb_sparse" in bz.backends(BID(psf_size=3))
    with pytest.raises(ValueError, match="vb_sparse estimates the PSF"):
        bz.fit(model, _problem(), "vb_sparse")
    # no PSF weights, so the improper a_alpha = b_alpha = 0 is no obstacle to the samplers
    fit = bz.fit(BID(psf="known", a_alpha=0.0, b_alpha=0.0), _problem(), "gibbs", draws=3, tune=1, chains=2,
                 progress=False)
    assert fit.posterior["image"].shape == (2, 3, *SHAPE)
    # psf_size plays no part: a window larger than the image is not refused
    assert BID(psf="known", psf_size=31).var_dims(_problem()) == {"image": ("row", "col")}


def _direct_logp(model, data, z_f):
    """log p(g, f) with the precisions integrated out, from scipy's Student-t and the dense blur matrix."""
    g = model.observed_image(data)
    f = g + F_SCALE * model.intensity_unit(g) * z_f
    resid = g.ravel() - _blur_matrix(g.shape) @ f.ravel()
    prec = model.precision_priors(g)

    def student(x, a, b):
        return np.sum(stats.t.logpdf(np.ravel(x), df=2 * a, scale=math.sqrt(b / a)))

    diffs = [f - np.roll(f, -1, 0), f - np.roll(f, -1, 1)]
    return student(resid, prec["a_beta"], prec["b_beta"]) + sum(
        student(d, prec["a_gamma"], prec["b_gamma"]) for d in diffs)


def test_known_psf_declarations_are_the_direct_density():
    data = _problem(shape=(6, 7), seed=2)
    model = BID(psf="known", a_beta=3.0, b_beta=2e-3, a_gamma=1.5, b_gamma=0.02)
    results = declared_log_densities(model, data, rng=np.random.default_rng(4), n=2)
    for point, lp_pymc, lp_numpyro, _ in results:
        assert set(point) == {"z_f"}                                         # the image alone is free
        expected = _direct_logp(model, data, point["z_f"])
        assert lp_pymc == pytest.approx(expected, rel=1e-10)
        assert lp_numpyro == pytest.approx(expected, rel=1e-10)


# -------------------------------------------------------------------------------- conditionals, exactly
def test_known_psf_gibbs_f_draw_is_the_exact_gaussian_conditional():
    """4000 chains draw f | beta, gamma once with the given PSF: mean and covariance match the dense Gaussian."""
    rng = np.random.default_rng(7)
    data = _problem(seed=7)
    problem = C.make_problem(BID(psf="known", white_level=1.0), data)
    assert problem.known
    n = 4000
    f = np.broadcast_to(rng.uniform(0, 1, SHAPE), (n, *SHAPE)).copy()
    beta = np.broadcast_to(rng.uniform(500, 1500, SHAPE), (n, *SHAPE))
    gammas = [np.broadcast_to(rng.uniform(5, 15, SHAPE), (n, *SHAPE)) for _ in problem.q_hats]
    draws, _ = gibbs.draw_f(np.random.default_rng(8), problem, f, None, beta, gammas, cg_max_iter=500,
                            cg_tol=1e-13)
    H = _blur_matrix()
    Q = [_matrix(lambda x, q=q: _fft.conv(x, q)) for q in problem.q_hats]
    B = np.diag(beta[0].ravel())
    prec = H.T @ B @ H + sum(Qk.T @ np.diag(gk[0].ravel()) @ Qk for Qk, gk in zip(Q, gammas))
    cov = np.linalg.inv(prec)
    mean = cov @ H.T @ B @ problem.g.ravel()
    flat = draws.reshape(n, M)
    assert np.max(np.abs(flat.mean(0) - mean) / np.sqrt(np.diag(cov) / n)) < 4.5
    se = np.sqrt((cov**2 + np.outer(np.diag(cov), np.diag(cov))) / n)          # sd of a sample covariance entry
    assert np.max(np.abs(np.cov(flat.T) - cov) / se) < 5.0
    # the check can fail: the blind kernel's PSF (phi * w from h_in) is another conditional, rejected
    blind = C.make_problem(BID(psf_size=3, white_level=1.0), data)
    other, _ = gibbs.draw_f(np.random.default_rng(8), blind, f, np.broadcast_to(blind.w0, f.shape), beta, gammas,
                            cg_max_iter=500, cg_tol=1e-13)
    assert np.max(np.abs(other.reshape(n, M).mean(0) - mean) / np.sqrt(np.diag(cov) / n)) > 10


@pytest.mark.parametrize("variant", ["StStSt", "GGG"])
def test_known_psf_vb_updates_are_exact_and_the_bound_rises(variant):
    """q(f)'s mean solves the dense system with the given PSF (and, for GGG, whose precision is circulant, its
    circulant covariance is the exact inverse); the bound, which has no w or alpha terms, never decreases."""
    data = _problem(seed=3)
    model = BID(variant=variant, psf="known", white_level=1.0)
    problem = C.make_problem(model, data)
    st = vb.VBState(problem, problem.w0, cg_max_iter=500, cg_tol=1e-14)
    st.update_f()
    st.update_gamma()
    st.update_beta()
    H = _blur_matrix()
    Q = [_matrix(lambda x, q=q: _fft.conv(x, q)) for q in problem.q_hats]
    B = np.diag(st.E_beta_image().ravel())
    G = [np.diag(np.broadcast_to(st.E(gk)[0], SHAPE).ravel()) for gk in st.gamma]
    prec = H.T @ B @ H + sum(Qk.T @ Gk @ Qk for Qk, Gk in zip(Q, G))
    st.update_f()
    np.testing.assert_allclose(st.mf.ravel(), np.linalg.solve(prec, H.T @ B @ problem.g.ravel()), atol=1e-10)
    Sf = _matrix(lambda x: _fft.irfft2(_fft.rfft2(x) * st.cf, SHAPE))
    if variant == "GGG":
        np.testing.assert_allclose(Sf, np.linalg.inv(prec), rtol=1e-9, atol=1e-14)
    # <n_i^2> = (g - H m)_i^2 + (H S_f H^T)_ii: no PSF-uncertainty terms
    n2 = (problem.g.ravel() - H @ st.mf.ravel()) ** 2 + np.diag(H @ Sf @ H.T)
    np.testing.assert_allclose(st.second_moment_noise().ravel(), n2, rtol=1e-10)
    last = st.bound()
    assert np.isfinite(last)
    for _ in range(5):
        for step in (st.update_f, st.update_gamma, st.update_beta, st.update_noise_prior):
            step()
            now = st.bound()
            assert now >= last - 1e-9 * abs(last), (variant, step.__name__, now - last)
            last = now


# --------------------------------------------------------------------------- a posterior known in closed form
# Gamma(a, a / mean) precisions with a = 1e8 are fixed at their means to 1e-4: the posterior of f is then the
# Gaussian N(A^-1 H^T beta g, A^-1), A = beta H^T H + gamma L^T L (GGG: one noise and one SAR precision)
BETA, GAMMA, SHAPE_A = 400.0, 30.0, 1e8


def _gaussian_problem():
    data = _problem(shape=(5, 6), seed=11, snr_db=20.0)
    model = BID(variant="GGG", psf="known", white_level=1.0, a_beta=SHAPE_A, b_beta=SHAPE_A / BETA,
                a_gamma=SHAPE_A, b_gamma=SHAPE_A / GAMMA)
    H = _blur_matrix((5, 6))
    (lap,) = [_matrix(lambda x, q=q: _fft.conv(x, _fft.rfft2(q)), (5, 6))
              for q in _fft.difference_kernels((5, 6), "G")]
    cov = np.linalg.inv(BETA * H.T @ H + GAMMA * lap.T @ lap)
    mean = cov @ (BETA * H.T @ model.observed_image(data).ravel())
    return model, data, mean, cov


def test_known_psf_vb_is_the_exact_gaussian_posterior():
    model, data, mean, cov = _gaussian_problem()
    state, res = vb.vb_fit(model, data, learn_noise_prior=False, cg_tol=1e-14, cg_max_iter=200)
    np.testing.assert_allclose(state.mf.ravel(), mean, rtol=1e-5, atol=1e-8)
    Sf = _matrix(lambda x: _fft.irfft2(_fft.rfft2(x) * state.cf, (5, 6)), (5, 6))
    np.testing.assert_allclose(Sf, cov, rtol=1e-3, atol=1e-3 * np.max(np.diag(cov)))


def _agrees_with_the_gaussian(fit, mean, cov):
    """z-scores of the posterior means and sds of ``fit`` against the closed form, by the draws' own MCSEs: each
    with the effective sample size of its own statistic (NUTS draws are antithetic: about 1.5 N for the mean and
    0.5 N for the sd on this problem)."""
    import arviz as az

    image = fit.posterior["image"]
    draws = image.values.reshape(fit.n_chains * fit.n_draws, -1)

    def ess(method):
        return np.asarray(az.ess(fit.idata, var_names=["image"], method=method)["image"].values).ravel()

    sd = np.sqrt(np.diag(cov))
    z_mean = (draws.mean(0) - mean) / (sd / np.sqrt(ess("bulk")))
    z_sd = (draws.std(0, ddof=1) - sd) / (sd / np.sqrt(2 * ess("sd")))
    return np.max(np.abs(z_mean)), np.max(np.abs(z_sd))


def test_known_psf_gibbs_samples_the_exact_gaussian_posterior():
    model, data, mean, cov = _gaussian_problem()
    fit = bz.fit(model, data, "gibbs", draws=1500, tune=100, chains=2, seed=0, progress=False, cg_tol=1e-12)
    z_mean, z_sd = _agrees_with_the_gaussian(fit, mean, cov)
    assert z_mean < 4.5 and z_sd < 4.5, (z_mean, z_sd)
    # the check can fail: a model whose noise precision is half as large has a wider posterior
    wider = np.linalg.inv(0.5 * np.linalg.inv(cov) + 0.5 * GAMMA * np.eye(len(mean)))
    assert _agrees_with_the_gaussian(fit, mean, wider)[1] > 10


@pytest.mark.slow
def test_known_psf_numpyro_samples_the_exact_gaussian_posterior():
    model, data, mean, cov = _gaussian_problem()
    fit = bz.fit(model, data, "numpyro", draws=1500, tune=500, chains=2, seed=0, progress=False)
    z_mean, z_sd = _agrees_with_the_gaussian(fit, mean, cov)
    assert z_mean < 4.5 and z_sd < 4.5, (z_mean, z_sd)


@pytest.mark.slow
def test_known_psf_gibbs_and_numpyro_agree_under_student_t_priors():
    """StStSt on a 12 x 12 cameraman crop with the PSF known: the means and sds of the two samplers agree within
    their combined Monte-Carlo errors (the catalogue's agreement rule), and VB's means lie within the posterior."""
    data = bz.datasets.load("cameraman", psf="uniform", snr_db=30, seed=0, crop=(50, 100, 12))
    model = BID(psf="known", a_beta=100.0, b_beta=100.0 * data.meta["noise_var"], white_level=1.0)
    fits = [bz.fit(model, data, "gibbs", draws=4000, tune=200, chains=2, seed=1, progress=False),
            bz.fit(model, data, "numpyro", draws=1500, tune=500, chains=2, seed=2, progress=False)]
    moments = [rules.summarize(fit.posterior, ["image"]) for fit in fits]
    for m, fit in zip(moments, fits):
        assert not rules.check_run(m, rules.run_record(fit)), rules.check_run(m, rules.run_record(fit))
    agree = rules.agreement(*moments)
    assert agree["z_max"] < agree["z_limit"], agree
    vb_fit = bz.fit(model, data, "vb", draws=10, chains=1, progress=False, learn_noise_prior=False)
    z = np.abs(model.restored(vb_fit)[0] - moments[0]["image"]["mean"]) / moments[0]["image"]["sd"]
    assert np.median(z) < 0.5 and np.max(z) < 3.0, (np.median(z), np.max(z))


# ------------------------------------------------------------------------------------ the catalogue problem
def test_the_known_psf_crop_has_a_trusted_catalogue_reference():
    prob = catalogue.problem(KNOWN_PSF_KEY)
    model, data = prob.model(), prob.data()
    assert model.known and model.spec() == {**catalogue.problem("bid-cameraman-crop").model().spec(), "psf": "known"}
    ref = catalogue.lookup(model, data)
    assert ref is not None and ref.trusted, None if ref is None else ref.problems
    assert list(ref.moments) == ["image"] and ref.moments["image"]["mean"].shape == (32, 32)
    for part in (ref.provenance, ref.provenance["crosscheck"]):
        diag = part["diagnostics"]
        assert diag["rhat_max"] < rules.RHAT_MAX and diag["ess_bulk_min"] >= rules.ESS_MIN
        assert part["run"]["divergences"] == 0
    assert {ref.provenance["run"]["engine"], ref.provenance["crosscheck"]["run"]["engine"]} == {"gibbs", "numpyro"}
    # the reference's posterior mean restores the crop (ISNR of the mean against the truth, in dB)
    truth, g = data.meta["true_image"], model.observed_image(data)
    gain = 10 * np.log10(np.sum((truth - g) ** 2) / np.sum((truth - ref.moments["image"]["mean"]) ** 2))
    assert gain > 3.0, gain
    # the blind problem it comes from has no reference, and no demo entry: the gallery shows it instead
    assert catalogue.lookup(catalogue.problem("bid-cameraman-crop").model(), data) is None
    assert prob.demo is not None and catalogue.problem("bid-cameraman-crop").demo is None
    assert {"gibbs", "vb"} <= set(prob.demo.backends) and {"numpyro", "advi"} & set(prob.demo.backends)


def test_family_picture_of_a_known_psf_comparison():
    from bayeszoo.comparison import Comparison
    from bayeszoo.diagnostics.plots import family_picture

    data = _problem()
    model = BID(psf="known", white_level=1.0)
    rng = np.random.default_rng(5)
    fits = {name: build_fit(model, data, name, "approximation", {"image": rng.uniform(0, 1, (1, 2, *SHAPE))},
                            timing={"total": 1.0}) for name in ("vb", "gibbs")}
    fig = family_picture(Comparison(model=model, data=data, fits=fits, order=["vb", "gibbs"]))
    axes = fig.get_axes()
    assert len(axes) == 2 * 4
    titles = [ax.get_title() for ax in axes[:4]]
    assert titles[0] == "degraded g / known h" and titles[2].startswith("vb: ISNR_f") and "ISNR_h" not in titles[2]
    # every PSF panel shows the given PSF
    shown = [np.asarray(ax.get_images()[0].get_array()) for ax in axes[4:]]
    for panel in shown:
        np.testing.assert_allclose(panel, shown[0])


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_blind_crop_breaks_the_rules_that_the_known_psf_crop_keeps():
    """The runs of gallery/no_convergence.ipynb: on the blind crop Gibbs (4 chains x 1200 sweeps) and NumPyro
    (2 x 200 iterations) leave the PSF at R-hat above 1.3 with a bulk ESS below 20 (measured 1.76 / 6 and 2.07 / 3),
    both break the catalogue's rules and they disagree; the same Gibbs sampler with the same sweeps on the crop
    with the PSF known keeps every pixel below R-hat 1.01 with a bulk ESS above 400 (measured 1090); vb_sparse's
    point estimate improves the blind image (measured ISNR_f 2.84 dB). About 4 minutes on two cores."""
    import arviz as az

    blind = catalogue.problem("bid-cameraman-crop")
    model, data = blind.model(), blind.data()
    gibbs_fit = bz.fit(model, data, "gibbs", draws=200, tune=200, chains=4, seed=1, thin=5, progress=False)
    nuts_fit = bz.fit(model, data, "numpyro", draws=100, tune=100, chains=2, seed=2, progress=False)
    for fit in (gibbs_fit, nuts_fit):
        assert float(az.rhat(fit.idata, var_names=["psf"])["psf"].max()) > 1.3, fit.backend
        assert float(az.ess(fit.idata, var_names=["psf"])["psf"].min()) < 20, fit.backend
    candidate = catalogue.Reference.from_fit(gibbs_fit, ["image", "psf"], crosscheck=nuts_fit,
                                             provenance={"source": "catalogue"})
    text = " ".join(candidate.problems)
    assert not candidate.trusted and "engines disagree" in text and "second engine numpyro: R-hat" in text
    sparse = bz.fit(model, data, "vb_sparse", progress=False)
    assert model.score(sparse, data)["isnr_f"] > 1.0

    known = catalogue.problem(KNOWN_PSF_KEY)
    known_model, known_data = known.model(), known.data()
    known_fit = bz.fit(known_model, known_data, "gibbs", draws=1000, tune=200, chains=4, seed=1, progress=False)
    assert float(az.rhat(known_fit.idata)["image"].max()) < rules.RHAT_MAX
    assert float(az.ess(known_fit.idata)["image"].min()) > rules.ESS_MIN
