"""The gallery notebooks: cheap static checks in the default suite, end-to-end execution in the slow set.

The numbers the notebooks show are checked in tests/test_gallery_checks.py (and the family tests), not in the
notebooks themselves.
"""
import ast
import importlib.util
import os
import tomllib

import pytest

from tests.helpers import ROOT

nbformat = pytest.importorskip("nbformat")

GALLERY = os.path.join(ROOT, "gallery")
NOTEBOOKS = sorted(f for f in os.listdir(GALLERY) if f.endswith(".ipynb"))
GENERATORS = sorted(f for f in os.listdir(GALLERY) if f.startswith("make_") and f.endswith("_notebook.py"))


def read(name):
    return nbformat.read(os.path.join(GALLERY, name), as_version=4)


def code_cells(nb):
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def cell_tree(cell, name, index):
    try:
        return ast.parse(cell.source)
    except SyntaxError as exc:
        pytest.fail(f"{name}, cell {index}: not plain Python ({exc})")


# ------------------------------------------------------------------------------------ static (default suite)
def test_gallery_has_notebooks():
    assert len(NOTEBOOKS) >= 6, NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_valid_and_committed_with_the_outputs_of_one_clean_run(name):
    """Committed with outputs (a code host and the quick docs build show them), and those outputs are of one run
    from top to bottom in a fresh kernel with no error: re-run with gallery/_notebook.py or the generator."""
    nb = read(name)
    nbformat.validate(nb)
    assert nb.metadata == {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    cells = code_cells(nb)
    counts = [cell.get("execution_count") for cell in cells]
    assert counts == list(range(1, len(cells) + 1)), f"{name}: execution counts {counts}, not one run in order"
    for i, cell in enumerate(cells):
        kinds = [out.get("output_type") for out in cell.get("outputs", [])]
        assert "error" not in kinds, f"{name}, cell {i} has an error output"
    assert any(cell.get("outputs") for cell in cells), f"{name} has no outputs"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_reads_like_a_tutorial(name):
    """No asserts (the checks live in tests/) and no backend switching (the executing test sets MPLBACKEND)."""
    for i, cell in enumerate(read(name).cells):
        if cell.cell_type != "code":
            continue
        for node in ast.walk(cell_tree(cell, name, i)):
            assert not isinstance(node, ast.Assert), f"{name}, cell {i}, line {node.lineno}: assert"
            if isinstance(node, ast.Attribute) and node.attr == "use" and getattr(node.value, "id", "") == "matplotlib":
                pytest.fail(f"{name}, cell {i}: matplotlib.use")


def _module_file(module):
    """The source file of a bayeszoo module, or None if there is none (through pyproject.toml's package-dir: the
    card's top-level models/, inference/ and diagnostics/ are bayeszoo's subpackages)."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        mapping = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]
    package = max((p for p in mapping if module == p or module.startswith(p + ".")), key=len)
    rest = module[len(package):].lstrip(".")
    base = os.path.join(ROOT, mapping[package], *(rest.split(".") if rest else []))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def _top_level_names(path):
    names = set()
    for node in ast.parse(open(path, encoding="utf-8").read()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_imports_exist_and_are_public(name):
    """Every ``bayeszoo`` import names an existing module (and, for ``from ... import``, an existing name) with no
    private (underscore) part: a moved or renamed module fails here, without executing anything."""
    for i, cell in enumerate(read(name).cells):
        if cell.cell_type != "code":
            continue
        for node in ast.walk(cell_tree(cell, name, i)):
            if isinstance(node, ast.Import):
                pairs = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                pairs = [(node.module, a.name) for a in node.names]
            else:
                continue
            for module, imported in pairs:
                if module.split(".")[0] != "bayeszoo":
                    continue
                where = f"{name}, cell {i}: {module}" + (f".{imported}" if imported else "")
                parts = module.split(".") + ([imported] if imported else [])
                assert not any(p.startswith("_") for p in parts), f"{where} is private"
                path = _module_file(module)
                assert path is not None, f"{where}: no such module"
                if imported is not None:
                    assert imported in _top_level_names(path) or _module_file(f"{module}.{imported}"), \
                        f"{where}: no such name"


def _generator(filename):
    # a fresh module each time; the generators import gallery/_notebook.py, on the path (pyproject.toml's pythonpath)
    spec = importlib.util.spec_from_file_location(filename[:-3], os.path.join(GALLERY, filename))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("filename", GENERATORS)
def test_generated_notebook_is_in_step_with_its_generator(filename):
    """gallery/make_<x>_notebook.py builds gallery/<x>.ipynb; run it after editing either."""
    gen = _generator(filename)
    built, path = gen.build(), gen.PATH
    assert os.path.dirname(path) == GALLERY and os.path.basename(path) in NOTEBOOKS
    on_disk = nbformat.read(path, as_version=4)
    assert [(c.cell_type, c.source) for c in on_disk.cells] == [(c.cell_type, c.source) for c in built.cells], \
        f"{os.path.basename(path)} differs from {filename}: run .venv/bin/python gallery/{filename}"
    assert on_disk.metadata == built.metadata


# ---------------------------------------------------------------------------------------- execution (slow)
@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes(name, tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("MPLBACKEND", "Agg")      # inherited by the kernel: figures render off screen
    nb = read(name)
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [out for cell in nb.cells if cell.cell_type == "code"
              for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors
