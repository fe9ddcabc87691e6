"""Multiclass and multi-source datasets of the multiple-kernel-learning experiments (Damoulas thesis ch. 3-5, 7).

Labels are the integers 0..C-1 (float array). Multi-source sets list their feature views in
``meta["sources"]`` (name -> column indices of X), which :class:`bayeszoo.models.PMKL` reads.

* ``iris``, ``wine``: scikit-learn's bundled copies of the UCI sets (Table 4.2); no test split by default
  (the thesis uses 10-fold cross-validation; ``test_fraction`` gives a seeded random split).
* ``crabs4``: Leptograpsus crabs with the thesis's 4 classes (species x sex) and 5 measurements, from the
  ``crabs`` file shipped for GP classification.
* ``mfeat_standin``: a STAND-IN for UCI multiple features (mfeat), which no installed package ships: scikit-learn's
  8x8 digits with four views computed here (pixels, Fourier magnitudes, Karhunen-Loeve / PCA projections,
  Zernike-like radial-angular moments), 20 training and 20 test digits per class as in the thesis's protocol.
* ``neal3``: the 3-class synthetic data of ch. 4 (Neal 1998) from a generator with stated constants.
* ``neal_ellipses``: the 3-class data of ch. 3 (two annuli and a central Gaussian plus two noise dimensions).
* ``mkl_sources``: the §3.7 toy: an informative source, a partially informative source and a pure-noise source.

Balance, glass, vehicle and soybean (Table 4.2) are not shipped by any package installed here and are not
provided (no downloads at run time).
"""
from __future__ import annotations

import numpy as np

from bayeszoo import checks
from bayeszoo.datasets import Dataset, register
from bayeszoo.datasets.shipped import (MASS_CITE, MASS_LICENCE, RDATASETS, UCI_LICENCE, check_options, column,
                                       columns, read_csv, standardize_split)

_DAMOULAS = ("T. Damoulas, Probabilistic Multiple Kernel Learning, PhD thesis, University of Glasgow, 2009")
_SKLEARN_LICENCE = "scikit-learn BSD-3-Clause (bundled copy)"


MAX_ROWS = 100_000      # largest number of generated training or test rows
MAX_REDRAWS = 1000      # mkl_sources: redraws of a small training set until it holds every class


def _rows(low: int) -> checks.Interval:
    """A number of generated rows: an integer in low..MAX_ROWS."""
    return checks.Interval(int, low, MAX_ROWS, "both")


def _build(name, X, y, *, seed, test_fraction, standardize, meta, X_test=None, y_test=None) -> Dataset:
    """Optional seeded random split, z-scoring with the training statistics, and the Dataset."""
    check_options(name, seed, test_fraction, standardize)
    X, y = np.asarray(X, float), np.asarray(y, float)
    meta = {"task": "multiclass", **meta}
    if test_fraction is not None:
        if X_test is not None:
            X, y = np.vstack([X, X_test]), np.concatenate([y, y_test])
        n = X.shape[0]
        n_test = int(round(test_fraction * n))
        if n_test >= n:
            raise ValueError(f"dataset {name!r}: test_fraction {test_fraction} leaves no training rows of {n}")
        perm = np.random.default_rng(seed).permutation(n)
        te, tr = np.sort(perm[:n_test]), np.sort(perm[n_test:])
        X, X_test, y, y_test = X[tr], X[te], y[tr], y[te]
        meta["split"] = f"random: {len(tr)} training / {len(te)} test rows, numpy default_rng({seed})"
    elif X_test is None:
        meta["split"] = "none: all rows are training rows (the thesis cross-validates; see PMKL cv protocols)"
    if standardize:
        X, X_test, mean, sd = standardize_split(X, X_test)
        meta["preprocessing"] = (meta.get("preprocessing", "") + "; features z-scored with the training rows' "
                                 "mean and sd").lstrip("; ")
    meta["seed"] = int(seed)
    return Dataset(X=X, y=y, X_test=X_test, y_test=y_test, name=name, meta=meta)


