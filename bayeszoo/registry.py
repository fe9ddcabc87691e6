"""Backend registry: the one contract every backend, generic or hand-written, follows.

A backend is a function ``run(model, data, *, draws, tune, chains, ctx, **options) -> Fit`` registered under a
name with :func:`register`; ``ctx`` is the :class:`RunContext` of the call, through which the harness tells the
backend who it is (family, name, the label of its messages), how to seed (one scheme for every backend), whether to
show progress and what to record in the Fit. Registration declares everything the harness needs to know:

* ``kind``: "mcmc" or "approximation" (draws of an approximation are i.i.d. and not judged by R-hat);
* ``options``: name -> :class:`Option` (default and a one-line meaning). :func:`bayeszoo.fit` merges the user's
  options into these defaults, rejects unknown names and runs ``check`` once, before any work; ``run`` then
  receives every option, resolved;
* ``relations``: what two options must satisfy together (:class:`bayeszoo.checks.AtMost`: ``min_sweeps`` <=
  ``max_sweeps``), checked after each option's own constraint and before ``check``;
* ``defaults``: the draws / tune / chains that suit the backend (a dict, or a function of model and data, e.g.
  fewer draws from an approximation of a large image); :data:`HARNESS_DEFAULTS` otherwise;
* ``library``: the distribution whose name and version go into the InferenceData's provenance attributes;
* ``memory``: ``(model, data, options) -> bayeszoo.memory_guard.Need``, the backend's working memory (its dense
  matrices), which ``bz.fit`` adds to the stored draws and checks against the machine before the backend runs.

Generic backends (``nuts``, ``numpyro``, ...) apply to every model that declares itself in PyMC / NumPyro;
hand-written ones are registered for one family (``family="rvm"``), so the same name (``gibbs``, ``vb``) can mean a
different algorithm in each family. Importing :mod:`bayeszoo.inference` registers them all.
"""
from __future__ import annotations

import difflib
import inspect
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from bayeszoo import checks
from bayeszoo.models import FAMILIES, USER_FAMILY
from bayeszoo.results import KINDS, Fit, jsonable

#: option names retired for one vocabulary across backends, and the names that replaced them
RENAMED_OPTIONS = {"cg_iter": "cg_max_iter", "cg_maxiter": "cg_max_iter", "max_treedepth": "max_tree_depth",
                   "maxiter": "max_iter", "n_iter": "max_iter", "iterations": "max_iter", "thinning": "thin",
                   "beta_step": "beta_update"}
#: other libraries' names of the harness's counts (and AIS's runs, one draw each), refused naming the count
COUNT_NAMES = {"num_samples": "draws", "n_samples": "draws", "n_draws": "draws", "n_runs": "draws",
               "num_warmup": "tune", "n_tune": "tune", "num_chains": "chains", "n_chains": "chains"}
HARNESS_DEFAULTS = {"draws": 1000, "tune": 1000, "chains": 4}
#: the ``defaults`` of an approximation: its draws are i.i.d., it has no warm-up
APPROXIMATION_DEFAULTS = {"tune": 0}

_GENERIC: dict[str, "Backend"] = {}
_FAMILY: dict[tuple[str, str], "Backend"] = {}


class Option(NamedTuple):
    """One backend option: its default, what it means (one line), and what it may be (a constraint of
    :mod:`bayeszoo.checks`, called as ``constraint(owner, name, value)``, or an any-of list of them)."""

    default: Any
    meaning: str
    constraint: Callable


def owner(family: str | None, backend: str) -> str:
    """How the messages of a backend name it: "SLM backend 'gibbs'", "backend 'nuts'" for a generic one."""
    return f"backend {backend!r}" if family is None else f"{family.upper()} backend {backend!r}"


