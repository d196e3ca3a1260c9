"""A synthesizer in one line: a DataFrame of raw values in, a private synthetic DataFrame out.

:class:`Synthesizer` is the command line's ``pgmjax run`` on raw data, in Python: within one budget it derives
the schema privately (bins at private quantiles, categories kept by thresholded noisy counts, kinds by a private
vote: :mod:`pgmjax.preprocessing.preprocess`), encodes the table, runs the mechanism, and decodes what the model
samples back to the raw scale. The budget is shared as the command line shares it
(:mod:`pgmjax.mechanisms.budget_split`: 10% to the schema by default, charged under the mechanism's neighbouring
relation), so the whole release is ``(epsilon, delta + discovery_delta)``-DP and the ledger says so entry by entry.

Everything after the mechanism (the model, the records, their decoding) is post-processing: a fitted
:class:`Release` samples as many records as asked, as often as asked, at no privacy cost.

References: McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for differential
privacy", ICML 2019 (the engine); the mechanisms' own papers (``pgmjax.mechanisms``).

Example:
    >>> import jax
    >>> from pgmjax.data.examples import raw_table
    >>> people = raw_table(2_000, seed=0)                      # floats, dates, blanks, rare categories
    >>> release = Synthesizer("mst", epsilon=1.0, engine_iters=500).fit(people, key=jax.random.key(0))
    >>> synthetic = release.sample(500, key=jax.random.key(1))
    >>> list(synthetic.columns) == list(people.columns), len(synthetic)
    (True, 500)
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import jax
import pandas as pd

from .data.schema import Schema
from .data.schema_columns import NumericColumn
from .fit.options import FIELDS, FitOptions, unknown_fields
from .mechanisms import budget_split, registry
from .mechanisms.options import COMMON_PARAMETERS, DEFAULT_DELTA
from .model.conditioning import condition
from .model.graphical_model import GraphicalModel
from .model.metrics import marginal_tvd
from .model.serialization import load_model, load_model_schema
from .model.model_files import save_model
from .preprocessing.preprocess import private_schema
from .preprocessing.private_format import encode_raw

__all__ = ["Synthesizer", "Release"]

_WHERE = "Synthesizer"


def _frozen(mapping, name: str) -> Mapping:
    if mapping is None:
        return MappingProxyType({})
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{_WHERE}: {name} must be a mapping (dict) or None, got {type(mapping).__name__}")
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Synthesizer:
    """How to release a private synthetic copy of a raw table; :meth:`fit` makes the release.

    Args:
        mechanism: a mechanism's name (``pgmjax mechanisms`` lists them): ``"aim"`` (default), ``"mst"``, ...
        epsilon: the whole release's budget (schema and mechanism together).
        delta: the mechanism's delta where its guarantee takes one (default 1e-9); None for the pure-DP ones.
        preprocess_fraction: the share of the budget spent on the private schema, in (0, 1).
        bins: bins per numeric or date column.
        min_count: a category is kept only where its noisy count exceeds this.
        discovery_delta: the delta the category discovery adds to the release.
        ranges, kinds, decimals, date_formats: public declarations per column (``{"age": (0, 120)}``,
            ``{"income": "integer"}``, ``{"income": 2}``, ``{"joined": "dd/mm/yyyy"}``): no budget is spent on
            them (:func:`pgmjax.preprocessing.preprocess.private_schema`).
        options: the mechanism's own keyword options (``{"rounds": 40}`` for AIM; ``pgmjax mechanisms -v``).
        fit_options: a :class:`pgmjax.FitOptions` for the mechanism's fits.
        engine_iters: iterations of the mechanism's fits (None: its default).
        max_model_mb: the mechanism's model-size cap in MB (None: its default).
        workload: the cliques the mechanism optimises for, where it takes a workload (None: all pairs).

    Example:
        >>> Synthesizer("mst", epsilon=1.0).delta
        1e-09
    """

    mechanism: str = "aim"
    epsilon: float = 1.0
    delta: float | None = DEFAULT_DELTA
    preprocess_fraction: float = 0.1
    bins: int = 10
    min_count: int = 5
    discovery_delta: float = 1e-9
    ranges: Mapping = field(default=None)
    kinds: Mapping = field(default=None)
    decimals: Mapping = field(default=None)
    date_formats: Mapping = field(default=None)
    options: Mapping = field(default=None)
    fit_options: FitOptions | None = None
    engine_iters: int | None = None
    max_model_mb: float | None = None
    workload: Any = None

    def __post_init__(self):
        put = object.__setattr__  # frozen: normalise the mappings once
        entry = registry.get(self.mechanism)
        for name in ("ranges", "kinds", "decimals", "date_formats", "options"):
            put(self, name, _frozen(getattr(self, name), name))
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, (int, float)) or not (
                self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"{_WHERE}: epsilon must be a positive finite number, got {self.epsilon!r}")
        if not (isinstance(self.preprocess_fraction, (int, float)) and 0.0 < self.preprocess_fraction < 1.0):
            raise ValueError(f"{_WHERE}: preprocess_fraction must lie in (0, 1), got {self.preprocess_fraction!r}")
        if not registry.takes_delta(entry.name, self.options):
            put(self, "delta", None)  # the mechanism takes none: the release's delta is the discovery's alone
        elif self.delta is None or not (isinstance(self.delta, (int, float)) and 0.0 < self.delta < 1.0):
            raise ValueError(f"{_WHERE}: {entry.name} needs a delta in (0, 1), got {self.delta!r}")
        own = registry.own_options(entry.name)
        unknown = sorted(k for k in self.options if k not in own or k in COMMON_PARAMETERS)
        if unknown:
            raise ValueError(f"{_WHERE}: {entry.name} has no option(s) {unknown}; its own options are: {', '.join(own)}")
        if self.fit_options is not None and not isinstance(self.fit_options, FitOptions):
            raise TypeError(f"{_WHERE}: fit_options must be a pgmjax.FitOptions or None, got {type(self.fit_options).__name__}")
        put(self, "mechanism", entry.name)

    @classmethod
    def from_config(cls, config) -> "Synthesizer":
        """A synthesizer from a configuration: a mapping, or a JSON or YAML file of one (``.json``, ``.yaml``,
        ``.yml``), whose keys are this class's settings and ``fit_options`` a mapping of
        :class:`pgmjax.FitOptions` fields.

        Example:
            >>> s = Synthesizer.from_config({"mechanism": "mst", "epsilon": 0.5, "fit_options": {"tol": 1e-6}})
            >>> s.mechanism, s.epsilon, s.fit_options.given()
            ('mst', 0.5, {'tol': 1e-06})

        Raises:
            ValueError: an unknown key (named, with the known ones), a file that is not JSON or YAML, or a bad value
                (named by :class:`Synthesizer`'s checks).
        """
        where = "Synthesizer.from_config"
        if not isinstance(config, Mapping):
            config = read_config(config, where)
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(config) - set(known))
        if unknown:
            raise ValueError(f"{where}: unknown setting(s) {unknown}; the settings are {', '.join(known)}")
        settings = dict(config)
        fit = settings.get("fit_options")
        if isinstance(fit, Mapping):
            bad = unknown_fields(fit)
            if bad:
                raise ValueError(f"{where}: fit_options has unknown field(s) {bad}; pgmjax.FitOptions takes {', '.join(FIELDS)}")
            settings["fit_options"] = FitOptions(**fit)
        for name in ("ranges",):  # JSON and YAML have lists, not tuples: a range is (low, high)
            if isinstance(settings.get(name), Mapping):
                settings[name] = {k: tuple(v) if isinstance(v, list) else v for k, v in settings[name].items()}
        return cls(**settings)

    def fit(self, frame, *, key) -> "Release":
        """Release a model of ``frame`` under this synthesizer's budget.

        Args:
            frame: the private table: a pandas (or Polars) DataFrame of raw values, one column per attribute
                (numbers, text, dates; blanks allowed).
            key: a ``jax.random`` key; the whole release follows from it.

        Returns:
            A :class:`Release`: the model, its schema and the ledger.
        """
        frame = _as_pandas(frame)
        if not isinstance(key, jax.Array) or not jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
            raise TypeError(f"{_WHERE}.fit: key must be a jax.random key, e.g. jax.random.key(0)")
        entry = registry.get(self.mechanism)
        kwargs = {**entry.cli_defaults, **self.options}  # the command line's defaults, so a run there releases the same
        bounded = budget_split.neighbouring(entry.name, kwargs)
        split = budget_split.split_budget(entry.name, self.epsilon, self.delta, self.preprocess_fraction, bounded=bounded)
        k_schema, k_mechanism = jax.random.split(key)
        pre = private_schema(frame, split.accountant, k_schema, bins=self.bins, delta=self.discovery_delta,
                             min_count=self.min_count, ranges=dict(self.ranges) or None, kinds=dict(self.kinds) or None,
                             decimals=dict(self.decimals) or None, date_formats=dict(self.date_formats) or None)
        data = encode_raw(pre.schema, frame)  # unreadable fields are missing: no error depends on one record
        for name, value in (("fit_options", self.fit_options), ("engine_iters", self.engine_iters),
                            ("max_model_mb", self.max_model_mb)):
            if value is not None:
                kwargs[name] = value
        if entry.workload and self.workload is not None:
            kwargs["workload"] = self.workload
        if self.delta is not None:
            kwargs["delta"] = split.delta
        result = entry.function(data, split.epsilon, key=k_mechanism, **kwargs)
        if bool(result.accountant.bounded) != bool(split.accountant.bounded):
            raise RuntimeError(f"{entry.name}: internal accounting error: the mechanism and the schema were charged "
                               "under different neighbouring relations")
        return Release(result.model, pre.schema, tuple(frame.columns), self, split.accountant, result.accountant,
                       tuple(pre.notes))


@dataclass(frozen=True, eq=False)
class Release:
    """A fitted synthesizer: the model and the schema a :class:`Synthesizer` released, and its ledger.

    Attributes:
        model: the :class:`~pgmjax.GraphicalModel` (over the schema's coded domain).
        schema: the private :class:`~pgmjax.Schema` (how codes decode to raw values).
        columns: the input's columns, in its order (the samples keep it).
        synthesizer: the settings that made it (None for a release loaded from a folder).
        schema_accountant, mechanism_accountant: the two accountants (None when loaded).
        notes: what the private schema decided, column by column.
    """

    model: GraphicalModel
    schema: Schema
    columns: tuple
    synthesizer: Synthesizer | None = None
    schema_accountant: Any = None
    mechanism_accountant: Any = None
    notes: tuple = ()

    def sample(self, n: int | None = None, *, key, given: Mapping | None = None) -> pd.DataFrame:
        """``n`` synthetic records on the raw scale (default: the records the model stands for): no privacy cost.

        Args:
            n: number of records.
            key: a ``jax.random`` key (the draw and the decoding within bins follow from it).
            given: only records with these raw values, ``{"sex": "F"}`` or ``{"age": [30, 40]}`` (a number selects
                its bin, a category itself); drawn from the model conditioned on them
                (:func:`pgmjax.model.conditioning.condition`), ``n`` defaulting to the records it gives them.

        Returns:
            A pandas DataFrame with the input's columns, in its order.
        """
        model = condition(self.model, self._codes(given)) if given else self.model
        k_draw, k_decode = jax.random.split(key)
        records = model.synthetic_data(n, k_draw)
        return self.schema.decode(records, k_decode, columns=list(self.columns))

    def _codes(self, given: Mapping) -> dict:
        """Raw evidence values as the schema's codes (a category must be one the schema kept, or its "other")."""
        if not isinstance(given, Mapping):
            raise TypeError(f"Release.sample: given must be a mapping {{column: value or values}}, got {type(given).__name__}")
        out = {}
        for name, value in given.items():
            col = self.schema.columns.get(name)
            if col is None:
                raise ValueError(f"Release.sample: given names {name!r}, not a column of the release: {list(self.schema.columns)}")
            values = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
            series = pd.Series(values, dtype=object)
            if isinstance(col, NumericColumn):
                out[name] = [int(c) for c in col.encode(col.values(series, 0))]
                continue
            known = set(col.categories) | ({col.other} if col.other is not None else set())
            unknown = [v for v in values if str(v) not in known]
            if unknown:
                raise ValueError(f"Release.sample: given {name}={unknown!r}: not among the column's released categories "
                                 f"{sorted(known)} (rare values were released as {col.other!r})")
            out[name] = [int(c) for c in col.encode(series.astype(str).to_numpy(dtype=object))]
        return out

    def report(self, frame, cliques=None) -> pd.DataFrame:
        """How far the model's marginals are from a table's: the total variation distance per marginal (0: equal,
        1: disjoint). **Not private**: it reads ``frame`` directly; it is for the data holder, not for publication.

        Args:
            frame: a table of raw values with the release's columns (the private one, or another sample).
            cliques: the marginals to compare (default: every one- and two-way marginal).

        Returns:
            A DataFrame with columns ``marginal`` (a tuple of columns), ``ways`` and ``tvd``, the worst first.
        """
        data = encode_raw(self.schema, _as_pandas(frame))
        attrs = list(self.schema.domain.attributes)
        cliques = ([(a,) for a in attrs] + list(itertools.combinations(attrs, 2))) if cliques is None else [tuple(c) for c in cliques]
        _, per = marginal_tvd(data, self.model, cliques, per_clique=True)
        out = pd.DataFrame({"marginal": cliques, "ways": [len(c) for c in cliques], "tvd": per})
        return out.sort_values("tvd", ascending=False, ignore_index=True)

    @property
    def ledger(self) -> pd.DataFrame:
        """Every noise addition and selection of the release, the schema's first (column ``stage``)."""
        if self.schema_accountant is None:
            raise ValueError("a release loaded from a folder carries no ledger (the model and schema only)")
        parts = [acc.to_frame().assign(stage=stage) for stage, acc in
                 (("schema", self.schema_accountant), ("mechanism", self.mechanism_accountant))]
        return pd.concat(parts, ignore_index=True)

    @property
    def guarantee(self) -> tuple[float, float]:
        """``(epsilon, delta)`` of the whole release: the budget given, and the mechanism's delta (0 for a pure-DP
        one) plus the category discovery's."""
        s = self.synthesizer
        if s is None:
            raise ValueError("a release loaded from a folder carries no guarantee (the model and schema only)")
        return s.epsilon, (0.0 if s.delta is None else s.delta) + s.discovery_delta

    def save(self, path) -> str:
        """Save the model with its schema to the folder ``path`` (``pgmjax sample --model`` reads it too)."""
        return save_model(self.model, path, schema=self.schema)

    @classmethod
    def load(cls, path) -> "Release":
        """A release saved by :meth:`save` (or ``pgmjax run --save-model`` on raw data): it samples as the saved
        one did."""
        schema = load_model_schema(path)
        if schema is None:
            raise ValueError(f"{path}: the model was saved without a schema (an integer-coded run): nothing to decode with")
        return cls(load_model(path), schema, tuple(schema.domain.attributes))


def read_config(path, where: str = "read_config") -> Mapping:
    """The mapping a JSON or YAML configuration file holds (ValueError naming the file where it is neither, or holds
    something else)."""
    import json
    import pathlib

    path = pathlib.Path(path)
    if path.suffix.lower() not in (".json", ".yaml", ".yml"):
        raise ValueError(f"{where}: {path} is not a .json, .yaml or .yml file")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".json":
            config = json.loads(text)
        else:
            import yaml

            config = yaml.safe_load(text)
    except Exception as e:  # a parse error of either format, with its line
        raise ValueError(f"{where}: {path} is not valid {path.suffix.lstrip('.').upper()}: {e}") from None
    if not isinstance(config, Mapping):
        raise ValueError(f"{where}: {path} holds a {type(config).__name__}, not a mapping of settings")
    return config


def _as_pandas(frame) -> pd.DataFrame:
    if isinstance(frame, pd.DataFrame):
        return frame
    to_pandas = getattr(frame, "to_pandas", None)  # a Polars DataFrame
    if callable(to_pandas):
        return to_pandas()
    raise TypeError(f"{_WHERE}.fit: expected a pandas or Polars DataFrame of raw values, got {type(frame).__name__}")
