"""What GPC accepts and how it refuses the rest (docs/families/gpc.md, "Inputs"): inputs of any scale, the prior
variance limit, numerically singular kernel matrices, fits made with another model, prediction inputs, model,
backend and loader options."""
import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo.datasets import gpc_data
from bayeszoo.models.gpc import GPC, VARIANCE_LIMIT
from bayeszoo.numerics import gp_kernels

APPROXIMATIONS = ("laplace", "ep", "kl", "vb", "fv", "lr")
FEW = {"gibbs": {"draws": 4, "tune": 2, "chains": 2}, "ais": {"draws": 2, "chains": 2, "n_temps": 8}}


def data(scale=1.0, n=15, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return bz.datasets.Dataset(X * scale, (X[:, 0] > 0).astype(float), name="scaled",
                               meta={"task": "classification"})


def fit(model, ds, backend):
    return bz.fit(model, ds, backend, progress=False, **FEW.get(backend, {"draws": 5, "chains": 1}))


def refusal(call) -> str:
    """The message of the ValueError ``call()`` raises; a linear-algebra error (a ValueError subclass) fails."""
    with pytest.raises(ValueError) as info:
        call()
    assert not isinstance(info.value, np.linalg.LinAlgError), info.value
    return str(info.value)


# ---- inputs of any scale --------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", APPROXIMATIONS)
@pytest.mark.parametrize("scale", [1e300, 1e160, 1e-300])
def test_stationary_kernels_fit_inputs_of_any_scale(backend, scale):
    """Inputs scaled by 1e300 gave NaN kernel matrices (|x|^2 overflowed) and every draw NaN; the distances are
    now formed from scaled, centred inputs (at a lengthscale given as a number: "scale" is refused there, below)."""
    ds = data(scale)
    for kernel in ("se", "matern32", "nn"):
        model = GPC(kernel=kernel, log_lengthscale=0.0)
        result = fit(model, ds, backend)
        assert np.all(np.isfinite(result.posterior["f"].values))
        p = model.predict(result, ds.X * 0.5)
        assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["gibbs", "ais"])
def test_samplers_on_inputs_scaled_by_1e300_finish(backend):
    """ais on inputs scaled by 1e300 never returned: the NaN kernel matrix made every log-likelihood NaN, so the
    elliptical slice sampler's bracket shrank for ever."""
    ds = data(1e300, n=5)
    model = GPC(log_lengthscale=0.0)
    result = fit(model, ds, backend)
    assert np.all(np.isfinite(result.posterior["f"].values))
    assert np.all(np.isfinite(model.predict(result, ds.X)))


@pytest.mark.parametrize("scale", [1e300, 1e160, 1e-300, 1e-9])
def test_scale_lengthscale_out_of_range_is_refused_before_any_work(scale):
    """The default lengthscale follows the inputs (two columns: ell^2 = 2 var(X) / 2 = var(X)); a log lengthscale
    beyond [-20, 20] is refused, naming the option and the number it would have been (at such lengthscales the
    kernels lose every digit of a distance), also where var(X) itself over- or underflows."""
    log_ell = np.log(scale) + 0.5 * np.log(np.var(data().X))
    message = refusal(lambda: fit(GPC(), data(scale), "ep"))
    assert "log_lengthscale='scale'" in message and f"log_ell = {log_ell:.4g}," in message
    assert "standardise the inputs" in message
    assert np.isclose(GPC().at(data(1e-8).X).log_lengthscale, np.log(1e-8) + 0.5 * np.log(np.var(data().X)),
                      rtol=0, atol=1e-12)


def test_kernels_and_gradients_stay_finite_at_extreme_inputs():
    X = np.random.default_rng(1).normal(size=(6, 2))
    for scale in (1e-300, 1e150, 1e300):
        for kind in ("se", "se_ard", "matern32", "matern52", "nn"):
            hyp = np.zeros(gp_kernels.n_hyp(kind, 2))
            K = gp_kernels.kernel_matrix(kind, X * scale, None, hyp)
            assert np.all(np.isfinite(K)), (kind, scale)
            assert all(np.all(np.isfinite(G)) for G in gp_kernels.kernel_grad(kind, X * scale, hyp)), (kind, scale)
            assert np.all(np.isfinite(gp_kernels.kernel_diag(kind, X * scale, hyp)))


def test_nn_kernel_at_huge_inputs_beside_the_origin():
    """A row at the origin beside rows of magnitude 1e300 divided 0 by 0 (NaN); rows are scaled one by one now."""
    X = np.array([[0.0, 0.0], [3e300, 4e300], [-4e300, 3e300], [6e299, 8e299]])
    K = gp_kernels.kernel_matrix("nn", X, None, [0.0, 0.0])
    assert np.isclose(K[0, 0], np.arcsin(0.5)) and np.allclose(K[0, 1:], 0.0)
    assert np.isclose(K[1, 2], 0.0, atol=1e-12) and np.isclose(K[1, 3], np.pi / 2) and np.isclose(K[1, 1], np.pi / 2)
    assert all(np.all(np.isfinite(G)) for G in gp_kernels.kernel_grad("nn", X, [0.0, 0.0]))