@dataclass(frozen=True)
class RunContext:
    """What the harness (``bz.fit``) tells a backend's ``run`` about the call, as NumPyro's ``MCMC`` owns keys,
    chains and progress while its kernel only steps: who the backend is (``family``, ``backend``, ``kind`` and
    :attr:`owner`, the label of its messages), the ``seed`` (an int: ``bz.fit`` resolves None), ``progress``, and
    what the Fit records of the call (``settings``: the counts and options asked for; ``provenance``: model spec,
    data fingerprint, backend, version), which :func:`bayeszoo.results.build_fit` writes when handed the context.

    **The seed scheme**, the one every backend draws from. Stream ``(k1, k2, ...)`` of seed ``s`` is

    * for NumPy, ``default_rng(SeedSequence([s, k1, k2, ...]))`` (:meth:`numpy_rng`); the root stream ``()`` is
      ``default_rng(s)``;
    * for JAX, ``PRNGKey(s)`` folded in with ``k1``, then ``k2``, ... (:meth:`jax_key`);

    and chain ``c`` is stream ``(c,)`` (:meth:`chain_rngs`, :meth:`chain_keys`), so chain 0's draws do not depend on
    how many chains run. What a backend draws besides its chains (a random start shared by all of them) comes
    from the root stream, what belongs to chain ``c`` beyond its main stream from ``(c, 1)``, ``(c, 2)``, ...;
    a library that takes one integer seed per chain (PyMC) gets :meth:`chain_seeds`, drawn from the root stream.
    """

    family: str | None
    backend: str
    kind: str
    seed: int
    progress: bool = False
    settings: Mapping = field(default_factory=dict)
    provenance: Mapping = field(default_factory=dict)

    @property
    def owner(self) -> str:
        """How the messages of the backend name it: "SLM backend 'gibbs'", "backend 'nuts'"."""
        return owner(self.family, self.backend)

    @property
    def record(self) -> dict:
        """What every Fit of the call records: ``seed``, ``settings``, ``provenance``."""
        return jsonable({"seed": self.seed, "settings": dict(self.settings), "provenance": dict(self.provenance)})

    def numpy_rng(self, *stream: int) -> np.random.Generator:
        """The NumPy generator of ``stream`` (class docstring)."""
        return np.random.default_rng(np.random.SeedSequence([int(self.seed), *map(int, stream)]))

    def chain_rngs(self, chains: int) -> list[np.random.Generator]:
        """One generator per chain: chain ``c`` is stream ``(c,)``."""
        return [self.numpy_rng(c) for c in range(chains)]

    def chain_seeds(self, chains: int) -> list[int]:
        """One integer seed per chain, for a library that seeds each chain from an int (PyMC), drawn from the
        root stream."""
        return [int(s) for s in self.numpy_rng().integers(0, 2**30, size=chains)]

    def jax_key(self, *stream: int):
        """The JAX key of ``stream`` (class docstring)."""
        import jax

        key = jax.random.PRNGKey(int(self.seed))
        for k in stream:
            key = jax.random.fold_in(key, int(k))
        return key

    def chain_keys(self, chains: int):
        """The chains' keys stacked, shape (chains, 2): chain ``c`` is stream ``(c,)``."""
        import jax
        import jax.numpy as jnp

        root = self.jax_key()
        return jax.vmap(lambda c: jax.random.fold_in(root, c))(jnp.arange(chains))


def takes_context(run: Callable) -> bool:
    """Whether ``run`` takes the :class:`RunContext` (a parameter ``ctx``); one that does not is called the way
    backends were before the context, with ``seed=`` and ``progress=``."""
    return _takes(run, "ctx")


