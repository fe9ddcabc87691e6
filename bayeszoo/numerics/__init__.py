"""Numerics shared by every layer (models, inference, diagnostics, datasets); it imports none of them.

* :mod:`~bayeszoo.numerics.fft`: circular 2-D convolutions by the real FFT, circulant quadratic forms, PCG.
* :mod:`~bayeszoo.numerics.pmkl_kernels`: Gram matrices of the multiple-kernel models and their combination rules.
* :mod:`~bayeszoo.numerics.gp_kernels`: GP covariance functions, their diagonals and hyperparameter gradients.
* :mod:`~bayeszoo.numerics.probit`: multinomial-probit class probabilities by Gauss-Hermite quadrature.
* :mod:`~bayeszoo.numerics.special`: log-Gamma densities and log Phi for the PyMC / NumPyro declarations.
* :mod:`~bayeszoo.numerics.potentials`: the sparse linear model's super-Gaussian potentials (Table 3.1 of Nickisch).
* :mod:`~bayeszoo.numerics.operators`: PyLops operators: finite differences, Daubechies-4 wavelets, Fourier sampling.
* :mod:`~bayeszoo.numerics.blas_threads`: one BLAS thread for loops of small factorisations.
* :mod:`~bayeszoo.numerics.pytensor_blas`: points PyTensor at a pip-installed OpenBLAS.
* :mod:`~bayeszoo.numerics.allocator`: glibc allocator settings for the image backends.
"""
