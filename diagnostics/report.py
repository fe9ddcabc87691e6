"""Self-contained HTML report of a Comparison (filled in by the report work)."""
from __future__ import annotations

import html


def write_report(comparison, path: str) -> str:
    table = comparison.table()
    with open(path, "w") as fh:
        fh.write("<html><body><h1>bayeszoo comparison</h1>" + table.to_html(index=False) + "</body></html>")
    return path
