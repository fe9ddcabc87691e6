"""The :class:`Reference` type: a summary of a posterior that other fits are measured against.

A reference holds, for every canonical variable, the posterior mean, sd and 5 / 50 / 95 % quantiles with their
Monte-Carlo standard errors and the per-component R-hat and bulk / tail ESS of the run they come from; a few
thinned draws (a :class:`~bayeszoo.results.Fit`) for the plots; its provenance; and the list of the validation rules
it breaks. A catalogue entry also holds the same summary from a second, independent engine (``crosscheck``), so
that the two can be checked against each other within their Monte-Carlo errors.

The rules (:func:`validate`, applied when a reference is made and again when it is read from a file):

* every component has R-hat below :data:`RHAT_MAX` (MCMC with two or more chains; an approximation or a single
  chain cannot be judged and is refused);
* bulk and tail ESS of every component at least :data:`ESS_MIN` (over all chains), and every mean's MCSE below
  :data:`MCSE_MAX` posterior sds;
* no divergent transitions, and no component that never moves;
* for a catalogue entry, or a reference built by two engines (``bz.catalogue.build_reference``), a second engine
  that passes the same rules and agrees with the first: every mean and sd differ by less than
  :func:`agreement_limit` combined MCSEs (a Bonferroni bound over all the comparisons, so an honest pair of runs
  fails it once in a hundred builds).

Exact moments (a run of kind "exact", ``provenance["source"]`` "exact": :mod:`bayeszoo.catalogue.exact`) are
known in closed form and have Monte-Carlo error 0; their rules (:func:`check_exact`) are finite means and sds,
positive sds and every MCSE 0, and the agreement of a run with them is measured in the run's own MCSEs.
"""
from __future__ import annotations

import datetime
import json
import os
import warnings
from dataclasses import dataclass, field
from importlib import metadata

import arviz as az
import numpy as np
import xarray as xr
from scipy.stats import norm

from bayeszoo.results import RHAT_MAX, Fit, jsonable, load_fit, netcdf_image, write_atomically

ESS_MIN = 400
MCSE_MAX = 0.05          # largest MCSE of a mean, in posterior sds
MAX_DRAWS = 1000         # draws kept for the plots (thinned, over all chains)
#: a component whose sd is below this fraction of its |mean| never moved: the sd of a constant column is rounding
#: noise (a few 1e-16 |mean| on some CPUs, exactly 0 on others), never a posterior's spread
FROZEN_RTOL = 1e-12
AGREEMENT_LEVEL = 0.01   # chance that two runs of one posterior fail the agreement check
QUANTILES = {"q05": 0.05, "q50": 0.5, "q95": 0.95}
STATS = ("mean", "sd", *QUANTILES, "mcse_mean", "mcse_sd", *(f"mcse_{q}" for q in QUANTILES),
         "rhat", "ess_bulk", "ess_tail")
PACKAGES = ("bayeszoo", "numpy", "scipy", "arviz", "jax", "numpyro", "pymc")
#: the ``provenance["source"]`` of the references that two engines made, and that need the second one's check
TWO_ENGINE_SOURCES = ("catalogue", "engines")
_ATTR = "bayeszoo_reference"
_MOMENTS, _CROSSCHECK = "reference_moments", "reference_crosscheck"   # the file's groups besides the fit's


def summarize(posterior: xr.Dataset, names) -> dict[str, dict[str, np.ndarray]]:
    """Per variable of ``names``: the statistics of :data:`STATS`, each shaped like the variable."""
    ds = posterior[list(names)]
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")   # ArviZ warns on constant components; they get NaN and are reported
        parts = {"mean": ds.mean(("chain", "draw")), "sd": ds.std(("chain", "draw"), ddof=1),
                 "mcse_mean": az.mcse(ds, method="mean"), "mcse_sd": _mcse_sd(ds),
                 "rhat": az.rhat(ds), "ess_bulk": az.ess(ds, method="bulk"), "ess_tail": az.ess(ds, method="tail")}
        for key, prob in QUANTILES.items():
            parts[key] = ds.quantile(prob, dim=("chain", "draw")).drop_vars("quantile")
            parts[f"mcse_{key}"] = az.mcse(ds, method="quantile", prob=prob)
    return {name: {stat: np.asarray(parts[stat][name].values, dtype=float) for stat in STATS} for name in names}


