"""RVM declarations, prediction and scoring: PyMC and NumPyro densities agree; metrics on constructed draws."""
import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.results import build_fit
from bayeszoo.models.rvm import LOG_ALPHA_PRUNED, RVM
from bayeszoo.numerics.special import log_gamma_logpdf

from tests.helpers.declarations import declared_log_densities


@pytest.fixture(scope="module")
def sinc():
    return bz.datasets.load("sinc", n=20, n_test=50, seed=3)


@pytest.fixture(scope="module")
def mixture():
    return bz.datasets.load("gaussian_mixture", n_per_class=10, n_test_per_class=30, seed=1)


def _exact_logp(model, data, point):
    """The joint log density written out by hand (all constants), in the sampled coordinates."""
    Phi = model.design(data.X, data.X)
    u, z = point["log_alpha"], point["z"]
    w = z * np.exp(-0.5 * u)
    f = Phi @ w
    lp = np.sum(log_gamma_logpdf(u, model.a, model.b)) - 0.5 * np.sum(z**2) - 0.5 * z.size * np.log(2 * np.pi)
    if model.is_classifier:
        from scipy.special import expit, log_ndtr
        if model.link == "logit":
            lp1, lp0 = np.log(expit(f)), np.log(expit(-f))
        else:
            lp1, lp0 = log_ndtr(f), log_ndtr(-f)
        return lp + np.sum(np.where(data.y == 1, lp1, lp0))
    v = point["log_beta"]
    lp += log_gamma_logpdf(v, model.c, model.d)
    return lp + np.sum(0.5 * (v - np.log(2 * np.pi)) - 0.5 * np.exp(v) * (data.y - f) ** 2)


@pytest.mark.parametrize("task, link", [("regression", "logit"), ("classification", "logit"),
                                        ("classification", "probit")])
def test_pymc_and_numpyro_log_densities_agree_exactly(task, link, sinc, mixture):
    data = sinc if task == "regression" else mixture
    model = RVM(task=task, link=link, width=3.0 if task == "regression" else 0.5, a=0.3, b=0.02, c=2.0, d=0.1)
    for point, pm_lp, np_lp, trace in declared_log_densities(model, data, n=3, scale=2.0):
        ours = _exact_logp(model, data, point)
        assert np.isclose(pm_lp, ours, rtol=1e-10, atol=1e-8)
        assert np.isclose(np_lp, ours, rtol=1e-10, atol=1e-8)
        np.testing.assert_allclose(np.asarray(trace["w"]["value"]), point["z"] * np.exp(-0.5 * point["log_alpha"]))


def test_log_gamma_is_the_gamma_pushed_through_log():
    # integrates to one, and matches Gamma(a, b) on x = e^u times the Jacobian e^u
    from scipy import integrate, stats

    a, b = 0.7, 0.3
    total, _ = integrate.quad(lambda u: np.exp(log_gamma_logpdf(u, a, b)), -80, 10)
    assert abs(total - 1.0) < 1e-7
    u = np.linspace(-3, 2, 7)
    np.testing.assert_allclose(log_gamma_logpdf(u, a, b), stats.gamma(a, scale=1 / b).logpdf(np.exp(u)) + u)


def test_numpyro_log_gamma_sampler_matches_moments():
    import jax
    from bayeszoo.numerics.special import log_gamma_numpyro

    a, b = 0.05, 2.0
    u = np.asarray(log_gamma_numpyro()(a, b).sample(jax.random.PRNGKey(0), (200_000,)))
    # E[log x] = digamma(a) - log b for x ~ Gamma(a, b); Var = trigamma(a)
    from scipy.special import digamma, polygamma
    assert abs(u.mean() - (digamma(a) - np.log(b))) < 4 * np.sqrt(polygamma(1, a) / u.size)
    assert np.all(np.isfinite(u))


