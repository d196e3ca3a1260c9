"""Generated example tables for trying the raw-data path without private data.

:func:`raw_table` has the difficulties of a real table: a float age with half-years, an income with
heavy-tailed outliers and blanks, a 30-valued city column whose five rarest values occur one to four
times, a date column with blanks, and a text column. Tests, notebooks and benchmarks share it.

Example:
    >>> t = raw_table(1000, seed=0)
    >>> list(t.columns), t.shape
    (['age', 'income', 'city', 'joined', 'sex'], (1000, 5))
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["RARE_CITIES", "raw_table"]

#: The rare city values of :func:`raw_table` and how many records hold each.
RARE_CITIES = {"rare_a": 1, "rare_b": 1, "rare_c": 2, "rare_d": 3, "rare_e": 4}


def raw_table(n: int = 20_000, seed: int = 0) -> pd.DataFrame:
    """A raw table of text fields, as ``pgmjax.read_raw_csv`` reads a CSV.

    Args:
        n: number of records (at least the 11 rare-city records).
        seed: NumPy seed of the generator.

    Returns:
        A DataFrame with columns ``age`` (float text, 17..90, half-years), ``income`` (integer text,
        log-normal around 40,000, 0.2% outliers between 2e6 and 5e7, 2% blank), ``city`` (25 common values
        with Zipf weights and the five :data:`RARE_CITIES`), ``joined`` (ISO dates 2000..2023, 3% blank)
        and ``sex`` (``F``/``M``).
    """
    rng = np.random.default_rng(seed)
    age = np.round(np.clip(rng.normal(40, 12, n), 17, 90) * 2) / 2
    income = np.exp(np.log(40000) + 0.01 * (age - 40) + 0.7 * rng.standard_normal(n))
    outlier = rng.random(n) < 0.002
    income[outlier] = rng.uniform(2e6, 5e7, outlier.sum())
    income_text = np.array([str(int(round(v))) for v in income], dtype=object)
    income_text[rng.random(n) < 0.02] = ""
    common = [f"city{i:02d}" for i in range(25)]
    weights = 1.0 / np.arange(1, 26)
    rare = [v for v, k in RARE_CITIES.items() for _ in range(k)]
    city = np.concatenate([rng.choice(common, n - len(rare), p=weights / weights.sum()), rare]).astype(object)
    joined = np.datetime_as_string(np.datetime64("2000-01-01") + (rng.beta(2, 1, n) * 8765).astype(int), unit="D").astype(object)
    joined[rng.random(n) < 0.03] = ""
    return pd.DataFrame({"age": [f"{a:g}" for a in age], "income": income_text, "city": city[rng.permutation(n)],
                         "joined": joined, "sex": rng.choice(["F", "M"], n)})
