"""``vb_sparse`` and the non-blind HQS: every update against dense linear algebra or a generic solver on small
images, the PSF on the simplex, the bound monotone within a level, seeds, bad options; one slow recovery test."""
import copy

import numpy as np
import pytest
import scipy.optimize

import bayeszoo as bz
from bayeszoo.datasets.bid_data import camera_shake_kernels, degrade, image_problem, uniform_psf
from bayeszoo.inference.bid import nonblind, vb_sparse as V
from bayeszoo.numerics import fft as _fft

SHAPE = (8, 8)
M = SHAPE[0] * SHAPE[1]


def _matrix(fn, shape=SHAPE):
    """Dense matrix of a linear map on images of ``shape``."""
    n = shape[0] * shape[1]
    return np.column_stack([fn(e.reshape(shape)).ravel() for e in np.eye(n)])


def _state(seed=0, side=3, learn_noise=False):
    rng = np.random.default_rng(seed)
    g = rng.uniform(0, 1, SHAPE)
    psf = rng.uniform(0.1, 1, (side, side))
    st = V.SparseVB(g, psf / psf.sum(), a=0.3, b=1e-2, noise_var=0.05, learn_noise=learn_noise, cg_max_iter=500,
                    cg_tol=1e-13)
    return st, rng


def test_q_x_mean_and_variances_are_the_dense_optimum():
    st, _ = _state()
    st.update_f()
    H = _matrix(lambda x: _fft.conv(x, st.h_otf()))
    for y, mu, v, gk in zip(st.ys, st.mu, st.v, st.E_gamma()):
        A = H.T @ H / st.noise_var + np.diag(gk.ravel())
        np.testing.assert_allclose(mu.ravel(), np.linalg.solve(A, H.T @ y.ravel() / st.noise_var), rtol=1e-8,
                                   atol=1e-10)
        np.testing.assert_allclose(v.ravel(), 1.0 / np.diag(A), rtol=1e-12)


@pytest.mark.parametrize("shape", [(8, 8), (7, 9)])
def test_deconvolved_start_is_the_dense_wiener_solution(shape):
    rng = np.random.default_rng(2)
    psf = rng.uniform(0.1, 1, (3, 3))
    st = V.SparseVB(rng.uniform(0, 1, shape), psf / psf.sum(), a=0.3, b=1e-2, noise_var=0.05, learn_noise=False)
    n = shape[0] * shape[1]
    H = _matrix(lambda x: _fft.conv(x, st.h_otf()), shape)
    st.start_deconvolved(iterations=0)
    for y, mu, c in zip(st.ys, st.mu, st.wiener_precision):
        assert c == pytest.approx(n / np.sum(y * y))
        A = H.T @ H / st.noise_var + c * np.eye(n)
        np.testing.assert_allclose(mu.ravel(), np.linalg.solve(A, H.T @ y.ravel() / st.noise_var), atol=1e-12)
    # q(gamma) from the mean alone
    for rate, mu, v in zip(st.rate, st.mu, st.v):
        assert np.all(v == 0)
        np.testing.assert_allclose(rate, st.b + 0.5 * mu**2, rtol=1e-14)
    # many EM steps: the precision is the Gaussian model's fixed point c = n / (|mu|^2 + trace(A^-1))
    st.start_deconvolved(iterations=20000)
    for y, mu, c in zip(st.ys, st.mu, st.wiener_precision):
        A = H.T @ H / st.noise_var + c * np.eye(n)
        np.testing.assert_allclose(mu.ravel(), np.linalg.solve(A, H.T @ y.ravel() / st.noise_var), atol=1e-12)
        assert c == pytest.approx(n / (np.sum(mu**2) + np.trace(np.linalg.inv(A))), rel=1e-8)


def test_derivative_images_are_the_difference_filters():
    st, _ = _state()
    for y, q in zip(st.ys, _fft.difference_kernels(SHAPE, "St")):
        np.testing.assert_allclose(y, _fft.conv(st.g, _fft.rfft2(q)), atol=1e-12)


