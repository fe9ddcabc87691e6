"""Property-based tests of the image families (blind deconvolution ``BID`` and the multikernel ``ImageRVM``):
generated images (8-24 pixels a side, intensity scales over many orders of magnitude, constant and zero images,
sparse and blocky ones, blurred by the thesis's PSFs or others), generated model options (and wrong types) and
backend options, through ``bz.fit`` with few iterations / draws, ``predict`` at pixel coordinates and ``score``.
Whatever is generated, the answer is a fit with finite results or a ValueError raised by bayeszoo itself (never
another exception type, never a library's message passing through, never a hang)."""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from hypothesis import event, given, strategies as st

import bayeszoo as bz
from bayeszoo import registry
from bayeszoo.datasets import bid_data, imagervm_data
from bayeszoo.datasets.bid_data import degrade, image_problem
from bayeszoo.models.bid import BID, VARIANTS
from bayeszoo.models.imagervm import ImageRVM
from tests.helpers.properties import FAST, SLOW, refused_by_bayeszoo


ANY_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                      st.text(max_size=4), st.lists(st.integers(0, 3), max_size=3), st.just(np.array([1.0, 2.0])),
                      st.just({"a": 1}))
# a scale far from 1 (in both directions), over many orders of magnitude
SCALE = st.tuples(st.sampled_from([-300, -100, -40, -30, -12, -6, 4, 6, 12, 30, 40, 100, 300]),
                  st.floats(-0.5, 0.5)).map(lambda t: float(10.0 ** (t[0] + t[1])))
# a positive number, mostly of moderate size, sometimes extreme
POSITIVE = st.sampled_from([3, 3, 3, 300]).flatmap(lambda e: st.floats(-e, e)).map(lambda e: float(10.0 ** e))


# ----------------------------------------------------------------------------------------- generated images
@st.composite
def images(draw):
    """A (rows, cols) image of 8-24 pixels a side: noise, blocks, a gradient, a few bright pixels, a constant or
    zero everywhere; on the [0, 1] scale or scaled by up to 1e+-300, sometimes shifted to negative values."""
    R, C = draw(st.integers(8, 24)), draw(st.integers(8, 24))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    kind = draw(st.sampled_from(["noise", "blocks", "gradient", "sparse", "constant", "zero"]))
    if kind == "noise":
        img = rng.random((R, C))
    elif kind == "blocks":
        img = np.full((R, C), 0.5)
        for _ in range(draw(st.integers(1, 5))):
            r, c = rng.integers(0, R - 2), rng.integers(0, C - 2)
            img[r:r + rng.integers(2, R - r + 1), c:c + rng.integers(2, C - c + 1)] = rng.random()
    elif kind == "gradient":
        img = np.add.outer(np.linspace(0, 1, R), np.linspace(0, 0.5, C))
    elif kind == "sparse":
        img = np.zeros((R, C))
        img[rng.integers(0, R, 3), rng.integers(0, C, 3)] = 1.0
    elif kind == "constant":
        img = np.full((R, C), draw(st.sampled_from([1.0, 0.3, -2.0])))
    else:
        img = np.zeros((R, C))
    if draw(st.booleans()):
        img = img - 0.5 * draw(st.sampled_from([0.0, 1.0]))
    scale = draw(st.sampled_from([1.0, 1.0, 255.0, None]))
    return img * (draw(SCALE) if scale is None else scale)


PSF = st.one_of(st.sampled_from(["gaussian", "uniform", "motion"]).map(bid_data.make_psf),
                st.floats(0.05, 4.0).map(lambda v: bid_data.gaussian_psf(v)),
                st.sampled_from([1, 3, 5]).map(bid_data.uniform_psf))


@st.composite
def bid_problems(draw):
    """A BID dataset: an image used as the degraded one as it is, or a truth blurred by a PSF with noise at some SNR
    (truth and PSF then in meta, so score computes ISNR)."""
    img = draw(images())
    if draw(st.booleans()):
        return image_problem(img, name="generated")
    psf = draw(PSF)
    if psf.shape[0] > min(img.shape) or psf.shape[1] > min(img.shape):
        return image_problem(img, name="generated")
    snr_db, seed = draw(st.sampled_from([10.0, 40.0, 80.0, 300.0])), draw(st.integers(0, 99))
    degraded = refused_by_bayeszoo(lambda: degrade(img, psf, snr_db=snr_db, seed=seed))
    if degraded is None:                                     # intensities beyond what a noise variance can hold
        return image_problem(img, name="generated")
    return image_problem(degraded[0], name="generated", true_image=img, true_psf=psf)


