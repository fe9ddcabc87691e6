"""The sources' experiment protocols, each in a module named after what it reproduces.

They use the public API only (``bayeszoo.fit``, ``bayeszoo.cross_validate``, the models, datasets and diagnostics),
never a backend's internals; import-linter checks this.

* :mod:`~bayeszoo.studies.fmri`: aRVM activation maps on a synthetic fMRI volume (Tzikas PhD ch. 7).
* :mod:`~bayeszoo.studies.arvm_nested_cv`: the aRVM papers' nested cross-validation of the regularisation c.
* :mod:`~bayeszoo.studies.gpc_grid`: Nickisch's GPC grid study over (ln ell, ln sf).
* :mod:`~bayeszoo.studies.imagervm_detection`: object detection with the image RVM and its LROC curve.
* :mod:`~bayeszoo.studies.pmkl_thesis_cv`: the PMKL thesis's 10-fold and 10 x 10-fold protocols.
* :mod:`~bayeszoo.studies.build_catalogue`: builds the reference catalogue (``make references``): two engines per
  problem, written only when every validation rule holds.
"""
