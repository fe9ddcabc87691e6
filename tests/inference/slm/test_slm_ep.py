"""The EP backend (`ep`): exact for Gaussian potentials, the Laplace tilted moments against quadrature, the
Cholesky rank-one updates and the Woodbury-maintained marginals, the schedules and damping reaching one fixed
point, and (against the Gibbs sampler, itself checked against NUTS in test_slm_backends) the accuracy of EP on
Laplace SLMs."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import bayeszoo as bz
from bayeszoo.inference.slm import ep as E
from bayeszoo.models.slm import SLM
from bayeszoo.numerics.potentials import Potential

SIGMA2 = 0.05


def _case(potential="laplace", B="wavelet+tv", n=16, m=10, seed=0):
    data = bz.datasets.load("slm_signal", kind="spikes", n=n, m=m, sigma2=SIGMA2, seed=seed)
    model = SLM(potential=potential, tau=2.0, tau_tv=3.0, sigma2=SIGMA2, B=B, wavelet_level=2)
    return model, data, model.dense_X(data), model.dense_B(data)


@pytest.mark.parametrize("schedule", ["sweep", "selective"])
def test_gaussian_potentials_are_exact(schedule):
    model, data, X, B = _case("gaussian")
    pot = Potential("gaussian", model.taus(data) * 0.5)      # start the sites away from the answer
    exact = SLM(potential="gaussian", tau=1.0, tau_tv=1.5, sigma2=SIGMA2, B="wavelet+tv", wavelet_level=2)
    mean, V = exact.gaussian_posterior(data)
    res = E.ep(X, B, data.y, SIGMA2, pot, schedule=schedule, tol=1e-14)
    assert res.converged
    np.testing.assert_allclose(res.mean, mean, atol=1e-8)
    np.testing.assert_allclose(res.cov, V, atol=1e-10)


@pytest.mark.parametrize("mu,v,a", [(-3.0, 1.0, 1.7), (0.1, 0.01, 1.7), (2.0, 4.0, 1.7), (50.0, 1.0, 1.7),
                                    (-0.3, 100.0, 1.7), (0.0, 1.0, 1e-6), (5.0, 1e-4, 30.0), (-1e3, 1.0, 0.5)])
def test_laplace_tilted_moments_against_quadrature(mu, v, a):
    mean, var = E.laplace_moments(np.array([mu]), np.array([v]), a)
    sd = np.sqrt(v)
    s = np.concatenate([np.linspace(mu - 12 * sd, 0, 400001), np.linspace(0, mu + 12 * sd, 400001)]) if \
        mu - 12 * sd < 0 < mu + 12 * sd else np.linspace(mu - 12 * sd, mu + 12 * sd, 800001)
    s = np.unique(s)
    logw = -0.5 * (s - mu) ** 2 / v - a * np.abs(s)
    w = np.exp(logw - logw.max()) * np.gradient(s)
    w /= w.sum()
    ref_mean = w @ s
    ref_var = w @ (s - ref_mean) ** 2
    assert mean[0] == pytest.approx(ref_mean, abs=1e-6 * sd)
    assert var[0] == pytest.approx(ref_var, rel=1e-5)


def test_quadrature_moments_for_smooth_potentials():
    mu, v = np.array([-1.0, 0.3, 4.0]), np.array([0.5, 2.0, 0.1])
    for name in ("logistic", "student"):
        pot = Potential(name, np.array([1.0, 2.0, 0.5]), 3.0)
        mean, var = E.tilted_moments(pot, np.arange(3), mu, v, 0.9)
        for j in range(3):
            s = np.linspace(mu[j] - 15 * np.sqrt(v[j]), mu[j] + 15 * np.sqrt(v[j]), 200001)
            w = np.exp(-0.5 * (s - mu[j]) ** 2 / v[j] + 0.9 * Potential(name, pot.tau[j], 3.0).log_t(s))
            w /= w.sum()
            assert mean[j] == pytest.approx(w @ s, abs=1e-7)
            assert var[j] == pytest.approx(w @ (s - w @ s) ** 2, rel=1e-6)


def test_cholesky_rank_one_update_and_downdate():
    rng = np.random.default_rng(0)
    M = rng.standard_normal((12, 12))
    A = M @ M.T + np.eye(12)
    x = rng.standard_normal(12)
    L = sla.cholesky(A, lower=True)
    assert E.chol_rank_one(L, x, 1.0)
    np.testing.assert_allclose(L @ L.T, A + np.outer(x, x), atol=1e-10)
    assert E.chol_rank_one(L, 0.5 * x, -1.0)
    np.testing.assert_allclose(L @ L.T, A + 0.75 * np.outer(x, x), atol=1e-10)
    # a downdate that leaves A indefinite is refused, and the factor is left as it was
    L = sla.cholesky(np.diag([1.0, 4.0, 9.0]), lower=True)
    assert not E.chol_rank_one(L, np.array([0.5, 2.5, 0.0]), -1.0)
    np.testing.assert_array_equal(L, np.diag([1.0, 2.0, 3.0]))
    # at a size where the rows are long: the same factor as a fresh Cholesky, zeros kept above the diagonal
    M = rng.standard_normal((300, 300))
    A = M @ M.T / 300 + np.eye(300)
    L, x = sla.cholesky(A, lower=True), rng.standard_normal(300)
    assert E.chol_rank_one(L, x, 1.0)
    np.testing.assert_allclose(L, sla.cholesky(A + np.outer(x, x), lower=True), atol=1e-12)
    assert np.all(np.triu(L, 1) == 0.0)


def test_marginals_kept_by_woodbury_equal_a_fresh_factor():
    model, data, X, B = _case("laplace")
    rng = np.random.default_rng(1)
    st = E.State(X, B, data.y, SIGMA2, np.full(B.shape[0], 2.0), np.zeros(B.shape[0]))
    for i in rng.choice(B.shape[0], 20):
        assert st.update(i, st.pi[i] * rng.uniform(0.5, 2.0), rng.standard_normal())
    h, rho = st.h.copy(), st.rho.copy()
    st.refresh()
    np.testing.assert_allclose(h, st.h, atol=1e-10)
    np.testing.assert_allclose(rho, st.rho, rtol=1e-9)


def test_schedules_and_damping_reach_one_fixed_point():
    model, data, X, B = _case("laplace")
    pot = model.potentials(data)
    ref = E.ep(X, B, data.y, SIGMA2, pot, tol=1e-14, max_sweeps=500)
    for kw in ({"schedule": "selective"}, {"damping": 0.5}):
        res = E.ep(X, B, data.y, SIGMA2, pot, tol=1e-14, max_sweeps=500, **kw)
        assert res.converged
        np.testing.assert_allclose(res.mean, ref.mean, atol=1e-6)
        np.testing.assert_allclose(res.cov, ref.cov, atol=1e-7)


def test_fixed_point_matches_the_fractional_tilted_moments():
    """At convergence every marginal Q(s_i) has the mean and variance of its fractional tilted distribution."""
    model, data, X, B = _case("laplace", "identity")
    pot = model.potentials(data)
    res = E.ep(X, B, data.y, SIGMA2, pot, tol=1e-16, max_sweeps=1000)
    h, rho = B @ res.mean, np.einsum("ij,jk,ik->i", B, res.cov, B)
    P_c, H_c = 1.0 / rho - 0.9 * res.pi, h / rho - 0.9 * res.b
    mean, var = E.laplace_moments(H_c / P_c, 1.0 / P_c, 0.9 * pot.tau)
    np.testing.assert_allclose(mean, h, atol=1e-7)
    np.testing.assert_allclose(var, rho, rtol=1e-6)


def _ep_vs_gibbs(B, n, m, draws, mean_sd, var_rel):
    data = bz.datasets.load("slm_signal", kind="spikes", n=n, m=m, sigma2=SIGMA2, seed=0)
    model = SLM(tau=2.0, tau_tv=3.0, sigma2=SIGMA2, B=B, wavelet_level=2)
    fit = bz.fit(model, data, "ep", seed=0, progress=False, draws=10, chains=1)
    assert fit.info["converged"] and not fit.info["skipped_updates"]
    res = E.ep(model.dense_X(data), model.dense_B(data), data.y, SIGMA2, model.potentials(data))
    ref = bz.fit(model, data, "gibbs", draws=draws, tune=200, chains=2, seed=0, progress=False)
    u = ref.posterior["u"].values.reshape(-1, n)
    sd = u.std(0)
    assert np.max(np.abs(res.mean - u.mean(0)) / sd) < mean_sd
    assert np.max(np.abs(np.diag(res.cov) / sd**2 - 1.0)) < var_rel


def test_ep_is_accurate_for_a_laplace_slm():
    # EP's mean within 0.1 posterior sd and variances within 15 % of the Gibbs sampler's (3000 draws)
    _ep_vs_gibbs("identity", n=12, m=8, draws=1500, mean_sd=0.1, var_rel=0.15)


@pytest.mark.slow
@pytest.mark.parametrize("B,var_rel", [("identity", 0.08), ("wavelet+tv", 0.15)])
def test_ep_is_accurate_for_laplace_slms_slow(B, var_rel):
    # 40000 draws; with W+TV the largest variance error of EP (eta = 0.9) among the 32 coordinates is about 14 %
    _ep_vs_gibbs(B, n=32, m=20, draws=20000, mean_sd=0.06, var_rel=var_rel)


@pytest.mark.parametrize("name,value", [("eta", 0.0), ("eta", 1.5), ("damping", 1.0), ("damping", -0.1),
                                        ("schedule", "random"), ("max_sweeps", 0), ("tol", 0.0)])
def test_bad_options(name, value):
    model, data, _, _ = _case("laplace")
    with pytest.raises(ValueError, match=name):
        bz.fit(model, data, "ep", progress=False, **{name: value})


def test_refuses_large_n():
    data = bz.datasets.load("slm_signal", kind="spikes", n=E.DENSE_N + 24, m=5, sigma2=SIGMA2, seed=0)
    with pytest.raises(ValueError, match="dense"):
        bz.fit(SLM(tau=2.0, sigma2=SIGMA2), data, "ep", progress=False)
