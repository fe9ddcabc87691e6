"""Sequential experimental design for the SLM (bz.design): information gain against dense log-determinants,
Lanczos gains from below, the free filter, greedy designs against brute force, refits, bad input."""
from __future__ import annotations

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo import experimental_design as design
from bayeszoo.numerics import operators as ops

N, M, SIGMA2 = 12, 5, 0.01


@pytest.fixture(scope="module")
def problem():
    data = bz.datasets.load("slm_signal", kind="spikes", n=N, m=M, sigma2=SIGMA2, seed=3)
    return bz.models.SLM(potential="laplace", tau=2.0, sigma2=SIGMA2), data


@pytest.fixture(scope="module")
def ep_fit(problem):
    return bz.fit(*problem, "ep", draws=2, chains=1, progress=False)


@pytest.fixture(scope="module")
def candidates():
    C = np.random.default_rng(7).standard_normal((15, N))
    return C / np.linalg.norm(C, axis=1, keepdims=True)


def _dense_gain(A, C, sigma2):
    """log |I + C A^-1 C^T / sigma2| by brute force, per candidate block."""
    C = C[:, None, :] if C.ndim == 2 else C
    Ainv = np.linalg.inv(A)
    return np.array([np.linalg.slogdet(np.eye(c.shape[0]) + c @ Ainv @ c.T / sigma2)[1] for c in C])


def test_the_precision_is_the_one_the_approximation_was_built_from(problem, ep_fit):
    model, data = problem
    A = design.precision(model, data, ep_fit).dense()
    Xd, Bd = model.dense_X(data), model.dense_B(data)
    pi = ep_fit.idata["potentials"]["site_precision"].values
    np.testing.assert_allclose(A, Xd.T @ Xd / SIGMA2 + Bd.T @ np.diag(pi) @ Bd, rtol=1e-12)
    # on Gaussian potentials both backends find the exact posterior: pi = tau on every potential
    gauss = bz.models.SLM(potential="gaussian", tau=3.0, sigma2=SIGMA2)
    exact = Xd.T @ Xd / SIGMA2 + 3.0 * Bd.T @ Bd
    for backend in design.GAUSSIAN_BACKENDS:
        fit = bz.fit(gauss, data, backend, draws=2, chains=1, progress=False)
        np.testing.assert_allclose(design.precision(gauss, data, fit).dense(), exact, rtol=1e-6)


def test_information_gain_equals_the_dense_log_determinant(problem, ep_fit, candidates):
    model, data = problem
    A = design.precision(model, data, ep_fit).dense()
    gains = design.information_gain(model, data, ep_fit, candidates)
    np.testing.assert_allclose(gains, _dense_gain(A, candidates, SIGMA2), rtol=1e-10)
    assert np.all(gains > 0)
    # blocks of three filters measured together: the joint gain, at most the sum of the single gains
    blocks = candidates[:12].reshape(4, 3, N)
    joint = design.information_gain(model, data, ep_fit, blocks)
    np.testing.assert_allclose(joint, _dense_gain(A, blocks, SIGMA2), rtol=1e-10)
    assert np.all(joint <= gains[:12].reshape(4, 3).sum(1) + 1e-12)


def test_lanczos_gains_grow_with_k_to_the_exact_value(problem, ep_fit, candidates):
    model, data = problem
    exact = design.information_gain(model, data, ep_fit, candidates)
    by_k = np.array([design.information_gain(model, data, ep_fit, candidates, lanczos_k=k) for k in range(1, N + 1)])
    assert np.all(by_k <= exact + 1e-9)                     # Q T^-1 Q^T is below A^-1
    assert np.all(np.diff(by_k, axis=0) >= -1e-9)           # nested Krylov spaces: never smaller with more steps
    np.testing.assert_allclose(by_k[-1], exact, rtol=1e-8)  # the whole space at k = n


def test_the_free_filter_is_the_smallest_eigenvector_and_beats_every_candidate(problem, ep_fit, candidates):
    model, data = problem
    x = design.best_filter(model, data, ep_fit)
    A = design.precision(model, data, ep_fit).dense()
    w, V = np.linalg.eigh(A)
    assert np.linalg.norm(x) == pytest.approx(1.0, abs=1e-12)
    assert abs(x @ V[:, 0]) == pytest.approx(1.0, abs=1e-10)
    best = design.information_gain(model, data, ep_fit, x[None])[0]
    assert best == pytest.approx(np.log1p(1 / (w[0] * SIGMA2)), rel=1e-10)
    assert best >= design.information_gain(model, data, ep_fit, candidates).max()