def test_psf_normal_equations_match_dense():
    rng = np.random.default_rng(1)
    mu, g = rng.standard_normal(SHAPE), rng.standard_normal(SHAPE)
    side = 5
    A, b = V.psf_normal_equations(mu, g, side)
    # columns: mu shifted by every window offset, i.e. h * mu for unit h at that offset
    cols = []
    for e in np.eye(side * side):
        cols.append(_fft.conv(mu, _fft.otf(e.reshape(side, side), SHAPE)).ravel())
    F = np.column_stack(cols)
    np.testing.assert_allclose(A, F.T @ F, atol=1e-10)
    np.testing.assert_allclose(b, F.T @ g.ravel(), atol=1e-10)


@pytest.mark.parametrize("support", [None, [[0, 1, 0], [1, 1, 1], [0, 0, 1]]])
def test_psf_step_matches_a_generic_constrained_solver(support):
    st, rng = _state(seed=2)
    st.update_f()
    st.update_gamma()
    side = 3
    st.support = None if support is None else np.array(support, bool)
    free = np.ones(side * side, bool) if support is None else st.support.ravel()
    A = 0.0
    b = 0.0
    for y, m in zip(st.ys, st.mu):
        A_k, b_k = V.psf_normal_equations(m, y, side)
        A, b = A + A_k, b + b_k
    A[np.diag_indices_from(A)] += sum(v.sum() for v in st.v)
    st.update_psf()
    ref = scipy.optimize.minimize(lambda h: 0.5 * h @ A @ h - b @ h, np.full(side * side, 1.0 / side**2),
                                  jac=lambda h: A @ h - b, method="SLSQP",
                                  bounds=[(0, None) if f else (0, 0) for f in free],
                                  constraints=[{"type": "eq", "fun": lambda h: h.sum() - 1.0}],
                                  options={"ftol": 1e-14, "maxiter": 500})
    assert ref.success
    np.testing.assert_allclose(st.psf.ravel(), ref.x, atol=2e-5)
    assert np.all(st.psf >= 0) and st.psf.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(st.psf.ravel()[~free] == 0)


def test_support_is_the_entries_above_the_threshold_grown_by_one_pixel():
    psf = np.zeros((7, 7))
    psf[3, 1:5] = [1.0, 0.5, 0.2, 0.05]        # 0.05 is below 10 % of the peak
    psf[6, 6] = 0.09
    expected = np.zeros((7, 7), bool)          # the three entries at or above 0.1 and their 4-neighbours
    expected[2:5, 1:4] = True
    expected[3, 0] = expected[3, 4] = True
    np.testing.assert_array_equal(V.support_mask(psf, 0.1), expected)
    assert V.support_mask(psf, 0.05)[6, 6] and not V.support_mask(psf, 0.1)[6, 6]


def test_sweeps_on_the_support_keep_the_psf_on_it_and_raise_the_bound():
    st, _ = _state(seed=4, side=5)
    st.sweeps(3)
    psf = st.psf.copy()
    psf[psf < 0.5 * psf.max()] = 0.0            # a kernel with specks removed, as the support step sees it
    st.psf = psf / psf.sum()
    mask = V.support_mask(st.psf, 0.1)
    assert 0 < mask.sum() < 25
    by_hand = copy.deepcopy(st)
    trace = V.restrict_support(st, 0.1, 4)
    by_hand.support = mask
    assert by_hand.sweeps(4) == trace
    assert np.all(by_hand.psf[~mask] == 0) and by_hand.psf.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_array_equal(st.psf, V.recentre(by_hand.psf))
    assert np.all(np.diff(trace) >= -1e-8 * abs(trace[-1]))


