"""Ratio benchmarks of bayeszoo against its peers (``make bench``). Not tests: nothing here asserts a time.

    .venv/bin/python benchmarks/run.py                     # all benchmarks (long: bid_shake alone ~20 min)
    .venv/bin/python benchmarks/run.py --only ess          # one (or a comma-separated list)
    .venv/bin/python benchmarks/run.py --quick             # shorter runs, for a smoke check
    .venv/bin/python benchmarks/run.py --list

Benchmarks (see BENCHMARKS.md):
  blas             PyTensor C backend: NumPy C-API fallback vs the OpenBLAS bayeszoo links (subprocesses)
  ess              ESS/s of the RVM Gibbs sampler vs PyMC NUTS and NumPyro on sinc (target: >= 10x NUTS),
                   under the sampler-comparison prior RVM(a=1, b=1e-2, c=1, d=1e-3) where NUTS converges
  ess_sparse       the same under the near-improper default prior (1e-4), where NUTS does not converge
  fast_vs_sklearn  RVM `fast` vs sklearn-rvm EMRVR and sklearn ARDRegression on Boston housing, vs EMRVR on
                   sinc with n = 2000, and vs the `em` backend on Friedman #1 with n = 2000
  defaults         the scikit-learn estimators at their defaults vs LogisticRegression / SVC / GPC / Ridge / SVR on
                   breast cancer, diabetes, iris, wine (3-fold CV)
  arvm             aRVM vs RVM (inner-CV width) on the real data sets: error, relevance vectors, time (nested CV)
  arvm_protocol    aRVM nested CV on Boston housing (5 x 3 folds, 250 points, seed 0), the default (feasible) and
                   the paper's (unbounded) joint step, against their recorded MSE and relevance vectors, with the
                   stated tolerance (--quick: 3 x 3 folds, 150 points)
  imagervm         image RVM (Tzikas PhD ch. 4): Table 4.1 protocol, 256 x 256 multikernel ISNR, detection LROC
  gpc_peers        GPC `ep` vs GPy's EP and `laplace` vs scikit-learn's GaussianProcessClassifier on sonar
  gpc_times        GPC relative running times (LA = 1) of LA, EP, KL, VB, FV, LR, NUTS, Gibbs on six datasets
  gpc_ess          ESS/s of the GPC Gibbs sampler vs PyMC NUTS on the latent f for sonar
  gpc_large        GPC `ep` vs GPy's EP and `laplace` vs scikit-learn's GPC at n = 3000 and 5000 (synthetic), with sonar
  bid_scaling      BID VB seconds per iteration at 128, 256, 512 pixels square against the M log M ratio
  bid_peers        BID VB (StStSt) vs richardson_lucy / unsupervised_wiener (true PSF) and TV-blind, cameraman
  bid_sparse       BID vb_sparse on the thesis's three blurs (cameraman 256) against HQS with the true PSF
  bid_shake        BID camera-shake set: error ratios of vb_sparse, the thesis's vb, TV-blind (256 x 256)
  pmkl_vb_gibbs    PMKL: VBpMKL vs Gibbs, time to the same test error on the mfeat stand-in (target: >= 100x)
  pmkl_ess         PMKL: ESS/s of gibbs vs PyMC NUTS on W and beta (mkl_sources, n = 30)
  pmkl_svc         PMKL vb / em vs scikit-learn SVC on the averaged kernel (mfeat stand-in)
  slm_dloop_cd     SLM: one dloop outer iteration vs a naive coordinate-descent sweep on phi, 256 x 256
                   (target: >= 100x)
  slm_scaling      SLM: dloop seconds per outer iteration at 128, 256, 512 pixels square against the n log n ratio
  slm_map_peers    SLM: map (fista, admm) vs scikit-learn Lasso on a signal and SigPy's L1WaveletRecon on an image
  slm_sbl_ard      SLM: sbl vs scikit-learn ARDRegression (hyperpriors off) on the same signal
  roofline         every hand-written sweep / pass / iteration at two sizes against a bound from its dominant kernels
                   (Cholesky, GEMM, triangular solves, FFTs, operator products) timed in the same run (target: <= 3x)
  growth           each family's main hand-written backend at four sizes: time and tracked peak memory, fitted
                   exponents beside the algorithm's, the sizes that reach one minute and 20 GB
  coldstart        each generic backend's first fit in a fresh process (empty JAX cache): compile share, then the
                   same fit again and a fit of other data of the same shape (subprocesses)

Every ratio in the printed table is measured in this one run. Results go to benchmarks/results/latest.json and
latest.md.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

BENCHMARKS = ("blas", "ess", "ess_sparse", "fast_vs_sklearn", "defaults", "gpc_peers", "gpc_times", "gpc_ess",
              "gpc_large", "bid_scaling", "bid_peers", "bid_sparse", "bid_shake", "pmkl_vb_gibbs", "pmkl_ess",
              "pmkl_svc", "arvm", "arvm_protocol", "imagervm", "slm_dloop_cd", "slm_scaling", "slm_map_peers",
              "slm_sbl_ard", "roofline", "growth", "coldstart")


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


def _run_one(name: str, quick: bool, numba: bool) -> dict:
    t0 = time.perf_counter()
    rows_fn = None   # the module's ``rows`` unless the branch names another
    try:
        if name == "blas":
            import bench_blas as mod

            result = mod.run(numba=numba, repeats=1)
        elif name in ("ess", "ess_sparse"):
            import bench_ess as mod

            prior = "comparison" if name == "ess" else "sparse"
            sizes = dict(draws=500, tune=500, gradient_draws=200) if quick else {}
            result = mod.run(prior=prior, **sizes)
        elif name == "fast_vs_sklearn":
            import bench_fast_vs_sklearn as mod

            result = mod.run(repeats=1, splits=2, large_n=500, friedman_n=300) if quick else mod.run()
        elif name == "defaults":
            import bench_defaults as mod

            result = mod.run(datasets=("breast_cancer", "iris")) if quick else mod.run()
        elif name.startswith("gpc_"):
            import bench_gpc as mod

            if name == "gpc_peers":
                result = mod.run_peers(repeats=2 if quick else 5)
            elif name == "gpc_times":
                result = (mod.run_times(datasets=("crabs", "sonar"), regimes=mod.REGIMES[::4], mcmc_draws=300)
                          if quick else mod.run_times())
            elif name == "gpc_large":
                result = mod.run_large(sizes=(1500,), repeats=1) if quick else mod.run_large()
            else:
                result = mod.run_ess(draws=500, tune=500) if quick else mod.run_ess()
            rows_fn = {"gpc_peers": mod.rows_peers, "gpc_times": mod.rows_times, "gpc_ess": mod.rows_ess,
                       "gpc_large": mod.rows_large}[name]
        elif name.startswith("bid_"):
            import bench_bid as mod

            if name == "bid_scaling":
                result = mod.run_scaling(iterations=5, repeats=1) if quick else mod.run_scaling()
            elif name == "bid_peers":
                result = mod.run_peers(max_iter=30, psfs=("uniform",)) if quick else mod.run_peers()
            elif name == "bid_sparse":
                result = mod.run_sparse(psfs=("uniform",)) if quick else mod.run_sparse()
            else:
                result = (mod.run_shake(images=("cameraman",), kernels=(0, 2), size=128, methods=("vb_sparse",))
                          if quick else mod.run_shake())
            rows_fn = {"bid_scaling": mod.rows_scaling, "bid_peers": mod.rows_peers, "bid_sparse": mod.rows_sparse,
                       "bid_shake": mod.rows_shake}[name]
        elif name == "arvm_protocol":
            import bench_arvm as mod

            result = mod.run_protocol(quick=quick)
            rows_fn = mod.rows_protocol
        elif name == "arvm":
            import bench_arvm as mod

            result = (mod.run(folds=3, inner_folds=3, widths=[0.5 + k for k in range(10)], max_n=150)
                      if quick else mod.run())
        elif name == "imagervm":
            import bench_imagervm as mod

            result = mod.run(quick=quick)
        elif name.startswith("pmkl_"):
            import bench_pmkl as mod

            if name == "pmkl_vb_gibbs":
                result = mod.run_vb_gibbs(gibbs_sweeps=400) if quick else mod.run_vb_gibbs()
            elif name == "pmkl_ess":
                result = mod.run_ess(draws=300, tune=300) if quick else mod.run_ess()
            else:
                result = mod.run_svc()
            rows_fn = {"pmkl_vb_gibbs": mod.rows_vb_gibbs, "pmkl_ess": mod.rows_ess, "pmkl_svc": mod.rows_svc}[name]
        elif name.startswith("slm_"):
            import bench_slm as mod

            if name == "slm_dloop_cd":
                result = mod.run_dloop_cd(size=64) if quick else mod.run_dloop_cd()
            elif name == "slm_scaling":
                result = mod.run_scaling(sizes=mod.QUICK_SIZES, repeats=1) if quick else mod.run_scaling()
            elif name == "slm_map_peers":
                result = (mod.run_map_peers(image_size=64, image_m=1024, repeats=1) if quick
                          else mod.run_map_peers())
            else:
                result = mod.run_sbl_ard(repeats=1) if quick else mod.run_sbl_ard()
            rows_fn = {"slm_dloop_cd": mod.rows_dloop_cd, "slm_scaling": mod.rows_scaling,
                       "slm_map_peers": mod.rows_map_peers, "slm_sbl_ard": mod.rows_sbl_ard}[name]
        elif name == "roofline":
            import bench_roofline as mod

            result = mod.run(quick=quick)
        elif name == "growth":
            import bench_growth as mod

            result = mod.run(quick=quick)
        elif name == "coldstart":
            import bench_coldstart as mod

            result = mod.run(quick=quick)
        else:
            raise ValueError(name)
    except Exception as exc:  # one broken benchmark must not hide the others
        import traceback

        result = {"name": name, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        mod = None
    result["bench_seconds"] = time.perf_counter() - t0
    if "error" in result:
        result["_rows"] = [(name, "ERROR", result["error"][:100])]
    else:
        result["_rows"] = (rows_fn or mod.rows)(result)
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
    parser.add_argument("--only", default=",".join(BENCHMARKS),
                        help=f"comma-separated subset of {', '.join(BENCHMARKS)}")
    parser.add_argument("--quick", action="store_true", help="shorter runs (smoke check; noisier ratios)")
    parser.add_argument("--blas-numba", action="store_true", help="blas: also time PyTensor's NUMBA mode")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="folder for latest.json / latest.md")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(BENCHMARKS))
        return 0
    chosen = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = sorted(set(chosen) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")

    import bayeszoo  # noqa: F401  (first: it points PyTensor at OpenBLAS before anything imports pytensor)

    start = time.perf_counter()
    date = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    machine = _machine()
    results = {}
    for name in chosen:
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        results[name] = _run_one(name, args.quick, args.blas_numba)
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
