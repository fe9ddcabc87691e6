"""The double-loop backend (`dloop`): exact for Gaussian potentials, the bound phi decreasing over outer iterations,
the fixed point equal to a direct minimisation of phi, the Lanczos variances (underestimates growing with k, exact
at k = n), the inner loop with zero variances equal to MAP, perturb-and-solve draws, option checks."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

import bayeszoo as bz
from bayeszoo.inference.slm import dloop
from bayeszoo.inference.slm.common import problem
from bayeszoo.models.slm import SLM
from bayeszoo.numerics.lanczos import lanczos_variances

SIGMA2 = 0.05


def _case(potential="laplace", B="wavelet+tv", n=16, m=10, seed=0):
    data = bz.datasets.load("slm_signal", kind="spikes", n=n, m=m, sigma2=SIGMA2, seed=seed)
    model = SLM(potential=potential, tau=2.0, tau_tv=3.0, sigma2=SIGMA2, B=B, wavelet_level=2)
    return model, data, problem(model, data), (model.dense_X(data), model.dense_B(data))


def _exact_log_z(model, data):
    """ln int N(y | X u, sigma2 I) prod_j T_j((B u)_j) du for Gaussian potentials."""
    mean, V = model.gaussian_posterior(data)
    X, y = model.dense_X(data), data.y
    m, n = X.shape
    r_min = y @ y / SIGMA2 - (X.T @ y / SIGMA2) @ mean
    return -0.5 * (r_min - np.linalg.slogdet(V)[1] + m * np.log(2 * np.pi * SIGMA2) - n * np.log(2 * np.pi))


@pytest.mark.parametrize("exact", [True, False])
def test_gaussian_potentials_are_exact(exact):
    model, data, prob, dense = _case("gaussian")
    res = dloop.double_loop(prob, dense=dense, exact_variances=exact, lanczos_k=prob.n)
    mean, V = model.gaussian_posterior(data)
    np.testing.assert_allclose(res.mean, mean, atol=1e-7)
    np.testing.assert_allclose(res.u_var, np.diag(V), rtol=1e-8)
    # the bound is tight: phi = -2 ln Z
    assert res.phi[-1] == pytest.approx(-2.0 * _exact_log_z(model, data), rel=1e-10)
    fit = bz.fit(model, data, "dloop", seed=0, progress=False)
    assert fit.info["variances_exact"] and fit.info["lanczos_k"] == prob.n
    u = fit.posterior["u"].values.reshape(-1, prob.n)
    assert np.all(np.abs(u.mean(0) - mean) < 4.5 * np.sqrt(np.diag(V) / u.shape[0]))


@pytest.mark.parametrize("potential,B", [("laplace", "wavelet+tv"), ("laplace", "identity"), ("logistic", "tv"),
                                         ("student", "wavelet+tv"), ("student", "identity")])
def test_phi_decreases_over_outer_iterations(potential, B):
    model, data, prob, dense = _case(potential, B)
    # Student's t converges more slowly: its surrogate also moves the tangent of the concave part of h
    res = dloop.double_loop(prob, dense=dense, exact_variances=True, n_outer=300, outer_tol=1e-8)
    phi = res.phi
    assert phi.size >= 4 and res.converged
    assert np.all(np.diff(phi) <= 1e-9 * np.abs(phi[1:]))
    assert phi[-1] < phi[0]


def test_fixed_point_minimises_phi():
    """The double loop's fixed point is the minimiser of phi(gamma) (convex for Laplace potentials), found here
    directly by L-BFGS on ln gamma with the exact gradient h'(gamma) - (s^2 + z) / gamma^2 (dense)."""
    model, data, prob, (X, B) = _case("laplace")
    res = dloop.double_loop(prob, dense=(X, B), exact_variances=True, n_outer=100, outer_tol=1e-10)
    tau = prob.potential.tau

    def f(theta):
        g = np.exp(theta)
        Ai = np.linalg.inv(X.T @ X / SIGMA2 + B.T @ (B / g[:, None]))
        m = Ai @ X.T @ data.y / SIGMA2
        z = np.einsum("ij,jk,ik->i", B, Ai, B)
        return dloop.phi_bound(prob, g, X, B), (tau**2 - ((B @ m) ** 2 + z) / g**2) * g, m

    ref = minimize(lambda t: f(t)[:2], np.zeros(B.shape[0]), jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10})
    assert res.phi[-1] == pytest.approx(ref.fun, rel=1e-9)
    np.testing.assert_allclose(res.mean, f(ref.x)[2], atol=1e-6)