def test_declarations_carry_canonical_dims(sinc):
    model = RVM(width=3.0)
    pm_model = model.pymc_model(sinc)
    assert pm_model.named_vars_to_dims["w"] == ("basis",)
    assert pm_model.named_vars_to_dims["log_alpha"] == ("basis",)
    assert "log_beta" in pm_model.named_vars and "log_beta" not in pm_model.named_vars_to_dims
    assert len(pm_model.coords["basis"]) == sinc.n + 1


def _constructed(model, data, w, log_alpha, log_beta=None, chains=2):
    draws = {"w": w, "log_alpha": log_alpha}
    if log_beta is not None:
        draws["log_beta"] = log_beta
    return build_fit(model, data, "constructed", "mcmc", draws, timing={"sample": 1.0})


def test_predict_and_score_regression_on_constructed_draws(sinc):
    model = RVM(width=3.0)
    M = model.n_basis(sinc)
    rng = np.random.default_rng(0)
    w = rng.normal(size=(2, 30, M))
    log_beta = np.full((2, 30), np.log(25.0))
    fit = _constructed(model, sinc, w, np.zeros((2, 30, M)), log_beta)
    Phi = model.design(sinc.X_test, sinc.X)
    f = w.reshape(60, M) @ Phi.T
    np.testing.assert_allclose(model.predict_draws(fit, sinc.X_test), f)
    np.testing.assert_allclose(model.predict(fit, sinc.X_test), f.mean(0))
    np.testing.assert_allclose(model.predict_std(fit, sinc.X_test), np.sqrt(f.var(0) + 1 / 25.0))
    s = model.score(fit, sinc)
    assert np.isclose(s["mse"], np.mean((f.mean(0) - sinc.y_test) ** 2))
    dens = np.sqrt(25 / (2 * np.pi)) * np.exp(-12.5 * (sinc.y_test - f) ** 2)
    assert np.isclose(s["log_pred"], np.mean(np.log(dens.mean(0))))


def test_n_relevant_same_rule_for_point_estimates_and_draws(sinc):
    model = RVM(width=3.0)
    M = model.n_basis(sinc)
    log_alpha = np.full((1, 1, M), LOG_ALPHA_PRUNED)
    w = np.zeros((1, 1, M))
    keep = [0, 4, 9]
    log_alpha[..., keep] = 0.0
    w[..., keep] = 0.5
    point = _constructed(model, sinc, w, log_alpha, np.zeros((1, 1)))
    assert model.score(point, sinc)["n_relevant"] == 3
    # draws: bases 0, 4, 9 have small alpha; the rest sit far in the prior's right tail most of the time
    rng = np.random.default_rng(1)
    la = rng.normal(14.0, 3.0, size=(2, 200, M))
    la[..., keep] = rng.normal(0.0, 1.0, size=(2, 200, 3))
    drawn = _constructed(model, sinc, rng.normal(size=(2, 200, M)), la, np.zeros((2, 200)))
    assert model.n_relevant(drawn, sinc) == 3


def test_classification_scores_on_constructed_draws(mixture):
    model = RVM(task="classification", width=0.5, link="probit")
    M = model.n_basis(mixture)
    w = np.zeros((1, 4, M))
    w[..., 0] = 1.0  # f = 1 everywhere: P(y=1) = Phi(1)
    fit = _constructed(model, mixture, w, np.zeros((1, 4, M)))
    from scipy.stats import norm
    p = norm.cdf(1.0)
    np.testing.assert_allclose(model.predict(fit, mixture.X_test), p)
    s = model.score(fit, mixture)
    yt = mixture.y_test
    assert np.isclose(s["error_rate"], np.mean(yt == 0))
    p_true = np.where(yt == 1, p, 1 - p)
    assert np.isclose(s["log_pred"], np.mean(np.log(p_true)))
    assert np.isclose(s["info_bits"], np.mean(np.log2(p_true) - np.log2(0.5)))  # balanced training set
    assert s["n_relevant"] == M


def test_prediction_rejects_mismatched_basis(sinc):
    fit = _constructed(RVM(width=3.0), sinc, np.zeros((1, 2, sinc.n + 1)), np.zeros((1, 2, sinc.n + 1)),
                       np.zeros((1, 2)))
    with pytest.raises(ValueError, match="bias=True"):
        RVM(width=3.0, bias=False).predict(fit, sinc.X_test)


