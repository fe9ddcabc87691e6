"""Degraded-image problems for blind image deconvolution (Tzikas PhD ch. 5, §5.4.2; digest §5.12, §9.2).

A problem is a true image f (intensities in [0, 1]), blurred by a PSF h with 2-D *circular* convolution (5.1)
and corrupted by white Gaussian noise of variance sigma^2 = |f|^2 / (M 10^(SNR/10)) (digest §5.11).

Dataset layout (the contract's X / y, no extension needed): ``X`` is the (M, 2) array of pixel coordinates
(row, col) in row-major order and ``y`` the degraded intensities g at those pixels, so ``y.reshape(shape)`` is
the degraded image. ``meta`` holds ``task="image"``, ``shape``, the true image ``true_image`` (rows, cols), the
true PSF ``true_psf`` (an odd window centred on the origin), ``psf``, ``snr_db``, ``noise_var`` and the
provenance. ``image_problem(g, ...)`` wraps a user's own degraded image the same way.

Images come from scikit-image's bundled data (read from the installed package, offline), converted to grey
levels in [0, 1]. "cameraman" is ``skimage.data.camera()`` (512 x 512) averaged over 2 x 2 blocks to the
thesis's 256 x 256; other images are centre-cropped to a square and resized to ``size`` when it is given.
``crop=(row, col, side)`` or ``crop=side`` (centred) takes a window of the true image *before* degrading it,
so the circular model holds exactly on the crop (used for the sampler comparisons on 32 x 32 to 64 x 64).
"""
from __future__ import annotations

import numpy as np

from bayeszoo import checks
from bayeszoo.datasets import Dataset, register

PSFS = ("gaussian", "uniform", "motion")
#: the image families accept observed images whose largest |intensity| lies in this range (any unit: [0, 1],
#: 0-255, counts); beyond it squared intensities and precisions leave the floating-point range
MIN_INTENSITY, MAX_INTENSITY = 1e-30, 1e30
MAX_PSF_RADIUS = 1024      # largest half-side of a generated PSF window
MAX_SIDE = 4096            # largest side of a generated image
SNR_RANGE = (-100.0, 300.0)   # decibels accepted by the degradations

#: what the options of the image loaders may be (a crop's fit in its image is checked against the image)
CROP = [None, checks.Interval(int, 2, None, "left"),
        checks.Where(checks.Instance((tuple, list), "a triple"),
                     lambda c: len(c) == 3 and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                                   for v in c) and min(c) >= 0,
                     "a (row, col, side) triple of integers >= 0")]
IMAGE_OPTIONS = {"psf": checks.OneOf(PSFS), "snr_db": checks.Interval(float, *SNR_RANGE, "both"),
                 "crop": CROP, "size": [checks.Interval(int, 2, MAX_SIDE, "both"), None]}
BLOCKS_OPTIONS = {"psf": checks.OneOf(PSFS), "snr_db": checks.Interval(float, *SNR_RANGE, "both"),
                  "size": checks.Interval(int, 16, MAX_SIDE, "both"), "n_blocks": checks.Interval(int, 0, 10_000, "both")}
# the scikit-image images whose docstrings state a licence (CC0 / public domain / no known copyright)
SKIMAGE_IMAGES = {"cameraman": "camera", "coins": "coins", "astronaut": "astronaut", "brick": "brick",
                  "grass": "grass", "gravel": "gravel", "text": "text", "clock": "clock", "chelsea": "chelsea",
                  "coffee": "coffee"}


# ---------------------------------------------------------------------------------------------------- PSFs
def gaussian_psf(variance: float, radius: int | None = None) -> np.ndarray:
    """Isotropic Gaussian PSF exp(-|x|^2 / (2 variance)) on a (2r+1)^2 window, r = ceil(3 sd), summing to 1.

    The thesis gives the variance (5 for the blur, 3 for the initial PSF) but not the support; +-3 sd is used.
    """
    variance = checks.positive("gaussian_psf", "variance", variance)
    if radius is None:
        radius = int(np.ceil(3.0 * np.sqrt(variance)))
        if radius > MAX_PSF_RADIUS:
            raise ValueError(f"gaussian_psf: variance {variance:.3g} needs a window of half-side {radius} > "
                             f"{MAX_PSF_RADIUS}; give a smaller variance or a radius")
    r = checks.non_negative("gaussian_psf", "radius", radius, integer=True)
    x = np.arange(-r, r + 1, dtype=float)
    h = np.exp(-(x[:, None] ** 2 + x[None, :] ** 2) / (2.0 * variance))
    return h / h.sum()


