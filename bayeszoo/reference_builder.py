"""Trusted reference posteriors for any model: two independent engines and the catalogue's rules.

``bz.catalogue.build_reference(model, data)`` runs two MCMC engines (by default NUTS in PyMC and NUTS in NumPyro,
which sample the model's two declarations independently), summarises the first, checks both runs against the
rules of :mod:`bayeszoo.catalogue.reference` (R-hat, bulk and tail ESS, MCSE, divergences) and against each other,
and returns the :class:`~bayeszoo.catalogue.Reference` only when every rule holds. Otherwise it raises
:class:`~bayeszoo.catalogue.reference.UntrustedReference`, a ValueError that lists each broken rule with its numbers
and what to try. The catalogue's own builder (:mod:`bayeszoo.studies.build_catalogue`) calls the same function.

The builder calls ``bz.fit``, so it sits above the API, which itself reads the catalogue: the catalogue cannot
import it, and ``bayeszoo/__init__`` makes it ``bz.catalogue.build_reference``.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from bayeszoo import checks, registry
from bayeszoo.api import fit as run_fit
from bayeszoo.catalogue import Engine
from bayeszoo.catalogue.reference import ESS_MIN, MCSE_MAX, Reference, UntrustedReference
from bayeszoo.results import RHAT_MAX

#: the default pair: NUTS on the PyMC declaration and NUTS on the NumPyro one (two libraries, two declarations)
DEFAULT_ENGINES = ("nuts", "numpyro")
#: the engines tried, in this order, when the model lacks one of the default pair; then the family's own MCMC
PREFERRED_ENGINES = ("nuts", "numpyro", "nutpie", "blackjax_nuts")
#: the target acceptance the engines run at, where they have one and it is not given: above the samplers' own
#: (0.8 to 0.9), as a reference can afford the smaller steps that keep NUTS out of divergences
TARGET_ACCEPT = 0.95
#: an engine that diverged runs once more at this target acceptance before the reference is refused
RETRY_TARGET_ACCEPT = 0.99
#: the target acceptance suggested after divergences, each the next above the one used
TARGET_ACCEPT_STEPS = (0.9, TARGET_ACCEPT, RETRY_TARGET_ACCEPT)
#: how many of the reference's draws its log density is recorded at (what matches a model declared otherwise)
PROBE_POINTS = 8
#: beyond this many times more draws, a longer run is not the remedy: the sampler barely moves
MAX_GROWTH = 20.0
WHO = "build_reference"


def build_reference(model, data=None, engines=None, *, draws: int = 2000, tune: int = 1000, chains: int = 4,
                    seed: int | None = 0, progress: bool = True, name: str | None = None,
                    provenance: dict | None = None) -> Reference:
    """A reference posterior for ``model`` on ``data`` that two independent engines agree on.

    Every engine, count and option is checked before anything runs. The engines run one after the other (the
    second with seed + 1), the first one's draws become the reference and the second one's moments its
    cross-check. An engine with a target acceptance (NUTS) runs at :data:`TARGET_ACCEPT` (0.95) unless its
    options say otherwise, and an engine that diverged runs once more, same seed, at :data:`RETRY_TARGET_ACCEPT`
    (0.99) before the reference is refused; ``provenance["attempts"]`` records every run and ``describe()``
    says which ran twice. The result can be saved (``reference.save(path)``) and given to ``bz.compare(...,
    reference=path)``, which accepts it for any model with the same posterior (:meth:`Reference.matches
    <bayeszoo.catalogue.Reference.matches>`: the model's name does not count, and a model of one's own declared
    in the other library is matched by its log density at draws the reference records) and refuses it for
    another before anything runs.

    Parameters
    ----------
    model : bayeszoo.models.Model
        Any model: a built-in family or one of one's own.
    data : bayeszoo.datasets.Dataset or None
        Passed to ``bz.fit`` as given; None for a model that carries its own observations.
    engines : pair, optional
        Two MCMC backends, each a name (``"gibbs"``), a ``(name, options)`` pair (``("numpyro", {"target_accept":
        0.99})``) or a :class:`~bayeszoo.catalogue.Engine` (with its own counts). By default NUTS in PyMC and
        in NumPyro (``nuts``, ``numpyro``) where the model has both declarations, else the first two MCMC
        backends of the model among ``nutpie``, ``blackjax_nuts`` and the family's own.
        An engine whose options lack ``target_accept`` runs at 0.95.
    draws, tune, chains : int, default 2000, 1000, 4
        Draws per chain, warm-up and chains of the engines given by name.
    seed : int or None, default 0
        The first engine's seed; the second runs with seed + 1. None draws one fresh seed (recorded).
    progress : bool, default True
        Show the samplers' progress bars.
    name : str, optional
        The reference's label in tables and reports; by default the two engines'.
    provenance : dict, optional
        What to record besides the runs (the catalogue's builder adds its problem's key and description).

    Returns
    -------
    Reference
        Trusted: every rule holds (``reference.problems`` is empty).

    Raises
    ------
    ValueError
        A bad engine, count or option, before anything runs; after the runs,
        :class:`~bayeszoo.catalogue.reference.UntrustedReference` (a ValueError whose ``reference`` is the
        untrusted Reference) naming each broken rule with its numbers and what to try.
    """
    pair = resolve_engines(model, data, engines, draws=draws, tune=tune, chains=chains)
    seed = checks.seed(WHO, "seed", seed)
    seed = checks.fresh_seed() if seed is None else seed
    checks.flag(WHO, "progress", progress)
    fits, pair, attempts = _run_engines(pair, model, data, seed, progress)
    labels = tuple(engine.label for engine in pair)
    prov = {"source": "engines", **({"data_name": data.name} if data is not None else {}),
            "data_content": (data if data is not None else model.dataset()).content_fingerprint(),
            "attempts": attempts}
    probe = log_density_probe(model, fits[0])
    if probe is not None:
        prov["log_density_probe"] = probe
    prov.update(provenance or {})
    ref = Reference.from_fit(fits[0], list(model.var_dims(data)), name=name or " + ".join(labels),
                             crosscheck=fits[1], labels=labels, provenance=prov)
    if not ref.trusted:
        raise UntrustedReference(ref, untrusted_message(ref, pair, model, data))
    return ref


def _run_engines(pair, model, data, seed: int, progress: bool) -> tuple[list, tuple, list[dict]]:
    """Run each engine in turn (the i-th with seed + i), one that diverged once more at its retry's target
    acceptance: ``(fits, the engines that made them, every attempt)``."""
    fits, attempts, used = [], [], []
    for i, engine in enumerate(pair):
        engine_seed = (seed + i) % checks.SEED_LIMIT
        fit = run_engine(engine, model, data, engine_seed, progress)
        attempts.append(_attempt(engine, fit, engine_seed))
        retry = _retry(engine, model, data)
        if attempts[-1]["divergences"] and retry is not None:
            engine = retry
            fit = run_engine(engine, model, data, engine_seed, progress)
            attempts.append(_attempt(engine, fit, engine_seed))
        fits.append(fit)
        used.append(engine)
    return fits, tuple(used), attempts

def _attempt(engine: Engine, fit, seed: int) -> dict:
    """One run as the provenance records it: the engine, its target acceptance (None without one), its seed and
    divergences."""
    return {"engine": engine.label, "target_accept": engine.options.get("target_accept"), "seed": seed,
            "divergences": int(fit.info.get("divergences") or 0)}


def _has_target_accept(engine: Engine, model, data) -> bool:
    target = model if engine.via is None else engine.via.problem(model, data)[0]
    return "target_accept" in registry.get(target, engine.backend).options


def _retry(engine: Engine, model, data) -> Engine | None:
    """``engine`` at :data:`RETRY_TARGET_ACCEPT`, or None when it has no target acceptance or already ran there."""
    if not _has_target_accept(engine, model, data) or engine.options.get("target_accept", 0) >= RETRY_TARGET_ACCEPT:
        return None
    return dataclasses.replace(engine, options={**engine.options, "target_accept": RETRY_TARGET_ACCEPT})


def log_density_probe(model, fit, n: int = PROBE_POINTS) -> dict | None:
    """The log joint density (:meth:`~bayeszoo.models.user.UserModel.log_joint`) of a model of one's own at ``n``
    of ``fit``'s draws, spread over its chains and draws, with those draws: what matches the reference to the same
    posterior declared in the other library. None for a family (its spec is its posterior)."""
    if not callable(getattr(model, "log_joint", None)) or getattr(model, "family", None) != "user":
        return None
    names = list(model.var_dims(None))
    flat = {k: fit.posterior[k].values.reshape(-1, *fit.posterior[k].shape[2:]) for k in names}
    total = next(iter(flat.values())).shape[0]
    pick = np.linspace(0, total - 1, min(n, total)).round().astype(int)
    points = {k: v[pick] for k, v in flat.items()}
    return {"points": {k: v.tolist() for k, v in points.items()}, "log_joint": model.log_joint(points).tolist()}


def resolve_engines(model, data, engines, *, draws: int, tune: int, chains: int) -> tuple[Engine, Engine]:
    """The two engines as :class:`~bayeszoo.catalogue.Engine` objects, each checked (an MCMC backend of the model
    with valid counts and options), before anything runs."""
    counts = {"draws": checks.number(WHO, "draws", draws, low=1, low_inclusive=True, integer=True),
              "tune": checks.number(WHO, "tune", tune, low=0, low_inclusive=True, integer=True),
              "chains": checks.number(WHO, "chains", chains, low=1, low_inclusive=True, integer=True)}
    if engines is None:
        engines = default_engines(model)
    if isinstance(engines, (str, Engine)) or not isinstance(engines, (list, tuple)) or len(engines) != 2:
        raise ValueError(f"{WHO}: engines must be two backends (names, (name, options) pairs or catalogue Engines); "
                         f"got {engines!r}")
    pair = tuple(_engine(item, counts) for item in engines)
    pair = tuple(dataclasses.replace(e, options={**e.options, "target_accept": TARGET_ACCEPT})
                 if "target_accept" not in e.options and _known(e, model, data) and _has_target_accept(e, model, data)
                 else e for e in pair)
    if pair[0].label == pair[1].label:
        raise ValueError(f"{WHO}: the two engines are both {pair[0].label!r}; a reference needs two independent "
                         f"engines, so that an error of one is not repeated by the other")
    for engine in pair:
        _check_engine(engine, model, data)
    return pair


def _known(engine: Engine, model, data) -> bool:
    """Whether the engine's backend exists for its model (an unknown one is refused, with its name, afterwards)."""
    target = model if engine.via is None else engine.via.problem(model, data)[0]
    return engine.backend in registry.backends_for(target)


