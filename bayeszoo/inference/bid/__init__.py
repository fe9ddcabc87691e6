"""Blind image deconvolution backends (Tzikas PhD ch. 5): ``vb`` and ``gibbs``."""
from bayeszoo.inference.bid import gibbs, vb  # noqa: F401
