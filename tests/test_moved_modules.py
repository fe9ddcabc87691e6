"""Modules renamed to say what they hold: the old import paths still work, warn once (FutureWarning) naming the new
module, and give the new module's own objects; the public names (bz.design, bz.catalogue.build_reference) do not
warn."""
from __future__ import annotations

import contextlib
import importlib
import io
import re
import runpy
import sys
import warnings

import pytest

import bayeszoo as bz

MOVED = [("bayeszoo.design", "bayeszoo.experimental_design"),
         ("bayeszoo.resources", "bayeszoo.memory_guard"),
         ("bayeszoo.references", "bayeszoo.reference_builder"),
         ("bayeszoo.studies.references", "bayeszoo.studies.build_catalogue")]


@pytest.mark.parametrize("old, new", MOVED)
def test_an_old_module_path_warns_once_and_is_the_new_module(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)     # as in a fresh process (restored afterwards)
    target = importlib.import_module(new)
    with pytest.warns(FutureWarning, match=f"^{re.escape(old)} is now {re.escape(new)}; import it") as caught:
        __import__(old)                                             # as the statement `import <old>` does
    assert len(caught) == 1 and caught[0].filename == __file__     # points at the import, not at the shim
    shim = sys.modules[old]
    assert shim is target
    public = [name for name in vars(target) if not name.startswith("_")]
    assert public and all(getattr(shim, name) is getattr(target, name) for name in public)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert importlib.import_module(old) is target                  # once: a second import is silent
        namespace = {}
        exec(f"from {old} import {public[0]}", namespace)
        assert namespace[public[0]] is getattr(target, public[0])


def test_the_public_names_are_the_new_modules_and_do_not_warn():
    from bayeszoo import experimental_design, reference_builder

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bz.design is experimental_design
        assert bz.design.sequential_design is experimental_design.sequential_design
        assert bz.catalogue.build_reference is bz.build_reference is reference_builder.build_reference


@pytest.mark.parametrize("old, new", MOVED[1:3])
def test_the_old_modules_are_still_attributes_of_the_package(old, new, monkeypatch):
    name = old.split(".")[1]
    monkeypatch.delitem(sys.modules, old, raising=False)
    monkeypatch.delattr(bz, name, raising=False)
    with pytest.warns(FutureWarning, match=f"^{re.escape(old)} is now {re.escape(new)}"):
        assert getattr(bz, name) is importlib.import_module(new)
    with pytest.raises(AttributeError, match="no attribute 'no_such_module'"):
        bz.no_such_module


def test_the_old_catalogue_script_still_runs_the_new_one(monkeypatch):
    monkeypatch.delitem(sys.modules, "bayeszoo.studies.references", raising=False)
    monkeypatch.setattr(sys, "argv", ["references", "--help"])
    out = io.StringIO()
    with pytest.warns(FutureWarning, match="python -m bayeszoo.studies.build_catalogue"), \
            contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit:
        runpy.run_module("bayeszoo.studies.references", run_name="__main__")
    assert exit.value.code == 0
    assert out.getvalue().startswith("usage: python -m bayeszoo.studies.build_catalogue")
    assert "--dry-run" in out.getvalue()
