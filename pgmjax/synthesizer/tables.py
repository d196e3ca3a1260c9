"""What the synthesizer reads: a table as a pandas DataFrame, a configuration file as a mapping."""

from __future__ import annotations

import json
import pathlib
from typing import Mapping

import pandas as pd

__all__ = ["as_pandas", "coded_dataset", "read_config"]


def as_pandas(frame, where: str) -> pd.DataFrame:
    """``frame`` as a pandas DataFrame (a Polars one converted); a TypeError naming ``where`` for anything else.

    Example:
        >>> as_pandas(pd.DataFrame({"a": [1]}), "demo").shape
        (1, 1)
    """
    if isinstance(frame, pd.DataFrame):
        return frame
    to_pandas = getattr(frame, "to_pandas", None)  # a Polars DataFrame
    if callable(to_pandas):
        return to_pandas()
    raise TypeError(f"{where}: expected a pandas or Polars DataFrame of raw values, got {type(frame).__name__}")


def coded_dataset(frame: pd.DataFrame, domain, where: str):
    """An integer-coded table as a :class:`~pgmjax.Dataset` over ``domain`` (its columns by name, in the domain's
    order; each checked to be integers in ``[0, size)`` by the Dataset).

    Example:
        >>> coded_dataset(pd.DataFrame({"b": [1, 0], "a": [0, 2]}), {"a": 3, "b": 2}, "demo").records.tolist()
        [[0, 1], [2, 0]]
    """
    from ..data.dataset import Dataset
    from ..data.domain import Domain

    domain = domain if isinstance(domain, Domain) else Domain(dict(domain))
    missing = [a for a in domain.attributes if a not in frame.columns]
    if missing:
        raise ValueError(f"{where}: the table has no column(s) {missing} of the domain {list(domain.attributes)}")
    try:
        return Dataset(frame[list(domain.attributes)].to_numpy(), domain)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: the table is not integer codes of the domain: {e}") from None


def read_config(path, where: str = "read_config") -> Mapping:
    """The mapping a JSON or YAML configuration file holds (ValueError naming the file where it is neither, or holds
    something else)."""
    path = pathlib.Path(path)
    if path.suffix.lower() not in (".json", ".yaml", ".yml"):
        raise ValueError(f"{where}: {path} is not a .json, .yaml or .yml file")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".json":
            config = json.loads(text)
        else:
            import yaml  # only a YAML file needs it

            config = yaml.safe_load(text)
    except Exception as e:  # a parse error of either format, with its line
        raise ValueError(f"{where}: {path} is not valid {path.suffix.lstrip('.').upper()}: {e}") from None
    if not isinstance(config, Mapping):
        raise ValueError(f"{where}: {path} holds a {type(config).__name__}, not a mapping of settings")
    return config
