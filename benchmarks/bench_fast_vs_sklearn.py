"""bayeszoo ``fast`` (Tipping-Faul) against sklearn-rvm's ``EMRVR`` and scikit-learn's ``ARDRegression``.

Problem: Boston housing, ``bz.datasets.load("boston", test_fraction=0.2, seed=0)`` (features z-scored with the
training rows' statistics), Gaussian kernel of width h, ``bz.models.RVM(width=h)``:

* ``fast``: ``bz.fit(model, data, backend="fast")``; wall time of the whole call (design matrix included);
* ``EMRVR``: ``kernel="rbf"``, ``gamma = 1 / h**2`` (sklearn's rbf is exp(-gamma |x - y|^2) and ours
  exp(-|x - y|^2 / h^2)), bias on; wall time of ``fit``;
* ``ARDRegression``: on the same kernel features ``Phi = model.design(X, X)`` (bias column included, so
  ``fit_intercept=False``); wall time of building Phi plus ``fit``.

Reported, averaged over seeded 80/20 splits: fit seconds (``fast``: best of ``repeats``; the others once),
test MSE of the predictive mean, number of relevance vectors (basis functions left unpruned, bias included).
One split's test set has ~100 rows, so MSE differences are judged on paired splits against their standard
error. Target: ``fast`` faster than both at equal or better test MSE.
"""
from __future__ import annotations

import math
import traceback
import warnings

from _timing import best_of

WIDTH = 5.0  # ~ sqrt(13 features): typical distance between z-scored Boston rows
TARGET = ("fast faster than EMRVR and ARDRegression, with test MSE no worse than theirs "
          "(mean paired MSE difference within 2 paired standard errors)")


def _fast(model, data, seed, repeats):
    import numpy as np

    import bayeszoo as bz
    from bayeszoo.models.rvm import LOG_ALPHA_PRUNED

    secs, fit = best_of(lambda: bz.fit(model, data, backend="fast", draws=1000, chains=1, seed=seed,
                                        progress=False), repeats)
    log_alpha = np.median(fit.idata.posterior["log_alpha"].values.reshape(-1, model.n_basis(data)), 0)
    return {"fit_s": secs, "mse": float(np.mean((model.predict(fit, data.X_test) - data.y_test) ** 2)),
            "n_rv": int(np.sum(log_alpha < LOG_ALPHA_PRUNED)), "iterations": fit.info.get("iterations")}


def _emrvr(width, data):
    import numpy as np
    from sklearn_rvm import EMRVR

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        em = EMRVR(kernel="rbf", gamma=1.0 / width**2, bias_used=True)
        secs, _ = best_of(lambda: em.fit(data.X, data.y), 1)
        mse = float(np.mean((em.predict(data.X_test) - data.y_test) ** 2))
    return {"fit_s": secs, "mse": mse, "n_rv": int(len(em.alpha_)), "iterations": getattr(em, "n_iter_", None)}


def _ard(model, data):
    import numpy as np
    from sklearn.linear_model import ARDRegression

    def ard_fit():
        Phi = model.design(data.X, data.X)
        return ARDRegression(fit_intercept=False).fit(Phi, data.y)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        secs, ard = best_of(ard_fit, 1)
    mse = float(np.mean((ard.predict(model.design(data.X_test, data.X)) - data.y_test) ** 2))
    return {"fit_s": secs, "mse": mse, "n_rv": int(np.sum(ard.coef_ != 0)), "iterations": getattr(ard, "n_iter_", None)}


def run(width: float = WIDTH, repeats: int = 3, splits: int = 5, ard_splits: int = 1) -> dict:
    """``splits`` seeded 80/20 splits for fast and EMRVR (paired); ARDRegression (slow) on the first ``ard_splits``."""
    import numpy as np

    import bayeszoo as bz

    model = bz.models.RVM(width=width)
    bz.fit(model, bz.datasets.load("boston", test_fraction=0.2, seed=0), backend="fast", draws=10, chains=1,
           progress=False)  # warm-up (imports, first-call costs)
    runners = {"bayeszoo fast": lambda data, seed: _fast(model, data, seed, repeats),
               "sklearn-rvm EMRVR": lambda data, seed: _emrvr(width, data),
               "sklearn ARDRegression": lambda data, seed: _ard(model, data)}
    per_split = {name: [] for name in runners}
    for seed in range(splits):
        data = bz.datasets.load("boston", test_fraction=0.2, seed=seed)
        for name, fn in runners.items():
            if name == "sklearn ARDRegression" and seed >= ard_splits:
                continue
            try:
                per_split[name].append(fn(data, seed))
            except Exception as exc:
                per_split[name].append({"error": f"{type(exc).__name__}: {exc}",
                                        "traceback": traceback.format_exc(limit=3)})
    methods = {}
    for name, results in per_split.items():
        ok = [r for r in results if "error" not in r]
        if not ok:
            methods[name] = {"error": results[0]["error"] if results else "not run"}
            continue
        methods[name] = {"splits": len(ok), "fit_s": float(np.mean([r["fit_s"] for r in ok])),
                         "mse": float(np.mean([r["mse"] for r in ok])),
                         "n_rv": float(np.mean([r["n_rv"] for r in ok])), "per_split": results}

    ratios, met = {}, None
    fast = per_split["bayeszoo fast"]
    if "error" not in methods["bayeszoo fast"]:
        met = True
        for other in ("sklearn-rvm EMRVR", "sklearn ARDRegression"):
            if "error" in methods[other]:
                met = None if met is not False else met
                continue
            pairs = [(f, o) for f, o in zip(fast, per_split[other]) if "error" not in f and "error" not in o]
            t_ratio = float(np.mean([o["fit_s"] / f["fit_s"] for f, o in pairs]))
            diff = np.array([f["mse"] - o["mse"] for f, o in pairs])
            se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else math.nan
            ratios[f"{other} time / fast time"] = t_ratio
            ratios[f"fast MSE - {other} MSE"] = float(diff.mean())
            ratios[f"  (paired standard error, {diff.size} splits)"] = se
            no_worse = diff.mean() <= (2 * se if np.isfinite(se) else 0.02 * np.mean([o["mse"] for _, o in pairs]))
            if not (t_ratio > 1 and no_worse):
                met = False
    return {"name": "fast_vs_sklearn",
            "problem": f"boston, {splits} seeded 80/20 splits (ARDRegression on {ard_splits}), Gaussian kernel "
                       f"width {width:g} (EMRVR gamma={1 / width**2:.4g})",
            "methods": methods, "ratios": ratios, "target": TARGET, "target_met": met}


def rows(result: dict) -> list[tuple[str, str, str]]:
    if "error" in result:
        return [("fast_vs_sklearn", "ERROR", result["error"][:100])]
    out = []
    for name, m in result["methods"].items():
        if "error" in m:
            out.append((f"sklearn/{name}", "ERROR", m["error"][:100]))
            continue
        out.append((f"sklearn/{name}", f"{m['fit_s']:.3f} s",
                    f"mean over {m['splits']} splits: test MSE {m['mse']:.2f}, {m['n_rv']:.1f} relevance vectors"))
    for key, value in result["ratios"].items():
        out.append((f"sklearn {key.strip()}", f"{value:.2f}x" if "time" in key else f"{value:.3f}", ""))
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1, default=str))
