"""Record the seconds each (target, backend) took in benchmark runs, for the order the next runs send work out in.

    python benchmarks/task_seconds.py RUN_FOLDER [RUN_FOLDER ...]

Reads each folder's ``tasks.csv`` (written by ``bz.benchmark(out=...)``; a later folder's figure replaces an
earlier one's), keeps the fits that ran (status ok: a failed task's seconds say nothing of a fit's), averages a
target and backend's seeds, and merges the result into ``bayeszoo/catalogue/data/task_seconds.csv``, which
``bz.benchmark`` reads to start the longest tasks first (:func:`bayeszoo.benchmark.largest_first`). The figures
order the work; no result depends on them. Each row says which run it comes from.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bayeszoo.catalogue.suites import TASK_SECONDS_FILE  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="benchmark output folders, each with its tasks.csv")
    args = parser.parse_args(argv)
    merged = {}
    if os.path.exists(TASK_SECONDS_FILE):
        with open(TASK_SECONDS_FILE, newline="") as f:
            merged = {(r["target"], r["backend"]): r for r in csv.DictReader(f)}
    for run in args.runs:
        table = pd.read_csv(os.path.join(run, "tasks.csv"))
        ran = table[(table["status"] == "ok") & table["seconds"].notna()]
        for (target, backend), seconds in ran.groupby(["target", "backend"])["seconds"].mean().items():
            merged[target, backend] = {"target": target, "backend": backend, "seconds": f"{seconds:.1f}",
                                       "run": os.path.basename(os.path.normpath(run))}
    with open(TASK_SECONDS_FILE, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["target", "backend", "seconds", "run"])
        writer.writeheader()
        writer.writerows(sorted(merged.values(), key=lambda r: (r["target"], r["backend"])))
    print(f"{len(merged)} (target, backend) pairs in {TASK_SECONDS_FILE}")


if __name__ == "__main__":
    main()