def test_a_greedy_design_on_a_gaussian_slm_equals_brute_force(problem, candidates):
    # with Gaussian potentials the posterior precision does not depend on the values measured, so the greedy
    # design is computable in advance: A grows by x x^T / sigma2 with every measured filter
    _, data = problem
    model = bz.models.SLM(potential="gaussian", tau=3.0, sigma2=SIGMA2)
    Xd, Bd = model.dense_X(data), model.dense_B(data)
    A = Xd.T @ Xd / SIGMA2 + 3.0 * Bd.T @ Bd
    expected, gains, left = [], [], list(range(len(candidates)))
    for _ in range(4):
        g = _dense_gain(A, candidates[left], SIGMA2)
        i = left.pop(int(np.argmax(g)))
        expected.append([i])
        gains.append(g.max())
        A = A + np.outer(candidates[i], candidates[i]) / SIGMA2
    true_u = data.meta["true_u"]
    result = design.sequential_design(model, data, lambda rows: rows @ true_u, 4, candidates=candidates,
                                      progress=False)
    assert result.chosen == expected
    np.testing.assert_allclose(result.gains, gains, rtol=1e-6)
    # the data grew by exactly the chosen filters and their measurements, in order
    np.testing.assert_array_equal(result.data.X, np.vstack([data.X, candidates[[e[0] for e in expected]]]))
    np.testing.assert_allclose(result.data.y[M:], candidates[[e[0] for e in expected]] @ true_u, rtol=1e-12)


def test_design_refits_between_steps_and_returns_the_fit_on_the_final_data(problem, candidates):
    model, data = problem
    true_u = data.meta["true_u"]
    noise = np.random.default_rng(11)
    result = design.sequential_design(model, data, lambda rows: rows @ true_u + 0.1 * noise.standard_normal(len(rows)),
                                      2, candidates=candidates, batch=2, progress=False)
    assert result.n_steps == 2 and [len(c) for c in result.chosen] == [2, 2]
    assert len({i for c in result.chosen for i in c}) == 4              # no candidate measured twice
    assert result.data.X.shape == (M + 4, N)
    again = bz.fit(model, result.data, "ep", seed=0, progress=False)
    np.testing.assert_array_equal(again.idata.posterior["u"].values, result.fit.idata.posterior["u"].values)
    # the second step scored the candidates under the posterior refitted on the first step's measurements
    first = bz.datasets.Dataset(X=result.data.X[: M + 2], y=result.data.y[: M + 2], name=data.name, meta=data.meta)
    refit = bz.fit(model, first, "ep", draws=2, chains=1, progress=False)
    rows = candidates[result.chosen[1]]
    assert result.gains[1] == pytest.approx(design.information_gain(model, first, refit, rows[None])[0], rel=1e-9)


def test_between_refits_only_the_measured_filters_enter_the_precision(problem, candidates):
    model, data = problem
    true_u = data.meta["true_u"]
    result = design.sequential_design(model, data, lambda rows: rows @ true_u, 3, candidates=candidates,
                                      refit_every=3, progress=False)
    # one fit on the initial data scored all three steps: A grew by x x^T / sigma2 with each measured filter
    fit = bz.fit(model, data, "ep", draws=2, chains=1, progress=False)
    A = design.precision(model, data, fit).dense()
    for i, rows in enumerate(result.filters):
        assert result.gains[i] == pytest.approx(_dense_gain(A, rows[None], SIGMA2)[0], rel=1e-9)
        A = A + rows.T @ rows / SIGMA2


def test_free_filter_design_with_dloop(problem):
    model, data = problem
    true_u = data.meta["true_u"]
    result = design.sequential_design(model, data, lambda rows: rows @ true_u, 2, backend="dloop",
                                      options={"exact_variances": True}, progress=False)
    assert result.chosen == [None, None]
    assert all(f.shape == (1, N) and np.linalg.norm(f) == pytest.approx(1.0) for f in result.filters)
    assert result.fit.backend == "dloop" and result.data.X.shape == (M + 2, N)


