"""``python -m pgmjax``: the command line (:mod:`pgmjax.cli`)."""

import sys

from .cli import console_main

sys.exit(console_main())