@register("iris")
def iris(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """Fisher's iris (UCI, scikit-learn copy): 150 x 4, 3 classes."""
    from sklearn import __version__ as skv
    from sklearn.datasets import load_iris

    d = load_iris()
    return _build("iris", d.data, d.target, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "source": f"scikit-learn {skv} bundled data set load_iris (UCI Iris)",
        "licence": UCI_LICENCE + "; " + _SKLEARN_LICENCE,
        "citation": "R. A. Fisher, The use of multiple measurements in taxonomic problems, Annals of Eugenics 7, 1936",
        "preprocessing": "4 measurements (cm); label setosa 0, versicolor 1, virginica 2",
        "feature_names": list(d.feature_names), "classes": dict(enumerate(d.target_names.tolist()))})


@register("wine")
def wine(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """UCI wine (scikit-learn copy): 178 x 13, 3 cultivars."""
    from sklearn import __version__ as skv
    from sklearn.datasets import load_wine

    d = load_wine()
    return _build("wine", d.data, d.target, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "source": f"scikit-learn {skv} bundled data set load_wine (UCI Wine)",
        "licence": UCI_LICENCE + "; " + _SKLEARN_LICENCE,
        "citation": "M. Forina et al., PARVUS, Institute of Pharmaceutical and Food Analysis, Genoa (UCI Wine, 1991)",
        "preprocessing": "13 chemical measurements; label cultivar 0, 1, 2",
        "feature_names": list(d.feature_names), "classes": {0: "class_0", 1: "class_1", 2: "class_2"}})


@register("crabs4")
def crabs4(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """Leptograpsus crabs with 4 classes (species x sex) and 5 measurements: 200 x 5 (Damoulas Table 4.2)."""
    h, rows = read_csv("gpc_crabs.csv")
    X = columns(h, rows, ("FL", "RW", "CL", "CW", "BD"))
    sp, sex = column(h, rows, "sp"), column(h, rows, "sex")
    code = {("B", "M"): 0, ("B", "F"): 1, ("O", "M"): 2, ("O", "F"): 3}
    y = np.array([code[(a, b)] for a, b in zip(sp, sex)], float)
    return _build("crabs4", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "source": ("N. A. Campbell, R. J. Mahon (1974), as R package MASS data set crabs; file from "
                   + RDATASETS.format(path="MASS/crabs") + " (the file of the 'crabs' dataset)"),
        "licence": MASS_LICENCE,
        "citation": ("N. A. Campbell, R. J. Mahon, Australian J. Zoology 22:417-425, 1974; " + MASS_CITE),
        "preprocessing": "FL, RW, CL, CW, BD (mm); label blue male 0, blue female 1, orange male 2, orange female 3",
        "feature_names": ["FL", "RW", "CL", "CW", "BD"],
        "classes": {0: "B/M", 1: "B/F", 2: "O/M", 3: "O/F"}, "files": ["gpc_crabs.csv"]})


# ------------------------------------------------------------------------------ multiple-features stand-in
def digit_views(images: np.ndarray, kl_basis: np.ndarray | None = None, kl_mean: np.ndarray | None = None):
    """Four feature views of 8x8 digit images (n, 8, 8), in the spirit of the UCI mfeat views.

    pix: the 64 pixel values; fou: magnitudes of the 2-D discrete Fourier transform at the 25 lowest
    non-negative frequencies (translation invariant, like Fourier descriptors); kl: projections on the first
    16 principal axes (Karhunen-Loeve) given ``kl_basis`` / ``kl_mean``; zer: magnitudes of 20 radial-angular
    moments sum_xy r^p e^{i q phi} I(x, y) (p = 0..4, q = 0..3) about the image centre, rotation-invariant like
    Zernike moment magnitudes.
    """
    n = images.shape[0]
    pix = images.reshape(n, -1)
    F = np.abs(np.fft.fft2(images))[:, :5, :5].reshape(n, -1)
    yy, xx = np.mgrid[0:8, 0:8]
    xc, yc = (xx - 3.5) / 3.5, (yy - 3.5) / 3.5
    r, phi = np.hypot(xc, yc), np.arctan2(yc, xc)
    mom = []
    for p in range(5):
        for q in range(4):
            basis = (r**p) * np.exp(1j * q * phi)
            mom.append(np.abs(np.einsum("nij,ij->n", images, basis)))
    zer = np.stack(mom, 1)
    kl = (pix - kl_mean) @ kl_basis
    return {"pix": pix, "fou": F, "kl": kl, "zer": zer}


@register("mfeat_standin", {"n_per_class": checks.Interval(int, 1, 80, "both"),
                             "n_test_per_class": checks.Interval(int, 1, 80, "both")})
