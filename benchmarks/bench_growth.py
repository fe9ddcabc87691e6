"""Growth: time and peak memory of each family's main hand-written backend against problem size.

For each family, one backend at four sizes, a fixed number of iterations (tolerances at 1e-300, so every run
makes them all; the number is in the table), one BLAS thread:

* time: CPU seconds of the run (``bz.fit`` with one chain and few draws, or the backend's own loop where the
  fit's draws are not the algorithm: ``dloop.double_loop``, ``imagervm.dft.dft_rvm``), the smaller of ``repeats``
  (CPU time of one thread: on a shared machine wall time also counts waiting for a core; both are kept);
* memory: the peak of Python-tracked allocations while the data set is built and the run made once more, untimed
  (``tracemalloc``; NumPy registers its array buffers with it). Not seen: BLAS / LAPACK workspaces, pocketfft's
  scratch, what the process held before (imports, the interpreter);
* exponents: least-squares slopes of log time and log memory against log size over the four sizes, beside the
  exponent the algorithm should have;
* extrapolation: from the largest size, along the steepest of the fitted slope, the last two sizes' slope and the
  algorithm's exponent (:func:`summary`), the size at which a run of this many iterations takes one minute of
  one-thread CPU time and the size at which the tracked memory reaches 20 GB (what one machine like this holds).
"""
from __future__ import annotations

import math
import time
import tracemalloc
import warnings

import numpy as np

from _kernels import CLOCK

MINUTE = 60.0
MEMORY = 20e9
REPEATS = 2


def _fit(model, data, backend, **kwargs):
    import bayeszoo as bz

    return bz.fit(model, data, backend=backend, chains=1, seed=0, progress=False, **kwargs)


def _rvm(n):
    import bayeszoo as bz

    data = bz.datasets.load("sinc", n=n, seed=0)
    model = bz.models.RVM(width=3.0, a=1.0, b=1e-2, c=1.0, d=1e-3)
    return lambda: _fit(model, data, "em", draws=10, max_iter=10, tol=1e-300)


def _arvm(n):
    import bayeszoo as bz

    data = bz.datasets.load("sinc", n=n, seed=0)
    return lambda: _fit(bz.models.ARVM(), data, "arvm", draws=10, max_iter=5, tol=1e-300, patience=100)


def _gpc(n):
    import bayeszoo as bz
    from bench_gpc import synthetic

    data = synthetic(n, n_test=50)
    return lambda: _fit(bz.models.GPC(), data, "ep", draws=10, max_sweeps=3, min_sweeps=3, tol=1e-300)


def _pmkl(n):
    import bayeszoo as bz

    data = bz.datasets.load("mkl_sources", n=n, n_test=30, seed=0)
    return lambda: _fit(bz.models.PMKL(rule="convex"), data, "vb", draws=10, max_iter=5, tol=1e-300)


def _slm(side):
    from bench_slm import SCALING_OPTIONS, image_data, image_model
    from bayeszoo.inference.slm import dloop
    from bayeszoo.inference.slm.common import problem

    model, data = image_model(), image_data(side)
    return lambda: dloop.double_loop(problem(model, data), n_outer=2, **{**SCALING_OPTIONS, "outer_tol": 1e-300})


def _bid(side):
    import bayeszoo as bz

    data = bz.datasets.load("cameraman", psf="uniform", snr_db=40, seed=0, size=side)
    return lambda: _fit(bz.models.BID(), data, "vb", draws=1, max_iter=3, tol=1e-300, cg_max_iter=20, cg_tol=1e-30)


def _imagervm(side):
    import bayeszoo as bz
    from bayeszoo.inference.imagervm.dft import dft_rvm

    f = bz.datasets.load("cameraman", psf="uniform", snr_db=40, seed=0, size=side).meta["true_image"]
    g = f + np.random.default_rng(0).normal(0.0, 0.05 * float(np.std(f)), f.shape)
    model = bz.models.ImageRVM(kernels=(2.0, 4.0, 8.0))
    return lambda: dft_rvm(model, g, {"max_iter": 3, "tol": 1e-300})


