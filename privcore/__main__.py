"""``python -m privcore``: see :mod:`privcore.cli`."""

import sys

from .cli import main

sys.exit(main())