def mfeat_standin(seed: int = 0, n_per_class: int = 20, n_test_per_class: int = 20,
                  standardize: bool = True) -> Dataset:
    """STAND-IN for UCI multiple features: scikit-learn's 8x8 digits, 10 classes, views pix / fou / kl / zer."""
    from sklearn import __version__ as skv
    from sklearn.datasets import load_digits

    d = load_digits()
    rng = np.random.default_rng(seed)
    tr, te = [], []
    for c in range(10):
        idx = rng.permutation(np.nonzero(d.target == c)[0])
        tr += idx[:n_per_class].tolist()
        te += idx[n_per_class:n_per_class + n_test_per_class].tolist()
    tr, te = np.array(tr), np.array(te)
    imgs = d.images.astype(float)
    pix_tr = imgs[tr].reshape(len(tr), -1)
    mean = pix_tr.mean(0)
    _, _, Vt = np.linalg.svd(pix_tr - mean, full_matrices=False)
    basis = Vt[:16].T                                        # KL axes from the training digits only
    v_tr, v_te = digit_views(imgs[tr], basis, mean), digit_views(imgs[te], basis, mean)
    cols, start = {}, 0
    for k, v in v_tr.items():
        cols[k] = list(range(start, start + v.shape[1]))
        start += v.shape[1]
    X = np.hstack(list(v_tr.values()))
    X_test = np.hstack(list(v_te.values()))
    meta = {
        "stand_in_for": "UCI Multiple Features (mfeat: fou 76, kar 64, pix 240, zer 47 columns; Damoulas §7.5.1)",
        "source": (f"scikit-learn {skv} bundled data set load_digits (UCI Optical Recognition of Handwritten "
                   "Digits, 1797 8x8 images). This is NOT the mfeat data of the thesis, which no installed package "
                   "ships; the four views are computed here by bayeszoo.datasets.pmkl_data.digit_views"),
        "licence": "CC BY 4.0 (UCI Machine Learning Repository); " + _SKLEARN_LICENCE,
        "citation": "E. Alpaydin, C. Kaynak, Optical Recognition of Handwritten Digits, UCI, 1998; " + _DAMOULAS,
        "preprocessing": (f"{n_per_class} training and {n_test_per_class} test digits per class drawn with numpy "
                          f"default_rng({seed}) (thesis: 20 / 20 per class, 50 repetitions); views pix (64), "
                          "fou (25 low-frequency |FFT|), kl (16 PCA projections fitted on the training digits), "
                          "zer (20 radial-angular moment magnitudes)"),
        "sources": cols, "classes": {c: str(c) for c in range(10)}}
    return _build("mfeat_standin", X, d.target[tr], seed=seed, test_fraction=None, standardize=standardize,
                  meta=meta, X_test=X_test, y_test=d.target[te])


# ------------------------------------------------------------------------------------------- synthetic
def neal3_labels(X: np.ndarray) -> np.ndarray:
    """Neal's 3-way rule on the noise-free (x1, x2): 0 inside the circle |x - (0.4, 0.5)| < 0.35, else 1 if
    0.8 x1 + 1.8 x2 < 0.6, else 2."""
    inside = np.hypot(X[:, 0] - 0.4, X[:, 1] - 0.5) < 0.35
    below = 0.8 * X[:, 0] + 1.8 * X[:, 1] < 0.6
    return np.where(inside, 0, np.where(below, 1, 2)).astype(float)


def _neal3_arrays(n, rng, noise=0.1):
    X = rng.random((n, 4))
    return X + noise * rng.standard_normal((n, 4)), neal3_labels(X)


@register("neal3", {"n": _rows(1), "n_test": _rows(0)})
def neal3(seed: int = 0, n: int = 400, n_test: int = 600, standardize: bool = False) -> Dataset:
    """Neal's (1998) 3-class synthetic data of Damoulas ch. 4: 4 U(0,1) inputs, class from (x1, x2), noise 0.1."""
    rng = np.random.default_rng(seed)
    X, y = _neal3_arrays(n, rng)
    Xt, yt = _neal3_arrays(n_test, rng)
    return _build("neal3", X, y, X_test=Xt, y_test=yt, seed=seed, test_fraction=None, standardize=standardize,
                  meta={"source": "generated (seeded); constants of Neal's FBM three-way data as stated in the digest "
                                  "(circle centre (0.4, 0.5), radius 0.35; line 0.8 x1 + 1.8 x2 < 0.6; noise sd 0.1 "
                                  "on every input; x3, x4 irrelevant) -- recalled, not checked against FBM's file",
                        "licence": "generated data", "citation": _DAMOULAS + ", §4.5 (b); R. M. Neal, 1998",
                        "preprocessing": f"{n} training / {n_test} test points"})


