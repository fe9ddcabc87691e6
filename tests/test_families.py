"""A family is one declaration (``FAMILY = Family(...)`` in its model module), discovered by
``bz.models.families()``; docs/architecture.md lists the files a new backend and a new family touch.

Checked three ways: the two lists on that page (their lengths, and every listed path present for every family),
a throwaway family written into a temporary folder of each package and picked up with no other edit (discovery,
its data loader, its backend, the documentation's tables, the contract test's problems, the report's page), and
a scan of the repository for hand lists of the families outside the listed files.
"""
from __future__ import annotations

import ast
import glob
import importlib.util
import os
import re
import shutil
import sys

import numpy as np
import pytest

import bayeszoo as bz
from bayeszoo import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCHITECTURE = os.path.join(ROOT, "docs", "architecture.md")
LIMITS = {"Adding a backend": 4, "Adding a family": 12}


def listed_files(section: str) -> list[str]:
    """The paths of the numbered list of ``## <section>`` in docs/architecture.md (the first code span of each
    item)."""
    text = open(ARCHITECTURE, encoding="utf-8").read()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. `([^`]+)`", body, flags=re.M)


def paths_of(pattern: str, family) -> list[str]:
    """The glob patterns a listed path stands for in ``family``: one per name its declaration gives."""
    pattern = pattern.replace("<family>", family.key).replace("<backend>", "[!_]*")
    names = {"<datasets>": family.datasets, "<benchmark>": family.benchmarks,
             "<gallery>": () if family.gallery is None else (family.gallery,)}
    for placeholder, values in names.items():
        if placeholder in pattern:
            return [pattern.replace(placeholder, value) for value in values]
    return [pattern]


def load_run():
    spec = importlib.util.spec_from_file_location("bayeszoo_benchmarks_run", os.path.join(ROOT, "benchmarks", "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def benchmarks_copy(folder) -> str:
    """A copy of benchmarks/'s modules in ``folder`` (a new module can be added there)."""
    shutil.copytree(os.path.join(ROOT, "benchmarks"), folder, ignore=shutil.ignore_patterns("results", "__pycache__"))
    return str(folder)


def load_conf():
    spec = importlib.util.spec_from_file_location("bayeszoo_docs_conf", os.path.join(ROOT, "docs", "conf.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------------------- the two lists
@pytest.mark.parametrize("section", sorted(LIMITS))
def test_the_page_lists_at_most_the_target_number_of_files(section):
    files = listed_files(section)
    assert 0 < len(files) <= LIMITS[section], files
    assert len(set(files)) == len(files), files


@pytest.mark.parametrize("section", sorted(LIMITS))
def test_every_listed_path_is_there_for_every_family(section):
    missing = []
    for family in bz.models.families().values():
        for listed in listed_files(section):
            patterns = paths_of(listed, family)
            if not patterns and "<gallery>" in listed:     # no notebook: then there is none under its key either
                assert not os.path.exists(os.path.join(ROOT, "gallery", f"{family.key}.ipynb")), family.key
            missing += [(family.key, p) for p in patterns
                        if not glob.glob(os.path.join(ROOT, p), recursive=True)]
    assert missing == []


def test_every_family_s_default_data_come_from_a_loader_module_its_declaration_names():
    from bayeszoo import datasets

    bz.datasets.names()     # every loader module imported
    for key, family in bz.models.families().items():
        module = datasets._LOADERS[family.model.example_data].__module__
        assert module in {f"bayeszoo.datasets.{name}" for name in family.datasets}, (key, module)


def test_every_family_has_a_demo_problem():
    from bayeszoo import catalogue

    demoed = {catalogue.problem(key).family for key in catalogue.keys() if catalogue.problem(key).demo}
    assert set(bz.models.families()) <= demoed


# ------------------------------------------------------------------------------- a family added in files only
FAKE_MODEL = '''
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bayeszoo import checks, datasets
from bayeszoo.models.base import Model
from bayeszoo.models.family import Family


@dataclass
class NormalMean(Model):
    """y_n ~ N(mu, 1), mu ~ N(0, prior_sd^2)."""

    prior_sd: float = 10.0

    family = "normalmean"
    example_data = "normalmean_points"
    compare_vars: ClassVar[tuple[str, ...]] = ("mu",)
    _parameter_constraints: ClassVar[dict] = {"prior_sd": checks.POSITIVE}

    def var_dims(self, data):
        return {"mu": ()}

    def coords(self, data):
        return {"obs": np.arange(data.n)}

    def posterior(self, data):
        """The conjugate posterior's mean and variance."""
        var = 1.0 / (data.n + self.prior_sd ** -2)
        return var * float(np.sum(data.y)), var


FAMILY = Family(model=NormalMean, about="a normal mean", source="none", datasets=("normalmean_data",),
                tiny=lambda: (NormalMean(), datasets.load("normalmean_points", n=8)),
                benchmarks=("bench_normalmean",))
'''
FAKE_DATA = '''
import numpy as np

from bayeszoo.datasets import Dataset, register


@register("normalmean_points")
def normalmean_points(n: int = 20, seed: int = 0) -> Dataset:
    """Points around 1.5 with unit noise."""
    y = np.random.default_rng(seed).normal(1.5, 1.0, n)
    return Dataset(X=np.zeros((n, 1)), y=y, name="normalmean_points", meta={"task": "regression"})
'''
FAKE_BACKEND = '''
import numpy as np

from bayeszoo import registry
from bayeszoo.results import build_fit


@registry.register("exact", kind="approximation", family="normalmean", description="the conjugate posterior")
def run(model, data, *, draws, tune, chains, ctx):
    mean, var = model.posterior(data)
    mu = np.stack([rng.normal(mean, np.sqrt(var), draws) for rng in ctx.chain_rngs(chains)])
    return build_fit(model, data, ctx.backend, "approximation", {"mu": mu},
                     timing={"compile": 0.0, "tune": 0.0, "sample": 0.0, "total": 0.0}, ctx=ctx)
'''
FAKE_BENCH = '''
BENCHMARKS = {"normalmean_exact": {"about": "the exact backend's seconds", "run": lambda quick: {"seconds": 0.0},
                                   "rows": lambda result: [("normalmean exact", "0 s", "")]}}
'''
FAKE_FILES = {"models/normalmean.py": FAKE_MODEL, "datasets/normalmean_data.py": FAKE_DATA,
              "inference/normalmean/__init__.py": '"""The normal mean\'s backends."""\n',
              "inference/normalmean/exact.py": FAKE_BACKEND}


@pytest.fixture
def normalmean(tmp_path, monkeypatch):
    """The family ``normalmean`` written into a temporary folder beside each package's own (the packages'
    ``__path__`` extended, as a new folder in the source tree would be found), and removed afterwards."""
    from bayeszoo import datasets, inference, models

    for name, text in FAKE_FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package, folder in ((models, "models"), (datasets, "datasets"), (inference, "inference")):
        monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path / folder)])
    models.families.cache_clear()
    yield
    models.families.cache_clear()
    registry._FAMILY.pop(("normalmean", "exact"), None)
    datasets._LOADERS.pop("normalmean_points", None)
    for name in [m for m in sys.modules if "normalmean" in m]:
        del sys.modules[name]
    for package, attribute in ((models, "normalmean"), (datasets, "normalmean_data"), (inference, "normalmean")):
        if hasattr(package, attribute):
            delattr(package, attribute)


def test_a_family_declared_in_its_own_files_is_picked_up_with_no_other_edit(normalmean, tmp_path):
    from bayeszoo import inference
    from bayeszoo.diagnostics import report

    family = bz.models.families()["normalmean"]
    cls = bz.models.FAMILIES["normalmean"]
    assert family.model is cls and bz.models.get_family("normalmean") is cls
    assert bz.models.from_spec({"family": "normalmean", "prior_sd": 2}) == cls(prior_sd=2.0)
    assert "normalmean" in registry.known_families()
    # its data loader, by its module alone
    data = bz.datasets.load("normalmean_points", n=30)
    assert data.n == 30 and "normalmean_points" in bz.datasets.names()
    # its backend, registered by its module alone
    inference.import_family_backends()
    model = cls()
    assert "exact" in bz.backends(model)
    fit = bz.fit(model, data, "exact", draws=4000, chains=2, seed=0, progress=False)
    mean, var = model.posterior(data)
    draws = fit.posterior["mu"].values
    assert draws.shape == (2, 4000)
    assert abs(draws.mean() - mean) < 5 * np.sqrt(var / draws.size)
    # the documentation's tables and tables of contents
    conf = load_conf()
    assert "| [normalmean](normalmean.md) | `bz.models.NormalMean` | none | `exact` |" in conf.families_table()
    assert "| `normalmean` | {class}`bz.models.NormalMean <bayeszoo.models.NormalMean>` | a normal mean |" in \
        conf.families_guide_table()
    assert "normalmean" in conf.family_entries("pages") and "NormalMean" in conf.family_entries("classes")
    # the contract test's problems
    from tests.inference import test_contract

    tiny_model, tiny_data = test_contract.problems()["normalmean"]()
    assert isinstance(tiny_model, cls) and tiny_data.n == 8
    # the report's page for it
    assert report.reference_page("normalmean") == "docs/families/normalmean.md"
    # its benchmark module, found by benchmarks/run.py (here in a copy of the folder, with the module added)
    folder = benchmarks_copy(tmp_path / "benchmarks")
    with open(os.path.join(folder, "bench_normalmean.py"), "w") as fh:
        fh.write(FAKE_BENCH)
    found = load_run().benchmarks(folder)
    assert found["normalmean_exact"]["module"] == "bench_normalmean"
    bench = found["normalmean_exact"]
    assert bench["rows"](bench["run"](True)) == [("normalmean exact", "0 s", "")]


def test_every_benchmark_module_is_named_once_and_declares_what_it_runs(tmp_path):
    run = load_run()
    found = run.benchmarks()
    assert {bench["module"] for bench in found.values()} == set(run.modules())
    for name, bench in found.items():
        assert bench["about"] and callable(bench["run"]) and callable(bench["rows"]), name
    # a module that neither a family's declaration nor GENERAL names is refused, not skipped
    folder = benchmarks_copy(tmp_path / "benchmarks")
    with open(os.path.join(folder, "bench_orphan.py"), "w") as fh:
        fh.write("BENCHMARKS = {}\n")
    with pytest.raises(ValueError, match=r"named by no family's declaration nor GENERAL: \['bench_orphan'\]"):
        run.modules(folder)


def test_without_its_files_the_family_is_gone():
    assert "normalmean" not in bz.models.families()
    assert "normalmean_points" not in bz.datasets.names()


# ------------------------------------------------------------------------------------- no hand lists left
#: files that name every family in one list and are not a family's listed files: samples that a new family need
#: not join (nothing checks that they name every family), each with its reason. An entry no longer needed fails.
SAMPLES = {
    "BENCHMARKS.md": "measurements as they ran: the growth benchmark's and the demo's rows, one per family measured",
    "benchmarks/bench_growth.py": "the backend, sizes and expected exponents the growth benchmark measures per family",
    "tests/inference/test_compile_once.py": "a declaration per family with two data sets of one shape, chosen for the check",
}
SKIP_DIRS = {".git", ".venv", "_build", "__pycache__", "build", "runs", "results", ".ipynb_checkpoints"}


def _lists_naming(keys: set[str], path: str) -> list[str]:
    """Where ``path`` names every key in one list: a Python list, tuple, set or dict (keys) of those strings; a
    Markdown table whose first column, or a table of contents whose entries, name them all."""
    text = open(path, encoding="utf-8").read()
    if not all(key in text for key in keys):     # most files: nothing to parse
        return []
    if path.endswith(".py"):
        found = []
        for node in ast.walk(ast.parse(text)):
            items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
            if isinstance(node, (ast.Dict, ast.List, ast.Tuple, ast.Set)) and keys <= {
                    item.value for item in items if isinstance(item, ast.Constant)}:
                found.append(f"line {node.lineno}")
        return found
    found = []
    for block in re.findall(r"```\{toctree\}\n(.*?)```", text, flags=re.S):
        if keys <= {line.strip() for line in block.splitlines()}:
            found.append("table of contents")
    for table in re.findall(r"(?:^\|.*\n?)+", text, flags=re.M):
        if keys <= {word for row in table.splitlines() for word in re.findall(r"\w+", row.strip("|").split("|")[0])}:
            found.append("table")
    return found


def test_no_file_outside_the_lists_names_the_families_by_hand():
    families = bz.models.families()
    keys = set(families)
    listed = {os.path.normpath(path) for section in LIMITS for pattern in listed_files(section)
              for family in families.values() for p in paths_of(pattern, family)
              for path in glob.glob(os.path.join(ROOT, p), recursive=True)}
    found = {}
    for here, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for name in files:
            path = os.path.normpath(os.path.join(here, name))
            if name.endswith((".py", ".md", ".toml")) and path not in listed:
                where = _lists_naming(keys, path)
                if where:
                    found[os.path.relpath(path, ROOT)] = where
    assert set(found) == set(SAMPLES), {k: v for k, v in found.items() if k not in SAMPLES}
