"""Make PyTensor link a BLAS instead of silently using its slow NumPy C-API fallback.

Filled in by the BLAS configuration work; until then this is a no-op.
"""
from __future__ import annotations


def configure_pytensor_blas() -> str | None:
    return None
