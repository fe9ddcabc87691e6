"""Writes gallery/no_convergence.ipynb (run: .venv/bin/python gallery/make_no_convergence_notebook.py): the blind
deconvolution of the catalogue's 32 x 32 cameraman crop (``bid-cameraman-crop``), where no sampler converges, read
through ArviZ's diagnostics, and the same crop with the PSF known, where they do. Sized to run in a few minutes:
the chains are far shorter than the catalogue build's (docs/families/bid.md records those). tests/test_gallery.py
executes it (slow set) and checks that it matches this generator; tests/inference/bid/test_bid_known_psf.py checks
the claims it makes on these runs."""
import os

from nbformat.v4 import new_code_cell, new_markdown_cell

import _notebook as notebook

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "no_convergence.ipynb")

CELLS = [
    ("md", """# When no sampler converges

A reference posterior is only as good as the evidence that the chains behind it have converged. This notebook runs
two independent samplers on a problem where neither does, the **blind** deconvolution of a 32 x 32 crop of
cameraman (uniform 7 x 7 blur, 30 dB; Tzikas's Student-t model, the catalogue's `bid-cameraman-crop`), and reads the
evidence a user should learn to recognise:

* **R-hat** far above 1.01: the chains have not mixed with each other;
* a **bulk / tail ESS** of a handful of draws: thousands of draws carry the information of a few;
* **two engines that disagree** by many Monte-Carlo standard errors;
* **trace plots** in which each chain keeps to its own level, and **rank plots** far from uniform.

The chains here are short (a few minutes in all). The catalogue's long runs (Gibbs 4 chains x 10 500 sweeps, NumPyro
NUTS 4 x 600 iterations) end the same way, at R-hat 1.9 and a bulk ESS of 6 (docs/families/bid.md); so the
catalogue has no reference for this problem, and the demo compares the samplers on the same crop with the PSF
known (last section), where they converge."""),
    ("code", """import numpy as np
import arviz as az
import matplotlib.pyplot as plt
import bayeszoo as bz
from bayeszoo import catalogue

problem = catalogue.problem("bid-cameraman-crop")
model, data = problem.model(), problem.data()
print(problem.description)
print("catalogue reference:", catalogue.lookup(model, data))
model"""),
    ("md", """## Two engines

The conjugate Gibbs sampler (`gibbs`: Gaussian blocks for the image and the PSF weights, Gamma precisions, an exact
move along the scale orbit) and NumPyro's NUTS on the model's declaration (the precisions integrated out). Both start
from the thesis's initial point (the degraded image and a Gaussian PSF of variance 3) with a small jitter per
chain."""),
    ("code", """gibbs = bz.fit(model, data, "gibbs", draws=200, tune=200, chains=4, seed=1, thin=5, progress=False)
nuts = bz.fit(model, data, "numpyro", draws=100, tune=100, chains=2, seed=2, progress=False)
for fit in (gibbs, nuts):
    print(f"{fit.backend}: {fit.n_chains} chains x {fit.n_draws} draws in {fit.seconds:.0f} s")"""),
    ("md", """## R-hat and ESS

`az.summary` over the PSF's 13 x 13 window (the canonical `psf`, normalised to sum 1). Sorted by R-hat, the worst
components come first: R-hat well above 1.01 and a bulk ESS of a few draws out of the 800 kept."""),
    ("code", """summary = az.summary(gibbs.idata, var_names=["psf"], kind="diagnostics")
summary.sort_values("r_hat", ascending=False).head(8)"""),
    ("code", """def diagnostics(fit, names=("image", "psf")):
    rhat = az.rhat(fit.idata, var_names=list(names))
    ess = az.ess(fit.idata, var_names=list(names))
    out = {}
    for name in names:
        r, e = rhat[name].values.ravel(), ess[name].values.ravel()
        out[name] = (f"R-hat max {r.max():.3f} ({np.mean(r >= 1.01):.0%} of the {r.size} components at 1.01 or "
                     f"more), bulk ESS min {e.min():.0f}, median {np.median(e):.0f}")
    return out

for fit in (gibbs, nuts):
    for name, line in diagnostics(fit).items():
        print(f"{fit.backend:8s} {name:6s} {line}")"""),
    ("md", """## Trace and rank plots

The PSF component with the worst R-hat in the Gibbs run, an entry near the edge of the blur, where the width of
the PSF trades against the sharpness of the image. In a converged run the traces of the chains overlap like one
band of noise and each chain's ranks (among all the draws pooled) are uniform. Here each chain keeps to its own
level for hundreds of draws, and the rank histograms pile up at one end or the other."""),
    ("code", """rhat_psf = az.rhat(gibbs.idata, var_names=["psf"])["psf"].stack(k=("prow", "pcol"))
worst = rhat_psf.isel(k=int(np.argmax(rhat_psf.values)))
where = {"prow": int(worst.prow), "pcol": int(worst.pcol)}
print(f"worst component: psf at offset {tuple(where.values())}, R-hat {float(worst):.2f}")
az.plot_trace(gibbs.idata, var_names=["psf"], coords=where, compact=False, figsize=(10, 2.6))
plt.gcf().suptitle(f"gibbs: psf{list(where.values())}", y=1.02);"""),
    ("code", """fig, axes = plt.subplots(1, 2, figsize=(10, 3))
az.plot_rank(gibbs.idata, var_names=["psf"], coords=where, ax=axes[0])
az.plot_rank(nuts.idata, var_names=["psf"], coords=where, ax=axes[1])
axes[0].set_title(f"gibbs: ranks of psf{list(where.values())}")
axes[1].set_title(f"numpyro: ranks of psf{list(where.values())}");"""),
    ("md", """## The two engines disagree

The catalogue's rules (`bayeszoo.catalogue.Reference`) judge a candidate reference: every component's R-hat below
1.01, bulk and tail ESS of at least 400, each mean's Monte-Carlo error below 5 % of its sd, no divergences, and a
second engine whose means and sds agree within their combined Monte-Carlo errors. Applied to these two runs, every
rule breaks. (With ESS this small the Monte-Carlo errors themselves are unreliable, which is why the ESS rule comes
first.)"""),
    ("code", """candidate = catalogue.Reference.from_fit(gibbs, ["image", "psf"], crosscheck=nuts,
                                         provenance={"source": "catalogue"})
for problem_found in candidate.problems:
    print("-", problem_found)"""),
    ("md", """The same component in both engines, every chain: the levels that the chains of one engine keep to are not
the levels of the other's, and the truth (the 7 x 7 box, normalised) need not lie near any of them."""),
    ("code", """fig, ax = plt.subplots(figsize=(9, 3))
for fit, style in ((gibbs, "-"), (nuts, "--")):
    series = fit.posterior["psf"].sel(**where).values
    for chain in range(fit.n_chains):
        ax.plot(np.linspace(0, 1, fit.n_draws), series[chain], style, lw=0.8,
                label=f"{fit.backend}, chain {chain}")
box = data.meta["true_psf"] / data.meta["true_psf"].sum()      # the 7 x 7 box, centred on offset (0, 0)
half = box.shape[0] // 2
inside = max(abs(where["prow"]), abs(where["pcol"])) <= half
ax.axhline(box[where["prow"] + half, where["pcol"] + half] if inside else 0.0, color="k", lw=1.5,
           label="true value")
ax.set_xlabel("fraction of the kept draws")
ax.set_ylabel(f"psf{list(where.values())}")
ax.legend(ncol=3, fontsize=7);"""),
    ("md", """## What `vb_sparse` does on it

`vb_sparse` (after Levin et al. 2011 and Babacan et al. 2012) does not try to sample this posterior: it estimates the
PSF as a point, non-negative and summing to one, coarse to fine, and then restores the image with it. Its output is
an estimate, not a posterior (its draws are copies of one image), so it is judged against the truth: `isnr_f` is
the improvement over the degraded image in dB, `isnr_h` the PSF's against the initial Gaussian guess. It answers in
about a second; on an image this small its PSF estimate is rough (the method is meant for whole photographs,
docs/families/bid.md), and the samplers' unconverged means, which average over the chains' different levels, are
not a posterior either: none of the three comes with an error bar one can trust here."""),
    ("code", """sparse = bz.fit(model, data, "vb_sparse", progress=False)
scores = {fit.backend: model.score(fit, data) for fit in (gibbs, nuts, sparse)}
print({name: {k: round(v, 2) for k, v in s.items() if k in ("isnr_f", "isnr_h")} for name, s in scores.items()})
print(f"vb_sparse: {sparse.seconds:.1f} s")"""),
    ("code", """from bayeszoo.diagnostics.bid_plots import bid_panels

panels = bid_panels(model, data, {"gibbs (mean)": gibbs, "numpyro (mean)": nuts, "vb_sparse": sparse})
fig, axes = plt.subplots(2, len(panels), figsize=(2.6 * len(panels), 5.2))
for k, (title, image, psf) in enumerate(panels):
    axes[0, k].imshow(image, cmap="gray", vmin=0, vmax=1)
    axes[0, k].set_title(title, fontsize=7)
    axes[1, k].imshow(psf)
for ax in axes.ravel():
    ax.set_axis_off()
fig.tight_layout()"""),
    ("md", """## The same crop with the PSF known

Given the PSF, the posterior of the image alone is reachable. The catalogue's `bid-cameraman-crop-known-psf` (the
same image, model and priors, `psf="known"`) was built by the rules above from long Gibbs and NumPyro runs, and it
is the BID problem that `make demo` shows. The same Gibbs sampler with the same number of sweeps as the blind run
(4 chains x 1200) converges there:"""),
    ("code", """known = catalogue.problem("bid-cameraman-crop-known-psf")
known_model, known_data = known.model(), known.data()
print(catalogue.load(known.key).describe())
known_gibbs = bz.fit(known_model, known_data, "gibbs", draws=1000, tune=200, chains=4, seed=1, progress=False)
print("gibbs, PSF known:", diagnostics(known_gibbs, ("image",))["image"])"""),
    ("code", """rhat_image = az.rhat(known_gibbs.idata)["image"].stack(k=("row", "col"))
worst_pixel = rhat_image.isel(k=int(np.argmax(rhat_image.values)))
pixel = {"row": int(worst_pixel.row), "col": int(worst_pixel.col)}
az.plot_rank(known_gibbs.idata, var_names=["image"], coords=pixel, figsize=(5, 3))
plt.gca().set_title(f"PSF known: ranks of image{list(pixel.values())}, the worst R-hat");"""),
    ("md", """## What to take away

* Read R-hat and ESS over **every** component, not a few: here the image's mean looks plausible while the PSF
  never mixed.
* Two engines that each look stuck and disagree with each other are not two estimates to average: neither is a
  posterior.
* Longer runs do not rescue this problem: the catalogue's runs, 9 times as many Gibbs sweeps and 3 times as many
  NUTS iterations per chain, ended at R-hat 1.9 and 1.65.
  What helps is a problem the samplers can reach: here, the PSF given (above), a smaller model, or the question
  changed from "the posterior" to "a good estimate", which `vb_sparse` and the thesis's `vb` answer and which is
  judged against the truth, not against a reference."""),
]


def build():
    return notebook.build(new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in CELLS)


if __name__ == "__main__":
    notebook.write(build(), PATH)