def bid_options():
    return st.fixed_dictionaries({"variant": st.sampled_from(VARIANTS),
                                  "psf_size": st.sampled_from([None, 1, 3, 5, 7, 3, 5])}, optional={
        "sigma_phi2": st.one_of(st.floats(0.1, 8.0), POSITIVE),
        "a_alpha": st.one_of(st.just(0.0), POSITIVE), "b_alpha": st.one_of(st.just(0.0), POSITIVE),
        "a_beta": POSITIVE, "b_beta": POSITIVE, "a_gamma": POSITIVE, "b_gamma": POSITIVE,
        "init_psf_var": st.one_of(st.floats(0.5, 5.0), POSITIVE),
        "white_level": st.one_of(st.none(), POSITIVE)})


BID_COUNTS = {"vb": st.fixed_dictionaries({"draws": st.integers(1, 3), "chains": st.integers(1, 2)}),
              "gibbs": st.fixed_dictionaries({"draws": st.integers(1, 2), "tune": st.integers(0, 2),
                                              "chains": st.integers(1, 2)})}
BID_OPTIONS = {
    "vb": st.fixed_dictionaries({"max_iter": st.integers(2, 4), "cg_max_iter": st.integers(1, 15)}, optional={
        "tol": POSITIVE, "cg_tol": POSITIVE, "learn_noise_prior": st.booleans(), "init_alpha": POSITIVE,
        "init_beta": POSITIVE, "init_gamma": POSITIVE,
        "anneal_temperatures": st.sampled_from([(1.0,), (1.0, 3.0), (20.0,)]), "anneal_iter": st.just(1)}),
    "gibbs": st.fixed_dictionaries({"cg_max_iter": st.integers(1, 30)}, optional={
        "cg_tol": POSITIVE, "jitter": st.one_of(st.floats(1e-4, 0.5), POSITIVE), "scale_move": st.booleans()}),
}


def _check_score(scores: dict, has_truth: bool) -> None:
    for key, value in scores.items():
        assert isinstance(value, (int, float)), (key, value)
        if key.startswith("isnr"):          # +-inf when the estimate (or the observation) equals the truth
            # BID's isnr_f_shift is NaN on images of 30 pixels or fewer a side (its 15-pixel frame), all of these
            assert not math.isnan(value) or not has_truth or key in ("isnr_h", "isnr_f_shift"), (key, value)
        else:
            assert math.isfinite(value), (key, value)


def _check_predict(model, fit, shape) -> None:
    R, C = shape
    rows, cols = np.indices(shape)
    pixels = np.column_stack([rows.ravel(), cols.ravel()])
    values = model.predict(fit, pixels)
    assert values.shape == (R * C,) and np.all(np.isfinite(values))
    assert np.isfinite(model.predict(fit, [R - 1, C - 1])).all()
    for bad in ([[np.nan, 0.0]], [[0.0, np.inf]], [[0.0, 1.0, 2.0]], [[R + 3.0, 0.0]], [[-1.0, 0.0]], "pixels"):
        with pytest.raises(ValueError, match="X_new|pixel"):
            model.predict(fit, bad)


def _bid_fit(data, options: dict, backend: str, counts: dict, backend_options: dict, seed: int) -> None:
    model = refused_by_bayeszoo(lambda: BID(**options))
    if model is None:
        return
    if backend == "vb" and backend_options.get("anneal_temperatures", (1.0,)) != (1.0,):
        backend_options = {**backend_options, "anneal_iter": 1, "max_iter": max(2, backend_options["max_iter"])}
    fit = refused_by_bayeszoo(lambda: bz.fit(model, data, backend, seed=seed, progress=False, **counts,
                                             **backend_options))
    if fit is None:
        return
    event(f"fitted by bid {backend}")
    _check_predict(model, fit, model.image_shape(data))
    _check_score(model.score(fit, data), "true_image" in data.meta)
    other = BID(**{**options, "init_psf_var": float(model.init_psf_var) * 1.5})
    with pytest.raises(ValueError, match="other BID options"):
        other.predict(fit, [[0, 0]])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["vb", "gibbs"])
