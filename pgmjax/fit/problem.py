"""The estimation problem: what every estimator needs to know, structure (static) and numbers (leaves).

A :class:`Problem` holds the oracle plan of the model's junction tree, the stacked measurements, the
number of records and the loss; it computes the clique marginals of potentials (the marginal oracle
``M(theta)`` of McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for
differential privacy", ICML 2019, Section 3) and the loss of marginals (Appendix C.2), also through
the loss's linear predictions ``Q mu`` (:meth:`Problem.predict`), the space the estimators keep their
gradients in. :class:`MarginalView` is what a custom (callable) loss reads.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pgmjax.kernels import marginalize

from . import losses as _losses
from ..graph import oracle
from ..data.domain import as_clique


class MarginalView:
    """Read-only ``clique -> marginal table`` view of oracle blocks, for custom losses.

    ``view[clique]`` works for any clique inside one of the model's cliques;
    the table's axes follow the given clique's order.
    """

    def __init__(self, plan: oracle.OraclePlan, blocks: dict):
        self._plan = plan
        self._blocks = blocks

    def __getitem__(self, clique) -> jax.Array:
        clique = as_clique(clique)
        j = self._plan.tree.containing(clique)
        if j is None:
            raise KeyError(
                f"clique {clique} is in no clique of the model; add it to `cliques=` of estimate(). "
                f"Model cliques: {self._plan.cliques}"
            )
        return marginalize(self._plan.table(self._blocks, j), self._plan.cliques[j], clique)


_LOSS_IS_LEAF = "<the loss is a pytree child>"


def _is_pytree(loss) -> bool:
    """Whether ``loss`` is a registered pytree node (a callable with numbers as leaves), not a string or a plain function."""
    return not isinstance(loss, str) and not jax.tree_util.treedef_is_leaf(jax.tree_util.tree_structure(loss))


@jax.tree_util.register_pytree_node_class
class Problem:
    """Everything an estimator needs: structure (static) and numbers (leaves).

    Attributes:
        plan: the oracle plan.
        meas: stacked measurements.
        total: number of records (array).
        lipschitz: Lipschitz constant of the L2 loss (array; 1 if unused).
        smoothing: Huber width used in place of the L1 loss while optimising
            (array; see :func:`pgmjax.fit.losses.residual_loss`).
        loss: ``"l2"``, ``"l1"`` or a callable ``MarginalView -> scalar`` (static).
    """

    def __init__(self, plan, meas, total, lipschitz, smoothing, loss):
        self.plan, self.meas, self.total, self.lipschitz, self.smoothing, self.loss = (
            plan, meas, total, lipschitz, smoothing, loss,
        )

    def tree_flatten(self):
        # A callable loss that is itself a pytree (e.g. DualQuery's transcript likelihood) passes its
        # numbers as leaves, so the program is compiled once per loss structure, not once per loss.
        if _is_pytree(self.loss):
            return (self.plan, self.meas, self.total, self.lipschitz, self.smoothing, self.loss), (_LOSS_IS_LEAF,)
        return (self.plan, self.meas, self.total, self.lipschitz, self.smoothing), (self.loss,)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        if aux[0] is _LOSS_IS_LEAF:
            return cls(*leaves)
        return cls(*leaves, *aux)

    def with_smoothing(self, smoothing) -> "Problem":
        return Problem(self.plan, self.meas, self.total, self.lipschitz, jnp.asarray(smoothing, self.total.dtype), self.loss)

    def loss_of(self, mu: dict) -> jax.Array:
        """The loss the estimators minimise (L1 smoothed by ``smoothing``)."""
        if callable(self.loss):
            value = self.loss(MarginalView(self.plan, mu))
            return jnp.asarray(value, self.total.dtype).reshape(())
        return _losses.residual_loss(mu, self.meas, self.loss, self.smoothing if self.loss == "l1" else None)

    def exact_loss(self, mu: dict) -> jax.Array:
        """The loss itself (no smoothing)."""
        if self.loss == "l1":
            return _losses.residual_loss(mu, self.meas, "l1")
        return self.loss_of(mu)

    def marginals(self, theta: dict) -> dict:
        return oracle.marginals(self.plan, theta, self.total)[0]

    def marginals_and_log_partition(self, theta: dict) -> tuple[dict, jax.Array]:
        return oracle.marginals(self.plan, theta, self.total)

    def predict(self, mu: dict):
        """What the loss reads of the marginals: each measurement group's answers ``Q mu`` (a tuple), or,
        for a callable loss, the marginals themselves. Linear in ``mu``."""
        if callable(self.loss):
            return mu
        return tuple(_losses.predictions(mu, self.meas))

    def loss_of_predictions(self, pred) -> jax.Array:
        """:meth:`loss_of` from :meth:`predict`'s output."""
        if callable(self.loss):
            return self.loss_of(pred)
        return _losses.loss_of_predictions(pred, self.meas, self.loss, self.smoothing if self.loss == "l1" else None)

    def pull_back(self, pred_grad, like: dict) -> dict:
        """The gradient in the marginals' space from one in :meth:`predict`'s: the transpose of
        :meth:`predict` (``Q^T g``; ``like``: any marginals, for their shapes)."""
        if callable(self.loss):
            return pred_grad
        return jax.linear_transpose(self.predict, like)(pred_grad)[0]

    def loss_and_grad(self, mu: dict):
        return jax.value_and_grad(self.loss_of)(mu)
