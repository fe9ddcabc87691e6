"""Cross-check posteriordb's reference posteriors with our own long NumPyro NUTS runs.

    python benchmarks/posteriordb_crosscheck.py [POSTERIOR ...] [--chains 4] [--draws 1000] [--warmup 1000]

For each posterior (by default every one with a program and a reference), runs NumPyro NUTS on our NumPyro
program, summarises the variables posteriordb's reference holds (deterministics included: the transformed
parameters posteriordb kept), and compares under the catalogue's rules: our run must pass the single-run rules
(R-hat, ESS, MCSE, no divergences) and every mean and sd must agree with posteriordb's within
``agreement_limit`` combined MCSEs (:func:`bayeszoo.catalogue.reference.agreement`).

Chains start uniformly in (-2, 2) on the unconstrained scale, Stan's default (and NumPyro's), except where
:data:`STARTS` says otherwise and why. A run with divergent transitions runs once more, same seed, at target
acceptance 0.99, as the catalogue's reference builder does (``bayeszoo.reference_builder.RETRY_TARGET_ACCEPT``);
both runs are recorded (``attempts``). The results are merged into
``bayeszoo/catalogue/posteriordb/data/crosscheck.json`` (shipped; the suite's page reads it) and the page's table
is rewritten (``docs/suites/posteriordb.md``).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE = os.path.join(os.path.dirname(HERE), "docs", "suites", "posteriordb.md")
sys.path.insert(0, os.path.dirname(HERE))

import arviz as az  # noqa: E402
import jax  # noqa: E402
import numpyro  # noqa: E402
from numpyro.infer import MCMC, NUTS, init_to_uniform  # noqa: E402

from bayeszoo.catalogue import posteriordb as pdb  # noqa: E402
from bayeszoo.catalogue.posteriordb import suite  # noqa: E402
from bayeszoo.catalogue.reference import agreement, check_run, run_diagnostics, summarize  # noqa: E402
from bayeszoo.reference_builder import RETRY_TARGET_ACCEPT  # noqa: E402

TARGET_ACCEPT = 0.95
STAN_INIT_RADIUS = 2.0   # Stan's default starts: uniform(-2, 2) on the unconstrained scale (NumPyro's too)
#: posteriors whose chains start elsewhere than Stan's default, with the radius and the reason (shown in the table)
STARTS = {
    "arma-arma11": (0.5, "Chains started in (-0.5, 0.5) (rstan's init_r = 0.5): from Stan's default (-2, 2) one "
                         "of four chains stuck at phi = theta = -1.06, far from any mode (R-hat 3.05; see Findings)"),
}


def run(posterior: str, chains: int, draws: int, warmup: int, seed: int, target_accept: float,
        init_radius: float = STAN_INIT_RADIUS) -> dict:
    prog, data, ref = pdb.program(posterior), pdb.data(posterior), pdb.reference(posterior)
    model = prog.numpyro(data)
    mcmc = MCMC(NUTS(model, target_accept_prob=target_accept, init_strategy=init_to_uniform(radius=init_radius)),
                num_warmup=warmup, num_samples=draws, num_chains=chains, chain_method="sequential",
                progress_bar=False)
    start = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(seed), extra_fields=("diverging",))
    seconds = time.perf_counter() - start
    samples = mcmc.get_samples(group_by_chain=True)
    missing = sorted(set(ref.moments) - set(samples))
    if missing:
        raise ValueError(f"{posterior}: our program has no variable(s) {missing} of posteriordb's reference; "
                         f"add them as deterministic sites")
    posterior_ds = az.from_dict(posterior={k: np.asarray(samples[k]) for k in ref.moments}).posterior
    ours = summarize(posterior_ds, list(ref.moments))
    divergences = int(np.asarray(mcmc.get_extra_fields(group_by_chain=True)["diverging"]).sum())
    record = {"engine": "numpyro NUTS", "kind": "mcmc", "chains": chains, "draws": draws, "divergences": divergences}
    broken = check_run(ours, record)
    agree = agreement(ref.moments, ours)
    agrees = bool(agree["z_max"] < agree["z_limit"])
    return {"engine": "numpyro NUTS", "chains": chains, "draws": draws, "warmup": warmup, "seed": seed,
            "target_accept": target_accept, "init_radius": init_radius, "divergences": divergences,
            "seconds": round(seconds, 1),
            "diagnostics": run_diagnostics(ours), "rules_broken": broken,
            "agreement": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in agree.items()},
            "verdict": "agrees" if agrees and not broken else ("run breaks the rules" if broken else "disagrees"),
            "numpyro": numpyro.__version__, "date": datetime.date.today().isoformat()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("posteriors", nargs="*")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20260)
    parser.add_argument("--target-accept", type=float, default=TARGET_ACCEPT)
    args = parser.parse_args(argv)
    pdb.programs.load_all()
    names = args.posteriors or [n for n in pdb.names() if pdb.info(n)["program"] and not
                                pdb.info(n)["reference_missing"]]
    for name in names:
        radius, why = STARTS.get(name, (STAN_INIT_RADIUS, None))
        if args.target_accept != TARGET_ACCEPT:   # asked for on the command line: the table says so
            why = ". ".join(filter(None, [why, f"Target acceptance {args.target_accept}"]))
        try:
            result = run(name, args.chains, args.draws, args.warmup, args.seed, args.target_accept, radius)
            if result["divergences"] and args.target_accept < RETRY_TARGET_ACCEPT:
                first = {k: result[k] for k in ("target_accept", "divergences", "seconds", "verdict")}
                print(f"{name}: {result['divergences']} divergences at target acceptance {args.target_accept}; "
                      f"again at {RETRY_TARGET_ACCEPT}", flush=True)
                result = run(name, args.chains, args.draws, args.warmup, args.seed, RETRY_TARGET_ACCEPT, radius)
                result["attempts"] = [first, {k: result[k] for k in first}]
                why = ". ".join(filter(None, [why, f"Target acceptance {RETRY_TARGET_ACCEPT} after "
                                                    f"{first['divergences']} divergent transitions at "
                                                    f"{first['target_accept']}"]))
            if why:
                result["note"] = why
        except Exception as exc:   # one posterior's failure is recorded, the others run
            result = {"verdict": "failed", "error": f"{type(exc).__name__}: {exc}"[:500],
                      "date": datetime.date.today().isoformat()}
        agree = result.get("agreement")
        print(f"{name}: {result['verdict']}" + (f" (z {agree['z_max']:.2f} at {agree['where']}, limit "
                                                 f"{agree['z_limit']:.2f}; {result['seconds']} s)" if agree
                                                 else f" {result.get('error', '')}"), flush=True)
        suite.record_crosscheck(name, result)
    suite.write_page(PAGE)


if __name__ == "__main__":
    main()
