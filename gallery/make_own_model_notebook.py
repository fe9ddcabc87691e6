"""Writes gallery/own_model.ipynb with its outputs (run: .venv/bin/python gallery/make_own_model_notebook.py): eight
schools written in PyMC and wrapped with ``bz.models.from_pymc``, a random-walk Metropolis written in the notebook
and registered with ``bz.register_sampler``, checked with ``bz.testing.check_backend``, compared with NUTS, ADVI and
the BlackJAX engines against a reference built by ``bz.catalogue.build_reference``, calibrated with ``bz.sbc``,
reported; then the centred parameterisation, for which no reference can be trusted. Sized to run in a few minutes
on two cores (BENCHMARKS.md records its runs). tests/test_gallery.py executes it (slow set) and checks that it
matches this generator."""
import os

from nbformat.v4 import new_code_cell, new_markdown_cell

import _notebook as notebook

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "own_model.ipynb")

CELLS = [
    ("md", """# Your model, your sampler

The built-in families are one use of the harness; the other is a model and a sampler of your own. This notebook
writes the eight schools model in PyMC, wraps it with `bz.models.from_pymc`, writes a random-walk Metropolis sampler
in a few lines of JAX and registers it with `bz.register_sampler`, then asks of it what bayeszoo asks of its own
backends:

* does it keep the backend contract? (`bz.testing.check_backend`)
* how close does it get to a trusted reference, and how fast, next to NUTS, ADVI and the BlackJAX engines?
  (`bz.catalogue.build_reference`, `bz.compare`)
* is it calibrated? (`bz.sbc`, simulation-based calibration)

The last section takes the centred version of the same model, where no reference can be trusted, and reads the
refusal a user meets there. The whole notebook runs in a few minutes on two cores (the last cell says how long)."""),
    ("code", """import os
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pymc as pm

import bayeszoo as bz
from bayeszoo.checks import POSITIVE
from bayeszoo.registry import Option

started = time.perf_counter()"""),
    ("md", """## The model: eight schools in PyMC

The effects of coaching programmes on test scores in eight schools (Rubin 1981): each school's estimated effect `y`
with its standard error `sigma`, and a hierarchical normal model in which the schools' true effects `theta` scatter
around a common mean `mu` with sd `tau`. Written *non-centred*, `theta = mu + tau * theta_tilde` with `theta_tilde`
standard normal, so that the posterior of `theta_tilde` does not narrow as `tau` shrinks.

`bz.models.from_pymc` reads the model as it stands, observations included: the posterior variables are the free
variables (`mu`, `tau`, `theta_tilde` over the `school` dim; the deterministic `theta` is computed from them), and
`bz.fit` and `bz.compare` need no dataset. `bz.backends(model)` lists every generic backend that runs it."""),
    ("code", """y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
sigma = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
schools = ["Choate", "Deerfield", "Phillips Andover", "Phillips Exeter", "Hotchkiss", "Lawrenceville",
           "St. Paul's", "Mt. Hermon"]

with pm.Model(coords={"school": schools}) as non_centred:
    mu = pm.Normal("mu", 0.0, 5.0)
    tau = pm.HalfCauchy("tau", 5.0)
    theta_tilde = pm.Normal("theta_tilde", 0.0, 1.0, dims="school")
    theta = pm.Deterministic("theta", mu + tau * theta_tilde, dims="school")
    pm.Normal("obs", theta, sigma, observed=y, dims="school")

model = bz.models.from_pymc(non_centred, name="eight_schools")
print(model)
print(bz.backends(model))"""),
    ("md", """## A sampler of your own: random-walk Metropolis

A sampler in BlackJAX's shape is a function of the model's log density that returns `init(position)` and
`step(key, state) -> (state, info)`. The log density is the posterior on the flat unconstrained vector (here 10
numbers: `mu`, log `tau` and the eight `theta_tilde`), Jacobians included; bayeszoo maps every kept position back
to the model's variables. The state must have a `position`; the scalar fields of `info` become the fit's
`sample_stats`, so the acceptance rate is recorded with every draw.

Metropolis proposes a Gaussian step of sd `scale` and accepts it with probability min(1, p(proposal) / p(current)).
It needs no gradient, one density evaluation per step, and adapts nothing: `scale` is an option, declared with its
default, meaning and constraint, so a bad value is refused before anything runs. The shared chain driver gives it
chains, seeds, warm-up, thinning (`thin`), timing and progress bars."""),
    ("code", """class RWMState(NamedTuple):
    position: jax.Array
    logdensity: jax.Array      # kept, so that a step evaluates the density once


class RWMInfo(NamedTuple):
    acceptance_rate: jax.Array
    is_accepted: jax.Array


def random_walk_metropolis(logdensity_fn, scale=0.5):
    \"\"\"Random-walk Metropolis with Gaussian proposals of sd `scale`\"\"\"
    def init(position):
        return RWMState(position, logdensity_fn(position))

    def step(key, state):
        key_move, key_accept = jax.random.split(key)
        proposal = state.position + scale * jax.random.normal(key_move, state.position.shape)
        proposal_logdensity = logdensity_fn(proposal)
        log_ratio = proposal_logdensity - state.logdensity
        log_ratio = jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)   # a NaN density: reject
        accept = jnp.log(jax.random.uniform(key_accept)) < log_ratio
        new = RWMState(jnp.where(accept, proposal, state.position),
                       jnp.where(accept, proposal_logdensity, state.logdensity))
        return new, RWMInfo(acceptance_rate=jnp.exp(jnp.minimum(log_ratio, 0.0)), is_accepted=accept)

    return init, step


bz.register_sampler("rwm", random_walk_metropolis,
                    options={"scale": Option(0.5, "sd of the Gaussian proposal", POSITIVE)})
bz.backends(model, details=True).query("backend == 'rwm'")[["backend", "kind", "library", "option", "default",
                                                            "meaning"]]"""),
    ("md", """## Does it keep the contract?

`bz.testing.check_backend` runs the checks every built-in backend passes, as scikit-learn's `check_estimator` does
for estimators: the fit runs; its posterior holds exactly the model's variables with their dims and finite draws;
every group carries ArviZ's provenance; an MCMC backend reports `sample_stats`; the same seed gives the same draws;
an unknown option and a wrong-typed value of each declared option are refused before the backend runs; the fit
saves and loads back. With `raise_on_failure=False` it returns the checks instead of raising on the first
failure."""),
    ("code", """checks = bz.testing.check_backend("rwm", model, raise_on_failure=False)
for check in checks:
    print(check)"""),
    ("md", """Passing the contract says the backend is well behaved, not that it samples the right distribution: that is
what the reference and the calibration below are for.

## Choosing the scale

A random walk with small steps accepts nearly every proposal and crawls; with large steps it rejects nearly all of
them. For a posterior that is roughly Gaussian in many dimensions, the best mean acceptance is about 0.23 (Roberts,
Gelman and Gilks 1997). Three short runs, reading the `acceptance_rate` the sampler reports:"""),
    ("code", """for scale in (0.2, 0.7, 2.0):
    trial = bz.fit(model, backend="rwm", draws=500, tune=200, chains=2, seed=0, progress=False, scale=scale)
    print(f"scale {scale}: mean acceptance {float(trial.idata.sample_stats.acceptance_rate.mean()):.2f}")"""),
    ("md", """We use `scale=0.7` from here on.

## A reference you can trust

`bz.catalogue.build_reference` runs two independent MCMC engines, here NUTS in PyMC (`nuts`) and NUTS in NumPyro on
PyMC's JAX export of the same model (`numpyro`), 4 chains x 2000 draws each, and returns a reference only when both
pass the catalogue's rules (R-hat below 1.01, bulk and tail ESS of at least 400, small Monte-Carlo errors, no
divergences) and agree with each other within their Monte-Carlo errors. The rule on divergences is strict: even the
non-centred model can diverge a few times at NUTS's default target acceptance of 0.9, and a single divergence
refuses the reference, so both engines run at 0.95, as the refusal would suggest. The seed differs from the
comparison's below, so that the `nuts` cell there is not a copy of the reference's own run."""),
    ("code", """reference = bz.catalogue.build_reference(
    model, engines=(("nuts", {"target_accept": 0.95}), ("numpyro", {"target_accept": 0.95})), seed=100,
    progress=False)
print(reference.describe())"""),
    ("md", """## Your sampler against the others

`bz.compare` fits every backend of the grid and measures each one against the reference. The Metropolis sampler
takes many more steps than NUTS (2000 warm-up steps, then 2500 draws kept one in 40: 100 000 steps per chain),
because each step is cheap and moves little; the others run with their own defaults.

In the table, `mean_err` and `sd_err` are the largest errors of a posterior mean and sd in reference sds, and
`seconds_to_target` is the wall time (compilation included) after which a fit's estimates are worth 10 exact
posterior draws and stay so: what the ranking is by. An MCMC fit that fails its own diagnostics (`converged`
False: R-hat, ESS, divergences) is not ranked, however close its means land."""),
    ("code", """grid = ["rwm", "nuts", "advi", "blackjax_nuts", "blackjax_mclmc", "blackjax_pathfinder",
        "blackjax_meanfield_vi"]
cmp = bz.compare(model, backends=grid, reference=reference, seed=0, progress=False,
                 options={"rwm": {"draws": 2500, "tune": 2000, "thin": 40, "scale": 0.7}})
columns = ["backend", "kind", "seconds", "ess_bulk_min", "rhat_max", "divergences", "converged", "mean_err",
           "sd_err", "seconds_to_target", "pareto_k_bad"]
cmp.table()[columns].round(3)"""),
    ("code", """print(cmp.verdict())"""),
    ("md", """On a posterior this small, which backend comes first is decided by set-up times (compilation and
warm-up), which vary with the load of the machine from one run to the next. The target is modest on purpose, 10
exact draws' worth, so the fast approximations whose errors are within it, ADVI and mean-field VI here, are ranked
among the samplers; but their errors stay where they are however long they run, while the samplers' keep shrinking
(the plot below). Pathfinder's errors stay too large to reach the target at all. `pareto_k_bad` counts the schools
whose PSIS-LOO estimate cannot be trusted (Pareto k above 0.7); the approximations' counts are those of their own
draws, not of the posterior's.

### Metropolis against NUTS

Where does the time go? On a posterior this small, much of each sampler's wall time is set-up (compilation, by
JAX for the Metropolis sampler and the BlackJAX engines, by PyTensor for PyMC's NUTS; NUTS's warm-up), and the
sampling itself takes a fraction of a second to a second:"""),
    ("code", """table = cmp.table().set_index("backend")
timing = pd.DataFrame({name: cmp.fits[name].timing for name in ("rwm", "nuts", "blackjax_nuts")}).T
timing["ess_bulk_min"] = table.loc[timing.index, "ess_bulk_min"]
timing["steps per chain"] = [cmp.fits[name].info.get("iterations", np.nan) for name in timing.index]
print(timing.round(2))
rwm_s, nuts_s = table.loc["rwm", "seconds_to_target"], table.loc["nuts", "seconds_to_target"]
print(f"seconds to target: rwm {rwm_s:.2f} s, nuts {nuts_s:.2f} s; rwm / nuts = {rwm_s / nuts_s:.2f}")"""),
    ("md", """Both samplers reach the target with their first few draws, so their time to target is their set-up:
compilation for the Metropolis sampler (its 2000 warm-up steps take hundredths of a second), compilation and
warm-up for NUTS. The ratio is a ratio of set-up times, and it moves with the load of the machine and with JAX's
compilation cache (a kernel whose compilation took over a second is read from disk the next time): it ranged from
0.2 to 1.7 over the runs recorded in BENCHMARKS.md. Each Metropolis step costs one density evaluation and no
gradient, so 100 000 steps per chain take under a second and end with a smallest ESS of the same order as NUTS's
from far fewer, costlier steps.

On ten dimensions, then, the hand-written random walk holds its own. That does not carry over to larger models: a
random walk needs a number of steps per independent draw that grows in proportion to the dimension (Roberts,
Gelman and Gilks 1997), Hamiltonian Monte Carlo, which NUTS is, roughly as its fourth root (Beskos et al. 2013);
and a random walk with one `scale` for every direction mixes as slowly as the posterior's narrowest direction
allows.

The accuracy plot draws each fit's error against wall time, with the target and the ranking:"""),
    ("code", """cmp.plot("accuracy")"""),
    ("md", """## Is the sampler calibrated?

Simulation-based calibration (Talts et al. 2018) tests the sampler itself: draw parameters from the prior, simulate
data from them, fit, and rank the true parameters among the posterior draws. A sampler that samples the posterior
gives uniform ranks. `bz.sbc` simulates from the PyMC model's prior predictive (`pm.sample_prior_predictive`),
rebuilds the model around each simulated data set (`pm.observe` on a copy; `non_centred` itself is untouched) and
fits it again. Thirty simulations of one chain, at the same `scale`; a random walk's steps are cheap, so each fit
takes 20 000 draws, thinned to about one per effective sample before ranking. Each simulation is a model with other
constants, so the sampler compiles once per simulation: that is most of the cost."""),
    ("code", """schools_calibration = bz.sbc(model, "rwm", n_simulations=30, draws=20000, tune=2000, chains=1, seed=0, progress=False,
                             scale=0.7)
print(schools_calibration.verdict())
print(f"{schools_calibration.seconds:.0f} s, {schools_calibration.seconds / 30:.1f} s per simulation")
schools_calibration.ess_min.describe()[["min", "25%", "50%", "max"]].rename("smallest bulk ESS of a fit")"""),
    ("md", """The verdict is neither a pass nor a fail. On most simulated data sets the chain mixes, slowly (a few dozen
effective draws in 20 000), but on some it barely moves, and those fits keep a handful of nearly independent
draws, among which a rank says nothing. They are the posteriors from other corners of the prior: the half-Cauchy
puts `tau` anywhere from 0.2 to 45 in these thirty draws, and its four largest draws (29 to 45) give four of the
six worst-mixing fits (the least mixed, at `tau` = 45, has a bulk ESS of about 1.5). That is a finding about the
sampler: a random walk with one fixed scale does not cover this model's prior. An adaptive scale (tuned in
warm-up, as NUTS tunes its step size) is the fix; more draws per fit would only hide it.

What can still be checked is the code: that the Metropolis step samples the posterior it is given. For that we
calibrate it on a built-in model of the same size on which it mixes everywhere: a Gaussian-process classifier
(probit likelihood, squared-exponential kernel, hyperparameters fixed) on ten inputs, a posterior of ten
unconstrained dimensions, as eight schools has. The bands narrow as one over the square root of `n_simulations`:
thirty catch gross errors only."""),
    ("code", """X = np.linspace(-3.0, 3.0, 10)[:, None]
points = bz.datasets.Dataset(X=X, y=(X[:, 0] > 0).astype(float), name="ten-points",
                             meta={"task": "classification"})           # only X matters: y is simulated
gpc = bz.models.GPC(likelihood="probit", kernel="se", log_lengthscale=0.0, log_amplitude=0.0)
calibration = bz.sbc(gpc, "rwm", points, n_simulations=30, draws=4000, tune=1000, chains=1, seed=0,
                     progress=False, scale=0.7)
print(calibration.verdict())
print(f"{calibration.seconds:.0f} s, {calibration.seconds / calibration.n_simulations:.1f} s per simulation")"""),
    ("md", """Each panel is one component's ECDF of the fractional ranks minus the uniform CDF, with its simultaneous
band (Säilynoja, Bürkner and Vehtari 2022); the components that deviate most come first. A calibrated sampler's
lines wander inside the bands; a posterior too wide shows as a dip then a hump, too narrow as a hump then a dip, a
shift as one sign throughout."""),
    ("code", """calibration.plot()"""),
    ("md", """A pass is evidence that the Metropolis code samples the posterior it is given, on a model where it mixes; on
eight schools, the calibration above says where it does not, and the agreement with the reference says that on
the real data it does. The checks cover each other's blind spots. Thirty simulations are enough to fail a Metropolis step whose log acceptance ratio
is halved (its posterior too wide). A plainly broken sampler whose fits are worth a draw or two (one that accepts
every proposal: a random walk, not a sampler of any posterior) leaves ranks among two thinned draws, which cannot
show anything: the verdict then says NOT JUDGED rather than passed, and asks for more draws per fit (both measured
in BENCHMARKS.md).

## The report

`cmp.report(path)` writes the comparison as one self-contained HTML page: the verdict, the reference's banner, the
table with its flags, the predictive scores (PSIS-LOO), and each backend's traces, ranks and marginals over the
reference's. (`cmp.save(folder)` writes the fits, the table and the same report.)"""),
    ("code", """report = cmp.report("runs/eight_schools/report.html")
print(os.path.relpath(report), f"({os.path.getsize(report) / 1e6:.1f} MB)")"""),
    ("md", """## When no reference can be trusted: the centred model

The same model written the textbook way, `theta ~ Normal(mu, tau)`. The posterior is the same, but its geometry is
not: when `tau` is small the `theta` must all sit close to `mu`, and the posterior narrows into a funnel whose neck
no fixed step size can follow. Asking for a reference is how a user meets the problem: `build_reference` runs both
engines (the defaults, NUTS in PyMC and in NumPyro at target acceptance 0.9) and refuses, with every broken rule
and what to try."""),
    ("code", """with pm.Model(coords={"school": schools}) as centred:
    mu = pm.Normal("mu", 0.0, 5.0)
    tau = pm.HalfCauchy("tau", 5.0)
    theta = pm.Normal("theta", mu, tau, dims="school")
    pm.Normal("obs", theta, sigma, observed=y, dims="school")

centred_model = bz.models.from_pymc(centred, name="eight_schools_centred")
try:
    bz.catalogue.build_reference(centred_model, seed=0, progress=False)
except ValueError as err:
    refusal = err
    print(refusal)"""),
    ("md", """Both engines diverge: NUTS's trajectories blow up where the posterior's curvature changes faster than its
step size allows, which is the sign that the draws miss part of the posterior, whatever R-hat says. The other
broken rules follow from it: the chains stick in the neck of the funnel for long stretches, so `tau`'s ESS is small
and its R-hat high.

The refusal carries the untrusted reference (`refusal.reference`) with both runs. Plotted against log `tau`, the
divergent transitions of the first run gather at small `tau`, in the neck of the funnel, and below them the run has
almost no draws; the non-centred reference (`theta = mu + tau * theta_tilde` from its draws) shows the posterior
going on down there:"""),
    ("code", """centred_run = refusal.reference.fit.idata
theta_choate = centred_run.posterior["theta"].sel(school="Choate").values.ravel()
log_tau = np.log(centred_run.posterior["tau"].values.ravel())
diverging = centred_run.sample_stats["diverging"].values.ravel().astype(bool)
trusted = reference.fit.idata.posterior
trusted_theta = trusted["mu"] + trusted["tau"] * trusted["theta_tilde"].sel(school="Choate")

fig, ax = plt.subplots(figsize=(6, 4))
ax.scatter(trusted_theta.values.ravel(), np.log(trusted["tau"].values.ravel()), s=3, alpha=0.3, color="C0",
           label="non-centred reference")
ax.scatter(theta_choate, log_tau, s=3, alpha=0.3, color="grey", label="centred: draws")
ax.scatter(theta_choate[diverging], log_tau[diverging], s=10, color="C3",
           label=f"centred: divergent ({diverging.sum()})")
ax.set(xlabel="theta[Choate]", ylabel="log tau", title="eight schools, PyMC NUTS")
ax.legend();"""),
    ("md", """## What to try

The message names two remedies.

* **A higher target acceptance** (`("nuts", {"target_accept": 0.95})`, then 0.99): smaller steps reach further
  into the neck, so the divergences become rarer, but in a funnel this deep they do not go away (at 0.99 both
  engines still diverge, BENCHMARKS.md), and each run gets slower.
* **A reparameterisation** removes the funnel itself. For a hierarchical scale that is the non-centred form of the
  first section: sampling `theta_tilde` instead of `theta` gives the sampler a posterior without a neck, and the
  same rules then hand back a trusted reference.

The message also asks for more draws and a longer warm-up, read off the ESS and R-hat numbers. Those mend a run
that is merely short, not this one: more draws from a sampler that cannot reach part of the posterior are more of
the same biased draws. A more informative prior on `tau`, where one is justified, is the other way out."""),
    ("code", """print(f"this notebook ran in {(time.perf_counter() - started) / 60:.1f} min")"""),
]


def build():
    return notebook.build(new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in CELLS)


if __name__ == "__main__":
    notebook.write(build(), PATH)
