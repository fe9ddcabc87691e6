"""Cold start: what compilation costs in a backend's first fit, and what the next fits in the same process cost.

For each backend, one fresh Python process with an empty JAX compilation cache (``BAYESZOO_JAX_CACHE`` pointed at a
new folder; PyTensor's compile cache is the user's, warm after the first use of an Op on a machine) makes three
fits of the RVM on Tipping's sinc (n = 50, width 3, the sampler-comparison prior ``RVM(a=1, b=1e-2, c=1,
d=1e-3)``; 2 chains of 300 warm-up and 300 draws, the backends' own defaults for the approximations):

1. ``first``: the first fit in the process, data A (seed 0);
2. ``again``: the same model and data A once more;
3. ``other data``: data B of the same shape (seed 1), as a CV fold or an SBC simulation is.

Each row gives the wall time of ``bz.fit`` and ``fit.timing["compile"]`` (the backend's own account: JAX's traced /
lowered / compiled seconds for NumPyro and BlackJAX, building the step for PyMC, ``nutpie.compile_pymc_model``),
and the compile share of the first fit. The hand-written backends (``gibbs``, ``em``, ``fast``) compile nothing (the
numba kernels of SLM ``cd`` are cached on disk) and are listed for contrast.

Since the declarations name their data (``functools.partial``, ``inference.engines_common.numpyro_declaration``), the
NumPyro and BlackJAX programs take the data as arguments, so ``other data`` finds the first fit's programs in
JAX's compilation cache. ``closure`` repeats the NumPyro row with the data bound as constants of the program (as
before): the difference is what "one compilation per shape" saves. ``short warm-up`` repeats it with 100 warm-up
steps against 300 draws (as the demo's arvm, BID and SLM problems have): NumPyro's step is compiled once for both
phases (``inference.numpyro_engines._numpyro_mcmc``), so its first fit should compile about as long as the
equal-length one (the ratio of the two is printed); it compiled the step twice before.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

BACKENDS = ("numpyro", "blackjax_nuts", "blackjax_mclmc", "blackjax_pathfinder", "blackjax_meanfield_vi", "nuts",
            "nutpie", "advi", "fullrank_advi", "gibbs", "em", "fast")
QUICK_BACKENDS = ("numpyro", "nuts", "gibbs")
COUNTS = {"draws": 300, "tune": 300, "chains": 2}
SHORT_WARMUP = {**COUNTS, "tune": 100}

_CHILD = r"""
import json, sys, time
mode, backend, counts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
import bayeszoo as bz
if mode == "closure":   # the data bound as constants of the program
    from bayeszoo.inference import numpyro_engines
    numpyro_engines.numpyro_declaration = lambda model, data: (model.numpyro_model(data), {})
model = bz.models.RVM(width=3.0, a=1, b=1e-2, c=1, d=1e-3)
from bayeszoo import registry
kind = registry.get(model, backend).kind
kwargs = dict(counts) if kind == "mcmc" else {"chains": counts["chains"]}
rows = []
for label, seed in (("first", 0), ("again", 0), ("other data", 1)):
    data = bz.datasets.load("sinc", n=50, seed=seed)
    t0 = time.perf_counter()
    fit = bz.fit(model, data, backend, seed=0, progress=False, **kwargs)
    rows.append({"fit": label, "wall": time.perf_counter() - t0, "compile": float(fit.timing.get("compile", 0.0))})
print("RESULT " + json.dumps(rows))
"""


def _measure(backend: str, mode: str = "traced") -> dict:
    with tempfile.TemporaryDirectory(prefix="bayeszoo-jax-cache-") as cache:
        env = dict(os.environ, BAYESZOO_JAX_CACHE=cache)
        t0 = time.perf_counter()
        counts = SHORT_WARMUP if mode == "short warm-up" else COUNTS
        proc = subprocess.run([sys.executable, "-c", _CHILD, mode, backend, json.dumps(counts)], env=env,
                              capture_output=True, text=True, timeout=1800)
        process_seconds = time.perf_counter() - t0
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return {"backend": backend, "mode": mode, "error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return {"backend": backend, "mode": mode, "fits": json.loads(line[len("RESULT "):]),
            "process_seconds": process_seconds}


def run(quick: bool = False, backends=None) -> dict:
    chosen = backends or (QUICK_BACKENDS if quick else BACKENDS)
    rows = [_measure(b) for b in chosen]
    if "numpyro" in chosen:
        rows.append(_measure("numpyro", mode="closure"))
        rows.append(_measure("numpyro", mode="short warm-up"))
    return {"name": "coldstart", "problem": "RVM sinc n = 50, width 3, 2 chains x (300 + 300)", "counts": COUNTS,
            "rows": rows}


def rows(result: dict) -> list[tuple[str, str, str]]:
    out = []
    labels = {"closure": " (data as constants)", "short warm-up": " (100 warm-up steps, 300 draws)"}
    for r in result["rows"]:
        name = r["backend"] + labels.get(r["mode"], "")
        if "error" in r:
            out.append((f"coldstart {name}", "ERROR", r["error"][:100]))
            continue
        first, again, other = r["fits"]
        share = first["compile"] / first["wall"] if first["wall"] > 0 else 0.0
        out.append((f"coldstart {name} first fit", f"{first['wall']:.2f} s",
                    f"compile {first['compile']:.2f} s ({100 * share:.0f} %)"))
        out.append((f"coldstart {name} again / other data", f"{again['wall']:.2f} / {other['wall']:.2f} s",
                    f"compile {again['compile']:.2f} / {other['compile']:.2f} s"))
    first_compile = {r["mode"]: r["fits"][0]["compile"] for r in result["rows"]
                     if r["backend"] == "numpyro" and "fits" in r}
    if first_compile.get("traced") and "short warm-up" in first_compile:
        out.append(("coldstart numpyro first-fit compile, short warm-up / equal phases",
                    f"{first_compile['short warm-up'] / first_compile['traced']:.2f}x",
                    "about 1 when the step is compiled once for both phases, about 2 when once per phase"))
    return out


#: what benchmarks/run.py runs from this module: name -> what it measures, run(quick) and its table rows
BENCHMARKS = {
    "coldstart": {"about": "each generic backend's first fit in a fresh process (empty JAX cache): compile share, "
                           "then the same fit again and a fit of other data of the same shape (subprocesses)",
                  "run": lambda quick: run(quick=quick), "rows": rows},
}


if __name__ == "__main__":
    result = run(quick="--quick" in sys.argv, backends=[a for a in sys.argv[1:] if not a.startswith("--")] or None)
    for row in rows(result):
        print(" | ".join(row))
