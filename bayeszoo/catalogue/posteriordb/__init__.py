"""posteriordb in the zoo: its reference posteriors as PyMC and NumPyro models with their data and references.

posteriordb (<https://github.com/stan-dev/posteriordb>, BSD-3-Clause) publishes Stan programs, data and, for 46
posteriors, reference draws from long Stan runs (10 chains x 10,000 draws, checked for R-hat, ESS and
divergences). Each of those posteriors is written here in both PyMC and NumPyro from its Stan program
(:mod:`~bayeszoo.catalogue.posteriordb.programs`); its data and its reference ship inside the package
(``data/``, see ``data/PROVENANCE.md``) and load offline::

    from bayeszoo.catalogue import posteriordb
    posteriordb.names()                                   # posteriordb's names, "eight_schools-eight_schools_noncentered", ...
    model = posteriordb.load("eight_schools-eight_schools_noncentered", library="numpyro")
    fit = bz.fit(model, backend="numpyro")
    ref = posteriordb.reference("eight_schools-eight_schools_noncentered")   # moments with MCSE, 1000 draws

The reference holds posteriordb's variables: the Stan program's parameters and, where posteriordb kept them, its
transformed parameters (``theta`` of the non-centred eight schools, a deterministic of both models);
``info(name)["reference_variables"]`` lists them with their shapes.
"""
from __future__ import annotations

import functools
import gzip
import json
import os

import numpy as np

from bayeszoo.catalogue.posteriordb import programs
from bayeszoo.checks import did_you_mean
from bayeszoo.catalogue.posteriordb.programs import EXCEPTIONS, KINDS, PROGRAMS, Program, load_all
from bayeszoo.catalogue.reference import Reference

__all__ = ["EXCEPTIONS", "KINDS", "PROGRAMS", "Program", "data", "info", "load", "names", "program", "reference"]

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
LIBRARIES = ("pymc", "numpyro")


@functools.lru_cache(maxsize=1)
def _index() -> dict:
    with open(os.path.join(DATA_DIR, "index.json")) as fh:
        index = json.load(fh)
    index.pop("posteriordb_commit", None)
    return index


def _listed(value) -> list[str]:
    """posteriordb's info files give a list, or one string where there is one entry."""
    return [value] if isinstance(value, str) else list(value or [])


def names() -> list[str]:
    """posteriordb's names of the posteriors with reference draws (``<data>-<model>``), sorted."""
    return sorted(_index())


def _entry(posterior: str) -> dict:
    index = _index()
    if posterior not in index:
        raise ValueError(f"{posterior!r} is not a posteriordb posterior with reference draws;"
                         f"{did_you_mean(posterior, index)} posteriordb.names() lists them")
    return index[posterior]


@functools.lru_cache(maxsize=None)
def _raw_data(data_name: str) -> dict:
    with gzip.open(os.path.join(DATA_DIR, f"{data_name}.json.gz"), "rt") as fh:
        return json.load(fh)


def data(posterior: str) -> dict:
    """The posterior's data as posteriordb's JSON holds it: lists as NumPy arrays (integer where the JSON is),
    scalars as Python numbers. A fresh dict and fresh arrays on every call."""
    raw = _raw_data(_entry(posterior)["data"])
    return {key: np.array(value) if isinstance(value, list) else value for key, value in raw.items()}


def program(posterior: str) -> Program:
    """The :class:`Program` that writes the posterior's Stan model, or a ValueError saying why there is none."""
    model = _entry(posterior)["model"]
    programs = load_all()
    if model in programs:
        return programs[model]
    if model in EXCEPTIONS:
        raise ValueError(f"{posterior!r} (Stan model {model!r}) is not written in PyMC and NumPyro: "
                         f"{EXCEPTIONS[model]}")
    raise ValueError(f"{posterior!r}: its Stan model {model!r} has no program yet (see "
                     f"bayeszoo.catalogue.posteriordb.programs.MODULE_OF for the module that writes it)")


def load(posterior: str, library: str = "pymc"):
    """The posterior as a bayeszoo model (``bz.models.from_pymc`` / ``from_numpyro``) named after it, with its
    data: ``library`` "pymc" runs on every generic backend, "numpyro" on ``numpyro`` and the BlackJAX engines."""
    if library not in LIBRARIES:
        raise ValueError(f"library must be one of {LIBRARIES}, got {library!r}")
    prog, values = program(posterior), data(posterior)
    from bayeszoo.models.user import NumPyroModel, PyMCModel

    if library == "pymc":
        return PyMCModel(prog.pymc(values), name=posterior)
    return NumPyroModel(prog.numpyro(values), (), {}, name=posterior)


def reference_path(posterior: str) -> str:
    _entry(posterior)
    return os.path.join(DATA_DIR, f"{posterior}.reference.nc")


def reference(posterior: str) -> Reference:
    """posteriordb's reference for the posterior: the moments (mean, sd, 5 / 50 / 95 % quantiles with their MCSE,
    R-hat, ESS) of its 10 x 1000 reference draws, and 1000 of those draws for the plots.

    Where the package was built without a posterior's draws file (``info(name)["reference_draws"]`` False:
    ``mcycle_gp-accel_gp``), the reference is made of what posteriordb publishes besides the draws, its mean and
    mean square of every component and the draws' R-hat and ESS: mean, sd and their MCSEs, no quantiles, and
    ``fit`` None (no draws for the plots; ``provenance["moments_from"]`` names the files)."""
    missing = _entry(posterior).get("reference_missing")
    if missing:
        raise ValueError(f"the package holds no reference for {posterior!r}: {missing}; rebuild the data from a "
                         f"complete clone of posteriordb (python -m bayeszoo.catalogue.posteriordb.build PATH)")
    return Reference.load(reference_path(posterior))


def info(posterior: str) -> dict:
    """What the suite's page shows: the Stan model and data names, the kind, the dimension (components of the
    reference's variables, as posteriordb counts them), keywords, the data set's title and sources, the licence,
    whether the reference holds draws, and the program or the reason there is none."""
    entry = _entry(posterior)
    model = entry["model"]
    prog = load_all().get(model)
    data_info = entry.get("data_info", {})
    return {"posterior": posterior, "model": model, "data": entry["data"],
            "kind": prog.kind if prog else programs.MODULE_KINDS.get(programs.MODULE_OF.get(model)),
            "dimension": int(sum(np.prod(shape) for shape in entry["reference_variables"].values())),
            "reference_variables": {k: tuple(v) for k, v in entry["reference_variables"].items()},
            "keywords": list(entry.get("keywords", [])), "title": data_info.get("title"),
            "urls": _listed(data_info.get("urls")), "references": _listed(data_info.get("references")),
            "reference_run": entry.get("reference_run"), "reference_missing": entry.get("reference_missing"),
            "reference_draws": bool(entry.get("reference_draws", not entry.get("reference_missing"))),
            "licence": "BSD-3-Clause (posteriordb); data from the sources listed (data/PROVENANCE.md)",
            "program": prog.name if prog else None, "exception": EXCEPTIONS.get(model)}
