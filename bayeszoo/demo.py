"""``make demo``: compare backends of every family on its demo problem against the catalogue's reference.

The problems, backends and sizes are those of :mod:`bayeszoo.catalogue.problems` (entries with a ``demo``); every
comparison measures its errors against the problem's validated reference from the catalogue
(:mod:`bayeszoo.catalogue`), so no reference is computed here. The demo is meant to finish in a few minutes, so
each problem runs the backends that show its family's trade-offs at sizes where its samplers converge (one that
does not is flagged in its report). Left out, and why:

* ``rvm-sinc``: PyMC NUTS and nutpie (the sampler NumPyro runs, each compiling the model again; the ``ess``
  benchmark compares them) and both ADVIs (PyTensor compiles the model for them: over 20 s on a fresh machine, more
  than the rest of the problem; ADVI's rows are on ``imagervm-sinc`` and the BID problem).
* ``arvm-sinc`` (sinc's central peak and side lobes, three adaptive bases): the PyMC backends (PyMC NUTS, nutpie,
  the two ADVIs: each compiles the model again in PyTensor and takes longer than the rest of the problem; NumPyro
  runs the same sampler) and BlackJAX's NUTS, MCLMC and mean-field VI (the NumPyro declaration again; NumPyro NUTS
  and BlackJAX Pathfinder show the sampler and the fast approximation beside Algorithm 1, ``arvm``).
* ``gpc-sonar``: PyMC NUTS, nutpie and the two ADVIs (NumPyro and the exact Gibbs sampler already show sampling;
  each PyMC backend compiles the model again) and AIS (an evidence estimator: hundreds of annealing runs).
* ``pmkl-sources``: the PyMC backends and the BlackJAX engines (the quadrature likelihood makes each PyMC run
  take minutes); NumPyro NUTS is the generic sampler shown beside the conjugate Gibbs sampler.
* ``bid-cameraman-crop-known-psf`` (the 32 x 32 cameraman crop, deconvolved with its PSF known): PyMC NUTS,
  nutpie and both ADVIs (each compiles the image model again in PyTensor: ADVI's compilation alone is 28 s on a
  fresh machine; NumPyro runs the same sampler), the BlackJAX engines, and ``vb_sparse``, which estimates the PSF
  that this problem gives.
* ``bid-cameraman-crop`` (the same crop, blind) is not in the demo: no sampler converges on it in hours, so it has
  no reference to measure errors against (docs/families/bid.md). The gallery notebook "When no sampler converges"
  (``gallery/no_convergence.ipynb``) shows it: the R-hat, ESS, disagreeing engines and trace and rank plots to
  read, and what ``vb_sparse`` estimates there.
* ``imagervm-sinc``: PyMC NUTS, nutpie and full-rank ADVI (the dense declaration compiles slowly in PyTensor;
  NumPyro runs the same sampler).
* ``slm-spikes``: the PyMC backends (NumPyro runs the same sampler on the same declaration) and the BlackJAX
  engines; every hand-written backend of the family runs.

The problems run two at a time on a two-core machine (``--jobs``: one per core by default, each problem in a
process of its own; ``--jobs 1`` runs them one after another with every fit's progress bar).

Output: one folder per problem under ``<out>`` (``rvm-sinc``, ``gpc-sonar``, ...), each with one NetCDF file per
fit, ``table.csv`` and ``report.html``.
"""
from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import as_completed

import pandas as pd

import bayeszoo as bz
from bayeszoo import catalogue
from bayeszoo.progress import progress_bar
from bayeszoo.workers import process_pool, usable_cores


#: the demo problems by key: their model and data factories and what the demo runs on them
DEMOS = {key: {"model": prob.model, "data": prob.data, "backends": list(prob.demo.backends),
               "sizes": dict(prob.demo.sizes), "options": dict(prob.demo.options)}
         for key, prob in catalogue.PROBLEMS.items() if prob.demo is not None}


def run(key: str, out: str, seed: int = 0, sizes: dict | None = None, progress: bool = True):
    """Compare the demo backends of problem ``key`` against its catalogue reference; the Comparison."""
    demo = DEMOS[key]
    model, data = demo["model"](), demo["data"]()
    reference = catalogue.lookup(model, data)
    if reference is None:
        print(f"!! the catalogue has no reference for {key} (docs/families/{model.family}.md): no errors are "
              f"measured")
    return bz.compare(model, data, backends=demo["backends"], reference=reference, seed=seed, progress=progress,
                      out=os.path.join(out, key), options=demo["options"], **{**demo["sizes"], **(sizes or {})})


