"""What each backend's fit of a suite's target cost in earlier benchmark runs: the order later runs send work out
in (``bz.benchmark`` starts the longest first) and the NUTS cost column of the posteriordb suite's page.

``benchmarks/task_costs.py`` writes :data:`TASK_COSTS_FILE` from runs' folders; no result depends on it.
"""
from __future__ import annotations

import csv
import functools
import os
import statistics

#: one row per target and backend:
#: target, backend, seconds, gradients_to_target (empty where the fit does not count them, inf if never), run
TASK_COSTS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "task_costs.csv")


@functools.cache
def recorded_costs() -> dict[tuple[str, str], dict]:
    """(target key, backend) -> its row of :data:`TASK_COSTS_FILE`, numbers as floats (NaN where empty)."""
    with open(TASK_COSTS_FILE, newline="") as f:
        return {(row["target"], row["backend"]): {**row, "seconds": float(row["seconds"]),
                                                  "gradients_to_target": float(row["gradients_to_target"] or "nan")}
                for row in csv.DictReader(f)}


def expected_seconds(key: str, backend: str) -> float:
    """What a fit of target ``key`` by ``backend`` is expected to take, for ordering work, not for results: its
    seconds in an earlier run (:func:`recorded_costs`); else the median of the target's recorded fits (a target's
    size sets every backend's cost), else of the backend's, else of all of them (so that tasks nothing is known of
    are all expected to take as long)."""
    recorded = {pair: row["seconds"] for pair, row in recorded_costs().items()}
    if (key, backend) in recorded:
        return recorded[key, backend]
    of_target = [s for (k, _), s in recorded.items() if k == key]
    of_backend = [s for (_, b), s in recorded.items() if b == backend]
    return statistics.median(of_target or of_backend or recorded.values())
