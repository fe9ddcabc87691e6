"""The approximations' one driver (inference/iterative.py): its tolerance rule, caps, trace and errors, on a
tiny algorithm with exact answers: x <- x / 2 ascends -x^2 towards 0, its change the objective's step."""
from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np
import pytest

from bayeszoo.inference.iterative import Algorithm, iterate


class State(NamedTuple):
    x: float
    objective: float


class Info(NamedTuple):
    objective: float
    change: float
    moving: bool = False
    stalled: bool = False


def halving(moving_until: float = np.inf, stall_below: float = 0.0, objective=lambda x: -x * x) -> Algorithm:
    """``moving`` while |x| > ``moving_until``; a step from |x| < ``stall_below`` stalls."""
    def init(x0):
        return State(x0, objective(x0))

    def step(s):
        if abs(s.x) < stall_below:
            return s, Info(s.objective, 0.0, moving=abs(s.x) > moving_until, stalled=True)
        x = s.x / 2
        return State(x, objective(x)), Info(objective(x), abs(objective(x) - s.objective), abs(x) > moving_until)

    return Algorithm(init, step, result=lambda s: s.x)


def test_converges_at_the_first_step_whose_change_is_within_tol():
    # changes 0.75, 0.1875, 0.046875, ...: 3 * 4^-k; the first <= 0.01 is k = 5 (0.0029...)
    run = iterate(halving(), 1.0, max_iter=100, tol=0.01)
    assert run.converged and run.stopped_by == "tolerance" and run.iterations == 5
    np.testing.assert_allclose(run.trace, [-(0.5 ** (2 * k)) for k in range(6)])
    assert run.state.x == 0.5 ** 5


def test_min_iter_and_moving_hold_convergence_back():
    assert iterate(halving(), 1.0, max_iter=100, tol=1.0, min_iter=3).iterations == 3
    # the objective settles (change <= tol) long before x is below 1e-3: 2^-10
    run = iterate(halving(moving_until=1e-3), 1.0, max_iter=100, tol=0.01)
    assert run.converged and run.iterations == 10


def test_the_cap_stops_without_convergence():
    run = iterate(halving(), 1.0, max_iter=3, tol=1e-300)
    assert not run.converged and run.stopped_by == "max_iter" and run.iterations == 3 and run.trace.size == 4


def test_a_stalled_step_ends_the_run_unrecorded():
    run = iterate(halving(stall_below=0.2), 1.0, max_iter=100, tol=1e-300)
    # x: 1, 0.5, 0.25, 0.125 (three steps recorded), then the fourth stalls
    assert run.converged and run.stopped_by == "stationary" and run.iterations == 4 and run.trace.size == 4
    moving = halving(stall_below=0.2, moving_until=0.0)
    assert iterate(moving, 1.0, max_iter=100, tol=1e-300).stopped_by == "stalled"


def test_the_initial_objective_can_be_left_out_of_the_trace():
    run = iterate(halving()._replace(trace_initial=False), 1.0, max_iter=2, tol=1e-300)
    np.testing.assert_allclose(run.trace, [-0.25, -0.0625])


def test_a_time_limit_stops_after_the_step_that_passes_it():
    run = iterate(halving(), 1.0, max_iter=100, tol=1e-300, time_limit=0.0)
    assert not run.converged and run.stopped_by == "time limit" and run.iterations == 1


def test_a_non_finite_objective_is_an_error_naming_the_owner_and_iteration():
    algorithm = halving(objective=lambda x: -np.inf if x == 0.25 else -x * x)     # the second step's
    with pytest.raises(ValueError, match=r"mine: the objective left double precision \(-?inf\) at iteration 2"):
        iterate(algorithm, 1.0, max_iter=10, tol=1e-300, owner="mine")


