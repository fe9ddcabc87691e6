"""Multikernel relevance vector machine on a pixel grid (Tzikas PhD ch. 4; digest §4.1-4.4).

    t = sum_m phi_m * w_m + eps        (4.17: 2-D circular convolution of each weight image with its kernel)
    w_mi | alpha_mi ~ N(0, 1/alpha_mi),  alpha_mi ~ Gamma(a, b),  eps_i ~ N(0, 1/beta),  beta ~ Gamma(c, d)

One weight per kernel m and pixel i (4.4, 4.9), so Phi = (Phi_1, ..., Phi_M) is N x MN with every Phi_m
block-circulant. A kernel is either a Gaussian exp(-|x|^2 / (2 sigma_m^2)) given by its width sigma_m^2 in
squared pixels (the convention of the thesis's (3.64) and Table 4.1's "kernel width sigma^2"; the circular
distance is used so the matrix is exactly circulant), or any odd-sided image window centred on its middle
pixel (e.g. the target of the object detector, 4.25, which need not be a Mercer kernel).

The family is registered as ``"imagervm"`` (a sibling of ``"rvm"`` and ``"arvm"``, the same sparse Bayesian
linear model) so that its backends are looked up without special cases. Canonical posterior variables, the same
for every backend: ``w`` and ``log_alpha`` over (kernel, row, col) and the scalar ``log_beta``. Type-II fits
write pruned weights as w = 0, log_alpha = log(1e12), as the RVM does.
"""
from __future__ import annotations

import functools
from typing import ClassVar

import math
from dataclasses import dataclass

import numpy as np

from bayeszoo import checks, datasets
from bayeszoo.datasets import Dataset
from bayeszoo.datasets.bid_data import check_intensities
from bayeszoo.models.base import ImageModel
from bayeszoo.models.family import Family
from bayeszoo.models.bid import as_pixel_rows, isnr
from bayeszoo.models.rvm import LOG_ALPHA_PRUNED, RELEVANCE_THRESHOLD

DECLARATION_MAX_PIXELS = 1024   # the PyMC / NumPyro declarations use the dense N x MN design: small images only
ZERO_IMAGE = "every weight would be pruned and the noise precision is unbounded; there is nothing to fit"


def _as_kernel(spec, index: int):
    """A Gaussian width (positive number) or a kernel window (2-D, odd sides, finite), else a ValueError."""
    if isinstance(spec, (int, float, np.integer, np.floating)) and not isinstance(spec, bool):
        if not (np.isfinite(spec) and spec > 0):
            raise ValueError(f"ImageRVM kernel {index}: a Gaussian width sigma^2 must be a positive number, "
                             f"got {spec!r}")
        return float(spec)
    try:
        window = np.asarray(spec, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"ImageRVM kernel {index} must be a positive width or a 2-D kernel image: {exc}") from exc
    if window.ndim != 2:
        raise ValueError(f"ImageRVM kernel {index} must be a positive width or a 2-D kernel image, "
                         f"got an array of shape {window.shape}")
    if window.shape[0] % 2 == 0 or window.shape[1] % 2 == 0:
        raise ValueError(f"ImageRVM kernel image {index} must have odd sides (centred on its middle pixel), "
                         f"got shape {window.shape}")
    if not np.all(np.isfinite(window)):
        raise ValueError(f"ImageRVM kernel image {index} contains NaN or inf")
    if not np.any(window != 0):
        raise ValueError(f"ImageRVM kernel image {index} is identically zero")
    return window


@dataclass(frozen=True)
class KernelList:
    """The ``kernels`` of an ImageRVM: a non-empty sequence of Gaussian widths and / or kernel windows, returned as
    a tuple of floats and nested lists, so that ``spec()`` is JSON and the model pickles to workers."""

    what = "a non-empty sequence of Gaussian widths and / or kernel images"

    def __call__(self, owner: str, name: str, value) -> tuple:
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) == 0:
            raise checks.refusal(owner, name, self.what, value)
        checked = [_as_kernel(k, i) for i, k in enumerate(value)]
        return tuple(k if isinstance(k, float) else k.tolist() for k in checked)