def test_simplex_qp_keeps_an_interior_optimum_and_zeroes_the_rest():
    # the unconstrained optimum on the simplex is returned unchanged; a negative pull gives an exact zero
    A = np.diag([1.0, 2.0, 4.0])
    h_star = np.array([0.5, 0.3, 0.2])
    np.testing.assert_allclose(V.simplex_qp(A, A @ h_star), h_star, atol=1e-7)
    h = V.simplex_qp(np.eye(3), np.array([1.0, 0.5, -3.0]))
    np.testing.assert_allclose(h, [0.75, 0.25, 0.0], atol=1e-7)


def test_simplex_qp_on_a_working_set_reaches_the_same_minimiser():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 81))
    A, b = X.T @ X + np.eye(81), X.T @ rng.normal(size=300) + 5.0 * rng.normal(size=81)
    full = V.simplex_qp(A, b)
    assert 0 < np.count_nonzero(full) < 81 // 2
    for guess in (np.zeros(81, bool), full > 0, rng.random(81) < 0.1, np.ones(81, bool)):
        np.testing.assert_allclose(V.simplex_qp(A, b, working=guess), full, atol=1e-10)


def test_gamma_and_noise_updates_are_closed_form():
    st, _ = _state(learn_noise=True)
    st.update_f()
    st.update_gamma()
    for rate, m, v in zip(st.rate, st.mu, st.v):
        np.testing.assert_allclose(rate, st.b + 0.5 * (m * m + v))
    st.update_noise()
    H = _matrix(lambda x: _fft.conv(x, st.h_otf()))
    resid = sum(np.sum((y.ravel() - H @ m.ravel()) ** 2) + np.sum(st.psf**2) * v.sum()
                for y, m, v in zip(st.ys, st.mu, st.v))
    assert st.noise_var == pytest.approx(resid / (2 * M), rel=1e-10)


@pytest.mark.parametrize("learn_noise", [False, True])
def test_bound_never_decreases_after_any_update(learn_noise):
    st, _ = _state(seed=3, learn_noise=learn_noise)
    st.update_f()
    last = st.bound()
    for _ in range(6):
        for step in (st.update_f, st.update_gamma, st.update_noise, st.update_psf):
            step()
            now = st.bound()
            assert now >= last - 1e-8 * abs(last), step.__name__
            last = now


def test_hqs_reaches_the_minimum_of_its_objective():
    # b large enough that the Student-t penalty is convex on these differences: one minimum, found densely
    rng = np.random.default_rng(4)
    shape = (12, 12)
    f = rng.uniform(0, 1, shape)
    psf = uniform_psf(3)
    g = _fft.conv(f, _fft.otf(psf, shape)) + 0.01 * rng.standard_normal(shape)
    a, b, var = 0.5, 2.0, 1e-3
    # enough alternations per stage for the splitting to settle (the default 2 is a restoration's budget)
    f_hqs, trace = nonblind.hqs_restore(g, psf, noise_var=var, a=a, b=b, inner=50)
    h_otf = _fft.otf(psf, shape)

    def obj(x):
        return nonblind.objective(x.reshape(shape), g, h_otf, var, a, b)

    def grad(x):
        x = x.reshape(shape)
        r = _fft.conv(x, h_otf) - g
        out = _fft.corr(r, h_otf) / var
        for s in nonblind.DIFFS:
            d = _fft.apply_stencil(x, s)
            out += _fft.adjoint_stencil((a + 0.5) * d / (b + 0.5 * d * d), s)
        return out.ravel()

    ref = scipy.optimize.minimize(obj, g.ravel(), jac=grad, method="L-BFGS-B",
                                  options={"maxiter": 5000, "gtol": 1e-10, "ftol": 1e-15})
    np.testing.assert_allclose(f_hqs, ref.x.reshape(shape), atol=1e-3)
    assert trace[-1] == pytest.approx(ref.fun, rel=1e-6)
    assert np.all(np.diff(trace) <= 1e-9 * abs(trace[0]))       # E falls as the coupling tightens


