"""MLDP's original arm: regression models fitted to noisy query answers (:class:`RegressionModel`).

Zhu, Xiong, Li, Zhou & Yu, "Differentially Private Query Learning: from Data Publishing to Model
Publishing", IEEE BigData 2017, Section III-D: linear regression on the queries' indicator features,
or the Gaussian-basis model of equations 6-7; fitted clique by clique (post-processing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ...data.domain import Clique, CliqueLike, Domain
from ...checks import check_count as _int
from ...checks import check_nonnegative as _nonnegative
from ...checks import check_positive as _positive
from ...queries.linear import LinearQuery
from ..original_estimates import CliqueTables
from .query_set import QuerySet, as_queries, check_domain

MODELS = ("linear", "gaussian")


class RegressionModel:
    """MLDP's published model: per clique, a regression from a query's features to its answer.

    The features of a query on clique ``C`` are its row over ``C``'s cells (the 0/1 indicator of a
    counting query). Fitted by :func:`fit_regression` from noisy answers only.

    * ``kind="linear"``: ``y(q) = <w_C, q>``. The weights are an estimate of the histogram of ``C``,
      so the model is also a table: :meth:`marginal`, :meth:`marginals` and factored
      :meth:`answers` (as :class:`~pgmjax.mechanisms.original_estimates.CliqueTables`) work, and a
      :class:`~pgmjax.Workload` or :mod:`pgmjax.model.metrics` can evaluate it; a query on a sub-clique of
      a fitted clique is answered from the summed table.
    * ``kind="gaussian"``: ``y(q) = w_0 + sum_j w_j exp(-||q - mu_j||^2 / (2 u^2))`` (see
      :func:`fit_regression`). Non-linear in ``q``: only :meth:`predict`.

    Fresh queries: ``model.predict(query_set)`` (or ``query_set.answer(model)``).

    Attributes:
        kind: ``"linear"`` or ``"gaussian"``.
        domain: the domain.
        params: ``{clique: dict}``: ``{"weights": table}`` (linear) or ``{"intercept", "weights",
            "centers", "width"}`` (gaussian).
        total: the number of records the model stands for (reported; the linear model's total is the
            sum of a clique's weights).
    """

    def __init__(self, kind: str, domain: Domain, params: Mapping[Clique, dict], total: float):
        self.kind = kind
        self.domain = domain
        self.params = dict(params)
        self.total = float(total)
        self._tables = (
            CliqueTables(domain, {c: p["weights"] for c, p in self.params.items()}, total) if kind == "linear" else None
        )

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return tuple(self.params)

    def __repr__(self) -> str:
        return f"RegressionModel({self.kind}, cliques={list(self.params)})"

    def _no_model(self, clique: Clique):
        return ValueError(
            f"the {self.kind} regression model has no training query on {clique} (fitted cliques: {list(self.params)}); "
            "a per-clique regression cannot answer it (the +PGM arm can)"
        )

    def predict(self, queries: QuerySet) -> np.ndarray:
        """Predicted answers of every query in ``queries`` (flat), without any privacy cost."""
        queries = as_queries(queries, "queries", "RegressionModel.predict")
        check_domain(queries, self.domain, "RegressionModel.predict")
        out = []
        for clique, m in queries.blocks:
            if self.kind == "linear":
                try:
                    table = self._tables.marginal(clique)
                except ValueError:
                    raise self._no_model(clique) from None
                out.append(LinearQuery.from_matrix(m).apply(table))
            else:
                if clique not in self.params:
                    raise self._no_model(clique)
                out.append(_gaussian_predict(self.params[clique], m))
        return np.concatenate(out)

    def _linear_only(self, what: str):
        if self.kind != "linear":
            raise TypeError(
                f"RegressionModel.{what}: the Gaussian-basis model is non-linear in the query and has no table; use predict(QuerySet)"
            )

    def answers(self, queries: Sequence[Mapping[str, object]]) -> list[np.ndarray]:
        """Factored queries (``{attribute: factor}``, as :meth:`pgmjax.GraphicalModel.answers`); linear model only."""
        self._linear_only("answers")
        return self._tables.answers(queries)

    def marginals(self, cliques: Sequence[CliqueLike]) -> list[np.ndarray]:
        """The weight tables summed to ``cliques`` (linear model only)."""
        self._linear_only("marginals")
        return self._tables.marginals(cliques)

    def marginal(self, clique: CliqueLike) -> np.ndarray:
        return self.marginals([clique])[0]


def _gaussian_features(x: np.ndarray, centers: np.ndarray, width: float) -> np.ndarray:
    d2 = (x * x).sum(1)[:, None] + (centers * centers).sum(1)[None, :] - 2.0 * x @ centers.T
    return np.exp(-np.maximum(d2, 0.0) / (2.0 * width * width))


def _gaussian_predict(p: dict, x: np.ndarray) -> np.ndarray:
    return p["intercept"] + _gaussian_features(x, p["centers"], p["width"]) @ p["weights"]


def _ridge(design: np.ndarray, y: np.ndarray, ridge: float, free: int = 0) -> np.ndarray:
    """``argmin ||design w - y||^2 + ridge ||w[free:]||^2``; the minimum-norm solution when ``ridge = 0``.

    With ``ridge > 0`` the normal equations are positive definite (the unpenalised columns must be
    independent, as the intercept's column of ones is) and solved by Cholesky; else least squares (SVD).
    """
    if ridge > 0:
        gram = design.T @ design
        gram[np.arange(free, gram.shape[0]), np.arange(free, gram.shape[0])] += ridge
        import scipy.linalg  # here: a slow import, for this one solve

        return scipy.linalg.solve(gram, design.T @ y, assume_a="pos")
    return np.linalg.lstsq(design, y, rcond=None)[0]


def _default_width(x: np.ndarray) -> float:
    """Median distance between distinct rows (a public function of the query features); 1 if none differ."""
    d2 = (x * x).sum(1)[:, None] + (x * x).sum(1)[None, :] - 2.0 * x @ x.T
    d = np.sqrt(np.maximum(d2[np.triu_indices(x.shape[0], 1)], 0.0))
    d = d[d > 1e-12]
    return float(np.median(d)) if d.size else 1.0


def fit_regression(
    queries: QuerySet,
    answers,
    *,
    model: str = "linear",
    ridge: float = 0.0,
    width: float | None = None,
    centers: int | None = None,
    total: float | None = None,
) -> RegressionModel:
    """Fit MLDP's regression model to (noisy) answers of training queries (paper Section III-D).

    Both models are fitted clique by clique and read nothing but the query features and the given
    answers (post-processing of the noisy answers).

    * ``"linear"`` (the paper's best model for range queries; the default): linear regression on the
      queries' indicator features without intercept, ``y(q) = <w, q>``: least squares
      ``argmin_w ||Q_C w - y_C||^2 + ridge ||w||^2`` (the minimum-norm solution when ``ridge = 0``:
      cells no training query touches get weight 0). The weights estimate the clique's histogram;
      with exact answers and training queries of full column rank they are the histogram.
    * ``"gaussian"``: the paper's equations 6-7, a linear combination of fixed Gaussian basis
      functions of the query, ``y(q) = w_0 + sum_j w_j phi_j(q)``,
      ``phi_j(q) = exp(-||q - mu_j||^2 / (2 u^2))``. The paper prints ``mu`` and ``u`` without the
      index ``j`` (the paper's notation is ambiguous here); pgmjax reads it as the standard
      Gaussian-basis model (Bishop, PRML eq. 3.4, whose wording the paper follows): one basis function
      per centre ``mu_j``, the centres being the training queries' feature vectors (the first
      ``centers`` of them, or all), and ``u`` one preset width shared by all (``width``; default
      the median distance between the training queries' features). ``w`` is fitted by least squares
      with the ridge penalty on ``w_1..`` (not on ``w_0``). Centres and width depend only on the
      query features, never on the data.

    Args:
        queries: the training :class:`QuerySet`.
        answers: their (noisy) answers, one per query.
        model: ``"linear"`` or ``"gaussian"``.
        ridge: the ridge penalty ``>= 0``.
        width: the Gaussian basis width ``u > 0`` (gaussian only; default the median distance).
        centers: how many training queries serve as centres (gaussian only; default all).
        total: the number of records the model stands for (reported as ``model.total``); default the
            largest of the linear model's per-clique weight sums, resp. of the answers.

    Returns:
        A :class:`RegressionModel`.

    Example:
        >>> dom = Domain({"a": 4})
        >>> reg = fit_regression(QuerySet.cells(dom, "a"), [12.0, 24.0, 6.0, 7.0])
        >>> reg.predict(QuerySet.ranges(dom, "a"))[[2, 3]].tolist()      # ranges [0, 2] and [0, 3]
        [42.0, 49.0]
    """
    where = "fit_regression"
    queries = as_queries(queries, "queries", where)
    y = check_answers(answers, len(queries), where)
    model, ridge, width, centers = regression_options(model, ridge, width, centers, where)
    params: dict[Clique, dict] = {}
    for clique, (matrix, pos) in queries.by_clique().items():
        yc = y[pos]
        if model == "linear":
            w = _ridge(matrix, yc, ridge)
            params[clique] = {"weights": w.reshape(queries.domain.shape_of(clique))}
        else:
            mu = matrix[: (matrix.shape[0] if centers is None else min(centers, matrix.shape[0]))]
            u = _default_width(matrix) if width is None else width
            design = np.hstack([np.ones((matrix.shape[0], 1)), _gaussian_features(matrix, mu, u)])
            w = _ridge(design, yc, ridge, free=1)
            params[clique] = {"intercept": float(w[0]), "weights": w[1:], "centers": mu, "width": u}
    if total is None:
        if model == "linear":
            total = max(float(p["weights"].sum()) for p in params.values())
        else:
            total = float(np.max(y))
        total = max(total, 1.0)
    else:
        total = _positive(total, "total", where)
    return RegressionModel(model, queries.domain, params, total)


def check_answers(values, rows: int, where: str) -> np.ndarray:
    """``values`` as a flat float64 array of ``rows`` finite answers, else a TypeError / ValueError naming ``where``."""
    try:
        y = np.asarray(values, np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: answers must be an array of numbers") from None
    if y.size != rows:
        raise ValueError(f"{where}: {y.size} answers for {rows} queries")
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{where}: answers have non-finite entries")
    return y


def _choice(value, name: str, options, where: str) -> str:
    if value not in options:
        raise ValueError(f"{where}: {name} must be one of {options}, got {value!r}")
    return value


def regression_options(model, ridge, width, centers, where: str) -> tuple[str, float, float | None, int | None]:
    """The regression's options checked: ``(model, ridge, width, centers)``; width and centers only for ``"gaussian"``."""
    model = _choice(model, "model", MODELS, where)
    ridge = _nonnegative(ridge, "ridge", where)
    if width is not None:
        width = _positive(width, "width", where)
    if centers is not None:
        centers = _int(centers, "centers", where)
    if model == "linear" and (width is not None or centers is not None):
        raise ValueError(f"{where}: width= and centers= belong to model='gaussian'")
    return model, ridge, width, centers
