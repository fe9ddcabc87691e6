"""BID model, data and Fourier numerics: circular convolution, PSFs, degradations, declarations, scoring, bad input."""
import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

import bayeszoo as bz
from bayeszoo.datasets.bid_data import (degrade, gaussian_psf, image_problem, make_psf, motion_psf,
                                        noise_variance, uniform_psf)
from bayeszoo.results import build_fit
from bayeszoo.numerics import fft as _fft
from bayeszoo.models.bid import BID, F_SCALE, VARIANTS, isnr, parse_variant, ssd_upto_shift

from tests.helpers.declarations import declared_log_densities


def _direct_circular_conv(f, k):
    """sum_j k_j f_{i - j} (indices mod the image size), written as loops."""
    R, C = f.shape
    kr, kc = k.shape
    out = np.zeros_like(f)
    for i in range(R):
        for j in range(C):
            for a in range(kr):
                for b in range(kc):
                    out[i, j] += k[a, b] * f[(i - (a - kr // 2)) % R, (j - (b - kc // 2)) % C]
    return out


def test_fft_circular_convolution_equals_direct():
    rng = np.random.default_rng(0)
    f = rng.standard_normal((9, 10))
    for k in (rng.standard_normal((3, 5)), rng.standard_normal((7, 7)), motion_psf()):
        k_otf = _fft.otf(k, f.shape)
        np.testing.assert_allclose(_fft.conv(f, k_otf), _direct_circular_conv(f, k), atol=1e-12)
        # corr is the adjoint of conv: <K x, y> = <x, K^T y>
        y = rng.standard_normal(f.shape)
        assert np.sum(_fft.conv(f, k_otf) * y) == pytest.approx(np.sum(f * _fft.corr(y, k_otf)), rel=1e-12)


def test_fft_helpers_exact_on_small_arrays():
    rng = np.random.default_rng(1)
    shape = (6, 7)
    k = rng.standard_normal((3, 3))
    assert np.array_equal(_fft.window(_fft.embed(k, shape), 3), k)
    # a^T C a for a circulant C with eigenvalues c, against the dense circulant matrix
    c = 0.5 + np.abs(_fft.rfft2(rng.standard_normal(shape))) ** 2    # a real symmetric spectrum
    a = rng.standard_normal(shape)
    dense = np.column_stack([_fft.irfft2(_fft.rfft2(e.reshape(shape)) * c, shape).ravel() for e in np.eye(42)])
    assert _fft.circulant_quad(_fft.rfft2(a), c, shape) == pytest.approx(a.ravel() @ dense @ a.ravel(), rel=1e-12)
    assert _fft.spectrum_sum(np.log(c), shape) == pytest.approx(np.linalg.slogdet(dense)[1], rel=1e-12)
    # difference filters: f(x, y) - f(x+1, y), f(x, y) - f(x, y+1) and the SAR Laplacian (5.10, 5.11, 5.54)
    f = rng.standard_normal(shape)
    q1, q2 = (_fft.rfft2(q) for q in _fft.difference_kernels(shape, "St"))
    np.testing.assert_allclose(_fft.conv(f, q1), f - np.roll(f, -1, 0), atol=1e-12)
    np.testing.assert_allclose(_fft.conv(f, q2), f - np.roll(f, -1, 1), atol=1e-12)
    (lap,) = (_fft.rfft2(q) for q in _fft.difference_kernels(shape, "G"))
    expected = 4 * f - np.roll(f, 1, 0) - np.roll(f, -1, 0) - np.roll(f, 1, 1) - np.roll(f, -1, 1)
    np.testing.assert_allclose(_fft.conv(f, lap), expected, atol=1e-12)
    # the stencil forms used inside CG equal the spectral products, adjoints included (batched too)
    fb = rng.standard_normal((2, *shape))
    for variant in ("St", "G"):
        for q, stencil in zip(_fft.difference_kernels(shape, variant), _fft.STENCILS[variant]):
            q_hat = _fft.rfft2(q)
            np.testing.assert_allclose(_fft.apply_stencil(fb, stencil), _fft.conv(fb, q_hat), atol=1e-12)
            np.testing.assert_allclose(_fft.adjoint_stencil(fb, stencil), _fft.corr(fb, q_hat), atol=1e-12)


def test_pcg_solves_spd_system():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((20, 20))
    A = A @ A.T + 20 * np.eye(20)
    b = rng.standard_normal((2, 4, 5))
    x, its, rel = _fft.pcg(lambda v: (v.reshape(2, 20) @ A).reshape(2, 4, 5), b, lambda r: r, np.zeros_like(b),
                           max_iter=100, tol=1e-12)
    np.testing.assert_allclose(x.reshape(2, 20), np.linalg.solve(A, b.reshape(2, 20).T).T, atol=1e-10)
    assert np.all(rel <= 1e-12) and its <= 25


def test_thesis_psfs():
    u = uniform_psf(7)
    assert u.shape == (7, 7) and np.allclose(u, 1 / 49)
    g = gaussian_psf(5.0)
    assert g.shape == (15, 15) and g.sum() == pytest.approx(1.0)
    x = np.arange(-7, 8)
    assert np.sum(g * x[:, None] ** 2) == pytest.approx(5.0, rel=0.01)     # variance 5 (truncated at 3 sd)
    m = motion_psf()
    row = (0.25 + 0.2 * (np.arange(-4, 5) + 4)) ** -0.5                 # (u0^2 + 2a(x + s_x))^(-1/2)
    assert m.shape == (3, 9)
    np.testing.assert_allclose(m, np.tile(row, (3, 1)) / (3 * row.sum()))
    for name in ("gaussian", "uniform", "motion"):
        assert make_psf(name).sum() == pytest.approx(1.0)


def test_degraded_cameraman_problem():
    d = bz.datasets.load("cameraman", psf="uniform", snr_db=40, seed=0)
    assert d.meta["shape"] == (256, 256) and d.n == 256 * 256 and d.task == "image"
    f = d.meta["true_image"]
    assert f.min() >= 0 and f.max() <= 1
    sigma2 = d.meta["noise_var"]
    assert 10 * np.log10(np.sum(f**2) / (f.size * sigma2)) == pytest.approx(40.0)
    resid = d.y.reshape(256, 256) - _fft.conv(f, _fft.otf(uniform_psf(7), f.shape))
    assert np.var(resid) == pytest.approx(sigma2, rel=0.02)                # the noise added is at that SNR
    again = bz.datasets.load("cameraman", psf="uniform", snr_db=40, seed=0)
    assert np.array_equal(again.y, d.y)
    other = bz.datasets.load("cameraman", psf="uniform", snr_db=40, seed=1)
    assert not np.array_equal(other.y, d.y)
    crop = bz.datasets.load("cameraman", psf="motion", snr_db=20, crop=(40, 90, 32))
    assert crop.meta["shape"] == (32, 32)
    np.testing.assert_array_equal(crop.meta["true_image"], f[40:72, 90:122])
    assert bz.datasets.load("coins", size=64).meta["shape"] == (64, 64)


def test_bad_input_raises_before_work(monkeypatch):
    with pytest.raises(ValueError, match="2-D"):
        image_problem(np.zeros((4, 4, 3)))
    with pytest.raises(ValueError, match="non-finite"):
        image_problem(np.array([[0.0, np.nan], [1.0, 2.0]]))
    with pytest.raises(ValueError, match="smaller than the psf"):
        degrade(np.ones((5, 5)), uniform_psf(7))
    with pytest.raises(ValueError, match="positive value"):
        degrade(np.ones((9, 9)), np.array([[1.0, -2.0, 1.0]]))
    with pytest.raises(ValueError, match="positive value"):
        degrade(np.ones((9, 9)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="finite"):
        noise_variance(np.ones((9, 9)), float("inf"))
    with pytest.raises(ValueError, match="snr_db"):
        bz.datasets.load("cameraman", snr_db=float("nan"))
    with pytest.raises(ValueError, match=r"^dataset 'cameraman': psf must be one of \('gaussian', 'uniform', "
                                         r"'motion'\); got 'disk'$"):
        bz.datasets.load("cameraman", psf="disk")
    with pytest.raises(ValueError, match="variant"):
        BID(variant="StStT")
    with pytest.raises(ValueError, match="psf_size"):
        BID(psf_size=4)
    with pytest.raises(ValueError, match="b_gamma"):
        BID(b_gamma=0.0)
    with pytest.raises(ValueError, match="white_level"):
        BID(white_level=0.0)
    with pytest.raises(ValueError, match="zero everywhere"):
        bz.fit(BID(psf_size=3), image_problem(np.zeros((8, 8))), backend="vb")
    small = image_problem(np.ones((5, 5)))
    with pytest.raises(ValueError, match="smaller than the PSF"):
        bz.fit(BID(psf_size=7), small, backend="vb")
    sinc = bz.datasets.load("sinc", n=10)
    with pytest.raises(ValueError, match="image dataset"):
        bz.fit(BID(), sinc, backend="vb")
    with pytest.raises(ValueError, match="a_alpha > 0"):
        bz.fit(BID(a_alpha=0.0, b_alpha=0.0, psf_size=3), image_problem(np.ones((8, 8))), backend="gibbs")
    # 4 x 1000 draws of a 256 x 256 image (and its PSF) hold 4 GiB, beyond a 1 GiB limit: refused by the memory guard
    monkeypatch.setenv("BAYESZOO_MEMORY_LIMIT", "1GiB")
    with pytest.raises(ValueError, match=r"BID backend 'vb': this fit would need about 4.02 GiB.*at most 245 draws "
                                         r"of 4 chains"):
        bz.fit(BID(), bz.datasets.load("cameraman"), backend="vb", draws=1000, chains=4)


def test_variants_parse_in_thesis_order():
    assert len(VARIANTS) == 8 and len(set(VARIANTS)) == 8
    assert parse_variant("StGSt") == ("St", "G", "St")
    assert parse_variant("GGG") == ("G", "G", "G")


def test_canonical_output_is_invariant_to_scale_and_sign():
    rng = np.random.default_rng(3)
    model = BID(psf_size=5, sigma_phi2=1.0)
    f = rng.uniform(0, 1, (12, 12))
    w = np.where(model.support_mask(f.shape), rng.uniform(0.1, 1.0, f.shape), 0.0)
    base = model.canonical(f, w)
    for s in (3.0, -0.5):
        other = model.canonical(s * f, w / s)
        np.testing.assert_allclose(other["image"], base["image"], rtol=1e-9)
        np.testing.assert_allclose(other["psf"], base["psf"], rtol=1e-9, atol=1e-15)
    h = _fft.conv(w, _fft.rfft2(_fft.gaussian_basis(f.shape, 1.0)))
    # image * psf reproduces f * h (psf window covers the whole support plus the kernel's reach here)
    assert base["psf"].shape == (11, 11)
    assert base["psf"].sum() == pytest.approx(1.0, abs=1e-3)
    np.testing.assert_allclose(base["image"] / f, h.sum())


def _direct_logp(model, data, point):
    """log p(g, f, w) with the precisions integrated out, written with scipy's Student-t / by hand."""
    arr = model._declaration_arrays(data)
    R, C = arr["shape"]
    mask = model.support_mask((R, C))
    f = arr["f0"] + F_SCALE * model.intensity_unit(arr["g"]) * point["z_f"]
    w = np.zeros((R, C))
    w[mask] = arr["w0"] + arr["w_scale"] * point["z_w"]
    h = _fft.conv(w, _fft.rfft2(_fft.gaussian_basis((R, C), model.sigma_phi2)))
    resid = arr["g"] - _fft.conv(f, _fft.rfft2(h))
    psf_p, noise_p, image_p = model.priors
    diffs = [_fft.conv(f, _fft.rfft2(q)) for q in _fft.difference_kernels((R, C), image_p)]

    def group(x, a, b, per):
        x = np.ravel(x)
        if per:
            return np.sum(stats.t.logpdf(x, df=2 * a, scale=math.sqrt(b / a)))
        n = x.size
        return (a * math.log(b) - gammaln(a) + gammaln(a + n / 2) - n / 2 * math.log(2 * math.pi)
                - (a + n / 2) * math.log(b + 0.5 * np.sum(x**2)))

    prec = model.precision_priors(arr["g"])                   # the rates in the image's intensity unit
    lp = group(w[mask], model.a_alpha, model.b_alpha, psf_p == "St")
    lp += group(resid, prec["a_beta"], prec["b_beta"], noise_p == "St")
    return lp + sum(group(e, prec["a_gamma"], prec["b_gamma"], image_p == "St") for e in diffs)


@pytest.mark.parametrize("variant", ["StStSt", "GGG", "StGSt"])
def test_pymc_and_numpyro_declare_the_same_density(variant):
    data = bz.datasets.load("bid_blocks", size=16, n_blocks=4, psf="uniform")
    model = BID(variant=variant, psf_size=5, sigma_phi2=1.0, a_alpha=1.0, b_alpha=1e-3, a_beta=2.0, b_beta=1e-3)
    [(point, lp_pymc, lp_numpyro, _)] = declared_log_densities(model, data, rng=np.random.default_rng(4), n=1)
    lp_direct = _direct_logp(model, data, point)
    assert lp_pymc == pytest.approx(lp_direct, rel=1e-10)
    assert lp_numpyro == pytest.approx(lp_direct, rel=1e-10)


def _gather_logp_and_grad(model, data, point):
    """log p(g, f[, w]) and its gradient in (z_f[, z_w]) by the declarations' former formula, in NumPy: h * f as a
    gather over the PSF's offsets dotted with the weights (blind: of phi * f made with dense circulant matrices),
    the gradient by the chain rule through dense matrices of every linear map, built column by column."""
    arr = model._declaration_arrays(data)
    g = model.observed_image(data)
    R, C = g.shape
    M = R * C
    prec = model.precision_priors(g)
    psf_p, noise_p, image_p = model.priors
    rows, cols = np.indices((R, C))

    def gather_of(sr, sc):
        return ((rows.ravel()[:, None] - sr[None, :]) % R) * C + (cols.ravel()[:, None] - sc[None, :]) % C

    def circ_gauss(n):
        d = np.arange(n)
        d = np.minimum(d, n - d).astype(float)
        return np.exp(-d[(np.arange(n)[:, None] - np.arange(n)[None, :]) % n] ** 2 / (2.0 * model.sigma_phi2))

    def dense(linear):
        return np.column_stack([linear(e.reshape(R, C)).ravel() for e in np.eye(M)])

    def group(x, a, b, per):                                 # log density of one group and its gradient in x
        if per:
            const = a * math.log(b) - gammaln(a) + gammaln(a + 0.5) - 0.5 * math.log(2 * math.pi)
            return x.size * const - (a + 0.5) * np.sum(np.log(b + 0.5 * x**2)), -(a + 0.5) * x / (b + 0.5 * x**2)
        n, s = x.size, b + 0.5 * np.sum(x**2)
        const = a * math.log(b) - gammaln(a) + gammaln(a + n / 2) - n / 2 * math.log(2 * math.pi)
        return const - (a + n / 2) * math.log(s), -(a + n / 2) * x / s

    f = g + arr["f_scale"] * point["z_f"]
    if model.known:
        H = _fft.embed(model.known_psf(data), (R, C))
        sr, sc = np.nonzero(H)
        gather, weights = gather_of(sr, sc), H[sr, sc]
        blur = dense(lambda x: x.ravel()[gather] @ weights)                # pred = blur @ f
        lp, d_w = 0.0, None
    else:
        mask = model.support_mask((R, C))
        sr, sc = np.nonzero(mask)
        gather = gather_of(sr, sc)
        phi_r, phi_c = circ_gauss(R), circ_gauss(C)
        w = arr["w0"] + arr["w_scale"] * point["z_w"]
        blur = dense(lambda x: (phi_r @ x @ phi_c).ravel()[gather] @ w)
        lp, d_w = group(w, model.a_alpha, model.b_alpha, psf_p == "St")
    pred = blur @ f.ravel()
    lp_noise, d_resid = group(g.ravel() - pred, prec["a_beta"], prec["b_beta"], noise_p == "St")
    lp += lp_noise
    d_f = -blur.T @ d_resid
    if not model.known:                                       # pred = A w, A = (phi * f)[gather]
        d_w = d_w - (phi_r @ f @ phi_c).ravel()[gather].T @ d_resid
    if image_p == "St":
        diffs = [lambda x: x - np.roll(x, -1, 0), lambda x: x - np.roll(x, -1, 1)]
    else:
        diffs = [lambda x: 4 * x - np.roll(x, 1, 0) - np.roll(x, -1, 0) - np.roll(x, 1, 1) - np.roll(x, -1, 1)]
    for diff in diffs:
        D = dense(diff)
        lp_d, d_eps = group(D @ f.ravel(), prec["a_gamma"], prec["b_gamma"], image_p == "St")
        lp += lp_d
        d_f = d_f + D.T @ d_eps
    grad = {"z_f": arr["f_scale"] * d_f.reshape(R, C)}
    if not model.known:
        grad["z_w"] = arr["w_scale"] * d_w
    return lp, grad


@pytest.mark.parametrize("variant,psf", [("StStSt", "blind"), ("GGG", "blind"), ("StStSt", "known"),
                                         ("GStG", "known")])
def test_fft_declarations_have_the_gather_formulas_density_and_gradient(variant, psf):
    """The declarations convolve by FFT; their log density and its gradient are the former gather-dot formula's (on
    a 12 x 10 image with odd and even sides, a 5 x 5 weight window or a 3 x 3 PSF that is not symmetric), in PyMC
    and NumPyro."""
    import jax
    from numpyro.infer.util import log_density

    rng = np.random.default_rng(11)
    true_psf = np.array([[0.1, 0.4, 0.2], [0.3, 1.0, 0.5], [0.05, 0.25, 0.2]])
    data = image_problem(rng.uniform(0.1, 1.0, (12, 10)), true_psf=true_psf)
    model = BID(variant=variant, psf=psf, psf_size=5, sigma_phi2=1.0, a_alpha=1.0, b_alpha=1e-3, a_beta=2.0,
                b_beta=1e-3)
    pm_model = model.pymc_model(data)
    logp, dlogp = pm_model.compile_logp(), pm_model.compile_dlogp()
    names = [v.name for v in pm_model.value_vars]
    fn = model.numpyro_model(data)
    np_grad = jax.jit(jax.grad(lambda z: log_density(fn, (), {}, z)[0]))
    for _ in range(2):
        point = {k: rng.normal(size=np.shape(v)) for k, v in pm_model.initial_point().items()}
        lp_ref, grad_ref = _gather_logp_and_grad(model, data, point)
        ref = np.concatenate([grad_ref[k].ravel() for k in names])
        atol = 1e-10 * np.max(np.abs(ref))
        assert float(logp(point)) == pytest.approx(lp_ref, rel=1e-10)
        np.testing.assert_allclose(dlogp(point), ref, rtol=1e-10, atol=atol)
        assert float(log_density(fn, (), {}, point)[0]) == pytest.approx(lp_ref, rel=1e-10)
        jax_grad = np_grad({k: jax.numpy.asarray(v) for k, v in point.items()})
        np.testing.assert_allclose(np.concatenate([np.ravel(jax_grad[k]) for k in names]), ref, rtol=1e-10,
                                   atol=atol)


def test_score_isnr_on_constructed_fits():
    data = bz.datasets.load("bid_blocks", size=16, n_blocks=4, psf="uniform")
    model = BID(psf_size=7, sigma_phi2=0.5)
    truth, g = data.meta["true_image"], model.observed_image(data)
    V = model.psf_view_side((16, 16))
    true_window = _fft.window(_fft.embed(data.meta["true_psf"], (16, 16)), V)
    h_in = _fft.window(_fft.embed(model.initial_psf((16, 16)), (16, 16)), V)
    half_f = 0.5 * (truth + g)                                           # halves the error: ISNR = 20 log10 2
    half_h = 0.5 * (true_window + h_in)
    draws = {"image": np.broadcast_to(half_f, (2, 3, 16, 16)), "psf": np.broadcast_to(half_h, (2, 3, V, V))}
    fit = build_fit(model, data, "vb", "approximation", draws, timing={"total": 1.0},
                   info={"seconds_per_iteration": 0.25})
    score = model.score(fit, data)
    assert score["isnr_f"] == pytest.approx(20 * np.log10(2), rel=1e-9)
    assert score["isnr_h"] == pytest.approx(20 * np.log10(2), rel=1e-9)
    assert score["seconds_per_iter"] == 0.25
    assert np.isnan(score["isnr_f_shift"])        # 16 x 16: too small for the measure's 15-pixel frame
    assert isnr(truth, g, g) == pytest.approx(0.0)
    np.testing.assert_allclose(model.predict(fit, [[3, 4], [15, 0]]), [half_f[3, 4], half_f[15, 0]])


def test_isnr_up_to_a_shift_forgives_the_shift_a_blind_estimate_cannot_identify():
    """A restoration that is the truth moved by one pixel: plain ISNR counts the shift as error, isnr_f_shift (Levin
    et al.'s measure) finds it and sees a perfect image; halving the error of an unshifted estimate gives
    20 log10 2 on both."""
    data = bz.datasets.load("cameraman", psf="uniform", snr_db=30, seed=0, size=48)
    model = BID(psf_size=7)
    truth, g = data.meta["true_image"], model.observed_image(data)
    V = model.psf_view_side(truth.shape)
    psf = np.broadcast_to(np.full((V, V), 1.0 / V**2), (1, 1, V, V))

    def fit_of(image):
        draws = {"image": np.broadcast_to(image, (1, 1, *image.shape)), "psf": psf}
        return build_fit(model, data, "vb", "approximation", draws, timing={"total": 1.0})

    moved = np.roll(truth, 1, axis=1)
    shifted = model.score(fit_of(moved), data)
    assert shifted["isnr_f_shift"] == np.inf and shifted["isnr_f"] < 5
    half = model.score(fit_of(0.5 * (truth + g)), data)
    assert half["isnr_f_shift"] == pytest.approx(20 * np.log10(2), abs=1e-6)


def test_ssd_upto_shift_finds_subpixel_and_integer_shifts():
    rows, cols = np.mgrid[0:40, 0:40].astype(float)
    plane = lambda r, c: 0.3 * r - 0.2 * c + 1.0                          # bilinear interpolation is exact on it
    truth = plane(rows, cols)
    moved = plane(rows + 0.75, cols - 1.25)
    assert ssd_upto_shift(moved, truth, border=8) == pytest.approx(0.0, abs=1e-20)
    inner = (slice(8, 32), slice(8, 32))
    unshifted = float(np.sum((moved - truth)[inner] ** 2))
    assert ssd_upto_shift(moved, truth, max_shift=0, border=8) == pytest.approx(unshifted, rel=1e-12)
    assert unshifted == pytest.approx(24 * 24 * (0.3 * 0.75 + 0.2 * 1.25) ** 2, rel=1e-12)
    rng = np.random.default_rng(0)
    image = rng.random((40, 40))
    assert ssd_upto_shift(np.roll(image, (2, -3), (0, 1)), image, border=8) == pytest.approx(0.0, abs=1e-20)
    other = rng.random((40, 40))                     # step 1: the minimum over the integer shifts, by brute force
    brute = min(float(np.sum((other[8 + i:32 + i, 8 + j:32 + j] - image[inner]) ** 2))
                for i in range(-2, 3) for j in range(-2, 3))
    assert ssd_upto_shift(other, image, max_shift=2, step=1, border=8) == pytest.approx(brute, rel=1e-12)


@pytest.mark.parametrize("kwargs, message", [
    ({"estimate": np.zeros((40, 41))}, "same shape"),
    ({"border": 5}, "border > max_shift"),
    ({"step": 0.0}, "step > 0"),
    ({"estimate": np.zeros((30, 30)), "truth": np.zeros((30, 30))}, "too small"),
    ({"estimate": np.full((40, 40), np.nan)}, "finite"),
])
def test_ssd_upto_shift_refuses_bad_input(kwargs, message):
    args = {"estimate": np.zeros((40, 40)), "truth": np.zeros((40, 40)), **kwargs}
    with pytest.raises(ValueError, match=message):
        ssd_upto_shift(args.pop("estimate"), args.pop("truth"), **args)


def test_family_picture_shows_degraded_true_and_each_backend():
    from bayeszoo.comparison import Comparison
    from bayeszoo.diagnostics.plots import family_picture

    data = bz.datasets.load("bid_blocks", size=16, n_blocks=4, psf="uniform")
    model = BID(psf_size=7, sigma_phi2=0.5)
    V = model.psf_view_side((16, 16))
    rng = np.random.default_rng(5)
    fits = {name: build_fit(model, data, name, "approximation",
                           {"image": rng.uniform(0, 1, (1, 2, 16, 16)), "psf": rng.uniform(0, 1, (1, 2, V, V))},
                           timing={"total": 1.0}) for name in ("vb", "gibbs")}
    fig = family_picture(Comparison(model=model, data=data, fits=fits, order=["vb", "gibbs"]))
    axes = fig.get_axes()
    assert len(axes) == 2 * 4                       # degraded, true, vb, gibbs; image row and PSF row
    assert axes[0].get_title().startswith("degraded") and axes[2].get_title().startswith("vb: ISNR_f")


def test_a_true_image_of_another_shape_is_refused_before_the_fit():
    g = np.random.default_rng(0).uniform(size=(8, 8))
    data = image_problem(g, name="g", meta={"true_image": np.zeros((6, 6))})
    with pytest.raises(ValueError, match=r"true image has shape \(6, 6\), the image is 8 x 8"):
        bz.fit(BID(psf_size=3), data, backend="vb", draws=5, chains=1, progress=False)


def test_restored_refuses_a_fit_made_with_another_bid():
    g = degrade(np.random.default_rng(1).uniform(size=(8, 8)), np.full((3, 3), 1 / 9), seed=0)[0]
    fit = bz.fit(BID(psf_size=3), image_problem(g, name="g"), backend="vb", draws=5, chains=1, progress=False)
    assert BID(psf_size=3).restored(fit)[0].shape == (8, 8)
    with pytest.raises(ValueError, match="other BID options"):
        BID(psf_size=5).restored(fit)
