"""bayeszoo's scikit-learn estimators at their defaults against scikit-learn's usual models at theirs.

Data: scikit-learn's bundled loaders (no download): breast cancer (569 x 30, binary), diabetes (442 x 10,
regression), iris (150 x 4, three classes), wine (178 x 13, three classes). Every model runs in a ``Pipeline``
behind ``StandardScaler``; regressors inside ``TransformedTargetRegressor(transformer=StandardScaler())`` (the
RVM's priors, and SVR's epsilon, are on the scale of standardised targets). 3-fold cross-validation, stratified for
the classifiers, shuffled with seed 0; the score is scikit-learn's (accuracy; R^2 for diabetes), mean over folds.

bayeszoo: ``RelevanceVectorClassifier``, ``BayesGPClassifier``, ``PMKLClassifier``, ``RelevanceVectorRegressor``,
``AdaptiveRelevanceVectorRegressor``, all with no arguments (binary classifiers wrapped in ``OneVsRestClassifier``
on the three-class sets); ``RelevanceVectorClassifier(width=1.0)`` / ``RelevanceVectorRegressor(width=1.0)``, the
default before ``width="scale"``, and ``BayesGPClassifier(log_lengthscale=0.0)``, the default before
``log_lengthscale="scale"``, are shown for reference. Peers: ``LogisticRegression()``, ``SVC()``,
``GaussianProcessClassifier()`` (its default kernel, ``ConstantKernel(1.0, "fixed") * RBF(1.0, "fixed")``: length
scale 1 and amplitude 1, not fitted), ``Ridge()``, ``SVR()``. ``width="evidence"`` (the width of largest log
evidence, chosen in every training fold) is shown beside the RVM's default.

Target: every bayeszoo estimator at its defaults within one point (0.01 of accuracy or R^2) of the best peer.

``width_cost``: the RVM estimators' time over a grid of fixed widths (and ``width="evidence"``), as ratios to the
default width's time on the same split, measured in one run: breast cancer (classifier) and diabetes (regressor),
standardised, one 3-fold CV each.
"""
from __future__ import annotations

import time
import traceback
import warnings

TARGET = "every bayeszoo estimator at its defaults within 0.01 (accuracy / R^2) of the best scikit-learn peer"
MARGIN = 0.01
DATASETS = ("breast_cancer", "diabetes", "iris", "wine")
#: the former default width, shown for reference (not part of the target)
FORMER = "width=1.0 (former default)"
#: the GP classifier's former default lengthscale (1), shown for reference (not part of the target)
FORMER_GP = "log_lengthscale=0.0 (former default)"
#: the RVM's width chosen by the evidence, shown beside the default (not part of the target)
EVIDENCE = "width='evidence'"
#: the fixed widths of ``width_cost``, as multiples of the "scale" width of the standardised data (sqrt(d))
WIDTH_FACTORS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0)


def _load(name):
    from sklearn import datasets

    loader = {"breast_cancer": datasets.load_breast_cancer, "diabetes": datasets.load_diabetes,
              "iris": datasets.load_iris, "wine": datasets.load_wine}[name]
    X, y = loader(return_X_y=True)
    return X, y, ("regression" if name == "diabetes" else "binary" if name == "breast_cancer" else "multiclass")


def _models(task):
    """(name, estimator, is_ours, counts_for_target) for one task."""
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.svm import SVC, SVR

    from bayeszoo.sklearn import (AdaptiveRelevanceVectorRegressor, BayesGPClassifier, PMKLClassifier,
                                  RelevanceVectorClassifier, RelevanceVectorRegressor)

    if task == "regression":
        return [("RelevanceVectorRegressor()", RelevanceVectorRegressor(), True, True),
                (f"RelevanceVectorRegressor({FORMER})", RelevanceVectorRegressor(width=1.0), True, False),
                (f"RelevanceVectorRegressor({EVIDENCE})", RelevanceVectorRegressor(width="evidence"), True, False),
                ("AdaptiveRelevanceVectorRegressor()", AdaptiveRelevanceVectorRegressor(), True, True),
                ("Ridge()", Ridge(), False, True), ("SVR()", SVR(), False, True)]
    binary = (lambda est: est) if task == "binary" else OneVsRestClassifier
    ovr = "" if task == "binary" else " (one-vs-rest)"
    return [(f"RelevanceVectorClassifier(){ovr}", binary(RelevanceVectorClassifier()), True, True),
            (f"RelevanceVectorClassifier({FORMER}){ovr}", binary(RelevanceVectorClassifier(width=1.0)), True, False),
            (f"RelevanceVectorClassifier({EVIDENCE}){ovr}", binary(RelevanceVectorClassifier(width="evidence")), True,
             False),
            (f"BayesGPClassifier(){ovr}", binary(BayesGPClassifier()), True, True),
            (f"BayesGPClassifier({FORMER_GP}){ovr}", binary(BayesGPClassifier(log_lengthscale=0.0)), True, False),
            ("PMKLClassifier()", PMKLClassifier(), True, True),
            ("LogisticRegression()", LogisticRegression(), False, True), ("SVC()", SVC(), False, True),
            ("GaussianProcessClassifier()", GaussianProcessClassifier(), False, True)]


