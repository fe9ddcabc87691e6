"""Hand-written PMKL backends: gibbs, vb, em, map, mrvm1, mrvm2 (importing this package registers them)."""
from bayeszoo.inference.pmkl import em, gibbs, mrvm, vb  # noqa: F401