def summary(key: str, out: str, seed: int = 0, sizes: dict | None = None, progress: bool = True) -> dict:
    """Run problem ``key`` (:func:`run`) and return what the demo prints of it: ``text`` (its reference, table,
    failed backends, verdict and report), ``verdict``, and ``failed`` (why it did not run, else None). A problem
    that raises is a summary that says so: it does not cost the other problems their reports."""
    head = f"== {key}: {catalogue.problem(key).description}"
    try:
        cmp = run(key, out, seed, sizes, progress)
    except Exception as exc:
        failed = f"{type(exc).__name__}: {exc}"
        return {"text": f"{head}\n!! {key} did not run: {failed}", "verdict": None, "failed": failed}
    lines = [head]
    if cmp.reference is not None:
        lines.append(f"reference: {cmp.reference.describe()}")
    lines.append(cmp.table().drop(columns=["error"]).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    lines += [f"!! {label} failed: {error.splitlines()[0]}" for label, error in cmp.errors.items()]
    verdict = cmp.verdict()
    lines += [f"verdict: {verdict}", f"report: {os.path.join(out, key, 'report.html')}"]
    return {"text": "\n".join(lines), "verdict": verdict, "failed": None}


def _summary_in_worker(key, out, seed, sizes) -> dict:
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 30)
    return summary(key, out, seed, sizes, progress=False)


def run_all(keys, out: str, seed: int = 0, sizes: dict | None = None, jobs: int = 1):
    """Run the demo problems ``keys``, ``jobs`` at a time, each in a process of its own when ``jobs > 1``; print
    each problem's summary as it finishes and return the summaries by key, in the order of ``keys``.

    The problems are independent, and each fit uses about one core (its sampler is sequential; what the demo
    spends around the fits, its statistics and report figures, is Python), so two problems at a time use a
    two-core machine where one leaves a core idle. In parallel the fits' own bars would overwrite each other,
    so one bar counts problems and names those still running."""
    done = {}
    if jobs <= 1:
        for key in keys:
            print(f"== {key}: {catalogue.problem(key).description}", flush=True)
            done[key] = summary(key, out, seed, sizes)
            print(done[key]["text"].split("\n", 1)[1], flush=True)
        return done
    with process_pool(jobs) as pool, \
            progress_bar(total=len(keys), desc="demo", unit="problem") as bar:
        futures = {pool.submit(_summary_in_worker, key, out, seed, sizes): key for key in keys}
        running = list(keys)
        bar.set_postfix_str(f"running {', '.join(running[:jobs])}")
        for future in as_completed(futures):
            key = futures[future]
            try:
                done[key] = future.result()
            except Exception as exc:   # the worker itself died (killed, out of memory): its problem did not run
                failed = f"{type(exc).__name__}: {exc}"
                done[key] = {"text": f"== {key}\n!! {key} did not run: {failed}", "verdict": None, "failed": failed}
            running.remove(key)
            bar.write(done[key]["text"])
            bar.set_postfix_str(f"running {', '.join(running[:jobs])}" if running else "", refresh=False)
            bar.update(1)
    return {key: done[key] for key in keys}


def default_jobs() -> int:
    """Problems run at a time by default: one per core this process may use, at most :data:`MAX_JOBS`."""
    return max(1, min(usable_cores(), MAX_JOBS))


#: problems at a time at most, whatever the cores: each holds its fits in memory (up to about 3 GB)
MAX_JOBS = 4


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bayeszoo.demo", description=__doc__.split("\n")[0])
    demos = list(DEMOS)
    parser.add_argument("problems", nargs="*", help=f"default: all of {', '.join(demos)}")
    parser.add_argument("--out", default="runs/demo")
    parser.add_argument("--draws", type=int, default=None, help="override every problem's draws")
    parser.add_argument("--tune", type=int, default=None, help="override every problem's warm-up")
    parser.add_argument("--chains", type=int, default=None, help="override every problem's chains")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=None,
                        help=f"problems run at a time, each in its own process (default: one per core, at most "
                             f"{MAX_JOBS}; 1 runs them here one after another, with every fit's progress bar)")
    args = parser.parse_args(argv)
    unknown = [key for key in args.problems if key not in demos]
    if unknown:
        parser.error(f"not demo problems: {', '.join(unknown)} (choose from {', '.join(demos)})")
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be a positive integer; got {args.jobs}")
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 30)
    sizes = {k: v for k, v in {"draws": args.draws, "tune": args.tune, "chains": args.chains}.items() if v is not None}
    keys = args.problems or demos
    jobs = min(len(keys), args.jobs or default_jobs())
    start = time.perf_counter()
    done = run_all(keys, args.out, args.seed, sizes, jobs)
    print(f"demo done in {time.perf_counter() - start:.0f} s ({jobs} at a time)")
    for key, result in done.items():
        print(f"{key}: {result['verdict']}" if result["failed"] is None else
              f"{key}: DID NOT RUN ({result['failed'].splitlines()[0]})")
    return 1 if any(result["failed"] for result in done.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
