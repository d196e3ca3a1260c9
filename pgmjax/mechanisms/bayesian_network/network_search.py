"""GreedyBayes: PrivBayes' private choice of the Bayesian network with the exponential mechanism.

Zhang, Cormode, Procopiuc, Srivastava & Xiao, "PrivBayes: Private Data Release via Bayesian
Networks", ACM TODS 42(4) 2017, Algorithm 4 (GreedyBayes), with pgmjax's data-independent caps on
the number of candidates and on the size of the model the engine will build for the network.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from ...data.dataset import Dataset
from ...data.domain import Clique, Domain
from ...graph.junction import junction_tree, maximal_cliques
from ...privacy import Accountant, exponential_probabilities
from ...checks import check_key as _check_key
from ...privacy import discrete_noise as dn
from .parent_sets import Network, TooManyCandidates, maximal_parent_sets
from .scores import MI_UNBOUNDED, SCORES, sparse_quality, score_quality
from .sensitivity import score_sensitivity


def check_binary(domain: Domain, score: str, where: str) -> None:
    """Refuse ``score="F"`` on a domain with a non-binary attribute (the F score is defined for binary ones only)."""
    if score == "F":
        wide = [a for a in domain.attributes if domain[a] != 2]
        if wide:
            raise ValueError(
                f"{where}: score='F' is defined for binary attributes only (TODS Section 4.2); "
                f"{wide} are not binary: binarise them or use score='R'"
            )


def model_cells(domain: Domain, network: Network, extra: Clique | None = None) -> int:
    """Cells of the junction tree :func:`pgmjax.estimate` builds for the network's tables (plus ``extra``)."""
    tables = [(x, *p) for x, p in network] + ([tuple(extra)] if extra is not None else [])
    tree = junction_tree(domain, maximal_cliques(domain, tables))
    return int(sum(domain.size(c) for c in tree.cliques))


def _fits(domain: Domain, network: Network, table: Clique, max_model_cells: int) -> bool:
    """Whether the model of the network's tables plus ``table`` has at most ``max_model_cells`` cells.

    First a sound bound that needs no triangulation: the tree's cliques over the placed attributes are
    distinct subsets of them (at most one per attribute), the others are singletons.
    """
    placed = {a for x, p in network for a in (x, *p)} | set(table)
    bound = len(placed) * domain.size(tuple(placed)) + sum(domain[a] for a in domain.attributes if a not in placed)
    return bound <= max_model_cells or model_cells(domain, network, table) <= max_model_cells