def default_engines(model) -> tuple[str, str]:
    """``nuts`` and ``numpyro`` where the model runs both; else the first two MCMC backends it runs among
    :data:`PREFERRED_ENGINES` and then its family's own."""
    names = registry.backends_for(model)
    mcmc = [n for n in names if registry.get(model, n).kind == "mcmc"]
    if all(n in mcmc for n in DEFAULT_ENGINES):
        return DEFAULT_ENGINES
    ordered = [n for n in PREFERRED_ENGINES if n in mcmc] + [n for n in mcmc if n not in PREFERRED_ENGINES]
    if len(ordered) < 2:
        raise ValueError(f"{WHO}: {type(model).__name__} has {len(ordered)} MCMC backend(s) "
                         f"({', '.join(ordered) or 'none'}) of the two a reference needs; give engines= (an equivalent "
                         f"model's backend as a catalogue Engine with via=, as bayeszoo.catalogue.problems does)")
    return tuple(ordered[:2])


def _engine(item, counts: dict) -> Engine:
    if isinstance(item, Engine):
        return item
    if isinstance(item, str):
        return Engine(item, **counts)
    if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], dict):
        options = dict(item[1])
        own = {k: options.pop(k) for k in ("draws", "tune", "chains") if k in options}   # per-engine counts
        return Engine(item[0], **{**counts, **own}, options=options)
    raise ValueError(f"{WHO}: an engine is a backend name, a (name, options) pair or a catalogue Engine; got "
                     f"{item!r}")


