"""Per-fit numbers of the comparison table.

Sampling diagnostics
--------------------
ESS is ArviZ's rank-normalised split-chain estimator (``az.ess(method="bulk")`` and ``method="tail"``,
Vehtari et al. 2021), R-hat is ``az.rhat`` (rank-normalised, split). ``ess_bulk_per_s`` divides the smallest
bulk ESS over all components of the canonical variables by the fit's total wall time (compile + tune + sample);
``ess_per_grad`` divides it by the gradient evaluations the fit reports (``fit.info["n_grad"]``), for MCMC fits
only (NaN otherwise). Neither says anything about accuracy: the draws of an approximation are i.i.d. (the
registry's contract for the kind), so their ESS is their number, however far the approximation is from the
posterior. The table gives it as that number (chains x draws, for every component that varies) rather than as
ArviZ's estimate from the draws, which only scatters around it: the smallest of many such estimates falls several
per cent below (3,450 to 3,650 for 4,000 i.i.d. normal draws over 60 components), which would read as
autocorrelation the draws do not have.

Accuracy against the reference
------------------------------
The reference is a posterior summary (a :class:`bayeszoo.catalogue.Reference`, read here only through its
``moments``, ``name``, ``provenance``, ``problems`` and ``trusted``): per component j of the model's
``compare_vars``, its mean m_j and sd s_j. Components whose reference sd is 0 (point-estimated) are skipped.
With the fit's mean and sd over all its draws (chains pooled),

* ``b2_mean_j = (mean_j - m_j)^2 / s_j^2`` and ``b2_sd_j = (sd_j - s_j)^2 / s_j^2``: squared bias in
  reference-variance units (as BlackJAX's benchmarks measure it against Inference Gym's ground truth);
* ``bias2_mean_max`` / ``bias2_sd_max``: their largest values over all components; ``mean_err`` / ``sd_err`` are
  their square roots, max |mean - m| / s and max |sd - s| / s;
* ``ess_ref``: how many exact posterior draws the fit's error is worth. With n exact draws, n x b2_mean_j is a
  chi-square variable with one degree of freedom and, for a normal marginal, so is 2n x b2_sd_j; the effective
  b2 = max(bias2_mean_max, 2 * bias2_sd_max) is the largest of k = 2d of them over the d compared components,
  divided by n. Its median is c_k / n with c_k = F^-1(0.5^(1/k)), F the chi-square(1) CDF (the median of the
  largest of k independent chi-square(1) variables: P(max <= c) = F(c)^k). Reading this backwards,

      ess_ref = min(c_k / max(bias2_mean_max, 2 * bias2_sd_max), bound),   and 0 where that is below 1,

  so that exact draws are worth their number: the median ``ess_ref`` of n exact i.i.d. draws is n whatever d is
  (``tests/diagnostics/test_accuracy.py`` checks it at d = 1 ... 1000). Without c_k the maximum would count an
  exact sampler's draws c_k times too few (c_k is 1.1 at d = 1, 4.5 at d = 10, 12.8 at d = 1000; about 2 ln k for
  large k).
  The bound is what the fit could be worth with no bias at all. An MCMC fit is bounded by its own
  ``ess_bulk_min``: a chain is never worth more than its ESS, however close its means happen to land. An
  approximation is bounded by the number of draws it returned (chains x draws): that only limits the
  Monte-Carlo noise of its own draws, which more draws would remove, so its ``ess_ref`` is in effect c_k / bias^2.
  A value below 1 means some mean or sd is further from the reference than a single exact draw would be
  expected to put it: such a fit is not a sample of this posterior and counts as 0.
* ``ess_ref_per_s`` = ``ess_ref`` / total wall time. An approximation whose worst mean is further off than one
  exact draw's would be (b2 above c_k) has ``ess_ref`` 0 and ``ess_ref_per_s`` 0, however fast it ran. A mildly
  biased approximation keeps c_k / bias^2 draws' worth, and a fast one can then score more per second than a
  slower sampler that is exact, although its worth never grows with more time; so the ranking uses the next
  column.
* ``seconds_to_target`` and ``seconds_to_precise``: the wall time after which the fit's estimate is, and stays,
  worth as many exact draws as the comparison's rough and precise targets ask (``bz.compare(targets=(rough,
  precise))``, by default :data:`DEFAULT_TARGETS`: 10 and 100 draws; effective b2 <= c_k / target,
  :func:`target_bias2`). At d = 1 the rough target allows a worst mean about 0.33 reference sds off and the
  precise one about 0.1; more components allow more, as c_k grows. An MCMC fit is read off its running estimates
  (:func:`running_bias2`), an approximation takes its total time if its final estimate meets the target; infinite
  when the fit never does. This is how BlackJAX's benchmarks rank samplers (the cost of reaching a fixed b2
  against a ground truth), and it ranks an approximation that stops short of a target below every sampler that
  reaches it. Two targets, because one does not say it all: a rough approximation can be the fastest to 10
  draws' worth and never reach 100, and the verdict names the fastest to each and the most accurate fit. The
  report's ranking bars show both columns.

The ranking puts every fit whose own diagnostics pass first. An MCMC fit passes (:func:`convergence_problems`)
with R-hat below :data:`RHAT_MAX`, bulk ESS at least :data:`ESS_PER_CHAIN_MIN` per chain (the limits PyMC warns
at, after Vehtari et al. 2021) and no divergent transitions; one that fails them has ``converged`` False and is
ranked after every fit that passes, with its problems beside its times (:func:`flagged`): a chain that has not mixed can
dip below a target by chance, and nothing in its own output says it will stay there; but one divergence in
thousands of draws does not make a fit's measured error untrue, so a fit measured against a trusted reference is
never dropped from the ranking.

One limit: the reference's own Monte-Carlo error (its ``mcse_mean``) is a floor under every b2, so ``ess_ref``
cannot meaningfully exceed the reference's ESS.
``reference_trusted`` is the reference's verdict under the catalogue's validation rules (None: no reference);
when it is False the accuracy columns are measured against a posterior summary that may be wrong, and the report
shows them as untrusted.

Predictive scores (PSIS-LOO)
----------------------------
Where a fit has ArviZ's ``log_likelihood`` group (every fit of a model of one's own, ``bz.models.from_pymc`` /
``from_numpyro``), ``az.loo`` (Pareto-smoothed importance-sampling leave-one-out, Vehtari, Gelman and Gabry 2017)
gives ``elpd_loo`` (the expected log predictive density of each training observation left out, summed; higher is
better), its standard error ``elpd_loo_se``, ``p_loo`` (the effective number of parameters) and ``pareto_k_bad``:
the observations whose Pareto k exceeds :data:`PARETO_K_MAX`, for which the importance weights are too uneven to
trust the estimate (the report flags them). NaN where the fit has no such group. An approximation's draws give
the LOO of the approximation, not of the posterior. A point estimate (every draw giving every observation the same
log likelihood: a MAP or type-II estimate repeated, or draws that only vary what the likelihood does not use) has
no LOO at all: az.loo would return its in-sample log predictive density with ``p_loo`` 0, which reads as a better
score than any fit that accounts for its uncertainty. Its columns are NaN and ``loo_note`` says why (empty for the
other fits).
"""
from __future__ import annotations

