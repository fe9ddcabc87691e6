"""Generic backends built from the model's PyMC / NumPyro declarations (filled in by the backends work)."""