def _check_engine(engine: Engine, model, data) -> None:
    """A ValueError unless ``engine`` can run: an MCMC backend of the model (or of its equivalent), valid counts
    and options."""
    target, target_data = (model, data) if engine.via is None else engine.via.problem(model, data)
    spec = registry.get(target, engine.backend)
    if spec.kind != "mcmc":
        raise ValueError(f"{WHO}: engine {engine.label!r} is an approximation; its draws are not from the posterior "
                         f"and its error is unknown, so a reference needs two MCMC engines")
    for what, low in (("draws", 1), ("tune", 0), ("chains", 1)):
        checks.number(WHO, f"engine {engine.label!r}: {what}", getattr(engine, what), low=low, low_inclusive=True,
                      integer=True)
    if engine.chains < 2:
        raise ValueError(f"{WHO}: engine {engine.label!r} runs {engine.chains} chain; R-hat needs two or more")
    spec.resolve(dict(engine.options), target, target_data)


def run_engine(engine: Engine, model, data, seed: int, progress: bool):
    """One run of ``engine`` on (model, data) through ``bz.fit``, in the model's canonical variables (an engine
    with ``via`` runs on the equivalent model and maps its fit back)."""
    counts = {"draws": engine.draws, "tune": engine.tune, "chains": engine.chains}
    if engine.via is None:
        return run_fit(model, data, engine.backend, **counts, seed=seed, progress=progress, **engine.options)
    other_model, other_data = engine.via.problem(model, data)
    fit = run_fit(other_model, other_data, engine.backend, **counts, seed=seed, progress=progress, **engine.options)
    return engine.via.back(fit, model, data)