def _mcse_sd(ds: xr.Dataset) -> xr.Dataset:
    """MCSE of the sd by the delta method on the squared centred draws (Vehtari et al. 2021, as the ``posterior``
    R package does; ArviZ's own ``mcse(method="sd")`` fails on NumPy 2)."""
    centred2 = (ds - ds.mean(("chain", "draw"))) ** 2
    variance = centred2.mean(("chain", "draw"))
    var_of_var = ((centred2 ** 2).mean(("chain", "draw")) - variance ** 2) / az.ess(centred2, method="mean")
    return np.sqrt(var_of_var / variance / 4)


def run_record(fit: Fit, label: str | None = None) -> dict:
    """What the rules need to know about a run besides its moments, and what its provenance shows."""
    return {"engine": label or fit.backend, "kind": fit.kind, "chains": fit.n_chains, "draws": fit.n_draws,
            "divergences": int(fit.info.get("divergences") or 0), "seed": fit.info.get("seed"),
            "settings": fit.info.get("settings"), "seconds": round(fit.seconds, 1)}


def run_diagnostics(moments: dict) -> dict:
    """The worst R-hat, the smallest bulk and tail ESS and the largest MCSE / sd over every component."""
    def pooled(stat):
        values = np.concatenate([np.ravel(m[stat]) for m in moments.values()])
        return values[np.isfinite(values)]

    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.concatenate([np.ravel(m["mcse_mean"] / np.where(moving(m["mean"], m["sd"]), m["sd"], np.nan))
                                for m in moments.values()])
    ratio = ratio[np.isfinite(ratio)]
    out = {}
    for key, values, pick in (("rhat_max", pooled("rhat"), np.max), ("ess_bulk_min", pooled("ess_bulk"), np.min),
                              ("ess_tail_min", pooled("ess_tail"), np.min), ("mcse_over_sd_max", ratio, np.max)):
        out[key] = round(float(pick(values)), 4) if values.size else None
    return out


def _component(name: str, shape, flat_index: int) -> str:
    index = np.unravel_index(flat_index, shape) if shape else ()
    return f"{name}[{', '.join(str(int(i)) for i in index)}]" if index else name


def _worst(moments: dict, values_of, largest: bool):
    """(value, component label) of the worst component, None if none is finite. ``values_of(m)`` gives the
    per-component values of one variable, NaN where a component is not judged."""
    best = None
    for name, m in moments.items():
        values = np.asarray(values_of(m), dtype=float)
        if not np.isfinite(values).any():
            continue
        j = int(np.nanargmax(values) if largest else np.nanargmin(values))
        if best is None or (values.flat[j] > best[0] if largest else values.flat[j] < best[0]):
            best = (float(values.flat[j]), _component(name, values.shape, j))
    return best


def moving(mean, sd) -> np.ndarray:
    """Per component: True where draws with this mean and sd move (:data:`FROZEN_RTOL`); False for NaN."""
    with np.errstate(invalid="ignore"):
        return np.asarray(np.asarray(sd, dtype=float) > FROZEN_RTOL * np.abs(np.asarray(mean, dtype=float)))


def _count(moments: dict, breaks) -> tuple[int, int]:
    bad = total = 0
    with np.errstate(invalid="ignore", divide="ignore"):
        for m in moments.values():
            flags = np.asarray(breaks(m))
            bad += int(np.sum(flags))
            total += flags.size
    return bad, total


