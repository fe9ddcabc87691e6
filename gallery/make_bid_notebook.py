"""Write gallery/bid.ipynb (run: .venv/bin/python gallery/make_bid_notebook.py). The notebook is sized to run in
about a minute: cameraman at 128 x 128 (not the thesis's 256) and a 16 x 16 crop for the sampler comparison.
tests/test_gallery.py executes it (slow set) and checks that it matches this generator; the numbers it shows are
checked in tests/test_gallery_checks.py."""
import os

from nbformat.v4 import new_code_cell, new_markdown_cell

import _notebook as notebook

CELLS = [
    ("md", """# Blind image deconvolution with Student-t priors (Tzikas PhD thesis, ch. 5)

The model g = h * f + n (circular convolution), h = phi * w (one Gaussian kernel per pixel), with Student-t (St)
or Gaussian (G) priors on the PSF weights w, the noise n and the image differences, in the thesis's order
(`variant="StStSt"` ... `"GGG"`). `vb` is the thesis's variational algorithm (FFT / PCG means, diagonal and
circulant covariances); `gibbs` the conjugate Gibbs sampler; `nuts` / `numpyro` / `advi` run the PyMC / NumPyro
declarations on crops. To keep this notebook near a minute it uses cameraman at **128 x 128** (the thesis uses
256 x 256; see BENCHMARKS.md for the full-size numbers) and a 16 x 16 crop for the samplers."""),
    ("code", """import numpy as np
import pandas as pd
import bayeszoo as bz
from bayeszoo.diagnostics.bid_plots import bid_panels

PSFS = ("gaussian", "uniform", "motion")
problems = {psf: bz.datasets.load("cameraman", psf=psf, snr_db=40, seed=0, size=128) for psf in PSFS}
for psf, d in problems.items():
    g, f = d.y.reshape(d.meta["shape"]), d.meta["true_image"]
    snr = 10 * np.log10(np.sum(f**2) / (f.size * d.meta["noise_var"]))
    print(psf, d.meta["shape"], f"SNR {snr:.1f} dB", "true PSF", d.meta["true_psf"].shape)"""),
    ("md", """## The eight variants on the Gaussian blur, StStSt and GStSt on all three (40 dB)

The thesis's hyperparameters and initialisation (h_in Gaussian of variance 3; sigma_phi^2 = 2 for the Gaussian
and uniform blurs, 1 for motion), the weights on the default 31 x 31 window, the noise hyperparameters learned,
at most 15 VB iterations each (for time; the stopping rule may end a run sooner). ISNRs are those of the
posterior mean (50 draws from q). ISNR_h is measured against h_in (§5.11)."""),
    ("code", """rows, ststst = [], {}
for psf, d in problems.items():
    for variant in bz.models.bid.VARIANTS if psf == "gaussian" else ("StStSt", "GStSt"):
        model = bz.models.BID(variant=variant, sigma_phi2=1.0 if psf == "motion" else 2.0)
        fit = bz.fit(model, d, backend="vb", draws=50, chains=1, progress=False, max_iter=15)
        if variant == "StStSt":
            ststst[psf] = (model, fit)
        noise_sd = np.sqrt(fit.info["b_beta"] / fit.info["a_beta"])
        rows.append({"psf": psf, "variant": variant, **model.score(fit, d),
                     "noise_sd / truth": noise_sd / np.sqrt(d.meta["noise_var"])})
table = pd.DataFrame(rows)
isnr = table.pivot(index="variant", columns="psf", values=["isnr_f", "isnr_h"]).round(2)
isnr"""),
    ("code", """# the noise level is learned (q(beta) and its hyperparameters at the bound's joint maximum), where the
# thesis's prior alone would put the noise sd at 1 / sqrt(1e3) = 0.032, 5.5x the truth (after 15 iterations the
# motion-blur runs are still settling)
print(table.pivot(index="variant", columns="psf", values="noise_sd / truth").round(3))
# the Gaussian blur is restored (uniform and motion are not: see BENCHMARKS.md)
print(table[table.variant == "StStSt"].set_index("psf")[["isnr_f", "isnr_h"]].round(2))"""),
    ("md", """## StStSt: degraded, true and restored, image and PSF"""),
    ("code", """import matplotlib.pyplot as plt
fig, axes = plt.subplots(2, 9, figsize=(18, 4.4))
for k, psf in enumerate(PSFS):
    d = problems[psf]
    model, fit = ststst[psf]
    for j, (title, image, h) in enumerate(bid_panels(model, d, {"vb": fit})):
        axes[0, 3 * k + j].imshow(image, cmap="gray", vmin=0, vmax=1)
        axes[0, 3 * k + j].set_title(f"{psf}: {title}", fontsize=6)
        axes[1, 3 * k + j].imshow(h)
for ax in axes.ravel():
    ax.set_axis_off()
fig.tight_layout()"""),
    ("md", """## VB, Gibbs and NUTS on a crop

A 16 x 16 crop of cameraman (uniform blur, 30 dB), weights on a 7 x 7 window (`psf_size=7`), a proper PSF prior
(a_alpha = 1, b_alpha = 1e-4) and a noise prior centred on the true noise level, so that every backend targets
the same posterior; `vb` keeps the noise hyperparameters fixed (`learn_noise_prior=False`). Short runs (one
NumPyro chain) to stay within the notebook's time; `make demo` runs the 32 x 32 version with more draws."""),
    ("code", """crop = bz.datasets.load("cameraman", psf="uniform", snr_db=30, seed=0, crop=(48, 96, 16))
model = bz.models.BID(sigma_phi2=1.0, psf_size=7, a_alpha=1.0, b_alpha=1e-4, a_beta=100.0,
                      b_beta=100.0 * crop.meta["noise_var"], white_level=1.0)
cmp = bz.compare(model, crop, backends=["gibbs", "numpyro", "vb"], reference="gibbs", draws=80, tune=80,
                 chains=1, seed=0, progress=False, options={"vb": {"learn_noise_prior": False}})
tab = cmp.table()
tab[["backend", "kind", "seconds", "ess_bulk_min", "mean_err", "sd_err", "isnr_f", "isnr_h"]].round(3)"""),
    ("code", """ref = cmp.fits["gibbs"].posterior["image"]
ref_mean, ref_sd = ref.mean(("chain", "draw")).values, ref.std(("chain", "draw")).values
for name in ("numpyro", "vb"):
    mean = cmp.fits[name].posterior["image"].mean(("chain", "draw")).values
    z = np.abs(mean - ref_mean) / ref_sd
    print(f"{name}: |mean - gibbs mean| / gibbs sd: median {np.median(z):.2f}, 95% {np.quantile(z, 0.95):.2f}")"""),
]


PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bid.ipynb")


def build():
    return notebook.build(new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in CELLS)


if __name__ == "__main__":
    notebook.write(build(), PATH)
