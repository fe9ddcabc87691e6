"""Blind image deconvolution with Student-t priors (Tzikas PhD ch. 5, "StStSt"; digest §5).

    g = h * f + n   (2-D circular convolution, 5.1),      h = phi * w   (5.6),
    phi(x) = exp(-|x|^2 / (2 sigma_phi^2)) centred at the origin (one kernel per pixel, 5.4),
    w_i | alpha ~ N(0, 1/alpha_i),  n_i | beta ~ N(0, 1/beta_i),  (Q^k f)_i | gamma ~ N(0, 1/gamma_i^k),
    alpha_i ~ Gamma(a_alpha, b_alpha),  beta_i ~ Gamma(a_beta, b_beta),  gamma_i^k ~ Gamma(a_gamma, b_gamma).

``variant`` names the priors in the thesis's order [PSF weights][noise][image local differences] (§5.4.1):
"St" is the Student-t (one Gamma precision per element, 5.8-5.9, 5.18-5.19, 5.13-5.17) and "G" the Gaussian
(one Gamma precision shared by the whole vector). St image priors use the first-order differences Q^1, Q^2
(5.10-5.11); G image priors use the SAR / Laplacian operator (5.54). The image prior is the improper product of
experts (5.16): its normaliser counts gamma_i^(1/2) per difference (for G: gamma^(M/2)).

Canonical posterior variables (every backend): ``image`` over (row, col) and ``psf`` over (prow, pcol), the
PSF on a centred window of side ``psf_view_side``. The likelihood is invariant under f -> s f, w -> w / s (the
sign flip s = -1 included) and the priors pin s only weakly, so both are reported normalised: ``psf = h / sum(h)`` and ``image = f * sum(h)``; these
are unchanged by the ambiguity and image * psf = f * h (psf sums to 1 over the whole image; the stored window
holds all of it up to the kernel's 3-sd tail). That is the normalisation that lets
the sampled and variational posteriors be compared (the thesis imposes none, digest §8).

``psf="known"`` is the non-blind problem (the thesis's image and noise model with the PSF given):
h is ``data.meta["true_psf"]`` divided by its sum, there are no weights w (so ``sigma_phi2``, ``psf_size``,
``a_alpha``, ``b_alpha``, ``init_psf_var`` and the variant's first letter play no part), and the one canonical
variable is ``image`` = f. The PSF is kept with every fit (``constant_data["known_psf"]``) for the pictures.
"""
from __future__ import annotations

import functools
from typing import ClassVar

import math
import re
from dataclasses import dataclass

import numpy as np

from bayeszoo import checks, datasets
from bayeszoo.datasets import Dataset
from bayeszoo.datasets.bid_data import MAX_INTENSITY, MIN_INTENSITY, check_intensities
from bayeszoo.models.base import ImageModel
from bayeszoo.models.family import Family

VARIANTS = ("GGG", "GGSt", "GStG", "GStSt", "StGG", "StGSt", "StStG", "StStSt")
PSF_MODES = ("blind", "known")   # estimate the PSF, or take it from data.meta["true_psf"]
#: range of the Gamma hyperparameters (a_alpha and b_alpha may also be 0); beyond it the samplers' precision draws
#: leave the floating-point range on some images (the thesis's values lie between 1e-6 and 1e4)
MIN_HYPER, MAX_HYPER = 1e-20, 1e20
DEFAULT_SUPPORT_VIEW = 15   # side of the reported PSF window when w lives on every pixel (psf_size=None)
LOG_2PI = math.log(2.0 * math.pi)


def parse_variant(variant: str) -> tuple[str, str, str]:
    """'StGSt' -> ('St', 'G', 'St'): priors of the PSF weights, the noise and the image differences."""
    m = re.fullmatch(r"(St|G)(St|G)(St|G)", variant) if isinstance(variant, str) else None
    if m is None:
        raise ValueError(f"BID variant must be one of {VARIANTS}, got {variant!r}")
    return m.group(1), m.group(2), m.group(3)


def marginal_logp(xp, sq, a: float, b: float, n: int, per_element: bool):
    """log of a Gaussian with a Gamma(a, b) precision integrated out (2.11), given the squared values ``sq``.

    ``per_element``: one precision per element (Student-t with nu = 2a, lambda = a/b, 3.62); else one
    precision shared by the ``n`` elements (a multivariate t). ``xp`` is the array module (pytensor.tensor or
    jax.numpy), so both declarations share this one formula.
    """
    from scipy.special import gammaln

    if per_element:
        const = a * math.log(b) - gammaln(a) + gammaln(a + 0.5) - 0.5 * LOG_2PI
        return n * const - (a + 0.5) * xp.sum(xp.log(b + 0.5 * sq))
    const = a * math.log(b) - gammaln(a) + gammaln(a + 0.5 * n) - 0.5 * n * LOG_2PI
    return const - (a + 0.5 * n) * xp.log(b + 0.5 * xp.sum(sq))