import math
import numbers
import warnings

import arviz as az
import numpy as np
from scipy.stats import chi2

from bayeszoo.catalogue.reference import moving
from bayeszoo.results import RHAT_MAX   # an MCMC fit at or above this R-hat has not converged

ESS_METHOD = "ArviZ rank-normalised split-chain ESS (bulk and tail), Vehtari et al. (2021)"

#: columns measured against the reference; untrusted when the reference is
ACCURACY_COLUMNS = ["mean_err", "sd_err", "bias2_mean_max", "bias2_sd_max", "ess_ref", "ess_ref_per_s",
                    "seconds_to_target", "seconds_to_precise"]

TABLE_COLUMNS = ["backend", "kind", "seconds", "ess_bulk_min", "ess_bulk_median", "ess_tail_min",
                 "ess_bulk_per_s", "ess_per_grad", "rhat_max", "divergences", "converged", *ACCURACY_COLUMNS,
                 "reference_trusted"]

#: PSIS-LOO columns, after the table's own and before the family's metrics (the report's predictive scores)
LOO_COLUMNS = ["elpd_loo", "elpd_loo_se", "p_loo", "pareto_k_bad"]
#: why a fit's PSIS-LOO columns are empty although it has a ``log_likelihood`` group
POINT_ESTIMATE_LOO = ("a point estimate: every draw gives each observation the same log likelihood, so PSIS-LOO "
                      "would be its in-sample log predictive density with p_loo 0, not an estimate of "
                      "out-of-sample fit; left out")
PARETO_K_MAX = 0.7   # above it an observation's LOO estimate is unreliable (Vehtari et al. 2017)

