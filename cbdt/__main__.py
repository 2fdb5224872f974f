"""``python -m cbdt``: the command line of :mod:`cbdt.book.cli`."""

import sys

from .book.cli import main

sys.exit(main())
