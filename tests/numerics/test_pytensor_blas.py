"""PyTensor's BLAS: bayeszoo points PyTensor at the OpenBLAS that SciPy ships, whether PyTensor is imported
after bayeszoo or before it (``import pymc`` first), silently in both cases."""
from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
{first}
import bayeszoo
from pytensor.tensor.blas import ldflags
print("ldflags:", " ".join(ldflags()))
"""


@pytest.mark.parametrize("first", ["", "import pymc"])
def test_pytensor_gets_openblas_whatever_is_imported_first(first):
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(first=first)], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "openblas" in result.stdout.split("ldflags:")[1].lower()
    assert "imported before bayeszoo" not in result.stderr and "BLAS" not in result.stderr, result.stderr