def _takes(function: Callable, name: str) -> bool:
    try:
        return name in inspect.signature(function).parameters
    except (TypeError, ValueError):   # a callable without a signature Python can read
        return False


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
    memory: Callable | None = None              # (model, data, options) -> memory_guard.Need: working memory
    takes_context: bool | None = None           # run(..., ctx=RunContext); False: run(..., seed=, progress=)

    def __post_init__(self):
        if self.takes_context is None:   # read from run's signature
            object.__setattr__(self, "takes_context", takes_context(self.run))

    def applies_to(self, model) -> bool:
        if self.family is not None and self.family != model.family:
            return False
        if self.unavailable is not None and self.unavailable(model) is not None:
            return False
        return self.applies is None or bool(self.applies(model))

    @property
    def owner(self) -> str:
        return owner(self.family, self.name)

    def context(self, *, seed: int, progress: bool, settings: Mapping | None = None,
                provenance: Mapping | None = None) -> RunContext:
        """The :class:`RunContext` of one call of this backend."""
        return RunContext(family=self.family, backend=self.name, kind=self.kind, seed=int(seed),
                          progress=bool(progress), settings=dict(settings or {}), provenance=dict(provenance or {}))

    def call(self, model, data, ctx: RunContext, *, draws: int, tune: int, chains: int, options: dict):
        """``run`` called with the context, or, for a run that does not take one, with ``seed=`` and
        ``progress=`` as before the context existed."""
        if self.takes_context:
            return self.run(model, data, draws=draws, tune=tune, chains=chains, ctx=ctx, **options)
        return self.run(model, data, draws=draws, tune=tune, chains=chains, seed=ctx.seed, progress=ctx.progress,
                        **options)

    def resolve(self, options: dict, model, data) -> dict:
        """``options`` merged into the declared defaults, each checked against its constraint, then against the
        declared ``relations`` (two options that contradict each other), then the backend's ``check(options, model,
        data)``; a ValueError names an unknown or renamed option, a bad value or the contradiction."""
        for old in sorted(set(options) - set(self.options)):
            new = RENAMED_OPTIONS.get(old)
            if new in self.options:
                raise ValueError(f"{self.owner}: option {old!r} is now called {new!r}")
        counts = sorted(set(options) & set(COUNT_NAMES) - set(self.options))
        if counts:
            said = ", ".join(f"{k!r} is {COUNT_NAMES[k]}=" for k in counts)
            raise ValueError(f"{self.owner}: {said} of bz.fit / bz.compare, not a backend option")
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            allowed = ", ".join(sorted(self.options)) or "no options"
            raise ValueError(f"unknown option(s) {unknown} for {self.owner}; allowed: {allowed}")
        resolved = {name: opt.default for name, opt in self.options.items()}
        resolved.update(options)
        for name, opt in self.options.items():
            resolved[name] = checks.check(self.owner, f"option {name!r}", opt.constraint, resolved[name])
        for relation in self.relations:
            relation(self.owner, resolved, data)
        if self.check is not None:
            named = {"owner": self.owner} if _takes(self.check, "owner") else {}   # the label of its messages
            checked = self.check(dict(resolved), model, data, **named)
            if checked is not None:
                resolved = dict(checked)
        return resolved

    def harness_defaults(self, model, data) -> dict:
        """The draws / tune / chains this backend uses when the caller does not say."""
        own = self.defaults(model, data) if callable(self.defaults) else (self.defaults or {})
        return {**HARNESS_DEFAULTS, **own}

    def checked_result(self, result, model, data, *, draws: int, chains: int, provenance: dict) -> Fit:
        """``result`` when it is what ``run`` owes the call that asked for ``chains`` x ``draws`` of ``model`` on
        ``data``, whose ``provenance`` (model spec and data fingerprint) ``build_fit`` recorded: a Fit under this
        backend's name and kind, of this model and data, with those chains and draws, finite, of every canonical
        variable. Else a :class:`BackendError` naming the backend and everything wrong, so that nothing downstream
        (a grid's table, a save) meets what is not a fit of its cell."""
        advice = (f"run must return the Fit that bayeszoo.results.build_fit(model, data, {self.name!r}, "
                  f"{self.kind!r}, draws, ...) makes of the draws it was asked for")
        if not isinstance(result, Fit):
            raise BackendError(f"{self.owner} returned {type(result).__name__} {_short(result)}, not a Fit; {advice}")
        problems = []
        if result.backend != self.name:
            problems.append(f"it is labelled {result.backend!r}, not {self.name!r}")
        if result.kind != self.kind:
            problems.append(f"its kind is {result.kind!r}, the backend is registered as {self.kind!r}")
        if jsonable(result.model_spec) != provenance["model"]:
            differ = _spec_difference(result.model_spec, provenance["model"])
            problems.append(f"it is a fit of another model ({differ})")
        recorded = (result.info.get("provenance") or {}).get("data")
        if recorded != provenance["data"]:
            problems.append("it is a fit of other data" if recorded is not None else
                            "it does not record the data it was made of (not built by build_fit in this call)")
        posterior = result.idata.posterior if "posterior" in result.idata.groups() else None
        if posterior is None:
            problems.append("it has no posterior group")
        else:
            have = (posterior.sizes.get("chain"), posterior.sizes.get("draw"))
            if have != (chains, draws):
                problems.append(f"it holds {have[0]} chains x {have[1]} draws, {chains} x {draws} were asked for")
            missing = [name for name in model.var_dims(data) if name not in posterior.data_vars]
            if missing:
                problems.append(f"its posterior lacks the canonical variable(s) {missing}")
            bad = [name for name, values in posterior.data_vars.items()
                   if np.issubdtype(values.dtype, np.number) and not np.all(np.isfinite(values.values))]
            if bad:
                problems.append(f"it has NaN or inf draws of {bad}")
        if problems:
            raise BackendError(f"{self.owner} returned a Fit that is not the one asked for: {'; '.join(problems)}; "
                               f"{advice}")
        return result


