"""PMKL model: quadrature, kernels, truncated draws, Gibbs full conditionals against brute force, declarations,
datasets and bad input."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import log_ndtr

import bayeszoo as bz
from bayeszoo.inference.pmkl import common as MK
from bayeszoo.inference.pmkl import gibbs as G
from bayeszoo.inference.pmkl.mrvm import sparsity_quality
from bayeszoo.models.pmkl import check_kernel_matrix, multisource_dataset


def tiny(n=12, C=3, seed=0, sources=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = np.arange(n) % C
    X[:, 0] += 1.5 * y
    meta = {"task": "multiclass"}
    if sources:
        meta["sources"] = {"a": [0, 1], "b": [2, 3]}
    return bz.datasets.Dataset(X=X, y=y.astype(float), name="tiny", meta=meta)


# --------------------------------------------------------------------------------------- quadrature
def brute_class_prob(m, i):
    """P(t = i) = int phi(u) prod_{j != i} Phi(u + m_i - m_j) du by adaptive quadrature."""
    def f(u):
        return stats.norm.pdf(u) * np.prod([stats.norm.cdf(u + m[i] - m[j]) for j in range(len(m)) if j != i])
    return integrate.quad(f, -12, 12, epsabs=1e-13)[0]


def test_quadrature_matches_adaptive_integral_and_monte_carlo():
    rng = np.random.default_rng(0)
    M = rng.normal(scale=2.0, size=(5, 4))
    ours = np.exp(MK.log_class_probs(M))
    exact = np.array([[brute_class_prob(m, i) for i in range(4)] for m in M])
    np.testing.assert_allclose(ours, exact, atol=1e-6)            # 20 nodes
    np.testing.assert_allclose(np.exp(MK.log_class_probs(M, n_nodes=40)), exact, atol=1e-10)
    np.testing.assert_allclose(ours.sum(1), 1.0, atol=1e-6)
    mc = np.exp(MK.log_class_probs_mc(M, 200_000, rng))
    assert np.max(np.abs(mc - ours)) < 5 * np.sqrt(0.25 / 200_000)


def test_class_probability_is_the_probability_of_the_argmax():
    # eq. 3.11 is P(argmax_c y_c = i) for y ~ N(m, I); the scaled form 4.33 the same for y ~ N(m, diag nu^2)
    rng = np.random.default_rng(1)
    m = np.array([0.3, -0.5, 1.1])
    nu = np.array([1.0, 2.0, 0.7])
    y = m + nu * rng.standard_normal((400_000, 3))
    freq = np.bincount(np.argmax(y, 1), minlength=3) / y.shape[0]
    np.testing.assert_allclose(np.exp(MK.log_class_probs(m, nu)), freq, atol=4e-3)
    y1 = m + rng.standard_normal((400_000, 3))
    np.testing.assert_allclose(np.exp(MK.log_class_probs(m)), np.bincount(np.argmax(y1, 1), minlength=3) / 4e5,
                               atol=4e-3)


def test_quadrature_is_stable_for_many_classes_and_large_margins():
    M = np.zeros((1, 30))
    M[0, 0] = 40.0
    lp = MK.log_class_probs(M)
    assert np.all(np.isfinite(lp))
    assert lp[0, 0] == pytest.approx(0.0, abs=1e-12)
    assert lp[0, 1] < -300


# ------------------------------------------------------------------------------------ truncated draws
@pytest.mark.parametrize("a", [-2.0, 0.5, 6.0, 40.0])
def test_truncated_normal_draws_have_the_right_distribution(a):
    rng = np.random.default_rng(2)
    x = MK.truncnorm_above(rng, np.zeros(20_000), np.full(20_000, a))
    assert np.all(x > a)
    assert stats.kstest(x, stats.truncnorm(a, np.inf).cdf).pvalue > 1e-3
    z = MK.truncnorm_below(rng, np.full(20_000, 1.0), np.full(20_000, 1.0 - a))
    assert np.all(z < 1.0 - a)
    assert stats.kstest(z - 1.0, stats.truncnorm(-np.inf, -a).cdf).pvalue > 1e-3


def test_cone_moments_match_rejection_sampling():
    rng = np.random.default_rng(3)
    M = np.array([[0.5, -0.2, 1.0], [2.0, 0.0, -1.0]])
    onehot = np.eye(3, dtype=bool)[[0, 2]]
    Ey, logZ = MK.cone_moments(M, onehot)
    for n in range(2):
        y = M[n] + rng.standard_normal((600_000, 3))
        keep = y[np.argmax(y, 1) == np.argmax(onehot[n])]
        assert np.exp(logZ[n]) == pytest.approx(keep.shape[0] / 600_000, abs=3e-3)
        se = keep.std(0) / np.sqrt(keep.shape[0])
        assert np.all(np.abs(keep.mean(0) - Ey[n]) < 5 * se)


def test_cone_gibbs_respects_the_cone_and_has_the_right_distribution():
    rng = np.random.default_rng(4)
    M = np.array([[0.5, -0.2, 1.0], [2.0, 0.0, -1.0]])
    labels = np.array([0, 2])
    onehot = np.eye(3, dtype=bool)[labels]
    Y = np.where(onehot, 1.0, 0.0)[None].repeat(2000, 0)      # 2000 independent chains
    draws = []
    for sweep in range(60):
        Y = MK.cone_gibbs_sweep(rng, Y, M, onehot)
        assert np.all(np.argmax(Y, -1) == labels)
        if sweep >= 20:
            draws.append(Y)
    D = np.concatenate(draws)
    Ey, _ = MK.cone_moments(M, onehot)
    se = D.std(0) / np.sqrt(2000)       # chains are independent; draws within a chain are correlated
    assert np.all(np.abs(D.mean(0) - Ey) < 5 * se)
    # marginal of y_n,t (class 0 for row 0) against the exact density phi(y - m_t) prod Phi(y - m_j) / Z
    x = D[:, 0, 0]
    grid = np.linspace(-4, 6, 4001)
    dens = stats.norm.pdf(grid - M[0, 0]) * stats.norm.cdf(grid - M[0, 1]) * stats.norm.cdf(grid - M[0, 2])
    cdf = np.cumsum(dens)
    cdf /= cdf[-1]
    assert stats.kstest(x[::40], lambda v: np.interp(v, grid, cdf)).pvalue > 1e-3


# ------------------------------------------------------------------------- Gibbs full conditionals
def test_w_conditional_matches_dense_gaussian_algebra():
    rng = np.random.default_rng(5)
    N, C = 4, 2
    X = rng.normal(size=(N, 2))
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))
    Y = rng.normal(size=(N, C))
    A = rng.gamma(2.0, 1.0, (N, C))
    # brute force: the log joint sum log N(y_c | K w_c, I) + log N(w_c | 0, A_c^-1) is quadratic in w_c with
    # Hessian -(K^T K + A_c) and gradient K^T y_c at 0; its normalised form in covariance (Woodbury) terms
    for c in range(C):
        Ainv = np.diag(1.0 / A[:, c])
        cov = Ainv - Ainv @ K.T @ np.linalg.inv(np.eye(N) + K @ Ainv @ K.T) @ K @ Ainv
        mean = cov @ K.T @ Y[:, c]
        m_ours, Ls = MK.w_posterior(K, K @ K, Y, A)
        np.testing.assert_allclose(m_ours[:, c], mean, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(np.linalg.inv(Ls[c] @ Ls[c].T), cov, rtol=1e-8, atol=1e-12)
    # the batched sampler over chains: sample moments
    ch = 4000
    W = G.w_from(rng, G.collapse(np.repeat(Y[None], ch, 0), np.repeat(K[None], ch, 0), np.repeat(A[None], ch, 0)))
    m_ours, Ls = MK.w_posterior(K, K @ K, Y, A)
    for c in range(C):
        cov = np.linalg.inv(Ls[c] @ Ls[c].T)
        se = np.sqrt(np.diag(cov) / ch)
        assert np.all(np.abs(W[:, :, c].mean(0) - m_ours[:, c]) < 5 * se)
        np.testing.assert_allclose(np.cov(W[:, :, c].T), cov, atol=0.1 * np.max(np.abs(cov)))


def test_alpha_conditional_matches_normalised_brute_force():
    tau, nu, w = 1.3, 0.7, 0.9
    shape, rate = G.alpha_params(np.array(w), tau, nu)
    grid = np.linspace(1e-6, 30, 300_001)
    unnorm = stats.norm.pdf(w, 0, 1 / np.sqrt(grid)) * stats.gamma(tau, scale=1 / nu).pdf(grid)
    unnorm /= np.trapezoid(unnorm, grid)
    np.testing.assert_allclose(stats.gamma(shape, scale=1 / rate).pdf(grid[::1000]), unnorm[::1000], atol=1e-6)


def test_collapsed_likelihood_matches_monte_carlo_integral_over_w():
    rng = np.random.default_rng(6)
    N = 2
    K = np.array([[1.0, 0.4], [0.4, 1.0]])
    A = np.array([[2.0], [0.5]])
    Y = np.array([[0.3], [-0.8]])
    ours = G.log_collapsed_y(Y, K, A)
    w = rng.standard_normal((1_000_000, N)) / np.sqrt(A[:, 0])
    lik = stats.norm.pdf(Y[:, 0] - w @ K.T).prod(1)
    assert ours == pytest.approx(np.log(lik.mean()), abs=5e-3)


def test_binary_beta_conditional_matches_brute_force():
    rng = np.random.default_rng(7)
    N, S = 3, 2
    Ks = np.stack([np.eye(N) * 0.8 + 0.2, np.exp(-np.abs(np.subtract.outer(np.arange(N), np.arange(N))))])
    A = np.ones((N, 1)) * 1.5
    Y = np.array([[1.0], [-0.5], [0.7]])
    # brute force p(beta_0 = 1 | beta_1 = 1, Y): the marginal p(Y | beta) by Monte Carlo over W
    w = rng.standard_normal((400_000, N)) / np.sqrt(A[:, 0])

    def marg(beta):
        K = np.tensordot(beta, Ks, axes=1)
        return stats.norm.pdf(Y[:, 0] - w @ K.T).prod(1).mean()

    p1 = marg(np.array([1.0, 1.0])) / (marg(np.array([1.0, 1.0])) + marg(np.array([0.0, 1.0])))
    draws = []
    for _ in range(4000):
        b = G.binary_beta_gibbs(rng, np.array([[0.0, 1.0]]), Y[None], Ks, A[None])
        draws.append(b[0, 0])
    # beta_1 is then resampled too; look at beta_0 after the first coordinate update only
    assert np.mean(draws) == pytest.approx(p1, abs=0.04)


@pytest.mark.parametrize("step", ["marginal", "conditional"])
def test_convex_beta_mh_leaves_the_brute_force_conditional_invariant(step):
    rng = np.random.default_rng(8)
    N, C = 4, 2
    X = rng.normal(size=(N, 2))
    Ks = np.stack([np.exp(-((X[:, None, 0] - X[None, :, 0]) ** 2)), np.exp(-((X[:, None, 1] - X[None, :, 1]) ** 2))])
    W = rng.normal(size=(N, C))
    Y = rng.normal(size=(N, C)) + 0.5
    A = np.ones((N, C))
    rho = 1.5
    # brute-force conditional of beta_0 on a grid
    grid = np.linspace(1e-4, 1 - 1e-4, 4001)
    logp = []
    for b0 in grid:
        beta = np.array([b0, 1 - b0])
        K = np.tensordot(beta, Ks, axes=1)
        ll = G.log_collapsed_y(Y, K, A) if step == "marginal" else MK.gaussian_loglik(Y, K @ W)
        logp.append(ll + stats.dirichlet([rho, rho]).logpdf(beta))
    p = np.exp(np.array(logp) - max(logp))
    mean_exact = np.trapezoid(grid * p, grid) / np.trapezoid(p, grid)
    chains = 100
    beta = np.tile([0.5, 0.5], (chains, 1))
    kappa = np.full(chains, 10.0)
    KsW = np.einsum("snm,mc->snc", Ks, W)[None].repeat(chains, 0)
    kept = []
    for it in range(250):
        if step == "marginal":
            beta, _, _ = G.convex_beta_mh(rng, beta, kappa, np.repeat(Y[None], chains, 0), rho, Ks=Ks,
                                       A=np.repeat(A[None], chains, 0))
        else:
            beta, _, _ = G.convex_beta_mh(rng, beta, kappa, np.repeat(Y[None], chains, 0), rho, KsW=KsW)
        if it >= 50:
            kept.append(beta[:, 0])
    kept = np.concatenate(kept)
    assert kept.mean() == pytest.approx(mean_exact, abs=0.03)


# ------------------------------------------------------------------------------------------ beta QP
def test_simplex_qp_matches_a_general_solver():
    from scipy.optimize import minimize

    rng = np.random.default_rng(9)
    B = rng.normal(size=(6, 4))
    Omega, f = B.T @ B, rng.normal(size=4) * 3
    ours = MK.simplex_qp(Omega, f)
    res = minimize(lambda b: 0.5 * b @ Omega @ b - b @ f, np.full(4, 0.25), method="SLSQP",
                   bounds=[(0, 1)] * 4, constraints={"type": "eq", "fun": lambda b: b.sum() - 1},
                   options={"ftol": 1e-14})
    assert ours.sum() == pytest.approx(1.0)
    assert np.all(ours >= 0)
    obj = lambda b: 0.5 * b @ Omega @ b - b @ f  # noqa: E731
    assert obj(ours) <= obj(res.x) + 1e-9


def test_beta_qp_terms_reproduce_the_squared_error():
    rng = np.random.default_rng(10)
    Ks = rng.normal(size=(3, 5, 5))
    Ks = Ks + np.swapaxes(Ks, 1, 2)
    W, Y, beta = rng.normal(size=(5, 2)), rng.normal(size=(5, 2)), np.array([0.2, 0.5, 0.3])
    Omega, f = MK.beta_qp_terms(Ks, W, Y)
    M = np.tensordot(beta, Ks, axes=1) @ W
    assert 0.5 * beta @ Omega @ beta - beta @ f == pytest.approx(np.sum(0.5 * M**2 - Y * M))   # C.3


def test_mrvm_sparsity_and_quality_match_dense_inverse():
    rng = np.random.default_rng(11)
    N = 7
    X = rng.normal(size=(N, 2))
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))
    Y = rng.normal(size=(N, 3))
    act = np.array([1, 4, 5])
    alpha = np.array([0.5, 2.0, 1.3])
    S, Q, _, _ = sparsity_quality(K, act, alpha, Y)
    Cm = np.eye(N) + K[act].T @ np.diag(1 / alpha) @ K[act]                     # 5.13 with active rows
    Ci = np.linalg.inv(Cm)
    np.testing.assert_allclose(S, np.einsum("nm,nk,km->m", K, Ci, K), rtol=1e-9)
    np.testing.assert_allclose(Q, K.T @ Ci @ Y, rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------------- declarations
def brute_log_joint(model, data, log_alpha, z, beta):
    Ks = model.train_kernels(data)
    W = z * np.exp(-0.5 * log_alpha)
    K = model.composite(Ks, beta)
    from scipy.special import gammaln
    lp = np.sum(model.tau * np.log(model.nu) - gammaln(model.tau) + model.tau * log_alpha - model.nu * np.exp(log_alpha))
    lp += np.sum(stats.norm.logpdf(z))
    lp += model.log_prior_beta(beta)
    # likelihood eq. 3.11 by adaptive quadrature, point by point
    M = K @ W
    for n, t in enumerate(data.y.astype(int)):
        lp += np.log(brute_class_prob(M[n], t))
    return lp


def _declaration_point():
    data = tiny(n=6)
    model = bz.models.PMKL(rule="convex", rho=2.0, tau=1.5, nu=0.8)
    rng = np.random.default_rng(12)
    la, z = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    beta = np.array([0.3, 0.7])
    return data, model, la, z, beta, brute_log_joint(model, data, la, z, beta)


def test_numpyro_declaration_has_the_brute_force_log_density():
    from numpyro.infer.util import log_density

    data, model, la, z, beta, expected = _declaration_point()
    nlp, _ = log_density(model.numpyro_model(data), (), {}, {"log_alpha": la, "z": z, "beta": beta})
    assert float(nlp) == pytest.approx(expected, rel=1e-8)


@pytest.mark.slow
def test_pymc_declaration_has_the_brute_force_log_density():
    data, model, la, z, beta, expected = _declaration_point()
    pm_model = model.pymc_model(data)
    transform = pm_model.rvs_to_transforms[pm_model["beta"]]
    point = {"log_alpha": la, "z": z, "beta_simplex__": transform.forward(beta).eval()}
    logp = pm_model.compile_logp(jacobian=False)(point)      # the density of beta itself, no Jacobian
    assert float(logp) == pytest.approx(expected, rel=1e-8)


def test_binary_rule_is_not_declared_for_gradient_backends():
    with pytest.raises(ValueError, match="discrete"):
        bz.models.PMKL(rule="binary").numpyro_model(tiny())


# -------------------------------------------------------------------------------------- kernels
def test_combination_rules():
    rng = np.random.default_rng(13)
    Ks = np.exp(-rng.random((3, 4, 4)))
    beta = np.array([0.2, 0.3, 0.5])
    np.testing.assert_allclose(MK.combine(Ks, beta, "convex"), 0.2 * Ks[0] + 0.3 * Ks[1] + 0.5 * Ks[2])
    np.testing.assert_allclose(MK.combine(Ks, beta, "product"), Ks[0] * Ks[1] * Ks[2])
    np.testing.assert_allclose(MK.combine(Ks, beta, "wproduct"), Ks[0] ** 0.2 * Ks[1] ** 0.3 * Ks[2] ** 0.5)
    # the per-draw latent means never form the composite kernel for linear rules, but agree with it
    W = rng.normal(size=(5, 4, 2))
    B = rng.dirichlet(np.ones(3), size=5)
    ref = np.stack([MK.combine(Ks, B[i], "convex").T @ W[i] for i in range(5)])
    np.testing.assert_allclose(MK.latent_means(Ks, W, B, "convex"), ref)
    np.testing.assert_allclose(MK.latent_means(Ks, W, B, "wproduct"),
                               np.stack([MK.combine(Ks, B[i], "wproduct").T @ W[i] for i in range(5)]))


def test_rbf_source_uses_ard_form_with_default_theta_one_over_d():
    src = MK.Source("s", (0, 2), "rbf")
    X = np.array([[0.0, 5.0, 1.0], [1.0, -3.0, 3.0]])
    K = src.gram(X, X)
    assert K[0, 1] == pytest.approx(np.exp(-(1.0 + 4.0) / 2))


# ------------------------------------------------------------------------------- datasets, bad input
def test_datasets_have_the_thesis_shapes():
    for name, (n, d, C) in {"iris": (150, 4, 3), "wine": (178, 13, 3), "crabs4": (200, 5, 4)}.items():
        ds = bz.datasets.load(name)
        assert (ds.n, ds.d, int(ds.y.max()) + 1) == (n, d, C)
        assert np.all(np.bincount(ds.y.astype(int)) > 0)
    mf = bz.datasets.load("mfeat_standin")
    assert (mf.n, mf.X_test.shape[0]) == (200, 200)
    assert set(mf.meta["sources"]) == {"pix", "fou", "kl", "zer"}
    assert "stand_in_for" in mf.meta
    neal = bz.datasets.load("neal3")
    assert (neal.n, neal.X_test.shape[0], neal.d) == (400, 600, 4)
    from bayeszoo.datasets.pmkl_data import neal3_labels
    assert neal3_labels(np.array([[0.4, 0.5], [0.0, 0.0], [1.0, 1.0]])).tolist() == [0, 1, 2]


def test_bad_input_raises_before_sampling():
    ok = tiny()
    model = bz.models.PMKL()
    missing = bz.datasets.Dataset(X=ok.X, y=np.where(ok.y == 1, 2, ok.y), meta={"task": "multiclass"})
    with pytest.raises(ValueError, match="no members"):
        bz.fit(model, missing, "vb")
    with pytest.raises(ValueError, match="integer class labels"):
        bz.fit(model, bz.datasets.Dataset(X=ok.X, y=ok.y + 0.5), "vb")
    with pytest.raises(ValueError, match="integer class labels"):
        bz.fit(model, bz.datasets.Dataset(X=ok.X, y=ok.y - 1), "gibbs")
    with pytest.raises(ValueError, match="different numbers of rows"):
        multisource_dataset({"a": np.ones((5, 2)), "b": np.ones((4, 3))}, y=np.arange(5) % 2)
    with pytest.raises(ValueError, match="NaN"):
        multisource_dataset({"a": np.full((4, 2), np.nan)}, y=np.arange(4) % 2)
    with pytest.raises(ValueError, match="not symmetric"):
        check_kernel_matrix(np.array([[1.0, 0.5], [0.2, 1.0]]))
    with pytest.raises(ValueError, match="positive semi-definite"):
        check_kernel_matrix(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="rule"):
        bz.models.PMKL(rule="sum")
    with pytest.raises(ValueError, match="columns out of range"):
        bz.fit(bz.models.PMKL(sources=({"name": "a", "columns": [0, 9]},)), ok, "vb")
    with pytest.raises(ValueError, match="wproduct"):
        bz.fit(bz.models.PMKL(rule="wproduct", kernel="poly"), ok, "gibbs")
    with pytest.raises(ValueError, match="fix_beta"):
        bz.fit(model, ok, "gibbs", fix_beta=[1.0])
    with pytest.raises(ValueError, match="tau > 1/2"):
        bz.fit(bz.models.PMKL(tau=0.5), ok, "map")
    with pytest.raises(ValueError, match="chapter 5"):
        bz.fit(bz.models.PMKL(rule="product"), ok, "em")


def test_multisource_dataset_and_explicit_sources():
    rng = np.random.default_rng(14)
    ds = multisource_dataset({"u": rng.normal(size=(9, 2)), "v": rng.normal(size=(9, 3))}, y=np.arange(9) % 3)
    assert ds.meta["sources"] == {"u": [0, 1], "v": [2, 3, 4]}
    model = bz.models.PMKL(sources=({"name": "lin", "columns": [0, 1], "kernel": "linear"},
                                    {"name": "rbf", "columns": [0, 1], "theta": 0.3}))
    names = [s.name for s in model.source_list(ds)]
    assert names == ["lin", "rbf"]
    rebuilt = bz.models.from_spec(model.spec())
    assert rebuilt.source_list(ds) == model.source_list(ds)


def test_precomputed_source_matches_the_same_kernel_computed_from_features():
    ds = tiny(n=12, sources=False)
    src = MK.Source("r", (0, 1), "rbf", theta=(0.4, 0.4))
    X_all = np.vstack([ds.X, ds.X[:3] + 0.1])
    G = src.gram(X_all, X_all)
    X_ids = np.column_stack([ds.X, np.arange(12)])
    with_ids = bz.datasets.Dataset(X=X_ids, y=ds.y, X_test=np.column_stack([ds.X[:3] + 0.1, 12 + np.arange(3)]),
                                   y_test=ds.y[:3], meta={"task": "multiclass"})
    pre = bz.models.PMKL(sources=({"name": "r", "columns": [4], "kernel": "precomputed", "gram": G},))
    feat = bz.models.PMKL(sources=({"name": "r", "columns": [0, 1], "theta": 0.4},))
    np.testing.assert_allclose(pre.train_kernels(with_ids), feat.train_kernels(with_ids))
    a = bz.fit(pre, with_ids, "vb", draws=50, chains=1, seed=0, progress=False)
    b = bz.fit(feat, with_ids, "vb", draws=50, chains=1, seed=0, progress=False)
    np.testing.assert_allclose(pre.predict(a, with_ids.X_test), feat.predict(b, with_ids.X_test), atol=1e-10)
    rebuilt = bz.models.from_spec(pre.spec())
    np.testing.assert_allclose(rebuilt.train_kernels(with_ids), pre.train_kernels(with_ids))


def test_bad_precomputed_kernels_are_rejected():
    G = np.eye(4)
    with pytest.raises(ValueError, match="not symmetric"):
        bz.models.PMKL(sources=({"name": "g", "columns": [0], "kernel": "precomputed",
                                 "gram": np.array([[1.0, 0.3], [0.0, 1.0]])},))
    with pytest.raises(ValueError, match="positive semi-definite"):
        bz.models.PMKL(sources=({"name": "g", "columns": [0], "kernel": "precomputed",
                                 "gram": np.array([[1.0, 3.0], [3.0, 1.0]])},))
    with pytest.raises(ValueError, match="NaN"):
        bz.models.PMKL(sources=({"name": "g", "columns": [0], "kernel": "precomputed",
                                 "gram": np.full((2, 2), np.nan)},))
    model = bz.models.PMKL(sources=({"name": "g", "columns": [0], "kernel": "precomputed", "gram": G},))
    data = bz.datasets.Dataset(X=np.array([[0.0], [1.0], [2.0], [7.0]]), y=np.array([0.0, 1.0, 0.0, 1.0]))
    with pytest.raises(ValueError, match="object indices"):
        bz.fit(model, data, "vb")


# ------------------------------------------------------------------------------ the log likelihood in blocks
def _unblocked_log_likelihood(model, fit, data):
    """The pointwise log likelihood all at once: every draw's per-source means, then the quadrature over every
    (draw, object) row in one array, as it was computed before it went in blocks."""
    from bayeszoo.numerics import probit
    from bayeszoo.numerics.pmkl_kernels import base_grams

    sources, X = model._fit_sources(fit)
    W, beta = model._draws(fit, "W", 10**9), model._draws(fit, "beta", 10**9)
    M = np.einsum("ls,lsmc->lmc", beta, np.einsum("snm,lnc->lsmc", base_grams(sources, X, data.X), W))
    lp = probit._log_class_probs(M.reshape(-1, M.shape[-1]), None, probit.GH_NODES).reshape(M.shape)
    return np.take_along_axis(lp, data.y.astype(int)[None, :, None], axis=2)[..., 0]


@pytest.mark.parametrize("chunk_bytes", [10**9, 500])
def test_log_likelihood_in_blocks_equals_the_computation_all_at_once(monkeypatch, chunk_bytes):
    """500 bytes a chunk: blocks of one draw, quadrature chunks of one row; every value as it was, and the true
    class's quadrature equal to that class's column of every class's."""
    from bayeszoo.numerics import probit

    data = tiny(n=15, C=3)
    model = bz.models.PMKL(rule="convex")
    with bz.results.without_log_likelihood():
        fit = bz.fit(model, data, "em", draws=40, chains=2, seed=1, progress=False, max_iter=5)
    expected = _unblocked_log_likelihood(model, fit, data)
    monkeypatch.setattr(probit, "CHUNK_BYTES", chunk_bytes)
    if chunk_bytes < 10**6:
        assert model._log_likelihood_block(data) == 1 and probit.chunk_rows(20 * 3) == 1
    got = model.log_likelihood(fit, data)
    assert got.shape == (80, 15) and np.all(got < 0)
    # the true class's quadrature alone sums its 20 nodes in another order: log P near 0 differs by rounding
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.exp(got), np.exp(expected), rtol=1e-12, atol=0)


def test_log_likelihood_peak_is_bounded_by_its_declared_estimate():
    """1,500 draws on 100 objects of 3 classes: all at once the quadrature held 3 arrays of 1,500 x 100 x 20 x 3 x 3
    values (618 MiB); in blocks the step holds its result and one block, as ``log_likelihood_memory`` counts."""
    import tracemalloc

    from bayeszoo import memory_guard as resources

    data = bz.datasets.load("mkl_sources", n=100, n_test=10, seed=0)
    model = bz.models.PMKL(rule="mean")
    with bz.results.without_log_likelihood():
        fit = bz.fit(model, data, "em", draws=1500, chains=1, seed=0, progress=False, max_iter=3)
    declared = sum(model.log_likelihood_memory(data, 1500).values())
    all_at_once = 3 * 8 * 1500 * 100 * 20 * 3 * 3
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        values = model.log_likelihood(fit, data)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert values.shape == (1500, 100)
    # the estimate counts the base kernels as the backend's; the step's own arrays are within it
    kernels = 8 * 100 * 100 * len(model.source_list(data))
    assert peak <= 1.2 * declared + kernels, (resources.size_text(peak), resources.size_text(declared))
    assert peak < all_at_once / 20
