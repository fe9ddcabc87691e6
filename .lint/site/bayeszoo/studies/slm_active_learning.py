"""Nickisch thesis §3.7, Fig. 3.7: Bayesian active learning for logistic regression, scores against random.

Protocol (digest §5.11), scaled to an offline data set and two cores. The thesis uses LIBSVM's a9a, real-sim and
rcv1, which do not ship offline; the stand-in is UCI Spambase (``bz.datasets.load("spambase")``: 4597 e-mails, 57
word / character / capital-run frequencies, ln(1 + x) and z-scored, plus a constant feature for the bias; a
seeded 70 / 30 split), a text-derived problem like real-sim and rcv1, with a9a's order of dimension (n = 58
against 123). Everything else follows the thesis:

* logistic regression with the Gaussian prior N(0, sigma2 I), sigma2 = 1, slope tau = 1 (the thesis's tau_sig for
  a9a), its variational approximation by the double loop (exact variances: n is small);
* the design starts from ``n_initial`` random training cases; every remaining training case is a candidate;
  blocks of K inclusions between refits (a9a: K = 3; here K = 10 by default to keep the runs short);
* scores: information gain (``infogain``), classifier uncertainty (``uncertainty``) and ``random``; the test error
  after every refit, and the error of the approximation fitted on the whole training set (``full``).

Not reproduced: the sparse (Laplace prior) variant, which needs two kinds of potentials in one model (the SLM here
has one), and the Lanczos-scale sets. Public API only.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

import bayeszoo as bz
from bayeszoo import active_learning as al

SCORES = ("infogain", "uncertainty", "random")


def features(X) -> np.ndarray:
    """The design matrix with a constant column for the bias."""
    X = np.asarray(X, dtype=float)
    return np.hstack([X, np.ones((X.shape[0], 1))])


def model(sigma2: float = 1.0, tau: float = 1.0):
    return bz.models.SLM(potential="sigmoid", tau=tau, sigma2=sigma2, B="meta")


def run(*, runs: int = 3, n_initial: int = 50, n_blocks: int = 30, block: int = 10, scores=SCORES,
        sigma2: float = 1.0, tau: float = 1.0, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Test error against the number of labelled cases: one row per run, score and size (columns ``run, score,
    cases, test_error``), with the ``full`` training set as score ``full``."""
    data = bz.datasets.load("spambase", seed=seed)
    F, Ft = features(data.X), features(data.X_test)
    slm = model(sigma2, tau)
    options = {"exact_variances": True}
    rows = []
    for r in range(runs):
        initial = np.random.default_rng([seed, r]).choice(data.n, n_initial, replace=False)
        for score in scores:
            res = al.active_learning(slm, F, data.y, initial=initial, n_blocks=n_blocks, block=block, score=score,
                                     test_features=Ft, test_labels=data.y_test, options=options, seed=seed + r,
                                     progress=progress)
            rows += [{"run": r, "score": score, "cases": k, "test_error": e}
                     for k, e in zip(res.sizes, res.test_error)]
    full = al.logistic_data(F, data.y, name="spambase")
    fit = bz.fit(slm, full, "dloop", draws=2, chains=1, seed=seed, progress=False, **options)
    rows.append({"run": 0, "score": "full", "cases": data.n,
                 "test_error": al.error_rate(slm, full, fit, Ft, data.y_test)})
    return pd.DataFrame(rows)


def summary(results: pd.DataFrame, every: int = 50) -> pd.DataFrame:
    """Mean test error (%) over runs per score, at every ``every`` cases, wide by the number of cases."""
    kept = results[(results["cases"] % every == 0) | (results["score"] == "full")]
    return 100.0 * kept.pivot_table(index="score", columns="cases", values="test_error", aggfunc="mean")
