"""PMKL with inferred kernel parameters Theta (eq. 3.21) and Dirichlet parameters rho (eq. 3.16): the MH
sub-steps against brute-force conditionals, the VB importance weights against a direct computation, the
declarations' density, irrelevant inputs switched off (thesis Fig. 3.8), predictions per draw, bad input."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

import bayeszoo as bz
from bayeszoo.inference.pmkl import common as MK
from bayeszoo.inference.pmkl import gibbs as G
from bayeszoo.inference.pmkl.vb import normalised, theta_log_weights, vb_fit_state


def ard_data(n=60, n_test=100, seed=0):
    """Four N(0, 1) inputs; the class depends on x0 and x1 only (x2, x3 are irrelevant, as in Fig. 3.8)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_test, 4))
    y = np.minimum(np.where(X[:, 0] > 0.0, 0, 1) + 2 * (X[:, 1] > 0.5), 2).astype(float)
    return bz.datasets.Dataset(X=X[:n], y=y[:n], X_test=X[n:], y_test=y[n:], name="ard",
                               meta={"task": "multiclass"})


def grid_moments(grid, logp):
    p = np.exp(logp - logp.max())
    p /= np.trapezoid(p, grid)
    mean = np.trapezoid(grid * p, grid)
    sd = np.sqrt(np.trapezoid((grid - mean) ** 2 * p, grid))
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (p[1:] + p[:-1]) * np.diff(grid))])
    return mean, sd, cdf / cdf[-1]


# ------------------------------------------------------------------------------------- Gibbs sub-steps
def test_collapsed_state_matches_the_direct_marginal_and_the_w_conditional():
    # Woodbury / determinant-lemma form against log N(y_c | 0, I + K A_c^-1 K) written out, and v = L^-1 K y_c
    rng = np.random.default_rng(3)
    ch, N, C = 3, 6, 3
    X = rng.normal(size=(ch, N, 2))
    K = np.exp(-((X[:, :, None] - X[:, None]) ** 2).sum(-1))
    Y, A = rng.normal(size=(ch, N, C)), rng.gamma(1.0, 1.0, (ch, N, C))
    st = G.collapse(Y, K, A)
    for k in range(ch):
        direct = sum(stats.multivariate_normal(np.zeros(N), np.eye(N) + K[k] @ np.diag(1 / A[k, :, c]) @ K[k])
                     .logpdf(Y[k, :, c]) for c in range(C))
        assert st.ll[k] == pytest.approx(direct, rel=1e-10)
        assert st.ll[k] == pytest.approx(G.log_collapsed_y(Y[k], K[k], A[k]), rel=1e-10)
        for c in range(C):
            mean = np.linalg.solve(K[k] @ K[k] + np.diag(A[k, :, c]), K[k] @ Y[k, :, c])      # 3.22
            np.testing.assert_allclose(np.linalg.solve(st.L[k, c].T, st.v[k, c]), mean, rtol=1e-9)


