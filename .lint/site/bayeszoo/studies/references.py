"""Build the reference catalogue: ``python -m bayeszoo.studies.references [keys...]`` (``make references``).

For each problem of :mod:`bayeszoo.catalogue.problems`, its two engines run long (first seed 1, then seed 2), each
run is summarised and checked against the rules of :mod:`bayeszoo.catalogue.reference`, and the two are checked
against each other. A problem that passes gets ``bayeszoo/catalogue/data/<key>.nc`` (the first engine's moments and
thinned draws, the second's moments, the provenance); one that fails gets none (an older file is removed) and
the numbers are printed, for its family page.
"""
from __future__ import annotations

import argparse
import os
import time

import bayeszoo as bz
from bayeszoo import catalogue
from bayeszoo.catalogue import Engine, Reference


def run_engine(engine: Engine, model, data, seed: int, progress: bool):
    """One long run of ``engine`` on the problem, in the problem's canonical variables."""
    if engine.via is None:
        return bz.fit(model, data, engine.backend, draws=engine.draws, tune=engine.tune, chains=engine.chains,
                      seed=seed, progress=progress, **engine.options)
    other_model, other_data = engine.via.problem(model, data)
    fit = bz.fit(other_model, other_data, engine.backend, draws=engine.draws, tune=engine.tune,
                 chains=engine.chains, seed=seed, progress=progress, **engine.options)
    return engine.via.back(fit, model, data)


def build(key: str, *, progress: bool = False, write: bool = True) -> Reference:
    """Run both engines of problem ``key``, check them and (``write``) store or remove its catalogue file."""
    prob = catalogue.problem(key)
    model, data = prob.model(), prob.data()
    fits = []
    for seed, engine in enumerate(prob.engines, start=1):
        start = time.perf_counter()
        fits.append(run_engine(engine, model, data, seed, progress))
        print(f"  {engine.label}: {engine.chains} x {engine.draws} draws in {time.perf_counter() - start:.0f} s",
              flush=True)
    ref = Reference.from_fit(fits[0], list(model.var_dims(data)), name=f"catalogue: {key}", crosscheck=fits[1],
                             labels=tuple(e.label for e in prob.engines),
                             provenance={"source": "catalogue", "key": key, "description": prob.description,
                                         "model": model.spec(), "data": data.fingerprint(),
                                         "data_name": data.name})
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
    parser = argparse.ArgumentParser(prog="python -m bayeszoo.studies.references", description=__doc__.split("\n")[0])
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