def test_lanczos_variances_underestimate_and_grow_with_k():
    model, data, prob, (X, B) = _case("laplace")
    gamma = np.random.default_rng(1).uniform(0.05, 1.0, prob.q)
    z_exact, u_exact, _ = dloop.variances(prob, gamma, k=0, dense=(X, B))
    prev = np.zeros(prob.q)
    for k in (1, 3, 6, 10, 14):
        z, u_var, steps = dloop.variances(prob, gamma, k=k)
        assert steps == k
        assert np.all(z >= prev - 1e-14) and np.all(z <= z_exact * (1 + 1e-10))
        assert np.all(u_var <= u_exact * (1 + 1e-10))
        prev = z
    assert np.max(prev / z_exact) < 1 - 1e-3            # not yet exact at k = 14 < n
    z, u_var, steps = dloop.variances(prob, gamma, k=prob.n)
    np.testing.assert_allclose(z, z_exact, rtol=1e-9)
    np.testing.assert_allclose(u_var, u_exact, rtol=1e-9)


def test_lanczos_on_a_random_matrix():
    rng = np.random.default_rng(2)
    n = 40
    M = rng.standard_normal((n, n))
    A = M @ M.T + 0.1 * np.eye(n)
    C = rng.standard_normal((25, n))
    exact = np.diag(C @ np.linalg.solve(A, C.T))
    (full,), steps = lanczos_variances(lambda v: A @ v, n, n, [lambda v: C @ v])
    assert steps == n
    np.testing.assert_allclose(full, exact, rtol=1e-8)


def test_lanczos_k_reaches_the_fixed_point_at_k_equal_n():
    model, data, prob, dense = _case("laplace")
    exact = dloop.double_loop(prob, dense=dense, exact_variances=True, n_outer=100, outer_tol=1e-10)
    full = dloop.double_loop(prob, dense=dense, lanczos_k=prob.n, n_outer=100, outer_tol=1e-10)
    short = dloop.double_loop(prob, dense=dense, lanczos_k=4, n_outer=100, outer_tol=1e-10)
    np.testing.assert_allclose(full.mean, exact.mean, atol=1e-7)
    # underestimated variances shrink less: the mean moves away from the variational fixed point
    assert np.max(np.abs(short.mean - exact.mean)) > 1e-3
    assert short.phi[-1] > exact.phi[-1]


def test_inner_loop_with_zero_variances_is_map():
    """With z = 0 the inner problem is the MAP problem (smooth potentials: the Newton steps apply)."""
    model, data, prob, _ = _case("logistic", "tv")
    u, f, _, ok, _ = dloop.inner_loop(prob, np.zeros(prob.q), np.zeros(prob.n), n_inner=50)
    assert ok and np.all(np.diff(f) <= 1e-12 * np.abs(f[1:]))
    fit = bz.fit(model, data, "map", progress=False)
    np.testing.assert_allclose(u, model.posterior_mean(fit), atol=1e-5)
    assert f[-1] == pytest.approx(prob.neg_log_joint(u), rel=1e-12)


def test_perturb_and_solve_draws_follow_the_gaussian(monkeypatch):
    """Above DENSE_N the draws are CG perturb-and-solve samples of N(mean, A^-1): checked here by lowering the
    limit on a small problem."""
    model, data, prob, (X, B) = _case("laplace")
    dense_fit = bz.fit(model, data, "dloop", seed=0, progress=False, draws=10, chains=1)
    gamma = dense_fit.idata["potentials"]["gamma"].values
    V = np.linalg.inv(X.T @ X / SIGMA2 + B.T @ (B / gamma[:, None]))
    monkeypatch.setattr(dloop, "DENSE_N", 4)
    fit = bz.fit(model, data, "dloop", seed=3, progress=False, draws=300, chains=2, cg_tol=1e-10)
    assert fit.info["objective"] is None and "objective" not in fit.idata.groups()
    np.testing.assert_allclose(fit.idata["potentials"]["gamma"].values, gamma, rtol=1e-10)
    u = fit.posterior["u"].values.reshape(-1, prob.n)
    mean = V @ (X.T @ data.y) / SIGMA2
    assert np.all(np.abs(u.mean(0) - mean) < 4.5 * np.sqrt(np.diag(V) / u.shape[0]))
    np.testing.assert_allclose(u.var(0), np.diag(V), rtol=0.3)     # 600 draws: 5.8 % sd
    again = bz.fit(model, data, "dloop", seed=3, progress=False, draws=300, chains=2, cg_tol=1e-10)
    np.testing.assert_array_equal(again.posterior["u"].values, fit.posterior["u"].values)


def test_info_reports_lanczos():
    model, data, prob, _ = _case("laplace")
    fit = bz.fit(model, data, "dloop", lanczos_k=5, seed=0, progress=False, draws=10, chains=1)
    assert fit.info["lanczos_k"] == 5 and fit.info["variances_exact"] is False
    assert fit.idata["gaussian"]["q_var"].size == prob.n and fit.idata["potentials"]["s_var"].size == prob.q
    fit = bz.fit(model, data, "dloop", exact_variances=True, seed=0, progress=False, draws=10, chains=1)
    assert fit.info["lanczos_k"] is None and fit.info["variances_exact"] is True


@pytest.mark.parametrize("name,value", [("n_outer", 0), ("n_inner", 1.5), ("lanczos_k", -1), ("outer_tol", 0.0),
                                        ("inner_tol", -1e-3), ("cg_tol", float("nan")), ("cg_max_iter", 0),
                                        ("exact_variances", 1)])
