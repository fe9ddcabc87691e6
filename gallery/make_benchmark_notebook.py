"""Writes gallery/benchmark.ipynb with its outputs (run: .venv/bin/python gallery/make_benchmark_notebook.py): a
Metropolis-adjusted Langevin sampler written in the notebook in JAX, its step size adapted in warm-up, registered
with ``bz.register_sampler`` and benchmarked with ``bz.benchmark`` on the ``posteriordb-quick`` suite against
NumPyro's NUTS: the verdict, the tables, the performance profile, the cost heatmap, and why it fails where it fails.
Sized to run in a few minutes on two cores (BENCHMARKS.md records its runs). tests/test_gallery.py executes it (slow
set) and checks that it matches this generator."""
import os

from nbformat.v4 import new_code_cell, new_markdown_cell

import _notebook as notebook

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmark.ipynb")

CELLS = [
    ("md", """# Benchmark your sampler

`bz.compare` measures samplers on one posterior; `bz.benchmark` measures them on a **suite** of posteriors whose
answer is known, the way sampler papers report results: the cost of reaching a fixed accuracy, counted in
**gradient evaluations** (the cost that does not depend on the machine), one row per posterior, and a
**performance profile** that sums up the suite.

This notebook writes a sampler of its own, a Metropolis-adjusted Langevin algorithm (MALA) in a few lines of JAX,
registers it, and benchmarks it against NumPyro's NUTS on `posteriordb-quick`: eight posteriors of posteriordb
(hierarchical, regression, time series, volatility, mixture, hidden Markov and Gaussian-process models), each with
posteriordb's reference draws from long Stan runs. Both samplers run on the same NumPyro declaration of each model,
so the comparison is between the algorithms, on the same log density. The whole notebook runs in a few minutes on
two cores (the last cell says how long)."""),
    ("code", """import os
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

import bayeszoo as bz
from bayeszoo.checks import POSITIVE, POSITIVE_INT, PROBABILITY
from bayeszoo.registry import Option

started = time.perf_counter()"""),
    ("md", """## The suite

`bz.catalogue.suites.suite(name)` lists a suite's targets: each is a posterior with a model (here written in both
PyMC and NumPyro) and a reference. The dimension is that of the unconstrained space a sampler moves in. The last
column, the ratio of the largest to the smallest posterior sd over the model's parameters (read off the
reference), says how differently scaled a posterior is; it will matter below."""),
    ("code", """def sd_ratio(target):
    sds = np.concatenate([np.ravel(stats["sd"]) for stats in target.reference().moments.values()])
    return float(sds.max() / sds.min())


suite = bz.catalogue.suites.suite("posteriordb-quick")
pd.DataFrame([{"target": t.name, "kind": t.kind, "dimension": t.dimension, "largest / smallest sd": sd_ratio(t)}
              for t in suite]).round(1)"""),
    ("md", """## A sampler of your own: MALA with an adaptive step size

MALA (Roberts and Tweedie 1996) proposes a step along the gradient of the log density plus Gaussian noise,
`x' = x + h²/2 ∇log p(x) + h ξ`, and accepts it with the Metropolis-Hastings probability, which corrects for the
asymmetry of the proposal. One gradient evaluation per step: the gradient at the proposal is kept for the next
step. Its step size `h` is adapted during warm-up towards an acceptance rate of 0.574, the optimum for MALA in many
dimensions (Roberts and Rosenthal 1998), by a Robbins-Monro step on log `h` whose gain shrinks with the step count,
then frozen, so that the kept draws come from a fixed Markov kernel.

A sampler in BlackJAX's shape is a function of the model's log density (on the flat unconstrained vector,
Jacobians included) that returns `init(position)` and `step(key, state) -> (state, info)`. bayeszoo's chain driver
runs the chains side by side, with the seeding, warm-up, thinning, timing and the mapping back to the model's
variables; the scalar fields of `info` become the fit's `sample_stats`. The step knows nothing of the warm-up, so the
state counts its steps and the adaptation stops after `adapt_steps` of them: the default, 1000, is the default
warm-up."""),
    ("code", """class MALAState(NamedTuple):
    position: jax.Array
    logdensity: jax.Array
    grad: jax.Array             # kept with the position: one gradient evaluation per step
    log_step_size: jax.Array
    steps: jax.Array            # steps taken so far, for the warm-up's adaptation


class MALAInfo(NamedTuple):
    acceptance_rate: jax.Array
    is_accepted: jax.Array
    step_size: jax.Array


def mala(logdensity_fn, step_size=0.1, adapt_steps=1000, target_accept=0.574):
    \"\"\"Metropolis-adjusted Langevin, its step size adapted in the first `adapt_steps` steps\"\"\"
    value_and_grad = jax.value_and_grad(logdensity_fn)

    def log_proposal(to, start, grad, h):       # log q(to | start), up to a constant that cancels
        return -jnp.sum((to - start - 0.5 * h**2 * grad) ** 2) / (2 * h**2)

    def init(position):
        logdensity, grad = value_and_grad(position)
        return MALAState(position, logdensity, grad, jnp.log(step_size), jnp.asarray(0))

    def step(key, state):
        key_move, key_accept = jax.random.split(key)
        x, grad_x, h = state.position, state.grad, jnp.exp(state.log_step_size)
        proposal = x + 0.5 * h**2 * grad_x + h * jax.random.normal(key_move, x.shape)
        logdensity, grad = value_and_grad(proposal)
        log_ratio = (logdensity - state.logdensity
                     + log_proposal(x, proposal, grad, h) - log_proposal(proposal, x, grad_x, h))
        log_ratio = jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)   # a NaN density: reject
        acceptance = jnp.exp(jnp.minimum(log_ratio, 0.0))
        accept = jax.random.uniform(key_accept) < acceptance
        # warm-up: move log h towards the target acceptance, by less each step; afterwards h stays put
        gain = jnp.where(state.steps < adapt_steps, (state.steps + 1.0) ** -0.6, 0.0)
        new = MALAState(jnp.where(accept, proposal, x), jnp.where(accept, logdensity, state.logdensity),
                        jnp.where(accept, grad, grad_x), state.log_step_size + gain * (acceptance - target_accept),
                        state.steps + 1)
        return new, MALAInfo(acceptance, accept, h)

    return init, step"""),
    ("md", """`bz.register_sampler` makes it a backend like the built-in ones. Its options are declared with their
defaults, meanings and constraints, so a bad value is refused before anything runs. `gradients_per_step=1` tells
bayeszoo what a step costs: every fit then counts its gradient evaluations (warm-up and thinned steps included), as
the built-in samplers do, and the benchmark can rank it by gradients. Without it, a benchmark that includes the
sampler ranks every backend by seconds."""),
    ("code", """bz.register_sampler("mala", mala, gradients_per_step=1, options={
    "step_size": Option(0.1, "initial step size", POSITIVE),
    "adapt_steps": Option(1000, "warm-up steps in which the step size is adapted", POSITIVE_INT),
    "target_accept": Option(0.574, "acceptance rate the step size is adapted to", PROBABILITY)});"""),
    ("md", """## A first look on one posterior

Before a benchmark, one fit: eight schools, non-centred, with the harness's defaults (4 chains, 1000 warm-up steps,
1000 draws), keeping one step in ten (`thin=10`) since a MALA step is cheap and moves little. The adapted step size
is recorded with every draw, and the acceptance rate should be near its target. `fit.info["n_grad"]` counts
4 x (1000 + 1000 x 10) gradient evaluations. The compiled sampler is kept for the benchmark's fit of the same
posterior."""),
    ("code", """schools = bz.catalogue.suites.target("posteriordb/eight_schools-eight_schools_noncentered")
fit = bz.fit(schools.model("numpyro"), None, "mala", seed=0, progress=False, thin=10)
stats = fit.idata.sample_stats
print(f"acceptance {float(stats.acceptance_rate.mean()):.2f}; step size per chain "
      f"{np.round(stats.step_size.values[:, -1], 2)}; gradient evaluations {fit.info['n_grad']:,}")
print(fit)"""),
    ("md", """## The benchmark

`bz.benchmark` runs every (target, backend, seed) as one task and measures each fit against the target's
reference. The cost of a task is the gradient evaluations it took to reach an estimate worth 100 exact draws
(about 0.1 reference sds of error on one component), warm-up included; it is infinite when the fit never gets there,
and also when an MCMC fit fails its own diagnostics (R-hat of 1.01 or more, a bulk ESS below 100 per chain,
divergences), since an unmixed chain that happens to land near the answer is luck.

Both samplers keep the harness's defaults (4 chains, 1000 warm-up steps, 1000 draws); MALA keeps one step in ten,
so it takes 11 000 steps per chain, against NUTS's 2000 trajectories of up to 1023 gradient evaluations each. One
seed, to keep the notebook short: a paper would run several (`seeds=5`), and the table would then have a row per
seed and the costs would be medians over seeds. With `out=` every finished task is a file, so an interrupted run
resumes where it stopped."""),
    ("code", """board = bz.benchmark("posteriordb-quick", ["mala", "numpyro"], seeds=1, options={"mala": {"thin": 10}},
                     out="runs/benchmark", progress=False)
print(board.verdict())"""),
    ("md", """`summary()` has a row per backend: the targets it solved (of those it ran on), the geometric mean of its
cost relative to the best backend on each target it solved, the median accuracy at the end (worth how many exact
draws), and the tasks that failed or were skipped."""),
    ("code", """board.summary().round(2)"""),
    ("md", """`table()` has a row per task. Here the columns that tell the story: the cost to the target in gradient
evaluations and seconds, how much the final estimate is worth, the worst error of a posterior mean and sd (in
reference sds), and the sampler's own diagnostics."""),
    ("code", """columns = ["target", "backend", "gradients_to_target", "seconds_to_target", "worth_draws", "mean_err",
           "sd_err", "rhat_max", "ess_bulk_min", "divergences", "converged"]
table = board.table()
table["target"] = table["target"].str.removeprefix("posteriordb/")
with pd.option_context("display.float_format", "{:.3g}".format):
    display(table[columns])"""),
    ("md", """## The performance profile and the heatmap

The performance profile (Dolan and Moré 2002) plots, for each factor tau, the share of all targets a backend solves
within tau times the cost of the best backend on that target. Its value at tau = 1 is the share of targets on which
the backend was the cheapest; its height at the right is the share it solves at all. Higher and further left is
better."""),
    ("code", """board.plot("profile")"""),
    ("md", """The heatmap shows the same ratios target by target (log10 of the cost relative to the best; a grey cell
with a cross is a target the backend did not solve):"""),
    ("code", """board.plot("heatmap")"""),
    ("md", """## Where MALA fails, and why

A task's `status` is `failed` when the sampler raised (with the error's message) and `skipped` when the backend
does not apply to the target (with the reason); `failures()` lists them. A fit that ran but did not reach the
target is not a failure of the code: its row says what is wrong in `problems`. Next to them, the adapted step
size, and the spread of posterior scales from the suite table above:"""),
    ("code", """failures = board.failures()
print(f"{len(failures)} task(s) failed or skipped" + (":" if len(failures) else "."))
if len(failures):
    display(failures)

unsolved = table[~np.isfinite(table["gradients_to_target"].astype(float))].copy()
step_sizes = {}
for name in unsolved.loc[unsolved["backend"] == "mala", "target"]:
    target = bz.catalogue.suites.target(f"posteriordb/{name}")
    # the benchmark's fit again (same seed, same draws; compiled already) for the step size it adapted
    refit = bz.fit(target.model("numpyro"), None, "mala", seed=0, progress=False, thin=10)
    step_sizes[name] = float(np.median(refit.idata.sample_stats.step_size.values[:, -1]))
unsolved["step size"] = unsolved["target"].map(step_sizes)
unsolved["largest / smallest sd"] = [sd_ratio(bz.catalogue.suites.target(f"posteriordb/{name}"))
                                     for name in unsolved["target"]]
with pd.option_context("display.max_colwidth", 120, "display.float_format", "{:.3g}".format):
    display(unsolved[["target", "backend", "step size", "largest / smallest sd", "problems"]])"""),
    ("md", """Nothing failed as code: every task ran, and the seven posteriors MALA did not solve are runs whose own
diagnostics say they cannot be trusted. Its step size is adapted to the acceptance rate, and the acceptance rate is
set by the posterior's narrowest direction; along the widest one, a step that small moves by a random walk, so the
number of steps MALA needs grows with the square of the ratio of scales (with equal scales it needs of the order of
d^(1/3) steps per independent draw in d dimensions, Roberts and Rosenthal 1998). Target by target:

* **eight schools** (non-centred: scales within a factor of two) is the one it solves, and at a third of NUTS's
  gradients: it adapted a step size of about 1, and a MALA step costs one gradient where a NUTS trajectory costs
  up to 1023.
* **garch11** (scales within a factor of five) is a near miss: R-hat 1.012 and a bulk ESS of 249 where 400 are
  wanted. A longer run would pass.
* **arK** and **mesquite** (scales 12 and 8 times apart) mix, slowly: a bulk ESS of 122 and 32 from 4 x 10 000
  steps.
* **kidiq** regresses a child's test score on the mother's IQ, unscaled: its posterior sds are a hundred times
  apart (and the intercept and slope are strongly correlated). The step size adapts to the narrowest direction,
  0.016, and at that step the chains have not met after 40 000 steps (R-hat 3.4).
* **hmm_example**, **gp_pois_regr** and **low_dim_gauss_mix**: R-hats of 2.4, 3.3 and 1.3 with step sizes of 0.016
  to 0.034, and posterior means up to 8 reference sds off: with steps this small some chains had not reached the
  bulk of the posterior by the end of their warm-up (the Gaussian process's latent values are also strongly
  correlated, the worst case for one step size in every direction). Their scales, 4 to 9 times apart in the
  table, are those of the constrained parameters; in the unconstrained space MALA moves in they can be further
  apart.

NUTS, here NumPyro's, adapts a diagonal mass matrix (one scale per direction) during its warm-up and takes long
trajectories, so the hard posteriors cost it more gradients (up to 15 times eight schools', for the Gaussian
process) rather than failing.
The remedy for MALA is the same: a diagonal preconditioner estimated from the warm-up's draws, the next thing to add
to the sampler above, and then to benchmark again. One seed is a small sample: a paper would use several, and
report medians over them.

The seconds tell a noisier story than the gradients, and the ranking does not use them: a fit's seconds include the
compilation it paid for, which depends on what ran before (the first look above compiled MALA's eight-schools
kernel, and JAX's persistent cache may already hold NumPyro's kernels from an earlier run) and on the load of the
machine."""),
    ("md", """## The report

With `out=`, the benchmark has also written `leaderboard.csv`, `tasks.csv` and `report.html` (the verdict, the
profile, the heatmap, both tables and the failures with their messages) to its folder. `bz.load_leaderboard(out)`
reads a folder back, and the same call of `bz.benchmark` resumes it: adding a seed or a backend runs only the new
tasks, and a folder of another benchmark (other draws, warm-up, target or options) is refused rather than mixed."""),
    ("code", """print(sorted(os.listdir("runs/benchmark")))
again = bz.load_leaderboard("runs/benchmark")
print(f"{len(again.table())} tasks read back; the same verdict: {again.verdict() == board.verdict()}")"""),
    ("code", """print(f"this notebook ran in {(time.perf_counter() - started) / 60:.1f} min")"""),
]


def build():
    return notebook.build(new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in CELLS)


if __name__ == "__main__":
    notebook.write(build(), PATH)