#: family: (backend, run, size name, sizes, quick sizes, size -> problem size n, expected time exponent in n,
#: its reason, expected memory exponent, what one run does)
FAMILIES = {
    "rvm": ("em", _rvm, "N", (250, 500, 1000, 2000), (100, 200, 300, 400), lambda s: s, 3.0,
            "dense M x M Cholesky, M = N + 1", 2.0, "10 iterations"),
    "arvm": ("arvm", _arvm, "N", (250, 500, 1000, 2000), (60, 120, 180, 240), lambda s: s, 1.0,
             "candidate search and joint BFGS over N points, few bases", 1.0, "5 iterations"),
    "gpc": ("ep", _gpc, "n", (250, 500, 1000, 2000), (100, 200, 300, 400), lambda s: s, 3.0,
            "blocked site updates and chol(B), n^3", 2.0, "3 passes"),
    "pmkl": ("vb", _pmkl, "N", (100, 200, 400, 800), (40, 60, 80, 100), lambda s: s, 3.0,
             "K K and C Cholesky factors of N x N", 2.0, "5 iterations"),
    "slm": ("dloop", _slm, "side", (64, 128, 256, 512), (32, 48, 64, 96), lambda s: s * s, 1.0,
            "MVM x k Lanczos + CG: products with FFT / wavelet operators, n log n", 1.0, "2 outer iterations"),
    "bid": ("vb", _bid, "side", (64, 128, 256, 512), (32, 48, 64, 96), lambda s: s * s, 1.0,
            "M log M FFT image steps (20 CG iterations per solve)", 1.0, "3 iterations"),
    "imagervm": ("dft", _imagervm, "side", (64, 128, 256, 512), (32, 48, 64, 96), lambda s: s * s, 1.0,
                 "M log M FFT products inside CG (iterations to cg_tol)", 1.0, "3 iterations"),
}


def _slope(x, y) -> float:
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    return float(np.polyfit(lx, ly, 1)[0])


def _reach(n_last: float, value_last: float, exponent: float, limit: float) -> float:
    """The n at which value_last * (n / n_last)^exponent reaches ``limit``."""
    if exponent <= 0 or value_last <= 0:
        return math.inf
    return n_last * (limit / value_last) ** (1.0 / exponent)


def measure(family: str, quick: bool = False, repeats: int = REPEATS) -> dict:
    backend, make, size_name, sizes, quick_sizes, to_n, exp_t, why, exp_m, what = FAMILIES[family]
    sizes = quick_sizes if quick else sizes
    rows = []
    for i, s in enumerate(sizes):
        run = make(s)
        if i == 0:
            run()                                            # warm: imports, FFT plans, caches
        seconds, wall = min(_timed(run) for _ in range(repeats))
        del run
        tracemalloc.start()                                  # the data set is part of what the user holds
        make(s)()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rows.append({"size": s, "n": to_n(s), "seconds": seconds, "wall_seconds": wall, "peak_bytes": peak})
    return summary(family, rows)


def summary(family: str, rows: list[dict]) -> dict:
    """Exponents and extrapolations of one family's measured ``rows``."""
    backend, _, size_name, _, _, _, exp_t, why, exp_m, what = FAMILIES[family]
    n = [r["n"] for r in rows]
    t_exp = _slope(n, [r["seconds"] for r in rows])
    m_exp = _slope(n, [r["peak_bytes"] for r in rows])
    # extrapolated from the largest size along the steepest of: the fit over all sizes, the last two sizes' slope
    # (the small sizes carry fixed costs that flatten the fit) and the algorithm's own exponent, which its leading
    # term reaches eventually even where lower-order terms still dominate at the measured sizes
    t_tail = _slope(n[-2:], [r["seconds"] for r in rows[-2:]])
    m_tail = _slope(n[-2:], [r["peak_bytes"] for r in rows[-2:]])
    last = rows[-1]
    minute_n = _reach(last["n"], last["seconds"], max(t_tail, t_exp, exp_t), MINUTE)
    memory_n = _reach(last["n"], last["peak_bytes"], max(m_tail, m_exp, exp_m), MEMORY)
    return {"family": family, "backend": backend, "size_name": size_name, "run": what, "rows": rows,
            "time_exponent": t_exp, "memory_exponent": m_exp, "time_exponent_last_two": t_tail,
            "memory_exponent_last_two": m_tail, "expected_time_exponent": exp_t,
            "expected_memory_exponent": exp_m, "why": why, "minute_n": minute_n, "memory_n": memory_n,
            "minute_size": _to_size(size_name, minute_n), "memory_size": _to_size(size_name, memory_n)}