def check_exact(moments: dict, engine: str) -> list[str]:
    """The rules of exact moments (a run of kind "exact": known in closed form, no sampler to judge): every mean
    and sd finite, every sd positive, every Monte-Carlo error 0."""
    problems = []
    finite = lambda m: np.isfinite(m["mean"]) & np.isfinite(m["sd"])   # noqa: E731
    bad, total = _count(moments, lambda m: ~finite(m))
    if bad:
        problems.append(f"{engine}: {bad} of {total} components have a mean or sd that is not finite")
    bad, total = _count(moments, lambda m: finite(m) & ~moving(m["mean"], m["sd"]))
    if bad:
        problems.append(f"{engine}: {bad} of {total} components have sd 0 (a point mass, not a posterior)")
    bad, total = _count(moments, _nonzero_mcse)
    if bad:
        problems.append(f"{engine}: exact moments with a Monte-Carlo error other than 0 ({bad} of {total} "
                        f"components): moments known in closed form have none")
    return problems


def _nonzero_mcse(m: dict) -> np.ndarray:
    flags = np.zeros(np.shape(m["mean"]), bool)
    for key, values in m.items():
        if key.startswith("mcse_"):
            flags |= np.asarray(values) != 0     # NaN too: an exact moment's error is known, and it is 0
    return flags


def check_run(moments: dict, run: dict) -> list[str]:
    """The single-run rules: R-hat, ESS, MCSE, divergences, components that never move (for exact moments, run
    kind "exact", those of :func:`check_exact` instead)."""
    engine = run.get("engine", "?")
    if run.get("kind") == "exact":
        return check_exact(moments, engine)
    if run.get("kind") != "mcmc":
        return [f"{engine} is an approximation: its draws are not from the posterior and its error is unknown"]
    problems = []
    if run.get("chains", 0) < 2:
        problems.append(f"{engine} ran {run.get('chains')} chain: R-hat needs two or more")
    frozen, _ = _count(moments, lambda m: ~moving(m["mean"], m["sd"]))
    if frozen:
        problems.append(f"{engine}: {frozen} component(s) never move (a stuck sampler or a point estimate)")
    rules = [("rhat", True, lambda m: m["rhat"] >= RHAT_MAX, "R-hat", f"< {RHAT_MAX}"),
             ("ess_bulk", False, lambda m: m["ess_bulk"] < ESS_MIN, "bulk ESS", f">= {ESS_MIN}"),
             ("ess_tail", False, lambda m: m["ess_tail"] < ESS_MIN, "tail ESS", f">= {ESS_MIN}")]
    for stat, largest, breaks, what, wanted in rules:
        bad, total = _count(moments, breaks)
        if bad:
            value, where = _worst(moments, lambda m: m[stat], largest)
            shown = f"{value:.4g}" if stat == "rhat" else f"{value:.3g}"   # 1.0149 is not "1.01" against < 1.01
            problems.append(f"{engine}: {what} {shown} at {where} (wanted {wanted}; {bad} of {total} "
                            f"components fail)")
    # a frozen component is reported once, above: its MCSE is noise or NaN
    bad, total = _count(moments, lambda m: moving(m["mean"], m["sd"]) & (m["mcse_mean"] >= MCSE_MAX * m["sd"]))
    if bad:
        value, where = _worst(moments, lambda m: m["mcse_mean"] / np.where(moving(m["mean"], m["sd"]), m["sd"], np.nan), True)
        problems.append(f"{engine}: MCSE of the mean {value:.3g} sd at {where} (wanted < {MCSE_MAX}; {bad} of "
                        f"{total} components fail)")
    if run.get("divergences"):
        problems.append(f"{engine}: {run['divergences']} divergent transitions (wanted none)")
    return problems


def agreement_limit(n_tests: int, level: float = AGREEMENT_LEVEL) -> float:
    """The |z| that ``n_tests`` independent standard normals all stay below with probability 1 - ``level``."""
    return float(norm.isf(level / (2 * max(n_tests, 1))))