# ------------------------------------------------------------------------------------------- inputs
@pytest.mark.parametrize("options, name", [
    (dict(width="3"), "width"), (dict(width=True), "width"), (dict(width=None), "width"), (dict(degree=2.5), "degree"),
    (dict(degree="2"), "degree"), (dict(offset="x"), "offset"), (dict(bias=1), "bias"), (dict(a="1"), "a"),
    (dict(d=[1.0]), "d"), (dict(kernel=["gauss"]), "kernel"), (dict(task=None), "task"), (dict(link=1), "link"),
    (dict(c=1e299), "c"), (dict(d=1e-300), "d")])   # found by the property tests: fast raised OverflowError
def test_options_of_a_wrong_type_are_refused_naming_the_option(options, name):
    # RVM(width="3") raised a TypeError from np.isfinite; degree, offset and bias were not checked at all
    with pytest.raises(ValueError, match=rf"RVM: {name} must be"):
        RVM(**options)


def test_predict_and_score_refuse_a_fit_made_with_other_options(sinc):
    fit = bz.fit(RVM(width=3.0), sinc, "fast", draws=5, chains=1, progress=False)
    with pytest.raises(ValueError, match=r"width=3\.0 \(here 1\.0\)"):     # confident wrong values before
        RVM(width=1.0).predict(fit, sinc.X_test)
    with pytest.raises(ValueError, match="width"):
        RVM(width=1.0).score(fit, sinc)
    with pytest.raises(ValueError, match="task='regression'"):            # a classifier and a regression fit
        RVM(task="classification", width=3.0).predict(fit, sinc.X_test)
    with pytest.raises(ValueError, match="'arvm' model"):
        RVM(width=3.0).predict(bz.fit(bz.models.ARVM(n_basis=3), sinc, "arvm", draws=2, chains=1, progress=False,
                                      max_iter=2), sinc.X_test)
    np.testing.assert_allclose(fit.model().predict(fit, sinc.X_test), RVM(width=3.0).predict(fit, sinc.X_test))


@pytest.mark.parametrize("X_new, match", [
    (np.array([[np.nan], [0.0]]), "NaN"), (np.array([[np.inf]]), "NaN or inf"), (np.zeros((3, 2)), "1 column"),
    ("abc", "array of real numbers"), (np.zeros((2, 1, 1)), "2 dimension")])
def test_predict_refuses_bad_inputs_naming_the_problem(sinc, X_new, match):
    # NaN gave NaN predictions, two columns a matmul error, a string numpy's conversion error
    M = sinc.n + 1
    fit = _constructed(RVM(width=3.0), sinc, np.ones((1, 2, M)), np.zeros((1, 2, M)), np.zeros((1, 2)))
    with pytest.raises(ValueError, match=match):
        RVM(width=3.0).predict(fit, X_new)


def test_kernel_is_exact_for_inputs_far_from_the_origin():
    # |x1|^2 + |x2|^2 - 2 x1.x2 cancelled catastrophically: times in seconds since 1970 gave a garbage kernel
    from bayeszoo.models.rvm import kernel_matrix

    far = np.linspace(0.0, 5.0, 7)[:, None] + 1.7e9
    near = far - 1.7e9                                              # exact: the same inputs, shifted
    for kernel in ("gauss", "bspline"):
        np.testing.assert_allclose(kernel_matrix(far, far, kernel, width=2.0),
                                   kernel_matrix(near, near, kernel, width=2.0), atol=1e-12)


def test_tiny_width_does_not_underflow():
    # width**2 underflowed to 0: the diagonal was 0 / 0 = NaN
    from bayeszoo.models.rvm import kernel_matrix

    x = np.linspace(0.0, 1.0, 4)[:, None]
    np.testing.assert_array_equal(kernel_matrix(x, x, "gauss", width=1e-200), np.eye(4))