@dataclass
class ImageRVM(ImageModel):
    """Multikernel RVM for image regression (Tzikas PhD ch. 4).

    Parameters
    ----------
    kernels : sequence of Gaussian widths sigma_m^2 (squared pixels) and / or kernel images (odd-sided 2-D
        windows, centred). Default (2, 4, 8), the thesis's large-scale multikernel demo.
    a, b : Gamma(shape a, rate b) hyperprior of every weight precision alpha_mi.
    c, d : Gamma(shape c, rate d) hyperprior of the noise precision beta.
        The defaults 0 are the thesis's type-II maximum likelihood (4.15-4.16 exactly), which the ``dft``
        backend runs; that prior is improper, so the samplers (``nuts``, ``numpyro``, ``advi``) need a, b, c,
        d > 0 and say so. For sampler comparisons use, as for the RVM, ImageRVM(a=1, b=1e-2, c=1, d=1e-3).
    """

    example_data = "sinc2d_image"

    kernels: tuple = (2.0, 4.0, 8.0)
    a: float = 0.0
    b: float = 0.0
    c: float = 0.0
    d: float = 0.0

    family = "imagervm"
    _parameter_constraints: ClassVar[dict] = {"kernels": KernelList(),
                                              **{name: checks.NON_NEGATIVE for name in ("a", "b", "c", "d")}}
    compare_vars = ("w", "log_beta")
    reference_advice: ClassVar[str] = (
        "image RVM: as for the RVM, the near-improper default priors make a funnel NUTS cannot sample; compare "
        "under ImageRVM(a=5, b=0.05, c=1, d=1e-3) (the catalogue's imagervm-sinc) with numpyro at "
        "target_accept 0.99, on images small enough for the dense declaration (docs/families/imagervm.md).")

    @property
    def n_kernels(self) -> int:
        return len(self.kernels)

    def kernel_labels(self) -> list[str]:
        return [f"gauss s2={k:g}" if isinstance(k, float) else f"image {np.shape(k)[0]}x{np.shape(k)[1]}"
                for k in self.kernels]

    def require_proper(self, backend: str) -> None:
        """The samplers need proper Gamma hyperpriors; only the type-II ``dft`` backend takes the thesis's 0."""
        bad = [n for n in ("a", "b", "c", "d") if getattr(self, n) <= 0]
        if bad:
            raise ValueError(f"backend {backend!r} needs proper Gamma hyperpriors: ImageRVM {', '.join(bad)} must be "
                             f"> 0 (the default 0 is the thesis's improper type-II setting); e.g. "
                             f"ImageRVM(a=1, b=1e-2, c=1, d=1e-3)")

    # ---- data ----------------------------------------------------------------------------------------
    def validate(self, data: Dataset) -> None:
        super().validate(data)            # an image dataset (ImageModel)
        R, C = self.image_shape(data)
        self.check_kernels_fit((R, C))
        check_intensities(self.observed_image(data), "ImageRVM: the observed image", zero=ZERO_IMAGE)
        if "true_image" in data.meta and np.shape(data.meta["true_image"]) != (R, C):
            raise ValueError(f"true image has shape {np.shape(data.meta['true_image'])}, the image is {R} x {C}")

    def check_kernels_fit(self, shape: tuple[int, int]) -> None:
        """Every kernel image must fit inside the image (a ValueError naming the kernel otherwise)."""
        for i, k in enumerate(self.kernels):
            if not isinstance(k, float) and (np.shape(k)[0] > shape[0] or np.shape(k)[1] > shape[1]):
                raise ValueError(f"ImageRVM kernel image {i} ({np.shape(k)[0]} x {np.shape(k)[1]}) is larger than "
                                 f"the {shape[0]} x {shape[1]} image")

    def kernel_images(self, shape: tuple[int, int]) -> np.ndarray:
        """(M, R, C): every kernel as an image-sized circular array with its centre at pixel (0, 0)."""
        from bayeszoo.numerics import fft as _fft

        out = np.empty((self.n_kernels, *shape))
        for m, k in enumerate(self.kernels):
            out[m] = _fft.gaussian_basis(shape, k) if isinstance(k, float) else _fft.embed(np.asarray(k), shape)
        return out

    def dense_design(self, shape: tuple[int, int]) -> np.ndarray:
        """The N x MN design Phi = (Phi_1, ..., Phi_M) of (4.7), column (m, i) = kernel m shifted to pixel i
        (lexicographic, row-major). For checks and for small images only."""
        R, C = shape
        K = self.kernel_images(shape)
        rows, cols = np.indices(shape)
        r, c = rows.ravel(), cols.ravel()
        dr = (r[:, None] - r[None, :]) % R           # (pixel n, centre i)
        dc = (c[:, None] - c[None, :]) % C
        return np.concatenate([K[m][dr, dc] for m in range(self.n_kernels)], axis=1)

    def var_dims(self, data: Dataset) -> dict[str, tuple[str, ...]]:
        return {"w": ("kernel", "row", "col"), "log_alpha": ("kernel", "row", "col"), "log_beta": ()}

    def coords(self, data: Dataset) -> dict[str, np.ndarray]:
        R, C = self.image_shape(data)
        return {"kernel": np.arange(self.n_kernels), "row": np.arange(R), "col": np.arange(C),
                "obs": np.arange(R * C)}

    def constant_data(self, data: Dataset) -> dict:
        return {"X": data.X}

    # ---- declarations (small images) -----------------------------------------------------------------
    def _declaration_arrays(self, data: Dataset, backend: str):
        self.validate(data)
        self.require_proper(backend)
        R, C = self.image_shape(data)
        if R * C > DECLARATION_MAX_PIXELS:
            raise ValueError(f"the {backend} declaration of ImageRVM uses the dense {R * C} x {self.n_kernels * R * C} "
                             f"design; images of at most {DECLARATION_MAX_PIXELS} pixels (e.g. 16 x 16, 32 x 32) "
                             f"are supported, got {R} x {C}; use the 'dft' backend for large images")
        return self.dense_design((R, C)), np.asarray(data.y, dtype=float), (self.n_kernels, R, C)

    def pymc_model(self, data: Dataset):
        """The Gaussian linear model with ARD priors in PyMC: ``log_alpha`` and ``z`` over (kernel, row, col),
        ``w = z exp(-log_alpha / 2)`` (non-centred, a Deterministic), ``log_beta``; log-Gamma densities as in
        :class:`~bayeszoo.models.RVM` (Jacobian and constants included)."""
        import pymc as pm
        import pytensor.tensor as pt

        from bayeszoo.numerics.special import pm_log_gamma

        Phi, y, wshape = self._declaration_arrays(data, "pymc")
        dims = ("kernel", "row", "col")
        with pm.Model(coords=self.coords(data)) as model:
            log_alpha = pm_log_gamma("log_alpha", self.a, self.b, dims=dims)
            z = pm.Normal("z", 0.0, 1.0, dims=dims)
            w = pm.Deterministic("w", z * pt.exp(-0.5 * log_alpha), dims=dims)
            log_beta = pm_log_gamma("log_beta", self.c, self.d)
            pm.Normal("y", mu=pt.dot(Phi, w.flatten()), sigma=pt.exp(-0.5 * log_beta), observed=y, dims="obs")
        return model

    def numpyro_model(self, data: Dataset):
        """The same joint density as :meth:`pymc_model`, as a NumPyro model function of no arguments (its data
        bound by ``functools.partial``: :class:`~bayeszoo.models.base.Model`)."""
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist

        from bayeszoo.numerics.special import log_gamma_numpyro

        Phi_np, y_np, wshape = self._declaration_arrays(data, "numpyro")
        a, b, c, d = (float(v) for v in (self.a, self.b, self.c, self.d))
        LogGamma = log_gamma_numpyro()

        def model(Phi, y):
            Phi, y = jnp.asarray(Phi), jnp.asarray(y)
            log_alpha = numpyro.sample("log_alpha", LogGamma(a, b).expand(list(wshape)).to_event(3))
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand(list(wshape)).to_event(3))
            w = numpyro.deterministic("w", z * jnp.exp(-0.5 * log_alpha))
            log_beta = numpyro.sample("log_beta", LogGamma(c, d))
            numpyro.sample("y", dist.Normal(Phi @ w.reshape(-1), jnp.exp(-0.5 * log_beta)).to_event(1), obs=y)

        return functools.partial(model, Phi=Phi_np, y=y_np)

    # ---- prediction and scoring ----------------------------------------------------------------------
    @staticmethod
    def _draws(fit, name) -> np.ndarray:
        arr = np.asarray(fit.idata.posterior[name].values, dtype=float)
        return arr.reshape(arr.shape[0] * arr.shape[1], *arr.shape[2:])

    def _fit_shape(self, fit) -> tuple[int, int]:
        self.check_fit(fit)
        w = fit.idata.posterior["w"]
        if w.shape[2] != self.n_kernels:
            raise ValueError(f"fit has {w.shape[2]} weight images but this ImageRVM has {self.n_kernels} kernels")
        return int(w.shape[3]), int(w.shape[4])

    def restored(self, fit) -> np.ndarray:
        """Posterior mean of the noise-free image y = sum_m phi_m * w_m (4.17)."""
        from bayeszoo.numerics import fft as _fft

        shape = self._fit_shape(fit)
        w_mean = np.asarray(fit.idata.posterior["w"].mean(("chain", "draw")).values, dtype=float)
        K_hat = _fft.rfft2(self.kernel_images(shape))
        return _fft.irfft2(np.sum(_fft.rfft2(w_mean) * K_hat, axis=0), shape)

    def log_likelihood(self, fit, data: Dataset) -> np.ndarray:
        """log N(y_i | (sum_m phi_m * w_m)_i, 1/beta) of every pixel at every draw (4.7)."""
        from bayeszoo.numerics import fft as _fft

        shape = self._fit_shape(fit)
        K_hat = _fft.rfft2(self.kernel_images(shape))
        w, log_beta = self._draws(fit, "w"), self._draws(fit, "log_beta")
        f = np.stack([_fft.irfft2(np.sum(_fft.rfft2(w_s) * K_hat, axis=0), shape).ravel() for w_s in w])
        y = np.asarray(self.observed_image(data), dtype=float).ravel()
        return 0.5 * (log_beta[:, None] - np.log(2.0 * np.pi)) - 0.5 * np.exp(log_beta)[:, None] * (y - f) ** 2

    def weight_means(self, fit) -> np.ndarray:
        """Posterior mean weight images (M, R, C), e.g. mu_t of the object detector (4.26)."""
        self.check_fit(fit)
        return np.asarray(fit.idata.posterior["w"].mean(("chain", "draw")).values, dtype=float)

    def check_inputs(self, fit, X_new) -> np.ndarray:
        """Finite (n, 2) pixel coordinates (row, col); one pair may be given as is."""
        return super().check_inputs(fit, as_pixel_rows(X_new))

    def predict(self, fit, X_new) -> np.ndarray:
        """Restored intensities (posterior mean of the noise-free image) at pixel coordinates X_new = (row, col),
        rounded to the nearest pixel; one (row, col) pair may be given as is."""
        self.check_fit(fit)
        return self.pixel_values(self.restored(fit), self.check_inputs(fit, X_new))

    def relevance(self, fit, data: Dataset | None = None) -> np.ndarray:
        """Per-weight relevance (kernel, row, col) by the RVM's rule (:meth:`RVM.n_relevant`): rms of the kernel
        over the image / sqrt(median alpha) / sd of the observed image; pruned weights have relevance 0."""
        shape = self._fit_shape(fit)
        rms = np.sqrt(np.mean(self.kernel_images(shape) ** 2, axis=(1, 2)))
        med = np.median(self._draws(fit, "log_alpha"), axis=0)
        y = np.asarray(fit.idata.observed_data["y"].values if data is None else data.y, dtype=float)
        scale = float(np.std(y)) or 1.0
        with np.errstate(over="ignore"):
            r = rms[:, None, None] * np.exp(-0.5 * med) / scale
        return np.where(med >= LOG_ALPHA_PRUNED, 0.0, r)

    def n_relevant(self, fit, data: Dataset | None = None) -> int:
        """Number of relevance vectors: weights whose relevance is at least 1 % (the RVM's threshold)."""
        return int(np.sum(self.relevance(fit, data) >= RELEVANCE_THRESHOLD))

    def score(self, fit, data: Dataset) -> dict:
        """``mse`` of the restored image against the true image (``data.meta['true_image']``; against the observed
        image when there is no truth), ``isnr`` = 10 log10(|f - g|^2 / |f - f_hat|^2) in dB (NaN without the
        truth), ``n_relevant`` (relevance vectors), ``seconds``."""
        self.check_fit(fit)
        self.validate(data)
        g = self.observed_image(data)
        f_hat = self.restored(fit)
        if f_hat.shape != g.shape:
            raise ValueError(f"fit is for a {f_hat.shape} image but the data are {g.shape}")
        out = {"mse": math.nan, "isnr": math.nan}
        if "true_image" in data.meta:
            f = np.asarray(data.meta["true_image"], dtype=float)
            out["mse"] = float(np.mean((f - f_hat) ** 2))
            out["isnr"] = isnr(f, g, f_hat)
        else:
            out["mse"] = float(np.mean((g - f_hat) ** 2))
        out["n_relevant"] = self.n_relevant(fit, data)
        out["seconds"] = float(fit.seconds)
        return out


FAMILY = Family(model=ImageRVM, about="multikernel RVM on images, in the DFT domain",
                source="Tzikas PhD thesis ch. 4",
                tiny=lambda: (ImageRVM(), datasets.load("sinc2d_image", size=8, seed=0)),
                datasets=("imagervm_data",), benchmarks=("bench_imagervm",), gallery=None)