def agreement(a: dict, b: dict) -> dict:
    """z = difference / combined MCSE of every mean and sd of two runs; the largest, where, and the limit. Exact
    moments have MCSE 0: against a run, z is the run's own error; two exact values that differ are infinitely
    many MCSEs apart, and equal ones 0."""
    worst = {"z_max": 0.0, "where": "", "n_tests": 0}
    with np.errstate(invalid="ignore", divide="ignore"):
        for name in a:
            for stat in ("mean", "sd"):
                diff = np.abs(np.asarray(a[name][stat], float) - np.asarray(b[name][stat], float))
                combined = np.hypot(a[name][f"mcse_{stat}"], b[name][f"mcse_{stat}"])
                z = np.where((combined == 0) & (diff == 0), 0.0, diff / combined)
                moving = ~np.isnan(z)     # inf: exact values that differ
                worst["n_tests"] += int(moving.sum())
                if moving.any() and np.nanmax(z) > worst["z_max"]:
                    j = int(np.nanargmax(z))
                    worst.update(z_max=float(z.flat[j]), where=f"{stat} of {_component(name, z.shape, j)}",
                                 a=float(a[name][stat].flat[j]), b=float(b[name][stat].flat[j]))
    worst["z_limit"] = agreement_limit(worst["n_tests"])
    return worst


def validate(moments: dict, provenance: dict, crosscheck: dict | None = None) -> list[str]:
    """Every rule the reference breaks, as sentences (empty when it is sound). ``provenance["run"]`` describes
    the run behind ``moments``; a catalogue entry or a two-engine reference (``provenance["source"]`` in
    :data:`TWO_ENGINE_SOURCES`) also needs ``crosscheck`` and its run in ``provenance["crosscheck"]["run"]``."""
    problems = check_run(moments, provenance.get("run", {}))
    if crosscheck is None:
        if provenance.get("source") in TWO_ENGINE_SOURCES:
            problems.append("no second engine checked this reference")
        return problems
    second = provenance.get("crosscheck", {}).get("run", {})
    problems += [f"second engine {p}" for p in check_run(crosscheck, second)]
    if set(crosscheck) != set(moments):
        problems.append(f"the second engine summarised {sorted(crosscheck)}, not {sorted(moments)}")
        return problems
    agree = agreement(moments, crosscheck)
    if agree["z_max"] >= agree["z_limit"]:
        problems.append(f"the engines disagree: {agree['where']} is {agree['a']:.4g} from "
                        f"{provenance.get('run', {}).get('engine')} and {agree['b']:.4g} from {second.get('engine')}, "
                        f"{agree['z_max']:.1f} combined MCSEs apart (limit {agree['z_limit']:.1f})")
    return problems


