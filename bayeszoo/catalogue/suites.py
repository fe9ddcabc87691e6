"""Named suites of benchmark targets: a posterior with a trusted reference that any sampler can be run on.

A :class:`Target` is one posterior: a model (per library where the suite writes it twice, in PyMC and NumPyro), its
data and its reference. The suites:

* ``"thesis"``: the catalogue problems of the families that ship a reference (:mod:`bayeszoo.catalogue`);
* ``"exact"``: posteriors whose moments are known in closed form (:mod:`bayeszoo.catalogue.exact`);
* ``"posteriordb"``: posteriordb's posteriors with reference draws (:mod:`bayeszoo.catalogue.posteriordb`);
* ``"posteriordb-quick"``: eight of those, chosen to span the kinds, a few minutes on two cores.

``bz.benchmark`` runs backends on them. A target is named ``"<suite>/<name>"``; everything here is made on demand,
so that a worker process given only a target's name builds its model itself.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Callable

from bayeszoo.checks import did_you_mean
from bayeszoo.datasets import Dataset
from bayeszoo.models import Model

# spans the kinds: hierarchical, regression, time series, volatility, mixture, HMM, Gaussian process
POSTERIORDB_QUICK = (
    "eight_schools-eight_schools_noncentered",
    "kidiq-kidscore_momiq",
    "mesquite-logmesquite_logvas",
    "arK-arK",
    "garch-garch11",
    "low_dim_gauss_mix-low_dim_gauss_mix",
    "hmm_example-hmm_example",
    "gp_pois_regr-gp_pois_regr",
)

FAMILY = "family"   # the library of a thesis target: its family's own model, which every backend of it takes


@dataclass(frozen=True)
class Target:
    """One posterior of a suite: ``model(library)`` (``libraries`` lists what it is written in), ``data()`` (None
    for a model that carries its observations) and ``reference()``."""

    suite: str
    name: str
    kind: str
    dimension: int | None
    libraries: tuple[str, ...]
    make_model: Callable[[str], Model]
    make_data: Callable[[], Dataset | None]
    make_reference: Callable[[], object]

    @property
    def key(self) -> str:
        return f"{self.suite}/{self.name}"

    def model(self, library: str) -> Model:
        """The target's model in ``library``; a suite's is made once per process, so that its compiled kernels
        are too."""
        if library not in self.libraries:
            raise ValueError(f"{self.key} is written in {', '.join(self.libraries)}, not {library!r}")
        return _model(self.key, library) if self.suite in SUITES else self.make_model(library)

    def data(self) -> Dataset | None:
        return self.make_data()

    def reference(self):
        return _reference(self.key) if self.suite in SUITES else self.make_reference()


def _thesis() -> list[Target]:
    from bayeszoo import catalogue

    out = []
    for key in catalogue.available():
        prob = catalogue.problem(key)
        out.append(Target("thesis", key, prob.family, None, (FAMILY,),
                          make_model=functools.partial(_problem_model, key), make_data=prob.data,
                          make_reference=functools.partial(catalogue.load, key)))
    return out


def _problem_model(key: str, _library: str) -> Model:
    from bayeszoo import catalogue

    return catalogue.problem(key).model()


def _of_module(suite: str, module_name: str, names) -> list[Target]:
    """The targets of a suite module with the interface names() / load(name, library) / reference(name) /
    info(name); what makes them is named by the module's name, so that a target pickles to a worker."""
    module = importlib.import_module(module_name)
    out = []
    for name in names:
        info = module.info(name)
        out.append(Target(suite, name, str(info.get("kind", "")), info.get("dimension"),
                          tuple(info.get("libraries", ("pymc", "numpyro"))),
                          make_model=functools.partial(_load_from, module_name, name), make_data=_no_data,
                          make_reference=functools.partial(_reference_from, module_name, name)))
    return out


def _load_from(module_name: str, name: str, library: str) -> Model:
    return importlib.import_module(module_name).load(name, library=library)


def _reference_from(module_name: str, name: str):
    return importlib.import_module(module_name).reference(name)


def _no_data() -> None:
    return None


def _exact() -> list[Target]:
    from bayeszoo.catalogue import exact

    return _of_module("exact", "bayeszoo.catalogue.exact", exact.names())


def _posteriordb(names=None) -> list[Target]:
    from bayeszoo.catalogue import posteriordb

    return _of_module("posteriordb", "bayeszoo.catalogue.posteriordb", posteriordb.names() if names is None else names)


SUITES: dict[str, Callable[[], list[Target]]] = {
    "posteriordb": _posteriordb,
    "posteriordb-quick": functools.partial(_posteriordb, POSTERIORDB_QUICK),
    "exact": _exact,
    "thesis": _thesis,
}


def names() -> list[str]:
    """The suites' names."""
    return list(SUITES)


def suite(name: str) -> list[Target]:
    """The targets of suite ``name``; an unknown name is a ValueError suggesting close ones."""
    if not isinstance(name, str) or name not in SUITES:
        raise ValueError(f"unknown suite {name!r};{did_you_mean(name, SUITES)} The suites: {', '.join(SUITES)}")
    return _suite(name)


@functools.cache
def _suite(name: str) -> list[Target]:
    return SUITES[name]()


def target(key: str) -> Target:
    """The target ``"<suite>/<name>"`` (e.g. ``"posteriordb/arK-arK"``); a bad key is a ValueError suggesting close
    names."""
    suite_name, _, name = str(key).partition("/")
    found = {t.name: t for t in suite(suite_name if suite_name != "posteriordb-quick" else "posteriordb")}
    if name not in found:
        raise ValueError(f"{key!r} is not a target of the {suite_name!r} suite;"
                         f"{did_you_mean(name, found, prefix=suite_name + '/')} "
                         f"bz.catalogue.suites.suite({suite_name!r}) lists them")
    return found[name]


@functools.cache
def _model(key: str, library: str) -> Model:
    """One model object per target and library in a process, so that its compiled kernels are made once."""
    return target(key).make_model(library)


@functools.cache
def _reference(key: str):
    return target(key).make_reference()
