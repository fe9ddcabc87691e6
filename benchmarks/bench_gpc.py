"""GP classification benchmarks (Nickisch thesis ch. 4).

``gpc_peers``  bayeszoo ``ep`` against GPy's EP (probit) and bayeszoo ``laplace`` against scikit-learn's
               ``GaussianProcessClassifier`` (logit, ``optimizer=None``), same data (sonar), same fixed
               hyperparameters: wall time of fit + test predictions through each library's public API (ours:
               ``bz.fit`` + ``model.predict``; best of ``repeats``) and of our algorithm alone (approximation +
               predictive probabilities, the work the peers' fit + predict do), log evidence and predictive
               probabilities side by side. Target: each algorithm at least 2x faster than its peer at matching
               numbers.
``gpc_times``  the thesis's relative running times (Table 4.7 caption: each algorithm on 9 hyperparameter regimes
               and both likelihoods on every dataset, per-dataset averages scaled to LA = 1, then averaged) for
               LA, EP, KL, VB, FV, LR on the six datasets; NUTS and Gibbs (4 chains x 1000 + 1000) at the middle
               regime only, scaled by LA's time there. Target: EP within 10x of LA.
``gpc_ess``    ESS per second of ``gibbs`` against PyMC ``nuts`` on the latent f for sonar (probit, SE,
               ln ell = 2, ln sf = 1), default settings (4 chains x 1000 + 1000; gibbs thins by 5).
``gpc_large``  the ``gpc_peers`` pairs on synthetic data of n = 3000 and 5000 training points (:func:`synthetic`;
               SE, ln ell = 0.5, ln sf = 1 fixed), with sonar's pairs in the same run: wall time of the algorithm
               (approximation + test predictions) against the peer's fit + predictions, repeats interleaved,
               log evidence side by side. GPy's EP streams all of Sigma three times per site, so above
               ``GPY_FULL_N`` points it is stopped after ``gpy_passes`` passes (its own convergence test needs two
               at least): its time is then a lower bound on its fit. A third pair, ``laplace`` (probit) against
               GPy's Laplace (probit), completes the peers' Laplace side. Target: ours at least as fast.

Run one alone with ``python benchmarks/bench_gpc.py large`` (or ``peers``, ``times``, ``ess``).
"""
from __future__ import annotations

import math
import time
import traceback
import warnings

import numpy as np
from _timing import best_of

PEER_HYP = {"log_lengthscale": 2.0, "log_amplitude": 1.0}
DATASETS = ("breast_wisconsin", "crabs", "ionosphere", "pima", "sonar", "usps35_standin")
METHODS = ("laplace", "ep", "kl", "vb", "fv", "lr")
REGIMES = [(ell, sf) for ell in (1.0, 2.5, 4.0) for sf in (0.0, 1.5, 3.0)]   # 3 x 3, as Fig. 4.3's grid
MIDDLE = (2.5, 1.5)
PEERS_TARGET = 2.0
TIMES_TARGET = 10.0




# ------------------------------------------------------------------------------------------------ peers
def _ours(model, data, backend, repeats):
    """Public API (``bz.fit`` + ``model.predict``: InferenceData, draws and checks included) and the algorithm
    alone (the approximation + predictive probabilities, what the peers' ``fit`` + ``predict`` compute)."""
    import bayeszoo as bz
    from bayeszoo.inference.gpc import common as C
    from bayeszoo.inference.gpc.ep import fit_ep
    from bayeszoo.inference.gpc.laplace import fit_laplace
    from bayeszoo.models.gpc import predictive_probability

    def api():
        fit = bz.fit(model, data, backend=backend, draws=1, chains=1, seed=0, progress=False)
        return fit, model.predict(fit, data.X_test)

    def core():
        res, _, _ = (fit_ep if backend == "ep" else fit_laplace)(model, data)
        mu, var = C.predict_latent(model, data.X, data.X_test, res.alpha, res.sW, res.L)
        return predictive_probability(mu, var, model.likelihood)

    secs, (fit, p) = best_of(api, repeats)
    core_secs, p_core = best_of(core, repeats)
    assert np.allclose(p_core, p, atol=1e-10)
    return {"seconds": secs, "core_seconds": core_secs, "log_evidence": float(fit.info["log_evidence"]), "p": p}


