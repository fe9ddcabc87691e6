"""Hand-written GP-classification backends (Nickisch thesis ch. 4)."""
from bayeszoo.inference.gpc import laplace, ep, gibbs, ais  # noqa: F401
