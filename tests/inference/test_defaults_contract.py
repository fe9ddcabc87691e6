"""Defaults that work together: every backend of every family, on the family's default model (``bz.models.RVM()``
with no arguments) and its default data set (``bz.datasets.load(RVM.example_data)``, loaded with its own
defaults), either runs, with small counts, to a fit whose draws and test-set scores are finite, or refuses before
it runs with a ValueError that names the fix.

Every (family, backend) pair of the registry is a cell here: the fast set (the default suite) holds the cells that
take a few seconds; the cells marked slow (``make test-slow``) are those listed in :data:`SLOW`, with why. The
matrix in docs/families/index.md ("What runs on the defaults") is this one, kept equal by
``test_the_docs_matrix_is_the_registry``.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo import registry
from tests.helpers import ROOT

DOCS = Path(ROOT) / "docs" / "families" / "index.md"

#: small counts: a sampler's warm-up and draws, an approximation's draws (it has no warm-up); one chain
MCMC_COUNTS = dict(draws=10, tune=10, chains=1)
APPROXIMATION_COUNTS = dict(draws=10, chains=1)
#: iteration caps that keep a cell short, by backend (a family's own: by (family, backend)); the defaults otherwise
FEW = {"advi": {"max_iter": 200}, "fullrank_advi": {"max_iter": 200}, ("gpc", "ais"): {"n_temps": 100},
       ("arvm", "arvm"): {"max_iter": 5}, ("pmkl", "em"): {"max_iter": 10}, ("pmkl", "map"): {"max_iter": 10},
       ("pmkl", "mrvm1"): {"max_iter": 40, "min_iter": 20}, ("pmkl", "mrvm2"): {"max_iter": 20},
       ("slm", "ep"): {"max_sweeps": 10}, ("slm", "sbl"): {"max_iter": 100},
       "blackjax_meanfield_vi": {"max_iter": 200},
       # BID's 67,217 dimensions: NUTS's first steps, before its step size adapts, build the longest trees
       **{("bid", name): {"max_tree_depth": 5} for name in ("nuts", "nutpie", "numpyro", "blackjax_nuts")}}

#: scores that are NaN for a fit that does not estimate them (GPC: the evidence of a sampler's fit)
MAY_BE_ABSENT = ("log_evidence", "jensen_bound")



def _package_backends():
    """The backends bayeszoo registers (not the fakes some tests register)."""
    return [b for b in registry.all_backends() if b.run.__module__.startswith("bayeszoo.")]


#: the backends that sample a family's PyMC / NumPyro declaration
_GENERIC = [b.name for b in _package_backends() if b.family is None]
#: the cells that refuse on the defaults, and the fix their message must name
REFUSED = {
    **{("imagervm", name): r"needs proper Gamma hyperpriors.*ImageRVM\(a=1, b=1e-2, c=1, d=1e-3\)"
       for name in _GENERIC},
    # a full-rank covariance over the 256 x 256 cameraman's 65,536 pixels (and the PSF's weights): 135 GiB
    ("bid", "fullrank_advi"): r"full-rank covariance factor \(67,217 x 67,217\).*To fit it: use one of the "
                              r"family's own backends",
}
#: the memory limit the refusals are judged against: fixed, so that a cell is refused on every machine alike
MEMORY_LIMIT = "64GiB"

#: the cells of the slow set, and why each is slow on the defaults (the rest are the fast set)
SLOW = {
    # each compiles the family's declaration for the default data's shapes (PyTensor or XLA): tens of seconds
    **{(family, name): "compiles the declaration for the default data" for family in bz.models.FAMILIES
       for name in _GENERIC if family != "imagervm" and (family, name) not in REFUSED},
    # the default data set is the 256 x 256 cameraman with a 31 x 31 PSF: minutes per run
    **{("bid", name): "the 256 x 256 cameraman" for name in ("gibbs", "vb", "vb_sparse")},
    # their kernels compile on first use (XLA for AIS's annealing scan, Numba for EP's site updates): tens of seconds
    ("gpc", "ais"): "compiles its annealing scan", ("slm", "ep"): "compiles its site updates",
}


def _pairs() -> list[tuple[str, str]]:
    """Every (family, backend) pair: the generic backends for every family, a family's own for it."""
    return [(family, backend.name) for family in bz.models.FAMILIES for backend in _package_backends()
            if backend.family in (None, family)]


