"""bz.models.SLM: options, validation (ValueErrors before any work), declarations, predict / score, datasets, and
the convexity facts of Nickisch §3.4 on random instances."""
from __future__ import annotations

import json

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.datasets import Dataset
from bayeszoo.models.slm import SLM


def _data(n=8, m=6, seed=0, **meta):
    rng = np.random.default_rng(seed)
    return Dataset(rng.standard_normal((m, n)), rng.standard_normal(m), name="toy",
                   meta={"task": "regression", **meta})


def test_spec_round_trip_is_json():
    model = SLM(potential="student", tau=0.5, tau_tv=2.0, nu=4.0, sigma2=0.01, B="wavelet+tv", wavelet_level=2)
    spec = json.loads(json.dumps(model.spec()))
    assert bz.models.from_spec(spec) == model
    assert "slm" in bz.models.FAMILIES


@pytest.mark.parametrize("options,match", [({"potential": "cauchy"}, "potential"), ({"tau": 0.0}, "tau"),
                                           ({"sigma2": -1.0}, "sigma2"), ({"B": "curvelet"}, "B"),
                                           ({"nu": float("nan")}, "nu"), ({"wavelet_level": 0}, "wavelet_level"),
                                           ({"tau_tv": -2.0}, "tau_tv")])
def test_bad_options(options, match):
    with pytest.raises(ValueError, match=match):
        SLM(**options)


def test_bad_data_is_refused_before_any_work():
    model = SLM()
    with pytest.raises(ValueError, match="u_shape"):
        model.validate(_data(u_shape=(3, 3)))                         # shape mismatch: 9 != 8 columns
    with pytest.raises(ValueError, match="NaN"):
        Dataset(np.ones((3, 2)), np.array([1.0, np.nan, 0.0]))        # non-finite data
    with pytest.raises(ValueError, match="regression"):
        model.validate(bz.datasets.load("cameraman", size=16))
    with pytest.raises(ValueError, match="multiple of"):
        SLM(B="wavelet", wavelet_level=3).validate(_data(n=12))
    with pytest.raises(ValueError, match="meta\\['B'\\]"):
        SLM(B="meta").validate(_data())
    with pytest.raises(ValueError, match="NaN"):
        SLM(B="meta").validate(_data(B=np.full((8, 8), np.nan)))
    with pytest.raises(ValueError, match="X_operator"):
        model.validate(_data(n=8, m=4, X_operator={"kind": "fourier", "mask": [True, True] + [False] * 6}))


def test_non_normalisable_posteriors_are_refused():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4, 8))
    X -= X.mean(1, keepdims=True)                                     # X @ 1 = 0: nothing sees the mean of u
    data = Dataset(X, rng.standard_normal(4), meta={"task": "regression"})
    with pytest.raises(ValueError, match="not normalisable"):
        SLM(B="tv").validate(data)
    SLM(B="wavelet+tv").validate(data)                                # the wavelet potentials make it proper
    B = np.eye(8)[:3]                                                 # 3 potentials + 4 measurements < 8
    with pytest.raises(ValueError, match="rank 7 < n = 8"):
        SLM(B="meta").validate(_data(m=4, B=B))


def test_taus_and_potentials():
    data = bz.datasets.load("slm_image", size=8, m=20)
    model = SLM(B="wavelet+tv", tau=0.075, tau_tv=0.5)
    tau = model.taus(data)
    assert tau.shape == (64 + 2 * (64 - 8),)
    assert np.all(tau[:64] == 0.075) and np.all(tau[64:] == 0.5)
    assert model.potentials(data).tau.shape == tau.shape


def test_declarations_have_the_same_density():
    """PyMC's and NumPyro's log densities differ from log_joint by one constant."""
    import jax
    from numpyro.infer.util import log_density

    data = bz.datasets.load("slm_signal", kind="laplace", n=8, m=5, sigma2=0.1, seed=3)
    model = SLM(potential="student", tau=2.0, sigma2=0.1, B="tv")
    pm_model = model.pymc_model(data)
    logp = pm_model.compile_logp()
    fn = model.numpyro_model(data)
    rng = np.random.default_rng(0)
    diffs_pm, diffs_np = [], []
    for _ in range(3):
        u = rng.standard_normal(8)
        ref = float(model.log_joint(u, data))
        diffs_pm.append(float(logp({"u": u})) - ref)
        diffs_np.append(float(log_density(fn, (), {}, {"u": jax.numpy.asarray(u)})[0]) - ref)
    assert np.ptp(diffs_pm) < 1e-9 and np.ptp(diffs_np) < 1e-9


