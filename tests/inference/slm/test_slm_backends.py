"""The SLM backends' numbers: MAP against generic solvers, SBL against scikit-learn's ARDRegression, the Gibbs
sampler against the exact Gaussian posterior and against NumPyro's NUTS."""
from __future__ import annotations

import arviz as az
import numpy as np
import pytest
from scipy.optimize import minimize

import bayeszoo as bz
from bayeszoo.models.slm import SLM


def _signal(n=12, m=9, sigma2=0.05, seed=0, kind="spikes"):
    return bz.datasets.load("slm_signal", kind=kind, n=n, m=m, sigma2=sigma2, seed=seed)


def _l1_reference(model, data):
    """min ||X u - y||^2 / (2 sigma2) + sum_j tau_j t_j  s.t. -t <= B u <= t, by SLSQP (a generic solver)."""
    X, B, y, tau = model.dense_X(data), model.dense_B(data), data.y, model.taus(data)
    n, q = X.shape[1], B.shape[0]
    f = lambda z: 0.5 * np.sum((X @ z[:n] - y) ** 2) / model.sigma2 + tau @ z[n:]        # noqa: E731
    g = lambda z: np.r_[X.T @ (X @ z[:n] - y) / model.sigma2, tau]                       # noqa: E731
    A = np.block([[-B, np.eye(q)], [B, np.eye(q)]])
    res = minimize(f, np.zeros(n + q), jac=g, method="SLSQP", constraints=[{"type": "ineq", "fun": lambda z: A @ z,
                   "jac": lambda z: A}], options={"maxiter": 2000, "ftol": 1e-15})
    return res.fun


@pytest.mark.parametrize("B,solver", [("identity", "cd"), ("identity", "fista"), ("wavelet", "fista"), ("tv", "admm"),
                                      ("wavelet+tv", "admm")])
def test_map_l1_matches_a_generic_convex_solver(B, solver):
    data = _signal(n=16, m=10)
    model = SLM(tau=2.0, tau_tv=3.0, sigma2=0.05, B=B, wavelet_level=2)
    fit = bz.fit(model, data, "map", solver=solver, progress=False)
    assert fit.info["solver"] == solver and fit.info["converged"]
    ours = float(fit.idata.objective["neg_log_joint"].values[-1])
    ref = _l1_reference(model, data)
    assert ours == pytest.approx(ref, rel=1e-6)
    u = model.posterior_mean(fit)
    assert ours == pytest.approx(-float(model.log_joint(u, data)), rel=1e-12)


@pytest.mark.parametrize("potential", ["logistic", "gaussian", "student"])
def test_map_smooth_matches_newton(potential):
    data = _signal(n=10, m=7, kind="laplace")
    model = SLM(potential=potential, tau=1.5, sigma2=0.1, B="tv")
    fit = bz.fit(model, data, "map", progress=False)
    X, B, y = model.dense_X(data), model.dense_B(data), data.y
    pot = model.potentials(data)
    f = lambda u: -float(model.log_joint(u, data))                                       # noqa: E731
    grad = lambda u: X.T @ (X @ u - y) / 0.1 - B.T @ pot.dlog_t(B @ u)                   # noqa: E731
    hess = lambda u: X.T @ X / 0.1 - B.T @ (pot.d2log_t(B @ u)[:, None] * B)             # noqa: E731
    ref = minimize(f, np.zeros(10), jac=grad, hess=hess, method="trust-exact", options={"gtol": 1e-12})
    assert float(fit.idata.objective["neg_log_joint"].values[-1]) <= ref.fun + 1e-9 * abs(ref.fun)
    np.testing.assert_allclose(model.posterior_mean(fit), ref.x, atol=1e-5)


def test_map_refuses_a_solver_that_does_not_fit():
    with pytest.raises(ValueError, match="does not fit"):
        bz.fit(SLM(B="tv"), _signal(), "map", solver="fista", progress=False)
    with pytest.raises(ValueError, match="does not fit"):
        bz.fit(SLM(B="wavelet"), _signal(n=16), "map", solver="cd", progress=False)
    with pytest.raises(ValueError, match="does not fit"):
        bz.fit(SLM(potential="student"), _signal(), "map", solver="cd", progress=False)
    with pytest.raises(ValueError, match="solver"):
        bz.fit(SLM(), _signal(), "map", solver="newton", progress=False)