@FAST
@given(data=st.data())
def test_bid_fit_predict_score_finite_or_refused(backend, data):
    _bid_fit(data.draw(bid_problems()), data.draw(bid_options()), backend, data.draw(BID_COUNTS[backend]),
             data.draw(BID_OPTIONS[backend]), data.draw(st.integers(0, 10**6)))


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("backend", ["vb", "gibbs"])
@SLOW
@given(data=st.data())
def test_bid_fit_predict_score_finite_or_refused_many(backend, data):
    _bid_fit(data.draw(bid_problems()), data.draw(bid_options()), backend, data.draw(BID_COUNTS[backend]),
             data.draw(BID_OPTIONS[backend]), data.draw(st.integers(0, 10**6)))


# ------------------------------------------------------------------------------------------------ image RVM
@st.composite
def imagervm_problems(draw):
    img = draw(images())
    if draw(st.booleans()):
        return image_problem(img, name="generated")
    top = float(np.max(np.abs(img))) or 1.0                 # noise relative to the image (no overflow at 1e300)
    noisy = img + draw(st.sampled_from([0.0, 0.01, 0.3])) * top * np.std(img / top) * \
        np.random.default_rng(draw(st.integers(0, 99))).standard_normal(img.shape)
    return image_problem(noisy, name="generated", true_image=img)


def kernel_specs():
    width = st.one_of(st.floats(0.3, 20.0), POSITIVE)
    window = st.tuples(st.sampled_from([1, 3, 5]), st.sampled_from([1, 3, 5]), st.integers(0, 99)).map(
        lambda t: np.random.default_rng(t[2]).random((t[0], t[1])) + 0.1)
    return st.lists(st.one_of(width, width, window), min_size=1, max_size=3).map(tuple)


def imagervm_options():
    hyper = st.one_of(st.just(0.0), st.just(0.0), POSITIVE)
    return st.fixed_dictionaries({"kernels": kernel_specs()}, optional={"a": hyper, "b": hyper, "c": hyper,
                                                                        "d": hyper})


DFT_COUNTS = st.fixed_dictionaries({"draws": st.integers(1, 3), "chains": st.integers(1, 2)})
DFT_OPTIONS = st.fixed_dictionaries({"max_iter": st.integers(1, 5)}, optional={
    "approx": st.sampled_from(["diagonal", "circulant", "exact"]), "tol": POSITIVE, "prune_alpha": POSITIVE,
    "cg_tol": POSITIVE, "cg_max_iter": st.integers(1, 50), "init_alpha": st.one_of(st.none(), POSITIVE),
    "init_beta": st.one_of(st.none(), POSITIVE), "w_draws": st.sampled_from(["gaussian", "mean"])})


def _imagervm_fit(data, options: dict, counts: dict, backend_options: dict, seed: int) -> None:
    model = refused_by_bayeszoo(lambda: ImageRVM(**options))
    if model is None:
        return
    fit = refused_by_bayeszoo(lambda: bz.fit(model, data, "dft", seed=seed, progress=False, **counts,
                                             **backend_options))
    if fit is None:
        return
    event("fitted by imagervm dft")
    _check_predict(model, fit, model.image_shape(data))
    _check_score(model.score(fit, data), "true_image" in data.meta)
    other = ImageRVM(**{**options, "kernels": tuple(options["kernels"]) + (3.0,)})
    with pytest.raises(ValueError, match="other ImageRVM options"):
        other.predict(fit, [[0, 0]])


@pytest.mark.timeout(120)
@FAST
@given(data=imagervm_problems(), options=imagervm_options(), counts=DFT_COUNTS, backend_options=DFT_OPTIONS,
       seed=st.integers(0, 10**6))
def test_imagervm_fit_predict_score_finite_or_refused(data, options, counts, backend_options, seed):
    _imagervm_fit(data, options, counts, backend_options, seed)


@pytest.mark.slow
@pytest.mark.timeout(1200)
@SLOW
@given(data=imagervm_problems(), options=imagervm_options(), counts=DFT_COUNTS, backend_options=DFT_OPTIONS,
       seed=st.integers(0, 10**6))
