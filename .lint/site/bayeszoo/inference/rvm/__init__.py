"""Hand-written RVM backends: em, fast, vb, gibbs (importing this package registers them)."""
from bayeszoo.inference.rvm import em, fast, gibbs, vb  # noqa: F401
