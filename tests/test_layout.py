"""The design card's top level: models/, inference/ and diagnostics/ beside bayeszoo/, installed as its subpackages.

Checked four ways: the package search configured in pyproject.toml finds every package folder; a built wheel installed in a
fresh virtual environment imports every subpackage and runs a fit; the layer contracts see every module of the
source tree (through the links in bayeszoo/) and of that wheel's files, where an upward import planted in
``models`` is reported.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile

import pytest
import setuptools

import bayeszoo
from tests.helpers import ROOT

with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
    PYPROJECT = tomllib.load(fh)
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
TOP_LEVEL = {"bayeszoo.models": "models", "bayeszoo.inference": "inference", "bayeszoo.diagnostics": "diagnostics"}
FIND = SETUPTOOLS["packages"]["find"]
#: the packages the build installs, found as setuptools finds them (through the links in bayeszoo/)
PACKAGES = sorted(setuptools.find_packages(os.path.join(ROOT, *FIND["where"]), include=FIND["include"]))


def _package_folders() -> set[str]:
    """Every folder holding an ``__init__.py`` under the mapped folders, as the package name it installs as."""
    found = set()
    for package, folder in SETUPTOOLS["package-dir"].items():
        top = os.path.join(ROOT, folder)
        for here, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if "__init__.py" in files:
                rel = os.path.relpath(here, top)
                found.add(package if rel == "." else f"{package}.{rel.replace(os.sep, '.')}")
    return found


def test_the_card_top_level_is_the_repository_root():
    for name in ("pyproject.toml", "models", "inference", "diagnostics", "tests", "gallery"):
        assert os.path.exists(os.path.join(ROOT, name)), name
    for package, folder in TOP_LEVEL.items():
        assert SETUPTOOLS["package-dir"][package] == folder
        # inside bayeszoo/ only a link to the top-level folder, for the tools that walk bayeszoo/ (import-linter)
        link = os.path.join(ROOT, "bayeszoo", package.split(".")[1])
        assert os.path.islink(link) and os.readlink(link) == os.path.join("..", folder)


def test_the_layer_contracts_see_every_module_of_the_source_tree():
    """``make lint`` runs import-linter on the source tree: through the links it sees every mapped module, and
    ``from bayeszoo import models`` is an import of bayeszoo.models, not of the package (which would break the
    layers)."""
    import grimp

    graph = grimp.build_graph("bayeszoo", cache_dir=None)
    assert {"bayeszoo.models.rvm", "bayeszoo.inference.rvm.gibbs", "bayeszoo.diagnostics.metrics"} <= graph.modules
    assert graph.find_modules_directly_imported_by("bayeszoo.catalogue.problems") >= {"bayeszoo.models"}
    assert "bayeszoo" not in graph.find_modules_directly_imported_by("bayeszoo.catalogue.problems")


def test_the_package_search_finds_every_package_folder():
    assert set(PACKAGES) == _package_folders()


def test_the_installed_package_imports_every_subpackage_from_its_folder():
    # the editable install (or whatever install runs these tests): each mapped package comes from its folder
    for package, folder in TOP_LEVEL.items():
        module = importlib.import_module(package)
        assert os.path.dirname(module.__file__).endswith(os.sep + folder)
    names = set()
    for package in PACKAGES:
        module = importlib.import_module(package)
        names |= {m.name for m in pkgutil.iter_modules(module.__path__, f"{package}.")}
    assert {"bayeszoo.models.rvm", "bayeszoo.inference.rvm.gibbs", "bayeszoo.diagnostics.metrics"} <= names
    for name in sorted(names - {"bayeszoo.__main__"}):
        importlib.import_module(name)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    # built from a copy without build outputs: setuptools reuses build/lib, where modules since moved or removed
    # would stay and be packed into the wheel
    source = tmp_path_factory.mktemp("source") / "bayeszoo"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".import_linter_cache", "runs",
        "_build"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-cache-dir", "-w", str(out),
                    str(source)], check=True, capture_output=True)
    (path,) = out.glob("bayeszoo-*.whl")
    return path


FIT_SCRIPT = """
import importlib, os, pkgutil, sys
import bayeszoo as bz
here = os.path.dirname(bz.__file__)
assert here.startswith(sys.prefix), (here, sys.prefix)        # the wheel's copy, not the source tree
for m in pkgutil.walk_packages(bz.__path__, "bayeszoo."):
    if not m.name.startswith("bayeszoo.__main__"):
        mod = importlib.import_module(m.name)
        assert getattr(mod, "__file__", here).startswith(here), m.name
data = bz.datasets.load("sinc", n=30, seed=0)
fit = bz.fit(bz.models.RVM(width=3.0), data, backend="fast", seed=0, progress=False)
print(fit.backend, fit.n_chains, sorted(fit.idata.posterior.data_vars))
"""


def test_a_built_wheel_in_a_fresh_venv_imports_everything_and_fits(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # the dependencies come from this environment's site-packages, added as a plain path: its .pth files (the
    # editable install's import hook among them) are not run
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(purelib, "dependencies.pth"), "w") as fh:
        fh.write(sysconfig.get_paths()["purelib"] + "\n")
    # neither pip nor the fresh interpreter sees a PYTHONPATH: the test's own checkout must not stand in for the wheel
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    str(wheel)], check=True, capture_output=True, env=env)
    result = subprocess.run([str(python), "-c", FIT_SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "fast 4 ['log_alpha', 'log_beta', 'w']"


def _lint(site, tmp_path):
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(site)}
    lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    return subprocess.run([lint, os.path.join(ROOT, "pyproject.toml"), "--no-cache"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


def test_the_layer_contracts_see_every_module_of_the_installed_tree(wheel, tmp_path):
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    clean = _lint(site, tmp_path)
    assert clean.returncode == 0 and "3 kept, 0 broken" in clean.stdout, clean.stdout + clean.stderr
    # an upward import planted in the lowest mapped folder must be reported: the contracts do not pass vacuously
    with open(site / "bayeszoo" / "models" / "base.py", "a") as fh:
        fh.write("\nimport bayeszoo.api  # planted upward import\n")
    planted = _lint(site, tmp_path)
    assert planted.returncode != 0
    assert "bayeszoo.models.base -> bayeszoo.api" in planted.stdout, planted.stdout