def test_shrink_is_the_scalar_minimum():
    y = np.linspace(-2, 2, 41)
    a, b, mu = 0.5, 1e-3, 50.0
    z = nonblind.shrink(y, mu, a, b)
    grid = np.linspace(-3, 3, 60001)
    for yi, zi in zip(y, z):
        vals = (a + 0.5) * np.log(b + 0.5 * grid**2) + 0.5 * mu * (grid - yi) ** 2
        assert abs(zi - grid[np.argmin(vals)]) < 2e-4


def test_backend_outputs_a_simplex_psf_and_reproduces():
    data = bz.datasets.load("bid_blocks", psf="uniform", size=32, n_blocks=6, seed=0)
    model = bz.models.BID(psf_size=9)
    fit = bz.fit(model, data, "vb_sparse", seed=0, progress=False, max_iter=4)
    psf = fit.posterior["psf"].values
    assert psf.shape[-1] == model.psf_view_side((32, 32))
    assert np.all(psf >= 0) and np.allclose(psf.sum(axis=(-2, -1)), 1.0)
    elbo = fit.idata.objective["elbo"].values    # the chosen estimate's refinement, then the rounds on its support
    support = fit.info["support"]
    sweeps, rounds = V.OPTIONS["support_iterations"].default, V.OPTIONS["support_rounds"].default
    assert fit.info["objective"] == "elbo" and len(elbo) == 4 + rounds * sweeps
    np.testing.assert_array_equal(elbo[4:], support["bound"])
    for part in [elbo[:4]] + [elbo[4 + r * sweeps:4 + (r + 1) * sweeps] for r in range(rounds)]:
        assert np.all(np.diff(part) >= -1e-8 * abs(fit.info["bound"]))
    assert support["threshold"] == V.OPTIONS["support_threshold"].default and len(support["entries"]) == rounds
    assert all(0 < n < 81 for n in support["entries"])
    again = bz.fit(model, data, "vb_sparse", seed=0, progress=False, max_iter=4)
    np.testing.assert_array_equal(again.posterior["image"].values, fit.posterior["image"].values)
    np.testing.assert_array_equal(again.posterior["psf"].values, psf)


def test_fit_is_equivariant_to_the_intensity_unit():
    data = bz.datasets.load("bid_blocks", psf="uniform", size=24, n_blocks=5, seed=1)
    scaled = image_problem(255.0 * data.y.reshape(24, 24))
    model = bz.models.BID(psf_size=7)
    a = bz.fit(model, image_problem(data.y.reshape(24, 24)), "vb_sparse", progress=False, max_iter=3)
    b = bz.fit(model, scaled, "vb_sparse", progress=False, max_iter=3)
    np.testing.assert_allclose(b.posterior["psf"].values, a.posterior["psf"].values, atol=1e-6)
    np.testing.assert_allclose(b.posterior["image"].values, 255.0 * a.posterior["image"].values, rtol=1e-5,
                               atol=1e-6 * 255)