@dataclass
class BID(ImageModel):
    """Blind image deconvolution (Tzikas PhD ch. 5).

    Parameters
    ----------
    variant : one of GGG, GGSt, GStG, GStSt, StGG, StGSt, StStG, StStSt (PSF weights, noise, image).
    sigma_phi2 : width sigma_phi^2 of the Gaussian PSF kernel (thesis: 2 for Gaussian / uniform blurs, 1 for
        motion, 0.1 for Lenna).
    psf_size : an odd side (default 31): the weights w live on a centred psf_size x psf_size window (zero
        elsewhere); or None, the thesis's one weight per pixel. With a weight per pixel the diagonal Sigma_w (5.47)
        counts every unpruned weight as a fitted parameter: <n_i^2> gains (1/<beta>) x (the fraction of weights
        the data fix), so the bound cannot identify the noise level (it sinks towards 0 when learned and stays
        wherever its prior puts it otherwise; README). A window P wider than the blur (31 covers the thesis's
        7 x 7, 9 x 3 and variance-5 PSFs twice over) but small against the image (P/M) leaves an inflation of the
        noise variance of about 1 / (1 - P/M) (1.5 % at 256 x 256) and keeps the ARD pruning inside it.
    a_alpha, b_alpha : Gamma prior of the PSF-weight precisions. The thesis uses 0, 0 (improper, which ``vb``
        accepts); the default 1e-6 is the thesis's own "uninformative" value (§3.4.4) and can be sampled.
    a_beta, b_beta : noise precisions; thesis initial values: mean 1e3, variance 1e2 -> (1e4, 10).
    a_gamma, b_gamma : image-difference precisions; thesis: mean 1e2, variance 1e4 -> (1, 0.01).
    The noise and image-difference rates are for intensities on [0, 1] (the thesis's scale, digest §5.2): every
    backend converts them to the data's unit (``intensity_unit``), so a fit of c g is c times the fit of g.
    white_level : the intensity of white in the data (1 for [0, 1] images, 255 for 8-bit ones); None (default)
        takes ``max |g|``, right for a whole natural image but not for a dark crop (pass the image's white level).
    init_psf_var : variance of the Gaussian initial PSF h_in (3 in all the thesis's experiments); ISNR_h is
        measured against it (§5.11).
    psf : "blind" (default: the PSF is estimated) or "known": the PSF is ``data.meta["true_psf"]`` normalised to
        sum 1, the posterior is over the image alone (module docstring) and a dataset without a true PSF is
        refused.
    """

    variant: str = "StStSt"
    sigma_phi2: float = 2.0
    psf_size: int | None = 31
    a_alpha: float = 1e-6
    b_alpha: float = 1e-6
    a_beta: float = 1e4
    b_beta: float = 10.0
    a_gamma: float = 1.0
    b_gamma: float = 0.01
    init_psf_var: float = 3.0
    white_level: float | None = None
    psf: str = "blind"

    family = "bid"
    _parameter_constraints: ClassVar[dict] = {
        "variant": checks.OneOf(VARIANTS), "sigma_phi2": checks.POSITIVE,
        "psf_size": [None, checks.Where(checks.POSITIVE_INT, lambda side: side % 2 == 1, "an odd integer >= 1")],
        # 0: the thesis's improper prior (vb only); the image and noise priors need them > 0
        **{name: checks.Interval(float, 0, MAX_HYPER, "both") for name in ("a_alpha", "b_alpha")},
        **{name: checks.Interval(float, MIN_HYPER, MAX_HYPER, "both")
           for name in ("a_beta", "b_beta", "a_gamma", "b_gamma")},
        "white_level": [None, checks.Interval(float, MIN_INTENSITY, MAX_INTENSITY, "both")],
        "init_psf_var": checks.POSITIVE, "psf": checks.OneOf(PSF_MODES)}
    BLIND_ADVICE: ClassVar[str] = (
        "BID: the blind posterior is multimodal (image and PSF trade off along the blur / scale direction) and no "
        "engine has converged on it in hours, even on a 32 x 32 crop: read the fits as estimates, not samples, and "
        "judge them by isnr_f / isnr_f_shift against the true image (docs/families/bid.md).")
    KNOWN_ADVICE: ClassVar[str] = (
        "BID with the PSF known: the posterior of the image alone is reachable on crops (the catalogue's "
        "bid-cameraman-crop-known-psf); run gibbs or numpyro longer (more draws, thin for gibbs) before trusting a "
        "reference, and keep the image small (docs/families/bid.md).")

    @property
    def known(self) -> bool:
        """True when the PSF is given (``psf="known"``), not estimated."""
        return self.psf == "known"

    @property
    def compare_vars(self) -> tuple[str, ...]:
        return ("image",) if self.known else ("image", "psf")

    @property
    def reference_advice(self) -> str:
        return self.KNOWN_ADVICE if self.known else self.BLIND_ADVICE

    @property
    def priors(self) -> tuple[str, str, str]:
        return parse_variant(self.variant)

    def require_proper(self, backend: str) -> None:
        """Samplers need a proper PSF-weight prior (a_alpha, b_alpha > 0); only ``vb`` takes the thesis's 0. With the
        PSF known there are no weights and nothing to require."""
        if not self.known and (self.a_alpha <= 0 or self.b_alpha <= 0):
            raise ValueError(f"backend {backend!r} needs a_alpha > 0 and b_alpha > 0 (the improper a = b = 0 "
                             f"prior cannot be sampled); got a_alpha={self.a_alpha}, b_alpha={self.b_alpha}")

    # ---- data ----------------------------------------------------------------------------------------
    def validate(self, data: Dataset) -> None:
        super().validate(data)            # an image dataset (ImageModel)
        R, C = self.image_shape(data)
        if self.known and "true_psf" not in data.meta:
            raise ValueError(f"BID(psf='known') takes the PSF from data.meta['true_psf'], and dataset {data.name!r} "
                             f"has none: give it (bz.datasets.bid_data.image_problem(g, true_psf=h)) or use "
                             f"psf='blind'")
        side = self.psf_size or 1
        if not self.known and side > min(R, C):
            raise ValueError(f"the image ({R} x {C}) is smaller than the PSF support ({side} x {side})")
        check_intensities(self.observed_image(data), "BID: the degraded image",
                          zero="there is nothing to deconvolve")
        if "true_psf" in data.meta:
            from bayeszoo.datasets.bid_data import check_psf

            check_psf(data.meta["true_psf"], (R, C), "true psf")
        if "true_image" in data.meta and np.shape(data.meta["true_image"]) != (R, C):
            raise ValueError(f"BID: the true image has shape {np.shape(data.meta['true_image'])}, the image is {R} x {C}")

    def intensity_unit(self, g: np.ndarray) -> float:
        """The data's intensity unit, in which the hyperparameters are stated: ``white_level``, or max |g|."""
        if self.white_level is not None:
            return float(self.white_level)
        unit = float(np.max(np.abs(g)))
        if not unit > 0:
            raise ValueError("BID: the degraded image is zero everywhere; there is nothing to deconvolve")
        return unit

    def precision_priors(self, g: np.ndarray) -> dict[str, float]:
        """(a, b) of the noise and image-difference precisions in the data's unit: a precision of x / unit scales by
        unit^-2, so its Gamma rate scales by unit^2 (the shapes are unit-free)."""
        u2 = self.intensity_unit(g) ** 2
        return {"a_beta": float(self.a_beta), "b_beta": float(self.b_beta) * u2,
                "a_gamma": float(self.a_gamma), "b_gamma": float(self.b_gamma) * u2}

    def psf_view_side(self, shape: tuple[int, int]) -> int:
        """Side of the reported PSF window: the weight support plus the kernel's 3-sd reach, at most the image."""
        reach = int(math.ceil(3.0 * math.sqrt(self.sigma_phi2)))
        side = (self.psf_size or DEFAULT_SUPPORT_VIEW) + 2 * reach
        largest = min(shape) if min(shape) % 2 == 1 else min(shape) - 1
        return min(side, largest)

    def support_mask(self, shape: tuple[int, int]) -> np.ndarray:
        """Boolean image: where the PSF weights w may be non-zero (all pixels when psf_size is None)."""
        if self.psf_size is None:
            return np.ones(shape, dtype=bool)
        from bayeszoo.numerics import fft as _fft

        return _fft.embed(np.ones((self.psf_size, self.psf_size)), shape) > 0

    def var_dims(self, data: Dataset) -> dict[str, tuple[str, ...]]:
        if self.known:
            return {"image": ("row", "col")}
        return {"image": ("row", "col"), "psf": ("prow", "pcol")}

    def coords(self, data: Dataset) -> dict[str, np.ndarray]:
        R, C = self.image_shape(data)
        V = self.psf_view_side((R, C))
        offsets = np.arange(V) - V // 2
        return {"row": np.arange(R), "col": np.arange(C), "prow": offsets, "pcol": offsets,
                "obs": np.arange(R * C)}

    def constant_data(self, data: Dataset) -> dict:
        if self.known:
            return {"X": data.X, "known_psf": self.known_psf(data)}
        return {"X": data.X}

    def known_psf(self, data: Dataset) -> np.ndarray:
        """The given PSF window, ``data.meta["true_psf"]`` divided by its sum (``psf="known"``)."""
        from bayeszoo.datasets.bid_data import check_psf

        if "true_psf" not in data.meta:
            raise ValueError(f"BID: dataset {data.name!r} has no true_psf in its meta")
        h = check_psf(data.meta["true_psf"], self.image_shape(data), "true psf")
        return h / h.sum()

    # ---- the pieces every backend shares -------------------------------------------------------------
    def initial_psf(self, shape: tuple[int, int]) -> np.ndarray:
        """h_in: the Gaussian PSF of variance ``init_psf_var`` (§5.4.4), as a centred window."""
        from bayeszoo.datasets.bid_data import gaussian_psf

        r = math.ceil(3.0 * math.sqrt(self.init_psf_var))              # +-3 sd, cut to the image
        return gaussian_psf(self.init_psf_var, radius=r if 2 * r + 1 <= min(shape) else (min(shape) - 1) // 2)

    def initial_weights(self, shape: tuple[int, int]) -> np.ndarray:
        """w fitted to h_in (§5.4.4): w = beta Sigma_w Phi^T h_in, Sigma_w = (beta Phi^T Phi + alpha I)^-1, solved
        in the Fourier domain with alpha / beta = 1e-4 max|phi_hat|^2 (the thesis does not state them), then
        restricted to the weight support."""
        from bayeszoo.numerics import fft as _fft

        phi_hat = _fft.rfft2(_fft.gaussian_basis(shape, self.sigma_phi2))
        h_hat = _fft.otf(self.initial_psf(shape), shape)
        ridge = 1e-4 * float(np.max(np.abs(phi_hat)) ** 2)
        w = _fft.irfft2(np.conj(phi_hat) * h_hat / (np.abs(phi_hat) ** 2 + ridge), shape)
        return np.where(self.support_mask(shape), w, 0.0)

    def canonical(self, f: np.ndarray, w: np.ndarray | None) -> dict[str, np.ndarray]:
        """``image`` = f sum(h) and ``psf`` = h / sum(h) on the view window, h = phi * w (batched over leading axes);
        with the PSF known (normalised to sum 1) ``image`` = f and ``w`` is not used."""
        from bayeszoo.numerics import fft as _fft

        if self.known:
            return {"image": f}
        shape = f.shape[-2:]
        phi_hat = _fft.rfft2(_fft.gaussian_basis(shape, self.sigma_phi2))
        h = _fft.conv(w, phi_hat)
        total = h.sum(axis=(-2, -1))[..., None, None]
        return {"image": f * total, "psf": _fft.window(h, self.psf_view_side(shape)) / total}

    # ---- declarations (crops) ------------------------------------------------------------------------
    def _declaration_arrays(self, data: Dataset) -> dict:
        """Fixed arrays of the declarations: the spectrum of the fixed part of the blur (the known PSF, or the
        Gaussian kernel phi), the weight-support offsets, the PSF-view matrix and the affine reparametrisation of
        (f, w). A spectrum is rfft2 of an image-sized kernel with its real and imaginary parts on a trailing axis
        of 2 (PyTensor's layout, and a real array, which the NumPyro backends can pass traced)."""
        from bayeszoo.numerics import fft as _fft

        R, C = self.image_shape(data)
        g = self.observed_image(data)

        def spectrum(kernel):
            k_hat = _fft.rfft2(kernel)
            return np.stack([k_hat.real, k_hat.imag], axis=-1)

        if self.known:
            return dict(shape=(R, C), g=g, **self.precision_priors(g), f0=g, f_scale=F_SCALE * self.intensity_unit(g),
                        kernel_hat=spectrum(_fft.embed(self.known_psf(data), (R, C))))

        mask = self.support_mask((R, C))
        sr, sc = np.nonzero(mask)                                     # support offsets (mod R, C)
        V = self.psf_view_side((R, C))
        phi = _fft.gaussian_basis((R, C), self.sigma_phi2)
        vr = (np.arange(V) - V // 2) % R
        vc = (np.arange(V) - V // 2) % C
        # psf window = view @ w: h(v) = sum_j w_j phi(v - s_j)
        view = phi[(vr[:, None, None] - sr[None, None, :]) % R, (vc[None, :, None] - sc[None, None, :]) % C]
        w0 = self.initial_weights((R, C))[mask]
        return dict(shape=(R, C), g=g, **self.precision_priors(g), kernel_hat=spectrum(phi), sr=sr, sc=sc,
                    view=view.reshape(V * V, -1), V=V, phi_sum=float(phi.sum()), P=int(mask.sum()),
                    f0=g, w0=w0, f_scale=F_SCALE * self.intensity_unit(g),
                    w_scale=W_SCALE * float(np.max(np.abs(w0))))

    def _log_density(self, xp, roll, blur, f, w, arr):
        """log p(g, f, w) with the precisions integrated out, for the array module ``xp`` (shared formula); with the
        PSF known, log p(g, f) (``w`` is None). ``blur(f, w, arr)`` is h * f in that library
        (:func:`pytensor_blur`, :func:`jax_blur`)."""
        psf_p, noise_p, image_p = self.priors
        R, C = arr["shape"]
        M = R * C
        logp = 0.0 if self.known else marginal_logp(xp, w * w, self.a_alpha, self.b_alpha, arr["P"], psf_p == "St")
        resid = arr["g"] - blur(f, w, arr)
        logp = logp + marginal_logp(xp, resid * resid, arr["a_beta"], arr["b_beta"], M, noise_p == "St")
        if image_p == "St":
            diffs = [f - roll(f, -1, 0), f - roll(f, -1, 1)]          # (5.10), (5.11)
        else:
            diffs = [4.0 * f - roll(f, 1, 0) - roll(f, -1, 0) - roll(f, 1, 1) - roll(f, -1, 1)]   # SAR (5.54)
        for eps in diffs:
            logp = logp + marginal_logp(xp, eps * eps, arr["a_gamma"], arr["b_gamma"], M, image_p == "St")
        return logp

    def pymc_model(self, data: Dataset):
        """The joint density of (f, w) in PyMC, the Gamma precisions integrated out analytically (2.11).

        Free variables ``z_f`` (row, col) and ``z_w`` (support) with f = g + F_SCALE z_f and
        w = w_in + w_scale z_w: an affine reparametrisation around the thesis's initial point (constant
        Jacobian, same posterior) that starts every chain in the positive-scale mode of the sign symmetry.
        ``image`` and ``psf`` are Deterministics (normalised as in the class docstring). With the PSF known only
        ``z_f`` is free and ``image`` = f.
        """
        import pymc as pm
        import pytensor.tensor as pt

        self.validate(data)
        self.require_proper("pymc")
        arr = self._declaration_arrays(data)
        coords = {k: v for k, v in self.coords(data).items()}
        if self.known:
            with pm.Model(coords=coords) as model:
                z_f = pm.Flat("z_f", dims=("row", "col"))
                f = arr["f0"] + arr["f_scale"] * z_f
                pm.Potential("log_joint", self._log_density(pt, pt.roll, pytensor_blur, f, None, arr))
                pm.Deterministic("image", f, dims=("row", "col"))
            return model
        coords["support"] = np.arange(arr["P"])
        with pm.Model(coords=coords) as model:
            z_f = pm.Flat("z_f", dims=("row", "col"))
            z_w = pm.Flat("z_w", dims="support")
            f = arr["f0"] + arr["f_scale"] * z_f
            w = arr["w0"] + arr["w_scale"] * z_w
            pm.Potential("log_joint", self._log_density(pt, pt.roll, pytensor_blur, f, w, arr))
            total = pt.sum(w) * arr["phi_sum"]
            pm.Deterministic("image", f * total, dims=("row", "col"))
            pm.Deterministic("psf", (pt.dot(arr["view"], w) / total).reshape((arr["V"], arr["V"])),
                             dims=("prow", "pcol"))
        return model

    def numpyro_model(self, data: Dataset):
        """The same density as :meth:`pymc_model`, as a NumPyro model function of no arguments (its data bound
        by ``functools.partial``: :class:`~bayeszoo.models.base.Model`)."""
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from numpyro.distributions import constraints

        self.validate(data)
        self.require_proper("numpyro")
        arr = self._declaration_arrays(data)
        R, C = arr["shape"]
        images = {k: v for k, v in arr.items() if isinstance(v, np.ndarray)}

        def known_psf_model(images):
            jarr = {**arr, **{k: jnp.asarray(v) for k, v in images.items()}}
            z_f = numpyro.sample("z_f", dist.ImproperUniform(constraints.real, (), event_shape=(R, C)))
            f = jarr["f0"] + arr["f_scale"] * z_f
            numpyro.factor("log_joint", self._log_density(jnp, jnp.roll, jax_blur, f, None, jarr))
            numpyro.deterministic("image", f)

        if self.known:
            return functools.partial(known_psf_model, images=images)

        def model(images):
            jarr = {**arr, **{k: jnp.asarray(v) for k, v in images.items()}}
            z_f = numpyro.sample("z_f", dist.ImproperUniform(constraints.real, (), event_shape=(R, C)))
            z_w = numpyro.sample("z_w", dist.ImproperUniform(constraints.real, (), event_shape=(arr["P"],)))
            f = jarr["f0"] + arr["f_scale"] * z_f
            w = jarr["w0"] + arr["w_scale"] * z_w
            numpyro.factor("log_joint", self._log_density(jnp, jnp.roll, jax_blur, f, w, jarr))
            total = jnp.sum(w) * arr["phi_sum"]
            numpyro.deterministic("image", f * total)
            numpyro.deterministic("psf", (jarr["view"] @ w / total).reshape(arr["V"], arr["V"]))

        return functools.partial(model, images=images)

    # ---- prediction and scoring ----------------------------------------------------------------------
    @staticmethod
    def _mean(fit, name) -> np.ndarray:
        return np.asarray(fit.idata.posterior[name].mean(("chain", "draw")).values, dtype=float)

    def restored(self, fit) -> tuple[np.ndarray, np.ndarray]:
        """Posterior means of the (normalised) image and PSF window; with the PSF known, the image's mean and the
        given PSF (kept with the fit) on the same view window."""
        self.check_fit(fit)
        image = self._mean(fit, "image")
        if self.known:
            from bayeszoo.numerics import fft as _fft

            shape = image.shape
            given = np.asarray(fit.idata.constant_data["known_psf"].values, dtype=float)
            return image, _fft.window(_fft.embed(given, shape), self.psf_view_side(shape))
        return image, self._mean(fit, "psf")

    def log_likelihood(self, fit, data: Dataset) -> np.ndarray | None:
        """log p(g_i | image, psf) of every pixel at every draw, the pixel's own noise precision integrated out (St
        noise: a Student-t in the residual g - h * f, 5.18-5.19). None for G noise, whose one shared precision
        couples the pixels. A blind fit's psf is its stored window, which holds h up to the kernel's 3-sd tail."""
        from scipy.special import gammaln

        from bayeszoo.numerics import fft as _fft

        if self.priors[1] != "St":
            return None
        g = self.observed_image(data)
        shape = g.shape
        images = np.asarray(fit.idata.posterior["image"].values, dtype=float).reshape(-1, *shape)
        if self.known:
            pred = _fft.conv(images, _fft.rfft2(_fft.embed(self.known_psf(data), shape)))
        else:
            psfs = np.asarray(fit.idata.posterior["psf"].values, dtype=float)
            psfs = psfs.reshape(-1, *psfs.shape[-2:])
            pred = np.stack([_fft.conv(f, _fft.rfft2(_fft.embed(h, shape))) for f, h in zip(images, psfs)])
        prior = self.precision_priors(g)
        a, b = prior["a_beta"], prior["b_beta"]
        const = a * math.log(b) - gammaln(a) + gammaln(a + 0.5) - 0.5 * LOG_2PI
        return (const - (a + 0.5) * np.log(b + 0.5 * (g - pred) ** 2)).reshape(images.shape[0], -1)

    def check_inputs(self, fit, X_new) -> np.ndarray:
        """Finite (n, 2) pixel coordinates (row, col); one pair may be given as is."""
        return super().check_inputs(fit, as_pixel_rows(X_new))

    def predict(self, fit, X_new) -> np.ndarray:
        """Restored intensities (posterior mean of ``image``) at pixel coordinates X_new (n, 2) = (row, col), rounded
        to the nearest pixel; one (row, col) pair may be given as is."""
        self.check_fit(fit)
        return self.pixel_values(self._mean(fit, "image"), self.check_inputs(fit, X_new))

    def score(self, fit, data: Dataset) -> dict:
        """``isnr_f`` = 10 log10(|f - g|^2 / |f - f_hat|^2) and ``isnr_h`` = 10 log10(|h - h_in|^2 / |h - h_hat|^2)
        (§5.11; h_in is the initial PSF), from the posterior means, when ``data.meta`` holds the truth (else
        NaN; ``isnr_h`` is NaN with the PSF known, as nothing is estimated); ``isnr_f_shift``: the same ISNR up to a shift, the field's measure for a blind estimate (Levin et al.
        2009: image and PSF are identifiable only up to opposite shifts), 10 log10(SSD(g) / SSD(f_hat at its best
        sub-pixel shift)) on the truth without a 15-pixel frame (:func:`ssd_upto_shift`; NaN for images of 30
        pixels or fewer a side); ``seconds_per_iter``: a hand-written backend's time per VB iteration / Gibbs
        sweep, or a generic backend's wall time per draw and chain (warm-up included)."""
        from bayeszoo.numerics import fft as _fft

        self.check_fit(fit)
        self.validate(data)
        shape = self.image_shape(data)
        f_hat, h_hat = self.restored(fit)
        if f_hat.shape != shape:
            raise ValueError(f"this fit is of a {f_hat.shape[0]} x {f_hat.shape[1]} image but the data are "
                             f"{shape[0]} x {shape[1]}")
        out = {"isnr_f": math.nan, "isnr_f_shift": math.nan, "isnr_h": math.nan}
        if "true_image" in data.meta:
            f = np.asarray(data.meta["true_image"], dtype=float)
            g = self.observed_image(data)
            out["isnr_f"] = isnr(f, g, f_hat)
            if min(shape) > 2 * SHIFT_BORDER:
                unshifted = ssd_upto_shift(g, f, max_shift=0, border=SHIFT_BORDER)   # the same frame, as observed
                best = ssd_upto_shift(f_hat, f, border=SHIFT_BORDER)
                out["isnr_f_shift"] = 10 * math.log10(unshifted / best) if best > 0 else math.inf
        if "true_psf" in data.meta and not self.known:
            h = _fft.embed(np.asarray(data.meta["true_psf"], dtype=float), shape)
            h_in = _fft.embed(self.initial_psf(shape), shape)
            out["isnr_h"] = isnr(h, h_in, _fft.embed(h_hat, shape))
        per_iter = fit.info.get("seconds_per_iteration")
        if per_iter is None:
            settings = fit.info.get("settings", {})
            steps = settings.get("chains", fit.n_chains) * (settings.get("tune", 0) + fit.n_draws)
            per_iter = fit.seconds / max(int(steps), 1)
        out["seconds_per_iter"] = float(per_iter)
        return out


def pytensor_blur(f, w, arr):
    """h * f in PyTensor: irfft2(rfft2(f) K [rfft2(W)]), K the fixed spectrum ``arr["kernel_hat"]`` (the known
    PSF's, or phi's) and W the weights w placed on their support (none with the PSF known): 2-D circular
    convolutions, as (5.1) and (5.6). ``pytensor.tensor.fft`` transforms every axis but the first (a batch of one
    here) and keeps a spectrum's real and imaginary parts on a trailing axis of 2."""
    import pytensor.tensor as pt
    from pytensor.tensor import fft

    def times(a, b):   # complex product, parts on the last axis: a0 (b0, b1) + a1 (-b1, b0), with no join
        return a[..., :1] * b + a[..., 1:] * b[..., ::-1] * np.array([-1.0, 1.0])

    R, C = arr["shape"]
    spec = times(fft.rfft(f[None])[0], arr["kernel_hat"])
    if w is not None:
        W = pt.set_subtensor(pt.zeros((R, C))[arr["sr"], arr["sc"]], w)
        spec = times(spec, fft.rfft(W[None])[0])
    return fft.irfft(spec[None], is_odd=C % 2 == 1)[0]


def jax_blur(f, w, arr):
    """h * f in JAX, the same product of spectra as :func:`pytensor_blur`."""
    import jax.numpy as jnp

    R, C = arr["shape"]
    spec = jnp.fft.rfft2(f) * (arr["kernel_hat"][..., 0] + 1j * arr["kernel_hat"][..., 1])
    if w is not None:
        spec = spec * jnp.fft.rfft2(jnp.zeros((R, C)).at[arr["sr"], arr["sc"]].set(w))
    return jnp.fft.irfft2(spec, s=(R, C))


F_SCALE = 0.05   # step of the declarations' z_f, in units of the image's intensity unit
W_SCALE = 0.05   # fraction of the largest initial weight per unit of z_w


def isnr(truth: np.ndarray, before: np.ndarray, estimate: np.ndarray) -> float:
    """Improvement in SNR (dB): 10 log10(|truth - before|^2 / |truth - estimate|^2) (§5.11); +inf for an exact
    estimate, -inf when the observation was already the truth (and the estimate is not)."""
    num = float(np.sum((truth - before) ** 2))
    den = float(np.sum((truth - estimate) ** 2))
    if den == 0:
        return math.inf
    return 10.0 * math.log10(num / den) if num > 0 else -math.inf


SHIFT_BORDER = 15   # pixels left out around the frame of the up-to-a-shift measure (more than the largest shift)


def ssd_upto_shift(estimate: np.ndarray, truth: np.ndarray, *, max_shift: float = 5.0, step: float = 0.25,
                   border: int = SHIFT_BORDER) -> float:
    """The error measure of Levin et al. (2009): |shift(estimate) - truth|^2 on the truth without a ``border``-pixel
    frame, minimised over the shifts (dy, dx) on a grid of ``step`` in [-max_shift, max_shift]^2, the estimate
    interpolated bilinearly. A blind estimate is only determined up to a shift of image against PSF, sub-pixel
    shifts included, so it is compared at its best one."""
    estimate = np.asarray(estimate, dtype=float)
    truth = np.asarray(truth, dtype=float)
    if estimate.shape != truth.shape or estimate.ndim != 2:
        raise ValueError(f"ssd_upto_shift: the estimate {estimate.shape} and the truth {truth.shape} must be images "
                         "of the same shape")
    if not (np.all(np.isfinite(estimate)) and np.all(np.isfinite(truth))):
        raise ValueError("ssd_upto_shift: the estimate and the truth must be finite (a NaN or inf pixel)")
    if not (step > 0 and max_shift >= 0 and border >= math.floor(max_shift) + 1):
        raise ValueError(f"ssd_upto_shift: need step > 0, max_shift >= 0 and border > max_shift; got step={step}, "
                         f"max_shift={max_shift}, border={border}")
    n_rows, n_cols = truth.shape
    if min(n_rows, n_cols) <= 2 * border:
        raise ValueError(f"ssd_upto_shift: the image ({n_rows} x {n_cols}) is too small for a {border}-pixel border")
    target = truth[border:n_rows - border, border:n_cols - border]
    rows = np.arange(border, n_rows - border)
    cols = np.arange(border, n_cols - border)
    shifts = np.arange(-max_shift, max_shift + step / 2, step)
    best = math.inf
    for dy in shifts:                  # border > max_shift keeps every index below inside the image
        whole, frac = math.floor(dy), dy - math.floor(dy)
        by_rows = (1 - frac) * estimate[rows + whole] + frac * estimate[rows + whole + 1]
        for dx in shifts:
            whole_c, frac_c = math.floor(dx), dx - math.floor(dx)
            moved = (1 - frac_c) * by_rows[:, cols + whole_c] + frac_c * by_rows[:, cols + whole_c + 1]
            best = min(best, float(np.sum((moved - target) ** 2)))
    return best


def as_pixel_rows(X_new):
    """One (row, col) pair as a one-row matrix (``predict`` of the image families takes one pair or an (n, 2) array);
    anything else as it is."""
    if isinstance(X_new, np.ndarray):
        return X_new[None, :] if X_new.ndim == 1 and X_new.size == 2 else X_new
    if isinstance(X_new, (list, tuple)) and len(X_new) == 2 \
            and not any(isinstance(v, (list, tuple, np.ndarray)) for v in X_new):
        return [list(X_new)]
    return X_new


FAMILY = Family(model=BID, about="blind image deconvolution",
                source="Tzikas PhD thesis ch. 5; Levin et al. (2011), Babacan et al. (2012)",
                tiny=lambda: (BID(psf_size=3), datasets.load("bid_blocks", size=16, n_blocks=3, seed=0)),
                datasets=("bid_data",), benchmarks=("bench_bid",), gallery="bid")