def _cells(refused: bool):
    cells = []
    for family, name in _pairs():
        if ((family, name) in REFUSED) != refused:
            continue
        marks = [pytest.mark.slow] if (family, name) in SLOW else []
        cells.append(pytest.param(family, name, id=f"{family}-{name}", marks=marks))
    return cells


@pytest.fixture(scope="session")
def default_problems():
    """family -> (``Family()``, its default data set), each built once for the session."""
    made = {}

    def problem(family):
        if family not in made:
            cls = bz.models.FAMILIES[family]
            made[family] = (cls(), bz.datasets.load(cls.example_data))
        return made[family]

    return problem


def test_every_family_names_its_default_data():
    for family, cls in bz.models.FAMILIES.items():
        assert cls.example_data in bz.datasets.names(), family


def test_the_sets_name_only_cells_of_the_registry():
    pairs = set(_pairs())
    for table in (REFUSED, SLOW):
        assert set(table) <= pairs, set(table) - pairs
    assert not set(REFUSED) & set(SLOW), "a refusal is immediate: it belongs in the fast set"


@pytest.mark.parametrize("family,name", _cells(refused=False))
def test_runs_on_the_defaults(family, name, default_problems):
    model, data = default_problems(family)
    assert name in bz.backends(model), f"{name} does not offer itself for {type(model).__name__}()"
    backend = registry.get(model, name)
    counts = MCMC_COUNTS if backend.kind == "mcmc" else APPROXIMATION_COUNTS
    few = {**FEW.get(name, {}), **FEW.get((family, name), {})}
    fit = bz.fit(model, data, name, seed=0, progress=False, **counts, **few)
    assert (fit.n_chains, fit.n_draws) == (counts["chains"], counts["draws"])
    for var in model.var_dims(data):
        assert np.all(np.isfinite(fit.posterior[var].values)), var
    scores = model.score(fit, data)
    unscored = {k for k, v in scores.items() if not np.all(np.isfinite(v))}
    assert scores and unscored <= set(MAY_BE_ABSENT), scores


@pytest.mark.parametrize("family,name", _cells(refused=True))
def test_refuses_on_the_defaults_before_running_naming_the_fix(family, name, default_problems, monkeypatch):
    monkeypatch.setenv("BAYESZOO_MEMORY_LIMIT", MEMORY_LIMIT)
    model, data = default_problems(family)
    table, key = (registry._GENERIC, name) if registry._GENERIC.get(name) else (registry._FAMILY, (family, name))
    monkeypatch.setitem(table, key, dataclasses.replace(table[key], run=_must_not_run))
    with pytest.raises(ValueError, match=REFUSED[family, name]):
        bz.fit(model, data, name, seed=0, progress=False)


def _must_not_run(*args, **kwargs):
    raise AssertionError("the backend ran although it should have refused the defaults")


def _docs_matrix() -> dict[tuple[str, str], str]:
    """The table of docs/families/index.md's "What runs on the defaults": (family, backend) -> "fast", "slow" or
    "refused", from the backends named in the columns of those names."""
    section = DOCS.read_text().split("## What runs on the defaults", 1)[1].split("\n## ", 1)[0]
    matrix = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        family, _data, *columns = [cell.strip() for cell in line.strip("|").split("|")]
        for state, cell in zip(("fast", "slow", "refused"), columns):
            for name in re.findall(r"`(\w+)`", cell):
                matrix[family.strip("`"), name] = state
    return matrix


def test_the_docs_matrix_is_the_registry():
    """docs/families/index.md lists every cell where this file puts it: fast set, slow set or refused."""
    expected = {pair: "refused" if pair in REFUSED else "slow" if pair in SLOW else "fast" for pair in _pairs()}
    assert _docs_matrix() == expected