def test_several_noise_inflations_keep_the_highest_bound_under_the_smallest():
    data = bz.datasets.load("bid_blocks", psf="uniform", size=32, n_blocks=6, seed=0)
    model = bz.models.BID(psf_size=9)
    fit = bz.fit(model, data, "vb_sparse", progress=False, max_iter=3, noise_inflation=(8.0, 2.0),
                 support_threshold=None)
    paths = fit.info["paths"]
    assert [p["noise_inflation"] for p in paths] == [8.0, 2.0]
    best = max(paths, key=lambda p: p["bound"])
    assert fit.info["bound"] == best["bound"] and fit.info["noise_inflation"] == best["noise_inflation"]
    elbo = fit.idata.objective["elbo"].values            # the chosen path's refinement under the smallest value
    assert len(elbo) == 3 and np.all(np.diff(elbo) >= -1e-8 * abs(elbo[-1]))
    # path 8 is the single-value fit at 8, refined under 2 x 2 sigma^2
    single = bz.fit(model, data, "vb_sparse", progress=False, max_iter=3, noise_inflation=8.0,
                    support_threshold=None)
    assert [p["noise_inflation"] for p in single.info["paths"]] == [8.0]
    assert single.info["bound"] == single.info["paths"][0]["coarse_to_fine_bound"] == paths[0]["coarse_to_fine_bound"]
    g = model.observed_image(data)
    view = single.posterior["psf"].values[0, 0]                 # the 9 x 9 window at the centre of the view
    c = view.shape[0] // 2
    psf = view[c - 4:c + 5, c - 4:c + 5]
    assert psf.sum() == pytest.approx(1.0)
    sigma = single.info["noise_sd"]
    opt = {name: V.OPTIONS[name].default for name in ("prior_shape", "prior_rate", "cg_max_iter", "cg_tol")}
    _, trace = V.refine(g, psf, a=opt["prior_shape"], b=opt["prior_rate"] * model.intensity_unit(g) ** 2,
                        noise_var=2.0 * 2.0 * sigma**2, learn_noise=False, max_iter=3, cg_max_iter=opt["cg_max_iter"],
                        cg_tol=opt["cg_tol"])
    assert trace[-1] == pytest.approx(paths[0]["bound"], rel=1e-10)


def test_initial_psfs_are_flat_or_peaked_simplex_points():
    flat, peaked = V.initial_psf(3), V.initial_psf(3, "peaked")
    np.testing.assert_allclose(flat, np.full((3, 3), 1 / 9))
    e = np.exp(-1.0)                                  # exp(-(dr^2 + dc^2)) on the 3 x 3 window, normalised
    np.testing.assert_allclose(peaked, np.outer([e, 1, e], [e, 1, e]) / (1 + 2 * e) ** 2)


def test_pyramid_levels_and_sides():
    levels = V.pyramid((256, 256), 31, np.sqrt(2))
    assert levels[-1] == ((256, 256), 31) and levels[0][1] == 3
    assert all(k % 2 == 1 and min(s) >= 2 * k for s, k in levels)
    assert V.pyramid((16, 16), 3, np.sqrt(2)) == [((16, 16), 3)]


@pytest.mark.parametrize("opts,match", [({"max_iter": 0}, "max_iter"), ({"iterations": 15}, "now called 'max_iter'"),
                                        ({"scale_ratio": 1.0}, "scale_ratio"),
                                        ({"psf_side": 4}, "psf_side"), ({"psf_side": 17}, "psf_side"),
                                        ({"noise_inflation": 0.5}, "noise_inflation"),
                                        ({"noise_inflation": ()}, "noise_inflation"),
                                        ({"noise_inflation": (4.0, 0.5)}, "noise_inflation"),
                                        ({"prior_rate": 0.0}, "prior_rate"), ({"learn_noise": "yes"}, "learn_noise"),
                                        ({"noise_sd": -1.0}, "noise_sd"),
                                        ({"level_start": "sharp"}, "level_start"),
                                        ({"psf_start": "delta"}, "psf_start"),
                                        ({"support_threshold": 0.0}, "support_threshold"),
                                        ({"support_threshold": 1.5}, "support_threshold"),
                                        ({"support_iterations": 0}, "support_iterations"),
                                        ({"support_rounds": 1.5}, "support_rounds")])
def test_bad_options_raise(opts, match):
    data = bz.datasets.load("bid_blocks", size=16, n_blocks=3, seed=0)
    with pytest.raises(ValueError, match=match):
        bz.fit(bz.models.BID(psf_size=3), data, "vb_sparse", progress=False, **opts)


def test_sar_image_prior_is_refused():
    data = bz.datasets.load("bid_blocks", size=16, n_blocks=3, seed=0)
    with pytest.raises(ValueError, match="St image prior"):
        bz.fit(bz.models.BID(variant="StStG", psf_size=3), data, "vb_sparse", progress=False)


