"""What a model family is, declared once and discovered.

Each family's model module declares ``FAMILY = Family(...)`` beside its class; :func:`families` finds every such
declaration by walking :mod:`bayeszoo.models` with :mod:`pkgutil` (as scikit-learn's ``all_estimators`` walks its
package), so the backends, the data loaders, the contract tests, the documentation tables, the benchmarks and the
packaging all read one place. What follows from the family key by convention (the backends package, the
pictures module, the page) is derived, not declared (docs/architecture.md, "Adding a family").
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Family:
    """One model family.

    Parameters
    ----------
    model : type
        The :class:`~bayeszoo.models.Model` subclass; its ``family`` attribute is the family key.
    about : str
        What it is, in a few words (the models guide's table).
    source : str
        The publications it implements (the families table of the documentation).
    tiny : callable
        ``tiny() -> (model, data)``: a problem small enough that every backend of the family runs on it in
        seconds; the backend contract (tests/inference/test_contract.py) runs each backend on it.
    datasets : tuple of str
        The modules of :mod:`bayeszoo.datasets` that hold its data loaders.
    benchmarks : tuple of str
        The modules of ``benchmarks/`` that measure it (``benchmarks/run.py`` runs what they declare).
    gallery : str or None
        Its notebook in ``gallery/`` (without ``.ipynb``), or None if it has none yet.
    """

    model: type
    about: str
    source: str
    tiny: Callable[[], tuple]
    datasets: tuple[str, ...]
    benchmarks: tuple[str, ...]
    gallery: str | None = None

    @property
    def key(self) -> str:
        """The family key (``"rvm"``): the model class's ``family``."""
        return self.model.family

    @property
    def backends(self) -> str:
        """The package of its hand-written backends (importing it registers them)."""
        return f"bayeszoo.inference.{self.key}"

    @property
    def plots(self) -> str:
        """The module whose ``family_picture(comparison)`` the report draws."""
        return f"bayeszoo.diagnostics.{self.key}_plots"

    @property
    def page(self) -> str:
        """Its documentation page, relative to the repository's root."""
        return f"docs/families/{self.key}.md"


def declared_in(package) -> dict[str, Family]:
    """The ``FAMILY`` declarations of the modules of ``package`` (every folder of its ``__path__``), by key."""
    found = {}
    for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
        declaration = getattr(importlib.import_module(info.name), "FAMILY", None)
        if isinstance(declaration, Family):
            if declaration.key in found:
                raise ValueError(f"family {declaration.key!r} is declared twice ({info.name} and "
                                 f"{found[declaration.key].model.__module__}); give the second one another key")
            found[declaration.key] = declaration
    return dict(sorted(found.items()))


@functools.cache
def families() -> dict[str, Family]:
    """Every model family, by key (sorted): the ``FAMILY`` declared in each module of :mod:`bayeszoo.models`."""
    from bayeszoo import models

    return declared_in(models)
