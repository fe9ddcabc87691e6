"""``make demo``: compare every backend of every family on its built-in demo problem and write a report.

For the RVM this is the noisy sinc problem (Tipping 2001); the reference posterior is a PyMC NUTS run.
The demo's RVM uses alpha_i ~ Gamma(1, 0.01) and beta ~ Gamma(1, 0.001): with the near-improper defaults
(1e-4) the weight/precision funnel is so sharp that NUTS diverges on most transitions (see docs/families/rvm.md), and a
reference it cannot sample would make the comparison meaningless.
GP classification runs on sonar (Nickisch thesis ch. 4), again against a PyMC NUTS reference.
Blind image deconvolution runs on a 32 x 32 cameraman crop (Tzikas PhD ch. 5) against a NumPyro NUTS reference.
Output: one folder per demo under ``<out>`` (``rvm-sinc``, ``gpc-sonar``, ...), each with one NetCDF file per fit,
``table.csv`` and ``report.html``.
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
    # Tzikas PhD ch. 5 on a 32 x 32 cameraman crop (uniform 7 x 7 blur, 30 dB), weights on a 7 x 7 window, a
    # proper PSF prior and a noise prior centred on the true noise level, so all backends target one posterior.
    # The PyMC / NumPyro declarations are slow on images: this demo caps its own draws, tune and chains.
    "bid-cameraman-crop": dict(
        model=lambda: bz.models.BID(sigma_phi2=1.0, psf_size=7, a_alpha=1.0, b_alpha=1e-4, a_beta=100.0,
                                    b_beta=100.0 * _bid_crop().meta["noise_var"], white_level=1.0),
        data=lambda: _bid_crop(),
        reference="numpyro",
        # PyMC NUTS is left out: it needs ~500 leapfrog steps per draw here (minutes), NumPyro is the same sampler
        backends=["vb", "gibbs", "numpyro", "advi"],
        # Gibbs sweeps are cheap but move slowly along the blur / scale direction: keep every 5th
        options={"vb": {"learn_noise_prior": False}, "gibbs": {"thin": 5}, "advi": {"n_iter": 5000}},
        sizes={"draws": 100, "tune": 100, "chains": 2},
    ),
    # Damoulas ch. 3.7: three sources (informative, partially informative, noise) on Neal's 3-class labels,
    # convex combination with a Dirichlet prior; every backend, NUTS as the reference. Small sizes keep the
    # PyMC / NumPyro runs (the quadrature likelihood costs ~N C^2 x 20 per gradient) near a minute each.
    "pmkl-sources": dict(
        model=lambda: bz.models.PMKL(rule="convex"),
        data=lambda: bz.datasets.load("mkl_sources", n=30, n_test=150, seed=0),
        reference="nuts",
        # nutpie is left out: it compiles the quadrature likelihood for ~2 minutes before its first draw
        backends=["nuts", "numpyro", "advi", "fullrank_advi", "gibbs", "vb", "em", "map", "mrvm1", "mrvm2"],
        sizes={"draws": 500, "tune": 500, "chains": 2},
        # full-rank ADVI hits a floating-point error at Adam's default step 0.01 on this model
        options={"gibbs": {"draws": 2000}, "advi": {"n_iter": 10000},
                 "fullrank_advi": {"n_iter": 10000, "learning_rate": 0.002}},
    ),
    # Tzikas PhD ch. 4 on a 12 x 12 sinc image (sigma^2 = 2): NumPyro and ADVI on the dense declaration, the DFT-RVM
    # (type-II point estimate, diagonal approximation) under the same proper prior. PyMC NUTS is left out here
    # (119 s on this image against NumPyro's few seconds; the rvm-sinc entry compares PyMC NUTS already).
    "imagervm-sinc": dict(
        model=lambda: bz.models.ImageRVM(kernels=(2.0,), a=1.0, b=1e-2, c=1.0, d=1e-3),
        data=lambda: bz.datasets.load("sinc2d_image", size=12, seed=0),
        reference="numpyro",
        backends=["numpyro", "advi", "dft"],
        sizes={"draws": 500, "tune": 500, "chains": 2},
    ),
}


def _bid_crop():
    return bz.datasets.load("cameraman", psf="uniform", snr_db=30, seed=0, crop=(40, 90, 32))


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
        sizes = {"draws": args.draws, "tune": args.tune, "chains": args.chains}
        sizes.update({k: min(v, sizes[k]) for k, v in demo.get("sizes", {}).items()})   # a demo may cap them
        cmp = bz.compare(model, data, backends=demo.get("backends") or bz.backends(model),
                         reference=demo["reference"], seed=args.seed, out=out, options=demo.get("options"),
                         **sizes)
        print(cmp.table().drop(columns=["error"]).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        for label, error in cmp.errors.items():
            print(f"!! {label} failed: {error.splitlines()[0]}")
        print(f"report: {os.path.join(out, 'report.html')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
