"""The gallery notebooks run top to bottom (their cells assert on the numbers they show)."""
import os

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

GALLERY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gallery")
NOTEBOOKS = sorted(f for f in os.listdir(GALLERY) if f.endswith(".ipynb"))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes(name, tmp_path):
    nb = nbformat.read(os.path.join(GALLERY, name), as_version=4)
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [out for cell in nb.cells if cell.cell_type == "code"
              for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors
