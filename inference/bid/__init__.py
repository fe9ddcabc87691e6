"""Blind image deconvolution backends: ``vb`` and ``gibbs`` (Tzikas PhD ch. 5) and ``vb_sparse`` (Levin et al. 2011,
Babacan et al. 2012)."""
