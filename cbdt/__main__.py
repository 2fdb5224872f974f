"""``python -m cbdt``: the command line of :mod:`cbdt.cli`."""

import sys

from .cli import main

sys.exit(main())
