"""Backend registry.

A backend is a function ``run(model, data, *, draws, tune, chains, seed, progress, **options) -> Fit``
registered under a name. Generic backends (``nuts``, ``numpyro``, ``advi`` ...) apply to every model that
declares itself in PyMC / NumPyro; hand-written ones are registered for one family (``family="rvm"``), so
the same name (``gibbs``, ``vb``) can mean a different algorithm in each family.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

_GENERIC: dict[str, "Backend"] = {}
_FAMILY: dict[tuple[str, str], "Backend"] = {}


@dataclass(frozen=True)
class Backend:
    name: str
    run: Callable
    kind: str                     # "mcmc" or "approximation"
    family: str | None            # None for generic backends
    description: str = ""
    applies: Callable | None = None  # optional predicate model -> bool (e.g. regression only)

    def applies_to(self, model) -> bool:
        if self.family is not None and self.family != model.family:
            return False
        return self.applies is None or bool(self.applies(model))


def register(name: str, *, kind: str, family: str | None = None, description: str = "",
             applies: Callable | None = None):
    """Decorator that registers ``run`` as backend ``name`` (for one ``family``, or generic if None)."""
    if kind not in ("mcmc", "approximation"):
        raise ValueError(f"kind must be 'mcmc' or 'approximation', got {kind!r}")

    def deco(run):
        backend = Backend(name=name, run=run, kind=kind, family=family,
                          description=description or (run.__doc__ or "").strip().split("\n")[0],
                          applies=applies)
        table, key = (_GENERIC, name) if family is None else (_FAMILY, (family, name))
        table[key] = backend
        return run

    return deco


def _ensure_loaded():
    import bayeszoo.inference  # noqa: F401  (importing registers every backend)


def backends_for(model) -> list[str]:
    """Names of the backends that apply to ``model``: generic ones first, then the family's own."""
    _ensure_loaded()
    names = [b.name for b in _GENERIC.values() if b.applies_to(model)]
    names += [b.name for (fam, _), b in _FAMILY.items() if fam == model.family and b.applies_to(model)]
    return names


def get(model, name: str) -> Backend:
    """The backend called ``name`` for ``model``; a ValueError naming the choices if there is none."""
    _ensure_loaded()
    if not isinstance(name, str):
        raise ValueError(f"backend must be a name (str), got {type(name).__name__}")
    backend = _FAMILY.get((model.family, name)) or _GENERIC.get(name)
    if backend is None or not backend.applies_to(model):
        raise ValueError(f"unknown backend {name!r} for {type(model).__name__}; "
                         f"available: {', '.join(backends_for(model))}")
    return backend


def all_backends() -> list[Backend]:
    _ensure_loaded()
    return list(_GENERIC.values()) + list(_FAMILY.values())
