"""The paper's own maximum-entropy learner: stochastic gradient ascent on the dual with Gibbs sampling.

Chen, Zhou & Bhowmick, "Integrating Historical Noisy Answers for Improving Data Utility under Differential
Privacy" (EDBT 2012), section 4.2: exact marginals ``p_w[f_i]`` are intractable for a general Markov random
field, so the paper replaces the gradient ``pi - p_w[f]`` of the dual (Theorem 6, eq. 36-37) by ``pi - f(t)`` at
the state ``t`` of a Metropolis-within-Gibbs chain (one uniform proposal per attribute per sweep, acceptance
``min(1, exp(Delta))`` with ``Delta`` the change of ``sum_i w_i f_i + log p0``) and projects ``w`` back into the
box after every step. No convergence guarantee (the chain lags the moving ``w``); a small step helps. Provided
for fidelity with the paper; :func:`pgmjax.history.maxent` solves the same dual exactly wherever the junction
tree fits. Several chains may be run in lockstep, their features averaged in each step.

The whole run is one ``lax.scan`` (structure static: the attributes and the cliques of the feature blocks).
Features are looked up in dense tables ``(rows, *clique_shape)``, so this learner is for histories whose
blocks fit in memory as tables.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit


class GibbsState(NamedTuple):
    """The learner's state: the chains' tuples and the dual weights."""

    t: jax.Array  # (chains, attributes) int32
    w: jax.Array  # (m,)
    key: jax.Array


def _features(tables, cliques, t):
    """``f(t)`` for every chain: ``(chains, m)`` (rows in block order)."""
    out = []
    for table, idx in zip(tables, cliques):
        out.append(jax.vmap(lambda s, table=table, idx=idx: table[(slice(None), *(s[i] for i in idx))])(t))
    return jnp.concatenate(out, axis=1)


def _run_impl(tables, cliques, sizes, log_p0, pi, beta, lr, iters, state):
    chains = state.t.shape[0]

    def sweep(carry, _):
        t, w, key = carry
        for k, n_k in enumerate(sizes):  # one Metropolis-Hastings update per attribute
            key, kp, ka = jax.random.split(key, 3)
            proposal = jax.random.randint(kp, (chains,), 0, n_k, dtype=t.dtype)
            moved = t.at[:, k].set(proposal)
            delta = (_features(tables, cliques, moved) - _features(tables, cliques, t)) @ w
            delta = delta + log_p0[k][proposal] - log_p0[k][t[:, k]]
            accept = jnp.log(jax.random.uniform(ka, (chains,))) < delta
            t = jnp.where(accept[:, None], moved, t)
        grad = pi - jnp.mean(_features(tables, cliques, t), axis=0)
        w = jnp.clip(w + lr * grad, -beta, beta)
        return (t, w, key), None

    (t, w, key), _ = jax.lax.scan(sweep, tuple(state), None, length=iters)
    return GibbsState(t, w, key)


_run = jit(_run_impl, static_argnums=(1, 2, 7))


def sgd_gibbs(tables, cliques, sizes, log_p0, pi, beta, *, lr: float, iters: int, chains: int, key) -> np.ndarray:
    """SGD_GIBBS of [CZB] section 4.2: the dual weights ``w`` after ``iters`` sweeps.

    Args:
        tables: per feature block, a dense array ``(rows, *clique_shape)``.
        cliques: per block, the attribute positions (into ``sizes``) of its axes.
        sizes: every attribute's number of values.
        log_p0: per attribute, the log of its prior factor.
        pi: the normalised answers ``y / n`` (block row order).
        beta: the box (block row order; ``inf`` allowed).
        lr: step size (the paper: 1e-4).
        iters: number of sweeps (the paper: about 10^6).
        chains: chains run in lockstep (features averaged per step).
        key: a ``jax.random`` key (the chains start from draws of the prior).

    Returns:
        ``w`` (float64 NumPy array, block row order).

    Example:
        >>> w = sgd_gibbs([np.array([[[1.0, 1.0], [0.0, 0.0]]])], [(0, 1)], (2, 2), [np.log([0.5, 0.5])] * 2,
        ...               np.array([0.7]), np.array([np.inf]), lr=1e-2, iters=4000, chains=16, key=jax.random.key(0))
        >>> bool(abs(w[0] - np.log(7 / 3)) < 0.1)
        True
    """
    k0, k1 = jax.random.split(key)
    dtype = jnp.asarray(pi).dtype
    starts = [jax.random.categorical(k, jnp.asarray(lp, dtype), shape=(chains,)) for k, lp in
              zip(jax.random.split(k0, len(sizes)), log_p0)]
    state = GibbsState(jnp.stack(starts, axis=1).astype(jnp.int32), jnp.zeros_like(pi), k1)
    out = _run(tuple(jnp.asarray(t, dtype) for t in tables), tuple(tuple(c) for c in cliques), tuple(sizes),
               tuple(jnp.asarray(lp, dtype) for lp in log_p0), pi, beta, jnp.asarray(lr, dtype), int(iters), state)
    return np.asarray(out.w, np.float64)
