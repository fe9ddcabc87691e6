"""Ratio benchmarks of bayeszoo against its peers (``make bench``). Not tests: nothing here asserts a time.

    .venv/bin/python benchmarks/run.py                     # all benchmarks (long: bid_shake alone ~20 min)
    .venv/bin/python benchmarks/run.py --only ess          # one (or a comma-separated list)
    .venv/bin/python benchmarks/run.py --quick             # shorter runs, for a smoke check
    .venv/bin/python benchmarks/run.py --list

Each ``bench_*.py`` module declares what it runs in ``BENCHMARKS`` (name -> what it measures, how to run it, full
or ``--quick``, and its table rows); ``--list`` prints them. The modules are found, not listed: a family's
declaration names its benchmark modules (``Family.benchmarks``, docs/architecture.md "Adding a family"), and
``GENERAL`` below names the few that measure no one family. See BENCHMARKS.md.

Every ratio in the printed table is measured in this one run. Results go to benchmarks/results/latest.json and
latest.md.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import inspect
import json
import math
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

#: the modules that measure no one family: the first run before the families' modules, the second after them
GENERAL = (("bench_blas",), ("bench_defaults", "bench_roofline", "bench_growth", "bench_coldstart"))


def modules(folder: str = HERE) -> list[str]:
    """Every benchmark module of ``folder``, in the order they run: ``GENERAL``'s first, each family's (its
    declaration's ``benchmarks``, the families in key order), ``GENERAL``'s last. A ``bench_*.py`` named by none,
    or a module named but absent, is an error."""
    import bayeszoo  # noqa: F401  (first: it points PyTensor at OpenBLAS before anything imports pytensor)

    named = [*GENERAL[0], *(m for family in bayeszoo.models.families().values() for m in family.benchmarks),
             *GENERAL[1]]
    present = sorted(os.path.splitext(f)[0] for f in os.listdir(folder) if f.startswith("bench_") and f.endswith(".py"))
    missing = sorted(set(named) - set(present))
    unnamed = sorted(set(present) - set(named))
    if missing or unnamed:
        raise ValueError(f"benchmark modules named but absent: {missing}; present but named by no family's "
                         f"declaration nor GENERAL: {unnamed}; name each in its family's Family(benchmarks=...) or in "
                         f"benchmarks/run.py's GENERAL")
    return named


def benchmarks(folder: str = HERE) -> dict[str, dict]:
    """name -> its declaration (``about``, ``run``, ``rows``), from the ``BENCHMARKS`` of every module of
    ``folder``."""
    if folder not in sys.path:
        sys.path.insert(0, folder)
    found = {}
    for name in modules(folder):
        for key, bench in importlib.import_module(name).BENCHMARKS.items():
            if key in found:
                raise ValueError(f"benchmark {key!r} is declared by {found[key]['module']} and {name}; rename one")
            found[key] = {**bench, "module": name}
    return found


def _machine() -> dict:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for dist in ("numpy", "scipy", "pytensor", "pymc", "jax", "numpyro", "nutpie", "arviz", "scikit-learn",
                 "sklearn-rvm", "gpy", "sigpy"):
        try:
            versions[dist] = version(dist)
        except PackageNotFoundError:
            versions[dist] = None
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = math.nan
    return {"cores": os.cpu_count(), "cpu": cpu, "platform": platform.platform(),
            "python": platform.python_version(), "versions": versions, "load_avg_1min_at_start": load,
            "env": {k: v for k, v in os.environ.items() if k.startswith(("OPENBLAS_", "OMP_", "MKL_"))}}


def _run_one(name: str, bench: dict, quick: bool, numba: bool) -> dict:
    t0 = time.perf_counter()
    flags = {"numba": numba} if "numba" in inspect.signature(bench["run"]).parameters else {}
    try:
        result = bench["run"](quick, **flags)
    except Exception as exc:  # one broken benchmark must not hide the others
        import traceback

        result = {"name": name, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    result["bench_seconds"] = time.perf_counter() - t0
    if "error" in result:
        result["_rows"] = [(name, "ERROR", result["error"][:100])]
    else:
        result["_rows"] = bench["rows"](result)
    return result


def _table(results: dict) -> list[tuple[str, str, str]]:
    rows = []
    for name, res in results.items():
        rows.extend(res["_rows"])
        if res.get("target"):
            met = res.get("target_met")
            rows.append((f"{name} target", "met" if met else "NOT met" if met is False else "n/a", res["target"]))
        rows.append((f"{name} run time", f"{res['bench_seconds']:.0f} s", ""))
    return rows


def _markdown(rows, meta) -> str:
    lines = [f"# bayeszoo benchmarks: {meta['date']}", "",
             f"Machine: {meta['machine']['cores']} cores, {meta['machine']['cpu']}, Python {meta['machine']['python']}; "
             f"load average at start {meta['machine']['load_avg_1min_at_start']:.2f}. "
             f"Total run time {meta['total_seconds']:.0f} s. Command: `{meta['command']}`.", "",
             "| quantity | value | note |", "|---|---|---|"]
    lines += [f"| {q} | {v} | {n.replace('|', '/')} |" for q, v, n in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=None, help="comma-separated subset of the benchmarks (--list names them)")
    parser.add_argument("--quick", action="store_true", help="shorter runs (smoke check; noisier ratios)")
    parser.add_argument("--blas-numba", action="store_true", help="blas: also time PyTensor's NUMBA mode")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="folder for latest.json / latest.md")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and what each measures, and exit")
    args = parser.parse_args(argv)
    found = benchmarks()
    if args.list:
        width = max(map(len, found))
        print("\n".join(f"{name:<{width}}  {bench['about']}" for name, bench in found.items()))
        return 0
    chosen = list(found) if args.only is None else [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = sorted(set(chosen) - set(found))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {list(found)}")

    start = time.perf_counter()
    date = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    machine = _machine()
    results = {}
    for name in chosen:
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        results[name] = _run_one(name, found[name], args.quick, args.blas_numba)
        print(f"[bench] {name} done in {results[name]['bench_seconds']:.0f} s", file=sys.stderr, flush=True)
    total = time.perf_counter() - start
    meta = {"date": date, "machine": machine, "total_seconds": total, "quick": args.quick,
            "command": " ".join(["benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])]).strip()}
    try:
        import bayeszoo.numerics.pytensor_blas as blas

        meta["pytensor_blas"] = blas.configure_pytensor_blas()
    except Exception as exc:
        meta["pytensor_blas"] = f"unavailable: {exc}"

    rows = _table(results)
    width = max(len(q) for q, _, _ in rows)
    vwidth = max(len(v) for _, v, _ in rows)
    print()
    print(f"bayeszoo benchmarks, {date}; {machine['cores']} cores; total {total:.0f} s")
    for q, v, n in rows:
        print(f"  {q:<{width}}  {v:>{vwidth}}  {n}")

    os.makedirs(args.out, exist_ok=True)
    payload = {"meta": meta, "results": {k: {kk: vv for kk, vv in v.items() if kk != "_rows"}
                                         for k, v in results.items()},
               "table": [list(r) for r in rows]}
    with open(os.path.join(args.out, "latest.json"), "w") as fh:
        json.dump(payload, fh, indent=1, default=str)
    with open(os.path.join(args.out, "latest.md"), "w") as fh:
        fh.write(_markdown(rows, meta))
    print(f"\nwrote {os.path.join(args.out, 'latest.json')} and latest.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
