"""What the test modules share besides fixtures (those are in tests/conftest.py): the repository's root, and the
helper modules of this package (fake backends and samplers, the property tests' settings, the radon model, ...),
imported as ``from tests.helpers import fake_backends`` from any folder of the suite."""
from __future__ import annotations

import os

#: the repository's root (docs/, benchmarks/, gallery/, pyproject.toml), whichever folder a test module sits in
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def env_with_root(**extra: str) -> dict[str, str]:
    """This process's environment for a child process (a fresh interpreter, a Dask worker) that imports the test
    modules and helpers by their package names (``tests.helpers.fake_backends``): the root first on PYTHONPATH."""
    path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}
