"""Record what each (target, backend) cost in benchmark runs: the order later runs send work out in, and the NUTS
cost column of the posteriordb suite's page.

    python benchmarks/task_costs.py RUN_FOLDER [RUN_FOLDER ...]

Reads each folder's ``tasks.csv`` (written by ``bz.benchmark(out=...)``; a later folder's figures replace an
earlier one's), keeps the fits that ran (status ok: a failed task's seconds say nothing of a fit's), averages a
target and backend's seeds (seconds, and gradient evaluations to the run's target accuracy: inf when a seed never
got there), merges the result into ``bayeszoo/catalogue/data/task_costs.csv`` and rewrites the table of
``docs/suites/posteriordb.md``. ``bz.benchmark`` reads the seconds to start the longest tasks first
(:func:`bayeszoo.benchmark.largest_first`); no result depends on them. Each row names the run it comes from.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bayeszoo.catalogue.posteriordb import suite  # noqa: E402
from bayeszoo.catalogue.costs import TASK_COSTS_FILE  # noqa: E402

PAGE = os.path.join(os.path.dirname(HERE), "docs", "suites", "posteriordb.md")
COLUMNS = ["target", "backend", "seconds", "gradients_to_target", "run"]


def _run_name(folder: str) -> str:
    """The folder's name and its settings (draws, tune, chains, target), so that a row says what it measured."""
    with open(os.path.join(folder, "benchmark.json")) as f:
        settings = json.load(f)["settings"]
    counts = ", ".join(f"{k} {settings[k]}" for k in ("chains", "draws", "tune") if settings.get(k) is not None)
    return f"{os.path.basename(os.path.normpath(folder))} ({counts or 'backend defaults'}; target {settings['target']})"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="benchmark output folders, each with its tasks.csv")
    args = parser.parse_args(argv)
    merged = {}
    if os.path.exists(TASK_COSTS_FILE):
        with open(TASK_COSTS_FILE, newline="") as f:
            merged = {(r["target"], r["backend"]): r for r in csv.DictReader(f)}
    for run in args.runs:
        table = pd.read_csv(os.path.join(run, "tasks.csv"))
        ran = table[(table["status"] == "ok") & table["seconds"].notna()]
        name = _run_name(run)
        for (target, backend), rows in ran.groupby(["target", "backend"]):
            grads = rows["gradients_to_target"].astype(float)
            merged[target, backend] = {"target": target, "backend": backend,
                                       "seconds": f"{rows['seconds'].mean():.1f}",
                                       "gradients_to_target": "" if grads.isna().any() else f"{grads.mean():.0f}",
                                       "run": name}
    with open(TASK_COSTS_FILE, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(sorted(merged.values(), key=lambda r: (r["target"], r["backend"])))
    suite.write_page(PAGE)
    print(f"{len(merged)} (target, backend) pairs in {TASK_COSTS_FILE}; {PAGE} rewritten")


if __name__ == "__main__":
    main()
