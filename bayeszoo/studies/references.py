"""The old name of :mod:`bayeszoo.studies.build_catalogue`: importing it, or running ``python -m
bayeszoo.studies.references``, warns and goes on as that module."""
from bayeszoo import _moved
from bayeszoo.studies import build_catalogue

# __spec__.name: the module's dotted name, also when it runs as __main__
_moved.moved(__spec__.name, build_catalogue,
             how="import it, or run python -m bayeszoo.studies.build_catalogue (make references), from there")
if __name__ == "__main__":
    raise SystemExit(build_catalogue.main())
