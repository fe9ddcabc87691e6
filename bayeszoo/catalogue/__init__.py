"""The reference catalogue: a validated reference posterior for each built-in benchmark problem.

In the spirit of posteriordb and Inference Gym, every problem of :mod:`bayeszoo.catalogue.problems` whose
reference passes the rules of :mod:`bayeszoo.catalogue.reference` ships one file, ``data/<key>.nc``: moments with
their Monte-Carlo errors, a second engine's moments, at most 1000 thinned draws and the provenance.
``bz.compare`` uses the entry of its problem by default. ``make references`` (``python -m
bayeszoo.studies.build_catalogue``) rebuilds the files; a problem whose reference breaks the rules gets none, and its
family page says why.

Suites of published or exact references live beside it: :mod:`bayeszoo.catalogue.exact` (targets whose moments
are known in closed form), each with ``names()``, ``load(name, library)``, ``reference(name)`` and ``info(name)``.

``bz.catalogue.build_reference(model, data)`` makes a reference under the same rules for any model and data (or
raises :class:`~bayeszoo.catalogue.reference.UntrustedReference`, a ValueError naming each broken rule); it calls
``bz.fit``, so it lives above the API (:mod:`bayeszoo.reference_builder`) and ``bayeszoo/__init__`` adds it here.
"""
from __future__ import annotations

import os

from bayeszoo.catalogue import exact
from bayeszoo.catalogue.problems import PROBLEMS, Demo, Engine, Problem, find, keys, problem
from bayeszoo.catalogue.reference import Reference, UntrustedReference
from bayeszoo.catalogue import suites

__all__ = ["PROBLEMS", "Demo", "Engine", "Problem", "Reference", "UntrustedReference", "available", "exact", "find",
           "keys", "load", "lookup", "path", "problem"]

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def path(key: str) -> str:
    """Where the reference of problem ``key`` is (or would be) stored."""
    return os.path.join(DATA_DIR, f"{problem(key).key}.nc")


def available() -> list[str]:
    """The problems that have a reference."""
    return [key for key in PROBLEMS if os.path.exists(path(key))]


def load(key: str) -> Reference:
    """The catalogue's reference for problem ``key`` (the rules are checked again on reading)."""
    prob = problem(key)
    if not os.path.exists(path(key)):
        raise ValueError(f"the catalogue has no reference for {key!r}: it could not meet the rules (see "
                         f"docs/families/{prob.family}.md) or has not been built (make references)")
    return Reference.load(path(key))


def lookup(model, data) -> Reference | None:
    """The catalogue's reference for (model, data) if that pair is one of its problems and has one, else None."""
    prob = find(model, data)
    return load(prob.key) if prob is not None and os.path.exists(path(prob.key)) else None