def test_distances_far_from_the_origin_keep_their_digits():
    X = 1e8 + np.array([[0.0], [1.0], [2.5]])              # |x|^2 ~ 1e16: the old formula lost the differences
    K = gp_kernels.kernel_matrix("se", X, None, [0.0, 0.0])
    np.testing.assert_allclose(K[0], np.exp(-0.5 * np.array([0.0, 1.0, 6.25])), rtol=1e-12)


@pytest.mark.parametrize("backend", APPROXIMATIONS + ("gibbs", "ais"))
@pytest.mark.parametrize("kernel", ["linear", "poly"])
def test_inputs_whose_scale_overflows_are_refused(backend, kernel):
    """linear / poly at inputs scaled by 1e10 ... 1e300: NaN draws, LinAlgError or an eigensolver's message before;
    now one ValueError that says to standardise the inputs."""
    for scale in (1e10, 1e100, 1e300):
        message = refusal(lambda: fit(GPC(kernel=kernel), data(scale), backend))
        assert "prior variance" in message and "standardise the inputs" in message


def test_prediction_inputs_whose_scale_overflows_are_refused():
    model = GPC(kernel="linear")
    result = fit(model, data(), "laplace")
    message = refusal(lambda: model.predict(result, np.full((2, 2), 1e200)))
    assert "X_new" in message and "standardise" in message
    assert np.all(np.isfinite(model.predict(result, np.full((2, 2), 1e3))))


# ---- hyperparameters inside the bounds -------------------------------------------------------------------
@pytest.mark.parametrize("backend", APPROXIMATIONS + ("gibbs", "ais"))
def test_amplitudes_beyond_the_variance_limit_are_refused(backend):
    """log_amplitude 15 ... 20 is inside the [-20, 20] box but gave LinAlgError ('covariance is not positive
    definite'), NaN draws or eigensolver failures; the prior variance limit refuses it and names log_sf."""
    for la in (15.0, 20.0):
        for ll in (-20.0, 0.0):
            message = refusal(lambda: fit(GPC(log_lengthscale=ll, log_amplitude=la), data(), backend))
            assert "log_sf" in message and f"{VARIANCE_LIMIT:g}" in message
    assert np.log(VARIANCE_LIMIT) / 2 > 11.5
    assert np.all(np.isfinite(fit(GPC(log_amplitude=11.5), data(), backend).posterior["f"].values))


@pytest.mark.parametrize("backend", APPROXIMATIONS + ("gibbs", "ais"))
def test_singular_kernel_matrix_says_which_options_to_change(backend):
    """A long lengthscale makes K = sf^2 1 1^T singular to working precision: LinAlgError before (from Cholesky,
    chol(B) or the Gaussian draws); now a ValueError naming a jitter that suffices and the hyperparameters."""
    message = refusal(lambda: fit(GPC(log_lengthscale=20.0, log_amplitude=10.0), data(), backend))
    assert "not positive definite" in message and "increase jitter (jitter=" in message
    assert "log_ell" in message and "log_sf" in message
    suffices = float(message.split("increase jitter (jitter=")[1].split(" ")[0])
    assert fit(GPC(log_lengthscale=20.0, log_amplitude=10.0, jitter=suffices), data(), "ep") is not None


def test_duplicated_rows_without_jitter_name_the_jitter():
    X = np.repeat([[0.5, -1.0]], 4, axis=0)
    ds = bz.datasets.Dataset(X=X, y=np.array([1.0, 0.0, 1.0, 0.0]), name="dup")
    for backend in ("laplace", "ais"):
        assert "increase jitter" in refusal(lambda: fit(GPC(jitter=0.0), ds, backend))


# ---- fits of other models, prediction inputs -------------------------------------------------------------
def test_predict_and_score_refuse_a_fit_made_with_other_options():
    """predict / score used the calling model's own options with any fit; now the fit's spec must match."""
    ds = data()
    model = GPC(log_lengthscale=0.5)
    result = fit(model, ds, "ep")
    for other, name in ((GPC(likelihood="logit", log_lengthscale=0.5), "likelihood"),
                        (GPC(log_lengthscale=1.0), "log_lengthscale"), (GPC(hyp=(0.5, 0.0)), "hyp"),
                        (GPC(log_lengthscale=0.5, jitter=1e-6), "jitter")):
        assert name in refusal(lambda: other.predict(result, ds.X))
        assert name in refusal(lambda: other.score(result, ds))
        assert name in refusal(lambda: other.log_predict(result, ds.X, ds.y))
    assert "fit must be" in refusal(lambda: model.predict(None, ds.X))
    # the same options, also after a JSON round trip of the spec, are accepted
    again = bz.models.from_spec(result.model_spec)
    np.testing.assert_allclose(again.predict(result, ds.X), model.predict(result, ds.X))