def test_theta_mh_leaves_the_brute_force_conditional_invariant():
    # one rbf source on one input, W integrated out: p(theta | Y, A) by quadrature on a grid against the
    # final states of many independent chains that run only the theta sub-step
    rng = np.random.default_rng(0)
    N, C, omega, phi = 5, 2, 2.0, 1.5
    X = rng.normal(size=(N, 1))
    Y = rng.normal(size=(N, C)) + np.array([1.0, -1.0]) * np.sign(X)
    A = rng.gamma(2.0, 1.0, (N, C))
    grid = np.linspace(1e-4, 12.0, 3001)
    K = np.exp(-grid[:, None, None] * (X - X.T)[None] ** 2)
    ll = G.collapsed_loglik(np.repeat(Y[None], len(grid), 0), K, np.repeat(A[None], len(grid), 0))
    mean, sd, cdf = grid_moments(grid, ll + stats.gamma(omega, scale=1 / phi).logpdf(grid))

    chains = 1500
    theta = np.full((chains, 1), 1.0)
    Ks = np.repeat(np.exp(-(X - X.T) ** 2)[None, None], chains, 0)
    steps = np.full((chains, 1), 0.9)
    Yc, Ac, beta = np.repeat(Y[None], chains, 0), np.repeat(A[None], chains, 0), np.ones((chains, 1))
    acc = []
    for _ in range(120):
        theta, Ks, a, _ = G.theta_mh(rng, theta, steps, Yc, Ks, beta, Ac, "mean", [(0, slice(0, 1), X)], omega, phi)
        acc.append(a.mean())
    final = theta[:, 0]
    # the kernels carried along match the accepted theta
    np.testing.assert_allclose(Ks[:, 0], np.exp(-final[:, None, None] * (X - X.T)[None] ** 2), rtol=1e-12)
    assert 0.1 < np.mean(acc) < 0.9
    se = sd / np.sqrt(chains)
    assert abs(final.mean() - mean) < 4 * se
    assert final.std() == pytest.approx(sd, rel=0.1)
    assert stats.kstest(final, lambda x: np.interp(x, grid, cdf)).pvalue > 1e-3


def test_collapsed_y_sweep_leaves_the_cone_truncated_marginal_invariant():
    # with W integrated out, Y has columns N(0, I + K A_c^-1 K) truncated to the label cones; reference by
    # rejection sampling, against the final states of many chains that run only the collapsed Y sweep
    rng = np.random.default_rng(4)
    N, C = 3, 3
    X = rng.normal(size=(N, 2))
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))
    A = rng.gamma(2.0, 1.0, (N, C))
    onehot = np.eye(C, dtype=bool)[[0, 1, 2]]
    Om = [np.eye(N) + K @ np.diag(1 / A[:, c]) @ K for c in range(C)]
    Z = np.stack([rng.multivariate_normal(np.zeros(N), Om[c], size=400_000) for c in range(C)], -1)   # (S, N, C)
    keep = np.all(np.argmax(Z, -1) == np.arange(N), -1)
    ref = Z[keep]
    chains = 3000
    Y = np.repeat(np.where(onehot, 1.0, 0.0)[None], chains, 0)
    Ac, Kc = np.repeat(A[None], chains, 0), np.repeat(K[None], chains, 0)
    for _ in range(25):
        Y = G.collapsed_y_sweep(rng, Y, G.collapse(Y, Kc, Ac), onehot)
    assert np.all(np.argmax(Y, -1) == np.arange(N))
    se = np.sqrt(ref.var(0) / chains + ref.var(0) / len(ref))
    assert np.all(np.abs(Y.mean(0) - ref.mean(0)) < 4.5 * se)
    np.testing.assert_allclose(Y.std(0), ref.std(0), rtol=0.1)


def test_collapsed_y_sweep_of_one_chain_equals_the_batched_sweep():
    # the sampler's kernel runs one chain at a time, through the sweep's scalar path: with the same uniforms it
    # gives each chain of the batched sweep
    class Uniforms:
        def __init__(self, u):
            self.u = u

        def random(self, shape):
            assert shape == self.u.shape
            return self.u

    rng = np.random.default_rng(9)
    N, C, chains = 7, 3, 2
    X = rng.normal(size=(N, 2))
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))
    A = rng.gamma(2.0, 1.0, (chains, N, C))
    onehot = np.eye(C, dtype=bool)[np.arange(N) % C]
    Y = np.where(onehot, 1.0, 0.0) + 0.1 * rng.normal(size=(chains, N, C))
    Y = np.where(onehot, Y.max(-1, keepdims=True) + 0.5, Y)
    Kc = np.repeat(K[None], chains, 0)
    u = rng.random((2, N, chains, C))
    both = G.collapsed_y_sweep(Uniforms(u), Y, G.collapse(Y, Kc, A), onehot)
    for k in range(chains):
        one = G.collapsed_y_sweep(Uniforms(u[:, :, k:k + 1]), Y[k:k + 1], G.collapse(Y[k:k + 1], Kc[:1], A[k:k + 1]),
                                  onehot)
        np.testing.assert_allclose(one[0], both[k], rtol=1e-10, atol=1e-12)
    assert np.all(np.argmax(both, -1) == np.arange(N) % C)


