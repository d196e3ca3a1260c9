"""What the synthesizer reads: a table as a pandas DataFrame, a configuration file as a mapping."""

from __future__ import annotations

import json
import pathlib
from typing import Mapping

import pandas as pd

__all__ = ["as_pandas", "read_config"]


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