def uniform_psf(side: int = 7) -> np.ndarray:
    """Uniform side x side square PSF (§5.4.1, 7 x 7)."""
    side = checks.number("uniform_psf", "side", side, low=1, high=2 * MAX_PSF_RADIUS + 1, low_inclusive=True,
                         integer=True)
    return np.full((side, side), 1.0 / side**2)


def motion_psf(s_x: int = 4, s_y: int = 1, u0: float = 0.5, a: float = 0.1) -> np.ndarray:
    """Accelerated-motion PSF of Yitzhaky et al. (1998) as in §5.4.2: (u0^2 + 2a(x + s_x))^(-1/2) for |x| <= s_x,
    |y| <= s_y, zero elsewhere; x runs along columns (horizontal motion), normalised to sum 1 (9 x 3 support
    as a 3-row, 9-column window)."""
    for name, value in (("s_x", s_x), ("s_y", s_y)):
        checks.number("motion_psf", name, value, low=0, high=MAX_PSF_RADIUS, low_inclusive=True, integer=True)
    checks.positive("motion_psf", "u0", u0)
    checks.non_negative("motion_psf", "a", a)
    x = np.arange(-s_x, s_x + 1, dtype=float)
    row = (u0**2 + 2.0 * a * (x + s_x)) ** -0.5
    h = np.tile(row, (2 * s_y + 1, 1))
    return h / h.sum()


def camera_shake_kernels() -> list[np.ndarray]:
    """The eight camera-shake kernels of the ``bid_shake`` benchmark (sides 9 to 25, each summing to 1), from
    ``data/camera_shake_kernels.npz`` (generated by ``benchmarks/make_camera_shake_kernels.py``; DATASETS.md)."""
    from pathlib import Path

    with np.load(Path(__file__).with_name("data") / "camera_shake_kernels.npz") as z:
        return [np.array(z[f"k{i}"], dtype=float) for i in range(len(z.files))]


def make_psf(name: str) -> np.ndarray:
    """The thesis's three blurs (§5.4.2): ``gaussian`` (variance 5), ``uniform`` (7 x 7), ``motion``."""
    if not isinstance(name, str) or name not in PSFS:
        raise ValueError(f"unknown PSF {name!r}; choose one of {PSFS}")
    if name == "gaussian":
        return gaussian_psf(5.0)
    if name == "uniform":
        return uniform_psf(7)
    if name == "motion":
        return motion_psf()
    raise ValueError(f"unknown PSF {name!r}; choose one of {PSFS}")


def check_intensities(image: np.ndarray, what: str, zero: str) -> None:
    """The observed image's scale: a ValueError when it is zero everywhere (``zero`` says why that cannot be
    fitted) or when its largest |intensity| lies outside [MIN_INTENSITY, MAX_INTENSITY]."""
    largest = float(np.max(np.abs(image)))
    if largest == 0:
        raise ValueError(f"{what} is zero everywhere: {zero}")
    if not MIN_INTENSITY <= largest <= MAX_INTENSITY:
        raise ValueError(f"{what} has largest |intensity| {largest:.3g}, outside [{MIN_INTENSITY:.0e}, "
                         f"{MAX_INTENSITY:.0e}]: rescale it (e.g. to [0, 1])")