class BackendError(ValueError):
    """What a backend's ``run`` returned is not the Fit the call asked for (:meth:`Backend.checked_result`); the
    message names the backend and what is wrong."""


def _short(value, limit: int = 60) -> str:
    text = " ".join(repr(value).split())   # on one line: a table's error column shows the first
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _spec_difference(got: Mapping, want: Mapping) -> str:
    """The options in which two model specs differ, as "width=5.0 instead of 3.0"."""
    got, want = jsonable(dict(got)), jsonable(dict(want))
    keys = [k for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)]
    return ", ".join(f"{k}={_short(got.get(k), 30)} instead of {_short(want.get(k), 30)}" for k in keys[:4])


def known_families() -> list[str]:
    """The families a backend may be registered for: the model families and ``"user"`` (models of one's own)."""
    return sorted(FAMILIES) + [USER_FAMILY]


def _check_family(name: str, family) -> None:
    if family is None:
        return
    known = known_families()
    if not isinstance(family, str) or family not in known:
        close = difflib.get_close_matches(str(family), known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"backend {name!r}: unknown family {family!r}; {hint}the families are {', '.join(known)} "
                         f"(family=None registers a generic backend, for every model)")


def register(name: str, *, kind: str, family: str | None = None, description: str = "",
             options: Mapping[str, Option] | None = None, check: Callable | None = None,
             defaults: Mapping[str, int] | Callable | None = None, applies: Callable | None = None,
             library: str = "bayeszoo", unavailable: Callable | None = None, relations: tuple = (),
             memory: Callable | None = None, replace: bool = False):
    """Decorator that registers ``run`` as backend ``name`` (for one ``family``, or generic if None).

    ``check(options, model, data)`` is called with ``owner=`` (the label of the backend's messages) as well when
    it has a parameter of that name.

    ``applies(model) -> bool`` restricts the backend to some configurations without a reason to give (e.g.
    regression only); ``unavailable(model) -> str | None`` does the same with the reason, which ``get`` passes on
    (e.g. :func:`needs_declaration`). ``relations`` (e.g. ``(checks.AtMost("min_sweeps", "max_sweeps"),)``) are
    refused contradictions between options; the defaults must satisfy them. ``memory(model, data, options)`` declares
    the backend's working memory (``bayeszoo.memory_guard``). A name already taken (in the same table, or one that a
    family backend and a generic one would share) is refused unless ``replace``; an unknown ``family`` is refused."""
    add = _declaration(name, kind=kind, family=family, description=description, options=options, check=check,
                       defaults=defaults, applies=applies, library=library, unavailable=unavailable,
                       relations=relations, memory=memory, replace=replace)

    def deco(run):
        add(run)
        return run

    return deco