def test_the_driver_holds_no_reference_to_the_state_being_stepped():
    seen = []

    def step(s):
        seen.append(sys.getrefcount(s.x))     # the array: the state tuple's and getrefcount's own
        return State(np.zeros(1), 0.0), Info(0.0, 0.0)

    algorithm = Algorithm(lambda _: State(np.ones(1), 0.0), step)      # no result: the state is the result
    run = iterate(algorithm, None, max_iter=1, tol=1.0)
    assert algorithm.result(run.state) is run.state
    assert seen == [2]


def test_reports_reach_a_step_that_asks_for_them():
    texts = []

    def step(s, report):
        report("halfway")
        texts.append("stepped")
        return State(s.x / 2, -s.x * s.x / 4), Info(-s.x * s.x / 4, 0.0)

    algorithm = Algorithm(lambda x: State(x, -x * x), step, lambda s: s.x, reports=True)
    assert iterate(algorithm, 1.0, max_iter=5, tol=0.0, progress=True).iterations == 1 and texts == ["stepped"]


def test_an_algorithm_without_an_objective_runs_on_its_change_with_an_empty_trace():
    def step(s):
        return State(s.x / 2, None), Info(None, abs(s.x) / 2)

    run = iterate(Algorithm(lambda x: State(x, None), step, lambda s: s.x), 1.0, max_iter=100, tol=0.1)
    # changes 0.5, 0.25, 0.125, 0.0625: the fourth is within tol
    assert run.converged and run.iterations == 4 and run.trace.size == 0 and run.state.x == 0.0625


class Used(NamedTuple):
    objective: float
    change: float
    used: int


def test_the_budget_counts_the_units_each_step_reports_using():
    # steps alternate between 3 units and none (a check between two pieces of work): budget 10 is spent by the
    # fourth step that uses units (3 + 0 + 3 + 0 + 3 + 0 + 3 = 12), the seventh step; x halves every step
    def step(s):
        x = s.x / 2
        return State(x, -x * x), Used(-x * x, 1.0, 3 if round(np.log2(1 / x)) % 2 else 0)

    run = iterate(Algorithm(lambda x: State(x, -x * x), step, lambda s: s.x), 1.0, max_iter=10, tol=1e-300)
    assert run.stopped_by == "max_iter" and not run.converged
    assert run.iterations == 12 and run.steps == 7 and run.trace.size == 8 and run.state.x == 0.5 ** 7
    # without `used` a step uses one unit: iterations and steps agree
    plain = iterate(halving(), 1.0, max_iter=3, tol=1e-300)
    assert plain.iterations == plain.steps == 3


def test_a_final_check_evaluates_the_last_state_of_a_capped_run():
    # the steps' changes 0.75, 0.1875, 0.046875 never reach tol = 0.02 in three steps; the final check measures
    # x^2, the distance of the objective to its supremum: 1/64 at x = 1/8, within 0.02 but not within 0.01
    def final(s):
        return s, Info(s.objective, s.x * s.x)

    checked = halving()._replace(final=final)
    run = iterate(checked, 1.0, max_iter=3, tol=0.02)
    assert run.converged and run.stopped_by == "tolerance" and run.iterations == run.steps == 3
    np.testing.assert_allclose(run.trace, [-1.0, -0.25, -1 / 16, -1 / 64, -1 / 64])
    assert run.info.change == 1 / 64
    strict = iterate(checked, 1.0, max_iter=3, tol=0.01)
    assert not strict.converged and strict.stopped_by == "max_iter" and strict.trace.size == 5
    # a run the tolerance ended is not checked again
    assert iterate(checked, 1.0, max_iter=100, tol=0.05).trace.size == 4


def test_an_open_bar_is_advanced_by_every_run_of_a_schedule_and_left_open():
    import io

    from bayeszoo.progress import progress_bar

    with progress_bar(total=7, file=io.StringIO()) as bar:
        first = iterate(halving(), 1.0, max_iter=3, tol=1e-300, bar=bar)
        second = iterate(halving(), 1.0, max_iter=4, tol=1e-300, bar=bar)
        assert first.iterations + second.iterations == bar.n == 7 and not bar.disable
