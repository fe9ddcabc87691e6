"""PyTensor C backend with and without a linked BLAS, on an RVM-like Gaussian model.

Each variant runs in its own subprocess with its own fresh ``compiledir`` and its own ``PYTENSOR_FLAGS``:

* ``fallback``: ``blas__ldflags=`` (empty), what a plain pip install gets: PyTensor's NumPy C-API fallback;
* ``blas``: bayeszoo's configuration (:mod:`bayeszoo.numerics.pytensor_blas`), OpenBLAS from the pip wheels;
* ``numba`` (optional, ``--blas-numba``): PyTensor's NUMBA mode instead of the C backend.

Model: M = 300 basis functions, N = 300 observations, dense design ``Phi`` (300 x 300),
``w_i ~ N(0, exp(-log_alpha_i / 2)^2)``, ``log_alpha_i ~ N(0, 1)``, ``log_beta ~ N(0, 2^2)``,
``y ~ N(Phi w, exp(-log_beta / 2)^2)``: 601 parameters; the gradient is two matrix-vector products with Phi.

Measured per variant: compile seconds of ``logp_dlogp_function``; microseconds per logp+dlogp evaluation
(median of repeated timed blocks); a short ``pm.sample`` (1 chain, 300 tune + 300 draws): its sampling
seconds and microseconds per leapfrog step (sampling time / total ``n_steps``, which does not depend on how
long the trajectories happen to be).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

N, M = 300, 300
HERE = os.path.dirname(os.path.abspath(__file__))


def _worker(variant: str) -> dict:
    """Runs inside the subprocess; prints one JSON line."""
    import warnings

    caught: list[str] = []
    warnings.simplefilter("always")
    _show = warnings.showwarning
    warnings.showwarning = lambda msg, cat, *a, **k: caught.append(f"{cat.__name__}: {str(msg)[:120]}")
    t0 = time.perf_counter()
    import bayeszoo  # noqa: F401  (configures PyTensor's BLAS unless PYTENSOR_FLAGS sets blas__ldflags)
    from bayeszoo.numerics import pytensor_blas as _blas
    import numpy as np
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt

    import_s = time.perf_counter() - t0
    warnings.showwarning = _show
    rng = np.random.default_rng(0)
    Phi = rng.normal(size=(N, M)) / np.sqrt(N)
    w_true = np.where(rng.random(M) < 0.05, rng.normal(0, 3, M), 0.0)
    y = Phi @ w_true + rng.normal(0, 0.1, N)
    with pm.Model() as model:
        log_alpha = pm.Normal("log_alpha", 0.0, 1.0, shape=M)
        log_beta = pm.Normal("log_beta", 0.0, 2.0)
        w = pm.Normal("w", 0.0, sigma=pt.exp(-0.5 * log_alpha), shape=M)
        pm.Normal("y", mu=pt.dot(Phi, w), sigma=pt.exp(-0.5 * log_beta), observed=y)

    mode = "NUMBA" if variant == "numba" else None
    t0 = time.perf_counter()
    fn = model.logp_dlogp_function(ravel_inputs=True, **({"mode": mode} if mode else {}))
    fn.set_extra_values({})
    compile_s = time.perf_counter() - t0
    point = model.initial_point()
    x = np.concatenate([np.ravel(point[v.name]) for v in fn._grad_vars]).astype(float)
    fn(x)
    reps, blocks = 2000, 5
    per_block = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn(x)
        per_block.append((time.perf_counter() - t0) / reps)
    eval_us = float(np.median(per_block) * 1e6)
    ops = sorted({type(node.op).__name__ for node in fn._pytensor_function.maker.fgraph.apply_nodes})

    kwargs = dict(compile_kwargs={"mode": "NUMBA"}) if mode else {}
    t0 = time.perf_counter()
    with model:
        idata = pm.sample(draws=300, tune=300, chains=1, cores=1, random_seed=1, progressbar=False,
                          compute_convergence_checks=False, discard_tuned_samples=False, **kwargs)
    sample_wall = time.perf_counter() - t0
    sampling_s = float(idata.sample_stats.attrs.get("sampling_time", sample_wall))  # tuning + draws
    steps = int(idata.sample_stats["n_steps"].values.sum())
    if "warmup_sample_stats" in idata.groups():
        steps += int(idata.warmup_sample_stats["n_steps"].values.sum())
    return {
        "variant": variant,
        "ldflags": pytensor.config.blas__ldflags[:80] + ("..." if len(pytensor.config.blas__ldflags) > 80 else ""),
        "configured": _blas.configure_pytensor_blas(),
        "import_s": import_s,
        "compile_s": compile_s,
        "logp_dlogp_us": eval_us,
        "sample_wall_s": sample_wall,
        "sampling_s": sampling_s,
        "leapfrog_steps": steps,
        "us_per_step": sampling_s / steps * 1e6 if steps else float("nan"),
        "ops": ops,
        "warnings": caught,
    }


def _run_variant(variant: str, timeout: float = 600) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"bz-bench-{variant}-") as compiledir:
        env = dict(os.environ)
        env.pop("PYTENSOR_FLAGS", None)
        flags = [f"compiledir={compiledir}"]
        if variant in ("fallback", "numba"):
            flags.append("blas__ldflags=")
        env["PYTENSOR_FLAGS"] = ",".join(flags)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", variant], env=env,
                              capture_output=True, text=True, timeout=timeout)
        wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"variant": variant, "error": (proc.stderr or proc.stdout)[-2000:], "process_s": wall}
    out = json.loads(lines[-1])
    out["process_s"] = wall
    return out


def run(numba: bool = False, repeats: int = 2) -> dict:
    """Alternate the variants ``repeats`` times (the machine's load drifts) and keep each one's best figures."""
    variants = ["fallback", "blas"] + (["numba"] if numba else [])
    runs = {v: [] for v in variants}
    for _ in range(repeats):
        for v in variants:
            runs[v].append(_run_variant(v))
    results = {}
    for v, outs in runs.items():
        good = [o for o in outs if "error" not in o]
        if not good:
            results[v] = outs[-1]
            continue
        best = dict(min(good, key=lambda o: o["logp_dlogp_us"]))
        for key in ("logp_dlogp_us", "us_per_step", "sampling_s", "compile_s"):
            best[key] = min(o[key] for o in good)
            best[f"{key}_all"] = [o[key] for o in good]
        results[v] = best
    fb, bl = results["fallback"], results["blas"]
    ratios = {}
    if "error" not in fb and "error" not in bl:
        ratios = {
            "logp_dlogp_speedup": fb["logp_dlogp_us"] / bl["logp_dlogp_us"],
            "leapfrog_step_speedup": fb["us_per_step"] / bl["us_per_step"],
            "sampling_speedup": fb["sampling_s"] / bl["sampling_s"],
        }
        if numba and "error" not in results["numba"]:
            nb = results["numba"]
            ratios["blas_vs_numba_logp_dlogp"] = nb["logp_dlogp_us"] / bl["logp_dlogp_us"]
            ratios["blas_vs_numba_step"] = nb["us_per_step"] / bl["us_per_step"]
    met = ratios["logp_dlogp_speedup"] > 1 and ratios["leapfrog_step_speedup"] > 1 if ratios else None
    return {"name": "blas", "target_met": met, "problem": f"RVM-like Gaussian model, dense Phi {N}x{M}, {M + 1 + M} parameters",
            "variants": results, "ratios": ratios,
            "target": "C backend with BLAS faster than the NumPy C-API fallback (ratio > 1)"}


def rows(result: dict) -> list[tuple[str, str, str]]:
    """(quantity, value, note) lines for the summary table."""
    out = []
    for name, v in result["variants"].items():
        if "error" in v:
            out.append((f"blas/{name}", "ERROR", v["error"].strip().splitlines()[-1][:100]))
            continue
        out.append((f"blas/{name} logp+dlogp", f"{v['logp_dlogp_us']:.1f} us", f"compile {v['compile_s']:.1f} s"))
        out.append((f"blas/{name} pm.sample", f"{v['us_per_step']:.1f} us/step",
                    f"{v['sampling_s']:.2f} s for {v['leapfrog_steps']} leapfrog steps"))
    for key, value in result["ratios"].items():
        out.append((f"blas ratio {key}", f"{value:.2f}x", ""))
    return out


#: what benchmarks/run.py runs from this module: name -> what it measures, run(quick, numba) and its table rows
BENCHMARKS = {
    "blas": {"about": "PyTensor C backend: NumPy C-API fallback vs the OpenBLAS bayeszoo links (subprocesses)",
             "run": lambda quick, numba=False: run(numba=numba, repeats=1), "rows": rows},
}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        print(json.dumps(_worker(sys.argv[2])))
    else:
        res = run(numba="--numba" in sys.argv)
        print(json.dumps(res, indent=1))