def _versions() -> dict:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def thinned(fit: Fit, max_draws: int = MAX_DRAWS) -> Fit:
    """``fit`` with every k-th draw of each chain, k the smallest that leaves at most ``max_draws`` in all, in
    single precision (they are for the plots; the moments keep double); only the groups the plots read are kept."""
    step = max(1, -(-fit.n_chains * fit.n_draws // max_draws))
    keep = slice(None, step * (max_draws // fit.n_chains), step)
    groups = {}
    for group in ("posterior", "sample_stats", "observed_data", "constant_data"):
        if group in fit.idata.groups():
            ds = fit.idata[group]
            groups[group] = ds.isel(draw=keep) if "draw" in ds.dims else ds
    groups["posterior"] = groups["posterior"].astype("float32")
    return Fit(idata=az.InferenceData(**groups), backend=fit.backend, kind=fit.kind, timing=dict(fit.timing),
               model_spec=dict(fit.model_spec), info={**fit.info, "stored_thin": fit.info.get("stored_thin", 1) * step})


# ------------------------------------------------------------------------------------------- the type
class UntrustedReference(ValueError):
    """The ValueError of a reference that breaks the rules; ``reference`` is the :class:`Reference` itself, with
    its ``problems`` and the numbers behind them (the catalogue's builder reports them on the family pages)."""

    def __init__(self, reference: "Reference", message: str):
        super().__init__(message)
        self.reference = reference


@dataclass
class Reference:
    """A posterior summary that the fits of a comparison are measured against.

    name : the label shown (``"catalogue: rvm-sinc"``, or the backend's label).
    moments : per canonical variable, the statistics of :data:`STATS` ("mean", "sd", "q05", "q50", "q95",
        "mcse_mean", "mcse_sd", "mcse_q05", ..., "rhat", "ess_bulk", "ess_tail"), each shaped like the variable.
    fit : draws for the plots (thinned in a saved reference), or None.
    provenance : where it comes from: ``source`` ("catalogue"; "engines", two engines run by
        ``bz.catalogue.build_reference``; "fit"; "exact", moments in closed form), ``run`` (engine, kind, chains, draws,
        divergences, seed, settings), its diagnostics, ``crosscheck`` (the second engine's run and the agreement),
        ``cross_checked``, the model spec and data fingerprint, package versions, date; in a saved reference also
        ``stored_draws`` (the thinning, chains and draws of the draws kept for the plots).
    crosscheck : the second engine's moments (catalogue entries), else None.
    problems : the rules it breaks (:func:`validate`); empty when it can be trusted.
    """

    name: str
    moments: dict[str, dict[str, np.ndarray]]
    fit: Fit | None = None
    provenance: dict = field(default_factory=dict)
    crosscheck: dict[str, dict[str, np.ndarray]] | None = None
    problems: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.validate()

    @property
    def trusted(self) -> bool:
        return not self.problems

    def validate(self) -> list[str]:
        """Check the rules again (see the module's docstring) and return the problems found."""
        self.problems = validate(self.moments, self.provenance, self.crosscheck)
        return self.problems

    # ---- construction ------------------------------------------------------------------------------
    @classmethod
    def from_fit(cls, fit: Fit, names=None, *, name: str | None = None, crosscheck: Fit | None = None,
                 provenance: dict | None = None, labels: tuple[str, ...] = ()) -> "Reference":
        """The reference made by ``fit`` (its canonical variables, or ``names``); with ``crosscheck``, a second
        independent run of the same posterior that it must agree with. ``labels`` names the engines of the two
        runs where their backend names do not say enough."""
        labels = (*labels, None, None)
        if not isinstance(fit, Fit):
            raise ValueError(f"a reference is made from a bayeszoo Fit, got {type(fit).__name__}")
        names = list(names if names is not None else fit.posterior.data_vars)
        missing = [v for v in names if v not in fit.posterior]
        if missing:
            raise ValueError(f"the reference fit ({fit.backend}) has no variable(s) {missing}")
        moments = summarize(fit.posterior, names)
        prov = {"source": "fit", "model": fit.model_spec, "data": fit.info.get("provenance", {}).get("data"),
                "run": run_record(fit, labels[0]), "diagnostics": run_diagnostics(moments), "cross_checked": False,
                "versions": _versions(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}
        checked = None
        if crosscheck is not None:
            if crosscheck.model_spec != fit.model_spec:
                raise ValueError("the cross-check fit was made with another model")
            checked = summarize(crosscheck.posterior, names)
            prov["crosscheck"] = {"run": run_record(crosscheck, labels[1]), "diagnostics": run_diagnostics(checked),
                                  "agreement": agreement(moments, checked)}
            prov["cross_checked"] = True
        prov.update(provenance or {})
        return cls(name=name or fit.backend, moments=moments, fit=fit, provenance=prov, crosscheck=checked)

    def describe(self) -> str:
        """One sentence: what the reference is and how far it can be trusted."""
        run, diag = self.provenance.get("run", {}), self.provenance.get("diagnostics", {})
        if run.get("kind") == "exact":
            text = (f"{self.name}: exact moments ({run.get('engine', '?')}, Monte-Carlo error 0)"
                    + (f", {self.fit.n_chains * self.fit.n_draws} exact draws for the plots" if self.fit else ""))
            return text + ("" if self.trusted else f"; NOT TRUSTED: {'; '.join(self.problems)}")
        text = (f"{self.name}: {run.get('engine', '?')} ({run.get('kind', '?')}, {run.get('chains', '?')} chains x "
                f"{run.get('draws', '?')} draws), R-hat max {_num(diag.get('rhat_max'), '.3f')}, bulk / tail ESS "
                f"min {_num(diag.get('ess_bulk_min'), '.0f')} / {_num(diag.get('ess_tail_min'), '.0f')}")
        check = self.provenance.get("crosscheck")
        if check:
            agree = check.get("agreement", {})
            text += (f"; agrees with {check['run'].get('engine')} to {_num(agree.get('z_max'), '.2f')} combined "
                     f"MCSEs (limit {_num(agree.get('z_limit'), '.2f')})")
        else:
            text += "; not cross-checked by a second engine"
        if self.fit is None:
            text += "; moments only, no draws for the plots"
        text += "".join(f"; {rerun}" for rerun in reruns(self.provenance))
        return text + ("" if self.trusted else f"; NOT TRUSTED: {'; '.join(self.problems)}")

    def matches(self, model, data) -> list[str]:
        """What differs between the posterior this reference was made for and that of (model, data), each a phrase
        that begins with "model" or "data" and says what differs; empty if the same.

        Only what determines the posterior counts, not names: a family's options (its spec) and the data's task,
        X and y (:meth:`~bayeszoo.datasets.Dataset.content_fingerprint`); a model of one's own by its fingerprint
        (structure and observations), or, declared otherwise (the other library), by the same free variables
        with the same shapes and a log joint density that differs from the one the reference recorded at its
        draws by one constant (:data:`PROBE_RTOL`). Its data are its observations, in its log density.
        ``data`` None stands for a model that carries its own observations."""
        out = []
        theirs = self.provenance.get("model")
        if theirs is not None:
            out += _model_difference(theirs, model, self.provenance.get("log_density_probe"))
        user = isinstance(theirs, dict) and theirs.get("family") == "user"
        if data is not None and not user:
            stored = self.provenance.get("data_content")
            if stored is not None and stored != data.content_fingerprint():
                out.append(f"data (other values of X or y, or another task, than those of "
                           f"{self.provenance.get('data_name', 'the reference')!r})")
            elif stored is None and self.provenance.get("data") not in (None, data.fingerprint()):
                out.append("data")
        return out

    def for_model(self, model, data) -> "Reference":
        """This reference with its draws under ``model``'s dims and coords (a reference :meth:`matches` accepted,
        made with the model declared otherwise, names its axes as that declaration did)."""
        theirs = self.provenance.get("model")
        if self.fit is None or not isinstance(theirs, dict) or theirs.get("family") != "user" or theirs == model.spec():
            return self
        post, dims, coords = self.fit.idata.posterior, model.var_dims(data), model.coords(data)
        renamed = {}
        for name, wanted in dims.items():
            if name not in post:
                return self
            da = post[name]
            da = da.rename({old: new for old, new in zip(da.dims[2:], wanted) if old != new})
            renamed[name] = da.drop_vars([c for c in da.coords if c not in ("chain", "draw")]).assign_coords(
                {d: coords[d] for d in wanted if d in coords})
        groups = {g: self.fit.idata[g] for g in self.fit.idata.groups() if g != "posterior"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            idata = az.InferenceData(posterior=xr.Dataset(renamed, attrs=post.attrs), **groups)
        fit = Fit(idata=idata, backend=self.fit.backend, kind=self.fit.kind, timing=dict(self.fit.timing),
                  model_spec=dict(self.fit.model_spec), info=dict(self.fit.info))
        return Reference(name=self.name, moments=self.moments, fit=fit, provenance=self.provenance,
                         crosscheck=self.crosscheck)

    # ---- files -------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> str:
        """One compressed NetCDF file: at most :data:`MAX_DRAWS` thinned draws (the fit's groups, readable by
        :func:`bayeszoo.load_fit`), the moments and the second engine's moments as two more groups. A reference
        without draws (``fit`` None: moments published without their draws) is its moments' groups alone, read
        back by :meth:`load` with ``fit`` None."""
        path = os.fspath(path)
        if self.fit is None:
            groups = {_MOMENTS: _to_dataset(self.moments)}
            if self.crosscheck is not None:
                groups[_CROSSCHECK] = _to_dataset(self.crosscheck)
            groups[_MOMENTS].attrs[_ATTR] = json.dumps(
                {"name": self.name, "provenance": jsonable({**self.provenance, "stored_draws": None})})
            write_atomically(path, netcdf_image(az.InferenceData(**groups)))
            return path
        small = thinned(self.fit)
        extra = {_MOMENTS: _to_dataset(self.moments, self.fit.posterior)}
        if self.crosscheck is not None:
            extra[_CROSSCHECK] = _to_dataset(self.crosscheck, self.fit.posterior)
        stored = {"thin": small.info["stored_thin"], "chains": small.n_chains, "draws": small.n_draws}
        extra[_MOMENTS].attrs[_ATTR] = json.dumps({"name": self.name,
                                                   "provenance": jsonable({**self.provenance, "stored_draws": stored})})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)    # ArviZ on groups outside its schema
            small.idata.add_groups(extra)
        return small.save(path)

    @classmethod
    def load(cls, path: str | os.PathLike, names=None) -> "Reference":
        """Read a file written by :meth:`save` (the rules are checked again from what it holds), or make the
        reference of a fit saved by :meth:`Fit.save <bayeszoo.results.Fit.save>` (its variables, or ``names``)."""
        path = os.fspath(path)
        groups = _groups_without_draws(path)
        if groups is not None:
            moments = _group(path, _MOMENTS)
            crosscheck = _from_dataset(_group(path, _CROSSCHECK)) if _CROSSCHECK in groups else None
            meta = json.loads(moments.attrs[_ATTR])
            return cls(name=meta["name"], moments=_from_dataset(moments), fit=None, provenance=meta["provenance"],
                       crosscheck=crosscheck)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            fit = load_fit(path)
        groups = fit.idata.groups()
        if _MOMENTS not in groups:
            return cls.from_fit(fit, names, name=f"{fit.backend} ({os.path.basename(path)})")
        meta = json.loads(fit.idata[_MOMENTS].attrs[_ATTR])
        moments = _from_dataset(fit.idata[_MOMENTS])
        crosscheck = _from_dataset(fit.idata[_CROSSCHECK]) if _CROSSCHECK in groups else None
        fit.idata = az.InferenceData(**{g: fit.idata[g] for g in groups if g not in (_MOMENTS, _CROSSCHECK)})
        return cls(name=meta["name"], moments=moments, fit=fit, provenance=meta["provenance"], crosscheck=crosscheck)

    def __repr__(self) -> str:
        return f"Reference({self.name!r}, vars={list(self.moments)}, trusted={self.trusted})"


def _num(value, spec: str) -> str:
    return "?" if value is None or not np.isfinite(value) else format(value, spec)


#: two log joint densities of one posterior differ by one constant: at the probe points, by the same amount to
#: this fraction of the densities' size (PyMC's and NumPyro's radon-style model differ by 1e-13 of it; a prior sd
#: 10 % wider on its mean intercept spreads the differences over 2e-5 of it)
PROBE_RTOL = 1e-8


def _variables(spec: dict) -> dict:
    return {k: tuple(v.get("shape", ())) for k, v in (spec.get("variables") or {}).items()}


def _model_difference(theirs: dict, model, probe: dict | None) -> list[str]:
    """What differs between the model spec a reference recorded and ``model``'s posterior ([] when nothing)."""
    mine = model.spec()
    if theirs == mine:
        return []
    family = theirs.get("family")
    if family != mine.get("family"):
        return [f"model (a {mine.get('family')!r} model; the reference's is {family!r})"]
    if family != "user":
        keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        return ["model (" + ", ".join(f"{k}={mine.get(k)!r} here, {theirs.get(k)!r} in the reference"
                                      for k in keys[:4]) + ")"]

    def nameless(spec):   # the name and the coordinate labels do not change the posterior
        return {k: v for k, v in spec.items() if k not in ("name", "coords")}

    if nameless(theirs) == nameless(mine):
        return []
    here, there = _variables(mine), _variables(theirs)
    if here != there:
        shown = lambda vs: ", ".join(f"{k} {s}" for k, s in vs.items())   # noqa: E731
        return [f"model (its free variables are {shown(here)}; the reference's are {shown(there)})"]
    if not probe or not callable(getattr(model, "log_joint", None)):
        return [f"model (another fingerprint, {str(mine.get('fingerprint'))[:12]} here and "
                f"{str(theirs.get('fingerprint'))[:12]} in the reference, which records no log density to compare "
                f"this declaration's with: rebuild it with bz.catalogue.build_reference)"]
    points = {k: np.asarray(v, dtype=float) for k, v in probe["points"].items()}
    stored = np.asarray(probe["log_joint"], dtype=float)
    try:
        with np.errstate(invalid="ignore"):
            now = np.asarray(model.log_joint(points), dtype=float)
    except (ValueError, KeyError, TypeError) as exc:   # e.g. a declaration PyMC cannot export to JAX
        return [f"model (its log density could not be evaluated at the reference's recorded draws: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})"]
    gap = now - stored
    if not np.all(np.isfinite(now)):
        return [f"model (its log density is not finite at {int(np.sum(~np.isfinite(now)))} of the reference's "
                f"{now.size} recorded draws: another support)"]
    spread = float(np.max(gap) - np.min(gap))
    scale = float(max(1.0, np.max(np.abs(stored)), np.max(np.abs(now))))
    if spread > PROBE_RTOL * scale:
        return [f"model (its log density differs from the reference's by {np.min(gap):.6g} to {np.max(gap):.6g} at "
                f"the reference's {now.size} recorded draws, not by one constant: another prior, likelihood or "
                f"observations)"]
    return []


def reruns(provenance: dict) -> list[str]:
    """For each engine that ran twice (``provenance["attempts"]``, the rerun of an engine that diverged), the
    phrase "<engine> ran again at target_accept 0.99 after <n> divergences at 0.95, with <m>"."""
    attempts = provenance.get("attempts") or []
    return [f"{after.get('engine')} ran again at target_accept {after.get('target_accept')} after "
            f"{before.get('divergences')} divergences at {before.get('target_accept')}, with {after.get('divergences')}"
            for before, after in zip(attempts, attempts[1:]) if before.get("engine") == after.get("engine")]


def _to_dataset(moments: dict, posterior: xr.Dataset | None = None) -> xr.Dataset:
    """The moments as one dataset (``<variable>__<stat>``), on the draws' dims and coords; without draws on dims
    named as ArviZ names them (``<variable>_dim_0``, ...)."""
    out = {}
    for name, stats in moments.items():
        if posterior is None:
            dims, coords = tuple(f"{name}_dim_{k}" for k in range(np.ndim(stats["mean"]))), {}
        else:
            dims = posterior[name].dims[2:]
            coords = {d: posterior[name].coords[d].values for d in dims if d in posterior[name].coords}
        for stat, values in stats.items():
            out[f"{name}__{stat}"] = xr.DataArray(values, dims=dims, coords=coords)
    return xr.Dataset(out)


def _groups_without_draws(path: str) -> set[str] | None:
    """The groups of a reference file saved without draws (moments, no posterior), or None for any other file
    (a reference with draws, a fit, or a file that :func:`~bayeszoo.results.load_fit` will explain it cannot read)."""
    import h5netcdf

    try:
        with h5netcdf.File(path, "r") as handle:
            groups = set(handle.groups)
    except Exception:   # noqa: BLE001 - not an HDF5 file at all: load_fit says what it is
        return None
    return groups if _MOMENTS in groups and "posterior" not in groups else None


def _group(path: str, group: str) -> xr.Dataset:
    return xr.load_dataset(path, group=group, engine="h5netcdf")


def _from_dataset(ds: xr.Dataset) -> dict:
    out: dict[str, dict[str, np.ndarray]] = {}
    for key in ds.data_vars:
        name, stat = str(key).rsplit("__", 1)
        out.setdefault(name, {})[stat] = np.asarray(ds[key].values, dtype=float)
    return out
