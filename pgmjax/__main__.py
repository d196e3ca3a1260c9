"""``python -m pgmjax``: the command line (:mod:`pgmjax.cli`)."""

import sys

from .cli import main

sys.exit(main())