def _score(estimator, X, y, task, folds):
    import numpy as np
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pipe = make_pipeline(StandardScaler(), estimator)
    if task == "regression":
        pipe = TransformedTargetRegressor(regressor=pipe, transformer=StandardScaler())
        cv = KFold(folds, shuffle=True, random_state=0)
    else:
        cv = StratifiedKFold(folds, shuffle=True, random_state=0)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = cross_val_score(pipe, X, y, cv=cv, error_score="raise")
    return {"score": float(np.mean(scores)), "folds": [float(s) for s in scores],
            "seconds": time.perf_counter() - t0}


def run(datasets=DATASETS, folds: int = 3, only: tuple[str, ...] | None = None) -> dict:
    """``only``: run just the models whose label starts with one of these (and every peer, for the best peer)."""
    results, met = {}, True
    for name in datasets:
        X, y, task = _load(name)
        rows = {}
        for label, estimator, ours, counted in _models(task):
            if only is not None and ours and not label.startswith(only):
                continue
            try:
                rows[label] = {**_score(estimator, X, y, task, folds), "ours": ours, "counted": counted}
            except Exception as exc:  # one failing model must not hide the others
                rows[label] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=3),
                               "ours": ours, "counted": counted}
        peers = [r["score"] for r in rows.values() if not r["ours"] and "error" not in r]
        best_peer = max(peers) if peers else None
        for r in rows.values():
            if r["ours"] and r["counted"]:
                r["within_margin"] = ("error" not in r and best_peer is not None
                                      and r["score"] >= best_peer - MARGIN)
                met = met and r["within_margin"]
        results[name] = {"task": task, "n": int(X.shape[0]), "d": int(X.shape[1]), "best_peer": best_peer,
                         "models": rows}
    return {"name": "defaults", "problem": f"{', '.join(datasets)}; {folds}-fold CV, standard scaling",
            "datasets": results, "target": TARGET, "target_met": met}


def width_cost(factors=WIDTH_FACTORS, folds: int = 3) -> dict:
    """Seconds of one ``folds``-fold CV of the RVM estimator at each width h = factor * sqrt(d) (the "scale" width
    of standardised inputs) and at ``width="evidence"``, and each as a ratio to the default's, on breast cancer
    (classifier) and diabetes (regressor); scores beside."""
    import numpy as np

    from bayeszoo.sklearn import RelevanceVectorClassifier, RelevanceVectorRegressor

    out = {}
    for name, cls in (("breast_cancer", RelevanceVectorClassifier), ("diabetes", RelevanceVectorRegressor)):
        X, y, task = _load(name)
        base = float(np.sqrt(X.shape[1]))
        rows = {"scale": _score(cls(), X, y, task, folds)}
        for factor in factors:
            rows[f"{factor:g} x scale (h = {factor * base:.3g})"] = _score(cls(width=factor * base), X, y, task, folds)
        rows["evidence"] = _score(cls(width="evidence"), X, y, task, folds)
        for r in rows.values():
            r["ratio"] = r["seconds"] / rows["scale"]["seconds"]
        out[name] = rows
    return {"name": "width_cost", "problem": f"breast cancer, diabetes; {folds}-fold CV, standard scaling",
            "datasets": out}


def rows(result: dict) -> list[tuple[str, str, str]]:
    out = []
    for name, res in result["datasets"].items():
        metric = "R^2" if res["task"] == "regression" else "accuracy"
        for label, r in res["models"].items():
            if "error" in r:
                out.append((f"defaults/{name}/{label}", "ERROR", r["error"][:100]))
                continue
            note = f"{metric}, {r['seconds']:.1f} s"
            if r["ours"] and r["counted"]:
                note += f"; best peer {res['best_peer']:.3f}" + ("" if r["within_margin"] else " (more than 0.01 "
                                                                                              "below)")
            out.append((f"defaults/{name}/{label}", f"{r['score']:.3f}", note))
    return out


#: what benchmarks/run.py runs from this module: name -> what it measures, run(quick) and its table rows
BENCHMARKS = {
    "defaults": {"about": "the scikit-learn estimators at their defaults vs LogisticRegression / SVC / GPC / Ridge / "
                          "SVR on breast cancer, diabetes, iris, wine (3-fold CV)",
                 "run": lambda quick: run(datasets=("breast_cancer", "iris")) if quick else run(), "rows": rows},
}


if __name__ == "__main__":
    import json
    import sys

    if sys.argv[1:] == ["width_cost"]:
        print(json.dumps(width_cost(), indent=1, default=str))
    elif sys.argv[1:] == ["width"]:
        # the width decision: the RVM rows and the peers on the three sets it is judged on
        print(json.dumps(run(datasets=("breast_cancer", "diabetes", "wine"), only=("RelevanceVector",)), indent=1,
                         default=str))
    else:
        print(json.dumps(run(), indent=1, default=str))