def _ellipse_arrays(n_per_class, rng, sigma2=0.1):
    out_X, out_y = [], []
    for c, (lo, hi) in enumerate(((0.1, 0.5), (0.6, 1.0))):
        r = np.sqrt(rng.uniform(lo, hi, n_per_class))
        a = rng.uniform(0, 2 * np.pi, n_per_class)
        out_X.append(np.column_stack([r * np.cos(a), r * np.sin(a)]))
        out_y.append(np.full(n_per_class, c))
    out_X.append(np.sqrt(sigma2) * rng.standard_normal((n_per_class, 2)))
    out_y.append(np.full(n_per_class, 2))
    X = np.vstack(out_X)
    X = np.hstack([X, rng.standard_normal((X.shape[0], 2))])
    return X, np.concatenate(out_y).astype(float)


@register("neal_ellipses", {"n_per_class": _rows(1), "n_test_per_class": _rows(0)})
def neal_ellipses(seed: int = 0, n_per_class: int = 100, n_test_per_class: int = 200) -> Dataset:
    """Damoulas ch. 3 data: annuli r^2 in (0.1, 0.5] and [0.6, 1], a central N(0, 0.1 I), two N(0, 1) noise dims."""
    rng = np.random.default_rng(seed)
    X, y = _ellipse_arrays(n_per_class, rng)
    Xt, yt = _ellipse_arrays(n_test_per_class, rng)
    return _build("neal_ellipses", X, y, X_test=Xt, y_test=yt, seed=seed, test_fraction=None, standardize=False,
                  meta={"source": "generated (seeded): eqs 3.30-3.32 with the unstated constants chosen here: r^2 "
                                  "uniform in each interval, angle uniform, class-3 variance 0.1, noise dims N(0, 1)",
                        "licence": "generated data", "citation": _DAMOULAS + ", §3.6",
                        "preprocessing": f"{n_per_class} training / {n_test_per_class} test points per class"})


@register("mkl_sources", {"n": _rows(3), "n_test": _rows(0), "noise_partial": checks.NON_NEGATIVE})
def mkl_sources(seed: int = 0, n: int = 90, n_test: int = 300, noise_partial: float = 1.0) -> Dataset:
    """Three sources on Neal's 3-class labels (Damoulas §3.7): 'informative' (x1, x2 with noise 0.1),
    'partial' (x1 with noise 0.1, x2 with noise ``noise_partial``), 'noise' (two N(0, 1) columns); ``n`` >= 3 so
    that the training rows can hold all three classes."""
    rng = np.random.default_rng(seed)

    def make(m):
        Z = rng.random((m, 2))
        y = neal3_labels(Z)
        inf = Z + 0.1 * rng.standard_normal((m, 2))
        part = np.column_stack([Z[:, 0] + 0.1 * rng.standard_normal(m), Z[:, 1] + noise_partial
                                * rng.standard_normal(m)])
        return np.hstack([inf, part, rng.standard_normal((m, 2))]), y

    X, y = make(n)
    Xt, yt = make(n_test)
    for _ in range(MAX_REDRAWS):                  # n small: make sure every class is present
        if np.unique(y).size == 3:
            break
        X, y = make(n)
    else:
        raise ValueError(f"dataset 'mkl_sources': {MAX_REDRAWS} draws of n={n} training rows all missed a class; "
                         f"ask for more rows")
    return _build("mkl_sources", X, y, X_test=Xt, y_test=yt, seed=seed, test_fraction=None, standardize=True,
                  meta={"source": "generated (seeded); Neal's 3-class rule (see neal3) on U(0,1)^2 inputs",
                        "licence": "generated data", "citation": _DAMOULAS + ", §3.7",
                        "preprocessing": f"{n} training / {n_test} test points",
                        "sources": {"informative": [0, 1], "partial": [2, 3], "noise": [4, 5]}})
