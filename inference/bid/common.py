"""What the BID backends share: the problem's fixed operators and starting weights, Gamma-factor helpers, working
memory and default draw counts."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import digamma, gammaln

from bayeszoo.inference.timing import Timer  # noqa: F401  (re-exported)
from bayeszoo.numerics import fft as _fft
from bayeszoo.memory_guard import Need, dense

LOG_2PI = float(np.log(2.0 * np.pi))
DEFAULT_DRAW_VALUES = 5_000_000   # chains x draws x pixels of a run whose counts are not given (40 MB of float64)
MAX_DEFAULT_DRAWS = 1000


@dataclass
class Problem:
    """The fixed parts of one BID problem (Tzikas PhD ch. 5): image, kernels in the Fourier domain, priors."""

    g: np.ndarray              # degraded image (R, C)
    shape: tuple[int, int]
    phi_hat: np.ndarray        # rfft2 of the PSF kernel phi (5.4)
    q_hats: list[np.ndarray]   # rfft2 of the image-prior filters Q^k (5.10-5.11, or SAR 5.54)
    q_stencils: list           # the same filters as shift stencils (cheaper products, _fft.STENCILS)
    mask: np.ndarray           # where the PSF weights live
    psf_prior: str             # "St" or "G"
    noise_prior: str
    image_prior: str
    a_alpha: float
    b_alpha: float
    a_beta: float
    b_beta: float
    a_gamma: float
    b_gamma: float
    w0: np.ndarray             # the thesis's initial weights: w fitted to h_in (BID.initial_weights, §5.4.4)
    unit: float = 1.0          # the data's intensity unit (BID.intensity_unit); the hyperparameters are for unit 1
    known_otf: np.ndarray | None = None   # rfft2 of the given PSF (BID psf="known"); None when it is estimated

    @property
    def known(self) -> bool:
        return self.known_otf is not None

    def otf(self, w: np.ndarray) -> np.ndarray:
        """rfft2 of the PSF: the given one, or h = phi * w from the weights ``w`` (batched)."""
        return self.known_otf if self.known else _fft.rfft2(w) * self.phi_hat

    @property
    def M(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def P(self) -> int:
        return int(self.mask.sum())


def make_problem(model, data) -> Problem:
    model.validate(data)
    g = model.observed_image(data)
    shape = g.shape
    psf_p, noise_p, image_p = model.priors
    precisions = model.precision_priors(g)                 # noise / image rates in the data's intensity unit
    if model.known:             # no weights: an empty support, no initial weights, the given PSF
        mask, w0, known_otf = np.zeros(shape, dtype=bool), np.zeros(shape), _fft.otf(model.known_psf(data), shape)
    else:
        mask, w0, known_otf = model.support_mask(shape), model.initial_weights(shape), None
    return Problem(g=g, shape=shape, phi_hat=_fft.rfft2(_fft.gaussian_basis(shape, model.sigma_phi2)),
                   q_hats=[_fft.rfft2(q) for q in _fft.difference_kernels(shape, image_p)],
                   q_stencils=_fft.STENCILS[image_p], mask=mask, psf_prior=psf_p, noise_prior=noise_p,
                   image_prior=image_p, a_alpha=float(model.a_alpha), b_alpha=float(model.b_alpha), w0=w0,
                   unit=model.intensity_unit(g), known_otf=known_otf, **precisions)


def memory(image_arrays: float):
    """A backend's working memory (``bayeszoo.memory_guard``): ``image_arrays`` float64 arrays of the image's size
    alive at its peak (the images, the PSF and its weights, their FFTs, the CG vectors); the stored draws are
    counted apart."""
    def need(model, data, options) -> Need:
        rows, cols = model.image_shape(data)
        return Need({f"{image_arrays:g} arrays of the {rows} x {cols} image": dense(rows, cols, image_arrays)},
                    "ask for fewer draws or chains (each draw holds the whole image), or deconvolve a crop")
    return need


def default_counts(model, data, *, chains: int, tune_per_draw: float) -> dict:
    """Draw counts for a run whose counts are not given: ``chains`` chains of as many draws as fit
    DEFAULT_DRAW_VALUES for this image (at most MAX_DEFAULT_DRAWS, at least 1) and ``tune_per_draw`` warm-up
    sweeps per draw."""
    rows, cols = model.image_shape(data)
    draws = int(min(MAX_DEFAULT_DRAWS, max(1, DEFAULT_DRAW_VALUES // (chains * rows * cols))))
    return {"draws": draws, "tune": int(round(tune_per_draw * draws)), "chains": chains}


def gamma_log_prior(shape: float, rate: float, E_x, E_log_x):
    """<log Gamma(x | shape, rate)> summed; shape = rate = 0 is the improper Jeffreys prior 1/x (digest §1).
    With shape or rate 0 the prior x^(shape-1) e^(-rate x) is improper: it has no normalising constant, so the
    bound keeps only its x-dependent terms (a constant offset, as for the Jeffreys prior)."""
    if shape == 0 or rate == 0:
        return np.sum((shape - 1.0) * E_log_x - rate * E_x)
    return np.sum(shape * np.log(rate) - gammaln(shape) + (shape - 1.0) * E_log_x - rate * E_x)


def gamma_entropy(shape, rate):
    """Entropy of Gamma(shape, rate) summed over elements: shape - log rate + log Gamma(shape) + (1 - shape) psi(shape)."""
    shape = np.broadcast_to(shape, np.shape(rate))
    return np.sum(shape - np.log(rate) + gammaln(shape) + (1.0 - shape) * digamma(shape))


def gamma_moments(shape, rate):
    """<x>, <log x> of Gamma(shape, rate)."""
    return shape / rate, digamma(shape) - np.log(rate)