@pytest.mark.parametrize("solver", ["auto", "cd", "fista", "admm"])
def test_map_refuses_a_noise_variance_below_double_precision_before_it_runs(monkeypatch, solver):
    """sigma2 = 1e-300 with 9 measurements of 12 unknowns: the prior's weight sigma2 tau is 1e-300 times max |X^T y|,
    so the data term's rounding hides it along X's null space and every solver returns an interpolant that is not
    the MAP (the coordinate descent's duality gap overflowed); refused before any solver runs, naming the problem
    and the fix. With more measurements than unknowns the MAP is the least-squares solution, which is allowed."""
    from bayeszoo.inference.slm import map as slm_map

    for name in ("_cd", "_fista", "_admm", "_lbfgs"):
        monkeypatch.setattr(slm_map, name, lambda *a, **k: (_ for _ in ()).throw(AssertionError("a solver ran")))
    with pytest.raises(ValueError, match=r"SLM backend 'map': with 9 measurements of 12 unknowns.*sigma2 \* tau = "
                                         r"2e-300 is [0-9.e+]+ times smaller than max \|X\^T y\|, below double "
                                         r"precision.*give the measurement noise's"):
        bz.fit(SLM(tau=2.0, sigma2=1e-300), _signal(), "map", solver=solver, progress=False)
    with pytest.raises(ValueError, match=r"below double precision"):
        bz.fit(SLM(potential="student", tau=2.0, sigma2=1e-300), _signal(), "map", progress=False)
    # within double precision the check lets the problem through (1e-12 * 2 against max |X^T y| of about 1)
    assert slm_map._prior_weight_ratio(SLM(tau=2.0, sigma2=1e-12), _signal()) < slm_map.LARGEST_WEIGHT_RATIO
    if solver == "cd":    # 14 measurements of 12 unknowns: the least-squares solution, its gap no longer overflowing
        monkeypatch.undo()
        over = _signal(n=12, m=14)
        model = SLM(tau=2.0, sigma2=1e-300)
        fit = bz.fit(model, over, "map", solver="cd", progress=False)
        least_squares = np.linalg.lstsq(over.X, over.y, rcond=None)[0]
        np.testing.assert_allclose(model.posterior_mean(fit), least_squares, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("n,m,seed", [(40, 25, 0), (30, 60, 1)])
def test_map_cd_agrees_with_sklearn_lasso(n, m, seed):
    """Coordinate descent reaches scikit-learn's Lasso optimum: Lasso minimises ||y - X w||^2 / (2 m) + alpha
    ||w||_1, our objective times sigma2 / m with alpha = tau sigma2 / m (a wide and a tall X)."""
    import warnings

    from sklearn.linear_model import Lasso

    data = bz.datasets.load("slm_signal", kind="nonuniform_spikes", n=n, m=m, sigma2=0.01, design="gaussian",
                            seed=seed)
    model = SLM(tau=4.0, sigma2=0.01, B="identity")
    fit = bz.fit(model, data, "map", progress=False)
    assert fit.info["solver"] == "cd" and fit.info["converged"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lasso = Lasso(alpha=4.0 * 0.01 / m, fit_intercept=False, tol=1e-14, max_iter=1_000_000).fit(data.X, data.y)
    u = model.posterior_mean(fit)
    objective = lambda w: -float(model.log_joint(w, data))                              # noqa: E731
    assert objective(u) == pytest.approx(objective(lasso.coef_), rel=1e-10)
    assert float(fit.idata.objective["neg_log_joint"].values[-1]) == pytest.approx(objective(u), rel=1e-12)
    np.testing.assert_allclose(u, lasso.coef_, atol=1e-6)
    assert 0 < np.count_nonzero(u) < n            # a sparse solution: the test is not about the zero vector


def test_map_cd_budget_counts_sweeps_and_a_capped_run_ends_on_a_check_of_the_whole_problem():
    """max_iter counts sweeps, in checks of 5: a cap of 7 is passed by the second check (10 sweeps), and the run
    ends on the whole problem's duality gap, whose objective is the estimate's (the last trace entry)."""
    from bayeszoo.inference.slm.map import CD_SWEEPS_PER_CHECK

    data = bz.datasets.load("slm_signal", n=300, m=80, seed=1)
    model = SLM(tau=5.0, sigma2=0.002)
    capped = bz.fit(model, data, "map", solver="cd", max_iter=7, progress=False)
    assert capped.info["iterations"] == 2 * CD_SWEEPS_PER_CHECK and not capped.info["converged"]
    trace = capped.idata.objective["neg_log_joint"].values
    assert trace[-2] == pytest.approx(trace[-1], rel=1e-10)
    full = bz.fit(model, data, "map", solver="cd", progress=False)
    assert full.info["converged"] and full.info["iterations"] % CD_SWEEPS_PER_CHECK == 0
    assert full.info["iterations"] > 2 * CD_SWEEPS_PER_CHECK and trace[-1] > full.idata.objective["neg_log_joint"][-1]


def test_map_auto_solver_follows_the_problems_structure():
    from bayeszoo.inference.slm.map import choose_solver

    dense = _signal(n=16, m=10)
    image = bz.datasets.load("slm_image", size=8, m=20, design="fourier", seed=0)
    assert "X_operator" in image.meta and "X_operator" not in dense.meta
    assert choose_solver(SLM(B="identity"), dense, "auto") == "cd"              # a dense Lasso
    assert choose_solver(SLM(B="identity"), image, "auto") == "fista"           # X an FFT: products, no columns
    assert choose_solver(SLM(B="wavelet"), dense, "auto") == "fista"
    assert choose_solver(SLM(B="tv"), dense, "auto") == "admm"
    assert choose_solver(SLM(potential="student", B="identity"), dense, "auto") == "lbfgs"
    assert choose_solver(SLM(B="identity"), image, "cd") == "cd"                # asked for: the dense X serves
    assert bz.fit(SLM(B="identity"), dense, "map", progress=False).info["solver"] == "cd"


def test_map_fista_polish_reaches_the_optimum_of_a_long_run(monkeypatch):
    """An under-determined wavelet problem (40 Fourier rows, 256 unknowns): the polished FISTA stops at the optimum
    (optimality conditions to 1e-9) after a few hundred iterations, where greedy FISTA alone is 1e-3 away and needs
    thousands to reach the same objective."""
    from bayeszoo.inference.slm import map as slm_map

    data = bz.datasets.load("slm_image", image="camera", size=16, design="fourier", m=40, sigma2=0.005, seed=0)
    model = SLM(tau=5.0, sigma2=0.005, B="wavelet")
    fit = bz.fit(model, data, "map", solver="fista", progress=False)
    assert fit.info["converged"] and fit.info["iterations"] < 300
    ours = float(fit.idata.objective["neg_log_joint"].values[-1])
    A = model.dense_X(data) @ model.dense_B(data).T                    # the problem in c = B u
    c = model.dense_B(data) @ model.posterior_mean(fit)
    scores = np.abs(A.T @ (data.y - A @ c)) / (5.0 * 0.005)            # |A^T r| / (sigma2 tau): <= 1, = 1 on c != 0
    support = np.abs(c) > 1e-9
    assert scores.max() <= 1.0 + 1e-9 and np.abs(scores[support] - 1.0).max() <= 1e-9
    monkeypatch.setattr(slm_map, "FISTA_POLISH_STEADY", 10**9)         # greedy FISTA alone
    alone = bz.fit(model, data, "map", solver="fista", progress=False, max_iter=fit.info["iterations"], tol=1e-300)
    long = bz.fit(model, data, "map", solver="fista", progress=False, max_iter=2000, tol=1e-300)
    assert float(alone.idata.objective["neg_log_joint"].values[-1]) > ours * (1 + 1e-3)
    assert float(long.idata.objective["neg_log_joint"].values[-1]) == pytest.approx(ours, rel=1e-12)


def test_feature_sign_follows_null_directions_to_the_optimum():
    """A Lasso whose third column is the sum of the first two (a singular Gram matrix): from a point using all three,
    the restricted solver follows the null direction (1, 1, -1) down the L1 term to an optimum, which it matches:
    scikit-learn's Lasso's objective and the optimality conditions."""
    import warnings

    from sklearn.linear_model import Lasso

    from bayeszoo.inference.slm.map import feature_sign

    rng = np.random.default_rng(2)
    A = rng.standard_normal((12, 5))
    A[:, 2] = A[:, 0] + A[:, 1]
    y = A @ np.array([1.0, 1.5, 0.0, -2.0, 0.0]) + 0.1 * rng.standard_normal(12)
    lam = np.full(5, 0.8)
    v = feature_sign(A.T @ A, A.T @ y, lam, np.ones(5))
    objective = lambda w: 0.5 * np.sum((A @ w - y) ** 2) + lam @ np.abs(w)               # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lasso = Lasso(alpha=0.8 / 12, fit_intercept=False, tol=1e-14, max_iter=1_000_000).fit(A, y)
    assert objective(v) == pytest.approx(objective(lasso.coef_), rel=1e-10)
    scores = A.T @ (y - A @ v) / lam
    assert np.abs(scores).max() <= 1 + 1e-10
    np.testing.assert_allclose(scores[v != 0], np.sign(v[v != 0]), atol=1e-10)
    assert v[0] == 0.0 or v[1] == 0.0          # the sum column replaced a pair whose L1 norm is larger


def test_sbl_matches_sklearn_ard():
    from sklearn.linear_model import ARDRegression

    rng = np.random.default_rng(3)
    m, n = 60, 15
    X = rng.standard_normal((m, n))
    w = np.zeros(n)
    w[[1, 4, 9]] = [2.0, -1.5, 1.0]
    y = X @ w + 0.2 * rng.standard_normal(m)
    data = bz.datasets.Dataset(X, y, meta={"task": "regression"})
    ard = ARDRegression(fit_intercept=False, max_iter=3000, tol=1e-12, threshold_lambda=1e12,
                        alpha_1=0, alpha_2=0, lambda_1=0, lambda_2=0).fit(X, y)
    fit = bz.fit(SLM(sigma2=1.0), data, "sbl", learn_noise=True, tol=1e-10, max_iter=5000, seed=0, progress=False)
    u = np.asarray(fit.idata.posterior["u"].values).reshape(-1, n)
    from bayeszoo.inference.slm.sbl import sbl

    exact = sbl(X, np.eye(n), y, 1.0, learn_noise=True, tol=1e-10, max_iter=5000)
    np.testing.assert_allclose(exact.mean, ard.coef_, atol=1e-4)
    assert exact.sigma2 == pytest.approx(1.0 / ard.alpha_, rel=1e-3)
    np.testing.assert_allclose(u.mean(0), exact.mean, atol=4 * np.sqrt(np.diag(exact.cov).max() / u.shape[0]))


@pytest.mark.parametrize("learn_noise", [False, True])
def test_sbl_with_fewer_measurements_than_unknowns_equals_the_dense_iteration(learn_noise):
    """B = I and m < n go through the m x m matrix sigma2 I + X Gamma X^T (Woodbury); a permuted identity takes the
    dense n x n path with the same posterior: every iterate, the evidence trace and the result agree."""
    from bayeszoo.inference.slm.sbl import sbl

    data = _signal(n=40, m=15, sigma2=0.01, seed=4)
    X, y, n = data.X, data.y, 40
    perm = np.random.default_rng(0).permutation(n)
    small = sbl(X, np.eye(n), y, 0.01, learn_noise=learn_noise, max_iter=300, tol=1e-9)
    dense = sbl(X, np.eye(n)[perm], y, 0.01, learn_noise=learn_noise, max_iter=300, tol=1e-9)
    # the stopping test may fall one iteration apart (rounding at the tolerance)
    assert abs(small.iterations - dense.iterations) <= 1 and small.iterations > 5
    k = min(small.iterations, dense.iterations)
    np.testing.assert_allclose(small.mean, dense.mean, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(small.alpha[perm], dense.alpha, rtol=1e-5)
    np.testing.assert_allclose(small.cov, dense.cov, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(small.log_evidence[:k], dense.log_evidence[:k], rtol=1e-8)
    assert small.sigma2 == pytest.approx(dense.sigma2, rel=1e-8)


def _mc_close(a, b, z=4.5):
    """Posterior means of u agree within z Monte-Carlo standard errors (ESS-based) per coordinate."""
    def mean_se(x):
        ess = az.ess(az.convert_to_dataset(x[None] if x.ndim == 2 else x))["x"].values
        flat = x.reshape(-1, x.shape[-1])
        return flat.mean(0), flat.std(0) / np.sqrt(ess)

    (ma, sa), (mb, sb) = mean_se(a), mean_se(b)
    return np.abs(ma - mb) / np.sqrt(sa**2 + sb**2)


def test_gibbs_is_exact_for_gaussian_potentials():
    data = _signal(n=10, m=6, sigma2=0.2)
    model = SLM(potential="gaussian", tau=3.0, sigma2=0.2, B="wavelet+tv", wavelet_level=1)
    mean, cov = model.gaussian_posterior(data)
    fit = bz.fit(model, data, "gibbs", draws=2000, tune=10, chains=2, seed=1, progress=False)
    u = fit.posterior["u"].values.reshape(-1, 10)
    se = np.sqrt(np.diag(cov) / u.shape[0])
    assert np.all(np.abs(u.mean(0) - mean) < 4.5 * se)
    np.testing.assert_allclose(u.std(0), np.sqrt(np.diag(cov)), rtol=0.08)


@pytest.mark.slow
@pytest.mark.parametrize("potential,B", [("laplace", "identity"), ("student", "tv"), ("logistic", "identity")])
def test_gibbs_agrees_with_numpyro(potential, B):
    data = _signal(n=8, m=6, sigma2=0.05, seed=2)
    model = SLM(potential=potential, tau=2.0, sigma2=0.05, B=B)
    g = bz.fit(model, data, "gibbs", draws=2000, tune=200, chains=2, seed=0, progress=False)
    ref = bz.fit(model, data, "numpyro", draws=1000, tune=500, chains=2, seed=0, progress=False)
    gu, ru = g.posterior["u"].values, ref.posterior["u"].values
    assert np.max(_mc_close(gu, ru)) < 4.5
    np.testing.assert_allclose(gu.reshape(-1, 8).std(0), ru.reshape(-1, 8).std(0), rtol=0.15)


def test_gibbs_cg_matches_cholesky():
    data = _signal(n=16, m=10, sigma2=0.05, seed=1)
    model = SLM(tau=2.0, sigma2=0.05, B="wavelet", wavelet_level=2)
    a = bz.fit(model, data, "gibbs", draws=800, tune=100, chains=2, seed=0, solver="cholesky", progress=False)
    b = bz.fit(model, data, "gibbs", draws=800, tune=100, chains=2, seed=5, solver="cg", progress=False)
    assert b.info["solver"] == "cg"
    assert np.max(_mc_close(a.posterior["u"].values, b.posterior["u"].values)) < 4.5


def test_gibbs_samples_the_logistic_potential_by_polya_gamma_precisions():
    """n = 1: the posterior N(y | x u, sigma2) cosh(tau u)^-2 has its mean and variance by quadrature."""
    from scipy import integrate

    assert "gibbs" in bz.backends(SLM(potential="logistic"))
    x, y, sigma2, tau = np.array([[1.0], [0.5]]), np.array([1.2, 0.4]), 0.5, 1.5
    data = bz.datasets.Dataset(X=x, y=y, name="one unknown", meta={"task": "regression"})
    model = SLM(potential="logistic", tau=tau, sigma2=sigma2)
    density = lambda u: np.exp(-np.sum((y - x[:, 0] * u) ** 2) / (2 * sigma2)) / np.cosh(tau * u) ** 2  # noqa: E731
    Z = integrate.quad(density, -20, 20)[0]
    mean = integrate.quad(lambda u: u * density(u), -20, 20)[0] / Z
    var = integrate.quad(lambda u: (u - mean) ** 2 * density(u), -20, 20)[0] / Z
    fit = bz.fit(model, data, "gibbs", draws=10000, tune=200, chains=2, seed=0, progress=False)
    u = fit.posterior["u"].values.ravel()
    ess = float(az.ess(fit.idata, var_names=["u"])["u"].min())
    assert abs(u.mean() - mean) < 4 * np.sqrt(var / ess)
    assert u.var() == pytest.approx(var, rel=0.05)


@pytest.mark.parametrize("backend", ["ep", "dloop", "sbl"])
def test_posterior_mean_of_a_gaussian_approximation_is_its_exact_mean(backend):
    data = bz.datasets.load("slm_signal", kind="spikes", n=12, m=6, seed=0)
    model = bz.models.SLM(potential="laplace", tau=2.0, sigma2=0.01)
    few = bz.fit(model, data, backend, draws=3, chains=1, seed=0, progress=False)
    many = bz.fit(model, data, backend, draws=4000, chains=2, seed=1, progress=False)
    exact = model.posterior_mean(few)
    np.testing.assert_array_equal(exact, few.idata["gaussian"]["q_mean"].values)
    np.testing.assert_allclose(exact, model.posterior_mean(many), rtol=1e-10)
    draws = many.idata.posterior["u"].values.reshape(-1, 12)
    se = draws.std(0) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(0) - exact) < 4.5 * se)     # the draws come from that mean
    three = few.idata.posterior["u"].values.reshape(-1, 12).mean(0)
    assert not np.allclose(three, exact)
