"""The test files use bayeszoo as a user or a backend author does: no import of a private module or name of the
package (a unit worth testing on its own is public; anything else is tested through the public API), and no edit of
sys.path (pyproject.toml's ``pythonpath`` is the one place; helpers are ``tests.helpers``). Every folder of the
suite is a package, so that ``tests.<folder>.<module>`` names each test module once."""
from __future__ import annotations

import ast
import os
import re

from tests.helpers import ROOT

TESTS = os.path.join(ROOT, "tests")
#: the package, and the folders beside it that it maps in as subpackages (importable by these names from the root)
PACKAGES = ("bayeszoo", "models", "inference", "diagnostics")
SYS_PATH_EDITS = {"site.addsitedir"}
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
#: the one edit of sys.path a test needs as its subject, not to import code: a backend plugin "installed" in a
#: temporary folder for one test (importlib.metadata finds distributions on sys.path), undone by monkeypatch
ALLOWED = {"tests/inference/test_user_backends.py: monkeypatch.syspath_prepend(...) edits sys.path"}


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not (part.startswith("__") and part.endswith("__"))
               for part in dotted.split("."))


def _ours(dotted: str) -> bool:
    return dotted.split(".")[0] in PACKAGES


def _dotted(node) -> str | None:
    """``a.b.c`` for a Name / Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _is_sys_path(node) -> bool:
    while isinstance(node, ast.Subscript):        # sys.path[:0] = ...
        node = node.value
    return _dotted(node) == "sys.path"


def findings(source: str, filename: str = "<string>") -> list[str]:
    """What in ``source`` imports a private part of bayeszoo or edits sys.path, one line each, in line order."""
    found = []     # (line, what)
    for node in ast.walk(ast.parse(source, filename)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            found += [(line, f"import {a.name}") for a in node.names if _ours(a.name) and _private(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _ours(node.module):
            found += [(line, f"from {node.module} import {a.name}") for a in node.names
                      if _private(f"{node.module}.{a.name}")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED.fullmatch(node.value) \
                and _ours(node.value) and _private(node.value):
            # importlib.import_module("bayeszoo._x"), monkeypatch.setattr("bayeszoo.x._y", ...)
            found.append((line, repr(node.value)))
        elif isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and (_is_sys_path(func.value) or func.attr == "syspath_prepend")) \
                    or _dotted(func) in SYS_PATH_EDITS:
                found.append((line, f"{ast.unparse(func)}(...) edits sys.path"))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_sys_path(t) for t in targets):
                found.append((line, "assigns sys.path"))
    return [f"{filename}:{line}: {what}" for line, what in sorted(found)]


def _test_files():
    for here, dirs, files in os.walk(TESTS):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        yield here, sorted(os.path.join(here, f) for f in files if f.endswith(".py"))


def test_no_test_file_imports_a_private_part_of_bayeszoo_or_edits_sys_path():
    found = []
    for _, paths in _test_files():
        for path in paths:
            with open(path, encoding="utf-8") as fh:
                found += findings(fh.read(), os.path.relpath(path, ROOT).replace(os.sep, "/"))
    allowed = {f for f in found if re.sub(r":\d+:", ":", f) in ALLOWED}
    assert {re.sub(r":\d+:", ":", f) for f in allowed} == ALLOWED, "an entry of ALLOWED is no longer needed"
    found = [f for f in found if f not in allowed]
    assert not found, ("make the seam public (a module without the underscore, or the name exported) or test "
                       "through the public API; put paths in pyproject.toml's pythonpath:\n" + "\n".join(found))


def test_the_scan_finds_each_kind_of_private_import_and_sys_path_edit():
    bad = '''
import sys, site, importlib
import bayeszoo.inference._random
from bayeszoo.inference.gpc import _common as C
from bayeszoo.inference.gpc._common import tilted_moments
from bayeszoo.api import _reference, fit
from inference.slm._common import problem
importlib.import_module("bayeszoo.inference._random")
monkeypatch.setattr("bayeszoo.references._divergence_tip", None)
sys.path.insert(0, "x")
sys.path.append("x")
sys.path[:0] = ["x"]
sys.path += ["x"]
site.addsitedir("x")
monkeypatch.syspath_prepend("x")
'''
    found = findings(bad)
    assert [f.split(":")[1] for f in found] == [str(n) for n in range(3, 16)], found
    assert "from bayeszoo.api import _reference" in found[3] and "fit" not in found[3]


def test_the_scan_passes_public_imports_and_reading_sys_path():
    good = '''
import sys
import bayeszoo as bz
import bayeszoo.inference.gpc.common
from bayeszoo.inference.gpc import common as C
from bayeszoo.numerics import fft as _fft            # a private alias of a public module
from bayeszoo import __version__
from tests.helpers import _private_helper             # the suite's own helpers are not the package
from ._sibling import x
before = list(sys.path)
assert sys.path == before
text = "sys.path.insert(0, 'x') in a message"
name = "bayeszoo.inference.gpc.common"
'''
    assert findings(good) == []


def test_every_folder_of_the_suite_is_a_package():
    missing = [os.path.relpath(here, ROOT) for here, paths in _test_files()
               if paths and not os.path.isfile(os.path.join(here, "__init__.py"))]
    assert not missing, f"add an __init__.py to {missing}, so that its modules are tests.<folder>.<module>"
