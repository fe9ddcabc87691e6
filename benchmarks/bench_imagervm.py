"""DFT-domain multikernel RVM (Tzikas PhD ch. 4): Table 4.1 protocol, the large-scale demo, object-detection LROC.

* ``table41``: the 30 x 30 sinc (4.24) plus noise of variance 0.1, ``runs`` noise realisations, Gaussian kernels of
  width sigma^2 in {1, 2, 4, 8}; the standard RVM (dense posterior by Cholesky, ``approx="exact"``, whose iterates
  equal the RVM family's ``em`` on the same design, see tests) against the DFT-RVM with the diagonal (4.22) and the
  circulant (4.23) approximations. Mean MSE against the noise-free image, mean number of relevance vectors
  (weights not pruned, alpha < 1e12) and mean seconds per fit. Thesis prior a = b = c = d = 0.
* ``large``: multikernel RVM with sigma^2 = 2, 4, 8 on the 256 x 256 cameraman (scikit-image, grey levels in [0, 1]),
  white noise at 20 dB SNR (the thesis does not state its noise); ISNR (dB) and seconds for both approximations.
* ``detection``: the §4.5.1 protocol on the stand-in scenes (:mod:`bayeszoo.datasets.imagervm_data`): 50 images
  with and 50 without the target, noise variance 20; LROC area of the DFT-RVM detector against a matched filter.

Not a test: nothing is asserted.

    .venv/bin/python benchmarks/bench_imagervm.py [--quick]
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

WIDTHS = (1.0, 2.0, 4.0, 8.0)
METHODS = {"RVM": "exact", "DFT-RVM": "diagonal", "DFT-RVM(2)": "circulant"}


def run_table41(runs: int = 10, widths=WIDTHS, max_iter: int = 200, size: int = 30) -> dict:
    import bayeszoo as bz
    from bayeszoo.inference.imagervm.dft import dft_rvm
    from bayeszoo.models.imagervm import ImageRVM

    out = {label: {w: {"mse": [], "n_rv": [], "seconds": [], "converged": []} for w in widths} for label in METHODS}
    for seed in range(runs):
        data = bz.datasets.load("sinc2d_image", size=size, seed=seed)
        truth = data.meta["true_image"]
        for width in widths:
            model = ImageRVM(kernels=(width,))
            g = model.observed_image(data)
            for label, approx in METHODS.items():
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    res = dft_rvm(model, g, {"approx": approx, "max_iter": max_iter})
                cell = out[label][width]
                cell["seconds"].append(time.perf_counter() - t0)
                cell["mse"].append(float(np.mean((res.restored - truth) ** 2)))
                cell["n_rv"].append(int(res.active.sum()))
                cell["converged"].append(bool(res.converged))
    summary = {label: {str(w): {k: float(np.mean(v)) for k, v in cell.items()} for w, cell in by_w.items()}
               for label, by_w in out.items()}
    return {"name": "dftrvm_table41", "runs": runs, "size": size, "max_iter": max_iter, "table": summary}


def run_large(size: int = 256, snr_db: float = 20.0, max_iter: int = 50, seed: int = 0,
              approxes=("diagonal", "circulant")) -> dict:
    import bayeszoo as bz
    from bayeszoo.datasets.bid_data import noise_variance
    from bayeszoo.inference.imagervm.dft import dft_rvm
    from bayeszoo.models.bid import isnr
    from bayeszoo.models.imagervm import ImageRVM

    f = bz.datasets.load("cameraman", psf="uniform", snr_db=40, seed=0).meta["true_image"]
    if size < f.shape[0]:
        f = f[:size, :size]
    var = noise_variance(f, snr_db)
    g = f + np.random.default_rng(seed).normal(0.0, np.sqrt(var), f.shape)
    model = ImageRVM(kernels=(2.0, 4.0, 8.0))
    result = {"name": "dftrvm_large", "size": list(f.shape), "snr_db": snr_db, "noise_var": var, "max_iter": max_iter}
    for approx in approxes:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = dft_rvm(model, g, {"approx": approx, "max_iter": max_iter}, progress=True)
        result[approx] = {"isnr_db": isnr(f, g, res.restored), "seconds": time.perf_counter() - t0,
                          "iterations": res.iterations, "converged": res.converged,
                          "cg_iterations": res.cg_iterations, "n_active": int(res.active.sum()),
                          "beta_em_steps": res.beta_em_steps}
    return result


def run_detection(n: int = 50, size: int = 64, max_iter: int = 50, seed: int = 0, target_peak: float = 40.0) -> dict:
    from bayeszoo.datasets.imagervm_data import detection_scenes
    from bayeszoo.studies.imagervm_detection import run_protocol

    scenes = detection_scenes(n_present=n, n_absent=n, size=size, seed=seed, target_peak=target_peak)
    result = {"name": "dftrvm_detection", "n_present": n, "n_absent": n, "size": size, "max_iter": max_iter,
              "target_peak": target_peak}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for method, opts in (("rvm", {"max_iter": max_iter}), ("matched", {})):
            r = run_protocol(scenes, method, progress=True, **opts)
            result[method] = {"area": r["area"], "correct_localisation": r["correct_localisation"],
                              "seconds": r["seconds"], "p_fa": r["p_fa"].tolist(), "p_dl": r["p_dl"].tolist()}
    return result


def run(quick: bool = False) -> dict:
    if quick:
        return {"name": "dftrvm", "table41": run_table41(runs=2, max_iter=100),
                "large": run_large(size=128, max_iter=20), "detection": run_detection(n=15, size=48, max_iter=30)}
    return {"name": "dftrvm", "table41": run_table41(), "large": run_large(), "detection": run_detection()}


def rows(result) -> list[tuple[str, str, str]]:
    out = []
    t = result["table41"]
    for label, by_w in t["table"].items():
        cells = [f"{c['mse']:.4f} ({c['n_rv']:.0f})" for c in by_w.values()]
        secs = max(c["seconds"] for c in by_w.values())
        out.append((f"dftrvm table 4.1 {label}", " / ".join(cells),
                    f"MSE (RVs) at sigma^2 = {', '.join(by_w)}; {t['runs']} runs; up to {secs:.2f} s per fit"))
    big = result["large"]
    for approx in ("diagonal", "circulant"):
        if approx in big:
            r = big[approx]
            out.append((f"dftrvm {big['size'][0]}x{big['size'][1]} multikernel ISNR ({approx})",
                        f"{r['isnr_db']:.2f} dB", f"{r['seconds']:.0f} s, {r['iterations']} iterations, "
                        f"SNR {big['snr_db']:.0f} dB"))
    det = result["detection"]
    out.append(("dftrvm detection LROC area", f"{det['rvm']['area']:.3f} vs {det['matched']['area']:.3f}",
                f"DFT-RVM vs matched filter; {det['n_present']} + {det['n_absent']} images {det['size']}^2, "
                f"target peak {det['target_peak']:g}"))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="table41,large,detection")
    parser.add_argument("--target-peak", type=float, default=40.0, help="detection: target contrast (grey levels)")
    args = parser.parse_args(argv)
    parts = args.only.split(",")
    result = {"name": "dftrvm"}
    if "table41" in parts:
        result["table41"] = run_table41(runs=2, max_iter=100) if args.quick else run_table41()
        print(result["table41"])
    if "large" in parts:
        result["large"] = run_large(size=128, max_iter=20) if args.quick else run_large()
        print({k: v for k, v in result["large"].items()})
    if "detection" in parts:
        result["detection"] = (run_detection(n=15, size=48, max_iter=30, target_peak=args.target_peak) if args.quick
                               else run_detection(target_peak=args.target_peak))
        print({m: {k: v for k, v in result["detection"][m].items() if k not in ("p_fa", "p_dl")}
               for m in ("rvm", "matched")})
    if len(parts) == 3:
        for q, v, n in rows(result):
            print(f"{q:<45} {v:>40}  {n}")


#: what benchmarks/run.py runs from this module: name -> what it measures, run(quick) and its table rows
BENCHMARKS = {
    "imagervm": {"about": "image RVM (Tzikas PhD ch. 4): Table 4.1 protocol, 256 x 256 multikernel ISNR, detection "
                          "LROC",
                 "run": lambda quick: run(quick=quick), "rows": rows},
}


if __name__ == "__main__":
    main()