def test_a_constant_kernel_is_refused_before_any_work():
    data = bz.datasets.load("sinc", n=100, n_test=10)
    # em / fast / vb fitted a constant silently; gibbs returned NaN draws (the builder's message, after the work)
    for backend in ("em", "gibbs"):
        with pytest.raises(ValueError, match="constant on the training inputs.*largest range is"):
            bz.fit(RVM(width=1e6), data, backend, draws=5, tune=5, chains=1, progress=False)
    same = bz.datasets.Dataset(np.ones((5, 1)), np.arange(5.0), name="same", meta={"task": "regression"})
    with pytest.raises(ValueError, match="all 5 training inputs are the same point"):
        bz.fit(RVM(), same, "em", progress=False)
    with pytest.raises(ValueError, match="'poly' of degree 200 .* overflows"):
        bz.fit(RVM(kernel="poly", degree=200, offset=10.0), data, "em", progress=False)


@pytest.mark.parametrize("scale_X, scale_y, match", [
    (1e300, 1.0, "training inputs X reach"), (1.0, 1e300, "regression targets y reach"),
    (1.0, 1e-300, "regression targets y reach")])
def test_inputs_far_from_unit_scale_are_refused(scale_X, scale_y, match):
    # em / fast / vb raised numpy's LinAlgError from deep in the Cholesky, gibbs returned NaN draws
    d = bz.datasets.load("sinc", n=20, n_test=5)
    scaled = bz.datasets.Dataset(d.X * scale_X, d.y * scale_y, name="scaled", meta={"task": "regression"})
    for backend in ("em", "fast", "vb"):
        with pytest.raises(ValueError, match=match) as info:
            bz.fit(RVM(width=3.0 * scale_X), scaled, backend, draws=5, chains=1, progress=False)
        assert type(info.value) is ValueError


def test_fast_fits_targets_that_are_all_zero():
    # the first basis got alpha = norm / 0: numpy's LinAlgError
    d = bz.datasets.load("sinc", n=20, n_test=5)
    zero = bz.datasets.Dataset(d.X, np.zeros(d.n), name="zero", meta={"task": "regression"})
    fit = bz.fit(RVM(width=3.0), zero, "fast", draws=5, chains=1, progress=False)
    assert np.all(np.abs(RVM(width=3.0).predict(fit, d.X_test)) < 1e-6)


# ------------------------------------------------------------------------------------------- width="scale"
def test_scale_width_is_svc_gamma_scale_on_a_tiny_x():
    from sklearn.metrics.pairwise import rbf_kernel

    from bayeszoo.models.rvm import kernel_matrix

    X = np.array([[0.0, 0.0], [1.0, 2.0], [2.0, 4.0]])
    # entries 0, 0, 1, 2, 2, 4: mean 1.5, variance 11.5 / 6, so d var(X) = 23 / 6
    assert RVM().width == "scale"
    assert RVM().kernel_width(X) == np.sqrt(23.0 / 6.0)
    assert RVM(kernel="sigmoid").kernel_width(X) == 23.0 / 6.0
    assert RVM(width=0.7).kernel_width(X) == 0.7
    # exp(-|x - x'|^2 / h^2) with h^2 = d var(X) is SVC's rbf with gamma="scale" = 1 / (d var(X))
    np.testing.assert_allclose(kernel_matrix(X, X, "gauss", RVM().kernel_width(X)), rbf_kernel(X, gamma=6.0 / 23.0),
                               rtol=1e-14, atol=0)


def test_scale_width_is_resolved_at_fit_time_stored_and_reloaded(sinc, tmp_path):
    h = float(np.sqrt(np.var(sinc.X)))                 # one feature
    fit = bz.fit(RVM(), sinc, "fast", draws=20, chains=1, seed=0, progress=False)
    same = bz.fit(RVM(width=h), sinc, "fast", draws=20, chains=1, seed=0, progress=False)
    assert float(fit.idata.constant_data["kernel_width"]) == h
    np.testing.assert_allclose(RVM().predict(fit, sinc.X_test), RVM(width=h).predict(same, sinc.X_test),
                               rtol=1e-12, atol=1e-14)
    back = bz.load_fit(fit.save(tmp_path / "scale.nc"))
    assert back.model() == RVM() and float(back.idata.constant_data["kernel_width"]) == h
    np.testing.assert_array_equal(back.model().predict(back, sinc.X_test), RVM().predict(fit, sinc.X_test))


