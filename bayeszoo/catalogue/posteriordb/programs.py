"""posteriordb's Stan programs written in PyMC and NumPyro: the :class:`Program` type and the registry.

One :class:`Program` per Stan model of posteriordb (``posterior_database/models/stan/<name>.stan``), registered by
the module that writes it (``regression``, ``hierarchical``, ``timeseries``, ``hmm``, ``gp``, ``ode``,
``mixture``); :func:`load_all` imports them. A program is a pair of builders that take the posterior's data (the
dict of :func:`bayeszoo.catalogue.posteriordb.data`) and give

* ``pymc(data)``: a ``pm.Model`` holding its observations;
* ``numpyro(data)``: a zero-argument NumPyro model function that closes over the data.

The rules both builders keep, so that posteriordb's reference draws are their posterior:

* the Stan program's parameterisation and priors, improper flat priors included (``pm.Flat`` /
  ``pm.HalfFlat``; NumPyro ``ImproperUniform``), and Stan's constraints: a ``<lower=0>`` parameter is positive
  with the log transform in both libraries (PyMC's default for positive distributions, NumPyro's for
  ``constraints.positive``), so that the two unconstrained log densities are the same function;
* free variables named as Stan's parameters, a Stan vector one variable with its shape, and no dims (a PyMC
  variable gets ``<name>_dim_<k>``, a NumPyro site keeps no plate on a parameter), so that a Stan name such as
  ``beta[2]`` is component 1 of the variable ``beta`` in both;
* discrete states marginalised as the Stan program does (a ``pm.Potential`` / ``numpyro.factor`` with the same
  sum), and the data's integer sizes taken from the data (``N``, ``J``, ...).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

KINDS = ("regression", "hierarchical", "time series", "HMM", "Gaussian process", "ODE", "mixture")
#: the modules that register programs (imported by :func:`load_all`), with the kind of the programs each writes
MODULE_KINDS = {"regression": "regression", "hierarchical": "hierarchical", "timeseries": "time series",
                "hmm": "HMM", "gp": "Gaussian process", "ode": "ODE", "mixture": "mixture"}
MODULES = tuple(MODULE_KINDS)


@dataclass(frozen=True)
class Program:
    """One Stan program of posteriordb in both libraries.

    name : posteriordb's model name (``eight_schools_noncentered``; the ``.stan`` file's stem).
    kind : one of :data:`KINDS`, for the suite's page and the benchmark's choice of posteriors.
    pymc : data -> ``pm.Model``.
    numpyro : data -> a zero-argument NumPyro model function.
    """

    name: str
    kind: str
    pymc: Callable[[dict], object]
    numpyro: Callable[[dict], Callable[[], None]]

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"program {self.name!r}: kind {self.kind!r} is not one of {KINDS}; pick the closest")


PROGRAMS: dict[str, Program] = {}

#: which module writes each Stan model of posteriordb's reference posteriors (the suite's plan: a model is
#: registered by its module, or listed in :data:`EXCEPTIONS`)
MODULE_OF = {
    **dict.fromkeys(("diamonds", "earn_height", "log10earn_height", "logearn_height", "logearn_height_male",
                     "logearn_interaction", "logearn_interaction_z", "logearn_logheight_male",
                     "kidscore_interaction", "kidscore_momhs", "kidscore_momhsiq", "kidscore_momiq",
                     "kidscore_interaction_c", "kidscore_interaction_c2", "kidscore_interaction_z",
                     "kidscore_mom_work", "kilpisjarvi", "logmesquite", "logmesquite_logva", "logmesquite_logvas",
                     "logmesquite_logvash", "logmesquite_logvolume", "mesquite", "nes", "blr"), "regression"),
    "eight_schools_noncentered": "hierarchical",
    **dict.fromkeys(("arK", "arma11", "garch11"), "timeseries"),
    **dict.fromkeys(("hmm_drive_0", "hmm_drive_1", "hmm_example"), "hmm"),
    **dict.fromkeys(("gp_pois_regr", "gp_regr", "accel_gp"), "gp"),
    **dict.fromkeys(("lotka_volterra", "one_comp_mm_elim_abs"), "ode"),
    "low_dim_gauss_mix": "mixture",
}

#: posteriordb model name -> why it is not written in one of the two libraries and what would make it possible
#: (its posteriors keep their row on the suite's page)
EXCEPTIONS: dict[str, str] = {}


def register(program: Program) -> Program:
    """Add ``program`` to :data:`PROGRAMS` (one program per posteriordb model name)."""
    if program.name in PROGRAMS and PROGRAMS[program.name] is not program:
        raise ValueError(f"program {program.name!r} is registered twice; one module writes each Stan model")
    PROGRAMS[program.name] = program
    return program


def load_all() -> dict[str, Program]:
    """Import every module of :data:`MODULES` that exists (each registers its programs) and return the registry."""
    for module in MODULES:
        try:
            importlib.import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{module}":
                raise
    return PROGRAMS