def _step_candidates(
    domain: Domain, network: Network, cap: int, degree: int | None, max_candidates: int | None, max_model_cells: int | None
) -> tuple[list[tuple[str, tuple[str, ...]]], int]:
    """One GreedyBayes step's candidates ``(X, Pi)`` and the cap they were drawn under.

    ``X`` is not yet placed, ``Pi`` a maximal allowed parent set among the placed attributes
    (:func:`maximal_parent_sets` with ``floor(cap / n_X)``; ``(X, {})`` when nothing is allowed).
    While there are more than ``max_candidates`` of them, or none keeps the model under
    ``max_model_cells``, the cap is halved (data-independent: it reads only the released network).
    """
    limit = math.inf if max_candidates is None else max_candidates
    placed = [x for x, _ in network]
    remaining = [a for a in domain.attributes if a not in placed]
    sizes = [domain[a] for a in placed]
    step_cap = int(cap)
    while True:
        try:
            cands = []
            for x in remaining:
                left = None if max_candidates is None else max_candidates - len(cands)
                sets = maximal_parent_sets(sizes, step_cap // domain[x], degree, left)
                cands.extend((x, tuple(placed[j] for j in s)) for s in (sets or [()]))
                if len(cands) > limit:
                    raise TooManyCandidates
        except TooManyCandidates:
            if step_cap == 0:  # only (X, {}) left: at most d candidates, accept them
                cands = [(x, ()) for x in remaining]
            else:
                step_cap //= 2
                continue
        if max_model_cells is not None:
            cands = [(x, p) for x, p in cands if _fits(domain, network, (x, *p), max_model_cells)]
            if not cands:
                if step_cap == 0:
                    raise ValueError(
                        f"greedy_bayes: even without parents the model exceeds max_model_cells={max_model_cells} "
                        f"cells; raise the memory limit (max_model_mb of privbayes)"
                    )
                step_cap //= 2
                continue
        return cands, step_cap


def _qualities(data: Dataset, cands, score: str, bounded: bool, cache: dict) -> np.ndarray:
    """The exact quality of every candidate (:func:`score_quality`; from the records when its table is large), cached."""
    domain = data.domain
    q = np.empty(len(cands))
    for j, (x, parents) in enumerate(cands):
        ck = (x, tuple(sorted(parents)))
        if ck not in cache:
            if score != "F" and domain.size((x, *parents)) > 4 * len(data):
                cache[ck] = sparse_quality(data, x, parents, score, bounded)
            else:
                cache[ck] = score_quality(data.marginal((x, *parents)), score, bounded)
        q[j] = cache[ck]
    return q


def greedy_bayes(
    data: Dataset,
    accountant: Accountant,
    key,
    epsilon: float,
    *,
    score: str = "R",
    cap: int,
    degree: int | None = None,
    max_candidates: int | None = 10_000,
    keep_scores: bool = False,
    max_model_cells: int | None = None,
) -> tuple[Network, list[dict]]:
    """Choose the Bayesian network with the exponential mechanism (GreedyBayes).

    The first attribute is drawn uniformly (every ``(X, {})`` scores 0, so this is the exponential
    mechanism at no cost). Then, for ``i = 2..d``, the candidates are ``(X, Pi)`` with ``X`` not yet
    placed and ``Pi`` a maximal allowed parent set among the placed attributes
    (:func:`maximal_parent_sets` with ``floor(cap / n_X)`` and at most ``degree`` parents; ``(X, {})``
    when nothing is allowed), and one is drawn with ``P ∝ exp(eps_step q / (2 Delta))``,
    ``eps_step = epsilon / (d - 1)``, through ``accountant.exponential`` (:func:`score_quality`,
    :func:`score_sensitivity` under ``accountant.bounded``). When the candidates of a step exceed
    ``max_candidates``, that step's cap is halved until they fit (data-independent, like the C++'s
    halving of tau).

    Args:
        data: the private dataset.
        accountant: records the ``d - 1`` selections.
        key: a ``jax.random`` key.
        epsilon: the structure budget ``eps1``.
        score: ``"R"``, ``"I"`` or ``"F"`` (binary attributes only).
        cap: the largest allowed table ``n_X prod n_Pi`` (an int: ``floor(tau)``, or a cell cap).
        degree: the largest number of parents (None: only ``cap`` limits).
        max_candidates: the candidate limit of one step (None: no limit).
        keep_scores: also return every candidate, its exact quality and its selection probability
            (NOT private: for analysis and tests only).
        max_model_cells: the largest junction tree (total cells of its cliques, the model
            :func:`pgmjax.estimate` builds for the network's tables) the network may need; None: no
            limit. A candidate whose table would push the tree past it is dropped, and when a step has
            none left its cap is halved as above (data-independent: the tree depends only on the
            released network). Tables of several placed attributes can triangulate into cliques far
            larger than any table (a 14-attribute network of tables under 1e7 cells: 3.3e9 cells).

    Returns:
        ``(network, steps)``: ``network = [(child, parents)]`` in placement order (parents in
        placement order); ``steps`` one dict per selection (candidates, cap, sensitivity, epsilon; with
        ``keep_scores``, ``candidates_list``, ``qualities`` and ``probabilities``).
    """
    if not isinstance(data, Dataset):
        raise TypeError(f"greedy_bayes: data must be a pgmjax.Dataset, got {type(data).__name__}")
    if not isinstance(accountant, Accountant):
        raise TypeError(f"greedy_bayes: accountant must be a pgmjax.privacy.Accountant, got {type(accountant).__name__}")
    if score not in SCORES:
        raise ValueError(f"greedy_bayes: score must be one of {SCORES}, got {score!r}")
    if score == "I" and not accountant.bounded:
        raise ValueError(f"greedy_bayes: {MI_UNBOUNDED}")
    check_binary(data.domain, score, "greedy_bayes")
    _check_key(key, "greedy_bayes")
    domain = data.domain
    attrs = domain.attributes
    d = len(attrs)
    bounded = accountant.bounded
    n_public = len(data) if bounded else None
    k_first, k_steps = jax.random.split(key)
    first = attrs[int(dn.generator(k_first).integers(d))]  # the same for a key whatever jax_enable_x64 says
    network: Network = [(first, ())]
    steps: list[dict] = []
    if d == 1:
        return network, steps
    eps_step = float(epsilon) / (d - 1)
    step_keys = jax.random.split(k_steps, d - 1)
    cache: dict[tuple[str, tuple[str, ...]], float] = {}
    for i in range(1, d):
        cands, step_cap = _step_candidates(domain, network, cap, degree, max_candidates, max_model_cells)
        q = _qualities(data, cands, score, bounded, cache)
        binary = all(domain[x] == 2 or domain.size(p) == 2 for x, p in cands if p)
        delta = score_sensitivity(score, n_public, bounded=bounded, binary=binary)
        j = accountant.exponential(step_keys[i - 1], q, delta, epsilon=eps_step, target=f"GreedyBayes step {i + 1}")
        x, parents = cands[j]
        network.append((x, parents))
        step = {"step": i + 1, "candidates": len(cands), "cap": step_cap, "sensitivity": delta, "epsilon": eps_step}
        if keep_scores:
            step["candidates_list"] = cands
            step["qualities"] = q.tolist()
            step["probabilities"] = exponential_probabilities(q, delta, eps_step).tolist()
        steps.append(step)
    return network, steps
