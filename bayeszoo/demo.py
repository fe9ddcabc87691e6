"""``make demo``: compare every backend of every family on its built-in demo problem and write a report.

For the RVM this is the noisy sinc problem (Tipping 2001); the reference posterior is a PyMC NUTS run.
The demo's RVM uses alpha_i ~ Gamma(1, 0.01) and beta ~ Gamma(1, 0.001): with the near-improper defaults
(1e-4) the weight/precision funnel is so sharp that NUTS diverges on most transitions (see README), and a
reference it cannot sample would make the comparison meaningless.
GP classification runs on sonar (Nickisch thesis ch. 4), again against a PyMC NUTS reference.
Output: ``<out>/rvm-sinc/`` and ``<out>/gpc-sonar/``, each with one NetCDF file per fit, ``table.csv`` and
``report.html``.
"""
from __future__ import annotations

import argparse
import os

import pandas as pd

import bayeszoo as bz

DEMOS = {
    "rvm-sinc": dict(
        model=lambda: bz.models.RVM(task="regression", kernel="gauss", width=3.0, a=1.0, b=1e-2, c=1.0, d=1e-3),
        data=lambda: bz.datasets.load("sinc", n=60, seed=0),
        reference="nuts",
    ),
    # Nickisch thesis ch. 4: sonar (108 / 100), probit likelihood, squared-exponential covariance.
    "gpc-sonar": dict(
        model=lambda: bz.models.GPC(likelihood="probit", kernel="se", log_lengthscale=2.0, log_amplitude=1.0),
        data=lambda: bz.datasets.load("sonar"),
        reference="nuts",
        # AIS defaults to chains x draws annealing runs (4000, ~3 min here); 200 runs give log Z to about +-0.6
        options={"ais": {"n_runs": 200}},
    ),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bayeszoo.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="runs/demo")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 30)
    for name, demo in DEMOS.items():
        model, data = demo["model"](), demo["data"]()
        out = os.path.join(args.out, name)
        print(f"== {name}: {model.spec()} on {data}")
        cmp = bz.compare(model, data, backends=bz.backends(model), reference=demo["reference"],
                         draws=args.draws, tune=args.tune, chains=args.chains, seed=args.seed, out=out,
                         options=demo.get("options"))
        print(cmp.table().drop(columns=["error"]).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        for label, error in cmp.errors.items():
            print(f"!! {label} failed: {error.splitlines()[0]}")
        print(f"report: {os.path.join(out, 'report.html')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
