"""Hand-written GP-classification backends (Nickisch thesis ch. 4)."""
from bayeszoo.inference.gpc import laplace, ep, gibbs, ais, kl, vb, fv, lr  # noqa: F401