def test_imagervm_fit_predict_score_finite_or_refused_many(data, options, counts, backend_options, seed):
    _imagervm_fit(data, options, counts, backend_options, seed)


# --------------------------------------------------------------------------------- option values of any type
def _options_of_any_type(cls, options: dict) -> None:
    model = refused_by_bayeszoo(lambda: cls(**options))
    if model is not None:                                    # what was accepted has a JSON spec that rebuilds it
        assert bz.models.from_spec(model.spec()).spec() == model.spec()


FAMILIES = {"bid": (BID, ["variant", "sigma_phi2", "psf_size", "a_alpha", "b_alpha", "a_beta", "b_beta", "a_gamma",
                          "b_gamma", "init_psf_var", "white_level"]),
            "imagervm": (ImageRVM, ["kernels", "a", "b", "c", "d"])}
KERNEL_VALUES = st.one_of(ANY_VALUE, st.lists(st.one_of(ANY_VALUE, st.lists(st.lists(ANY_VALUE, max_size=3),
                                                                             max_size=3)), max_size=3))


def _any_options(draw, family):
    names = FAMILIES[family][1]
    values = {name: KERNEL_VALUES if name == "kernels" else ANY_VALUE for name in names}
    return draw(st.fixed_dictionaries({}, optional=values))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("family", sorted(FAMILIES))
@FAST
@given(data=st.data())
def test_model_options_of_any_type(family, data):
    _options_of_any_type(FAMILIES[family][0], _any_options(data.draw, family))


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("family", sorted(FAMILIES))
@SLOW
@given(data=st.data())
def test_model_options_of_any_type_many(family, data):
    _options_of_any_type(FAMILIES[family][0], _any_options(data.draw, family))


@pytest.fixture(scope="module")
def small_image():
    return bz.datasets.load("bid_blocks", size=16, n_blocks=4, psf="gaussian")


BACKENDS = [(BID(psf_size=3), "vb"), (BID(psf_size=3), "gibbs"), (ImageRVM(kernels=(2.0,)), "dft")]


def _backend_options_of_any_type(model, backend, options, data) -> None:
    spec = registry.get(model, backend)
    resolved = refused_by_bayeszoo(lambda: spec.resolve(options, model, data))
    if resolved is not None:
        capped = {**options, **{k: min(v, 3) for k, v in options.items() if k in ("max_iter", "cg_iter",
                                                                                  "cg_max_iter", "thin")}}
        if "anneal_iter" in capped and any(t > 1 for t in capped.get("anneal_temperatures", (1.0,))):
            capped["anneal_iter"] = 1
        refused_by_bayeszoo(lambda: bz.fit(model, data, backend, draws=1, tune=0, chains=1, progress=False,
                                           **capped))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("which", range(len(BACKENDS)))
@FAST
@given(data=st.data())
def test_backend_options_of_any_type(small_image, which, data):
    model, backend = BACKENDS[which]
    names = list(registry.get(model, backend).options)
    options = data.draw(st.dictionaries(st.sampled_from(names), ANY_VALUE, max_size=2))
    _backend_options_of_any_type(model, backend, options, small_image)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("which", range(len(BACKENDS)))
@SLOW
@given(data=st.data())
def test_backend_options_of_any_type_many(small_image, which, data):
    model, backend = BACKENDS[which]
    names = list(registry.get(model, backend).options)
    options = data.draw(st.dictionaries(st.sampled_from(names), ANY_VALUE, max_size=3))
    _backend_options_of_any_type(model, backend, options, small_image)


# --------------------------------------------------------------------------------------------- predict inputs
@pytest.fixture(scope="module")
def image_fits(small_image):
    bid, rvm = BID(psf_size=3), ImageRVM(kernels=(2.0,))
    return [(bid, bz.fit(bid, small_image, "vb", draws=2, chains=1, progress=False, max_iter=2)),
            (rvm, bz.fit(rvm, small_image, "dft", draws=2, chains=1, progress=False, max_iter=2))]


