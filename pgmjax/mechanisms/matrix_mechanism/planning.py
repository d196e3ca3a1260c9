"""The HDMM strategy for a :class:`pgmjax.Workload`: the workload as a union of Kronecker products, the strategy
optimised for it (OPT_kron per clique in an OPT_+ union, the identity, or OPT_M), and checks of a given one.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018 (the templates and the OPT_+ weights ``alpha_j ∝ e_j^(1/3)``);
McKenna, Sheldon, Miklau, "Graphical-model based estimation and inference for differential privacy",
ICML 2019, Section 6 (equal weights, ``weights="equal"``, as in its experiments). Everything here is
data-independent: the strategy depends on the workload only, never on the data or the budget.

Example:
    >>> w = Workload.benchmark(Domain({"a": 32, "b": 2}), [("a", "b")], numeric=["a"])
    >>> union_workload(w).rows                          # Prefix(32) (x) Identity(2)
    64
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...data.domain import Domain
from ...checks import check_count as _int
from ...checks import check_key as _check_key
from ...queries.workload import Workload
from ..options import check_choice as _choice
from .error import expected_error
from .factors import NOISES
from .optimize import opt_marginals, opt_plus_weights, opt_union
from .strategies import KronStrategy, MarginalsStrategy, UnionStrategy
from .workloads import KronWorkload, UnionWorkload

__all__ = ["union_workload", "hdmm_strategy"]

STRATEGIES = ("opt+", "identity", "marginals")
WEIGHTS = ("opt", "equal")
# OPT_M weighs all 2^d marginals of the workload's attributes, so time and memory grow as d 2^d.
MAX_MARGINAL_ATTRIBUTES = 16


def union_workload(workload: Workload) -> UnionWorkload:
    """A :class:`pgmjax.Workload` as the core's union of Kronecker products (one term per workload query).

    Identity factors (``None`` in the workload) become explicit identity matrices; weights are 1.

    Example:
        >>> dom = Domain({"a": 4, "b": 2})
        >>> union_workload(Workload.benchmark(dom, [("a", "b")], numeric=["a"])).rows
        8
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"union_workload: expected a pgmjax.Workload, got {type(workload).__name__}")
    dom = workload.domain
    return UnionWorkload(
        [KronWorkload(q.clique, [np.eye(dom[a]) if m is None else m for a, m in zip(q.clique, q.matrices)]) for q in workload]
    )


def _equal_weights(k: int, noise: str) -> np.ndarray:
    """Equal weights of unit L1 sum (Laplace) or unit L2 norm (Gaussian): the stack keeps sensitivity 1."""
    return np.full(k, 1.0 / k if noise == "laplace" else 1.0 / math.sqrt(k))


def _term_errors(W: UnionWorkload, terms, noise: str) -> list[float]:
    """``e_j``: the error factor of clique ``j``'s workload queries on the unit-weight term ``j``."""
    groups = W.by_clique()
    out = []
    for t in terms:
        unit = KronStrategy(t.clique, t.factors, 1.0)
        out.append(expected_error(UnionWorkload(groups[frozenset(t.clique)]), unit, noise=noise))
    return out


