"""Backend registry: the one contract every backend, generic or hand-written, follows.

A backend is a function ``run(model, data, *, draws, tune, chains, seed, progress, **options) -> Fit``
registered under a name with :func:`register`. Registration declares everything the harness needs to know:

* ``kind``: "mcmc" or "approximation" (draws of an approximation are i.i.d. and not judged by R-hat);
* ``options``: name -> :class:`Option` (default and a one-line meaning). :func:`bayeszoo.fit` merges the user's
  options into these defaults, rejects unknown names and runs ``check`` once, before any work; ``run`` then
  receives every option, resolved;
* ``defaults``: the draws / tune / chains that suit the backend (a dict, or a function of model and data, e.g.
  fewer draws from an approximation of a large image); :data:`HARNESS_DEFAULTS` otherwise;
* ``library``: the distribution whose name and version go into the InferenceData's provenance attributes.

Generic backends (``nuts``, ``numpyro``, ...) apply to every model that declares itself in PyMC / NumPyro;
hand-written ones are registered for one family (``family="rvm"``), so the same name (``gibbs``, ``vb``) can mean a
different algorithm in each family. Importing :mod:`bayeszoo.inference` registers them all.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple

from bayeszoo.results import KINDS

#: option names retired for one vocabulary across backends, and the names that replaced them
RENAMED_OPTIONS = {"cg_iter": "cg_max_iter", "cg_maxiter": "cg_max_iter", "max_treedepth": "max_tree_depth",
                   "maxiter": "max_iter", "n_iter": "max_iter", "iterations": "max_iter", "thinning": "thin",
                   "beta_step": "beta_update"}
HARNESS_DEFAULTS = {"draws": 1000, "tune": 1000, "chains": 4}
#: the ``defaults`` of an approximation: its draws are i.i.d., it has no warm-up
APPROXIMATION_DEFAULTS = {"tune": 0}

_GENERIC: dict[str, "Backend"] = {}
_FAMILY: dict[tuple[str, str], "Backend"] = {}


class Option(NamedTuple):
    """One backend option: its default, what it means (one line), and what it may be (a constraint of
    :mod:`bayeszoo.checks`, called as ``constraint(owner, name, value)``)."""

    default: Any
    meaning: str
    constraint: Callable


def owner(family: str | None, backend: str) -> str:
    """How the messages of a backend name it: "SLM backend 'gibbs'", "backend 'nuts'" for a generic one."""
    return f"backend {backend!r}" if family is None else f"{family.upper()} backend {backend!r}"


@dataclass(frozen=True)
class Backend:
    name: str
    run: Callable
    kind: str                                   # "mcmc" or "approximation"
    family: str | None                          # None for generic backends
    description: str = ""
    options: Mapping[str, Option] = field(default_factory=dict)
    check: Callable[[dict, Any, Any], dict | None] | None = None   # (options, model, data): what needs the data
    defaults: Mapping[str, int] | Callable | None = None   # draws / tune / chains, or model, data -> those
    applies: Callable | None = None             # optional predicate model -> bool (e.g. regression only)
    library: str = "bayeszoo"                   # provenance: the library that does the inference
    unavailable: Callable | None = None         # optional model -> why this backend cannot run it (str) or None

    def applies_to(self, model) -> bool:
        if self.family is not None and self.family != model.family:
            return False
        if self.unavailable is not None and self.unavailable(model) is not None:
            return False
        return self.applies is None or bool(self.applies(model))

    @property
    def owner(self) -> str:
        return owner(self.family, self.name)

    def resolve(self, options: dict, model, data) -> dict:
        """``options`` merged into the declared defaults, each checked against its constraint, then the backend's
        ``check(options, model, data)``; a ValueError names an unknown or renamed option or a bad value."""
        for old in sorted(set(options) - set(self.options)):
            new = RENAMED_OPTIONS.get(old)
            if new in self.options:
                raise ValueError(f"{self.owner}: option {old!r} is now called {new!r}")
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            allowed = ", ".join(sorted(self.options)) or "no options"
            raise ValueError(f"unknown option(s) {unknown} for {self.owner}; allowed: {allowed}")
        resolved = {name: opt.default for name, opt in self.options.items()}
        resolved.update(options)
        for name, opt in self.options.items():
            resolved[name] = opt.constraint(self.owner, f"option {name!r}", resolved[name])
        if self.check is not None:
            checked = self.check(dict(resolved), model, data)
            if checked is not None:
                resolved = dict(checked)
        return resolved

    def harness_defaults(self, model, data) -> dict:
        """The draws / tune / chains this backend uses when the caller does not say."""
        own = self.defaults(model, data) if callable(self.defaults) else (self.defaults or {})
        return {**HARNESS_DEFAULTS, **own}


def register(name: str, *, kind: str, family: str | None = None, description: str = "",
             options: Mapping[str, Option] | None = None, check: Callable | None = None,
             defaults: Mapping[str, int] | Callable | None = None, applies: Callable | None = None,
             library: str = "bayeszoo", unavailable: Callable | None = None):
    """Decorator that registers ``run`` as backend ``name`` (for one ``family``, or generic if None).

    ``applies(model) -> bool`` restricts the backend to some configurations without a reason to give (e.g.
    regression only); ``unavailable(model) -> str | None`` does the same with the reason, which ``get`` passes on
    (e.g. :func:`needs_declaration`)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be 'mcmc' or 'approximation'; got {kind!r}")
    for opt_name, opt in (options or {}).items():
        if not isinstance(opt, Option) or not opt.meaning or not callable(opt.constraint):
            raise TypeError(f"backend {name!r}: option {opt_name!r} must be an Option(default, meaning, "
                            f"constraint) with a meaning and a constraint")
        if opt_name in RENAMED_OPTIONS:
            raise TypeError(f"backend {name!r}: option {opt_name!r} is a retired name; use "
                            f"{RENAMED_OPTIONS[opt_name]!r}")
        try:
            opt.constraint(owner(family, name), f"option {opt_name!r}", opt.default)
        except ValueError as exc:
            raise TypeError(f"the default of an option breaks its own constraint: {exc}") from None

    def deco(run):
        backend = Backend(name=name, run=run, kind=kind, family=family,
                          description=description or (run.__doc__ or "").strip().split("\n")[0],
                          options=dict(options or {}), check=check, defaults=defaults, applies=applies, library=library,
                          unavailable=unavailable)
        table, key = (_GENERIC, name) if family is None else (_FAMILY, (family, name))
        table[key] = backend
        return run

    return deco