def _gpy_ep(data, repeats):
    import GPy

    ell, sf = math.exp(PEER_HYP["log_lengthscale"]), math.exp(PEER_HYP["log_amplitude"])

    def go():
        kern = GPy.kern.RBF(data.X.shape[1], variance=sf ** 2, lengthscale=ell)
        m = GPy.core.GP(data.X, data.y[:, None].astype(float), kernel=kern, likelihood=GPy.likelihoods.Bernoulli(),
                        inference_method=GPy.inference.latent_function_inference.EP())
        return float(m.log_likelihood()), m.predict(data.X_test)[0].ravel()

    secs, (lz, p) = best_of(go, repeats)
    return {"seconds": secs, "log_evidence": lz, "p": p}


def _sklearn_laplace(data, repeats):
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel

    ell, sf = math.exp(PEER_HYP["log_lengthscale"]), math.exp(PEER_HYP["log_amplitude"])

    def go():
        kern = ConstantKernel(sf ** 2, "fixed") * RBF(ell, "fixed")
        clf = GaussianProcessClassifier(kernel=kern, optimizer=None).fit(data.X, data.y)
        return float(clf.log_marginal_likelihood_value_), clf.predict_proba(data.X_test)[:, 1]

    secs, (lz, p) = best_of(go, repeats)
    return {"seconds": secs, "log_evidence": lz, "p": p}


def run_peers(repeats: int = 5) -> dict:
    import bayeszoo as bz

    data = bz.datasets.load("sonar")
    pairs = {}
    for ours_name, lik, peer_name, peer in (("ep", "probit", "GPy EP", _gpy_ep),
                                            ("laplace", "logit", "sklearn GPC (Laplace)", _sklearn_laplace)):
        model = bz.models.GPC(likelihood=lik, kernel="se", **PEER_HYP)
        try:
            _ours(model, data, ours_name, 1)                 # warm-up (imports, first-call overheads)
            ours = _ours(model, data, ours_name, repeats)
            theirs = peer(data, repeats)
        except Exception as exc:
            pairs[ours_name] = {"peer": peer_name, "error": f"{type(exc).__name__}: {exc}",
                                "traceback": traceback.format_exc()}
            continue
        pairs[ours_name] = {
            "peer": peer_name, "likelihood": lik, "ours_s": ours["seconds"], "peer_s": theirs["seconds"],
            "speedup": theirs["seconds"] / ours["seconds"], "ours_core_s": ours["core_seconds"],
            "speedup_core": theirs["seconds"] / ours["core_seconds"],
            "log_evidence_ours": ours["log_evidence"], "log_evidence_peer": theirs["log_evidence"],
            "max_abs_dp": float(np.max(np.abs(ours["p"] - theirs["p"]))),
        }
    ok = [v for v in pairs.values() if "error" not in v]
    met = bool(ok) and len(ok) == len(pairs) and all(
        v["speedup_core"] >= PEERS_TARGET and abs(v["log_evidence_ours"] - v["log_evidence_peer"]) < 1e-2
        and v["max_abs_dp"] < 1e-2 for v in ok)
    return {"name": "gpc_peers", "data": "sonar (108 train / 100 test)", "hyp": PEER_HYP, "repeats": repeats,
            "pairs": pairs, "target": f">= {PEERS_TARGET:g}x faster than the peer, |d log Z| < 0.01, |dp| < 0.01",
            "target_met": met}


def rows_peers(result: dict) -> list[tuple[str, str, str]]:
    out = []
    for name, v in result["pairs"].items():
        if "error" in v:
            out.append((f"gpc_peers/{name} vs {v['peer']}", "ERROR", v["error"][:100]))
            continue
        out.append((f"gpc_peers/{name} vs {v['peer']}", f"{v['speedup_core']:.1f}x faster",
                    f"algorithm {v['ours_core_s'] * 1e3:.1f} ms, through bz.fit {v['ours_s'] * 1e3:.0f} ms "
                    f"({v['speedup']:.1f}x), peer {v['peer_s'] * 1e3:.1f} ms ({v['likelihood']}); log Z "
                    f"{v['log_evidence_ours']:.4f} vs {v['log_evidence_peer']:.4f}; max |dp| {v['max_abs_dp']:.1e}"))
    return out