SD_WEIGHT = 2.0   # an sd is estimated about twice as precisely as a mean from the same draws (normal marginals)
#: (rough, precise): ``seconds_to_target`` and ``seconds_to_precise`` time the way to an estimate worth this many
#: exact draws (``bz.compare(targets=...)``)
DEFAULT_TARGETS = (10, 100)
ESS_PER_CHAIN_MIN = 100  # nor one whose smallest bulk ESS is below this per chain (PyMC's warning limit)


def _components(fit, names) -> dict[str, np.ndarray]:
    """Posterior draws of each variable flattened to (chain, draw, n_components)."""
    post = fit.idata.posterior
    out = {}
    for name in names:
        if name in post:
            arr = post[name].values
            out[name] = arr.reshape(arr.shape[0], arr.shape[1], -1)
    return out


def _scalar_ess(fit, names, method: str) -> np.ndarray:
    comps = _components(fit, names)
    if not comps:
        return np.array([np.nan])
    values = []
    iid = fit.kind != "mcmc"   # an approximation's draws are i.i.d.: their ESS is their number (module docstring)
    for arr in comps.values():
        for j in range(arr.shape[2]):
            x = arr[:, :, j]
            if np.ptp(x) == 0 or not np.all(np.isfinite(x)):
                values.append(np.nan)  # a constant (point-estimated) component has no ESS
            else:
                values.append(float(x.size) if iid else float(az.ess(x, method=method)))
    return np.asarray(values)


def _n_grad(fit) -> float:
    n = fit.info.get("n_grad")
    return float(n) if n is not None and float(n) > 0 else math.nan


def sampling_diagnostics(fit, names) -> dict:
    """ESS bulk / tail, ESS per second and per gradient, R-hat and divergences of one fit."""
    bulk = _scalar_ess(fit, names, "bulk")
    tail = _scalar_ess(fit, names, "tail")
    finite = bulk[np.isfinite(bulk)]
    ess_min = float(finite.min()) if finite.size else math.nan
    row = {
        "ess_bulk_min": ess_min,
        "ess_bulk_median": float(np.median(finite)) if finite.size else math.nan,
        "ess_tail_min": float(np.nanmin(tail)) if np.isfinite(tail).any() else math.nan,
        "ess_bulk_per_s": ess_min / fit.seconds if fit.seconds > 0 and finite.size else math.nan,
        # an approximation's gradients buy its fit, not its (i.i.d.) draws
        "ess_per_grad": ess_min / _n_grad(fit) if fit.kind == "mcmc" else math.nan,
        "rhat_max": math.nan,
        "divergences": math.nan,
    }
    if fit.kind == "mcmc" and fit.n_chains >= 2:
        rhats = []
        for arr in _components(fit, names).values():
            for j in range(arr.shape[2]):
                x = arr[:, :, j]
                if np.ptp(x) > 0 and np.all(np.isfinite(x)):
                    rhats.append(float(az.rhat(x)))
        row["rhat_max"] = max(rhats) if rhats else math.nan
    stats = getattr(fit.idata, "sample_stats", None)
    if stats is not None and "diverging" in stats:
        row["divergences"] = int(stats["diverging"].values.sum())
    problems = convergence_problems(fit, row)
    row["converged"] = None if fit.kind != "mcmc" else not problems
    row["convergence_problems"] = "; ".join(problems)
    return row


def convergence_problems(fit, diagnostics: dict) -> list[str]:
    """Why an MCMC fit's own diagnostics fail (empty when they pass; always empty for an approximation):
    R-hat at or above :data:`RHAT_MAX`, smallest bulk ESS below :data:`ESS_PER_CHAIN_MIN` per chain, any
    divergent transition. ``diagnostics`` holds :func:`sampling_diagnostics`'s ``rhat_max``, ``ess_bulk_min``
    and ``divergences``."""
    if fit.kind != "mcmc":
        return []
    problems = []
    rhat, ess, divergences = (diagnostics.get(k, math.nan) for k in ("rhat_max", "ess_bulk_min", "divergences"))
    if rhat >= RHAT_MAX:
        problems.append(f"R-hat {rhat:.3f} (wanted < {RHAT_MAX})")
    if not ess >= ESS_PER_CHAIN_MIN * fit.n_chains:
        shown = "none" if math.isnan(ess) else f"{ess:.3g}"
        problems.append(f"bulk ESS {shown} (wanted >= {ESS_PER_CHAIN_MIN} per chain, "
                        f"{ESS_PER_CHAIN_MIN * fit.n_chains} in all)")
    if divergences > 0:
        problems.append(f"{int(divergences)} divergent transition{'s' if divergences != 1 else ''}")
    return problems


