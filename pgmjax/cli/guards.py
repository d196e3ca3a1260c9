"""Guards of the ``pgmjax run`` command line: nothing overwritten, nothing private printed.

* :func:`refuse_overwriting_inputs`: an output path (``--out``, ``--report``, ``--save-model``) that
  is, or resolves to, an input file (``--data``, ``--domain``/``--schema``, ``--workload``) or another
  output is refused before anything runs.
* :func:`public_error`: the message of a bad value in the private table names the column and what
  was expected, never the value, its line or how many values are bad (``--show-private`` shows them).
* :func:`too_few_records`: a run whose model estimates a handful of records (a tiny budget: the noise
  on the total is larger than the table) is refused with a suggestion instead of writing a 1-record table.
* :func:`number`: a number as a person would write it (``1e6``, ``0.0001``), so the budget is printed as given.

Under add/remove neighbours the exact number of records of the private table is itself private
(Dwork & Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Section 2.3): the
summary prints it only with ``--show-private``.
"""

from __future__ import annotations

import os
import re

#: A model estimating fewer records than this is not turned into a table without ``--records``.
MIN_RECORDS = 10


def _targets(flag: str, path: str) -> list[str]:
    """The files an output flag writes: ``--save-model DIR`` writes two files inside DIR."""
    if flag == "--save-model":
        from ..model.serialization import ARRAYS_FILE, STRUCTURE_FILE

        return [path, os.path.join(path, STRUCTURE_FILE), os.path.join(path, ARRAYS_FILE)]
    return [path]


def _same(a: str, b: str) -> bool:
    """Whether two paths name the same file: equal after resolving links, or the same inode (hard links)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet: a different file
        return False


def refuse_overwriting_inputs(inputs: dict[str, str | None], outputs: dict[str, str | None]) -> None:
    """Raise unless every output is a new path: not an input file, not another output.

    Args:
        inputs: ``{flag: path}`` of the files read (None entries are skipped).
        outputs: ``{flag: path}`` of the files or folders written (None entries are skipped).

    Returns:
        None.

    Raises:
        ValueError: naming both flags (nothing has been read or written yet).

    Example:
        >>> refuse_overwriting_inputs({"--data": "t.csv"}, {"--out": "./t.csv"})
        Traceback (most recent call last):
        ValueError: --out ./t.csv is the input file of --data (t.csv): it would be overwritten; choose another --out
    """
    ins = [(f, p) for f, p in inputs.items() if p is not None]
    outs = [(f, p) for f, p in outputs.items() if p is not None]
    for i, (flag, path) in enumerate(outs):
        for target in _targets(flag, path):
            for in_flag, in_path in ins:
                if _same(target, in_path):
                    raise ValueError(
                        f"{flag} {path} is the input file of {in_flag} ({in_path}): it would be overwritten; "
                        f"choose another {flag}"
                    )
            for other_flag, other in outs[i + 1:]:
                if any(_same(target, t) for t in _targets(other_flag, other)):
                    raise ValueError(f"{flag} and {other_flag} name the same file ({path}); give each its own path")


def public_error(error: Exception, show_private: bool, line_offset: int = 2) -> str:
    """The message of an error raised while reading the private table, fit to print.

    Args:
        error: the exception; a :class:`pgmjax.data.dataset.DataValueError` carries a public message.
        show_private: print the full message (row, value) instead; rows become CSV lines.
        line_offset: CSV line of data row 0 (the header is line 1).

    Returns:
        The message.

    Example:
        >>> from pgmjax.data.dataset import DataValueError
        >>> e = DataValueError("column 'a' row 3 has value 7", "column 'a' has a value outside [0, 5)")
        >>> public_error(e, show_private=False)
        "column 'a' has a value outside [0, 5) (the value and its line are private: --show-private prints them)"
        >>> public_error(e, show_private=True)
        "column 'a' line 5 has value 7"
    """
    from ..data.dataset import DataValueError

    text = str(error)
    if show_private:
        # Data rows count from 0; a person looks for the line of the file (header = line 1).
        return re.sub(r"\brow (\d+)\b", lambda m: f"line {int(m.group(1)) + line_offset}", text, count=1)
    if isinstance(error, DataValueError):
        return f"{error.public} (the value and its line are private: --show-private prints them)"
    return text


def too_few_records(records: int, epsilon: float) -> str | None:
    """The refusal for a synthetic table of fewer than :data:`MIN_RECORDS` records drawn at the model's
    estimated total (None when there are enough, or when ``--records`` chose the number).

    Args:
        records: the number of synthetic records about to be written (the model's noisy total).
        epsilon: the budget of the run, for the message.

    Returns:
        The message, or None.

    Example:
        >>> too_few_records(500, 1.0) is None
        True
        >>> too_few_records(1, 1e-4).split(";")[0]
        'the model estimates 1 record (at epsilon 0.0001 the noise on the total is larger than the table)'
    """
    if records >= MIN_RECORDS:
        return None
    return (
        f"the model estimates {records} record{'s' if records != 1 else ''} (at epsilon {number(epsilon)} the noise on "
        f"the total is larger than the table); a {records}-record synthetic table is useless, so nothing was written. "
        f"Run again with --records N to draw N synthetic records from the model (the number is your choice, not "
        f"read from the data), or with a larger --epsilon (this run's budget counts as spent)"
    )


def number(x: float) -> str:
    """``x`` with 6 significant digits, exponents without padding: ``1e6``, ``1e-09``-> ``1e-9``, ``0.5``.

    Example:
        >>> number(1e6), number(1e-4), number(0.5), number(997102.77)
        ('1e6', '0.0001', '0.5', '997103')
    """
    text = f"{x:.6g}"
    mantissa, e, exponent = text.partition("e")
    return text if not e else f"{mantissa}e{int(exponent)}"
