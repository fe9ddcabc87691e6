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
scale 1 and amplitude 1, not fitted), ``Ridge()``, ``SVR()``.

Target: every bayeszoo estimator at its defaults within one point (0.01 of accuracy or R^2) of the best peer.
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
                ("AdaptiveRelevanceVectorRegressor()", AdaptiveRelevanceVectorRegressor(), True, True),
                ("Ridge()", Ridge(), False, True), ("SVR()", SVR(), False, True)]
    binary = (lambda est: est) if task == "binary" else OneVsRestClassifier
    ovr = "" if task == "binary" else " (one-vs-rest)"
    return [(f"RelevanceVectorClassifier(){ovr}", binary(RelevanceVectorClassifier()), True, True),
            (f"RelevanceVectorClassifier({FORMER}){ovr}", binary(RelevanceVectorClassifier(width=1.0)), True, False),
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


def run(datasets=DATASETS, folds: int = 3) -> dict:
    results, met = {}, True
    for name in datasets:
        X, y, task = _load(name)
        rows = {}
        for label, estimator, ours, counted in _models(task):
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


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1, default=str))