def test_predict_refuses_nan_and_wrong_width():
    ds = data()
    model = GPC()
    result = fit(model, ds, "laplace")
    assert "NaN" in refusal(lambda: model.predict(result, np.array([[np.nan, 0.0]])))
    assert "column" in refusal(lambda: model.predict(result, np.zeros((3, 3))))
    assert "X_new" in refusal(lambda: model.predict(result, "x"))
    assert "y_new" in refusal(lambda: model.log_predict(result, ds.X[:3], [1.0, 0.0]))
    assert "labels" in refusal(lambda: model.log_predict(result, ds.X[:2], [2.0, 0.0]))
    assert "column" in refusal(lambda: model.score(result, data(d=3)))
    assert model.predict(result, np.zeros((0, 2))).shape == (0,)


# ---- model, backend and loader options -------------------------------------------------------------------
@pytest.mark.parametrize("options, name", [
    ({"jitter": True}, "jitter"), ({"jitter": 1e300}, "jitter"), ({"jitter": "1e-8"}, "jitter"),
    ({"hyp": ("0.5", "1")}, "hyp"), ({"hyp": [True, 0.0]}, "hyp"), ({"hyp": [[0.0, 1.0], [2.0]]}, "hyp"),
    ({"hyp": np.zeros((2, 2))}, "hyp"), ({"hyp": 1.0}, "hyp"), ({"log_lengthscale": np.bool_(True)}, "log_lengthscale"),
    ({"log_amplitude": "1"}, "log_amplitude"), ({"likelihood": ["probit"]}, "likelihood"),
    ({"kernel": None}, "kernel"), ({"degree": True}, "degree"), ({"degree": 2.5}, "degree"),
])
def test_model_options_of_the_wrong_type(options, name):
    assert name in refusal(lambda: GPC(**options))


def test_model_options_are_normalised_to_json():
    model = GPC(log_lengthscale=np.float32(0.5), hyp=np.array([0.5, 0.0]), degree=np.int64(2),
                likelihood=np.str_("logit"))
    assert model.spec() == {"family": "gpc", "likelihood": "logit", "kernel": "se", "hyp": [0.5, 0.0],
                            "log_lengthscale": 0.5, "log_amplitude": 0.0, "jitter": 1e-8, "degree": 2}
    assert bz.models.from_spec(model.spec()) == model


@pytest.mark.parametrize("backend, options, name", [
    ("ep", {"damping": 0.0}, "damping"), ("ep", {"min_sweeps": 1.5}, "min_sweeps"), ("laplace", {"tol": "a"}, "tol"),
    ("kl", {"max_iter": None}, "max_iter"), ("fv", {"ridge": np.nan}, "ridge"), ("lr", {"noise_sd": -1}, "noise_sd"),
    ("lr", {"noise_range": (0.5, np.inf)}, "noise_range"), ("gibbs", {"thin": 2.0}, "thin"),
    ("gibbs", {"init": {"a": 1}}, "init"), ("ais", {"schedule": {"a": 1}}, "schedule"),
    ("ais", {"schedule": [0.0, "x", 1.0]}, "schedule"), ("ais", {"n_runs": "8"}, "n_runs"),
])
def test_backend_options_name_the_backend_and_the_option(backend, options, name):
    """ais's schedule={"a": 1} raised a TypeError from NumPy; every refusal now names the backend and option."""
    message = refusal(lambda: bz.fit(GPC(), data(n=6), backend, progress=False, **options))
    assert f"GPC backend {backend!r}" in message and name in message


@pytest.mark.parametrize("options, name", [({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"),
                                           ({"test_fraction": 1.0}, "test_fraction"),
                                           ({"standardize": 1}, "standardize")])
def test_loader_options(options, name):
    """crabs(seed=-1) raised NumPy's 'expected non-negative integer', which names no option."""
    for loader in (gpc_data.crabs, gpc_data.sonar):
        message = refusal(lambda: loader(**options))
        assert name in message and "dataset" in message


def test_fv_ridge_is_bounded_like_the_prior_variance():
    """ridge=1e300 reached a LinAlgError in the Jensen bound; the ridge is added to the prior covariance, so it has
    the same limit."""
    assert "ridge" in refusal(lambda: bz.fit(GPC(), data(n=6), "fv", draws=5, chains=1, progress=False, ridge=1e300))
    result = bz.fit(GPC(), data(n=6), "fv", draws=5, chains=1, progress=False, ridge=VARIANCE_LIMIT)
    assert np.all(np.isfinite(result.posterior["f"].values))


def test_ep_with_tiny_damping_is_not_declared_converged_at_its_start():
    """A damped step is tiny whenever the damping is: EP with damping=1e-10 stopped after two sweeps, 'converged',
    with the sites still at zero (the prior). Convergence is now judged on the full update."""
    ds = data(n=10)
    tiny = bz.fit(GPC(), ds, "ep", draws=5, chains=1, progress=False, damping=1e-10, max_sweeps=20)
    assert tiny.info["converged"] is False and tiny.info["warnings"]
    full = bz.fit(GPC(), ds, "ep", draws=5, chains=1, progress=False)
    half = bz.fit(GPC(), ds, "ep", draws=5, chains=1, progress=False, damping=0.5, max_sweeps=2000)
    assert full.info["converged"] and half.info["converged"]
    np.testing.assert_allclose(half.idata.gaussian["q_mean"].values, full.idata.gaussian["q_mean"].values,
                               atol=1e-6)
