"""A fitted graphical model: potentials over junction-tree cliques and a total."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from pgmjax.kernels import reference

from . import oracle
from .domain import Clique, CliqueLike, Domain


class GraphicalModel:
    """The distribution ``p(x) ∝ exp(sum_c theta_c(x_c))`` scaled to ``total`` records.

    Args:
        plan: the oracle plan (junction tree and layout).
        theta: log-potentials in the oracle's block layout.
        total: the number of records the model stands for.

    Attributes:
        domain, cliques (junction-tree cliques holding potentials), total,
        potentials (``{clique: log-potential table}``), junction_tree.

    Example:
        >>> model = pj.estimate(domain, measurements)            # doctest: +SKIP
        >>> model.marginal(("sex", "income")).sum() == model.total  # doctest: +SKIP
    """

    def __init__(self, plan: oracle.OraclePlan, theta: dict, total: float, history=None):
        self.plan = plan
        self.theta = theta
        self.total = float(total)
        self.history = history or []

    @property
    def domain(self) -> Domain:
        return self.plan.domain

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return self.plan.cliques

    @property
    def junction_tree(self):
        return self.plan.tree

    @property
    def dtype(self):
        return jax.tree_util.tree_leaves(self.theta)[0].dtype

    @functools.cached_property
    def potentials(self) -> dict[Clique, jax.Array]:
        return self.plan.tables(self.theta)

    @functools.cached_property
    def _clique_marginals(self) -> dict[Clique, np.ndarray]:
        mu, _ = _marginals_jit(self.plan, self.theta, jnp.asarray(self.total, self.dtype))
        return {c: np.asarray(t, np.float64) for c, t in self.plan.tables(mu).items()}

    def clique_marginals(self) -> dict[Clique, np.ndarray]:
        """Marginals of every model clique (one oracle call, cached)."""
        return dict(self._clique_marginals)

    def log_partition(self) -> float:
        return float(_log_partition_jit(self.plan, self.theta))

    def marginal(self, attrs: CliqueLike) -> np.ndarray:
        """Counts of the marginal over ``attrs`` (any subset), axes in the given order.

        Inside a model clique it is a projection of that clique's marginal;
        otherwise it is computed by variable elimination over the smallest
        subtree of the junction tree that covers ``attrs``.
        """
        attrs = self.domain.check_clique(attrs, what="marginal of")
        if not attrs:
            return np.array(self.total)
        j = self.plan.tree.containing(attrs)
        if j is not None:
            host = self.cliques[j]
            table = self._clique_marginals[host]
            drop = tuple(i for i, a in enumerate(host) if a not in attrs)
            table = table.sum(axis=drop) if drop else table
            kept = [a for a in host if a in attrs]
            return np.transpose(table, [kept.index(a) for a in attrs])
        return self._eliminate(attrs)

    def _eliminate(self, attrs: Clique) -> np.ndarray:
        tree = self.plan.tree
        needed = {next(i for i, c in enumerate(self.cliques) if a in c) for a in attrs}
        keep = set()
        for c in needed:
            while c >= 0 and c not in keep:
                keep.add(c)
                c = tree.parent[c]
        # Prune the root side while it is a single-child chain of unneeded cliques.
        top = tree.root
        while top not in needed:
            kids = [c for c in keep if tree.parent[c] == top]
            if len(kids) != 1:
                break
            keep.discard(top)
            top = kids[0]
        marg = self._clique_marginals
        factors: list[tuple[tuple[str, ...], jax.Array]] = []
        with np.errstate(divide="ignore"):
            for c in sorted(keep):
                clique = self.cliques[c]
                factors.append((clique, np.log(marg[clique] / self.total)))
                if c != top and tree.parent[c] in keep:
                    sep = tree.separators[c]
                    sep_table = marg[clique].sum(axis=tuple(i for i, a in enumerate(clique) if a not in sep))
                    # p(sep) = 0 only where the clique's cells are 0 too: dividing by 1 there keeps -inf.
                    inv = -np.log(np.where(sep_table > 0, sep_table / self.total, 1.0))
                    factors.append((sep, inv))
        result = _variable_elimination(factors, attrs, self.domain)
        return np.exp(result) * self.total

    def __repr__(self) -> str:
        return (
            f"GraphicalModel({len(self.domain)} attributes, {len(self.cliques)} cliques, "
            f"treewidth {self.plan.tree.treewidth}, total {self.total:g})"
        )


def _variable_elimination(factors, attrs: Clique, domain: Domain) -> np.ndarray:
    """Sum out every variable not in ``attrs`` from log-factors, greedily by smallest created table.

    Runs on the host in float64 (the factors are normalised clique and
    separator probabilities, so the per-factor shift keeps them in range).
    """
    factors = list(factors)
    variables = {a for scope, _ in factors for a in scope} - set(attrs)
    names = sorted({a for s, _ in factors for a in s} | set(attrs))
    if len(names) > 52:
        raise ValueError(f"marginal of {attrs}: the covering subtree spans {len(names)} attributes (at most 52)")
    letters = {a: chr(ord("a") + i) if i < 26 else chr(ord("A") + i - 26) for i, a in enumerate(names)}

    def term(scope):
        return "".join(letters[a] for a in scope)

    while variables:
        def cost(v):
            scope = {a for s, _ in factors if v in s for a in s}
            return (domain.size(tuple(scope)), v)

        v = min(variables, key=cost)
        involved = [(s, f) for s, f in factors if v in s]
        factors = [(s, f) for s, f in factors if v not in s]
        scope = tuple(dict.fromkeys(a for s, _ in involved for a in s if a != v))
        spec = ",".join(term(s) for s, _ in involved) + "->" + term(scope)
        factors.append((scope, reference.log_einsum(spec, *[f for _, f in involved])))
        variables.discard(v)
    spec = ",".join(term(s) for s, _ in factors) + "->" + term(attrs)
    return reference.log_einsum(spec, *[f for _, f in factors])


_marginals_jit = jax.jit(oracle.marginals)
_log_partition_jit = jax.jit(oracle.log_partition)
