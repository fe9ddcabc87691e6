"""What the gallery generators (``make_<x>_notebook.py``) share: the notebook from its cells, with stable cell ids,
and writing it."""
import nbformat
from nbformat.v4 import new_notebook

KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def build(cells):
    """The notebook of ``cells`` (nbformat cells), committed without outputs."""
    nb = new_notebook(cells=list(cells), metadata={"kernelspec": dict(KERNELSPEC)})
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:02d}"   # stable ids: regenerating gives the same file
    return nb


def write(nb, path):
    nbformat.write(nb, path)
    print("wrote", path)
