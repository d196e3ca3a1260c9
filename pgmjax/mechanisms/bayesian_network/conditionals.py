"""PrivBayes' own estimator: conditionals from the noisy tables, and ancestral sampling of records.

Zhang, Cormode, Procopiuc, Srivastava & Xiao, "PrivBayes: Private Data Release via Bayesian
Networks", ACM TODS 42(4) 2017, Algorithm 1 (NoisyConditionals; then sampling the network in
placement order).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...data.dataset import Dataset, project_table
from ...data.domain import Domain
from ...checks import check_key as _check_key
from ...privacy import discrete_noise as dn
from ...queries.measurement import Measurement
from .parent_sets import Network


def noisy_conditionals(domain: Domain, network: Network, measurements: Sequence[Measurement]) -> list[np.ndarray]:
    """Conditionals ``Pr*[X_i | Pi_i]`` from noisy tables (TODS paper, Algorithm 1, NoisyConditionals).

    Each noisy table is clipped at 0 and normalised (uniform if nothing is left); the joint of
    ``(Pi_i, X_i)`` is the marginal of the first measured table that contains it (the tables of the
    first attributes are inside a later one); the conditional divides by the ``Pi_i`` marginal and is
    uniform where that marginal is 0.

    Args:
        domain: the domain.
        network: ``[(child, parents)]``.
        measurements: identity measurements of cliques covering every ``{X_i} ∪ Pi_i``.

    Returns:
        One array per network node, axes ``(*parents, child)``, each row summing to 1.
    """
    tables = []
    for m in measurements:
        if m.query is not None:
            raise ValueError(f"noisy_conditionals: measurement on {m.clique} is not a plain marginal")
        t = np.maximum(m.y.reshape(domain.shape_of(m.clique)), 0.0)
        s = t.sum()
        tables.append((m.clique, t / s if s > 0 else np.full(t.shape, 1.0 / t.size)))
    out = []
    for child, parents in network:
        target = (*parents, child)
        host = next(((c, t) for c, t in tables if set(target) <= set(c)), None)
        if host is None:
            raise ValueError(f"noisy_conditionals: no measured table contains {target}")
        joint = project_table(host[1], host[0], target)
        mass = joint.sum(axis=-1, keepdims=True)
        safe = np.where(mass > 0, mass, 1.0)
        out.append(np.where(mass > 0, joint / safe, 1.0 / domain[child]))
    return out


def sample_network(domain: Domain, network: Network, conditionals: Sequence[np.ndarray], records: int, key) -> Dataset:
    """Ancestral sampling of ``records`` tuples from a Bayesian network, in network order.

    Each attribute is drawn by inversion: its parents' configuration selects a row of the
    conditional's cumulative table, and one uniform per record (``jax.random``) is located in that
    row; all rows are searched at once by offsetting row ``j`` by ``j``.

    Args:
        domain: the domain (every attribute must be in the network).
        network: ``[(child, parents)]``, parents placed before their child.
        conditionals: one array per node, axes ``(*parents, child)``, rows summing to 1.
        records: how many tuples.
        key: a ``jax.random`` key.

    Returns:
        A :class:`~pgmjax.Dataset` over ``domain``.
    """
    _check_key(key, "sample_network")
    if sorted(c for c, _ in network) != sorted(domain.attributes):
        raise ValueError("sample_network: the network must place every attribute of the domain exactly once")
    n = int(records)
    cols = np.zeros((n, len(domain)), np.int64)
    done: set[str] = set()
    # float64 uniforms from the key's own generator: the same records whatever jax_enable_x64 says.
    uniforms = dn.generator(key).random((len(network), n))
    for (child, parents), table, u in zip(network, conditionals, uniforms):
        missing = [p for p in parents if p not in done]
        if missing:
            raise ValueError(f"sample_network: parents {missing} of {child!r} are placed after it")
        nx = domain[child]
        table = np.asarray(table, np.float64)
        if table.shape != (*domain.shape_of(parents), nx):
            raise ValueError(f"sample_network: conditional of {child!r} has shape {table.shape}, expected {(*domain.shape_of(parents), nx)}")
        cdf = np.cumsum(table.reshape(-1, nx), axis=1)
        cdf /= cdf[:, -1:]
        cdf[:, -1] = 1.0  # exactly 1: a uniform below 1 always lands in its own row
        rows = (
            np.ravel_multi_index(tuple(cols[:, domain.index(p)] for p in parents), domain.shape_of(parents))
            if parents
            else np.zeros(n, np.int64)
        )
        flat = np.searchsorted((cdf + np.arange(cdf.shape[0])[:, None]).ravel(), rows + u, side="right")
        cols[:, domain.index(child)] = np.clip(flat - rows * nx, 0, nx - 1)
        done.add(child)
    return Dataset(cols, domain)