# ------------------------------------------------------------------------------------- the reference
def _moments_of(fit, name) -> dict[str, np.ndarray]:
    # the same reductions as the catalogue's summaries, so a fit compared with itself is exactly 0 off
    da = fit.idata.posterior[name]
    return {"mean": np.asarray(da.mean(("chain", "draw")).values, dtype=float),
            "sd": np.asarray(da.std(("chain", "draw"), ddof=1).values, dtype=float)}


def _paired(fit, reference, names):
    """(name, the fit's draws (chain, draw, k), reference mean (k,), reference sd (k,)) for every variable of
    ``names`` that both hold with the same number of components."""
    mine = _components(fit, names)
    for name in names:
        if name not in mine or name not in reference.moments:
            continue
        mean = np.asarray(reference.moments[name]["mean"], dtype=float).reshape(-1)
        sd = np.asarray(reference.moments[name]["sd"], dtype=float).reshape(-1)
        if mean.size == mine[name].shape[2] == sd.size:
            yield name, mine[name], mean, sd


def _scale(ref_mean: np.ndarray, ref_sd: np.ndarray) -> np.ndarray:
    return np.where(moving(ref_mean, ref_sd), ref_sd, np.nan)   # a point-estimated component gives no scale


def _max(values: list[np.ndarray]) -> float:
    pooled = np.concatenate([np.ravel(v) for v in values]) if values else np.array([])
    pooled = pooled[np.isfinite(pooled)]
    return float(pooled.max()) if pooled.size else math.nan


def reference_errors(fit, reference, names) -> dict:
    """``mean_err``, ``sd_err``, ``bias2_mean_max`` and ``bias2_sd_max`` of ``fit`` against ``reference`` (a
    Reference, or None) over all components of ``names`` (module docstring)."""
    empty = {"mean_err": math.nan, "sd_err": math.nan, "bias2_mean_max": math.nan, "bias2_sd_max": math.nan}
    if reference is None:
        return empty
    mean_dev, sd_dev = [], []
    for name, _, ref_mean, ref_sd in _paired(fit, reference, names):
        mine = _moments_of(fit, name)
        scale = _scale(ref_mean, ref_sd)
        sd = mine["sd"].reshape(-1) if fit.n_chains * fit.n_draws > 1 else np.zeros_like(ref_sd)
        mean_dev.append(np.abs(mine["mean"].reshape(-1) - ref_mean) / scale)
        sd_dev.append(np.abs(sd - ref_sd) / scale)
    if not mean_dev:
        return empty
    mean_err, sd_err = _max(mean_dev), _max(sd_dev)
    return {"mean_err": mean_err, "sd_err": sd_err, "bias2_mean_max": mean_err ** 2, "bias2_sd_max": sd_err ** 2}


def compared_components(reference, names) -> int:
    """d: the components of ``names`` the reference gives a scale to (a finite, positive sd)."""
    if reference is None:
        return 0
    d = 0
    for name in names:
        if name in reference.moments:
            d += int(np.sum(moving(reference.moments[name]["mean"], reference.moments[name]["sd"])))
    return d


def noise_max(d: int) -> float:
    """c_k, k = 2d: the median effective b2 of one exact draw over d components (module docstring); NaN for d 0."""
    if d < 1:
        return math.nan
    return float(chi2.ppf(0.5 ** (1.0 / (2 * d)), 1))


def target_bias2(reference, names, draws: float) -> float:
    """The effective b2 of an estimate worth ``draws`` exact draws over these components."""
    return noise_max(compared_components(reference, names)) / draws