# ------------------------------------------------------------------------------------------------ times
def _fit_seconds(model, data, backend, **kw):
    import bayeszoo as bz

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        bz.fit(model, data, backend=backend, seed=0, progress=False, **kw)
        return time.perf_counter() - t0


def run_times(datasets=DATASETS, regimes=REGIMES, mcmc: bool = True, mcmc_draws: int = 1000) -> dict:
    import bayeszoo as bz

    per_dataset, errors = {}, []
    for name in datasets:
        data = bz.datasets.load(name)
        secs = {m: [] for m in METHODS}
        mcmc_rel = {}
        for lik in ("probit", "logit"):
            for ell, sf in regimes:
                model = bz.models.GPC(likelihood=lik, kernel="se", log_lengthscale=ell, log_amplitude=sf)
                for m in METHODS:
                    try:
                        secs[m].append(_fit_seconds(model, data, m, draws=1, chains=1))
                    except Exception as exc:
                        errors.append(f"{name}/{lik}/{m} at ({ell}, {sf}): {type(exc).__name__}: {exc}")
            if mcmc:
                model = bz.models.GPC(likelihood=lik, kernel="se", log_lengthscale=MIDDLE[0], log_amplitude=MIDDLE[1])
                la = _fit_seconds(model, data, "laplace", draws=1, chains=1)
                for m in ("nuts", "gibbs"):
                    try:
                        mcmc_rel.setdefault(m, []).append(
                            _fit_seconds(model, data, m, draws=mcmc_draws, tune=mcmc_draws, chains=4) / la)
                    except Exception as exc:
                        errors.append(f"{name}/{lik}/{m}: {type(exc).__name__}: {exc}")
        la_mean = float(np.mean(secs["laplace"]))
        rel = {m: float(np.mean(v)) / la_mean for m, v in secs.items() if v}
        rel.update({m: float(np.mean(v)) for m, v in mcmc_rel.items()})
        per_dataset[name] = {"n_train": int(data.n), "laplace_mean_s": la_mean, "relative": rel}
    methods = list(METHODS) + (["nuts", "gibbs"] if mcmc else [])
    overall = {m: float(np.mean([d["relative"][m] for d in per_dataset.values() if m in d["relative"]]))
               for m in methods if any(m in d["relative"] for d in per_dataset.values())}
    return {"name": "gpc_times", "datasets": list(datasets), "regimes": regimes, "per_dataset": per_dataset,
            "relative": overall, "errors": errors, "target": f"EP within {TIMES_TARGET:g}x of LA",
            "target_met": bool("ep" in overall and overall["ep"] <= TIMES_TARGET)}


def rows_times(result: dict) -> list[tuple[str, str, str]]:
    out = [("gpc_times/" + m, f"{v:.1f}", "relative running time, LA = 1 (mean over the datasets)")
           for m, v in result["relative"].items()]
    for name, d in result["per_dataset"].items():
        out.append((f"gpc_times/{name}", f"LA {d['laplace_mean_s'] * 1e3:.0f} ms",
                    ", ".join(f"{m} {v:.1f}" for m, v in d["relative"].items())))
    for err in result["errors"][:5]:
        out.append(("gpc_times error", "ERROR", err[:100]))
    return out


# ------------------------------------------------------------------------------------------------ ess
def run_ess(draws: int = 1000, tune: int = 1000, chains: int = 4) -> dict:
    import arviz as az

    import bayeszoo as bz

    data = bz.datasets.load("sonar")
    model = bz.models.GPC(likelihood="probit", kernel="se", **PEER_HYP)
    out = {}
    for name in ("gibbs", "nuts"):
        bz.fit(model, data, backend=name, draws=20, tune=20, chains=chains, seed=1, progress=False)  # compile
        t0 = time.perf_counter()
        fit = bz.fit(model, data, backend=name, draws=draws, tune=tune, chains=chains, seed=0, progress=False)
        secs = time.perf_counter() - t0
        ess = az.ess(fit.idata, var_names=["f"])["f"].values
        out[name] = {"seconds": secs, "ess_bulk_min": float(ess.min()), "ess_per_s": float(ess.min() / secs),
                     "rhat_max": float(az.rhat(fit.idata, var_names=["f"])["f"].values.max())}
    ratio = out["gibbs"]["ess_per_s"] / out["nuts"]["ess_per_s"]
    return {"name": "gpc_ess", "backends": out, "ratio": ratio, "target": "reported (no target in the thesis)",
            "target_met": None}


