"""Raw fields read leniently: every empty or unparsable field of a binned column is missing, never an error.

An error raised on one field of a private table would depend on one record (a run that stops, or a message
that names a value), so the raw path reads every field it cannot parse as missing. One rule for the private
schema's encoding (:func:`pgmjax.preprocessing.private_format.encode_raw`), for declared schemas whose columns have a
missing code (:meth:`pgmjax.Schema.encode` with ``unreadable="missing"``) and for the private bounds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .date_forms import other_date_days, split_kind
from .schema_columns import ISO_DATETIME, as_text, date_days, datetime_days, iso_stamps

__all__ = ["column_values", "iso_valid"]


def iso_valid(text: pd.Series) -> np.ndarray:
    """Whether each field is an ISO date or datetime (``ISO_DATETIME``) of a real calendar day and time."""
    shaped = text.str.fullmatch(ISO_DATETIME).to_numpy(bool)
    ok = np.zeros(len(text), bool)
    if shaped.any():
        parsed = iso_stamps(text[shaped])
        ok[np.flatnonzero(shaped)] = parsed.notna().to_numpy()
    return ok


def column_values(values, kind: str) -> np.ndarray:
    """Float64 values of a binned column, every empty or unparsable field NaN (missing), never an error.

    Numbers: finite numbers (``inf``, ``nan``, ``n/a``: missing). Dates: days since 1970-01-01 of real ISO
    dates (a datetime counts as its day) and of dates written year first with ``/``, ``.`` or ``-``
    (:mod:`pgmjax.data.date_forms`); with kind ``"date dd/mm/yyyy"`` (or ``"date mm/dd/yyyy"``) also of dates
    written with the year last, read day first (month first). Datetimes: days with their fraction, whole
    seconds (a date, ISO or year first, is its midnight).

    Args:
        values: the raw column.
        kind: ``"number"``, ``"date"``, ``"date dd/mm/yyyy"``, ``"date mm/dd/yyyy"`` or ``"datetime"``
            (:func:`pgmjax.data.date_forms.read_kind` of a column).

    Returns:
        A float64 array.

    Example:
        >>> column_values(["12", "n/a", "", "1e400", "3.5"], "number").tolist()
        [12.0, nan, nan, nan, 3.5]
        >>> column_values(["2020-02-29", "2020-02-30", "2020-03-01 10:00"], "date").tolist()
        [18321.0, nan, 18322.0]
        >>> column_values(["2020/2/29", "29/02/2020", "02/29/2020"], "date dd/mm/yyyy").tolist()
        [18321.0, 18321.0, nan]
    """
    if kind == "number":
        s = pd.Series(values)
        x = s.to_numpy(np.float64) if s.dtype.kind in "iufb" else pd.to_numeric(
            as_text(s).str.strip(), errors="coerce").to_numpy(np.float64)
        return np.where(np.isfinite(x), x, np.nan)
    kind, date_format = split_kind(kind)
    text = as_text(values).str.strip().reset_index(drop=True)
    iso = iso_valid(text)
    out = (date_days if kind == "date" else datetime_days)(text.where(iso, "").to_numpy(dtype=object))
    if not iso.all():  # a datetime column reads a year-first date as its midnight
        other = ~iso
        out[other] = other_date_days(text[other], date_format)
    return out