def test_rho_mh_leaves_the_brute_force_conditional_invariant():
    # p(rho | beta) propto Dir(beta | rho) prod_s Gamma(rho_s | lam, mu) (A.2), two sources, 2-D quadrature
    rng = np.random.default_rng(1)
    beta, lam, mu = np.array([0.25, 0.75]), 2.0, 1.0
    g = np.linspace(1e-3, 15.0, 1201)
    R0, R1 = np.meshgrid(g, g, indexing="ij")
    logp = (gammaln(R0 + R1) - gammaln(R0) - gammaln(R1) + (R0 - 1) * np.log(beta[0]) + (R1 - 1) * np.log(beta[1])
            + stats.gamma(lam, scale=1 / mu).logpdf(R0) + stats.gamma(lam, scale=1 / mu).logpdf(R1))
    marg0 = np.log(np.trapezoid(np.exp(logp - logp.max()), g, axis=1))
    mean, sd, cdf = grid_moments(g, marg0)

    chains = 3000
    rho = np.ones((chains, 2))
    step = np.full(chains, 0.7)
    for _ in range(150):
        rho, _ = G.rho_mh(rng, rho, step, np.tile(beta, (chains, 1)), lam, mu)
    assert abs(rho[:, 0].mean() - mean) < 4 * sd / np.sqrt(chains)
    assert rho[:, 0].std() == pytest.approx(sd, rel=0.1)
    assert stats.kstest(rho[:, 0], lambda x: np.interp(x, g, cdf)).pvalue > 1e-3


