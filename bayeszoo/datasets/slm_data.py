"""Measurement problems for the sparse linear model (Nickisch thesis §5.5).

A data set holds ``X`` (m x n, one measurement filter per row), ``y = X u + noise`` and, in ``meta``, the signal
``true_u``, its shape ``u_shape``, the noise variance ``sigma2`` and (for Fourier sampling) ``X_operator``, the
operator spec equal to ``X`` (:mod:`bayeszoo.models.slm`).

* ``slm_signal``: the six synthetic signals u in R^512 of Fig. 5.2 (thesis: n = 512, m0 = 40 initial measurements,
  sigma^2 = 0.005, tau = 5): (a) ``gaussian`` i.i.d. N(0, 1); (b) ``laplace`` i.i.d. Laplace of unit variance;
  (c) ``student`` i.i.d. Student's t with nu = 3; (d) ``decaying``: n/2 zeros, n/4 values decaying exponentially
  from 1 to 0, n/4 minus those, randomly permuted; (e) ``spikes``: 20 entries +-1 at random positions; (f)
  ``nonuniform_spikes``: 20 entries +-(1/4 + |t|), t ~ N(0, 1), at random positions; d-f scaled to unit mean square.
  The thesis does not give the decay rate of (d) (here exp(-5 t) on t in [0, 1], shifted and scaled to [0, 1]), the
  variance of (b) (unit here) or the signs of (f) (random here). Designs: ``sphere`` (rows uniform on the unit
  sphere, the thesis's "random unit-norm rows") or ``gaussian`` (X_ij ~ N(0, 1/n), "rand uni").
* ``slm_image``: a grey-level image from scikit-image (``camera`` by default; read offline from the installed
  package), converted to grey values in [0, 1] and resized (anti-aliased) to ``size`` x ``size`` (the thesis uses
  64 x 64 versions of 75 natural images, which are not available offline), measured by a ``gaussian`` design
  (X_ij ~ N(0, 1/n)) or by ``fourier`` sampling (random frequencies of the orthonormal 2-D DFT, always including
  the zero frequency; real and imaginary parts as separate rows). Licences of the images as stated in
  scikit-image's docstrings: ``camera`` CC0 (Lav Varshney), ``astronaut`` NASA public domain, ``coins`` Brooklyn
  Museum no known copyright, ``text`` public domain, ``brick`` / ``grass`` / ``gravel`` CC0.

Everything is generated from the seed (``numpy.random.default_rng(seed)``): the same options give the same arrays.
"""
from __future__ import annotations

import numpy as np

from bayeszoo import checks
from bayeszoo.datasets import Dataset, register
from bayeszoo.numerics import operators

SIGNALS = ("gaussian", "laplace", "student", "decaying", "spikes", "nonuniform_spikes")
DESIGNS = ("sphere", "gaussian")
IMAGE_DESIGNS = ("gaussian", "fourier")
IMAGES = ("camera", "astronaut", "coins", "text", "brick", "grass", "gravel")
N_SPIKES = 20
MAX_N = 1 << 16
CITATION = "Nickisch PhD thesis (2010) section 5.5, Fig. 5.2 (signals) and Fig. 5.4 (images)"