def rows_ess(result: dict) -> list[tuple[str, str, str]]:
    out = [(f"gpc_ess/{n}", f"{b['ess_per_s']:.1f} ESS/s",
            f"min bulk ESS over f {b['ess_bulk_min']:.0f} in {b['seconds']:.1f} s; R-hat max {b['rhat_max']:.3f}")
           for n, b in result["backends"].items()]
    out.append(("gpc_ess ratio gibbs/nuts", f"{result['ratio']:.1f}x", "sonar, probit, latent f"))
    return out


# ------------------------------------------------------------------------------------------------ large
LARGE_HYP = {"log_lengthscale": 0.5, "log_amplitude": 1.0}
LARGE_SIZES = (3000, 5000)
GPY_FULL_N = 1000      # GPy's EP runs to its own convergence up to this many points
LARGE_TARGET = 1.0


def synthetic(n: int, seed: int = 0, n_test: int = 500):
    """Binary labels from a smooth non-linear function of 4 standard-normal inputs, with noise:
    y = 1[sin(2 x1) + x2 x3 - x4 / 2 + 0.3 e > 0], e ~ N(0, 1) (about half the labels are 1; the classes
    overlap, so no site is degenerate)."""
    import bayeszoo as bz

    rng = np.random.default_rng(seed)

    def draw(m):
        X = rng.standard_normal((m, 4))
        f = np.sin(2.0 * X[:, 0]) + X[:, 1] * X[:, 2] - 0.5 * X[:, 3]
        return X, (f + 0.3 * rng.standard_normal(m) > 0).astype(float)

    X, y = draw(n)
    X_test, y_test = draw(n_test)
    return bz.datasets.Dataset(X=X, y=y, X_test=X_test, y_test=y_test, name=f"synthetic-{n}",
                               meta={"task": "classification"})


def _ours_core(model, data, backend):
    """The algorithm alone: the approximation at the model's hyperparameters + predictive probabilities."""
    from bayeszoo.inference.gpc import common as C
    from bayeszoo.inference.gpc.ep import fit_ep
    from bayeszoo.inference.gpc.laplace import fit_laplace
    from bayeszoo.models.gpc import predictive_probability

    t0 = time.perf_counter()
    res, _, _ = (fit_ep if backend == "ep" else fit_laplace)(model, data)
    mu, var = C.predict_latent(model, data.X, data.X_test, res.alpha, res.sW, res.L)
    p = predictive_probability(mu, var, model.likelihood)
    return time.perf_counter() - t0, {"log_evidence": float(res.log_evidence), "p": p,
                                      "iterations": int(res.iterations), "converged": bool(res.converged)}


def _gpy_ep_once(data, hyp, max_iters=None):
    import GPy

    np.random.seed(0)        # GPy visits the sites in a random order drawn from NumPy's global generator
    ep = (GPy.inference.latent_function_inference.EP() if max_iters is None
          else GPy.inference.latent_function_inference.EP(max_iters=max_iters))
    t0 = time.perf_counter()
    kern = GPy.kern.RBF(data.X.shape[1], variance=math.exp(2.0 * hyp["log_amplitude"]),
                        lengthscale=math.exp(hyp["log_lengthscale"]))
    m = GPy.core.GP(data.X, data.y[:, None].astype(float), kernel=kern, likelihood=GPy.likelihoods.Bernoulli(),
                    inference_method=ep)
    lz = float(m.log_likelihood())
    p = m.predict(data.X_test)[0].ravel()
    return time.perf_counter() - t0, {"log_evidence": lz, "p": p}


