"""Functions a reader can hold: no function of the package is longer than :data:`MAX_LINES` lines.

The package is bayeszoo/ and the models/, inference/ and diagnostics/ folders it links to, each file counted once
(the links resolved). A function's length runs from its ``def`` line to its last line, docstring and nested
functions included. There is no allow-list: every function is within the limit.
"""
from __future__ import annotations

import ast
import os

from tests.helpers import ROOT

MAX_LINES = 80

def _modules() -> list[str]:
    """Every .py file of the package as its path under ROOT, links resolved, each file once."""
    seen = {}
    for here, dirs, files in os.walk(os.path.join(ROOT, "bayeszoo"), followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                real = os.path.realpath(os.path.join(here, name))
                seen.setdefault(real, os.path.relpath(real, ROOT).replace(os.sep, "/"))
    return sorted(seen.values())


def _function_lengths(source: str) -> dict[str, int]:
    """Each function and method of ``source`` (nested ones too) by its qualified name -> its length in lines."""
    lengths = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lengths[name] = child.end_lineno - child.lineno + 1
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return lengths


def _lengths() -> dict[str, int]:
    lengths = {}
    for path in _modules():
        with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
            for name, n in _function_lengths(fh.read()).items():
                lengths[f"{path}:{name}"] = n
    return lengths


def test_the_walk_reaches_every_linked_folder_once():
    modules = _modules()
    for top in ("bayeszoo/", "models/", "inference/", "diagnostics/"):
        assert any(m.startswith(top) for m in modules), top
    assert not any(m.startswith("bayeszoo/models/") or m.startswith("bayeszoo/inference/") for m in modules)
    assert len(modules) == len(set(modules))


def test_lengths_are_measured_from_def_to_last_line():
    source = "class A:\n    def f(self):\n        '''doc'''\n\n        def g():\n            return 1\n        return g\n"
    assert _function_lengths(source) == {"A.f": 6, "A.f.g": 2}


def test_no_function_is_longer_than_the_limit():
    long = {name: n for name, n in _lengths().items() if n > MAX_LINES}
    assert not long, (f"functions over {MAX_LINES} lines (split them into named steps): "
                      + ", ".join(f"{name} ({n})" for name, n in sorted(long.items())))

