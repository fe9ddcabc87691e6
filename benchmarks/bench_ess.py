"""ESS per second of the conjugate Gibbs sampler against NUTS (PyMC) and NumPyro on one RVM posterior.

Problem: ``bz.datasets.load("sinc", n=100)``, an RVM with a Gaussian kernel of width 3 and a bias (101 weights),
under two priors: ``comparison`` = ``RVM(a=1, b=1e-2, c=1, d=1e-3)``, the prior docs/families/rvm.md uses for sampler
comparisons (NUTS converges there, so the ratio is a real speed ratio), and ``sparse`` = the near-improper
defaults a = b = c = d = 1e-4 (NUTS does not converge there; the ratio then only says Gibbs works). Every backend with the same ``chains`` / ``tune`` / ``draws`` / ``seed`` through :func:`bayeszoo.fit`.

ESS is ArviZ's rank-normalised bulk ESS (via :func:`bayeszoo.diagnostics.metrics.sampling_diagnostics`), taken
as the minimum over the components of ``w`` and, separately, over ``log_alpha`` and ``log_beta``; ESS/s
divides by the fit's total wall time (``fit.timing["total"]``: compile + tune + sample). Target: gibbs at
least 10x the ESS/s of nuts.
"""
from __future__ import annotations

import math
import time
import traceback

TARGET = 10.0

BACKENDS = ("gibbs", "nuts", "numpyro")


def run(draws: int = 1000, tune: int = 1000, chains: int = 4, seed: int = 0, n: int = 100,
        backends=BACKENDS, gradient_draws: int | None = 500, prior: str = "comparison") -> dict:
    """``gradient_draws`` (tune = draws = that) for nuts / numpyro keeps the run short: ESS/s is a rate."""
    import bayeszoo as bz
    from bayeszoo.diagnostics.metrics import sampling_diagnostics

    data = bz.datasets.load("sinc", n=n)
    priors = {"comparison": dict(a=1.0, b=1e-2, c=1.0, d=1e-3), "sparse": {}}
    if prior not in priors:
        raise ValueError(f"prior must be one of {sorted(priors)}, got {prior!r}")
    model = bz.models.RVM(width=3.0, **priors[prior])
    available = bz.backends(model)
    per_backend = {}
    for name in backends:
        if name not in available:
            per_backend[name] = {"error": f"backend {name!r} not registered (available: {available})"}
            continue
        t0 = time.perf_counter()
        try:
            nd, nt = (draws, tune) if name == "gibbs" or not gradient_draws else (gradient_draws, gradient_draws)
            fit = bz.fit(model, data, backend=name, draws=nd, tune=nt, chains=chains, seed=seed,
                         progress=False)
        except Exception as exc:
            per_backend[name] = {"error": f"{type(exc).__name__}: {exc}",
                                 "traceback": traceback.format_exc(limit=3)}
            continue
        wall = time.perf_counter() - t0
        d_w = sampling_diagnostics(fit, ["w"])
        d_h = sampling_diagnostics(fit, ["log_alpha", "log_beta"])
        per_backend[name] = {
            "seconds": fit.seconds, "wall_s": wall, "timing": {k: float(v) for k, v in fit.timing.items()},
            "ess_bulk_min_w": d_w["ess_bulk_min"], "ess_per_s_w": d_w["ess_bulk_per_s"],
            "ess_bulk_min_hyper": d_h["ess_bulk_min"], "ess_per_s_hyper": d_h["ess_bulk_per_s"],
            "ess_tail_min_w": d_w["ess_tail_min"],
            "rhat_max_w": d_w["rhat_max"], "rhat_max_hyper": d_h["rhat_max"],
            "divergences": d_w["divergences"], "draws": nd, "tune": nt, "chains": chains,
            "converged": bool(max(d_w["rhat_max"], d_h["rhat_max"]) < 1.1),
        }
    ratios = {}
    g = per_backend.get("gibbs", {})
    for ref in ("nuts", "numpyro"):
        r = per_backend.get(ref, {})
        if "error" in g or "error" in r or not g or not r:
            continue
        for part in ("w", "hyper"):
            a, b = g[f"ess_per_s_{part}"], r[f"ess_per_s_{part}"]
            ratios[f"gibbs/{ref} {part}"] = a / b if b and math.isfinite(a) and math.isfinite(b) else math.nan
    met = None
    if "gibbs/nuts w" in ratios:
        met = bool(min(ratios["gibbs/nuts w"], ratios["gibbs/nuts hyper"]) >= TARGET)
    return {"name": "ess" if prior == "comparison" else f"ess_{prior}", "problem": f"sinc n={n}, RVM(width=3.0, prior {prior!r}: {model.spec()}); chains={chains}, seed={seed}; gibbs tune=draws="
                                      f"{draws}, nuts/numpyro tune=draws={gradient_draws or draws}", "backends": per_backend, "ratios": ratios,
            "target": f"gibbs ESS/s >= {TARGET:g}x nuts (min bulk ESS over w, and over log_alpha/log_beta)",
            "target_met": met}


def rows(result: dict) -> list[tuple[str, str, str]]:
    out = []
    tag = result["name"]
    for name, b in result["backends"].items():
        if "error" in b:
            out.append((f"{tag}/{name}", "ERROR", b["error"][:100]))
            continue
        conv = "" if b["converged"] else " NOT CONVERGED (R-hat > 1.1)"
        out.append((f"{tag}/{name} w", f"{b['ess_per_s_w']:.2f} ESS/s",
                    f"min bulk ESS {b['ess_bulk_min_w']:.0f} in {b['seconds']:.1f} s ({b['chains']}x{b['tune']}+"
                    f"{b['draws']}); R-hat max {b['rhat_max_w']:.3f}{conv}"))
        out.append((f"{tag}/{name} log_alpha,log_beta", f"{b['ess_per_s_hyper']:.2f} ESS/s",
                    f"min bulk ESS {b['ess_bulk_min_hyper']:.0f}; R-hat max {b['rhat_max_hyper']:.3f}; "
                    f"divergences {b['divergences']}"))
    for key, value in result["ratios"].items():
        ref = result["backends"][key.split("/")[1].split()[0]]
        note = f"target >= {TARGET:g}x" if "nuts" in key else ""
        if not ref.get("converged", True):
            note += " (reference did not converge: its ESS is not reliable)"
        out.append((f"{tag} ratio {key}", f"{value:.0f}x", note.strip()))
    return out


#: what benchmarks/run.py runs from this module: name -> what it measures, run(quick) and its table rows
BENCHMARKS = {
    "ess": {"about": "ESS/s of the RVM Gibbs sampler vs PyMC NUTS and NumPyro on sinc (target: >= 10x NUTS), under "
                     "the sampler-comparison prior RVM(a=1, b=1e-2, c=1, d=1e-3) where NUTS converges",
            "run": lambda quick: run(prior="comparison",
                                     **(dict(draws=500, tune=500, gradient_draws=200) if quick else {})),
            "rows": rows},
    "ess_sparse": {"about": "the same under the near-improper default prior (1e-4), where NUTS does not converge",
                   "run": lambda quick: run(prior="sparse",
                                            **(dict(draws=500, tune=500, gradient_draws=200) if quick else {})),
                   "rows": rows},
}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1, default=str))
