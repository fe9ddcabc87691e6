"""Writes gallery/gpc.ipynb (run: .venv/bin/python gallery/make_gpc_notebook.py). tests/test_gallery.py executes it
(slow set) and checks that it matches this generator; the numbers it shows are checked in
tests/test_gallery_checks.py and tests/test_gpc_*.py."""
import os

from nbformat.v4 import new_code_cell, new_markdown_cell

import _notebook as notebook

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpc.ipynb")

CELLS = [
new_markdown_cell("""# GP classification on sonar: every approximation against MCMC

Sonar (mines vs rocks; 108 training and 100 test points, 60 features) with the cumulative Gaussian (probit) likelihood and the squared-exponential covariance, as in Nickisch's thesis (ch. 4, Fig. 4.11). We fit the Gaussian approximations — Laplace (`laplace`), expectation propagation (`ep`), direct KL minimisation (`kl`), the individual-potential variational bounds (`vb`), factorial variational (`fv`), label regression (`lr`) — and compare them with PyMC's NUTS and the Albert–Chib Gibbs sampler. Every fit is an ArviZ `InferenceData` with the latent `f` over `obs`."""),
new_code_cell("""import numpy as np
import bayeszoo as bz
from bayeszoo.diagnostics.gpc_plots import grid_contours
from bayeszoo.studies.gpc_grid import grid_study, best_point
from bayeszoo.inference.gpc.type2ml import optimize_hyperparameters

data = bz.datasets.load("sonar")
model = bz.models.GPC(likelihood="probit", kernel="se", log_lengthscale=2.0, log_amplitude=1.0)
print(data)
bz.backends(model)"""),
new_markdown_cell("## One comparison: MCMC reference, Gibbs, and the six Gaussian approximations"),
new_code_cell("""methods = ["laplace", "ep", "kl", "vb", "fv", "lr"]
cmp = bz.compare(model, data, backends=["nuts", "gibbs"] + methods, reference="nuts",
                 draws=500, tune=500, chains=4, seed=0, progress=False)
table = cmp.table().set_index("backend")
table[["kind", "seconds", "ess_bulk_min", "rhat_max", "mean_err", "sd_err", "error_rate", "info_bits",
       "log_evidence", "jensen_bound"]].round(3)"""),
new_markdown_cell("""The samplers agree (R-hat below 1.01 over their chains). Among the approximations EP and KL match the MCMC marginal means and standard deviations best; Laplace and VB put the means too close to zero and shrink the variances — the thesis's finding. The Jensen bound (4.13) is a lower bound on the log evidence for every method; EP's own evidence approximation is the largest."""),
new_code_cell("""# predictive probabilities of EP against NUTS at the test inputs
p_nuts = model.predict(cmp.fits["nuts"], data.X_test)
p_ep = model.predict(cmp.fits["ep"], data.X_test)
print("max |P_EP - P_NUTS| over the test set:", np.abs(p_ep - p_nuts).max().round(4))"""),
new_markdown_cell("## The thesis's marginals figure: each method against the MCMC reference"),
new_code_cell("""cmp.plot("family")"""),
new_markdown_cell("""## Evidence and information over the hyperparameters (Fig. 4.11)

A coarse 6 x 6 grid over (ln ell, ln sf) in [1, 5] x [0, 5]; the thesis uses 16 x 16 (`grid_study`'s default). Each panel has the same contour levels down its column; + marks the best grid point."""),
new_code_cell("""grid = grid_study(model, data, methods=("laplace", "ep", "kl", "vb"),
                  log_lengthscales=np.linspace(1, 5, 6), log_amplitudes=np.linspace(0, 5, 6), progress=False)
grid_contours(grid)"""),
new_code_cell("""# the Jensen bound never exceeds EP's evidence (a close estimate of the true log evidence) anywhere on the grid
gap = grid["log_evidence"].sel(backend="ep") - grid["jensen_bound"]
print("min over grid and methods of log Z_EP - Jensen bound:", float(gap.min()))
print("best evidence:", best_point(grid, "log_evidence"))
print("best information:", best_point(grid, "info_bits"))"""),
new_markdown_cell("## Type-II maximum likelihood with EP's analytic evidence gradient"),
new_code_cell("""ep_grid_best = best_point(grid, "log_evidence", "ep")["ep"]
start = [ep_grid_best["log_lengthscale"], ep_grid_best["log_amplitude"]]   # L-BFGS from the best grid point
opt, res = optimize_hyperparameters(model, data, "ep", x0=start, return_result=True)
print("EP evidence optimum:", opt.hyp, "log Z =", -res.fun, "; best grid point:", ep_grid_best)
fit = bz.fit(opt, data, backend="ep", seed=0, progress=False)
opt.score(fit, data)"""),
]


def build():
    return notebook.build(CELLS)


if __name__ == "__main__":
    notebook.write(build(), PATH)