def checked_targets(targets) -> tuple:
    """``targets`` as (rough, precise) numbers of exact draws, or a ValueError that says what is wrong and what
    would do: two finite real numbers, each at least 1 (an estimate worth less than one draw counts as 0), the
    rough one below the precise one."""
    example = f"e.g. targets={DEFAULT_TARGETS} (the default: worth {DEFAULT_TARGETS[0]} and {DEFAULT_TARGETS[1]} " \
              f"exact draws)"
    pair = tuple(targets) if isinstance(targets, (tuple, list)) else None
    if pair is None or len(pair) != 2 or not all(isinstance(t, numbers.Real) and not isinstance(t, (bool, np.bool_))
                                                 for t in pair):
        raise ValueError(f"targets must be two numbers of exact draws, (rough, precise); got {targets!r}: give "
                         f"{example}")
    if not all(math.isfinite(t) for t in pair):
        raise ValueError(f"targets must be finite numbers of exact draws; got {targets!r}: give {example}")
    if min(pair) < 1:
        raise ValueError(f"targets must be worth at least 1 exact draw each (below one draw a fit counts as 0); "
                         f"got {targets!r}: give {example}")
    if not pair[0] < pair[1]:
        raise ValueError(f"targets must put the rough target below the precise one, (rough, precise); got "
                         f"{targets!r}: give {example}")
    return tuple(int(t) if float(t).is_integer() else float(t) for t in pair)


def effective_bias2(bias2_mean, bias2_sd):
    """The squared bias that ``ess_ref`` inverts: max(b2 of the means, 2 x b2 of the sds)."""
    return np.fmax(bias2_mean, SD_WEIGHT * np.asarray(bias2_sd, dtype=float))


def ess_bound(fit, ess_bulk_min: float) -> float:
    """What ``fit`` would be worth with no bias: its bulk ESS (MCMC) or its number of draws (approximation)."""
    draws = float(fit.n_chains * fit.n_draws)
    if fit.kind == "mcmc" and math.isfinite(ess_bulk_min):
        return ess_bulk_min
    return draws


def bias_aware_ess(bias2_mean: float, bias2_sd: float, bound: float, calibration: float) -> float:
    """``ess_ref``: min(c_k / effective b2, bound) with ``calibration`` c_k (:func:`noise_max`), 0 below one
    draw's worth; NaN when nothing was compared."""
    b2 = float(effective_bias2(bias2_mean, bias2_sd))
    if math.isnan(b2) or math.isnan(calibration):
        return math.nan
    ess = bound if b2 == 0 else min(calibration / b2, bound)
    return ess if ess >= 1 else 0.0


def accuracy(fit, reference, names, ess_bulk_min: float, targets=DEFAULT_TARGETS) -> dict:
    """The accuracy columns of one fit (module docstring), plus ``reference_trusted``; ``targets`` are the
    (rough, precise) numbers of exact draws that ``seconds_to_target`` and ``seconds_to_precise`` time."""
    row = reference_errors(fit, reference, names)
    calibration = noise_max(compared_components(reference, names))
    row["ess_ref"] = bias_aware_ess(row["bias2_mean_max"], row["bias2_sd_max"], ess_bound(fit, ess_bulk_min),
                                    calibration)
    row["ess_ref_per_s"] = row["ess_ref"] / fit.seconds if fit.seconds > 0 else math.nan
    row["seconds_to_target"], row["seconds_to_precise"] = seconds_to_targets(
        fit, reference, names, row, [calibration / draws for draws in targets])
    row["reference_trusted"] = None if reference is None else getattr(reference, "trusted", None)
    return row


def seconds_to_targets(fit, reference, names, errors: dict, targets) -> list[float]:
    """Per effective b2 of ``targets`` (:func:`target_bias2`), the wall time after which the fit's effective b2 is
    at most that for good (module docstring): for an MCMC fit the first time from which its running estimates stay
    there, for an approximation its total time when its final estimate is there; inf if never; NaN with nothing to
    compare (``errors`` holds the final ``bias2_mean_max`` and ``bias2_sd_max``)."""
    final = float(effective_bias2(errors["bias2_mean_max"], errors["bias2_sd_max"]))
    if reference is None or math.isnan(final):
        return [math.nan] * len(targets)
    curve = None
    out = []
    for target in targets:
        if math.isnan(target):
            out.append(math.nan)
        elif final > target:
            out.append(math.inf)
        elif fit.kind != "mcmc" or fit.n_draws < 2:
            out.append(float(fit.seconds))
        else:
            if curve is None:
                curve = running_bias2(fit, reference, names)
            above = np.flatnonzero(~(curve["bias2"] <= target))
            out.append(float(curve["seconds"][0 if above.size == 0 else above[-1] + 1]))
    return out


