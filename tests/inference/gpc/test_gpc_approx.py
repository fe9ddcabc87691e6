"""Laplace and EP for GP classification: exact answers on tiny problems (thesis ch. 4, R&W ch. 3)."""
from __future__ import annotations

import numpy as np

from bayeszoo.models.gpc import predictive_probability
import pytest
from scipy import integrate
from scipy.special import log_expit, log_ndtr

import bayeszoo as bz
from bayeszoo.datasets import Dataset
from bayeszoo.inference.gpc import common as C
from bayeszoo.inference.gpc import ep as EP
from bayeszoo.inference.gpc import laplace as LA
from bayeszoo.inference.gpc import type2ml as T2
from bayeszoo.numerics import gp_kernels as gk

LOG_ELLS = (0.0, 1.0, 2.5)
LOG_SFS = (1.5, 0.0, -1.5)           # rows of Fig. 4.3: sigma_f large (non-Gaussian) to small
TOY_X = np.array([[np.sqrt(2.0)], [-np.sqrt(2.0)]])
TOY_Y = np.array([1.0, -1.0])


def se(X, log_ell, log_sf, jitter=1e-8):
    return gk.kernel_matrix("se", X, None, [log_ell, log_sf]) + jitter * np.eye(len(X))


def loglik(f, y, likelihood):
    return log_ndtr(y * f) if likelihood == "probit" else log_expit(y * f)


def grid_posterior(K, y, likelihood, n_grid=1201):
    """Exact 2-point posterior on a fine grid: (log Z, grid F1, F2, normalised weights p, cell area)."""
    s = np.sqrt(np.max(np.diag(K)))
    g = np.linspace(-10 * s - 6, 10 * s + 6, n_grid)
    h = g[1] - g[0]
    F1, F2 = np.meshgrid(g, g, indexing="ij")
    Lk = np.linalg.cholesky(K)
    Z1 = F1 / Lk[0, 0]                                             # L^-1 f, component-wise for a 2x2 L
    Z2 = (F2 - Lk[1, 0] * Z1) / Lk[1, 1]
    lp = (-0.5 * (Z1**2 + Z2**2) - np.log(2 * np.pi) - np.sum(np.log(np.diag(Lk)))
          + loglik(F1, y[0], likelihood) + loglik(F2, y[1], likelihood))
    mx = lp.max()
    w = np.exp(lp - mx)
    lZ = mx + np.log(w.sum() * h * h)
    return lZ, F1, F2, w / w.sum(), lp - lZ


def kl_exact_to_gauss(F1, F2, p, logp, m, V):
    """KL(P || N(m, V)) on the grid."""
    Vi = np.linalg.inv(V)
    d1, d2 = F1 - m[0], F2 - m[1]
    logq = (-0.5 * (Vi[0, 0] * d1**2 + 2 * Vi[0, 1] * d1 * d2 + Vi[1, 1] * d2**2) - np.log(2 * np.pi)
            - 0.5 * np.log(np.linalg.det(V)))
    mask = p > 0
    return float(np.sum(p[mask] * (logp[mask] - logq[mask])))


def toy_data(n=20, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.normal(size=n) > 0).astype(float)
    return Dataset(X=X, y=y, name="toy")