def test_bad_input_is_refused(problem, ep_fit, candidates):
    model, data = problem
    measure = lambda rows: rows @ data.meta["true_u"]  # noqa: E731
    with pytest.raises(ValueError, match="sparse linear models"):
        design.sequential_design(bz.models.RVM(), data, measure, 1, candidates=candidates)
    with pytest.raises(ValueError, match="candidates have 5 columns but u has n = 12"):
        design.sequential_design(model, data, measure, 1, candidates=candidates[:, :5])
    with pytest.raises(ValueError, match="non-finite"):
        design.sequential_design(model, data, measure, 1, candidates=np.full((3, N), np.nan))
    with pytest.raises(ValueError, match="n_steps"):
        design.sequential_design(model, data, measure, 0, candidates=candidates)
    with pytest.raises(ValueError, match="refit_every"):
        design.sequential_design(model, data, measure, 1, candidates=candidates, refit_every=0)
    with pytest.raises(ValueError, match="need 30 candidates, only 15"):
        design.sequential_design(model, data, measure, 10, candidates=candidates, batch=3)
    with pytest.raises(ValueError, match="measure must be a callable"):
        design.sequential_design(model, data, "y", 1, candidates=candidates)
    with pytest.raises(ValueError, match="backend"):
        design.sequential_design(model, data, measure, 1, candidates=candidates, backend="gibbs")
    with pytest.raises(ValueError, match="measure must return 1 finite values"):
        design.sequential_design(model, data, lambda rows: np.zeros(3), 1, candidates=candidates, progress=False)
    # a fit without a Gaussian approximation cannot score a design
    map_fit = bz.fit(model, data, "map", draws=1, chains=1, progress=False)
    with pytest.raises(ValueError, match="no Gaussian approximation.*ep, dloop"):
        design.information_gain(model, data, map_fit, candidates)
    with pytest.raises(ValueError, match="expected a bayeszoo Fit"):
        design.information_gain(model, data, "fit", candidates)


def test_the_compressed_sensing_study_compares_every_method_at_every_checkpoint():
    from bayeszoo.studies import slm_compressed_sensing as cs

    results = cs.run(["spikes"], n=24, m0=6, checkpoints=(6, 9), design_backend="dloop",
                     design_options={"exact_variances": True}, progress=False)
    methods = {"L2 (rand)", "L1 (rand)", "BCS (rand)", "dloop* (opt)"}
    assert set(results["method"]) == methods and set(results["m"]) == {6, 9}
    assert len(results) == 8 and np.all(np.isfinite(results["l2_error"])) and np.all(results["l2_error"] > 0)
    # at the start every arm has the same 6 random measurements: the designed arm's first point is the same
    # posterior as a direct fit on them
    data = bz.datasets.load("slm_signal", kind="spikes", n=24, m=9, sigma2=0.005, seed=0)
    start = bz.datasets.Dataset(X=data.X[:6], y=data.y[:6], name=data.name, meta=data.meta)
    model = bz.models.SLM(potential="laplace", tau=5.0, sigma2=0.005)
    fit = bz.fit(model, start, "dloop", seed=0, progress=False, exact_variances=True)
    first = results.query("method == 'dloop* (opt)' and m == 6")["l2_error"].item()
    assert first == pytest.approx(model.score(fit, start)["l2_error"], rel=1e-12)
    assert cs.summary(results).shape == (4, 2)
    with pytest.raises(ValueError, match="checkpoints must be measurement counts of at least m0 = 6"):
        cs.run(["spikes"], n=24, m0=6, checkpoints=(3,))


def test_the_natural_image_study_measures_the_heuristic_and_designed_wavelet_coefficients():
    from bayeszoo.studies import slm_natural_images as ni

    results = ni.run(["camera"], size=8, checkpoints=(8, 12), m0=8, batch=4, lanczos_k=20, progress=False)
    assert set(zip(results["design"], results["method"])) == {
        ("rand uni", "L1"), ("rand uni", "L1+TV"), ("heur wave", "L2"), ("heur wave", "L1+TV"),
        ("heur wave", "dloop"), ("opt wave", "dloop")}
    assert len(results) == 12 and np.all(np.isfinite(results["l2_error"]))
    # L2 on the heuristic rows is the minimum-norm interpolant: the first m wavelet coefficients of u, measured
    # with noise, synthesised back; its error is at least that of the exact projection
    u = np.asarray(bz.datasets.load("slm_image", image="camera", size=8, m=1).meta["true_u"])
    W = ops.wavelet((8, 8))
    rows = ops.to_dense(W)[W.coarse_to_fine()[:8]]
    projection_error = np.linalg.norm(rows.T @ (rows @ u) - u)
    l2 = results.query("design == 'heur wave' and method == 'L2' and m == 8")["l2_error"].item()
    assert projection_error <= l2 <= projection_error + 4 * np.sqrt(8 * 0.005)
    # the designed arm starts from the same 8 heuristic measurements: its first point is the heuristic's posterior
    first = results.query("design == 'opt wave' and m == 8")["l2_error"].item()
    assert first == results.query("design == 'heur wave' and method == 'dloop' and m == 8")["l2_error"].item()
    assert ni.summary(results).shape == (6, 2)


