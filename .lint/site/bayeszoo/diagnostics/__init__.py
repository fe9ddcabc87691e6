"""Diagnostics: ESS / R-hat / ESS-per-second tables, errors against a reference, plots, the HTML report."""
from bayeszoo.diagnostics.metrics import ESS_METHOD, sampling_diagnostics, reference_errors, table_row  # noqa: F401
