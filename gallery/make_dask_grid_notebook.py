"""Writes gallery/dask_grid.ipynb with its outputs (run: .venv/bin/python gallery/make_dask_grid_notebook.py).
tests/test_gallery.py checks that it matches this generator and executes it (slow set); a grid through a Dask
executor is tested in tests/test_grid.py."""
import os

from nbformat.v4 import new_code_cell, new_markdown_cell

import _notebook as notebook

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dask_grid.ipynb")

CELLS = [
new_markdown_cell("""# A grid on a Dask cluster

`bz.compare` runs one fit per backend. By default the fits run here, one after another; given any
`concurrent.futures.Executor` it submits every fit to it instead. A Dask client provides one
(`client.get_executor()`), so the same call runs the grid on a cluster: here a `LocalCluster` of two worker
processes on this machine, the same as a cluster of many machines from the notebook's point of view."""),
new_code_cell("""import logging

import numpy as np
from distributed import Client, LocalCluster

import bayeszoo as bz"""),
new_markdown_cell("""## The cluster

Two worker processes with one thread each. Every worker imports bayeszoo itself when its first fit arrives; the
model and the dataset are pickled and sent with each fit. `OPENBLAS_NUM_THREADS=1` in the workers' environment
keeps each of them on one core, and the dashboard is left off."""),
new_code_cell("""cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                       env={"OPENBLAS_NUM_THREADS": "1"}, silence_logs=logging.ERROR)
client = Client(cluster)
print(client)"""),
new_markdown_cell("""## The grid

The RVM on 60 noisy sinc points, with the priors of the reference catalogue's problem `rvm-sinc`: `bz.compare`
recognises the model and data and measures every backend against the catalogue's validated reference posterior. The
grid has one sampler (conjugate Gibbs) and three approximations (variational Bayes, EM and the fast type-II
algorithm). `out=` saves each fit as soon as it comes back from a worker."""),
new_code_cell("""data = bz.datasets.load("sinc", n=60, seed=0)
model = bz.models.RVM(task="regression", kernel="gauss", width=3.0, a=5.0, b=5e-2, c=1.0, d=1e-3)
backends = ["gibbs", "vb", "em", "fast"]

cmp = bz.compare(model, data, backends=backends, draws=500, tune=500, chains=2, seed=0, progress=False,
                 executor=client.get_executor(), out="runs/dask-grid")
print("reference:", cmp.reference.name if cmp.reference else None)"""),
new_markdown_cell("""## The table

One row per backend: the wall time of the fit on its worker, the effective sample size and R-hat of the sampler
(R-hat does not apply to the approximations' independent draws), the largest errors of the posterior means and
standard deviations in units of the reference's standard deviations, and the mean log predictive density on
the test set. `ess_ref` is how many
exact posterior draws a fit's error is worth: the approximations are fast but biased, the sampler is slower and
keeps improving with more draws."""),
new_code_cell("""table = cmp.table().set_index("backend")
table[["kind", "seconds", "ess_bulk_min", "rhat_max", "mean_err", "sd_err", "ess_ref", "log_pred"]].round(3)"""),
new_markdown_cell("""In a notebook the comparison shows itself as the report does: the reference banner, the flagged table, and
accuracy against wall time."""),
new_code_cell("""cmp"""),
new_markdown_cell("""## The same draws as a local run

A fit's draws depend on its seed only, not on where it ran: the variational fit from the cluster equals a local
fit with the same seed."""),
new_code_cell("""local = bz.fit(model, data, backend="vb", draws=500, chains=2, seed=0, progress=False)
print("same draws as on the cluster:", np.array_equal(local.posterior["w"].values, cmp.fits["vb"].posterior["w"].values))"""),
new_markdown_cell("""## Resuming a grid

Started again with the same `out`, the grid loads the fits saved there instead of recomputing them (the `note`
column says so). An interrupted grid therefore loses at most the fits that were running."""),
new_code_cell("""again = bz.compare(model, data, backends=backends, draws=500, tune=500, chains=2, seed=0, progress=False,
                   executor=client.get_executor(), out="runs/dask-grid")
again.table()[["backend", "seconds", "note"]]"""),
new_code_cell("""client.close()
cluster.close()"""),
new_markdown_cell("""On a real cluster, start a scheduler and workers (`dask scheduler`, `dask worker ADDRESS`) and pass
`Client(ADDRESS)` instead of the local cluster; from the command line, `bayeszoo compare ... --scheduler ADDRESS`
does the same."""),
]


def build():
    return notebook.build(CELLS)


if __name__ == "__main__":
    notebook.write(build(), PATH)