@pytest.mark.parametrize("width, message", [
    ("auto", r"width must be a finite number > 0 or one of \('scale', 'evidence'\); got 'auto'"),
    ("Scale", r"width must be a finite number > 0 or one of \('scale', 'evidence'\)"),
    (0.0, "width must be"), (-1.0, "width must be"), (np.inf, "width must be")])
def test_bad_widths_are_refused(width, message):
    with pytest.raises(ValueError, match=message):
        RVM(width=width)


# ------------------------------------------------------------------------------------------- width="evidence"
def test_evidence_width_maximises_the_fast_log_evidence_and_is_stored(sinc, tmp_path):
    from bayeszoo.inference.rvm.fast import width_log_evidence
    from bayeszoo.models.rvm import EVIDENCE_SPAN, scale_width

    model = RVM(width="evidence")
    fit = bz.fit(model, sinc, "fast", draws=20, chains=1, seed=0, progress=False)
    h = float(fit.idata.constant_data["kernel_width"])
    center = scale_width(sinc.X)
    assert center / EVIDENCE_SPAN <= h <= center * EVIDENCE_SPAN

    def evidence(width):
        return width_log_evidence(model, model._design_at(sinc.X, width), sinc.y)

    # at least as high as at every width of the search's grid and at close neighbours on either side
    chosen = evidence(h)
    assert chosen == pytest.approx(fit.info["log_evidence"], abs=1e-9)
    for other in [*(center * EVIDENCE_SPAN ** np.linspace(-1, 1, 5)), h / 1.1, h * 1.1]:
        assert chosen >= evidence(other) - 1e-9
    # on sinc the evidence prefers a width well below the "scale" one (about 2 against 6 on 100 points)
    assert evidence(center) < chosen - 1.0
    # the fit at the chosen width is the fit at that number, and a saved fit predicts with it
    same = bz.fit(RVM(width=h), sinc, "fast", draws=20, chains=1, seed=0, progress=False)
    np.testing.assert_allclose(model.predict(fit, sinc.X_test), RVM(width=h).predict(same, sinc.X_test),
                               rtol=1e-10, atol=1e-12)
    back = bz.load_fit(fit.save(tmp_path / "evidence.nc"))
    assert back.model() == model and float(back.idata.constant_data["kernel_width"]) == h
    np.testing.assert_array_equal(back.model().predict(back, sinc.X_test), model.predict(fit, sinc.X_test))


def test_evidence_width_for_classification_is_a_maximum(mixture):
    from bayeszoo.inference.rvm.fast import width_log_evidence

    model = RVM(task="classification", width="evidence")
    h, searched = model.evidence_search(mixture.X, mixture.y)
    assert h in searched["widths"] and len(searched["widths"]) >= 5
    assert max(searched["log_evidence"]) == searched["log_evidence"][searched["widths"].index(h)]
    chosen = width_log_evidence(model, model._design_at(mixture.X, h), mixture.y)
    assert chosen >= width_log_evidence(model, model._design_at(mixture.X, 1.1 * h), mixture.y) - 1e-9


def test_evidence_width_needs_the_targets():
    X = np.array([[0.0], [1.0], [2.0]])
    with pytest.raises(ValueError, match=r"width='evidence' is chosen from the training inputs and targets.*pass "
                                         r"the targets y"):
        RVM(width="evidence").kernel_width(X)


def test_scale_width_of_inputs_that_do_not_vary_is_refused_before_any_work():
    same = bz.datasets.Dataset(np.full((4, 2), 3.0), np.arange(4.0), name="same", meta={"task": "regression"})
    with pytest.raises(ValueError, match=r"width='scale'.*all 4 training inputs are the same point"):
        bz.fit(RVM(), same, "fast", progress=False)
