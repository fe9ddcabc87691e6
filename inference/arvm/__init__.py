"""Hand-written backend of the adaptive-kernel RVM family: ``arvm`` (Algorithm 1; :mod:`bayeszoo.inference`
imports every module of this package, which registers it)."""