X_NEW = st.one_of(
    ANY_VALUE,
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=3),
    st.lists(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=3), max_size=3),
    st.lists(st.lists(st.floats(-3, 20), min_size=2, max_size=2), min_size=1, max_size=4),
    st.lists(st.lists(st.integers(-2, 18), min_size=2, max_size=2), min_size=1, max_size=4))


def _predict_inputs(image_fits, X_new) -> None:
    for model, fit in image_fits:
        values = refused_by_bayeszoo(lambda: model.predict(fit, X_new))
        if values is not None:
            assert np.all(np.isfinite(values))


@pytest.mark.timeout(60)
@FAST
@given(X_new=X_NEW)
def test_predict_inputs_of_any_kind(image_fits, X_new):
    _predict_inputs(image_fits, X_new)


@pytest.mark.slow
@pytest.mark.timeout(600)
@SLOW
@given(X_new=X_NEW)
def test_predict_inputs_of_any_kind_many(image_fits, X_new):
    _predict_inputs(image_fits, X_new)


# --------------------------------------------------------------------------------------------- dataset loaders
LOADERS = {"bid_blocks": bid_data.bid_blocks, "make_psf": lambda name="gaussian": bid_data.make_psf(name), "sinc2d_image": imagervm_data.sinc2d_image_problem,
           "detection_scenes": imagervm_data.detection_scenes, "target_image": imagervm_data.target_image,
           "gaussian_psf": lambda variance=3.0, radius=None: bid_data.gaussian_psf(variance, radius), "uniform_psf": bid_data.uniform_psf,
           "motion_psf": bid_data.motion_psf, "coins": bz.datasets._LOADERS["coins"]}
LOADER_VALUES = {"name": st.one_of(st.sampled_from(["gaussian", "uniform", "motion"]), ANY_VALUE),
                 "psf": st.one_of(st.sampled_from(["gaussian", "uniform", "motion"]), ANY_VALUE),
                 "snr_db": st.one_of(st.floats(-200, 400), ANY_VALUE), "seed": st.one_of(st.integers(0, 99), ANY_VALUE),
                 "size": st.one_of(st.integers(-2, 40), ANY_VALUE), "n_blocks": st.one_of(st.integers(-2, 8), ANY_VALUE),
                 "noise_var": st.one_of(st.floats(0, 30), ANY_VALUE), "extent": st.one_of(st.floats(0, 20), ANY_VALUE),
                 "n_present": st.one_of(st.integers(-1, 3), ANY_VALUE), "n_absent": st.one_of(st.integers(-1, 3),
                                                                                               ANY_VALUE),
                 "target_peak": st.one_of(st.floats(0, 100), ANY_VALUE),
                 "variance": st.one_of(st.floats(0, 30), SCALE, ANY_VALUE), "radius": st.one_of(st.integers(-1, 9),
                                                                                               ANY_VALUE),
                 "side": st.one_of(st.integers(-1, 9), ANY_VALUE), "s_x": st.one_of(st.integers(-1, 6), ANY_VALUE),
                 "s_y": st.one_of(st.integers(-1, 3), ANY_VALUE), "u0": st.one_of(st.floats(0, 2), ANY_VALUE),
                 "a": st.one_of(st.floats(0, 1), ANY_VALUE),
                 "crop": st.one_of(st.none(), st.integers(-1, 40), st.tuples(st.integers(-2, 40), st.integers(-2, 40),
                                                                             st.integers(-2, 40)), ANY_VALUE)}


def _loader(name: str, options: dict) -> None:
    if name == "coins":                 # a small image: its size and crop are among the options
        options.setdefault("size", 24)
    result = refused_by_bayeszoo(lambda: LOADERS[name](**options))
    if isinstance(result, bz.datasets.Dataset):
        assert np.all(np.isfinite(result.y))
    elif isinstance(result, np.ndarray):
        assert np.all(np.isfinite(result))


def _loader_options(data, name):
    params = list(inspect.signature(LOADERS[name]).parameters)
    return data.draw(st.fixed_dictionaries({}, optional={p: LOADER_VALUES[p] for p in params}))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(LOADERS))
@FAST
@given(data=st.data())
def test_loader_options(name, data):
    _loader(name, _loader_options(data, name))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", sorted(LOADERS))
@SLOW
@given(data=st.data())
def test_loader_options_many(name, data):
    _loader(name, _loader_options(data, name))
