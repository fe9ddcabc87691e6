"""Hand-written sparse-linear-model backends (Nickisch thesis ch. 3, 5, 6).

Backends (one module each): ``map`` (penalised least squares), ``sbl`` (sparse Bayesian learning, the BCS
baseline), ``gibbs`` (the Gaussian scale-mixture sampler), ``dloop`` (double-loop variational inference) and ``ep``
(fractional expectation propagation); shared helpers in ``common``.
"""