# ------------------------------------------------------------------------------------------------ likelihood
@pytest.mark.parametrize("likelihood", ["probit", "logit"])
def test_likelihood_derivatives_match_finite_differences(likelihood):
    f = np.linspace(-8, 8, 33)
    for y in (1.0, -1.0):
        lp, d1, d2, d3 = C.log_lik_derivs(f, y, likelihood)
        e = 1e-5
        lpp, d1p, d2p, _ = C.log_lik_derivs(f + e, y, likelihood)
        lpm, d1m, d2m, _ = C.log_lik_derivs(f - e, y, likelihood)
        np.testing.assert_allclose(d1, (lpp - lpm) / (2 * e), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(d2, (d1p - d1m) / (2 * e), rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(d3, (d2p - d2m) / (2 * e), rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("likelihood", ["probit", "logit"])
def test_likelihood_is_finite_for_extreme_arguments(likelihood):
    f = np.array([-1e6, -1e3, -40.0, 0.0, 40.0, 1e3, 1e6])
    for out in C.log_lik_derivs(f, 1.0, likelihood):
        assert np.all(np.isfinite(out))


@pytest.mark.parametrize("likelihood", ["probit", "logit"])
@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
def test_tilted_moments_match_quadrature(likelihood):
    for y, mu, var in [(1.0, 0.3, 0.5), (-1.0, 2.0, 4.0), (1.0, -3.0, 400.0), (1.0, 5.0, 1e-4), (-1.0, 40.0, 900.0)]:
        lZ, d1, d2 = C.tilted_moments(y, mu, var, likelihood)
        s = np.sqrt(var)
        dens = lambda f: np.exp(loglik(f, y, likelihood) - 0.5 * (f - mu) ** 2 / var) / np.sqrt(2 * np.pi * var)
        pts = sorted({mu, 0.0})
        lim = (mu - 14 * s, mu + 14 * s)
        Z = integrate.quad(dens, *lim, points=pts, limit=400, epsabs=0, epsrel=1e-12)[0]
        m1 = integrate.quad(lambda f: f * dens(f), *lim, points=pts, limit=400, epsabs=0, epsrel=1e-12)[0] / Z
        m2 = integrate.quad(lambda f: (f - m1) ** 2 * dens(f), *lim, points=pts, limit=400, epsabs=0,
                            epsrel=1e-12)[0] / Z
        np.testing.assert_allclose(lZ, np.log(Z), rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(mu + var * d1, m1, rtol=1e-7, atol=1e-7 * s)
        np.testing.assert_allclose(var + var**2 * d2, m2, rtol=1e-6, atol=1e-9)


# ------------------------------------------------------------------------------------------------ Laplace
@pytest.mark.parametrize("likelihood", ["probit", "logit"])
def test_laplace_mode_has_zero_gradient(likelihood):
    data = toy_data(25)
    K = se(data.X, 0.5, 1.0)
    y = C.labels_pm(data.y)
    res = LA.laplace_mode(K, y, likelihood)
    assert res.converged
    # grad of log p(y|f) - f^T K^-1 f / 2 at f_hat: d1 - alpha = 0, and f = K alpha
    _, d1, _, _ = C.log_lik_derivs(res.f, y, likelihood)
    np.testing.assert_allclose(d1, res.alpha, atol=1e-9)
    np.testing.assert_allclose(K @ res.alpha, res.f, atol=1e-9)


@pytest.mark.parametrize("method", ["laplace", "ep"])
@pytest.mark.parametrize("likelihood", ["probit", "logit"])
def test_evidence_gradient_matches_finite_differences(method, likelihood):
    data = toy_data(15, seed=1)
    model = bz.models.GPC(likelihood=likelihood)
    hyp = np.array([0.3, 0.8])
    kw = {"tol": 1e-13, "max_sweeps": 500} if method == "ep" else {"tol": 1e-14, "max_iter": 200}
    lZ, g = T2.log_evidence_and_grad(model, data, hyp, method, **kw)
    e = 1e-5
    fd = []
    for j in range(2):
        dh = np.zeros(2)
        dh[j] = e
        fd.append((T2.log_evidence_and_grad(model, data, hyp + dh, method, **kw)[0]
                   - T2.log_evidence_and_grad(model, data, hyp - dh, method, **kw)[0]) / (2 * e))
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", ["laplace", "ep"])
def test_optimize_hyperparameters_increases_evidence(method):
    data = toy_data(20, seed=2)
    model = bz.models.GPC(likelihood="probit", log_lengthscale=-1.0, log_amplitude=-1.0)
    best = T2.optimize_hyperparameters(model, data, method=method, max_iter=50)
    lz0, _ = T2.log_evidence_and_grad(model, data, C.get_hyp(model, data.X), method)
    lz1, g1 = T2.log_evidence_and_grad(best, data, C.get_hyp(best, data.X), method)
    assert lz1 > lz0 + 0.1
    assert np.max(np.abs(g1)) < 1e-3


# ------------------------------------------------------------------------------------------------ EP
@pytest.mark.parametrize("likelihood", ["probit", "logit"])
@pytest.mark.parametrize("hyp", [(0.0, 0.0), (0.0, 3.0), (2.5, 3.0), (-2.0, 2.0)])
def test_ep_moment_matching_at_convergence(likelihood, hyp):
    data = toy_data(12, seed=3)
    K = se(data.X, *hyp)
    y = C.labels_pm(data.y)
    res = EP.ep_sites(K, y, likelihood, tol=1e-12, max_sweeps=1000)
    assert res.converged
    S, mu, tt, tn = res.Sigma, res.mu, res.ttau, res.tnu
    dS = np.diag(S)
    tau_c = 1 / dS - tt
    nu_c = mu / dS - tn
    m_c, v_c = nu_c / tau_c, 1 / tau_c
    _, d1, d2 = C.tilted_moments(y, m_c, v_c, likelihood)
    assert np.all(np.abs(m_c + v_c * d1 - mu) <= 1e-6 * (1 + np.abs(mu)))
    np.testing.assert_allclose(v_c + v_c**2 * d2, dS, rtol=1e-6)


@pytest.mark.parametrize("likelihood", ["probit", "logit"])
def test_ep_evidence_exact_for_one_point(likelihood):
    for k, x in [(1.0, 0.0), (20.0, 0.0)]:
        K = np.array([[k]])
        for y in (1.0, -1.0):
            res = EP.ep_sites(K, np.array([y]), likelihood)
            Z = integrate.quad(lambda f: np.exp(loglik(f, y, likelihood) - 0.5 * f * f / k) / np.sqrt(2 * np.pi * k),
                               -20 * np.sqrt(k), 20 * np.sqrt(k), points=[0.0], limit=200)[0]
            np.testing.assert_allclose(res.log_evidence, np.log(Z), atol=1e-9)
            np.testing.assert_allclose(res.log_evidence, np.log(0.5), atol=1e-9)   # symmetric sigmoid


@pytest.mark.parametrize("likelihood", ["probit", "logit"])
def test_two_point_evidence_and_jensen_bound(likelihood):
    """EP's log Z is close to the quadrature value; the Jensen bound at EP's and LA's Q lies below it."""
    for log_ell in LOG_ELLS:
        for log_sf in LOG_SFS:
            K = se(TOY_X, log_ell, log_sf)
            lZ, *_ = grid_posterior(K, TOY_Y, likelihood, n_grid=801)
            ep = EP.ep_sites(K, TOY_Y, likelihood)
            la = LA.laplace_mode(K, TOY_Y, likelihood)
            assert abs(ep.log_evidence - lZ) < 5e-3, (log_ell, log_sf)
            assert abs(ep.log_evidence - lZ) <= abs(la.log_evidence - lZ) + 1e-6
            for r, m in ((ep, ep.mu), (la, la.f)):
                V = C.posterior_cov(K, r.sW, r.L)
                jb = C.jensen_bound(TOY_Y, m, V, likelihood, sW=r.sW, L=r.L, alpha=r.alpha)
                jb2 = C.jensen_bound(TOY_Y, m, V, likelihood, K=K)
                np.testing.assert_allclose(jb, jb2, rtol=1e-8)
                assert jb <= lZ + 1e-6


def toy_kl_table(likelihood="probit"):
    out = {}
    for log_sf in LOG_SFS:
        for log_ell in LOG_ELLS:
            K = se(TOY_X, log_ell, log_sf)
            _, F1, F2, p, logp = grid_posterior(K, TOY_Y, likelihood)
            ep = EP.ep_sites(K, TOY_Y, likelihood)
            la = LA.laplace_mode(K, TOY_Y, likelihood)
            out[(log_ell, log_sf)] = (
                kl_exact_to_gauss(F1, F2, p, logp, la.f, C.posterior_cov(K, la.sW, la.L)),
                kl_exact_to_gauss(F1, F2, p, logp, ep.mu, ep.Sigma))
    return out


def gauss_kl(m0, V0, m1, V1):
    """KL(N(m0, V0) || N(m1, V1))."""
    V1i = np.linalg.inv(V1)
    d = m1 - m0
    return 0.5 * (np.trace(V1i @ V0) + d @ V1i @ d - len(m0) + np.log(np.linalg.det(V1) / np.linalg.det(V0)))


def test_two_point_toy_ep_is_closer_than_laplace():
    """KL(exact || Q) on the nine regimes of Fig. 4.3 (probit): EP is the better Gaussian everywhere.

    KL(P || Q) = KL(P || N_P) + KL(N_P || Q), N_P the Gaussian with P's moments; the second term (from the
    model's exact two-point moments) orders the approximations, the first is computed on a grid.
    """
    from bayeszoo.models.gpc import TWO_POINT_X, TWO_POINT_Y, two_point_exact_moments

    table = toy_kl_table("probit")
    for (log_ell, log_sf), (kl_la, kl_ep) in table.items():
        model = bz.models.GPC(likelihood="probit", log_lengthscale=log_ell, log_amplitude=log_sf)
        m, V, lZ = two_point_exact_moments(model)
        K = model.K(TOY_X)
        y = C.labels_pm(TWO_POINT_Y)
        np.testing.assert_array_equal(TWO_POINT_X, TOY_X)
        ep = EP.ep_sites(K, y, "probit")
        la = LA.laplace_mode(K, y, "probit")
        g_ep = gauss_kl(m, V, ep.mu, ep.Sigma)
        g_la = gauss_kl(m, V, la.f, C.posterior_cov(K, la.sW, la.L))
        print(f"log_ell={log_ell:4.1f} log_sf={log_sf:4.1f}  KL(P||Q_LA)={kl_la:.3e}  KL(P||Q_EP)={kl_ep:.3e}  "
              f"KL(N_P||Q_LA)={g_la:.3e}  KL(N_P||Q_EP)={g_ep:.3e}  lnZ={lZ:.6f} lnZ_EP={ep.log_evidence:.6f} "
              f"lnZ_LA={la.log_evidence:.6f}")
        assert kl_ep >= -1e-9 and kl_la >= -1e-9
        assert g_ep < g_la, (log_ell, log_sf)
        # the grid KLs carry the same difference (the common term KL(P || N_P) cancels)
        np.testing.assert_allclose(kl_la - kl_ep, g_la - g_ep, rtol=1e-3, atol=1e-8)
        assert kl_ep < kl_la or abs(kl_la - kl_ep) < 1e-8, (log_ell, log_sf)


# ------------------------------------------------------------------------------------------------ robustness
@pytest.mark.parametrize("likelihood", ["probit", "logit"])
@pytest.mark.parametrize("hyp", [(-3.0, 3.0), (0.0, 3.0), (4.0, 3.0), (3.0, 5.0), (-3.0, -3.0), (6.0, 0.0)])
def test_extreme_hyperparameters_give_finite_results(likelihood, hyp):
    data = toy_data(30, seed=4)
    model = bz.models.GPC(likelihood=likelihood, log_lengthscale=hyp[0], log_amplitude=hyp[1])
    for method in ("laplace", "ep"):
        lZ, g = T2.log_evidence_and_grad(model, data, np.array(hyp), method)
        assert np.isfinite(lZ) and np.all(np.isfinite(g)), method
        assert lZ <= 1e-9
    fit = bz.fit(model, data, "ep", draws=50, chains=2, seed=0, progress=False)
    assert fit.info["converged"]
    assert np.all(np.isfinite(fit.posterior["f"].values))
    assert np.isfinite(fit.info["jensen_bound"]) and fit.info["jensen_bound"] <= fit.info["log_evidence"] + 1e-9


# ------------------------------------------------------------------------------------------------ backends
@pytest.mark.parametrize("backend", ["laplace", "ep"])
def test_backend_draws_come_from_q_and_bound_is_below_evidence(backend):
    data = toy_data(20)
    model = bz.models.GPC(likelihood="logit", log_lengthscale=0.5, log_amplitude=1.0)
    fit = bz.fit(model, data, backend, draws=400, chains=3, seed=7, progress=False)
    f = fit.posterior["f"]
    np.testing.assert_allclose(f.mean(("chain", "draw")).values, fit.idata.gaussian["q_mean"].values,
                               atol=5 * np.sqrt(max(fit.idata.gaussian["q_var"].values) / 1200))
    assert np.isfinite(fit.info["log_evidence"]) and fit.info["jensen_bound"] <= fit.info["log_evidence"] + 1e-9
    assert fit.info["objective"] in fit.idata.objective and fit.info["iterations"] >= 1


def test_ep_damping_reaches_same_fixed_point():
    data = toy_data(15, seed=5)
    K = se(data.X, 0.0, 2.0)
    y = C.labels_pm(data.y)
    a = EP.ep_sites(K, y, "probit", tol=1e-12)
    b = EP.ep_sites(K, y, "probit", tol=1e-12, damping=0.5, max_sweeps=2000)
    assert b.converged
    np.testing.assert_allclose(a.mu, b.mu, atol=1e-7)
    np.testing.assert_allclose(a.log_evidence, b.log_evidence, atol=1e-9)
    for damping in (1.5, 0.0, True):
        with pytest.raises(ValueError, match="damping"):
            bz.fit(bz.models.GPC(), data, "ep", draws=2, chains=1, progress=False, damping=damping)


def textbook_ep(K, y, likelihood, sweeps, damping=1.0):
    """R&W Alg. 3.5 as printed: site by site, a rank-one update of all of Sigma after each site, Sigma recomputed
    after each sweep; the reference for the blocked sweep. Returns (tau~, nu~, ln Z_EP)."""
    n = len(y)
    ttau, tnu = np.zeros(n), np.zeros(n)
    Sigma, mu = K.copy(), np.zeros(n)
    for _ in range(sweeps):
        for i in range(n):
            tau_c = 1.0 / Sigma[i, i] - ttau[i]
            nu_c = mu[i] / Sigma[i, i] - tnu[i]
            _, d1, d2 = C.tilted_moments(y[i], nu_c / tau_c, 1.0 / tau_c, likelihood)
            denom = 1.0 + d2 / tau_c
            tau_new = damping * max(-d2 / denom, 0.0) + (1.0 - damping) * ttau[i]
            nu_new = damping * (d1 - nu_c / tau_c * d2) / denom + (1.0 - damping) * tnu[i]
            dtau = tau_new - ttau[i]
            ttau[i], tnu[i] = tau_new, nu_new
            si = Sigma[:, i].copy()
            Sigma -= dtau / (1.0 + dtau * si[i]) * np.outer(si, si)
            mu = Sigma @ tnu
        sW = np.sqrt(ttau)
        L = np.linalg.cholesky(np.eye(n) + sW[:, None] * K * sW[None, :])
        V = np.linalg.solve(L, sW[:, None] * K)
        Sigma = K - V.T @ V
        mu = Sigma @ tnu
    return ttau, tnu, EP._log_z(K, ttau, tnu, likelihood, y, Sigma, mu, L)


@pytest.mark.parametrize("likelihood", ["probit", "logit"])
def test_blocked_ep_sweep_is_the_sequential_schedule(likelihood):
    # the blocked sweep (rank-b updates of Sigma) against site-by-site rank-one updates: equal after every sweep,
    # for blocks of one site, blocks that do not divide n (a short last block) and one block holding every site
    data = toy_data(40, seed=3)
    K = se(data.X, 0.5, 1.5)
    y = C.labels_pm(data.y)
    for sweeps, damping in ((1, 1.0), (3, 1.0), (3, 0.6)):
        ttau, tnu, lz = textbook_ep(K, y, likelihood, sweeps, damping)
        for block in (1, 7, 64):
            res = EP.ep_sites(K, y, likelihood, max_sweeps=sweeps, min_sweeps=sweeps, damping=damping, block=block)
            np.testing.assert_allclose(res.ttau, ttau, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(res.tnu, tnu, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(res.log_evidence, lz, rtol=1e-12)
    ttau, tnu, lz = textbook_ep(K, y, likelihood, 40)
    for block in (1, 7, 64):
        res = EP.ep_sites(K, y, likelihood, tol=1e-12, block=block)
        assert res.converged and res.iterations < 40
        np.testing.assert_allclose(res.ttau, ttau, atol=1e-8)
        np.testing.assert_allclose(res.tnu, tnu, atol=1e-8)
        np.testing.assert_allclose(res.log_evidence, lz, atol=1e-8)


def test_scalar_probit_moments_match_the_vectorised_ones():
    ys, mus, vs = np.meshgrid([-1.0, 1.0], [-40.0, -3.0, -0.2, 0.0, 0.7, 5.0, 60.0], [1e-6, 0.3, 4.0, 900.0])
    lz, d1, d2 = C.tilted_moments(ys.ravel(), mus.ravel(), vs.ravel(), "probit")
    scalar = np.array([C.probit_tilted_moments_scalar(a, b, c) for a, b, c in zip(ys.ravel(), mus.ravel(),
                                                                                   vs.ravel())])
    # d2 = -r (z + r) cancels in the far tail (z + r ~ 1 / |z|): an ulp of exp() becomes ~1e-13 there
    np.testing.assert_allclose(scalar, np.stack([lz, d1, d2], axis=1), rtol=1e-11, atol=1e-300)


def test_site_form_linear_algebra_matches_dense_formulas():
    # chol(B), V = (K^-1 + W)^-1, diag V and tr(B^-1) (the Jensen bound's trace) against explicit inverses
    data = toy_data(30, seed=4)
    K = se(data.X, 0.3, 1.0)
    sW = np.sqrt(np.random.default_rng(1).uniform(0.0, 0.3, 30))
    B = np.eye(30) + np.diag(sW) @ K @ np.diag(sW)
    L = C.chol_B(K, sW)
    np.testing.assert_allclose(L @ L.T, B, atol=1e-12)
    assert np.allclose(L, np.tril(L))
    V = C.posterior_cov(K, sW, L)
    np.testing.assert_allclose(V, np.linalg.inv(np.linalg.inv(K) + np.diag(sW**2)), atol=1e-8)
    np.testing.assert_array_equal(V, V.T)
    np.testing.assert_allclose(C.posterior_var(K, sW, L), np.diag(V), atol=1e-12)
    np.testing.assert_allclose(C.trace_B_inv(L), np.trace(np.linalg.inv(B)), rtol=1e-12)


def test_expected_log_lik_chunks_add_up(monkeypatch):
    rng = np.random.default_rng(2)
    m, v = rng.normal(0, 3, 700), rng.uniform(0.01, 50, 700)
    y = np.where(rng.uniform(size=700) < 0.5, -1.0, 1.0)
    chunked = C.expected_log_lik(y, m, v, "logit")
    monkeypatch.setattr(C, "QUADRATURE_ROWS", 10_000)
    whole = C.expected_log_lik(y, m, v, "logit")
    np.testing.assert_allclose(chunked, whole, rtol=1e-13)
    # each term against scipy's adaptive quadrature
    for i in (0, 350, 699):
        ref = integrate.quad(lambda f: np.exp(-0.5 * (f - m[i]) ** 2 / v[i]) / np.sqrt(2 * np.pi * v[i])
                             * log_expit(y[i] * f), m[i] - 14 * np.sqrt(v[i]), m[i] + 14 * np.sqrt(v[i]),
                             limit=200)[0]
        np.testing.assert_allclose(C.expected_log_lik(y[i:i + 1], m[i:i + 1], v[i:i + 1], "logit"), ref, rtol=1e-8)


@pytest.mark.slow
def test_ep_predictions_close_to_nuts():
    data = toy_data(20, seed=6)
    Xs = np.linspace(-2, 2, 7)[:, None] * np.array([[1.0, 0.5]])
    model = bz.models.GPC(likelihood="probit", log_lengthscale=0.5, log_amplitude=1.0)
    try:
        ref = bz.fit(model, data, "nuts", draws=2000, tune=1000, chains=4, seed=1, progress=False)
    except NotImplementedError:
        pytest.skip("GPC has no PyMC declaration yet")
    res, _, _ = EP.fit_ep(model, data)
    mu, var = C.predict_latent(model, data.X, Xs, res.alpha, res.sW, res.L)
    p_ep = predictive_probability(mu, var, "probit")
    # NUTS: f_* | f ~ N(K_*^T K^-1 f, k_** - K_*^T K^-1 K_*) averaged over draws
    K = C.kernel_and_grads(model, data.X, grads=False)[0]
    Ks = C.cross_kernel(model, data.X, Xs)
    A = np.linalg.solve(K, Ks)
    f = ref.posterior["f"].values.reshape(-1, data.n)
    cond_var = C.kss_diag(model, Xs) - np.sum(Ks * A, 0)
    p_mc = predictive_probability(f @ A, cond_var[None, :], "probit").mean(0)
    np.testing.assert_allclose(p_ep, p_mc, atol=0.02)


@pytest.mark.parametrize("method", ["laplace", "ep"])
@pytest.mark.parametrize("kernel", ["se_ard", "matern52"])
def test_evidence_gradient_other_kernels(method, kernel):
    data = toy_data(12, seed=8)
    model = bz.models.GPC(likelihood="logit", kernel=kernel, log_lengthscale=0.2, log_amplitude=1.2)
    hyp = C.get_hyp(model, data.X) + np.linspace(-0.2, 0.2, len(C.get_hyp(model, data.X)))
    kw = {"tol": 1e-13, "max_sweeps": 500} if method == "ep" else {"tol": 1e-14, "max_iter": 200}
    _, g = T2.log_evidence_and_grad(model, data, hyp, method, **kw)
    e = 1e-5
    fd = [(T2.log_evidence_and_grad(model, data, hyp + e * u, method, **kw)[0]
           - T2.log_evidence_and_grad(model, data, hyp - e * u, method, **kw)[0]) / (2 * e) for u in np.eye(hyp.size)]
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6)


def test_gaussian_fit_predicts_exactly_and_round_trips(tmp_path):
    """Predictions of a Gaussian approximation use Q = N(m, V) itself (4.10), also after save / load."""
    data = toy_data(15, seed=4)
    model = bz.models.GPC(likelihood="logit", log_lengthscale=0.3, log_amplitude=0.8)
    fit = bz.fit(model, data, "laplace", draws=3, chains=1, seed=0, progress=False)
    res, _, _ = LA.fit_laplace(model, data)
    Xs = np.linspace(-2, 2, 5)[:, None] * np.array([[1.0, -0.4]])
    mu, var = C.predict_latent(model, data.X, Xs, res.alpha, res.sW, res.L)
    expected = predictive_probability(mu, var, "logit")
    np.testing.assert_allclose(model.predict(fit, Xs), expected, rtol=1e-8)
    fit.save(tmp_path / "la.nc")
    np.testing.assert_allclose(model.predict(bz.load_fit(tmp_path / "la.nc"), Xs), expected, rtol=1e-8)


def test_optimize_hyperparameters_kl_raises_its_bound():
    data = toy_data(14, seed=9)
    model = bz.models.GPC(likelihood="probit", log_lengthscale=1.5, log_amplitude=-0.5)
    lz0, _ = T2.log_evidence_and_grad(model, data, C.get_hyp(model, data.X), "kl")
    best, res = T2.optimize_hyperparameters(model, data, "kl", return_result=True)
    lz1, g1 = T2.log_evidence_and_grad(best, data, C.get_hyp(best, data.X), "kl")
    assert lz1 > lz0 + 0.1 and np.isclose(-res.fun, lz1)
    assert np.max(np.abs(g1)) < 1e-3
    with pytest.raises(ValueError, match="method must be one of"):
        T2.optimize_hyperparameters(model, data, "vb")


@pytest.mark.parametrize("backend, options, limit", [("laplace", {"max_iter": 1}, "1 Newton iterations"),
                                                     ("ep", {"max_sweeps": 1, "min_sweeps": 1}, "1 sweeps")])
def test_unconverged_fit_says_so(backend, options, limit):
    model = bz.models.GPC(likelihood="logit", log_lengthscale=0.3, log_amplitude=2.0)
    fit = bz.fit(model, toy_data(15, seed=2), backend, draws=2, chains=1, seed=0, progress=False, **options)
    assert fit.info["converged"] is False
    assert fit.info["warnings"] == [f"{backend} did not converge in {limit}"]
    assert fit.info["iterations"] == 1 and fit.timing["tune"] > 0