def _gpy_laplace_once(data, hyp):
    import GPy

    t0 = time.perf_counter()
    kern = GPy.kern.RBF(data.X.shape[1], variance=math.exp(2.0 * hyp["log_amplitude"]),
                        lengthscale=math.exp(hyp["log_lengthscale"]))
    m = GPy.core.GP(data.X, data.y[:, None].astype(float), kernel=kern, likelihood=GPy.likelihoods.Bernoulli(),
                    inference_method=GPy.inference.latent_function_inference.Laplace())
    lz = float(m.log_likelihood())
    p = m.predict(data.X_test)[0].ravel()
    return time.perf_counter() - t0, {"log_evidence": lz, "p": p}


def _sklearn_once(data, hyp):
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel

    t0 = time.perf_counter()
    kern = ConstantKernel(math.exp(2.0 * hyp["log_amplitude"]), "fixed") * RBF(math.exp(hyp["log_lengthscale"]),
                                                                               "fixed")
    clf = GaussianProcessClassifier(kernel=kern, optimizer=None).fit(data.X, data.y)
    p = clf.predict_proba(data.X_test)[:, 1]
    return time.perf_counter() - t0, {"log_evidence": float(clf.log_marginal_likelihood_value_), "p": p}


def _pair(model, data, backend, peer_once, repeats, peer_repeats):
    """Ours and the peer interleaved (ours, peer, ours, peer, ...): best times, the spread of the per-repeat
    ratios ours / peer, and the numbers of the last run of each."""
    ours_s, peer_s = [], []
    ours = theirs = None
    for r in range(max(repeats, peer_repeats)):
        if r < repeats:
            secs, ours = _ours_core(model, data, backend)
            ours_s.append(secs)
        if r < peer_repeats:
            secs, theirs = peer_once()
            peer_s.append(secs)
    ratios = [o / p for o, p in zip(ours_s, peer_s)] or [min(ours_s) / min(peer_s)]
    return {"ours_s": ours_s, "peer_s": peer_s, "ratio_best": min(ours_s) / min(peer_s),
            "ratio_min": min(ratios), "ratio_max": max(ratios),
            "log_evidence_ours": ours["log_evidence"], "log_evidence_peer": theirs["log_evidence"],
            "d_log_evidence": ours["log_evidence"] - theirs["log_evidence"],
            "max_abs_dp": float(np.max(np.abs(ours["p"] - theirs["p"]))), "ours_iterations": ours["iterations"],
            "ours_converged": ours["converged"]}


LARGE_PAIRS = (("ep", "probit", "GPy EP"), ("laplace", "logit", "sklearn GPC (Laplace)"),
               ("laplace", "probit", "GPy Laplace"))