def _to_size(size_name: str, n: float) -> float:
    return math.sqrt(n) if size_name == "side" else n


def _timed(fn) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one call."""
    t0, w0 = CLOCK(), time.perf_counter()
    fn()
    return CLOCK() - t0, time.perf_counter() - w0


def run(quick: bool = False, families=None, repeats: int | None = None) -> dict:
    import os

    from threadpoolctl import threadpool_limits

    repeats = repeats or (1 if quick else REPEATS)
    out = {}
    with threadpool_limits(limits=1, user_api="blas"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for family in families or FAMILIES:
            t0 = time.perf_counter()
            try:
                out[family] = measure(family, quick, repeats)
            except Exception as exc:        # one failing family must not hide the others
                out[family] = {"family": family, "error": f"{type(exc).__name__}: {exc}"}
            out[family]["bench_seconds"] = time.perf_counter() - t0
    return {"name": "growth", "families": out, "quick": quick, "repeats": repeats,
            "load_avg_1min": os.getloadavg()[0]}


def _size_text(r: dict, value: float) -> str:
    if not math.isfinite(value):
        return "unbounded"
    if r["size_name"] == "side":
        return f"{value:,.0f} x {value:,.0f}"
    return f"{r['size_name']} = {value:,.0f}"


def rows(result: dict) -> list[tuple[str, str, str]]:
    out = []
    for family, r in result["families"].items():
        if "error" in r:
            out.append((f"growth {family}", "ERROR", r["error"][:100]))
            continue
        sizes = ", ".join(f"{x['size']}: {x['seconds']:.2f} s / {x['peak_bytes'] / 2**20:.0f} MiB" for x in r["rows"])
        out.append((f"growth {family} {r['backend']} time exponent", f"{r['time_exponent']:.2f}",
                    f"expected {r['expected_time_exponent']:g} ({r['why']}); {r['run']}; {sizes}"))
        out.append((f"growth {family} {r['backend']} memory exponent", f"{r['memory_exponent']:.2f}",
                    f"expected {r['expected_memory_exponent']:g}; one minute at {_size_text(r, r['minute_size'])}, "
                    f"20 GB at {_size_text(r, r['memory_size'])}"))
    return out


def markdown(result: dict) -> str:
    lines = ["| family (backend, run) | size | CPU s (wall s) | peak MiB | time exponent (expected) | memory exponent "
             "(expected) | 1 minute at | 20 GB at |", "|---|---|---|---|---|---|---|---|"]
    for family, r in result["families"].items():
        if "error" in r:
            lines.append(f"| {family} | error: {r['error'][:80]} | | | | | | |")
            continue
        for i, x in enumerate(r["rows"]):
            head = (f"{family} ({r['backend']}, {r['run']})",
                    f"{r['time_exponent']:.2f}, last pair {r['time_exponent_last_two']:.2f} "
                    f"({r['expected_time_exponent']:g}: {r['why']})",
                    f"{r['memory_exponent']:.2f}, last pair {r['memory_exponent_last_two']:.2f} "
                    f"({r['expected_memory_exponent']:g})",
                    _size_text(r, r["minute_size"]), _size_text(r, r["memory_size"])) if i == 0 else ("",) * 5
            label = f"{x['size']} x {x['size']}" if r["size_name"] == "side" else f"{r['size_name']} = {x['size']}"
            lines.append(f"| {head[0]} | {label} | {x['seconds']:.3f} ({x['wall_seconds']:.2f}) | "
                         f"{x['peak_bytes'] / 2**20:.1f} | {head[1]} | {head[2]} | {head[3]} | {head[4]} |")
    return "\n".join(lines)


#: what benchmarks/run.py runs from this module: name -> what it measures, run(quick) and its table rows
BENCHMARKS = {
    "growth": {"about": "each family's main hand-written backend at four sizes: time and tracked peak memory, fitted "
                        "exponents beside the algorithm's, the sizes that reach one minute and 20 GB",
               "run": lambda quick: run(quick=quick), "rows": rows},
}


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=None, help="comma-separated families")
    parser.add_argument("--json", default=None, help="write the result here")
    args = parser.parse_args()
    res = run(quick=args.quick, families=args.only.split(",") if args.only else None)
    for q, v, n in rows(res):
        print(f"{q:40s} {v:>8s}  {n}")
    print(markdown(res))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1, default=str)
