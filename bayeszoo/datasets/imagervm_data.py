"""Images for the multikernel image RVM (Tzikas PhD ch. 4): the 2-D sinc of Table 4.1 and object-detection scenes.

Both use the image-dataset layout of :func:`bayeszoo.datasets.bid_data.image_problem` (``X`` = pixel coordinates,
``y`` = observed intensities, ``meta['shape']``, ``meta['true_image']``).

* ``sinc2d_image`` (4.24): the ``sinc2d`` data set (sin(r) / r on a grid over [-10, 10]^2 plus white noise of
  variance 0.1, see :mod:`bayeszoo.datasets.synthetic`) with the same noisy values laid out as an image, so the
  dense RVM (on the coordinates) and the image RVM see identical data.
* Detection scenes (§4.5.1): the thesis's tank / jeep images are not available. The target is a coin cut from
  scikit-image's ``coins`` image (the coin centred at row 126, col 102; a 39 x 39 crop averaged over 3 x 3 blocks
  to 13 x 13, its border median subtracted, clipped at 0, scaled to a peak of ``target_peak`` grey levels); the
  backgrounds are random ``size`` x ``size`` crops of scikit-image's ``camera`` and ``astronaut`` images (512 x
  512, the astronaut converted to grey, averaged over 2 x 2 blocks to 256 x 256; grey levels 0-255). A scene is background + (optionally) the target
  added at a uniformly random position (circularly, like the model) + white Gaussian noise of variance 20 (the
  thesis's sigma^2 = 20, "SNR 22 dB" for 0-255 images). All images ship inside scikit-image (read offline).
"""
from __future__ import annotations

import numpy as np

from bayeszoo import checks
from bayeszoo.datasets import Dataset, register

COIN_CENTRE = (126, 102)        # a coin of skimage.data.coins() (row, col)
COIN_CROP = 39                  # crop side before 3 x 3 block averaging -> 13 x 13 target window
BACKGROUND_IMAGES = ("camera", "astronaut")   # both with a licence statement (CC0, public domain)
MAX_SIDE = 4096                 # largest side of a generated image
MAX_SCENES = 100_000            # largest number of scenes of either kind


def sinc2d_image(size: int = 30, extent: float = 10.0) -> np.ndarray:
    """The noise-free 2-D sinc of ``sinc2d`` as a size x size image (rows = first coordinate)."""
    from bayeszoo.datasets import load

    return load("sinc2d", grid=size, extent=extent).y_test.reshape(size, size)


@register("sinc2d_image", {"size": checks.Interval(int, 3, MAX_SIDE, "both"), "noise_var": checks.NON_NEGATIVE,
                           "extent": checks.POSITIVE})
def sinc2d_image_problem(size: int = 30, noise_var: float = 0.1, seed: int = 0, extent: float = 10.0) -> Dataset:
    """The ``sinc2d`` data (Tzikas PhD (4.24), Table 4.1: 30 x 30, noise variance 0.1) as an image problem."""
    from bayeszoo.datasets import load
    from bayeszoo.datasets.bid_data import image_problem

    grid = load("sinc2d", grid=size, extent=extent, noise_var=noise_var, seed=seed)
    meta = {k: v for k, v in grid.meta.items() if k != "task"}
    meta["preprocessing"] = (meta.get("preprocessing", "") + "; the same noisy values as load('sinc2d') laid out "
                             "as an image (row-major over the first coordinate)")
    return image_problem(grid.y.reshape(size, size), name="sinc2d_image",
                         true_image=grid.y_test.reshape(size, size), meta=meta)


def _block_mean(image: np.ndarray, k: int) -> np.ndarray:
    R, C = (image.shape[0] // k) * k, (image.shape[1] // k) * k
    return image[:R, :C].reshape(R // k, k, C // k, k).mean(axis=(1, 3))


def target_image(target_peak: float = 40.0) -> np.ndarray:
    """The 13 x 13 coin target (grey levels, peak ``target_peak``) cut from ``skimage.data.coins()``."""
    from skimage import data as skdata

    checks.positive("target_image", "target_peak", target_peak)
    coins = skdata.coins().astype(float)
    h = COIN_CROP // 2
    crop = coins[COIN_CENTRE[0] - h:COIN_CENTRE[0] + h + 1, COIN_CENTRE[1] - h:COIN_CENTRE[1] + h + 1]
    small = _block_mean(crop, 3)
    border = np.concatenate([small[0], small[-1], small[:, 0], small[:, -1]])
    obj = np.clip(small - np.median(border), 0.0, None)
    return obj * (target_peak / obj.max())


def background_pool() -> list[np.ndarray]:
    """The background source images, 256 x 256 grey levels 0-255 (2 x 2 block means of the 512 x 512 originals)."""
    from skimage import data as skdata

    from skimage.color import rgb2gray

    images = [getattr(skdata, name)() for name in BACKGROUND_IMAGES]
    grey = [rgb2gray(im) * 255.0 if im.ndim == 3 else im.astype(float) for im in images]
    return [_block_mean(im, 2) for im in grey]


def detection_scenes(n_present: int = 50, n_absent: int = 50, size: int = 64, noise_var: float = 20.0,
                     target_peak: float = 40.0, seed: int = 0) -> dict:
    """The object-detection protocol's images (§4.5.1): ``n_present`` with the target, ``n_absent`` without.

    Returns ``{"images": (n, size, size), "truth": (n, size, size) noise-free, "present": (n,) bool,
    "location": (n, 2) int (row, col) of the target centre, -1 where absent, "target": the target window}``.
    """
    owner = "detection_scenes"
    for name, value in (("n_present", n_present), ("n_absent", n_absent)):
        checks.number(owner, name, value, low=0, high=MAX_SCENES, low_inclusive=True, integer=True)
    checks.number(owner, "size", size, low=1, high=256, low_inclusive=True, integer=True)
    checks.positive(owner, "noise_var", noise_var)
    checks.non_negative(owner, "seed", seed, integer=True)
    target = target_image(target_peak)
    if size < target.shape[0]:
        raise ValueError(f"{owner}: size {size} is smaller than the {target.shape[0]} x {target.shape[1]} target")
    from bayeszoo.numerics import fft as _fft

    rng = np.random.default_rng(seed)
    pool = background_pool()
    n = n_present + n_absent
    present = np.array([True] * n_present + [False] * n_absent)
    truth = np.empty((n, size, size))
    location = np.full((n, 2), -1, dtype=int)
    target_otf = _fft.otf(target, (size, size))
    for k in range(n):
        src = pool[rng.integers(len(pool))]
        r0, c0 = rng.integers(0, src.shape[0] - size + 1), rng.integers(0, src.shape[1] - size + 1)
        truth[k] = src[r0:r0 + size, c0:c0 + size]
        if present[k]:
            loc = rng.integers(0, size, 2)
            delta = np.zeros((size, size))
            delta[loc[0], loc[1]] = 1.0
            truth[k] += _fft.conv(delta, target_otf)                 # target centred at loc (circularly)
            location[k] = loc
    images = truth + rng.normal(0.0, np.sqrt(noise_var), truth.shape)
    return {"images": images, "truth": truth, "present": present, "location": location, "target": target,
            "noise_var": noise_var}