def running_bias2(fit, reference, names, n_points: int = 60) -> dict[str, np.ndarray]:
    """Accuracy of an MCMC fit's running estimates against wall time.

    After the first t kept draws of every chain (pooled), the largest b2 of the running means and sds (module
    docstring) and the time they were ready: compile + tune + (t / draws) of the sampling time. ``t`` runs over
    up to ``n_points`` values spaced evenly on a log scale, ending at all draws, where the values equal
    :func:`reference_errors`'s. Returns arrays ``draws``, ``seconds``, ``bias2_mean``, ``bias2_sd`` and ``bias2``
    (their :func:`effective_bias2`)."""
    chains, n = fit.n_chains, fit.n_draws
    first = 1 if chains > 1 else 2   # an sd needs two draws
    stops = np.unique(np.geomspace(min(first, n), n, max(n_points, 2)).round().astype(int))
    pairs = list(_paired(fit, reference, names))
    b2_mean = np.full(stops.size, np.nan)
    b2_sd = np.full(stops.size, np.nan)
    for _, draws, ref_mean, ref_sd in pairs:
        var = _scale(ref_mean, ref_sd) ** 2
        dev = draws - ref_mean    # sums of deviations from the reference mean keep the squares well scaled
        s1, s2, prev = np.zeros(ref_mean.size), np.zeros(ref_mean.size), 0
        for i, stop in enumerate(stops):
            chunk = dev[:, prev:stop]
            s1 += chunk.sum((0, 1))
            s2 += (chunk ** 2).sum((0, 1))
            prev, m = stop, chains * stop
            mean_dev = s1 / m
            sd = np.sqrt(np.maximum(s2 - m * mean_dev ** 2, 0.0) / (m - 1)) if m > 1 else np.zeros_like(ref_sd)
            b2_mean[i] = np.fmax(b2_mean[i], _max([mean_dev ** 2 / var]))
            b2_sd[i] = np.fmax(b2_sd[i], _max([(sd - ref_sd) ** 2 / var]))
    timing = fit.timing
    seconds = timing["compile"] + timing["tune"] + timing["sample"] * stops / n
    return {"draws": stops, "seconds": seconds, "bias2_mean": b2_mean, "bias2_sd": b2_sd,
            "bias2": effective_bias2(b2_mean, b2_sd)}


def reference_noise_floor(reference, names) -> float:
    """The largest (mcse_mean / sd)^2 of the reference over ``names``: the b2 its own Monte-Carlo error alone
    gives a perfect fit; NaN where the reference has no MCSEs."""
    if reference is None:
        return math.nan
    values = []
    for name in names:
        m = reference.moments.get(name, {})
        if "mcse_mean" in m and "sd" in m and "mean" in m:
            with np.errstate(invalid="ignore", divide="ignore"):
                scale = _scale(np.asarray(m["mean"], float), np.asarray(m["sd"], float))
                values.append((np.asarray(m["mcse_mean"], float) / scale) ** 2)
    return _max(values)


def loo_columns(fit) -> dict:
    """``elpd_loo``, ``elpd_loo_se``, ``p_loo`` and ``pareto_k_bad`` of ``fit`` from ``az.loo`` on its
    ``log_likelihood`` group (variable ``y`` where there are several), and ``loo_note``; NaN without one, and for a
    point estimate, whose ``loo_note`` says why (module docstring)."""
    empty = {**{name: math.nan for name in LOO_COLUMNS}, "loo_note": ""}
    if "log_likelihood" not in fit.idata.groups():
        return empty
    group = fit.idata.log_likelihood
    var_name = "y" if "y" in group.data_vars and len(group.data_vars) > 1 else None
    if is_point_estimate(group[var_name] if var_name else group):
        return {**empty, "loo_note": POINT_ESTIMATE_LOO}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # ArviZ's warning on large Pareto k: pareto_k_bad counts them
        # an approximation's draws are i.i.d. (relative efficiency 1); ArviZ estimates an MCMC fit's from its ESS
        loo = az.loo(fit.idata, pointwise=True, var_name=var_name, reff=1.0 if fit.kind != "mcmc" else None)
    k = np.asarray(loo.pareto_k, dtype=float)
    return {"elpd_loo": float(loo.elpd_loo), "elpd_loo_se": float(loo.se), "p_loo": float(loo.p_loo),
            "pareto_k_bad": int(np.sum(~(k <= PARETO_K_MAX))), "loo_note": ""}


def is_point_estimate(log_likelihood) -> bool:
    """Whether every observation's log likelihood is the same at every draw (``log_likelihood``: a DataArray or
    Dataset over chain, draw and the observations), to rounding: then the draws carry no uncertainty that
    leave-one-out could weigh."""
    arrays = log_likelihood.data_vars.values() if hasattr(log_likelihood, "data_vars") else [log_likelihood]
    for da in arrays:
        values = np.asarray(da.values, dtype=float)
        values = values.reshape(values.shape[0] * values.shape[1], -1)
        if values.shape[0] < 2:
            return True
        spread = np.ptp(values, axis=0)
        if not np.all(spread <= 1e-12 * (1.0 + np.abs(values[0]))):   # NaN spreads count as varying
            return False
    return True


