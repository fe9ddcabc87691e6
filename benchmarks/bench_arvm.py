"""aRVM against the RVM with inner-CV width on the real data sets of Tzikas et al. (2009, Tables I-II).

Both run the sources' nested protocol (:func:`bayeszoo.studies.arvm_nested_cv.rvm_versus_arvm`): outer
10-fold CV, inner 9-fold selection of the RVM width on 0.5, 1, ..., 10 (``fast`` backend) and of the aRVM
sparsity c in {1, BIC, RIC}. Reported side by side: mean test error (MSE / error rate), mean number of
relevance vectors, and seconds per outer fold (selection included). Not a test: nothing is asserted.

Sizes: every data set is subsampled (seeded) to at most ``max_n`` points, and the aRVM runs a shorter search
than the paper's (``ARVM_OPTIONS``); ``--folds``, ``--inner-folds`` and ``--max-n`` set the sizes (defaults: the
sources' 10 x 9 folds, 300 points); ``--quick`` uses 3 x 3 folds, every other width, and 150 points. On a shared
machine run it with ``OPENBLAS_NUM_THREADS=1``: the RVM's many small fits otherwise spend their time waking BLAS
threads (BENCHMARKS.md).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_arvm.py [--quick] [--folds 5 --inner-folds 3 --max-n 250]
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

REGRESSION = ("cpus", "boston", "concrete")
CLASSIFICATION = ("banana", "titanic", "image", "breast_cancer", "pima")
ARVM_OPTIONS = {"n_candidates": 30, "joint_iter": 30, "max_iter": 80, "patience": 5}


def _subsample(data, max_n, seed):
    import bayeszoo as bz

    X = np.vstack([data.X, data.X_test]) if data.has_test else data.X
    y = np.concatenate([data.y, data.y_test]) if data.has_test else data.y
    idx = np.random.default_rng(seed).permutation(X.shape[0])[:max_n]
    return bz.datasets.Dataset(X[idx], y[idx], name=data.name, meta=data.meta)


def run(datasets=REGRESSION + CLASSIFICATION, folds=10, inner_folds=9, widths=None, max_n=300,
        arvm_options=None, seed=0, progress=False) -> dict:
    import bayeszoo as bz
    from bayeszoo.studies.arvm_nested_cv import WIDTH_GRID, rvm_versus_arvm

    widths = WIDTH_GRID if widths is None else widths
    out = {"name": "arvm", "folds": folds, "inner_folds": inner_folds, "max_n": max_n, "widths": list(widths),
           "arvm_options": dict(arvm_options or ARVM_OPTIONS), "datasets": {}}
    for name in datasets:
        t0 = time.perf_counter()
        data = _subsample(bz.datasets.load(name), max_n, seed)
        res = rvm_versus_arvm(data, folds=folds, inner_folds=inner_folds, widths=widths,
                              arvm_options=out["arvm_options"], seed=seed, progress=progress)
        out["datasets"][name] = {
            "n": data.n, "d": data.d, "task": data.task, "seconds": time.perf_counter() - t0,
            **{f"{m}_{k}": float(np.mean(res[m][k])) for m in ("rvm", "arvm")
               for k in ("error", "n_relevant", "seconds")},
            "rvm_selected": [float(v) for v in res["rvm"]["selected"]],
            "arvm_selected": [str(v) for v in res["arvm"]["selected"]]}
        print(f"[arvm bench] {name}: {json.dumps(out['datasets'][name])}", file=sys.stderr, flush=True)
    return out


def rows(result) -> list[tuple[str, str, str]]:
    out = []
    for name, r in result["datasets"].items():
        metric = "MSE" if r["task"] == "regression" else "error rate"
        out.append((f"arvm {name} (n={r['n']}) {metric}", f"{r['arvm_error']:.4g} vs {r['rvm_error']:.4g}",
                    "aRVM vs RVM (inner-CV width)"))
        out.append((f"arvm {name} relevance vectors", f"{r['arvm_n_relevant']:.1f} vs {r['rvm_n_relevant']:.1f}", ""))
        out.append((f"arvm {name} seconds per fold", f"{r['arvm_seconds']:.1f} vs {r['rvm_seconds']:.1f}",
                    "selection + final fit"))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--datasets", default=",".join(REGRESSION + CLASSIFICATION))
    parser.add_argument("--folds", type=int, default=10, help="outer folds (the sources: 10)")
    parser.add_argument("--inner-folds", type=int, default=9, help="inner folds (the sources: 9)")
    parser.add_argument("--max-n", type=int, default=300, help="subsample every data set to at most this many points")
    parser.add_argument("--json", default=None, help="also write the result to this file")
    args = parser.parse_args(argv)
    names = [d for d in args.datasets.split(",") if d]
    kwargs = dict(folds=3, inner_folds=3, widths=np.arange(0.5, 10.01, 1.0), max_n=150) if args.quick else \
        dict(folds=args.folds, inner_folds=args.inner_folds, max_n=args.max_n)
    result = run(names, progress=True, **kwargs)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    for q, v, n in rows(result):
        print(f"{q:<45} {v:>22}  {n}")


if __name__ == "__main__":
    main()
