"""The named benchmark problems: one definition that the demo, the benchmarks and the reference builder share.

A :class:`Problem` is a model and a dataset (both made by factories, so nothing loads at import), a short
description, the two independent engines whose agreement makes its reference (:class:`Engine`), and, for the
problems the demo shows, which backends and sizes the demo runs (:class:`Demo`). ``find(model, data)`` gives the
problem a (model, data) pair is, by ``model.spec()`` and ``data.fingerprint()``.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from bayeszoo import datasets, models
from bayeszoo.datasets import Dataset
from bayeszoo.results import Fit, build_fit


@dataclass(frozen=True)
class Equivalent:
    """Another model with the same posterior, for an engine the problem's own family lacks: ``problem(model,
    data)`` gives (model, data) of the other family, ``back(fit, model, data)`` the fit in the problem's variables."""

    description: str
    problem: Callable
    back: Callable


@dataclass(frozen=True)
class Engine:
    """One long run behind a reference: a backend with its counts and options (``via``: run on an equivalent
    model)."""

    backend: str
    draws: int
    tune: int
    chains: int
    options: dict = field(default_factory=dict)
    via: Equivalent | None = None

    @property
    def label(self) -> str:
        return self.backend if self.via is None else f"{self.backend} ({self.via.description})"


@dataclass(frozen=True)
class Demo:
    """What ``make demo`` runs on a problem: the backends, their common sizes and per-backend options."""

    backends: tuple[str, ...]
    sizes: dict
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Problem:
    key: str
    family: str
    description: str
    model: Callable[[], models.Model]
    data: Callable[[], Dataset]
    engines: tuple[Engine, Engine]
    demo: Demo | None = None
    used_by: tuple[str, ...] = ()

    def fingerprint(self) -> str:
        """``data().fingerprint()``, computed once."""
        return _fingerprint(self.key)


# ------------------------------------------------------------------------------ ImageRVM as a linear RVM
def _image_rvm_as_rvm(model, data):
    """The ImageRVM with one kernel is the RVM y = Phi w + e with Phi the N x N circulant design; an RVM with a
    linear kernel and no bias has Phi = X X^T, so X = Phi^(1/2) (Phi is symmetric positive definite)."""
    if model.n_kernels != 1:
        raise ValueError("only an ImageRVM with one kernel has a square design and so a linear-kernel RVM twin")
    Phi = model.dense_design(model.image_shape(data))
    values, vectors = np.linalg.eigh(Phi)
    if values.min() <= 0:
        raise ValueError("the ImageRVM design is not positive definite: it has no linear-kernel RVM twin")
    root = (vectors * np.sqrt(values)) @ vectors.T
    rvm = models.RVM(task="regression", kernel="linear", bias=False, a=model.a, b=model.b, c=model.c, d=model.d)
    return rvm, Dataset(root, data.y, name=f"{data.name} as a linear RVM", meta={"task": "regression"})


def _rvm_back_to_image(fit: Fit, model, data) -> Fit:
    shape = (model.n_kernels, *model.image_shape(data))
    post = fit.posterior
    n_chain, n_draw = fit.n_chains, fit.n_draws
    arrays = {"w": post["w"].values.reshape(n_chain, n_draw, *shape),
              "log_alpha": post["log_alpha"].values.reshape(n_chain, n_draw, *shape),
              "log_beta": post["log_beta"].values}
    return build_fit(model, data, fit.backend, fit.kind, arrays, timing=dict(fit.timing), info=dict(fit.info))


IMAGE_RVM_AS_RVM = Equivalent("the RVM with a linear kernel on Phi^(1/2)", _image_rvm_as_rvm, _rvm_back_to_image)


# ---------------------------------------------------------------------------------------------- problems
def _bid_crop():
    return datasets.load("cameraman", psf="uniform", snr_db=30, seed=0, crop=(40, 90, 32))