def _declaration(name: str, *, kind: str, family: str | None, description: str, options, check, defaults, applies,
                 library: str, unavailable, relations: tuple, memory, replace: bool) -> Callable[[Callable], Backend]:
    """The declaration of :func:`register`, checked; returns ``add(run) -> Backend``, which registers ``run``
    under it (or, while a plugin loads, refuses a backend that would replace one, with a warning)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be 'mcmc' or 'approximation'; got {kind!r}")
    _check_family(name, family)
    for opt_name, opt in (options or {}).items():
        if not isinstance(opt, Option) or not opt.meaning or not _is_constraint(opt.constraint):
            raise TypeError(f"backend {name!r}: option {opt_name!r} must be an Option(default, meaning, "
                            f"constraint) with a meaning and a constraint")
        if opt_name in RENAMED_OPTIONS:
            raise TypeError(f"backend {name!r}: option {opt_name!r} is a retired name; use "
                            f"{RENAMED_OPTIONS[opt_name]!r}")
        try:
            checks.check(owner(family, name), f"option {opt_name!r}", opt.constraint, opt.default)
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

    def add(run) -> Backend:
        backend = Backend(name=name, run=run, kind=kind, family=family,
                          description=description or (run.__doc__ or "").strip().split("\n")[0],
                          options=dict(options or {}), check=check, defaults=defaults, applies=applies, library=library,
                          unavailable=unavailable, relations=relations, memory=memory)
        table, key = (_GENERIC, name) if family is None else (_FAMILY, (family, name))
        if _loading is not None:   # an installed package's plugin adds backends, never replaces one
            point, protected = _loading
            clash = _clash(backend, protected)
            if clash is not None:
                warnings.warn(f"bayeszoo: the backend plugin {point.name!r} ({point.value}) registers {backend.owner}, "
                              f"but {clash}; a plugin may add backends, never replace one: not registered (the "
                              f"plugin's other backends are)", RuntimeWarning, stacklevel=3)
                return backend
        if not replace:
            clash = _clash(backend)
            if clash is not None:
                raise ValueError(f"{clash}; choose another name, or pass replace=True to replace it")
        table[key] = backend
        return backend

    return add


def _is_constraint(constraint) -> bool:
    """A constraint, or an any-of list of constraints (and None) that each say what they admit."""
    if isinstance(constraint, list):
        return bool(constraint) and all(c is None or (callable(c) and isinstance(getattr(c, "what", None), str))
                                        for c in constraint)
    return callable(constraint)


def _same_definition(a: Callable, b: Callable) -> bool:
    """The same function, or the same definition imported again (a reloaded module)."""
    return a is b or (getattr(a, "__module__", None), getattr(a, "__qualname__", None)) == \
        (getattr(b, "__module__", None), getattr(b, "__qualname__", None))


def _clash(backend: "Backend", among: "set | None" = None) -> str | None:
    """What registering ``backend`` would replace or hide, or None: a backend of its name in its own table, or (a
    family backend hiding a generic one of that name for the family, or a generic one hidden by a family's)
    across the two. ``among``: only these registrations (table keys) count."""
    def taken(key) -> bool:
        return among is None or key in among

    key = backend.name if backend.family is None else (backend.family, backend.name)
    existing = (_GENERIC if backend.family is None else _FAMILY).get(key) if taken(key) else None
    where = f"for the {backend.family!r} family" if backend.family else "as a generic backend"
    if existing is not None and not _same_definition(existing.run, backend.run):
        return f"backend {backend.name!r} is already registered {where} ({existing.description})"
    if backend.family is not None and backend.name in _GENERIC and taken(backend.name):
        return (f"backend {backend.name!r} is the name of a generic backend ({_GENERIC[backend.name].description}), "
                f"which a {backend.family!r} backend of that name would hide")
    if backend.family is None:
        hidden = sorted(fam for fam, name in _FAMILY if name == backend.name and taken((fam, name)))
        if hidden:
            return (f"backend {backend.name!r} is already the name of a backend of the {', '.join(hidden)} family, "
                    f"which would hide this generic one there")
    return None


def register_backend(name: str, run: Callable, *, kind: str, family: str | None = None, options=None,
                     description: str = "", check: Callable | None = None, defaults=None,
                     applies: Callable | None = None, library: str = "user", replace: bool = False) -> "Backend":
    """Add ``run`` as backend ``name`` from outside the package (a notebook, another package): the contract of
    :func:`register` (``run(model, data, *, draws, tune, chains, ctx, **options) -> Fit``, built with
    ``bayeszoo.results.build_fit(..., ctx=ctx)``; ``options`` name -> :class:`Option`). A ``run`` without a ``ctx``
    parameter is called as before the :class:`RunContext` existed, ``run(model, data, *, draws, tune, chains, seed,
    progress, **options)``, and ``bz.fit`` adds the seed, settings and provenance to the Fit it returns. A name
    already taken is refused unless ``replace=True`` (in the user's own code; a plugin of an installed package never
    replaces one: :func:`load_plugins`); an unknown ``family`` is refused, naming the families. Returns the
    :class:`Backend`."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a backend name must be a Python identifier (letters, digits, _); got {name!r}")
    if not callable(run):
        raise ValueError(f"backend {name!r}: run must be a function run(model, data, *, draws, tune, chains, ctx, "
                         f"**options) returning a Fit; got {type(run).__name__}")
    return _declaration(name, kind=kind, family=family, description=description, options=options, check=check,
                        defaults=defaults, applies=applies, library=library, unavailable=None, relations=(),
                        memory=None, replace=replace)(run)


