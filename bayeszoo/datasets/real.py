"""Real datasets shipped as files inside the package (filled in by the datasets work)."""