# ------------------------------------------------------------------------------------------- the message
def untrusted_message(ref: Reference, engines: tuple[Engine, Engine], model, data) -> str:
    """Each broken rule with its numbers, then what to try."""
    named = getattr(model, "name", None)   # a model of one's own has its name; a family, its class
    what = (named if isinstance(named, str) else type(model).__name__) + (f" on {data.name!r}" if data is not None else "")
    lines = [f"{WHO}: no trusted reference for {what} from {engines[0].label} and {engines[1].label}; "
             f"{len(ref.problems)} rule(s) broken:"]
    lines += [f"  - {problem}" for problem in ref.problems]
    lines.append("What to try:")
    lines += [f"  - {tip}" for tip in advice(ref, engines, model, data)]
    return "\n".join(lines)


def advice(ref: Reference, engines: tuple[Engine, Engine], model, data) -> list[str]:
    """What to try for the rules ``ref`` breaks, with the counts and options to use, then the family's advice."""
    tips = []
    runs = ((engines[0], ref.provenance), (engines[1], ref.provenance.get("crosscheck") or {}))
    own_problems = False
    for engine, part in runs:
        run, diag = part.get("run") or {}, part.get("diagnostics") or {}
        if not run:
            continue
        growth = _draws_growth(diag)
        found = (f"its smallest bulk / tail ESS is {_num(diag.get('ess_bulk_min'))} / "
                 f"{_num(diag.get('ess_tail_min'))} (wanted {ESS_MIN}) and its largest MCSE "
                 f"{_num(diag.get('mcse_over_sd_max'), '.3g')} sd (wanted < {MCSE_MAX}) from {engine.chains} x "
                 f"{engine.draws} draws")
        if 1 < growth <= MAX_GROWTH:
            more = int(math.ceil(engine.draws * growth / 100.0) * 100)
            tips.append(f"more draws for {engine.label}: {found}; about draws={more} should do")
        elif growth > MAX_GROWTH:
            tips.append(f"{engine.label} barely moves: {found}, so more than {MAX_GROWTH:.0f} times the draws would "
                        f"be needed; look at its trace and rank plots, reparameterise, or use another engine")
        rhat = diag.get("rhat_max")
        if rhat is not None and rhat >= RHAT_MAX:
            tips.append(f"longer warm-up for {engine.label} (R-hat {rhat:.3f}, wanted < {RHAT_MAX}): "
                        f"tune={max(2 * engine.tune, 1000)} and more draws; an R-hat that stays high means chains "
                        f"in different modes, which a reparameterisation or a more informative prior removes")
        if run.get("divergences"):
            tips.append(divergence_tip(engine, model, data, run["divergences"]))
        own_problems |= len(tips) > 0
    agree = (ref.provenance.get("crosscheck") or {}).get("agreement") or {}
    if agree and agree.get("z_max", 0.0) >= agree.get("z_limit", math.inf):
        where = f"{agree['where']}: {agree['z_max']:.1f} combined MCSEs apart, limit {agree['z_limit']:.1f}"
        tips.append(f"the engines disagree ({where}); mend the runs' own problems first, since runs that are too "
                    f"short disagree too" if own_problems else
                    f"the engines disagree ({where}) although each passes its own checks: one of them samples "
                    f"another posterior; bz.sbc(model, backend, data) on each (simulation-based calibration) "
                    f"tells which")
    if getattr(model, "reference_advice", ""):
        tips.append(model.reference_advice)
    return tips


