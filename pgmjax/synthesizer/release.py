"""A released model of a raw table: its records, its report, its ledger, and measurements that make it grow.

A :class:`Release` is what :meth:`pgmjax.Synthesizer.fit` returns: the model, the private schema that decodes it,
the noisy measurements the model was fitted to and the ledger of every stage that read the private table (the
schema's, the mechanism's, then one per :meth:`Release.extend`). Sampling, conditioning and saving are
post-processing and cost nothing; :meth:`Release.extend` measures more marginals of the same table under a budget
of its own, composed with the stages before (:func:`pgmjax.privacy.compose_ledgers`), and refits the model from
the previous one on every measurement (McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference
for differential privacy", ICML 2019, Section 3: the estimate is a function of the measurements alone, so adding
measurements and refitting is the estimator applied to the longer list).

Example:
    >>> import jax
    >>> from pgmjax import Synthesizer
    >>> from pgmjax.data.examples import raw_table
    >>> people = raw_table(2_000, seed=0)
    >>> release = Synthesizer("mst", epsilon=1.0, engine_iters=300).fit(people, key=jax.random.key(0))
    >>> grown = release.extend(people, [("age", "income", "sex")], epsilon=0.5, key=jax.random.key(1), iters=300)
    >>> [stage.name for stage in grown.stages], len(grown.measurements) - len(release.measurements)
    (['schema', 'mechanism', 'extension 1'], 1)
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple

import jax
import pandas as pd

from ..checks import check_key
from ..data.schema import Schema
from ..data.schema_columns import NumericColumn
from ..estimation.estimate import estimate
from ..estimation.memory import check_fit
from ..mechanisms.steps import hypothetical_model_size
from ..model.conditioning import condition
from ..model.fit_report import Fit, FitReport
from ..model.graphical_model import GraphicalModel
from ..model.metrics import marginal_tvd
from ..preprocessing.private_format import encode_raw
from ..privacy import REST, Accountant, compose_ledgers, ledger_state
from . import release_files
from .tables import as_pandas, coded_dataset

__all__ = ["Stage", "Release"]


class Stage(NamedTuple):
    """One stage of a release that read the private table.

    Attributes:
        name: ``"schema"``, ``"mechanism"``, ``"extension 1"``, ...
        accountant: its :class:`~pgmjax.privacy.Accountant` (budget, spend, ledger).
        delta: what the stage adds to the delta beyond its accountant's guarantee (the schema's category
            discovery; 0 for the others).
    """

    name: str
    accountant: Any
    delta: float = 0.0


@dataclass(frozen=True, eq=False)
class Release:
    """A fitted synthesizer: the model and the schema a :class:`~pgmjax.Synthesizer` released, its measurements and
    its ledger.

    Attributes:
        model: the :class:`~pgmjax.GraphicalModel` (over the schema's coded domain).
        schema: the private :class:`~pgmjax.Schema` (how codes decode to raw values); None for a release of an
            integer-coded table (``Synthesizer.fit(frame, domain=...)``: its records are codes).
        columns: the input's columns, in its order (the samples keep it).
        synthesizer: the settings that made it (None where they could not be saved).
        stages: the :class:`Stage` of each read of the private table, in order (empty for a model saved alone).
        measurements: every noisy measurement the model is fitted to (the mechanism's, then the extensions').
        notes: what the private schema decided, column by column.
        fit_report: the :class:`~pgmjax.FitReport` of the fit the model comes from (an extension's refit continues
            from its step size), or None.
    """

    model: GraphicalModel
    schema: Schema | None
    columns: tuple
    synthesizer: Any = None
    stages: tuple = ()
    measurements: tuple = ()
    notes: tuple = ()
    fit_report: FitReport | None = None

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
        if given and getattr(self.model, "approximate", False):
            raise ValueError("Release.sample: given= needs an exact model (conditioning works on a distribution; an "
                             "approximate model holds pseudo-marginals): fit with FitOptions(oracle='exact')")
        model = condition(self.model, self._codes(given)) if given else self.model
        k_draw, k_decode = jax.random.split(key)
        records = model.synthetic_data(n, k_draw)
        if self.schema is None:  # an integer-coded release: the records are its codes
            return records.df[list(self.columns)]
        return self.schema.decode(records, k_decode, columns=list(self.columns))

    def _codes(self, given: Mapping) -> dict:
        """Raw evidence values as the schema's codes (a category must be one the schema kept, or its "other")."""
        if not isinstance(given, Mapping):
            raise TypeError(f"Release.sample: given must be a mapping {{column: value or values}}, got {type(given).__name__}")
        out = {}
        for name, value in given.items():
            if name not in self.model.domain.attributes:
                raise ValueError(f"Release.sample: given names {name!r}, not a column of the release: "
                                 f"{list(self.model.domain.attributes)}")
            values = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
            if self.schema is None:  # codes, given as they are
                out[name] = [int(v) for v in values]
                continue
            col = self.schema.columns[name]
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
        data = self._encode(frame, "Release.report")
        attrs = list(self.model.domain.attributes)
        cliques = ([(a,) for a in attrs] + list(itertools.combinations(attrs, 2))) if cliques is None else [tuple(c) for c in cliques]
        _, per = marginal_tvd(data, self.model, cliques, per_clique=True)
        out = pd.DataFrame({"marginal": cliques, "ways": [len(c) for c in cliques], "tvd": per})
        return out.sort_values("tvd", ascending=False, ignore_index=True)

    @property
    def ledger(self) -> pd.DataFrame:
        """Every noise addition and selection of the release, stage by stage (column ``stage``)."""
        self._check_stages("ledger")
        parts = [s.accountant.to_frame().assign(stage=s.name) for s in self.stages]
        return pd.concat(parts, ignore_index=True)

    @property
    def guarantee(self) -> tuple[float, float]:
        """``(epsilon, delta)`` of the whole release, composed from the ledger of every stage
        (:func:`pgmjax.privacy.compose_ledgers`: zCDP spends add in rho and are reported at the mechanism's delta;
        otherwise the stages' epsilons and deltas add), plus the category discovery's delta."""
        self._check_stages("guarantee")
        epsilon, delta = compose_ledgers([s.accountant for s in self.stages])
        return epsilon, delta + math.fsum(s.delta for s in self.stages)

    def _check_stages(self, what: str) -> None:
        if not self.stages:
            raise ValueError(f"Release.{what}: this release carries no ledger (a model saved with its schema only, "
                             "e.g. by `pgmjax run --save-model`)")

    def extend(self, frame, marginals, *, epsilon: float, key, iters: int = 1000) -> "Release":
        """Measure more marginals of the same private table and refit: a release that grows.

        The new marginals are measured on ``frame`` encoded with this release's schema (no budget is spent on the
        schema again), with the mechanism's noise (Gaussian under zCDP at the release's delta, Laplace under pure
        DP) and neighbouring relation, under a budget of ``epsilon`` split equally among them. The model is then
        refitted from this one (a warm start) on every measurement, old and new. Everything is checked (the
        columns, the budget, the key, the model's size with the new marginals) before anything is measured.

        Args:
            frame: the private table the release was made from (raw values, a pandas or Polars DataFrame).
            marginals: the marginals to measure: tuples of column names (a name alone is a one-way marginal).
            epsilon: this extension's budget: an ``(epsilon, delta)`` target at the release's delta for a zCDP
                release, pure epsilon otherwise.
            key: a ``jax.random`` key for the noise.
            iters: the refit's iterations.

        Returns:
            A new :class:`Release` (this one is unchanged): its stages end with ``"extension k"``, its guarantee is
            the composed one.

        Raises:
            ValueError: a release without a ledger, an unknown column, an empty or repeated marginal, a bad
                epsilon, or a model past the size limit or the synthesizer's ``max_model_mb``.
        """
        where = "Release.extend"
        self._check_stages("extend")
        check_key(key, where)
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not (epsilon > 0 and math.isfinite(epsilon)):
            raise ValueError(f"{where}: epsilon must be a positive finite number, got {epsilon!r}")
        if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
            raise ValueError(f"{where}: iters must be a positive integer, got {iters!r}")
        cliques = self._marginals(marginals, where)
        domain = self.model.domain
        fit = {} if self.synthesizer is None or self.synthesizer.fit_options is None else self.synthesizer.fit_options.given()
        grown = list(self.model.cliques) + cliques
        oracle = fit.get("oracle", "exact")
        oracle = oracle if isinstance(oracle, str) else "approximate"  # an ApproximateOracle instance
        if oracle == "exact":  # the approximate oracle's fit is checked by estimate, on its region graph
            check_fit(domain, grown, fit.get("method", "mirror_descent"), fit.get("dtype"), where)
        cap = None if self.synthesizer is None else self.synthesizer.max_model_mb
        if cap is not None and (size := hypothetical_model_size(domain, grown, oracle)) > cap:
            raise ValueError(f"{where}: the model with {cliques} would be {size:.3g} MB, above the release's "
                             f"max_model_mb={cap:g}: measure smaller marginals")
        data = self._encode(frame, where)
        mechanism = next(s.accountant for s in self.stages if s.name == "mechanism")
        if mechanism.composition == "zcdp":
            accountant = Accountant(epsilon=epsilon, delta=mechanism.delta, bounded=mechanism.bounded)
            new = accountant.measure_many(key, data, cliques, rho=REST)
        else:
            accountant = Accountant(epsilon=epsilon, bounded=mechanism.bounded)
            new = accountant.measure_many(key, data, cliques, mechanism="laplace", epsilon=REST)
        measurements = tuple(self.measurements) + tuple(new)
        warm = self.model if self.fit_report is None else Fit(self.model, self.fit_report)
        model, report = estimate(domain, list(measurements), iters=iters, warm_start=warm, report=True, **fit)
        extensions = sum(s.name.startswith("extension") for s in self.stages)
        stage = Stage(f"extension {extensions + 1}", accountant)
        return dataclasses.replace(self, model=model, stages=self.stages + (stage,), measurements=measurements,
                                   fit_report=report)

    def _encode(self, frame, where: str):
        """``frame`` as the model's coded records: raw values through the schema, or the codes themselves."""
        frame = as_pandas(frame, where)
        if self.schema is not None:
            return encode_raw(self.schema, frame)
        return coded_dataset(frame, self.model.domain, where)

    def _marginals(self, marginals, where: str) -> list[tuple[str, ...]]:
        """The marginals to measure, each a tuple of the schema's columns (checked, in the domain's order)."""
        if isinstance(marginals, str) or not hasattr(marginals, "__iter__"):
            raise TypeError(f"{where}: marginals must be a list of column tuples, e.g. [('age', 'sex')], got {marginals!r}")
        known = list(self.model.domain.attributes)
        out = []
        for m in marginals:
            clique = (m,) if isinstance(m, str) else tuple(m)
            unknown = [c for c in clique if c not in known]
            if not clique or unknown or len(set(clique)) != len(clique):
                problem = f"unknown column(s) {unknown}" if unknown else "an empty marginal" if not clique else "a repeated column"
                raise ValueError(f"{where}: marginal {clique!r} has {problem}; the release's columns are {known}")
            out.append(tuple(a for a in known if a in clique))
        return out

    def save(self, path) -> str:
        """Save the release to the folder ``path``: the model with its schema (``pgmjax sample --model`` reads it),
        and its measurements, ledger and settings (:mod:`pgmjax.synthesizer.release_files`)."""
        settings = None
        if self.synthesizer is not None:
            try:
                settings = self.synthesizer.to_config()
            except TypeError:  # a callback or an estimator instance: the release is saved, its settings are not
                settings = None
        stages = [(s.name, ledger_state(s.accountant), s.delta) for s in self.stages]
        return release_files.write_release(path, self.model, self.schema, columns=self.columns, settings=settings,
                                           stages=stages, measurements=self.measurements, notes=self.notes,
                                           report=self.fit_report)
