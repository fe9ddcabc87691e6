"""Hand-written GP-classification backends (Nickisch thesis ch. 4).

Backends (one module each): ``laplace``, ``ep``, ``kl``, ``vb``, ``fv``, ``lr`` (Gaussian approximations, numerics
shared in ``common``), ``gibbs`` and ``ais`` (samplers). Evidence gradients and type-II maximum likelihood for
Laplace, EP and KL live in :mod:`.type2ml`, which builds on the method modules.
"""