def test_camera_shake_kernels_are_psfs():
    bank = camera_shake_kernels()
    assert len(bank) == 8 and max(k.shape[0] for k in bank) == 25
    for k in bank:
        assert k.shape[0] == k.shape[1] and k.shape[0] % 2 == 1
        assert np.all(k >= 0) and k.sum() == pytest.approx(1.0)


def _kernel_generator():
    import make_camera_shake_kernels      # benchmarks/ is on the path (pyproject.toml)

    return make_camera_shake_kernels


def test_camera_shake_kernels_are_reproduced_and_hold_their_whole_path():
    gen = _kernel_generator()
    rng = np.random.default_rng(gen.SEED)
    for side, shipped in zip(gen.SIDES, camera_shake_kernels(), strict=True):
        np.testing.assert_array_equal(gen.kernel(rng, side), shipped)
    # a lopsided path: 300 samples dwell at one end of a 100-sample line. Centred by its centre of mass near the
    # dwell, the line's far end crosses a 9 x 9 window at full length, so fit_path shrinks it until none is lost
    path = np.vstack([np.zeros((300, 2)), np.column_stack([np.linspace(0, 1, 100), np.linspace(0, 0.5, 100)])])
    side = 9
    full = path * (side - 2)
    assert gen.splat(full, side).sum() < 0.95 * len(path)
    fitted = gen.fit_path(path, side)
    assert gen.splat(fitted, side).sum() == pytest.approx(len(path), rel=1e-9)
    assert 0.5 * (side - 2) < np.ptp(fitted[:, 0]) < side - 2          # shrunk, not collapsed


@pytest.mark.slow
def test_recovers_a_box_blur_on_a_crop():
    # a 96 x 96 crop of the 128 x 128 cameraman (the man and tripod)
    truth = bz.datasets.load("cameraman", psf="uniform", size=128).meta["true_image"][16:112, 16:112]
    g, var = degrade(truth, uniform_psf(7), 40.0, seed=0)
    data = image_problem(g, true_image=truth, true_psf=uniform_psf(7))
    model = bz.models.BID(psf_size=15, white_level=1.0)
    fit = bz.fit(model, data, "vb_sparse", seed=0, progress=False)
    psf = _fft.window(_fft.embed(model.restored(fit)[1], g.shape), 7)
    assert psf.sum() > 0.85                             # the mass sits on the 7 x 7 box
    score = model.score(fit, data)
    assert score["isnr_f"] > 5.0 and score["isnr_h"] > 8.0


@pytest.mark.slow
def test_recovers_a_shake_kernel_with_heavy_ends_from_the_flat_start_only():
    # camera-shake kernel k3 (17 x 17, most mass at both ends of its path) on the 128 x 128 cameraman: from a
    # peaked start every level keeps the compact no-blur solution (docs/families/bid.md, vb_sparse). One noise
    # factor: among the default's three, the factor-8 estimate escapes from the peaked start too
    from bayeszoo.models.bid import ssd_upto_shift

    truth = bz.datasets.load("cameraman", psf="gaussian", size=128).meta["true_image"]
    h = camera_shake_kernels()[3]
    g, _ = degrade(truth, h, 40.0, seed=3)
    data = image_problem(g, true_image=truth, true_psf=h)
    model = bz.models.BID(psf_size=19)
    prior = model.precision_priors(g)
    sigma2 = V.mad_noise_sd(g) ** 2

    def restoration_ssd(psf):
        f_hat = nonblind.hqs_restore(g, psf, noise_var=sigma2, a=prior["a_gamma"], b=prior["b_gamma"])[0]
        return ssd_upto_shift(f_hat, truth)

    reference = restoration_ssd(h)
    ratio = {start: restoration_ssd(model.restored(bz.fit(model, data, "vb_sparse", psf_start=start,
                                                          noise_inflation=4.0, progress=False))[1]) / reference
             for start in ("flat", "peaked")}
    assert ratio["flat"] < 2.0 and ratio["peaked"] > 5.0
