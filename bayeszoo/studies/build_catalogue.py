"""Build the reference catalogue: ``python -m bayeszoo.studies.build_catalogue [keys...]`` (``make references``).

For each problem of :mod:`bayeszoo.catalogue.problems`, :func:`bayeszoo.reference_builder.build_reference` (the function
behind ``bz.catalogue.build_reference``) runs its two engines long (first seed 1, then seed 2), summarises each run,
checks it against the rules of :mod:`bayeszoo.catalogue.reference` and the two against each other. A problem that
passes gets ``bayeszoo/catalogue/data/<key>.nc`` (the first engine's moments and thinned draws, the second's
moments, the provenance); one that fails gets none (an older file is removed) and the numbers are printed, for its
family page.
"""
from __future__ import annotations

import argparse
import os
import time

from bayeszoo import catalogue
from bayeszoo.catalogue.reference import Reference, UntrustedReference
from bayeszoo.reference_builder import build_reference


def build(key: str, *, progress: bool = False, write: bool = True) -> Reference:
    """Run both engines of problem ``key``, check them and (``write``) store or remove its catalogue file; the
    reference is returned whether or not it keeps the rules (``ref.trusted``, ``ref.problems``)."""
    prob = catalogue.problem(key)
    model, data = prob.model(), prob.data()
    try:
        ref = build_reference(model, data, prob.engines, seed=1, progress=progress, name=f"catalogue: {key}",
                              provenance={"source": "catalogue", "key": key, "description": prob.description,
                                          "model": model.spec(), "data": data.fingerprint()})
    except UntrustedReference as exc:   # no file then; the numbers go to the family page
        ref = exc.reference
    for engine, part in zip(prob.engines, (ref.provenance, ref.provenance.get("crosscheck", {}))):
        print(f"  {engine.label}: {engine.chains} x {engine.draws} draws in {part['run']['seconds']:.0f} s", flush=True)
    if write:
        path = catalogue.path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if ref.trusted:
            ref.save(path)
        elif os.path.exists(path):
            os.remove(path)
    return ref


def report(ref: Reference) -> str:
    """The numbers of one build, as the family pages quote them."""
    lines = [ref.describe()]
    for part in (ref.provenance, ref.provenance.get("crosscheck", {})):
        run, diag = part.get("run", {}), part.get("diagnostics", {})
        lines.append(f"  {run.get('engine')}: {run.get('chains')} x {run.get('draws')} draws, seed {run.get('seed')}, "
                     f"{run.get('seconds')} s; R-hat max {diag.get('rhat_max')}, bulk ESS min "
                     f"{diag.get('ess_bulk_min')}, tail ESS min {diag.get('ess_tail_min')}, max MCSE / sd "
                     f"{diag.get('mcse_over_sd_max')}, divergences {run.get('divergences')}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bayeszoo.studies.build_catalogue",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("keys", nargs="*", help=f"problems to build (default: all of {', '.join(catalogue.keys())})")
    parser.add_argument("--dry-run", action="store_true", help="build and print, but leave the catalogue's files")
    parser.add_argument("--progress", action="store_true", help="show the samplers' progress bars")
    args = parser.parse_args(argv)
    failed = []
    for key in args.keys or catalogue.keys():
        print(f"== {key}: {catalogue.problem(key).description}", flush=True)
        start = time.perf_counter()
        ref = build(key, progress=args.progress, write=not args.dry_run)
        print(report(ref), flush=True)
        where = catalogue.path(key)
        if ref.trusted and not args.dry_run:
            print(f"  wrote {where} ({os.path.getsize(where) / 1e6:.2f} MB)", flush=True)
        elif not ref.trusted:
            failed.append(key)
            print(f"  no reference for {key}: {len(ref.problems)} rule(s) broken", flush=True)
        print(f"  {time.perf_counter() - start:.0f} s in all", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