#: the entry-point group through which installed packages add backends (each entry point names a module whose
#: import registers them, or a function to call that does)
PLUGIN_GROUP = "bayeszoo.backends"
_plugins_loaded = False
#: while a plugin loads: its entry point, and the registrations made before any plugin loaded (bayeszoo's own and
#: the user's), which no plugin may replace or hide
_loading: tuple | None = None


def load_plugins() -> list[str]:
    """Import the backends of every installed package that declares the :data:`PLUGIN_GROUP` entry point, once
    per process (the CLI and Dask workers see them as a notebook does). A plugin that fails to load, however it
    fails (an exception, ``sys.exit()``), is skipped with a warning naming it; only Ctrl-C (KeyboardInterrupt)
    goes through. A plugin adds backends and never replaces one registered before the plugins load (bayeszoo's
    own, the user's): such a registration is refused with a warning naming the plugin, even with
    ``replace=True``. Returns the entry points loaded."""
    global _plugins_loaded, _loading
    if _plugins_loaded:
        return []
    _plugins_loaded = True
    from importlib.metadata import entry_points

    protected = set(_GENERIC) | set(_FAMILY)
    loaded = []
    for point in entry_points(group=PLUGIN_GROUP):
        _loading = (point, protected)
        try:
            target = point.load()
            if callable(target):
                target()
            loaded.append(point.name)
        except KeyboardInterrupt:
            _plugins_loaded = False   # the user stopped it: the next lookup tries again
            raise
        except BaseException as exc:   # SystemExit too: a broken plugin must not end the user's process
            warnings.warn(f"bayeszoo: the backend plugin {point.name!r} ({point.value}) failed to load and is "
                          f"skipped: {type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)
        finally:
            _loading = None
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


def adopt(backend: Backend, replacing: Backend | None = None) -> Backend:
    """Add ``backend``, registered in another process (a user's, shipped with a task to a worker), unless this
    process has a backend of its name already, other than ``replacing`` (one adopted before, which a new definition
    replaces). Returns the backend registered under the name."""
    table, key = (_GENERIC, backend.name) if backend.family is None else (_FAMILY, (backend.family, backend.name))
    if replacing is not None and table.get(key) is replacing:
        table[key] = backend
    return table.setdefault(key, backend)


def all_backends() -> list[Backend]:
    load_plugins()
    return list(_GENERIC.values()) + list(_FAMILY.values())
