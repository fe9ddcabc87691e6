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

Output: one folder per problem under ``<out>`` (``rvm-sinc``, ``gpc-sonar``, ...), each with one NetCDF file per
fit, ``table.csv`` and ``report.html``.
"""
from __future__ import annotations

import argparse
import os
import time

import pandas as pd

import bayeszoo as bz
from bayeszoo import catalogue


#: the demo problems by key: their model and data factories and what the demo runs on them
DEMOS = {key: {"model": prob.model, "data": prob.data, "backends": list(prob.demo.backends),
               "sizes": dict(prob.demo.sizes), "options": dict(prob.demo.options)}
         for key, prob in catalogue.PROBLEMS.items() if prob.demo is not None}


def run(key: str, out: str, seed: int = 0, sizes: dict | None = None):
    """Compare the demo backends of problem ``key`` against its catalogue reference; the Comparison."""
    demo = DEMOS[key]
    model, data = demo["model"](), demo["data"]()
    reference = catalogue.lookup(model, data)
    if reference is None:
        print(f"!! the catalogue has no reference for {key} (docs/families/{model.family}.md): no errors are "
              f"measured")
    return bz.compare(model, data, backends=demo["backends"], reference=reference, seed=seed,
                      out=os.path.join(out, key), options=demo["options"], **{**demo["sizes"], **(sizes or {})})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bayeszoo.demo", description=__doc__.split("\n")[0])
    demos = list(DEMOS)
    parser.add_argument("problems", nargs="*", help=f"default: all of {', '.join(demos)}")
    parser.add_argument("--out", default="runs/demo")
    parser.add_argument("--draws", type=int, default=None, help="override every problem's draws")
    parser.add_argument("--tune", type=int, default=None, help="override every problem's warm-up")
    parser.add_argument("--chains", type=int, default=None, help="override every problem's chains")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    unknown = [key for key in args.problems if key not in demos]
    if unknown:
        parser.error(f"not demo problems: {', '.join(unknown)} (choose from {', '.join(demos)})")
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 30)
    sizes = {k: v for k, v in {"draws": args.draws, "tune": args.tune, "chains": args.chains}.items() if v is not None}
    start = time.perf_counter()
    verdicts = {}
    failed = {}
    for key in args.problems or demos:
        print(f"== {key}: {catalogue.problem(key).description}", flush=True)
        try:
            cmp = run(key, args.out, args.seed, sizes)
        except Exception as exc:   # one problem that cannot run does not cost the others their reports
            failed[key] = f"{type(exc).__name__}: {exc}"
            print(f"!! {key} did not run: {failed[key]}", flush=True)
            continue
        if cmp.reference is not None:
            print(f"reference: {cmp.reference.describe()}")
        print(cmp.table().drop(columns=["error"]).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        for label, error in cmp.errors.items():
            print(f"!! {label} failed: {error.splitlines()[0]}")
        verdicts[key] = cmp.verdict()
        print(f"verdict: {verdicts[key]}")
        print(f"report: {os.path.join(args.out, key, 'report.html')}", flush=True)
    print(f"demo done in {time.perf_counter() - start:.0f} s")
    for key, text in verdicts.items():
        print(f"{key}: {text}")
    for key, why in failed.items():
        print(f"{key}: DID NOT RUN ({why.splitlines()[0]})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
