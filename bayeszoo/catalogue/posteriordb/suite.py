"""The suite's table: every posterior with its kind, dimension, program, cost for NUTS and our cross-check against
posteriordb.

The cross-checks (``data/crosscheck.json``) are written by ``benchmarks/posteriordb_crosscheck.py``: one long
NumPyro NUTS run per posterior, compared with posteriordb's reference under the catalogue's agreement rules. The
cost for NUTS is NumPyro's in the benchmark run recorded in ``bayeszoo/catalogue/data/task_costs.csv``
(``benchmarks/task_costs.py``).
:func:`page_table` is the table of ``docs/suites/posteriordb.md`` (a test keeps the page in step with it).
"""
from __future__ import annotations

import json
import math
import os

from bayeszoo.catalogue import posteriordb as pdb
from bayeszoo.catalogue.costs import recorded_costs

CROSSCHECK_FILE = os.path.join(pdb.DATA_DIR, "crosscheck.json")
TABLE_START, TABLE_END = "<!-- posteriordb-table:start -->", "<!-- posteriordb-table:end -->"


def crosschecks() -> dict:
    """posterior -> the record of our run and its agreement with posteriordb (empty before any run)."""
    if not os.path.exists(CROSSCHECK_FILE):
        return {}
    with open(CROSSCHECK_FILE) as fh:
        return json.load(fh)


def record_crosscheck(posterior: str, result: dict) -> None:
    """Add or replace one posterior's record (read, update, write: runs of other posteriors may record too)."""
    results = {**crosschecks(), posterior: result}
    text = json.dumps(dict(sorted(results.items())), indent=1) + "\n"
    tmp = f"{CROSSCHECK_FILE}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, CROSSCHECK_FILE)


def _agreement_cell(check: dict | None) -> str:
    if not check:
        return "not run yet"
    if check.get("verdict") == "failed":
        return f"run failed: {check.get('error', '')}"
    agree = check["agreement"]
    text = (f"{check['verdict']}: largest z {agree['z_max']:.2f} ({agree['where']}), limit {agree['z_limit']:.2f}; "
            f"{check['chains']} x {check['draws']} draws")
    if check.get("rules_broken"):
        text += "; " + "; ".join(check["rules_broken"])
    if check.get("note"):
        text += f". {check['note']}"
    return text


def rows() -> list[dict]:
    checks = crosschecks()
    out = []
    for name in pdb.names():
        info = pdb.info(name)
        if info["program"]:
            written = "PyMC and NumPyro"
        elif info["exception"]:
            written = f"exception: {info['exception']}"
        else:
            written = "not yet written"
        agreement = ("no reference in the package (posteriordb's draws file was not in the clone it was built "
                     "from)" if info["reference_missing"] else _agreement_cell(checks.get(name)))
        if not info["reference_missing"] and not info["reference_draws"]:
            agreement += (" (posteriordb's reference here is its published means and mean squares with its run's "
                          "ESS: moments only, no draws)")
        out.append({"posterior": name, "kind": info["kind"] or "", "dimension": info["dimension"],
                    "model": info["model"], "written": written, "agreement": agreement})
    return out


def _nuts_cost_cell(posterior: str) -> str:
    """NumPyro NUTS's gradient evaluations to the target accuracy in the recorded benchmark run."""
    row = recorded_costs().get((f"posteriordb/{posterior}", "numpyro"))
    if row is None:
        return "not run yet"
    grads = row["gradients_to_target"]
    return "not reached" if math.isinf(grads) else f"{grads:,.0f}"


def page_table() -> str:
    lines = ["| posterior | kind | dimension | Stan model | written in | NUTS cost (gradients) "
             "| our run against posteriordb's reference |",
             "|---|---|---|---|---|---|---|"]
    for r in rows():
        cells = [f"`{r['posterior']}`", r["kind"], str(r["dimension"]), f"`{r['model']}`", r["written"],
                 _nuts_cost_cell(r["posterior"]), r["agreement"].replace("|", "\\|")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_page(path: str) -> None:
    """Rewrite the table between the page's markers."""
    with open(path) as fh:
        text = fh.read()
    head, rest = text.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    with open(path, "w") as fh:
        fh.write(f"{head}{TABLE_START}\n{page_table()}\n{TABLE_END}{tail}")