def table_row(model, data, name: str, fit, reference, targets=DEFAULT_TARGETS) -> dict:
    """One row of ``Comparison.table()``: diagnostics, accuracy against ``reference`` (a Reference or None) with
    the (rough, precise) ``targets``, family metrics. The reference's own run (a grid cell given as the reference)
    is not measured against itself: its accuracy columns are NaN, not a zero error that would read as the most
    accurate fit."""
    names = list(model.var_dims(data))
    row = {"backend": name, "kind": fit.kind, "seconds": fit.seconds}
    row.update(sampling_diagnostics(fit, names))
    row.update(accuracy(fit, reference, list(model.compare_vars) or names, row["ess_bulk_min"], targets))
    if reference is not None and fit is getattr(reference, "fit", None):
        row.update(dict.fromkeys(ACCURACY_COLUMNS, math.nan))
    row.update(loo_columns(fit))
    row.update({k: v for k, v in model.score(fit, data).items()})
    row["error"] = ""
    return row


# ------------------------------------------------------------------------------------------ the verdict
def flagged(row) -> bool:
    """Whether a table row is an MCMC fit whose own diagnostics fail (``converged`` False): ranked after every
    fit whose diagnostics pass."""
    return row.get("converged") is False or row.get("converged") is np.False_


def ranking_key(row, column: str) -> tuple:
    """The ranking by ``column`` (a time to a target): every fit whose diagnostics pass before every flagged one,
    then the faster first, then the one worth more exact draws."""
    worth = float(row.get("ess_ref", math.nan))
    return flagged(row), float(row[column]), -worth if math.isfinite(worth) else 0.0


def _generic(fit) -> bool:
    """A library's generic sampler or approximation (PyMC, NumPyro, nutpie, BlackJAX), not a hand-written one."""
    return fit.idata.posterior.attrs.get("inference_library", "bayeszoo") != "bayeszoo"


def _how_far(row) -> str:
    mean_err, sd_err = float(row["mean_err"]), float(row["sd_err"])
    if math.isnan(mean_err):
        return "not measured"
    if mean_err ** 2 >= SD_WEIGHT * sd_err ** 2 or math.isnan(sd_err):
        return f"worst mean {mean_err:.2g} reference sds off"
    return f"worst sd {sd_err:.2g} reference sds off"


def _problems(row) -> str:
    return row.get("convergence_problems") or "its diagnostics fail"


def _seconds(value) -> str:
    return f"{float(value):.3g} s" if math.isfinite(float(value)) else "never"