def _draws_growth(diag: dict) -> float:
    """How many times more draws the ESS and MCSE rules need (ESS grows, and MCSE falls as its square root, in
    proportion to the draws), with a quarter to spare; 1 when they hold."""
    need = 1.0
    for key in ("ess_bulk_min", "ess_tail_min"):
        value = diag.get(key)
        if value is not None and value < ESS_MIN:
            need = max(need, ESS_MIN / max(value, 1.0))
    ratio = diag.get("mcse_over_sd_max")
    if ratio is not None and ratio >= MCSE_MAX:
        need = max(need, (ratio / MCSE_MAX) ** 2)
    return 1.25 * need if need > 1 else 1.0


def divergence_tip(engine: Engine, model, data, divergences: int) -> str:
    target = model if engine.via is None else engine.via.problem(model, data)[0]
    options = registry.get(target, engine.backend).options
    text = f"{engine.label} diverged {divergences} times"
    if "target_accept" in options:
        used = engine.options.get("target_accept", options["target_accept"].default)
        higher = [t for t in TARGET_ACCEPT_STEPS if t > used]
        if higher:
            return text + (f": a higher target acceptance, ({engine.backend!r}, {{'target_accept': {higher[0]}}}), "
                           f"or {_reparameterisation(target)}")
        text += f" at target_accept {used}"
    return text + f": {_reparameterisation(target)}"


def _reparameterisation(model) -> str:
    """What removes the curvature NUTS diverges in, for this model: non-centring where a free variable's prior
    scale is another free variable; where none is (a non-centred model), not that."""
    try:
        centred = model.centred_variables() if callable(getattr(model, "centred_variables", None)) else None
    except Exception:   # an unusual declaration the reading does not follow: give the general advice
        centred = None
    if centred:
        return (f"non-centre {', '.join(centred)}: the prior's scale of each is another free variable (a centred "
                f"hierarchy, whose funnel a step size cannot follow); write x = mu + sigma * z with z ~ Normal(0, 1)")
    if centred is not None:
        return ("the model has no centred scale to non-centre (no free variable's prior scale is another free "
                "variable), so look where the divergent transitions are (az.plot_pair(fit.idata, divergences=True)) "
                "and give the parameters there a more informative prior or another scale")
    return ("a reparameterisation that removes the region of high curvature its step size cannot follow (for a "
            "hierarchical scale, the non-centred form) or a more informative prior")


def _num(value, spec: str = ".0f") -> str:
    return "?" if value is None else format(value, spec)