# ------------------------------------------------------------------------------------- VB weights
@pytest.mark.parametrize("rule", ["convex", "wproduct"])
def test_vb_theta_weights_equal_a_direct_computation(rule):
    rng = np.random.default_rng(2)
    N, C = 7, 3
    data = bz.datasets.Dataset(X=rng.normal(size=(N, 3)), y=(np.arange(N) % C).astype(float),
                               meta={"task": "multiclass", "sources": {"a": [0, 1], "b": [2]}})
    model = bz.models.PMKL(rule=rule, kernel_params="infer")
    sources = model.source_list(data)
    theta = np.array([0.4, 1.3, 0.8])
    Ks = model.train_kernels(data, theta)
    beta = np.array([0.35, 0.65]) if rule == "convex" else np.array([0.7, 1.4])
    W, Y = rng.normal(size=(N, C)), rng.normal(size=(N, C))
    pool = rng.gamma(1.0, 1.0, (9, 2))
    ours = theta_log_weights(model, pool, data.X[:, [0, 1]], 0, Ks, beta, W, Y)
    direct = []
    for th in pool:
        K = model.composite(model.train_kernels(data, np.concatenate([th, theta[2:]])), beta)
        direct.append(np.sum(stats.norm.logpdf(Y, K @ W, 1.0)))          # prod_{n,c} N(y_nc | w_c^T k_n, 1)
    direct = np.array(direct)
    # equal up to the constant that cancels in the normalised weights (4.25)
    np.testing.assert_allclose(ours - ours[0], direct - direct[0], rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(normalised(ours), np.exp(direct - np.logaddexp.reduce(direct)), rtol=1e-9)
    assert len(sources) == 2


def test_local_theta_proposal_ratio_is_prior_over_the_mixture_density():
    from bayeszoo.inference.pmkl.vb import LOCAL_LOG_SD, theta_proposal_draws

    rng = np.random.default_rng(7)
    center, omega, phi = np.array([0.3, 2.0]), 1.5, 0.8
    draws, log_ratio = theta_proposal_draws(rng, 400, center, omega, phi, "local")
    prior = stats.gamma(omega, scale=1 / phi).pdf(draws).prod(1)
    lognormal = stats.lognorm(LOCAL_LOG_SD, scale=center).pdf(draws).prod(1)
    np.testing.assert_allclose(np.exp(log_ratio), prior / (0.5 * prior + 0.5 * lognormal), rtol=1e-10)
    assert np.all(log_ratio <= np.log(2.0) + 1e-12)                  # defensive mixture: bounded weights
    # about half the draws come from the local component: near the centre on the log scale
    near = np.all(np.abs(np.log(draws) - np.log(center)) < 4 * LOCAL_LOG_SD, axis=1)
    assert 0.45 < near.mean() < 0.85
    d, r = theta_proposal_draws(rng, 50, center, omega, phi, "prior")
    assert np.all(r == 0.0) and d.shape == (50, 2)


def test_vb_rho_weights_and_means_equal_a_direct_computation():
    data = bz.datasets.load("mkl_sources", n=24, n_test=10, seed=1)
    model = bz.models.PMKL(infer_rho=True, lam=2.0, mu=1.5)
    st = vb_fit_state(model, data, max_iter=6, is_samples=50, rng=np.random.default_rng(0))
    beta, pool = st.beta, st.rho_pool
    assert pool.shape == (6 * 50, 3)                                      # the pool accumulates (B.9)
    # 4.28: W(rho^i) propto Dir(beta~ | rho^i), the Dirichlet written out
    logd = gammaln(pool.sum(1)) - gammaln(pool).sum(1) + ((pool - 1) * np.log(beta)).sum(1)
    w = np.exp(logd - logd.max())
    w /= w.sum()
    np.testing.assert_allclose(st.rho, w @ pool, rtol=1e-10)
    fit = bz.fit(model, data, "vb", draws=50, chains=2, seed=0, progress=False, max_iter=6, is_samples=50)
    assert fit.info["rho_is_ess"] == pytest.approx(1.0 / np.sum(w**2), rel=1e-9)
    assert fit.posterior.rho.shape == (2, 50, 3) and np.all(fit.posterior.rho.values > 0)


# ------------------------------------------------------------------------ irrelevant inputs (Fig. 3.8)
@pytest.fixture(scope="module")
def ard():
    return ard_data()


@pytest.mark.parametrize("backend, sizes", [("gibbs", dict(draws=300, tune=200, chains=2)),
                                            ("vb", dict(draws=200, chains=1)),
                                            ("vb", dict(draws=200, chains=1, theta_proposal="local"))])
def test_irrelevant_inputs_get_small_theta(ard, backend, sizes):
    model = bz.models.PMKL(kernel_params="infer")
    fit = bz.fit(model, ard, backend, seed=0, progress=False, **sizes)
    theta = fit.posterior.theta.mean(("chain", "draw")).values
    assert list(fit.posterior.theta.coords["kernel_param"].values) == ["all:0", "all:1", "all:2", "all:3"]
    assert max(theta[2:]) < 0.25 * min(theta[:2])
    assert max(theta[2:]) < 0.2
    assert model.score(fit, ard)["error_rate"] < 0.12
    if backend == "gibbs":
        assert 0.15 < fit.info["theta_acceptance"]["all"] < 0.5
        assert "accept_theta" in fit.idata.sample_stats
    else:
        assert fit.info["theta_is_ess"]["all"] >= 1.0


def test_gibbs_with_theta_and_rho_is_reproducible_and_predicts_per_draw():
    data = bz.datasets.load("mkl_sources", n=20, n_test=15, seed=2)
    model = bz.models.PMKL(kernel_params="infer", infer_rho=True)
    a = bz.fit(model, data, "gibbs", draws=20, tune=10, chains=2, seed=5, progress=False)
    b = bz.fit(model, data, "gibbs", draws=20, tune=10, chains=2, seed=5, progress=False)
    np.testing.assert_array_equal(a.posterior.theta.values, b.posterior.theta.values)
    np.testing.assert_array_equal(a.posterior.rho.values, b.posterior.rho.values)
    assert set(a.posterior.data_vars) == {"W", "log_alpha", "beta", "theta", "rho"}
    assert a.posterior.theta.shape == (2, 20, 6) and np.all(a.posterior.theta.values > 0)
    # the test kernel of each draw is built from that draw's theta and beta (3.26)
    M = model.latent_draws(a, data.X_test, max_draws=40)
    th = a.posterior.theta.values.reshape(40, -1)
    be = a.posterior.beta.values.reshape(40, -1)
    W = a.posterior.W.values.reshape(40, data.n, 3)
    for l in (0, 17, 39):
        Kt = model.composite(MK.base_grams(model.source_list(data), data.X, data.X_test, th[l]), be[l])
        np.testing.assert_allclose(M[l], Kt.T @ W[l], rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------------- declarations
def brute_log_joint(model, data, log_alpha, z, beta, theta, rho):
    Ks = model.train_kernels(data, theta)
    W = z * np.exp(-0.5 * log_alpha)
    lp = np.sum(model.tau * np.log(model.nu) - gammaln(model.tau) + model.tau * log_alpha
                - model.nu * np.exp(log_alpha))
    lp += np.sum(stats.norm.logpdf(z)) + model.log_prior_beta(beta, rho=rho)
    lp += model.log_prior_theta(theta) + model.log_prior_rho(rho)
    lp += model.log_likelihood_at(W, model.composite(Ks, beta), data.y)
    return lp


def _declaration_point():
    rng = np.random.default_rng(12)
    data = bz.datasets.Dataset(X=rng.normal(size=(6, 3)), y=(np.arange(6) % 3).astype(float),
                               meta={"task": "multiclass", "sources": {"a": [0, 1], "b": [2]}})
    model = bz.models.PMKL(kernel_params="infer", infer_rho=True, omega=1.5, phi=0.7, lam=2.0, mu=1.2)
    point = {"log_alpha": rng.normal(size=(6, 3)), "z": rng.normal(size=(6, 3)), "beta": np.array([0.3, 0.7]),
             "theta": np.array([0.5, 1.7, 0.9]), "rho": np.array([1.3, 0.6])}
    return data, model, point, brute_log_joint(model, data, **point)


def test_numpyro_declaration_with_theta_and_rho_has_the_brute_force_log_density():
    from numpyro.infer.util import log_density

    data, model, point, expected = _declaration_point()
    nlp, _ = log_density(model.numpyro_model(data), (), {}, point)
    assert float(nlp) == pytest.approx(expected, rel=1e-8)


@pytest.mark.slow
def test_pymc_declaration_with_theta_and_rho_has_the_brute_force_log_density():
    data, model, point, expected = _declaration_point()
    pm_model = model.pymc_model(data)
    values = {"log_alpha": point["log_alpha"], "z": point["z"]}
    for name in ("beta", "theta", "rho"):
        rv = pm_model[name]
        tr = pm_model.rvs_to_transforms[rv]
        values[pm_model.rvs_to_values[rv].name] = tr.forward(point[name]).eval()
    logp = pm_model.compile_logp(jacobian=False)(values)
    assert float(logp) == pytest.approx(expected, rel=1e-8)


@pytest.mark.slow
def test_gibbs_vb_and_numpyro_agree_on_theta(ard):
    data = ard_data(n=40, seed=3)
    model = bz.models.PMKL(kernel_params="infer")
    fits = {b: bz.fit(model, data, b, draws=1000, tune=500, chains=2, seed=0, progress=False)
            for b in ("numpyro", "gibbs")}
    tn = fits["numpyro"].posterior.theta
    tg = fits["gibbs"].posterior.theta
    # posterior means within 3 Monte-Carlo standard errors (ESS-based) plus 10 % of the posterior sd
    import arviz as az
    for d in range(4):
        mn, mg = float(tn[..., d].mean()), float(tg[..., d].mean())
        sdn = float(tn[..., d].std())
        ess = min(float(az.ess(tn[..., d].values)), float(az.ess(tg[..., d].values)))
        assert abs(mn - mg) < 3 * sdn * np.sqrt(2 / ess) + 0.1 * sdn, (d, mn, mg, ess)


# ------------------------------------------------------------------------------------------ bad input
def test_bad_theta_and_rho_options_raise():
    gram = np.eye(4) * 0.5 + 0.5
    with pytest.raises(ValueError, match="precomputed gram"):
        m = bz.models.PMKL(kernel_params="infer", sources=({"name": "g", "columns": [0], "kernel": "precomputed",
                                                            "gram": gram},))
        bz.fit(m, bz.datasets.Dataset(X=np.arange(4.0)[:, None], y=np.array([0, 1, 0, 1.0]),
                                      meta={"task": "multiclass"}), "gibbs")
    with pytest.raises(ValueError, match="at least one rbf"):
        bz.fit(bz.models.PMKL(kernel_params="infer", kernel="poly"), ard_data(n=12), "vb")
    for name in ("omega", "phi"):
        for bad in (0.0, -1.0, np.nan):
            with pytest.raises(ValueError, match=name):
                bz.models.PMKL(kernel_params="infer", **{name: bad})
    with pytest.raises(ValueError, match="theta_steps"):
        bz.fit(bz.models.PMKL(kernel_params="infer"), ard_data(n=12), "gibbs", theta_steps=0)
    with pytest.raises(ValueError, match="theta_proposal"):
        bz.fit(bz.models.PMKL(kernel_params="infer"), ard_data(n=12), "vb", theta_proposal="posterior")
    with pytest.raises(ValueError, match="kernel_params"):
        bz.models.PMKL(kernel_params="learn")
    with pytest.raises(ValueError, match="convex rule"):
        bz.models.PMKL(rule="mean", infer_rho=True)
    with pytest.raises(ValueError, match="infer_rho"):
        bz.models.PMKL(infer_rho="yes")
    # the point estimators condition on Theta and rho (ch. 5): they do not apply
    model = bz.models.PMKL(kernel_params="infer")
    assert "em" not in bz.backends(model) and "gibbs" in bz.backends(model) and "vb" in bz.backends(model)
    with pytest.raises(ValueError, match="unknown backend 'mrvm2'"):
        bz.fit(model, ard_data(n=12), "mrvm2")


def test_compare_with_theta_runs_through_the_harness(tmp_path):
    from bayeszoo.diagnostics.plots import family_picture

    data = ard_data(n=30, n_test=40, seed=4)
    model = bz.models.PMKL(kernel_params="infer")
    cmp = bz.compare(model, data, backends=["gibbs", "vb"], reference="gibbs", draws=100, tune=50, chains=2,
                     seed=0, progress=False)
    table = cmp.table()
    assert (table.error == "").all() and np.all(np.isfinite(table.error_rate))
    fig = family_picture(cmp)
    assert len(fig.axes) == 3 and "theta" in fig.axes[1].get_title()
    cmp.report(tmp_path / "report.html")
    assert (tmp_path / "report.html").stat().st_size > 10_000


def test_vb_beta_weights_by_the_quadratic_form_equal_the_direct_sum():
    from bayeszoo.inference.pmkl.vb import is_log_weights

    rng = np.random.default_rng(6)
    N, C, S = 6, 3, 3
    Ks = np.exp(-rng.random((S, N, N)))
    Ks = 0.5 * (Ks + np.swapaxes(Ks, 1, 2))
    W, Y = rng.normal(size=(N, C)), rng.normal(size=(N, C))
    pool = rng.dirichlet(np.ones(S), size=20)
    direct = [-0.5 * np.sum((Y - np.tensordot(b, Ks, axes=1) @ W) ** 2) for b in pool]    # 4.27, log
    np.testing.assert_allclose(is_log_weights(bz.models.PMKL(), pool, Ks, W, Y), direct, rtol=1e-10)
