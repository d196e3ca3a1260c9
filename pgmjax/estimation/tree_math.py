"""Arithmetic on the estimators' pytrees: dicts of potential or marginal blocks, lists of prediction groups."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .losses import sum_all

tree_map = jax.tree_util.tree_map


def vdot(a, b) -> jax.Array:
    """Inner product of two pytrees of one structure (e.g. lists of measurement groups' arrays), as one
    reduction (:func:`~pgmjax.estimation.losses.sum_all`)."""
    return sum_all([x * y for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))])


def axpy(alpha, x: dict, y: dict) -> dict:
    """``alpha * x + y``, block by block."""
    return {k: alpha * x[k] + y[k] for k in x}


def all_finite(tree) -> jax.Array:
    """Whether every entry of every array of ``tree`` is finite (one boolean scalar)."""
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x.reshape(-1))) for x in jax.tree_util.tree_leaves(tree)]))