def synthetic_signal(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """One of the six signals of Fig. 5.2 (see the module docstring)."""
    kind = checks.choice("synthetic_signal", "kind", kind, SIGNALS)
    if kind == "gaussian":
        return rng.standard_normal(n)
    if kind == "laplace":
        return rng.laplace(0.0, 1.0 / np.sqrt(2.0), n)
    if kind == "student":
        return rng.standard_t(3.0, n)
    u = np.zeros(n)
    if kind == "decaying":
        k = n // 4
        t = np.linspace(0.0, 1.0, k)
        decay = (np.exp(-5.0 * t) - np.exp(-5.0)) / (1.0 - np.exp(-5.0))
        u[:2 * k] = np.concatenate([decay, -decay])
        u = rng.permutation(u)
    else:
        where = rng.choice(n, size=min(N_SPIKES, n), replace=False)
        signs = rng.choice([-1.0, 1.0], size=where.size)
        size = 1.0 if kind == "spikes" else 0.25 + np.abs(rng.standard_normal(where.size))
        u[where] = signs * size
    return u / np.sqrt(np.mean(u**2))


def measurement_matrix(design: str, m: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``sphere``: rows uniform on the unit sphere; ``gaussian``: entries N(0, 1/n)."""
    X = rng.standard_normal((m, n))
    if design == "sphere":
        return X / np.linalg.norm(X, axis=1, keepdims=True)
    if design == "gaussian":
        return X / np.sqrt(n)
    raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")


def measured(u, X, sigma2, rng, *, name, u_shape, n_test=0, meta=None, X_operator=None) -> Dataset:
    """The data set y = X u + N(0, sigma2) (plus ``n_test`` held-out measurements by fresh rows of the same kind)."""
    u = np.asarray(u, dtype=float).ravel()
    y = X @ u + np.sqrt(sigma2) * rng.standard_normal(X.shape[0])
    info = {"task": "regression", "u_shape": tuple(int(v) for v in u_shape), "true_u": u, "sigma2": float(sigma2),
            "citation": CITATION, **(meta or {})}
    if X_operator is not None:
        info["X_operator"] = X_operator
    X_test = y_test = None
    if n_test:
        X_test = measurement_matrix("sphere", n_test, u.size, rng)
        y_test = X_test @ u + np.sqrt(sigma2) * rng.standard_normal(n_test)
    return Dataset(X, y, X_test, y_test, name=name, meta=info)


@register("slm_signal", {"kind": checks.OneOf(SIGNALS), "design": checks.OneOf(DESIGNS),
                         "n": checks.Interval(int, 2, MAX_N, "both"), "m": checks.Interval(int, 1, MAX_N, "both"),
                         "n_test": checks.Interval(int, 0, MAX_N, "both"), "sigma2": checks.NON_NEGATIVE})
def slm_signal(kind: str = "spikes", n: int = 512, m: int = 40, sigma2: float = 0.005, design: str = "sphere",
               n_test: int = 0, seed: int = 0) -> Dataset:
    """A synthetic sparse signal of Nickisch thesis Fig. 5.2 measured by m random unit-norm rows (§5.5)."""
    rng = np.random.default_rng(seed)
    u = synthetic_signal(kind, n, rng)
    X = measurement_matrix(design, m, n, rng)
    meta = {"source": f"generated: the '{kind}' signal of Fig. 5.2, design '{design}' "
                      f"(bayeszoo.datasets.slm_data)", "licence": "generated data",
            "preprocessing": "see the bayeszoo.datasets.slm_data docstring"}
    return measured(u, X, sigma2, rng, name=f"slm_signal_{kind}", u_shape=(n,), n_test=n_test, meta=meta)


def grey_image(image: str = "camera", size: int = 32) -> np.ndarray:
    """A scikit-image picture as grey values in [0, 1], resized (anti-aliased) to size x size."""
    import skimage.data
    from skimage.color import rgb2gray
    from skimage.transform import resize
    from skimage.util import img_as_float

    img = getattr(skimage.data, checks.choice("grey_image", "image", image, IMAGES))()
    img = rgb2gray(img[..., :3]) if img.ndim == 3 else img_as_float(img)
    img = np.asarray(img, dtype=float)
    side = min(img.shape)
    img = img[:side, :side]                     # square crop from the top left (the pictures are nearly square)
    return np.clip(resize(img, (size, size), anti_aliasing=True), 0.0, 1.0)


def fourier_mask(shape, k: int, rng: np.random.Generator) -> np.ndarray:
    """k frequencies drawn uniformly without replacement, the zero frequency always among them."""
    n = int(np.prod(shape))
    picks = np.concatenate([[0], 1 + rng.choice(n - 1, size=min(k, n) - 1, replace=False)])
    mask = np.zeros(n, dtype=bool)
    mask[picks] = True
    return mask.reshape(shape)


@register("slm_image", {"image": checks.OneOf(IMAGES), "design": checks.OneOf(IMAGE_DESIGNS),
                        "size": checks.Interval(int, 4, 256, "both"), "m": checks.POSITIVE_INT,
                        "n_test": checks.Interval(int, 0, MAX_N, "both"), "sigma2": checks.NON_NEGATIVE})
def slm_image(image: str = "camera", size: int = 32, m: int = 256, sigma2: float = 0.005, design: str = "gaussian",
              n_test: int = 0, seed: int = 0) -> Dataset:
    """A scikit-image grey-level picture measured by m random filters or Fourier coefficients (Nickisch §5.5)."""
    n = size * size
    if m > 2 * n:   # twice the pixels: the most measurements a design of this size takes
        raise ValueError(f"dataset 'slm_image': m must be at most 2 size**2 = {2 * n} for size {size}; got {m}")
    rng = np.random.default_rng(seed)
    u = grey_image(image, size)
    spec = None
    if design == "gaussian":
        X = measurement_matrix("gaussian", m, n, rng)
    else:
        mask = fourier_mask((size, size), max(1, m // 2), rng)   # two rows (real, imaginary) per frequency
        spec = {"kind": "fourier", "mask": mask.tolist()}
        X = operators.to_dense(operators.fourier_sampling((size, size), mask))
    from importlib import metadata

    meta = {"source": f"scikit-image {metadata.version('scikit-image')} skimage.data.{image}(), grey, resized to "
                      f"{size} x {size}; design '{design}'",
            "licence": "as stated in scikit-image's docstring (bayeszoo.datasets.slm_data)",
            "preprocessing": "grey values in [0, 1], square crop, anti-aliased resize"}
    return measured(u, X, sigma2, rng, name=f"slm_image_{image}", u_shape=(size, size), n_test=n_test, meta=meta,
                    X_operator=spec)


# ------------------------------------------------------------------------------------- MRI (Nickisch ch. 6)
MRI_FILE = "mri_epi_slices.npz"
MRI_SOURCE = ("nibabel 5.4.2, nibabel/tests/data/example4d.nii.gz (MIT licence, nibabel's COPYING): first volume, "
              "axial slices 4, 7, 10, 13, 16, 19 of 24; each 128 x 96 slice transposed, zero-padded to 128 x 128, "
              "2 x 2 block means to 64 x 64, divided by the volume's 99.9th percentile and clipped to [0, 1]")


def mri_slices() -> np.ndarray:
    """The six 64 x 64 brain slices shipped with the package (``MRI_SOURCE``), shape (6, 64, 64), values in [0, 1]."""
    from importlib import resources

    with resources.files("bayeszoo.datasets").joinpath("data", MRI_FILE).open("rb") as fh:
        return np.load(fh)["slices"].astype(float)


def cartesian_lines(size: int, lines) -> np.ndarray:
    """The k-space mask (size x size, DFT frequency order) of the phase-encode lines ``lines`` (row indices of the
    k-space grid: 0 the centre, size - 1 the line below it, as ``numpy.fft.fftfreq`` orders them)."""
    mask = np.zeros((size, size), dtype=bool)
    mask[np.asarray(lines, dtype=int) % size] = True
    return mask


def central_lines(size: int, count: int) -> np.ndarray:
    """The ``count`` phase-encode lines nearest the k-space centre (the thesis's low-resolution start)."""
    freq = np.fft.fftfreq(size) * size
    return np.argsort(np.abs(freq) + 0.25 * (freq < 0), kind="stable")[:count]


@register("slm_mri", {"slice_index": checks.NON_NEGATIVE_INT, "n_central": checks.POSITIVE_INT,
                      "sigma2": checks.NON_NEGATIVE})
def slm_mri(slice_index: int = 0, lines=None, n_central: int = 8, sigma2: float = 1e-4, seed: int = 0) -> Dataset:
    """A 64 x 64 brain slice (``mri_slices``) measured on Cartesian k-space lines (Nickisch §6.4): ``lines`` (row
    indices of the DFT grid) or, if None, the ``n_central`` lines around the centre; real and imaginary parts of
    every sample on a line are separate rows, each with noise of variance ``sigma2``."""
    owner = "dataset 'slm_mri'"
    images = mri_slices()
    size = images.shape[1]
    if slice_index >= len(images):   # the bounds the shipped slices set
        raise ValueError(f"{owner}: slice_index must be at most {len(images) - 1} (there are {len(images)} slices); "
                         f"got {slice_index}")
    if lines is None:
        if n_central > size:
            raise ValueError(f"{owner}: n_central must be at most the {size} lines of the grid; got {n_central}")
        lines = central_lines(size, n_central)
    lines = np.asarray(lines)
    if lines.ndim != 1 or lines.size == 0 or not np.issubdtype(lines.dtype, np.integer) or \
            np.any((lines < 0) | (lines >= size)) or len(set(lines.tolist())) != lines.size:
        raise ValueError(f"{owner}: lines must be distinct row indices of the {size} x {size} k-space grid, "
                         f"got {lines.tolist()}")
    mask = cartesian_lines(size, lines)
    X = operators.to_dense(operators.fourier_sampling((size, size), mask))
    meta = {"source": MRI_SOURCE, "licence": "MIT (nibabel)", "preprocessing": "see source; Cartesian lines "
            f"{sorted(lines.tolist())}", "lines": sorted(int(v) for v in lines)}
    return measured(images[slice_index], X, sigma2, np.random.default_rng(seed),
                    name=f"slm_mri_slice{slice_index}", u_shape=(size, size), meta=meta,
                    X_operator={"kind": "fourier", "mask": mask.tolist()})
