"""What the gallery generators (``make_<x>_notebook.py``) share: the notebook from its cells, with stable cell ids,
running it, and writing it with its outputs.

The notebooks are committed with the outputs of one run from top to bottom in a fresh kernel, so that a code host
shows their tables and figures and the documentation can be built without running them. Run as a script, this
module re-runs notebooks already in gallery/ (those without a generator, or after a change in the package):

    .venv/bin/python gallery/_notebook.py              # every notebook
    .venv/bin/python gallery/_notebook.py rvm gpc      # some of them
"""
import os
import sys
import tempfile
import time

import nbformat
from nbformat.v4 import new_notebook

GALLERY = os.path.dirname(os.path.abspath(__file__))
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
TIMEOUT = 900    # seconds per cell


def build(cells):
    """The notebook of ``cells`` (nbformat cells), before it is run."""
    nb = new_notebook(cells=list(cells), metadata={"kernelspec": dict(KERNELSPEC)})
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:02d}"   # stable ids: regenerating gives the same file
    return nb


def execute(nb):
    """Run ``nb`` in place, top to bottom in a fresh kernel, in a scratch folder (notebooks that write ``runs/...``
    leave nothing behind); a cell that raises stops the run with its traceback."""
    from nbclient import NotebookClient

    # one BLAS thread per process; MPLBACKEND stays unset, since a kernel started with it set (say to Agg) does
    # not switch to its inline backend and the figures never reach the notebook
    env = {"OPENBLAS_NUM_THREADS": "1"}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)          # the kernel inherits this process's environment
    try:
        with tempfile.TemporaryDirectory() as scratch:
            # --matplotlib=inline: a Figure made without pyplot (bayeszoo's plots) that ends a cell shows as a
            # picture, not as "<Figure size ...>"
            NotebookClient(nb, timeout=TIMEOUT, kernel_name=KERNELSPEC["name"], record_timing=False,
                           extra_arguments=["--matplotlib=inline"],
                           resources={"metadata": {"path": scratch}}).execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    # the kernel adds language_info (the Python version of this machine); the committed file keeps only the
    # kernelspec, so that it does not change from one machine to the next
    nb.metadata = nbformat.from_dict({"kernelspec": dict(KERNELSPEC)})
    return nb


def write(nb, path):
    """Run ``nb`` and write it to ``path`` with its outputs."""
    start = time.perf_counter()
    execute(nb)
    nbformat.write(nb, path)
    print(f"wrote {path} (ran in {time.perf_counter() - start:.0f} s)")


def rerun(names):
    """Run the named gallery notebooks (all of them when ``names`` is empty) and write them back."""
    names = names or sorted(f[:-len(".ipynb")] for f in os.listdir(GALLERY) if f.endswith(".ipynb"))
    for name in names:
        path = os.path.join(GALLERY, name if name.endswith(".ipynb") else f"{name}.ipynb")
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        write(nb, path)


if __name__ == "__main__":
    rerun(sys.argv[1:])
