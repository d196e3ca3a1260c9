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
import json
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import jax

from ..checks import check_key
from ..estimation.options import FIELDS, FitOptions, unknown_fields
from ..mechanisms import budget_split, registry
from ..mechanisms.domain_compression import decompress_measurements
from ..mechanisms.options import COMMON_PARAMETERS, DEFAULT_DELTA
from ..mechanisms.run_info import CompressedRunInfo
from ..preprocessing.preprocess import private_schema
from ..preprocessing.private_format import encode_raw
from ..privacy import Accountant, from_ledger_state
from ..queries.public import PublicData
from . import release_files
from .release import Release, Stage
from .tables import as_pandas, coded_dataset, read_config

__all__ = ["Synthesizer"]

_WHERE = "Synthesizer"


def _model_report(result):
    """The report of the fit a mechanism's model comes from: its step size is where an extension's refit starts,
    except for a model expressed over the original domain from a fit over a compressed one
    (:attr:`~pgmjax.mechanisms.result.MechanismResult.fitted` holds another model), whose potentials are not the
    fit's."""
    fitted = result.fitted
    if fitted is None or fitted.model is result.model:
        return result.report
    return dataclasses.replace(fitted.report, step_size=None)


def _measurements(result) -> tuple:
    """The mechanism's measurements on the model's domain (MST measures on its compressed domain: the same answers,
    re-expressed: :func:`pgmjax.mechanisms.domain_compression.decompress_measurements`)."""
    if isinstance(result.info, CompressedRunInfo) and result.info.mapping:
        return tuple(decompress_measurements(result.measurements, result.info.mapping, result.model.domain))
    return tuple(result.measurements)


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
        mechanism: a mechanism's name (``pgmjax mechanisms`` lists them): ``"tree_aim"`` (default:
            :data:`pgmjax.mechanisms.registry.DEFAULT_MECHANISM`), ``"mst"``, ``"aim"``, ...
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
        public_stddev: how far the public table given to :meth:`fit` is trusted to be from the private one:
            ``"sampling"`` or a standard deviation in records (:class:`pgmjax.queries.public.PublicData`).

    Example:
        >>> Synthesizer("mst", epsilon=1.0).delta
        1e-09
    """

    mechanism: str = registry.DEFAULT_MECHANISM
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
    public_stddev: float | str = "sampling"

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
        ps = self.public_stddev
        if not (ps == "sampling" if isinstance(ps, str) else isinstance(ps, (int, float)) and not isinstance(ps, bool)
                and math.isfinite(ps) and ps > 0):
            raise ValueError(f"{_WHERE}: public_stddev must be 'sampling' or a positive number of records, got {ps!r}")
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

    def fit(self, frame, *, key, domain=None, public=None) -> "Release":
        """Release a model of ``frame`` under this synthesizer's budget.

        Args:
            frame: the private table: a pandas (or Polars) DataFrame of raw values, one column per attribute
                (numbers, text, dates; blanks allowed); or, with ``domain``, of integer codes.
            key: a ``jax.random`` key; the whole release follows from it.
            domain: for an integer-coded table, its :class:`~pgmjax.Domain` (or a mapping column -> size): no
                schema is derived, the whole budget goes to the mechanism, and the records sampled are codes.
            public: a public table with ``frame``'s columns, coded as ``frame`` is (raw values go through the schema
                derived from ``frame``): its marginals join the mechanism's fits at no privacy cost, at
                :attr:`public_stddev` (``tree_aim``, ``mst``, ``aim``, ``mwem``:
                :class:`pgmjax.queries.public.PublicData`). The ledger lists what was taken; the release keeps those
                marginals among its measurements.

        Returns:
            A :class:`Release`: the model, its schema and the ledger.

        Example:
            >>> import numpy as np, pandas as pd
            >>> codes = pd.DataFrame(np.random.default_rng(0).integers(0, 3, (500, 3)), columns=["a", "b", "c"])
            >>> release = Synthesizer("mst", engine_iters=100).fit(codes, key=jax.random.key(0), domain={"a": 3, "b": 3, "c": 3})
            >>> [s.name for s in release.stages], release.sample(4, key=jax.random.key(1)).shape
            (['mechanism'], (4, 3))
        """
        frame = as_pandas(frame, f"{_WHERE}.fit")
        check_key(key, f"{_WHERE}.fit")
        public_frame = self._public_frame(public, frame)
        if domain is not None:
            data = coded_dataset(frame, domain, f"{_WHERE}.fit")
            coded_public = None if public_frame is None else coded_dataset(public_frame, data.domain, f"{_WHERE}.fit: public")
            return self._fit_coded(data, key, coded_public)
        entry = registry.get(self.mechanism)
        kwargs = {**entry.cli_defaults, **self.options}  # the command line's defaults, so a run there releases the same
        bounded = budget_split.neighbouring(entry.name, kwargs)
        split = budget_split.split_budget(entry.name, self.epsilon, self.delta, self.preprocess_fraction, bounded=bounded)
        k_schema, k_mechanism = jax.random.split(key)
        pre = private_schema(frame, split.accountant, k_schema, bins=self.bins, delta=self.discovery_delta,
                             min_count=self.min_count, ranges=dict(self.ranges) or None, kinds=dict(self.kinds) or None,
                             decimals=dict(self.decimals) or None, date_formats=dict(self.date_formats) or None)
        data = encode_raw(pre.schema, frame)  # unreadable fields are missing: no error depends on one record
        if public_frame is not None:  # coded by the private schema: post-processing of its release
            kwargs["public"] = PublicData(encode_raw(pre.schema, public_frame), stddev=self.public_stddev)
        result = self._run(entry, kwargs, data, split.epsilon, split.delta, k_mechanism)
        if bool(result.accountant.bounded) != bool(split.accountant.bounded):
            raise RuntimeError(f"{entry.name}: internal accounting error: the mechanism and the schema were charged "
                               "under different neighbouring relations")
        stages = (Stage("schema", split.accountant, self.discovery_delta), Stage("mechanism", result.accountant))
        return Release(result.model, pre.schema, tuple(frame.columns), self, stages, _measurements(result),
                       tuple(pre.notes), _model_report(result))

    def _public_frame(self, public, frame):
        """``public`` as a pandas frame of ``frame``'s columns (None without it), checked before any budget: the
        mechanism takes public data, and every column is there."""
        where = f"{_WHERE}.fit"
        if public is None:
            return None
        if "public" not in registry.own_options(self.mechanism):
            takes = registry.taking("public")
            raise ValueError(f"{where}: {self.mechanism} takes no public data; {', '.join(takes)} do")
        public = as_pandas(public, f"{where}: public")
        missing = [c for c in frame.columns if c not in public.columns]
        if missing:
            raise ValueError(f"{where}: the public table has no column(s) {missing} (it needs the private table's columns)")
        if len(public) == 0:
            raise ValueError(f"{where}: the public table has no records")
        return public[list(frame.columns)]

    def _fit_coded(self, data, key, public=None) -> Release:
        """:meth:`fit` of an integer-coded table: the mechanism alone, on the whole budget."""
        entry = registry.get(self.mechanism)
        kwargs = {**entry.cli_defaults, **self.options}
        if public is not None:
            kwargs["public"] = PublicData(public, stddev=self.public_stddev)
        result = self._run(entry, kwargs, data, self.epsilon, self.delta, key)
        return Release(result.model, None, tuple(data.domain.attributes), self, (Stage("mechanism", result.accountant),),
                       _measurements(result), (), _model_report(result))

    def _run(self, entry, kwargs: dict, data, epsilon: float, delta, key):
        """The mechanism on ``data`` with this synthesizer's options."""
        for name, value in (("fit_options", self.fit_options), ("engine_iters", self.engine_iters),
                            ("max_model_mb", self.max_model_mb)):
            if value is not None:
                kwargs[name] = value
        if entry.workload and self.workload is not None:
            kwargs["workload"] = self.workload
        if self.delta is not None:
            kwargs["delta"] = delta
        if "synthetic" in registry.own_options(entry.name) and "synthetic" not in self.options:
            kwargs["synthetic"] = False  # the release samples from the model: the mechanism's own draw is unused
        return entry.function(data, epsilon, key=key, **kwargs)

    def to_config(self) -> dict:
        """The settings as a JSON-friendly mapping that :meth:`from_config` reads back to an equal synthesizer.

        Example:
            >>> s = Synthesizer("mst", epsilon=0.5, ranges={"age": (0, 120)}, fit_options=FitOptions(tol=1e-6))
            >>> Synthesizer.from_config(s.to_config()) == s
            True

        Raises:
            TypeError: a setting JSON cannot hold (a callback or an estimator instance in ``fit_options``).
        """
        config = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Mapping):
                value = {k: list(v) if isinstance(v, tuple) else v for k, v in value.items()}
            elif isinstance(value, FitOptions):
                value = value.given()
            config[f.name] = value
        try:
            json.dumps(config)
        except TypeError as e:
            raise TypeError(f"{_WHERE}.to_config: a setting is not JSON ({e}): these settings cannot be written") from None
        return config

    @staticmethod
    def load(path) -> Release:
        """A release :meth:`Release.save` wrote, with its whole history (it samples as the saved one did, its ledger
        and guarantee are the saved ones, and it can :meth:`~Release.extend`); or a model folder saved with its
        schema (``pgmjax run --save-model`` on raw data), which samples but carries no ledger.

        Example:
            >>> release.save("release/")                                   # doctest: +SKIP
            >>> Synthesizer.load("release/").sample(100, key=jax.random.key(2))  # doctest: +SKIP
        """
        parts = release_files.read_release(path)
        stages = tuple(Stage(name, from_ledger_state(Accountant, state), delta) for name, state, delta in parts.stages)
        settings = None if parts.settings is None else Synthesizer.from_config(parts.settings)
        return Release(parts.model, parts.schema, parts.columns, settings, stages, parts.measurements, parts.notes,
                       parts.report)