def test_mri_slices_are_measured_on_whole_cartesian_lines():
    from bayeszoo.datasets.slm_data import central_lines

    assert set(central_lines(64, 8).tolist()) == {0, 1, 2, 3, 4, 61, 62, 63}
    data = bz.datasets.load("slm_mri", slice_index=3, lines=[0, 5, 40], sigma2=1e-4, seed=1)
    u = np.asarray(data.meta["true_u"])
    assert data.X.shape == (2 * 3 * 64, 64 * 64) and data.meta["u_shape"] == (64, 64)
    assert 0.0 <= u.min() and u.max() <= 1.0 and u.std() > 0.1
    k_space = np.fft.fft2(u.reshape(64, 64), norm="ortho")
    for line in (0, 5, 40):                                 # the real parts of line 5 are among the rows
        mask = np.zeros((64, 64), dtype=bool)
        mask[line] = True
        np.testing.assert_allclose(
            ops.to_dense(ops.fourier_sampling((64, 64), mask)) @ u, np.r_[k_space[line].real, k_space[line].imag],
            atol=1e-10)
    residual = data.y - data.X @ u
    assert abs(residual.std() - 1e-2) < 2e-3                 # the noise has variance sigma2
    for lines in ([1, 1], [64], [], [0.5]):
        with pytest.raises(ValueError, match="lines must be distinct row indices"):
            bz.datasets.load("slm_mri", lines=lines)


def test_mri_designs_start_from_the_centre_and_are_seeded():
    from bayeszoo.studies import slm_mri_design as mri

    start = np.array([0, 1, 63])
    eq = mri.equispaced(64, start, 10)
    assert eq[:3].tolist() == [0, 1, 63] and len(set(eq.tolist())) == 10
    assert np.ptp(np.diff(np.sort(eq[3:]))) <= 1                      # the added lines are evenly spaced
    rd = [mri.variable_density(64, start, 12, np.random.default_rng(s)) for s in range(200)]
    assert all(r[:3].tolist() == [0, 1, 63] and len(set(r.tolist())) == 12 for r in rd)
    np.testing.assert_array_equal(rd[0], mri.variable_density(64, start, 12, np.random.default_rng(0)))
    picked = np.abs(np.fft.fftfreq(64) * 64)[np.concatenate([r[3:] for r in rd])]
    uniform = np.abs(np.fft.fftfreq(64) * 64)[np.setdiff1d(np.arange(64), start)]
    assert picked.mean() < 0.7 * uniform.mean()                        # the density favours the centre
    blocks = mri.line_blocks(64, [2, 7])
    assert blocks.shape == (2, 128, 4096)
    norms = np.linalg.norm(blocks[0], axis=1) ** 2            # each sample's real and imaginary rows: a unit DFT row
    np.testing.assert_allclose(norms[:64] + norms[64:], 1.0)
    with pytest.raises(ValueError, match="line_counts"):
        mri.run(line_counts=(8,), n_central=8, progress=False)


@pytest.mark.slow
def test_the_mri_study_compares_every_design_on_the_design_and_unseen_slices():
    from bayeszoo.studies import slm_mri_design as mri

    results, designs = mri.run(test_slices=(1,), line_counts=(10,), repeats=1, lanczos_k=30, progress=False)
    assert set(designs) == {("ct", 0), ("op", 0), ("rd", 0)}
    assert all(lines[:8] == mri.central_lines(64, 8).tolist() for lines in designs.values())
    assert len(results) == 2 * 4 * 2 and np.all(np.isfinite(results["l2_error"]))
    # MAP beats zero filling on every design and slice
    wide = results.pivot_table(index=["slice", "design"], columns="method", values="l2_error")
    assert np.all(wide["MAP"] < wide["ZFDC"])


def test_designed_measurements_beat_random_ones_on_the_gallery_spikes():
    """The gallery's design example: 16 EP-designed free filters after 24 random ones reconstruct the 32 spikes
    better than 16 more random ones."""
    data = bz.datasets.load("slm_signal", kind="spikes", n=32, m=24, n_test=16, seed=0)
    model = bz.models.SLM(potential="laplace", tau=5.0, sigma2=0.005)
    truth = np.asarray(data.meta["true_u"])
    noise = np.random.default_rng(1)
    d = design.sequential_design(model, data, lambda X: X @ truth + np.sqrt(0.005) * noise.standard_normal(len(X)),
                                 16, backend="ep", seed=0, progress=False)
    extra = bz.datasets.load("slm_signal", kind="spikes", n=32, m=40, seed=0)
    assert np.array_equal(extra.X[:24], data.X) and np.array_equal(extra.meta["true_u"], truth)
    rand = bz.datasets.Dataset(X=np.vstack([data.X, extra.X[24:]]), y=np.concatenate([data.y, extra.y[24:]]),
                               name="random", meta=data.meta)
    designed_error = model.score(d.fit, d.data)["l2_error"]
    random_error = model.score(bz.fit(model, rand, "ep", seed=0, progress=False), rand)["l2_error"]
    assert designed_error < 0.5 * random_error
    # refits move the site precisions, so single steps may gain more than the last; over the run the gain falls
    assert min(d.gains) > 0 and d.gains[-1] < 0.5 * d.gains[0]
