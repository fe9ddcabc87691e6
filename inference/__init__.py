"""Inference backends. Importing this package registers all of them (see :mod:`bayeszoo.registry`): the generic
engines, then every module of each family's backends package ``bayeszoo.inference.<family>`` (the families are
discovered from their declarations, :func:`bayeszoo.models.families`; a backend is registered by its module
alone, with no list to edit)."""
from __future__ import annotations

import importlib
import pkgutil

from bayeszoo.inference import pymc_engines  # noqa: F401  (it imports numpyro_engines between its samplers and ADVI)
from bayeszoo.inference import numpyro_engines  # noqa: F401
from bayeszoo.inference import blackjax_engines  # noqa: F401
from bayeszoo.models import families


def import_family_backends() -> None:
    """Import every module of every family's backends package (importing a module registers its backends)."""
    for family in families().values():
        package = importlib.import_module(family.backends)
        for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
            importlib.import_module(info.name)


import_family_backends()
