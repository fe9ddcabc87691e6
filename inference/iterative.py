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
  run with the state that step returns;
* ``result(state)``, optional: what the fit is made of (a
  :class:`~bayeszoo.inference.approximations.GaussianApproximation`, a
  :class:`~bayeszoo.inference.approximations.PointEstimate` or the family's own typed result); the state itself
  when it is that result already.

:func:`iterate` owns what every approximation used to repeat, the same way for all of them: ``max_iter`` and
``min_iter``, the tolerance rule, the objective trace, the progress bar and its postfix, the time limit, the
non-finite check and ``converged``. The tolerance rule: converged after a step, from the ``min_iter``-th on,
whose ``change <= tol`` and which is not ``moving``; a ``stalled`` step ends the run (its objective not
recorded in the trace), converged unless it is ``moving``.
"""
from __future__ import annotations

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
    ``report(text)`` putting ``text`` in the progress postfix during a step that takes seconds.

    The driver keeps no reference to a state while it is being stepped, so a step may free its large arrays
    before it allocates their successors (or update them in place)."""

    init: Callable[[Any], Any]
    step: Callable[..., tuple]
    result: Callable[[Any], Any] = lambda state: state
    describe: Callable[[Any, Any], str] | None = None
    trace_initial: bool = True
    reports: bool = False


class Iterations(NamedTuple):
    """What :func:`iterate` returns: the final ``state``, the ``info`` of the last step (None when no step ran),
    the objective ``trace`` (after every step; first the starting value unless the algorithm leaves it out),
    the ``iterations`` made, ``converged`` (the tolerance was met or the step stalled at a stationary point;
    False when ``max_iter`` or the time limit stopped the run), ``stopped_by`` ("tolerance", "stationary" (a
    stalled step that does not move), "stalled", "max_iter" or "time limit") and ``seconds``."""

    state: Any
    info: Any
    trace: np.ndarray
    iterations: int
    converged: bool
    stopped_by: str
    seconds: float


def iterate(algorithm: Algorithm, problem, *, max_iter: int, tol: float, min_iter: int = 1,
            progress: bool = False, desc: str = "", unit: str = "iteration", owner: str = "approximation",
            change_name: str = "change", time_limit: float | None = None) -> Iterations:
    """Run ``algorithm`` from ``init(problem)`` until the tolerance rule holds (module
    docstring), or for ``max_iter`` iterations, or ``time_limit`` seconds.

    A step whose objective is NaN or infinite raises a ValueError naming ``owner`` and the iteration: the
    approximation left double precision, and what it would return is not a fit."""
    t0 = time.perf_counter()
    state = algorithm.init(problem)
    start = getattr(state, "objective", None)
    trace = [float(start)] if algorithm.trace_initial and start is not None else []
    info, it, stopped_by = None, 0, "max_iter"
    with progress_bar(total=max_iter, desc=desc, disable=not progress, unit=unit) as bar:
        def report(text):
            show(bar, text)

        for it in range(1, max_iter + 1):
            handed = [state]
            state = None        # the step holds the only reference (class docstring)
            state, info = (algorithm.step(handed.pop(), report) if algorithm.reports
                           else algorithm.step(handed.pop()))
            bar.update()
            if getattr(info, "stalled", False):
                stopped_by = "stalled" if getattr(info, "moving", False) else "stationary"
                break
            if info.objective is not None:
                objective = float(info.objective)
                if math.isnan(objective) or math.isinf(objective):
                    raise ValueError(f"{owner}: the objective left double precision ({objective}) at iteration "
                                     f"{it}; the problem's scales are too far apart for it (rescale the inputs)")
                trace.append(objective)
            extra = algorithm.describe(state, info) if algorithm.describe is not None else ""
            show(bar, f"{change_name} {float(info.change):.2g} (tol {tol:g})" + (f", {extra}" if extra else ""))
            if it >= min_iter and float(info.change) <= tol and not getattr(info, "moving", False):
                stopped_by = "tolerance"
                break
            if time_limit is not None and time.perf_counter() - t0 > time_limit:
                stopped_by = "time limit"
                break
    return Iterations(state=state, info=info, trace=np.asarray(trace, float), iterations=it,
                      converged=stopped_by in ("tolerance", "stationary"), stopped_by=stopped_by,
                      seconds=time.perf_counter() - t0)