def run_large(sizes=LARGE_SIZES, repeats: int = 3, gpy_passes: int = 1, threads: int | None = 1,
              include_sonar: bool = True, echo: bool = False, pairs=LARGE_PAIRS) -> dict:
    """``gpc_large`` (module docstring). ``threads``: BLAS threads for every library (None: their default);
    ``echo``: print each pair's row when it is done (a full run takes tens of minutes); ``pairs``: a subset of
    :data:`LARGE_PAIRS`."""
    import contextlib

    from threadpoolctl import threadpool_limits

    import bayeszoo as bz

    limit = contextlib.nullcontext() if threads is None else threadpool_limits(threads, "blas")
    problems = ([("sonar", bz.datasets.load("sonar"), PEER_HYP)] if include_sonar else []) + \
        [(f"synthetic n = {n}", synthetic(n), LARGE_HYP) for n in sizes]
    rows = []
    with limit, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, data, hyp in problems:
            for backend, lik, peer in pairs:
                model = bz.models.GPC(likelihood=lik, kernel="se", **hyp)
                if data.n < 500:
                    _ours_core(model, data, backend)          # warm-up: imports and first-call overheads
                full = backend == "laplace" or data.n <= GPY_FULL_N
                if peer == "GPy EP":
                    peer += "" if full else f" ({gpy_passes} pass{'es' if gpy_passes > 1 else ''})"
                    once = (lambda d=data, h=hyp, full=full:
                            _gpy_ep_once(d, h, None if full else gpy_passes))
                elif peer == "GPy Laplace":
                    once = (lambda d=data, h=hyp: _gpy_laplace_once(d, h))
                else:
                    once = (lambda d=data, h=hyp: _sklearn_once(d, h))
                peer_repeats = repeats if full else 1
                try:
                    out = _pair(model, data, backend, once, repeats, peer_repeats)
                except Exception as exc:
                    rows.append({"problem": name, "backend": backend, "peer": peer,
                                 "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
                    continue
                rows.append({"problem": name, "n": int(data.n), "backend": backend, "likelihood": lik,
                             "peer": peer, "peer_complete": full, **out})
                if echo:
                    print(" | ".join(rows_large({"rows": rows[-1:]})[0]), flush=True)
    ok = [r for r in rows if "error" not in r]
    met = bool(ok) and len(ok) == len(rows) and all(r["ratio_best"] <= LARGE_TARGET for r in ok)
    return {"name": "gpc_large", "sizes": list(sizes), "hyp": LARGE_HYP, "repeats": repeats,
            "gpy_passes": gpy_passes, "blas_threads": threads, "rows": rows,
            "target": "ours / peer <= 1 (best of the repeats)", "target_met": met}


def rows_large(result: dict) -> list[tuple[str, str, str]]:
    out = []
    for r in result["rows"]:
        key = f"gpc_large/{r['problem']}/{r['backend']} vs {r['peer']}"
        if "error" in r:
            out.append((key, "ERROR", r["error"][:100]))
            continue
        bound = "" if r["peer_complete"] else " (peer time a lower bound)"
        out.append((key, f"ours/peer {r['ratio_best']:.3f}",
                    f"spread {r['ratio_min']:.3f}-{r['ratio_max']:.3f}{bound}; ours {min(r['ours_s']):.2f} s "
                    f"({r['ours_iterations']} it.), peer {min(r['peer_s']):.2f} s; log Z {r['log_evidence_ours']:.6f}"
                    f" vs {r['log_evidence_peer']:.6f} (diff {r['d_log_evidence']:.1e}); max |dp| "
                    f"{r['max_abs_dp']:.1e}"))
    return out


#: what benchmarks/run.py runs from this module: name -> what it measures, run(quick) and its table rows
BENCHMARKS = {
    "gpc_peers": {"about": "GPC `ep` vs GPy's EP and `laplace` vs scikit-learn's GaussianProcessClassifier on sonar",
                  "run": lambda quick: run_peers(repeats=2 if quick else 5), "rows": rows_peers},
    "gpc_times": {"about": "GPC relative running times (LA = 1) of LA, EP, KL, VB, FV, LR, NUTS, Gibbs on six "
                           "datasets",
                  "run": lambda quick: (run_times(datasets=("crabs", "sonar"), regimes=REGIMES[::4], mcmc_draws=300)
                                        if quick else run_times()),
                  "rows": rows_times},
    "gpc_ess": {"about": "ESS/s of the GPC Gibbs sampler vs PyMC NUTS on the latent f for sonar",
                "run": lambda quick: run_ess(draws=500, tune=500) if quick else run_ess(), "rows": rows_ess},
    "gpc_large": {"about": "GPC `ep` vs GPy's EP and `laplace` vs scikit-learn's GPC at n = 3000 and 5000 "
                           "(synthetic), with sonar",
                  "run": lambda quick: run_large(sizes=(1500,), repeats=1) if quick else run_large(),
                  "rows": rows_large},
}


if __name__ == "__main__":
    import json
    import sys

    which = sys.argv[1] if len(sys.argv) > 1 else "large"
    run, rows = {"large": (run_large, rows_large), "peers": (run_peers, rows_peers),
                 "times": (run_times, rows_times), "ess": (run_ess, rows_ess)}[which]
    t0 = time.perf_counter()
    result = run_large(echo=True) if which == "large" else run()
    for row in rows(result):
        print(" | ".join(row))
    print(f"({which}: {time.perf_counter() - t0:.0f} s)")
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as fh:
            json.dump(result, fh, indent=1, default=float)
