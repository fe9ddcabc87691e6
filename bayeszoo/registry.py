"""Backend registry: the one contract every backend, generic or hand-written, follows.

A backend is a function ``run(model, data, *, draws, tune, chains, seed, progress, **options) -> Fit``
registered under a name with :func:`register`. Registration declares everything the harness needs to know:

* ``kind``: "mcmc" or "approximation" (draws of an approximation are i.i.d. and not judged by R-hat);
* ``options``: name -> :class:`Option` (default and a one-line meaning). :func:`bayeszoo.fit` merges the user's
  options into these defaults, rejects unknown names and runs ``check`` once, before any work; ``run`` then
  receives every option, resolved;
* ``relations``: what two options must satisfy together (:class:`bayeszoo.checks.AtMost`: ``min_sweeps`` <=
  ``max_sweeps``), checked after each option's own constraint and before ``check``;
* ``defaults``: the draws / tune / chains that suit the backend (a dict, or a function of model and data, e.g.
  fewer draws from an approximation of a large image); :data:`HARNESS_DEFAULTS` otherwise;
* ``library``: the distribution whose name and version go into the InferenceData's provenance attributes;
* ``memory``: ``(model, data, options) -> bayeszoo.resources.Need``, the backend's working memory (its dense
  matrices), which ``bz.fit`` adds to the stored draws and checks against the machine before the backend runs.

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
    relations: tuple = ()                       # checks.AtMost(...): contradictions between options, refused
    memory: Callable | None = None              # (model, data, options) -> resources.Need: working memory

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
        """``options`` merged into the declared defaults, each checked against its constraint, then against the
        declared ``relations`` (two options that contradict each other), then the backend's ``check(options, model,
        data)``; a ValueError names an unknown or renamed option, a bad value or the contradiction."""
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
        for relation in self.relations:
            relation(self.owner, resolved, data)
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
             library: str = "bayeszoo", unavailable: Callable | None = None, relations: tuple = (),
             memory: Callable | None = None, replace: bool = False):
    """Decorator that registers ``run`` as backend ``name`` (for one ``family``, or generic if None).

    ``applies(model) -> bool`` restricts the backend to some configurations without a reason to give (e.g.
    regression only); ``unavailable(model) -> str | None`` does the same with the reason, which ``get`` passes on
    (e.g. :func:`needs_declaration`). ``relations`` (e.g. ``(checks.AtMost("min_sweeps", "max_sweeps"),)``) are
    refused contradictions between options; the defaults must satisfy them. ``memory(model, data, options)`` declares
    the backend's working memory (``bayeszoo.resources``). A name already taken (in the same table, or one that a
    family backend and a generic one would share) is refused unless ``replace``."""
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
    relations = tuple(relations)
    for relation in relations:
        undeclared = sorted(set(relation.names) - set(options or {}))
        if undeclared:
            raise TypeError(f"backend {name!r}: a relation names undeclared option(s) {undeclared}")
        try:
            relation(owner(family, name), {k: opt.default for k, opt in (options or {}).items()})
        except ValueError as exc:
            raise TypeError(f"the defaults of the options contradict a relation: {exc}") from None

    def deco(run):
        backend = Backend(name=name, run=run, kind=kind, family=family,
                          description=description or (run.__doc__ or "").strip().split("\n")[0],
                          options=dict(options or {}), check=check, defaults=defaults, applies=applies, library=library,
                          unavailable=unavailable, relations=relations, memory=memory)
        table, key = (_GENERIC, name) if family is None else (_FAMILY, (family, name))
        if not replace:
            _refuse_taken_name(backend, table.get(key))
        table[key] = backend
        return run

    return deco


def _same_definition(a: Callable, b: Callable) -> bool:
    """The same function, or the same definition imported again (a reloaded module)."""
    return a is b or (getattr(a, "__module__", None), getattr(a, "__qualname__", None)) == \
        (getattr(b, "__module__", None), getattr(b, "__qualname__", None))


def _refuse_taken_name(backend: "Backend", existing: "Backend | None") -> None:
    """A ValueError when ``backend``'s name is already another backend's: in its own table, or (a family backend
    hiding a generic one of that name for the family, or a generic one hidden by a family's) across the two."""
    where = f"for the {backend.family!r} family" if backend.family else "as a generic backend"
    if existing is not None and not _same_definition(existing.run, backend.run):
        raise ValueError(f"backend {backend.name!r} is already registered {where} ({existing.description}); "
                         f"choose another name, or pass replace=True to replace it")
    if backend.family is not None and backend.name in _GENERIC:
        raise ValueError(f"backend {backend.name!r} is the name of a generic backend ({_GENERIC[backend.name].description}), "
                         f"which a {backend.family!r} backend of that name would hide; choose another name, or pass "
                         f"replace=True")
    if backend.family is None:
        hidden = sorted(fam for fam, name in _FAMILY if name == backend.name)
        if hidden:
            raise ValueError(f"backend {backend.name!r} is already the name of a backend of the {', '.join(hidden)} "
                             f"family, which would hide this generic one there; choose another name, or pass "
                             f"replace=True")


def register_backend(name: str, run: Callable, *, kind: str, family: str | None = None, options=None,
                     description: str = "", check: Callable | None = None, defaults=None,
                     applies: Callable | None = None, library: str = "user", replace: bool = False) -> "Backend":
    """Add ``run`` as backend ``name`` from outside the package (a notebook, another package): the contract of
    :func:`register` (``run(model, data, *, draws, tune, chains, seed, progress, **options) -> Fit``, built with
    ``bayeszoo.results.build_fit``; ``options`` name -> :class:`Option`). A name already taken is refused unless
    ``replace=True``. Returns the registered :class:`Backend`."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a backend name must be a Python identifier (letters, digits, _); got {name!r}")
    if not callable(run):
        raise ValueError(f"backend {name!r}: run must be a function run(model, data, *, draws, tune, chains, seed, "
                         f"progress, **options) returning a Fit; got {type(run).__name__}")
    register(name, kind=kind, family=family, description=description, options=options, check=check,
             defaults=defaults, applies=applies, library=library, replace=replace)(run)
    return _FAMILY[(family, name)] if family is not None else _GENERIC[name]


#: the entry-point group through which installed packages add backends (each entry point names a module whose
#: import registers them, or a function to call that does)
PLUGIN_GROUP = "bayeszoo.backends"
_plugins_loaded = False


def load_plugins() -> list[str]:
    """Import the backends of every installed package that declares the :data:`PLUGIN_GROUP` entry point, once
    per process (the CLI and Dask workers see them as a notebook does); a plugin that fails to load is skipped
    with a warning naming it. Returns the entry points loaded."""
    global _plugins_loaded
    if _plugins_loaded:
        return []
    _plugins_loaded = True
    import warnings
    from importlib.metadata import entry_points

    loaded = []
    for point in entry_points(group=PLUGIN_GROUP):
        try:
            target = point.load()
            if callable(target):
                target()
            loaded.append(point.name)
        except Exception as exc:   # a broken plugin must not break bayeszoo
            warnings.warn(f"bayeszoo: the backend plugin {point.name!r} ({point.value}) failed to load: "
                          f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)
    return loaded


def needs_declaration(library: str) -> Callable:
    """``unavailable`` for the backends that sample a model's ``library`` declaration ("pymc" or "numpyro")."""
    return lambda model: model.declaration_problem(library)


def backends_for(model) -> list[str]:
    """Names of the backends that apply to ``model``: generic ones first, then the family's own."""
    load_plugins()
    names = [b.name for b in _GENERIC.values() if b.applies_to(model)]
    names += [b.name for (fam, _), b in _FAMILY.items() if fam == model.family and b.applies_to(model)]
    return names


def get(model, name: str) -> Backend:
    """The backend called ``name`` for ``model``; a ValueError naming the choices if there is none."""
    if not isinstance(name, str):
        raise ValueError(f"backend must be a name (str), got {type(name).__name__}")
    load_plugins()
    backend = _FAMILY.get((model.family, name)) or _GENERIC.get(name)
    reason = backend.unavailable(model) if backend is not None and backend.unavailable is not None else None
    if reason is not None:
        raise ValueError(f"backend {name!r} cannot run this {type(model).__name__}: {reason}")
    if backend is None or not backend.applies_to(model):
        raise ValueError(f"unknown backend {name!r} for {type(model).__name__}; "
                         f"available: {', '.join(backends_for(model))}")
    return backend


def all_backends() -> list[Backend]:
    load_plugins()
    return list(_GENERIC.values()) + list(_FAMILY.values())
