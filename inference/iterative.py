"""The one driver of the iterative approximations (Laplace, EP, KL, VB, FV, EM, ...), in the shape of
BlackJAX's variational algorithms (``VIAlgorithm(init, step)`` run by ``run_inference_algorithm``), as
:mod:`.chains` is for the samplers.

An approximation is an :class:`Algorithm` of three functions and nothing else:

* ``init(problem) -> State``: a NamedTuple whose ``objective`` field holds the objective at the start (the
  quantity the algorithm ascends: a log evidence, a bound, a log posterior; None where there is none yet);
* ``step(state) -> (State, Info)``: one iteration; Info is a NamedTuple with at least ``objective`` (after the
  step; None for an algorithm that has none, which leaves the trace empty) and ``change``, the algorithm's
  measure of the step, compared with its tolerance (most often the objective's relative change); an Info may
  also have ``moving``, True while the iterate itself still moves by more than the algorithm resolves (an
  objective can settle before its argument does), and ``stalled``, True when the step found no ascent left (at
  machine precision, or by the algorithm's own rule: Criterion 2 of mRVM1, the aRVM's patience), which ends the
  run with the state that step returns; and ``used``, the units of the ``max_iter`` budget the step used (1 when
  absent), for an algorithm whose budget counts work finer or coarser than its steps (coordinate descent's sweeps:
  a step of 5 sweeps uses 5, a duality-gap check between two working sets uses none);
* ``result(state)``, optional: what the fit is made of (a
  :class:`~bayeszoo.inference.approximations.GaussianApproximation`, a
  :class:`~bayeszoo.inference.approximations.PointEstimate` or the family's own typed result); the state itself
  when it is that result already.

:func:`iterate` owns what every approximation used to repeat, the same way for all of them: ``max_iter`` and
``min_iter``, the tolerance rule, the objective trace, the progress bar and its postfix, the time limit, the
non-finite check and ``converged``. The tolerance rule: converged after a step, from the ``min_iter``-th on,
whose ``change <= tol`` and which is not ``moving``; a ``stalled`` step ends the run (its objective not
recorded in the trace), converged unless it is ``moving``. The budget: steps run while the units they used add
up to less than ``max_iter`` (so the last step may take the total past it); when the budget or the time limit
stops the run, the algorithm's ``final`` check, if it has one, evaluates the last state by the same rule.
"""
from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Callable, NamedTuple

import numpy as np

from bayeszoo.progress import progress_bar, show


class Algorithm(NamedTuple):
    """An approximation's iteration (module docstring). ``describe(state, info)``, optional, adds to the
    progress postfix what a user watching the run wants to see besides the change (bases left, a step size);
    ``trace_initial`` False leaves the starting objective out of the trace (an algorithm whose first objective
    means nothing, such as EP's before its first pass); ``reports`` True calls ``step(state, report)``, with
    ``report(text)`` putting ``text`` in the progress postfix during a step that takes seconds; ``final(state) ->
    (State, Info)``, optional, evaluates the last state of a run that the budget or the time limit stopped, using
    none of the budget (a solver whose steps check only part of the problem, such as coordinate descent on a working
    set, checks the whole problem there): its objective joins the trace and the tolerance rule applies to its Info.

    The driver keeps no reference to a state while it is being stepped, so a step may free its large arrays
    before it allocates their successors (or update them in place)."""

    init: Callable[[Any], Any]
    step: Callable[..., tuple]
    result: Callable[[Any], Any] = lambda state: state
    describe: Callable[[Any, Any], str] | None = None
    trace_initial: bool = True
    reports: bool = False
    final: Callable[[Any], tuple] | None = None


class Iterations(NamedTuple):
    """What :func:`iterate` returns: the final ``state``, the ``info`` of the last step (None when no step ran),
    the objective ``trace`` (after every step; first the starting value unless the algorithm leaves it out;
    last the ``final`` check's when it ran), the ``iterations`` made (the units of the budget used: the steps,
    unless the Infos report ``used``), ``converged`` (the tolerance was met or the step stalled at a stationary
    point; False when ``max_iter`` or the time limit stopped the run and no ``final`` check met the tolerance),
    ``stopped_by`` ("tolerance", "stationary" (a stalled step that does not move), "stalled", "max_iter" or
    "time limit"), ``seconds`` and the ``steps`` taken."""

    state: Any
    info: Any
    trace: np.ndarray
    iterations: int
    converged: bool
    stopped_by: str
    seconds: float
    steps: int


def iterate(algorithm: Algorithm, problem, *, max_iter: int, tol: float, min_iter: int = 1,
            progress: bool = False, desc: str = "", unit: str = "iteration", owner: str = "approximation",
            change_name: str = "change", time_limit: float | None = None, bar=None) -> Iterations:
    """Run ``algorithm`` from ``init(problem)`` until the tolerance rule holds (module
    docstring), or for ``max_iter`` iterations, or ``time_limit`` seconds.

    ``bar``: an open progress bar to advance instead of a new one (``progress``, ``desc`` and ``unit`` then unused),
    for a schedule of several runs under one bar, such as a coarse-to-fine estimation's levels.

    A step whose objective is NaN or infinite raises a ValueError naming ``owner`` and the iteration: the
    approximation left double precision, and what it would return is not a fit."""
    t0 = time.perf_counter()
    state = algorithm.init(problem)
    start = getattr(state, "objective", None)
    trace = [float(start)] if algorithm.trace_initial and start is not None else []
    info, steps, spent, stopped_by = None, 0, 0, "max_iter"

    def record(objective, step):
        if objective is not None:
            objective = float(objective)
            if math.isnan(objective) or math.isinf(objective):
                raise ValueError(f"{owner}: the objective left double precision ({objective}) at iteration {step}; "
                                 f"the problem's scales are too far apart for it (rescale the inputs)")
            trace.append(objective)

    def met(info):
        return float(info.change) <= tol and not getattr(info, "moving", False)

    with (progress_bar(total=max_iter, desc=desc, disable=not progress, unit=unit) if bar is None
          else contextlib.nullcontext(bar)) as bar:
        def report(text):
            show(bar, text)

        while spent < max_iter:
            steps += 1
            handed = [state]
            state = None        # the step holds the only reference (class docstring)
            state, info = (algorithm.step(handed.pop(), report) if algorithm.reports
                           else algorithm.step(handed.pop()))
            used = getattr(info, "used", 1)
            spent += used
            bar.update(used)
            if getattr(info, "stalled", False):
                stopped_by = "stalled" if getattr(info, "moving", False) else "stationary"
                break
            record(info.objective, steps)
            if not bar.disable:     # the postfix costs microseconds: a cheap step (an Adam step) would notice
                extra = algorithm.describe(state, info) if algorithm.describe is not None else ""
                show(bar, f"{change_name} {float(info.change):.2g} (tol {tol:g})" + (f", {extra}" if extra else ""))
            if steps >= min_iter and met(info):
                stopped_by = "tolerance"
                break
            if time_limit is not None and time.perf_counter() - t0 > time_limit:
                stopped_by = "time limit"
                break
        if stopped_by in ("max_iter", "time limit") and algorithm.final is not None:
            state, info = algorithm.final(state)
            record(info.objective, steps)
            show(bar, f"{change_name} {float(info.change):.2g} (tol {tol:g})")
            if met(info):
                stopped_by = "tolerance"
    return Iterations(state=state, info=info, trace=np.asarray(trace, float), iterations=spent,
                      converged=stopped_by in ("tolerance", "stationary"), stopped_by=stopped_by,
                      seconds=time.perf_counter() - t0, steps=steps)