def test_bad_options(name, value):
    model, data, _, _ = _case("laplace")
    with pytest.raises(ValueError, match=name):
        bz.fit(model, data, "dloop", progress=False, **{name: value})


def test_offered_for_every_potential():
    for potential in ("laplace", "logistic", "gaussian", "student"):
        assert "dloop" in bz.backends(SLM(potential=potential))


def test_student_fixed_point_is_a_stationary_point_of_phi():
    """phi is not convex for Student's t; the double loop (with the tangent on the concave part of h) must still end
    where the gradient of phi in ln gamma, gamma h'(gamma) - (s^2 + z) / gamma, vanishes, and at the matching
    gamma = gamma*(sqrt(s^2 + z)) of the bound."""
    model, data, prob, (X, B) = _case("student", "identity")
    pot = prob.potential
    res = dloop.double_loop(prob, dense=(X, B), exact_variances=True, n_outer=300, outer_tol=1e-11)
    assert res.converged
    g = res.gamma
    Ai = np.linalg.inv(X.T @ X / SIGMA2 + B.T @ (B / g[:, None]))
    m = Ai @ X.T @ data.y / SIGMA2
    z = np.einsum("ij,jk,ik->i", B, Ai, B)
    np.testing.assert_allclose(m, res.mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(g, pot.gamma_star(np.sqrt((B @ m) ** 2 + z)), rtol=1e-8)
    step = 1e-6                                # h'(gamma) by central differences of Table 3.1's height function
    dh = (pot.h(g * (1 + step)) - pot.h(g * (1 - step))) / (2 * step * g)
    grad = g * dh - ((B @ m) ** 2 + z) / g
    assert np.max(np.abs(grad)) < 1e-6
    # and no nearby gamma has a smaller phi
    rng = np.random.default_rng(0)
    for _ in range(20):
        moved = g * np.exp(0.05 * rng.standard_normal(g.size))
        assert dloop.phi_bound(prob, moved, X, B) >= res.phi[-1] - 1e-9


def test_student_inner_surrogate_matches_the_tangent_bound():
    """The Student's t penalty sqrt(c q) with c = (nu + 1) / gamma0 equals half the minimum over gamma of
    (s^2 + z) / gamma + h_cup(gamma) + c gamma, h_cup = nu / (tau gamma), by brute force; its derivatives match
    finite differences."""
    pot = SLM(potential="student", tau=2.0, nu=3.0).potentials(bz.datasets.Dataset(X=np.eye(3), y=np.zeros(3)))
    gamma0, z = np.array([0.3, 1.0, 4.0]), np.array([0.1, 0.5, 0.0])
    sur = dloop.Surrogate(pot, z, gamma0)
    s = np.array([0.2, -1.5, 3.0])
    c = (pot.nu + 1) / gamma0
    grid = np.geomspace(1e-4, 1e4, 400_001)[:, None]
    brute = 0.5 * np.min((s**2 + z) / grid + pot.nu / (2.0 * grid) + c * grid, axis=0)
    value, d1, d2 = sur.penalty(s)
    np.testing.assert_allclose(np.sqrt(c * (s**2 + z + pot.nu / 2.0)), brute, rtol=1e-6)
    assert value == pytest.approx(float(np.sum(brute)), rel=1e-6)
    eps = 1e-6
    fd1 = np.array([(sur.penalty(s + eps * e)[0] - sur.penalty(s - eps * e)[0]) / (2 * eps) for e in np.eye(3)])
    np.testing.assert_allclose(d1, fd1, rtol=1e-6)
    fd2 = (sur.penalty(s + eps)[1] - sur.penalty(s - eps)[1]) / (2 * eps)
    np.testing.assert_allclose(d2, fd2, rtol=1e-5)
    np.testing.assert_allclose(sur.gamma(s), np.sqrt((s**2 + z + pot.nu / 2.0) / c))


def test_student_posterior_against_gibbs():
    """Variational Gaussian against the Gibbs sampler on a Student's t SLM: means within 0.4 posterior sd, and
    variances too small (the variational bound's known bias), by 10-50 %."""
    data = bz.datasets.load("slm_signal", kind="student", n=16, m=10, sigma2=SIGMA2, seed=0)
    model = SLM(potential="student", tau=2.0, nu=3.0, sigma2=SIGMA2)
    gibbs = bz.fit(model, data, "gibbs", draws=5000, tune=500, chains=4, seed=0, progress=False)
    fit = bz.fit(model, data, "dloop", seed=0, progress=False, n_outer=200, outer_tol=1e-8)
    assert fit.info["converged"]
    u = gibbs.posterior["u"].values.reshape(-1, 16)
    assert np.max(np.abs(model.posterior_mean(fit) - u.mean(0)) / u.std(0)) < 0.4
    ratio = np.sqrt(fit.idata["gaussian"]["q_var"].values) / u.std(0)
    assert np.all((0.5 < ratio) & (ratio < 0.9))
