"""``python -m privcore``: see :mod:`privcore.cli`."""

import sys

from .cli import main

if __name__ == "__main__":  # not when a worker process (Dask's spawn) re-imports the main module
    sys.exit(main())