def hdmm_strategy(
    workload: Workload,
    key,
    *,
    strategy: str = "opt+",
    weights: str = "opt",
    noise: str = "laplace",
    restarts: int = 8,
) -> tuple[UnionStrategy | MarginalsStrategy, dict]:
    """Optimise the HDMM strategy for a workload (data-independent; VLDB 2018 OPT_kron / OPT_+ / OPT_M).

    Args:
        workload: a :class:`pgmjax.Workload` (its queries' factor matrices; identity where None).
        key: a ``jax.random`` key (random restarts of the L-BFGS fits).
        strategy: ``"opt+"``: per clique OPT_kron (:func:`.opt_union`), ``"identity"``: per clique
            the identity (the plain marginal), ``"marginals"``: OPT_M (:func:`.opt_marginals`, at most
            16 attributes).
        weights: for the union strategies, ``"opt"`` (OPT_+: ``alpha_j ∝ e_j^(1/3)``; Gaussian ``e_j^(1/4)``)
            or ``"equal"`` (the ICML 2019 script). Ignored for ``"marginals"``.
        noise: ``"laplace"`` (L1 column norms) or ``"gaussian"`` (L2).
        restarts: random restarts per L-BFGS fit.

    Returns:
        ``(strategy, info)``: a unit-sensitivity :class:`.UnionStrategy` (or
        :class:`.MarginalsStrategy`) and a dict with ``template``, ``weights``, ``term_errors``
        (``e_j``, union strategies), ``loss`` (the error factor ``||A||^2 trace[(A^T A)^+ W^T W]``) and
        ``seconds``.

    Example:
        >>> w = Workload.benchmark(Domain({"a": 32, "b": 2}), [("a", "b")], numeric=["a"])
        >>> S, info = hdmm_strategy(w, jax.random.key(0))
        >>> [f.shape for f in S.terms[0].factors]                  # p-Identity for the Prefix factor
        [(34, 32), (2, 2)]
    """
    where = "hdmm_strategy"
    if not isinstance(workload, Workload):
        raise TypeError(f"{where}: workload must be a pgmjax.Workload, got {type(workload).__name__}")
    _check_key(key, where)
    strategy = _choice(strategy, "strategy", STRATEGIES, where)
    weights = _choice(weights, "weights", WEIGHTS, where)
    noise = _choice(noise, "noise", NOISES, where)
    restarts = _int(restarts, "restarts", where, 1)
    W = union_workload(workload)
    if strategy == "marginals" and len(W.attributes) > MAX_MARGINAL_ATTRIBUTES:
        raise ValueError(
            f"{where}: strategy='marginals' (OPT_M) weighs all 2^d marginals of the workload's {len(W.attributes)} "
            f"attributes; at most {MAX_MARGINAL_ATTRIBUTES} are supported. Use strategy='opt+'"
        )
    t0 = time.perf_counter()
    if strategy == "marginals":
        S, loss = opt_marginals(W, key, restarts=restarts, noise=noise)
        info = {"template": "OPT_M", "weights": None, "term_errors": None, "loss": loss}
    else:
        if strategy == "opt+":
            terms = opt_union(W, key, restarts=restarts, noise=noise)[0].terms
        else:
            terms = [KronStrategy(g[0].clique, [np.eye(n) for n in g[0].sizes]) for g in W.by_clique().values()]
        errors = _term_errors(W, terms, noise)
        alpha = opt_plus_weights(errors, noise) if weights == "opt" else _equal_weights(len(terms), noise)
        S = UnionStrategy([KronStrategy(t.clique, t.factors, a) for t, a in zip(terms, alpha)])
        loss = expected_error(W, S, noise=noise)
        info = {
            "template": "OPT_kron per clique, OPT_+ union" if strategy == "opt+" else "identity per clique",
            "weights": weights,
            "term_errors": [float(e) for e in errors],
            "loss": loss,
        }
    info["seconds"] = time.perf_counter() - t0
    return S, info


def check_strategy_kind(S, where: str):
    """``S`` if it is one of :data:`STRATEGIES` or a prebuilt strategy (of a known kind), else a ValueError (an
    unknown name) or a TypeError naming ``where``; checks that need the workload are :func:`check_strategy`'s.

    Example:
        >>> check_strategy_kind("identity", "hdmm")
        'identity'
    """
    if isinstance(S, str):
        return _choice(S, "strategy", STRATEGIES, where)
    if not isinstance(S, (KronStrategy, UnionStrategy, MarginalsStrategy)):
        raise TypeError(
            f"{where}: strategy must be one of {STRATEGIES} or a matrix_mechanism KronStrategy / UnionStrategy / "
            f"MarginalsStrategy, got {type(S).__name__}"
        )
    return S


def check_strategy(S, domain: Domain, W: UnionWorkload, noise: str, where: str) -> None:
    """Refuse a prebuilt strategy that is of no known kind, does not fit the domain or does not support ``W``."""
    check_strategy_kind(S, where)
    if isinstance(S, KronStrategy):
        S = UnionStrategy([S])
    if isinstance(S, UnionStrategy):
        parts = [(t.clique, t.sizes) for t in S.terms]
    else:
        parts = [(S.attributes, S.sizes)]
    for clique, sizes in parts:
        for a, n in zip(clique, sizes):
            if a not in domain or domain[a] != n:
                raise ValueError(f"{where}: strategy attribute {a!r} ({n} values) is missing from, or sized differently in, the data's domain")
    if not math.isfinite(expected_error(W, S, noise=noise)):
        raise ValueError(f"{where}: the strategy does not support the workload (some workload query is not in its row space)")


def strategy_record(S) -> dict:
    """The strategy for ``info``: per-term cliques, weights and factor matrices (or OPT_M's theta)."""
    if isinstance(S, MarginalsStrategy):
        return {"kind": "marginals", "attributes": S.attributes, "sizes": S.sizes, "theta": S.theta, "marginals": S.marginals()}
    terms = S.terms if isinstance(S, UnionStrategy) else (S,)
    return {
        "kind": "union",
        "cliques": [t.clique for t in terms],
        "weights": np.array([t.weight for t in terms]),
        "factors": [t.factors for t in terms],
        "factor_shapes": [[f.shape for f in t.factors] for t in terms],
    }

