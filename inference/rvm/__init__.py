"""Hand-written RVM backends, one module each (:mod:`bayeszoo.inference` imports every module of this package,
which registers them)."""