def verdict(table, fits: dict, reference_label: str | None, reference_trusted: bool | None,
            has_reference: bool, targets=DEFAULT_TARGETS, one_draw: float = math.nan) -> list[str]:
    """Plain sentences read off the comparison ``table``, one a line: the fastest backend to the rough target, the
    fastest to the precise one and the most accurate (when they differ, each named; the fastest also against the
    best generic sampler when it is hand-written), which never reach the targets and how far off they stay, and
    the MCMC fits whose own diagnostics fail, ranked after the others with their problems and times.

    ``fits`` maps the table's labels to their Fits (to tell generic from hand-written backends); the row
    ``reference_label`` (the reference's own run) is not ranked. ``targets`` are the (rough, precise) exact draws
    of ``seconds_to_target`` and ``seconds_to_precise``; ``one_draw`` is the effective b2 of one exact draw over the
    compared components (:func:`noise_max`), which gives each target's worst mean error in reference sds."""
    rows = [r for _, r in table.iterrows() if not r.get("error") and r["backend"] != reference_label]
    if not has_reference:
        return ["There is no reference posterior, so nothing is measured for accuracy and nothing is ranked.",
                *_not_converged(rows)]
    if reference_trusted is False:
        return ["The reference fails its validation rules (see the banner), so the accuracy columns may be wrong "
                "and nothing is ranked.", *_not_converged(rows)]
    measured = [r for r in rows if math.isfinite(float(r.get("mean_err", math.nan)))]
    rough, precise = targets
    columns = {"rough": "seconds_to_target", "precise": "seconds_to_precise"}
    names = {which: f"the {which} target (worth {draws} exact draws"
                    + (f", about {math.sqrt(one_draw / draws):.2g} reference sds)" if math.isfinite(one_draw) else ")")
             for which, draws in (("rough", rough), ("precise", precise))}

    def fastest(rows_, column):
        timed = [r for r in rows_ if column in r and math.isfinite(float(r[column]))]
        return min(timed, key=lambda r: ranking_key(r, column)) if timed else None

    def name(row):
        return f"{row['backend']} (its diagnostics fail)" if flagged(row) else row["backend"]

    def against_generic(best, column):
        """How many times faster than the best generic sampler, when the fastest is hand-written."""
        if best["backend"] not in fits or _generic(fits[best["backend"]]):
            return ""
        generic = fastest([r for r in measured if r["backend"] in fits and _generic(fits[r["backend"]])], column)
        if generic is None:
            any_generic = any(r["backend"] in fits and _generic(fits[r["backend"]]) for r in measured)
            return ": no generic sampler reaches it" if any_generic else ""
        t_best, t_generic = float(best[column]), float(generic[column])
        ratio = t_generic / t_best if t_best > 0 else math.inf
        return f": {ratio:.3g} times faster than the best generic sampler, {name(generic)} ({t_generic:.3g} s)"

    out, roles = [], {}   # backend -> what it is named for, in order
    for which, column in columns.items():
        best = fastest(measured, column)
        if best is None:
            out.append(f"No backend reaches {names[which]}.")
            continue
        roles.setdefault(best["backend"], [best, []])[1].append(
            f"the fastest to {names[which]}, in {float(best[column]):.3g} s{against_generic(best, column)}")
    if measured:
        accurate = min(measured, key=lambda r: (flagged(r), float(effective_bias2(r["bias2_mean_max"],
                                                                                    r["bias2_sd_max"]))))
        roles.setdefault(accurate["backend"], [accurate, []])[1].append(f"the most accurate ({_how_far(accurate)})")
    named = [f"{name(row)} is {parts[0] if len(parts) == 1 else '; '.join(parts[:-1]) + '; and ' + parts[-1]}."
             for row, parts in roles.values()]
    out = named + out
    out += _shortfalls(measured, columns)
    out += _not_converged([r for r in rows if not math.isfinite(float(r.get("mean_err", math.nan)))])
    return out


def _shortfalls(measured: list, columns: dict[str, str]) -> list[str]:
    """The sentences of :func:`verdict` on the measured rows that fall short: the fits whose diagnostics pass but
    never reach the rough target, or reach it but not the precise one, then the fits whose diagnostics fail, with
    their problems, times and errors."""
    out = []
    clean = [r for r in measured if not flagged(r)]
    never = [r for r in clean if math.isinf(float(r.get(columns["rough"], math.nan)))]
    if never:
        out.append("Never reaching the rough target: "
                   + "; ".join(f"{r['backend']} ({_how_far(r)})" for r in never) + ".")
    rough_only = [r for r in clean if math.isfinite(float(r.get(columns["rough"], math.nan)))
                  and math.isinf(float(r.get(columns["precise"], math.nan)))]
    if rough_only:
        out.append("Reaching the rough target but not the precise one: "
                   + "; ".join(f"{r['backend']} ({_how_far(r)})" for r in rough_only) + ".")
    bad = sorted((r for r in measured if flagged(r)), key=lambda r: ranking_key(r, columns["precise"]))
    if bad:
        best_error = min(float(effective_bias2(r["bias2_mean_max"], r["bias2_sd_max"])) for r in measured)

        def described(r):
            smallest = float(effective_bias2(r["bias2_mean_max"], r["bias2_sd_max"])) <= best_error
            return (f"{r['backend']} ({_problems(r)}; {_seconds(r[columns['rough']])} to the rough target, "
                    f"{_seconds(r[columns['precise']])} to the precise one, {_how_far(r)}"
                    f"{', the smallest error of all' if smallest else ''})")
        out.append("Diagnostics fail, so ranked after every fit whose diagnostics pass: "
                   + "; ".join(described(r) for r in bad) + ".")
    return out


def _not_converged(rows) -> list[str]:
    """The sentence naming the unconverged MCMC fits of ``rows`` (that nothing ranks), if any."""
    bad = [r for r in rows if flagged(r)]
    if not bad:
        return []
    return ["Not converged: " + "; ".join(f"{r['backend']} ({_problems(r)})" for r in bad) + "."]
