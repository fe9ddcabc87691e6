"""Build gallery/slm.ipynb (run: .venv/bin/python gallery/make_slm_notebook.py). tests/test_gallery.py executes it
(slow set) and checks that it matches this generator; the numbers it shows are checked in tests/test_slm_*.py and
tests/test_design.py."""
import os

from nbformat.v4 import new_code_cell, new_markdown_cell

import _notebook as notebook

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slm.ipynb")

CELLS = [
new_markdown_cell("""# Sparse linear models: inference and experimental design

Nickisch's thesis (ch. 3, 5, 6): a signal u is measured by linear filters, y = X u + noise, and a sparsity prior puts
super-Gaussian potentials (here Laplace, exp(-tau |s_j|)) on s = B u. We compare the family's hand-written backends
with the catalogue's validated reference posterior on a small problem, reconstruct an image by the double-loop
algorithm, and let Bayesian experimental design choose the next measurements."""),
new_code_cell("""import numpy as np
import matplotlib.pyplot  # noqa: F401  (Jupyter's inline backend then shows the figures below)
import bayeszoo as bz
from bayeszoo.diagnostics.plots import family_picture
from bayeszoo.comparison import Comparison
from bayeszoo.diagnostics import slm_plots

# 32 spikes measured by 24 random unit-norm filters (the catalogue problem slm-spikes)
data = bz.datasets.load("slm_signal", kind="spikes", n=32, m=24, n_test=16, seed=0)
model = bz.models.SLM(potential="laplace", tau=5.0, sigma2=0.005)
print(data)
bz.backends(model)"""),
new_markdown_cell("""## Every backend against the reference posterior

`bz.compare` finds this problem's reference in the catalogue (a long Gibbs run cross-checked by NumPyro's NUTS).
`gibbs` samples the Gaussian scale mixture; `ep` is fractional expectation propagation; `dloop` the double-loop
variational method; `map` the penalised least-squares estimate (a point); `sbl` sparse Bayesian learning."""),
new_code_cell("""cmp = bz.compare(model, data, backends=["gibbs", "ep", "dloop", "map", "sbl"],
                 draws=1000, tune=200, chains=4, seed=0, progress=False)
cmp.table().set_index("backend")[["kind", "seconds", "rhat_max", "mean_err", "sd_err", "ess_ref_per_s",
                                  "seconds_to_target", "l2_error"]].round(3)"""),
new_markdown_cell("""EP's means and standard deviations are within a few hundredths of a posterior sd of the reference;
the double loop's Gaussian is narrower (variational methods underestimate variances); MAP and SBL are points or
near-points whose errors put them last in the ranking. The reconstructions, with +-2 posterior sd:"""),
new_code_cell("""family_picture(cmp)"""),
new_markdown_cell("""## An image: the double loop on operators

A 32 x 32 crop of scikit-image's cameraman measured by 400 random Fourier coefficients; Laplace potentials on the
Daubechies-4 wavelet coefficients and on the finite differences (B = [W; D], as in §5.5), against the posterior
mode of the same prior. The double loop uses only products with X, B and their transposes, with Lanczos estimates of
the marginal variances."""),
new_code_cell("""image = bz.datasets.load("slm_image", image="camera", size=32, m=400, design="fourier", seed=0)
image_model = bz.models.SLM(potential="laplace", tau=0.075, tau_tv=0.5, B="wavelet+tv", sigma2=0.005)
fits = {"dloop": bz.fit(image_model, image, "dloop", seed=0, progress=False, lanczos_k=60),
        "map": bz.fit(image_model, image, "map", seed=0, progress=False)}     # the same prior's mode
zero_filled = image.X.T @ image.y
print("error of zero filling:", np.linalg.norm(zero_filled - image.meta["true_u"]).round(3))
family_picture(Comparison(model=image_model, data=image, fits=fits, order=list(fits)))"""),
new_markdown_cell("""## Sequential Bayesian design

Which filter to measure next? Under the Gaussian approximation N(m, A^-1) of the posterior the information gain of a
measurement x is log(1 + x^T A^-1 x / sigma2), and the best unit-norm filter is A's eigenvector of smallest
eigenvalue (`bz.design`). Starting from 24 random measurements, we add 16 designed ones and 16 random ones."""),
new_code_cell("""truth = np.asarray(data.meta["true_u"])
noise = np.random.default_rng(1)
measure = lambda X: X @ truth + np.sqrt(model.sigma2) * noise.standard_normal(len(X))
design = bz.design.sequential_design(model, data, measure, 16, backend="ep", seed=0, progress=False)

extra = bz.datasets.load("slm_signal", kind="spikes", n=32, m=40, seed=0)   # the same signal, 16 more random rows
random_rows = bz.datasets.Dataset(X=np.vstack([data.X, extra.X[24:]]), y=np.concatenate([data.y, extra.y[24:]]),
                                  name="random", meta=data.meta)
random_fit = bz.fit(model, random_rows, "ep", seed=0, progress=False)
print("||E[u] - u|| after 40 measurements: designed", round(model.score(design.fit, design.data)["l2_error"], 3),
      "| random", round(model.score(random_fit, random_rows)["l2_error"], 3))
slm_plots.design_figure(design)"""),
new_markdown_cell("""The study modules run the thesis's experiments (minutes to hours on a laptop):
`bayeszoo.studies.slm_compressed_sensing` (§5.5, six synthetic signals of n = 512), `slm_natural_images` (Fig. 5.4,
64 x 64 images) and `slm_mri_design` (ch. 6, Cartesian k-space lines). Their results are on the family's page,
`docs/families/slm.md`."""),
]


def build():
    return notebook.build(CELLS)


if __name__ == "__main__":
    notebook.write(build(), PATH)
