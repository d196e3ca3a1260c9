"""The command line's two failures: bad input (exit 2) and a failed run (exit 1)."""

from __future__ import annotations

class UserError(Exception):
    """Bad command line or input: one line on stderr, exit code 2, no traceback."""


class RunFailure(Exception):
    """The run itself failed: one line on stderr, exit code 1 (``--debug`` re-raises the cause)."""