def _bid_crop_model(psf: str = "blind"):
    """The BID of the cameraman crop: weights on a 7 x 7 window, a proper PSF prior and a noise prior centred on
    the true noise level; ``psf="known"`` takes the PSF from the data (the same image model, non-blind)."""
    return models.BID(sigma_phi2=1.0, psf_size=7, a_alpha=1.0, b_alpha=1e-4, a_beta=100.0,
                      b_beta=100.0 * _bid_crop().meta["noise_var"], white_level=1.0, psf=psf)


def _sinc_two_lobes():
    """The 100 noisy sinc points of seed 0 (and the noise-free test grid) between sinc's second zeros, |x| <= 2 pi:
    the central peak and the two side lobes, which three Gaussian bases describe."""
    full = datasets.load("sinc", n=100, seed=0)
    keep, keep_test = (np.abs(X[:, 0]) <= 2 * np.pi for X in (full.X, full.X_test))
    return Dataset(full.X[keep], full.y[keep], full.X_test[keep_test], full.y_test[keep_test],
                   name="sinc, |x| <= 2 pi", meta={**full.meta, "preprocessing": "the points with |x| <= 2 pi of "
                                                   "sinc(n=100, seed=0); test targets are the noise-free function"})


PROBLEMS: dict[str, Problem] = {p.key: p for p in [
    Problem(
        key="rvm-sinc", family="rvm",
        description="RVM regression on 60 noisy sinc points (Tipping 2001), Gaussian kernel of width 3, "
                    "alpha ~ Gamma(5, 0.05), beta ~ Gamma(1, 0.001)",
        # alpha ~ Gamma(5, 0.05) (prior mean 100, as Gamma(1, 0.01)) has light enough tails for NUTS to run
        # without divergences; under Gamma(1, 0.01) it diverges even at target_accept 0.999 (rvm-sinc-100)
        model=lambda: models.RVM(task="regression", kernel="gauss", width=3.0, a=5.0, b=5e-2, c=1.0, d=1e-3),
        data=lambda: datasets.load("sinc", n=60, seed=0),
        engines=(Engine("gibbs", draws=20000, tune=1000, chains=4),
                 Engine("numpyro", draws=3000, tune=2000, chains=4, options={"target_accept": 0.99})),
        demo=Demo(backends=("numpyro", "em", "fast", "gibbs", "vb"),
                  sizes={"draws": 1000, "tune": 1000, "chains": 4}, options={"gibbs": {"draws": 4000}}),
        used_by=("demo",),
    ),
    Problem(
        key="rvm-sinc-100", family="rvm",
        description="RVM regression on 100 noisy sinc points, Gaussian kernel of width 3, alpha ~ Gamma(1, 0.01), "
                    "beta ~ Gamma(1, 0.001): the ESS benchmark's 'comparison' problem",
        model=lambda: models.RVM(width=3.0, a=1.0, b=1e-2, c=1.0, d=1e-3),
        data=lambda: datasets.load("sinc", n=100),
        engines=(Engine("gibbs", draws=20000, tune=1000, chains=4),
                 Engine("numpyro", draws=2000, tune=2000, chains=4, options={"target_accept": 0.99})),
        used_by=("benchmarks/bench_ess.py",),
    ),
    Problem(
        key="arvm-sinc", family="arvm",
        description="adaptive-kernel RVM regression on sinc's central peak and two side lobes (the 100 noisy sinc "
                    "points of seed 0 with |x| <= 2 pi, 57 of them): exactly 3 Gaussian bases with learned centres "
                    "and widths up to a quarter of the inputs' span, c = BIC, alpha ~ Gamma(5, 0.05), "
                    "beta ~ Gamma(1, 0.001)",
        # three bases, one per feature: with more (or fewer points) a basis has several places to go and chains
        # settle in different ones. Beyond 2 pi f is the far tail of a basis, whose sd no run pins down; unbounded
        # widths let a side lobe's basis spread over the edge in rare excursions (a low tail ESS). alpha ~
        # Gamma(5, 0.05) for the reason of rvm-sinc. Every try and its numbers: docs/families/arvm.md
        model=lambda: models.ARVM(task="regression", n_basis=3, width_range=(0.005, 0.25), a=5.0, b=5e-2, c=1.0,
                                  d=1e-3),
        data=_sinc_two_lobes,
        engines=(Engine("numpyro", draws=2000, tune=1000, chains=4, options={"target_accept": 0.99}),
                 Engine("nuts", draws=1000, tune=500, chains=4, options={"target_accept": 0.99})),
        demo=Demo(backends=("arvm", "numpyro", "blackjax_pathfinder"), sizes={"draws": 1000, "tune": 500, "chains": 4},
                  options={"numpyro": {"target_accept": 0.99}}),
        used_by=("demo",),
    ),
    Problem(
        key="gpc-sonar", family="gpc",
        description="GP classification of sonar (108 training / 100 test points, Nickisch thesis ch. 4), probit "
                    "likelihood, squared-exponential covariance at ln ell = 2, ln sf = 1",
        model=lambda: models.GPC(likelihood="probit", kernel="se", log_lengthscale=2.0, log_amplitude=1.0),
        data=lambda: datasets.load("sonar"),
        engines=(Engine("gibbs", draws=10000, tune=1000, chains=4),
                 Engine("numpyro", draws=2000, tune=1000, chains=4, options={"target_accept": 0.95})),
        demo=Demo(backends=("numpyro", "laplace", "ep", "gibbs", "kl", "vb", "fv", "lr"),
                  sizes={"draws": 1000, "tune": 1000, "chains": 4}),
        used_by=("demo", "benchmarks/bench_gpc.py"),
    ),
    Problem(
        key="pmkl-sources", family="pmkl",
        description="pMKL, convex rule, on Damoulas's three sources (informative, partially informative, noise) "
                    "with Neal's 3-class labels, 30 training / 150 test points, alpha ~ Gamma(5, 5)",
        # alpha ~ Gamma(5, 5) (prior mean 1, as the default Gamma(1, 1)): under the default the weights are
        # Student-t(2), NUTS diverges and the Gibbs sampler mixes too slowly (pmkl-sources-default)
        model=lambda: models.PMKL(rule="convex", tau=5.0, nu=5.0),
        data=lambda: datasets.load("mkl_sources", n=30, n_test=150, seed=0),
        engines=(Engine("gibbs", draws=20000, tune=1000, chains=4),
                 Engine("numpyro", draws=2000, tune=1000, chains=4, options={"target_accept": 0.95})),
        demo=Demo(backends=("gibbs", "vb", "em", "map", "mrvm1", "mrvm2", "numpyro"),
                  sizes={"draws": 500, "tune": 500, "chains": 4}, options={"gibbs": {"draws": 5000}}),
        used_by=("demo",),
    ),
    Problem(
        key="pmkl-sources-default", family="pmkl",
        description="pMKL, convex rule, on the three sources, 30 training / 150 test points, the default prior "
                    "alpha ~ Gamma(1, 1): the pmkl_ess benchmark's problem",
        model=lambda: models.PMKL(rule="convex"),
        data=lambda: datasets.load("mkl_sources", n=30, n_test=150, seed=0),
        engines=(Engine("gibbs", draws=20000, tune=1000, chains=4, options={"thin": 5}),
                 Engine("numpyro", draws=1000, tune=1000, chains=4, options={"target_accept": 0.99})),
        used_by=("benchmarks/bench_pmkl.py",),
    ),
    Problem(
        key="bid-cameraman-crop", family="bid",
        description="blind deconvolution of a 32 x 32 cameraman crop (uniform 7 x 7 blur, 30 dB; Tzikas PhD ch. 5), "
                    "weights on a 7 x 7 window, a proper PSF prior and a noise prior centred on the true noise level",
        model=_bid_crop_model,
        data=_bid_crop,
        # no engine converges here in hours (docs/families/bid.md): these runs record how far they are; the
        # gallery's "When no sampler converges" (gallery/no_convergence.ipynb) shows them
        engines=(Engine("gibbs", draws=1000, tune=500, chains=4, options={"thin": 10}),
                 Engine("numpyro", draws=300, tune=300, chains=4)),
        used_by=("gallery/no_convergence.ipynb",),
    ),
    Problem(
        key="bid-cameraman-crop-known-psf", family="bid",
        description="non-blind deconvolution of the same 32 x 32 cameraman crop (uniform 7 x 7 blur, 30 dB; Tzikas "
                    "PhD ch. 5) with the PSF known: the thesis's Student-t image and noise priors, the posterior of "
                    "the image alone",
        model=lambda: _bid_crop_model(psf="known"),
        data=_bid_crop,
        engines=(Engine("gibbs", draws=5000, tune=500, chains=4),
                 Engine("numpyro", draws=2000, tune=1000, chains=4)),
        demo=Demo(backends=("numpyro", "gibbs", "vb"), sizes={"draws": 1000, "tune": 300, "chains": 2},
                  # R-hat below 1.01 on all 1024 pixels takes about 1000 draws a chain; Gibbs starts near the
                  # posterior and its draws are nearly independent, so 50 sweeps of warm-up are plenty (R-hat 1.007,
                  # the same errors as after 100). vb keeps the model's noise prior, so that every backend targets
                  # the same posterior. ADVI (its ELBO settles in max_iter=5000 steps) is left out: docs/families/bid.md
                  options={"gibbs": {"tune": 50}, "vb": {"learn_noise_prior": False}}),
        used_by=("demo",),
    ),
    Problem(
        key="imagervm-sinc", family="imagervm",
        description="image RVM on a 12 x 12 sinc image (Tzikas PhD ch. 4), one Gaussian kernel of width 2, "
                    "alpha ~ Gamma(5, 0.05), beta ~ Gamma(1, 0.001)",
        # the prior of rvm-sinc, for the same reason
        model=lambda: models.ImageRVM(kernels=(2.0,), a=5.0, b=5e-2, c=1.0, d=1e-3),
        data=lambda: datasets.load("sinc2d_image", size=12, seed=0),
        engines=(Engine("gibbs", draws=20000, tune=1000, chains=4, via=IMAGE_RVM_AS_RVM),
                 Engine("numpyro", draws=3000, tune=2000, chains=4, options={"target_accept": 0.99})),
        demo=Demo(backends=("numpyro", "advi", "dft"), sizes={"draws": 1000, "tune": 1000, "chains": 4}),
        used_by=("demo",),
    ),
    Problem(
        key="slm-spikes", family="slm",
        description="sparse linear model (Nickisch thesis §5.5): 32 spikes of Fig. 5.2 measured by 24 random "
                    "unit-norm rows (16 held out), sigma2 = 0.005, Laplace potentials exp(-5 |u_j|), B = I",
        model=lambda: models.SLM(potential="laplace", tau=5.0, sigma2=0.005),
        data=lambda: datasets.load("slm_signal", kind="spikes", n=32, m=24, n_test=16, seed=0),
        engines=(Engine("gibbs", draws=20000, tune=1000, chains=4),
                 Engine("numpyro", draws=2000, tune=1000, chains=4, options={"target_accept": 0.95})),
        demo=Demo(backends=("numpyro", "gibbs", "ep", "dloop", "map", "sbl"),
                  sizes={"draws": 1000, "tune": 500, "chains": 4}, options={"gibbs": {"draws": 4000}}),
        used_by=("demo",),
    ),
]}


def keys() -> list[str]:
    return list(PROBLEMS)


def problem(key: str) -> Problem:
    if key not in PROBLEMS:
        raise ValueError(f"unknown catalogue problem {key!r}; known: {', '.join(PROBLEMS)}")
    return PROBLEMS[key]


@functools.cache
def _fingerprint(key: str) -> str:
    return PROBLEMS[key].data().fingerprint()


@functools.cache
def _spec(key: str) -> str:
    return json.dumps(PROBLEMS[key].model().spec(), sort_keys=True)


def find(model, data: Dataset) -> Problem | None:
    """The problem that (model, data) is, or None: the model spec must be equal and the data identical (the
    data are made only for the problems whose model matches)."""
    spec = json.dumps(model.spec(), sort_keys=True)
    for key, prob in PROBLEMS.items():
        if _spec(key) == spec and prob.fingerprint() == data.fingerprint():
            return prob
    return None
