"""``python -m bayeszoo ...``: the command line (see :mod:`bayeszoo.cli`)."""
import sys

from bayeszoo.cli import main

if __name__ == "__main__":
    sys.exit(main())