def needs_declaration(library: str) -> Callable:
    """``unavailable`` for the backends that sample a model's ``library`` declaration ("pymc" or "numpyro")."""
    return lambda model: model.declaration_problem(library)


def backends_for(model) -> list[str]:
    """Names of the backends that apply to ``model``: generic ones first, then the family's own."""
    names = [b.name for b in _GENERIC.values() if b.applies_to(model)]
    names += [b.name for (fam, _), b in _FAMILY.items() if fam == model.family and b.applies_to(model)]
    return names


def get(model, name: str) -> Backend:
    """The backend called ``name`` for ``model``; a ValueError naming the choices if there is none."""
    if not isinstance(name, str):
        raise ValueError(f"backend must be a name (str), got {type(name).__name__}")
    backend = _FAMILY.get((model.family, name)) or _GENERIC.get(name)
    reason = backend.unavailable(model) if backend is not None and backend.unavailable is not None else None
    if reason is not None:
        raise ValueError(f"backend {name!r} cannot run this {type(model).__name__}: {reason}")
    if backend is None or not backend.applies_to(model):
        raise ValueError(f"unknown backend {name!r} for {type(model).__name__}; "
                         f"available: {', '.join(backends_for(model))}")
    return backend


def all_backends() -> list[Backend]:
    return list(_GENERIC.values()) + list(_FAMILY.values())