def test_declarations_refuse_large_problems():
    data = bz.datasets.load("slm_image", size=64, m=10)
    with pytest.raises(ValueError, match="small problems"):
        SLM(B="wavelet").numpyro_model(data)


def test_predict_and_score():
    data = bz.datasets.load("slm_signal", kind="spikes", n=16, m=12, sigma2=0.01, n_test=5, seed=0)
    model = SLM(tau=3.0, sigma2=0.01)
    fit = bz.fit(model, data, "map", progress=False)
    mean = model.posterior_mean(fit)
    np.testing.assert_allclose(model.predict(fit, data.X_test), data.X_test @ mean)
    scores = model.score(fit, data)
    assert scores["mse"] == pytest.approx(np.mean((data.X_test @ mean - data.y_test) ** 2))
    assert scores["l2_error"] == pytest.approx(np.linalg.norm(mean - data.meta["true_u"]))
    with pytest.raises(ValueError, match="other SLM options"):
        SLM(tau=1.0, sigma2=0.01).predict(fit, data.X_test)
    with pytest.raises(ValueError, match="column"):
        model.predict(fit, np.ones((2, 3)))


def test_datasets_are_deterministic():
    a = bz.datasets.load("slm_signal", kind="decaying", seed=4)
    b = bz.datasets.load("slm_signal", kind="decaying", seed=4)
    assert a.fingerprint() == b.fingerprint() and a.d == 512 and a.n == 40
    u = a.meta["true_u"]
    assert np.sum(u == 0) >= 256 and np.mean(u**2) == pytest.approx(1.0)
    np.testing.assert_allclose(np.linalg.norm(a.X, axis=1), 1.0)
    img = bz.datasets.load("slm_image", size=16, m=40, design="fourier", seed=1)
    assert img.meta["u_shape"] == (16, 16) and img.n == 40
    SLM(B="wavelet+tv").validate(img)                       # the Fourier operator spec equals X
    with pytest.raises(ValueError, match="kind"):
        bz.datasets.load("slm_signal", kind="sines")


def test_convexity_facts_of_section_3_4():
    """Theorem 1 on random instances: gamma -> ln|A(gamma^-1)| convex (1.1), gamma -> ln|Gamma| + ln|A| concave (1.3),
    marginal variances 0 <= nu <= sigma2 gamma (1.4); R(u, gamma) jointly convex."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        n, m, q = 6, 4, 9
        X, B = rng.standard_normal((m, n)), rng.standard_normal((q, n))
        A = lambda g: X.T @ X + B.T @ (B / g[:, None])              # noqa: E731
        ld = lambda g: np.linalg.slogdet(A(g))[1]                    # noqa: E731
        g1, g2 = np.exp(rng.normal(size=q)), np.exp(rng.normal(size=q))
        mid = 0.5 * (g1 + g2)
        assert ld(mid) <= 0.5 * (ld(g1) + ld(g2)) + 1e-10
        cav = lambda g: np.sum(np.log(g)) + ld(g)                    # noqa: E731
        assert cav(mid) >= 0.5 * (cav(g1) + cav(g2)) - 1e-10
        sigma2 = 0.3
        nu = sigma2 * np.diag(B @ np.linalg.solve(A(g1), B.T))
        assert np.all(nu >= 0) and np.all(nu <= sigma2 * g1 + 1e-12)
        y = rng.standard_normal(m)
        R = lambda u, g: np.sum((X @ u - y) ** 2) + np.sum((B @ u) ** 2 / g)   # noqa: E731
        u1, u2 = rng.standard_normal(n), rng.standard_normal(n)
        assert R(0.5 * (u1 + u2), mid) <= 0.5 * (R(u1, g1) + R(u2, g2)) + 1e-10


def test_gaussian_posterior_is_the_closed_form():
    data = _data(n=5, m=7)
    model = SLM(potential="gaussian", tau=2.0, sigma2=0.5)
    mean, cov = model.gaussian_posterior(data)
    P = data.X.T @ data.X / 0.5 + 2.0 * np.eye(5)
    np.testing.assert_allclose(cov, np.linalg.inv(P), rtol=1e-10)
    np.testing.assert_allclose(mean, np.linalg.solve(P, data.X.T @ data.y / 0.5), rtol=1e-10)