# ---------------------------------------------------------------------------------------------- degradation
def check_image(image, what: str = "image") -> np.ndarray:
    """A finite 2-D float array, else a ValueError naming the problem."""
    try:
        image = np.asarray(image, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numeric: {exc}") from exc
    if image.ndim != 2:
        raise ValueError(f"{what} must be a 2-D array (rows, cols), got shape {image.shape}")
    if min(image.shape) < 2:
        raise ValueError(f"{what} must be at least 2 x 2 pixels, got shape {image.shape}")
    if not np.all(np.isfinite(image)):
        raise ValueError(f"{what} contains {int(np.sum(~np.isfinite(image)))} non-finite values (NaN or inf)")
    return image


def check_psf(psf, image_shape, what: str = "psf") -> np.ndarray:
    """A finite 2-D odd-sided window, no larger than the image, summing to a positive value."""
    try:
        psf = np.asarray(psf, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numeric: {exc}") from exc
    if psf.ndim != 2:
        raise ValueError(f"{what} must be a 2-D array, got shape {psf.shape}")
    if not np.all(np.isfinite(psf)):
        raise ValueError(f"{what} contains non-finite values (NaN or inf)")
    if psf.shape[0] % 2 == 0 or psf.shape[1] % 2 == 0:
        raise ValueError(f"{what} window must have odd sides (centred on the origin), got {psf.shape}")
    if psf.shape[0] > image_shape[0] or psf.shape[1] > image_shape[1]:
        raise ValueError(f"the image {tuple(image_shape)} is smaller than the {what} {psf.shape}")
    total = float(psf.sum())
    if not total > 0:
        raise ValueError(f"{what} must sum to a positive value, got sum {total!r}")
    return psf


def blur(image: np.ndarray, psf: np.ndarray) -> np.ndarray:
    """Circular 2-D convolution h * f (5.1)."""
    from bayeszoo.numerics import fft as _fft

    return _fft.conv(image, _fft.otf(psf, image.shape))


def noise_variance(image: np.ndarray, snr_db: float) -> float:
    """sigma^2 with SNR = 10 log10(|f|^2 / (M sigma^2)) (digest §5.11)."""
    checks.number("noise_variance", "snr_db", snr_db, low=SNR_RANGE[0], high=SNR_RANGE[1], low_inclusive=True)
    return float(np.mean(image**2) / 10.0 ** (snr_db / 10.0))


def degrade(image, psf, snr_db: float = 40.0, seed: int | None = 0) -> tuple[np.ndarray, float]:
    """Blur ``image`` with ``psf`` (circular) and add white Gaussian noise at ``snr_db``; returns (g, sigma^2)."""
    image = check_image(image)
    psf = check_psf(psf, image.shape)
    checks.non_negative("degrade", "seed", seed, integer=True, allow_none=True)
    if np.max(np.abs(image)) > MAX_INTENSITY:      # its squares (the noise variance) would overflow
        raise ValueError(f"degrade: the image has intensities up to {np.max(np.abs(image)):.3g}, beyond "
                         f"{MAX_INTENSITY:.0e}; rescale it (e.g. to [0, 1])")
    var = noise_variance(image, snr_db)
    rng = np.random.default_rng(seed)
    return blur(image, psf) + np.sqrt(var) * rng.standard_normal(image.shape), var


# ---------------------------------------------------------------------------------------------- datasets
def image_problem(degraded, *, name: str = "image", true_image=None, true_psf=None, meta: dict | None = None
                  ) -> Dataset:
    """A BID Dataset from a degraded image (rows, cols); the truth, when known, enables ISNR in ``score``."""
    g = check_image(degraded, "degraded image")
    info = {"task": "image", "shape": tuple(int(s) for s in g.shape), **(meta or {})}
    if true_image is not None:
        truth = check_image(true_image, "true image")
        if truth.shape != g.shape:
            raise ValueError(f"true image has shape {truth.shape} but the degraded image has {g.shape}")
        info["true_image"] = truth
    if true_psf is not None:
        info["true_psf"] = check_psf(true_psf, g.shape, "true psf")
    rows, cols = np.indices(g.shape)
    X = np.column_stack([rows.ravel(), cols.ravel()]).astype(float)
    return Dataset(X, g.ravel(), name=name, meta=info)


def _grey_image(key: str, size: int | None) -> np.ndarray:
    import skimage.data
    from skimage.color import rgb2gray
    from skimage.util import img_as_float

    img = getattr(skimage.data, SKIMAGE_IMAGES[key])()
    img = rgb2gray(img) if img.ndim == 3 else img_as_float(img)
    img = np.asarray(img, dtype=float)
    if key == "cameraman" and size in (None, 256):
        return img.reshape(256, 2, 256, 2).mean(axis=(1, 3))     # the thesis's 256 x 256 cameraman
    if size is None:
        return img
    from skimage.transform import resize

    side = min(img.shape)
    r0, c0 = (img.shape[0] - side) // 2, (img.shape[1] - side) // 2
    return resize(img[r0:r0 + side, c0:c0 + side], (size, size), anti_aliasing=True)


def _crop(img: np.ndarray, crop) -> np.ndarray:
    if crop is None:
        return img
    if isinstance(crop, int):   # declared as CROP: a side length, or a (row, col, side) triple
        side = crop
        r0, c0 = (img.shape[0] - side) // 2, (img.shape[1] - side) // 2
    else:
        r0, c0, side = (int(v) for v in crop)
    if side < 2 or r0 < 0 or c0 < 0 or r0 + side > img.shape[0] or c0 + side > img.shape[1]:
        raise ValueError(f"crop {crop!r} does not fit in the {img.shape} image; give a smaller side or a "
                         f"(row, col, side) inside it")
    return img[r0:r0 + side, c0:c0 + side]


def _loader(key: str):
    def load(psf: str = "uniform", snr_db: float = 40.0, seed: int = 0, crop=None, size: int | None = 256
             ) -> Dataset:
        truth = _crop(_grey_image(key, size), crop)
        h = make_psf(psf)
        g, var = degrade(truth, h, snr_db, seed)
        meta = {"source": f"scikit-image {_skimage_version()} skimage.data.{SKIMAGE_IMAGES[key]}() "
                          f"(bundled with the package; read offline)",
                "licence": "see DATASETS.md (CC0 / public domain / no known copyright, per scikit-image)",
                "citation": "Tzikas PhD thesis (2009) ch. 5, section 5.4.2 (degradations)",
                "preprocessing": (f"grey levels in [0, 1]; size {size}; crop {crop}; circular blur with the "
                                  f"{psf} PSF; white Gaussian noise at {snr_db} dB"),
                "psf": psf, "snr_db": float(snr_db), "noise_var": var, "seed": seed}
        return image_problem(g, name=key if crop is None else f"{key}-crop", true_image=truth, true_psf=h,
                             meta=meta)

    load.__doc__ = (f"{key}: skimage.data.{SKIMAGE_IMAGES[key]}() blurred (circular) by the thesis's Gaussian / "
                    f"uniform / motion PSF, white noise at snr_db (Tzikas PhD §5.4.2)")
    return load


def _skimage_version() -> str:
    import skimage

    return skimage.__version__


for _key in SKIMAGE_IMAGES:
    register(_key, IMAGE_OPTIONS)(_loader(_key))


def blocks_image(size: int = 64, n_blocks: int = 12, seed: int = 0) -> np.ndarray:
    """A piecewise-constant test image: ``n_blocks`` random axis-aligned rectangles (sides size/8 to size/3,
    grey levels uniform in [0, 1]) painted over a 0.5 background; sparse first differences, as the St image
    prior assumes."""
    rng = np.random.default_rng(seed)
    img = np.full((size, size), 0.5)
    lo, hi = max(2, size // 8), max(3, size // 3)
    for _ in range(n_blocks):
        h, w = rng.integers(lo, hi + 1, size=2)
        r, c = rng.integers(0, size - h + 1), rng.integers(0, size - w + 1)
        img[r:r + h, c:c + w] = rng.uniform(0.0, 1.0)
    return img


@register("bid_blocks", BLOCKS_OPTIONS)
def bid_blocks(psf: str = "gaussian", snr_db: float = 40.0, seed: int = 0, size: int = 64, n_blocks: int = 12
               ) -> Dataset:
    """Synthetic piecewise-constant image (random rectangles) degraded by a thesis PSF at snr_db (seeded)."""
    truth = blocks_image(size, n_blocks, seed)
    h = make_psf(psf)
    g, var = degrade(truth, h, snr_db, seed + 1)
    meta = {"source": "generated: random rectangles (bayeszoo.datasets.bid_data.blocks_image)",
            "licence": "generated data", "citation": "degradations of Tzikas PhD thesis (2009) section 5.4.2",
            "preprocessing": f"circular blur with the {psf} PSF; white Gaussian noise at {snr_db} dB",
            "psf": psf, "snr_db": float(snr_db), "noise_var": var, "seed": seed}
    return image_problem(g, name="bid_blocks", true_image=truth, true_psf=h, meta=meta)
