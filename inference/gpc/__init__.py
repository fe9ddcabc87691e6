"""Hand-written GP-classification backends (Nickisch thesis ch. 4)."""
from bayeszoo.inference.gpc import laplace, ep, gibbs, ais, kl, vb, fv, lr  # noqa: F401
from bayeszoo.inference.gpc.grid import best_point, grid_study  # noqa: F401
