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
from ..graph.marginal_oracle import oracle_of
from .routed_losses import RoutedMeasurements
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
            (array; see :func:`pgmjax.estimation.losses.residual_loss`).
        loss: ``"l2"``, ``"l1"`` or a callable ``MarginalView -> scalar`` (static).
    """

    def __init__(self, plan, meas, total, lipschitz, smoothing, loss):
        self.plan, self.meas, self.total, self.lipschitz, self.smoothing, self.loss = (
            plan, meas, total, lipschitz, smoothing, loss,
        )
        self.oracle = oracle_of(plan)  # the plan's marginal oracle, a value (pgmjax.graph.marginal_oracle)

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
        return self.loss_of_predictions(self.predict(mu))

    def exact_loss(self, mu: dict) -> jax.Array:
        """The loss itself (no smoothing)."""
        if self.loss == "l1":
            return _losses.loss_of_predictions(self.predict(mu), self.meas, "l1")
        return self.loss_of(mu)

    def marginals(self, theta: dict) -> dict:
        return self.marginals_and_log_partition(theta)[0]

    def marginals_and_log_partition(self, theta: dict) -> tuple[dict, jax.Array]:
        """The oracle's clique marginals of ``theta`` and ``log Z``: exact (junction tree), or, for a plan of the
        approximate oracle, pseudo-marginals and the free energy's estimate (:mod:`pgmjax.graph.approximate_oracle`)."""
        return self.oracle.marginals(self.plan, theta, self.total)

    def log_conditionals(self, theta: dict) -> dict:
        """``theta``'s distribution as log-conditionals along the junction tree
        (:func:`pgmjax.graph.gauge.log_conditionals`), or ``theta`` itself for the approximate oracle's
        region graph, which has no junction tree. The distribution is unchanged."""
        return self.oracle.log_conditionals(self.plan, theta)

    def predict(self, mu: dict):
        """What the loss reads of the marginals: each measurement group's answers ``Q mu`` (a tuple), or,
        for a callable loss, the marginals themselves. Linear in ``mu``: :meth:`predict_from_patterns` of
        :meth:`patterns`."""
        return self.predict_from_patterns(self.patterns(mu))

    def patterns(self, mu: dict):
        """The measured cliques' marginals as the queries read them (:func:`pgmjax.estimation.losses.patterns`; a
        tuple, one entry per measurement group), or, for a callable loss, the marginals themselves.

        Linear in ``mu``. Its transpose maps parameters of this shape to potentials (:meth:`expand`):
        the space in which mirror descent and L-BFGS keep their parameters."""
        if callable(self.loss):
            return mu
        if isinstance(self.meas, RoutedMeasurements):
            return tuple(self.meas.patterns(mu))
        return tuple(_losses.patterns(mu, self.meas))

    def predict_from_patterns(self, pats):
        """:meth:`predict` from :meth:`patterns`' output (the queries applied; linear)."""
        if callable(self.loss):
            return pats
        if isinstance(self.meas, RoutedMeasurements):
            return tuple(self.meas.predictions_from_patterns(list(pats)))
        return tuple(_losses.predictions_from_patterns(list(pats), self.meas))

    def expand(self, base: dict, params) -> dict:
        """The potentials ``base + P^T params`` (oracle blocks), ``P`` the linear map :meth:`patterns`.

        ``P^T`` broadcasts each measured table into its host clique's table and sums, so the potentials
        differ from ``base`` by a sum of functions of the measured cliques, whatever the rounding of
        ``params``: a fit that moves only ``params`` keeps its distribution in the exponential family of
        the measured cliques (McKenna, Sheldon & Miklau, ICML 2019, Section 3), whose member matching
        the fitted marginals is their maximum-entropy distribution. Updating the junction tree's tables
        in place instead lets each step's rounding add interactions no measurement constrains, and over
        thousands of float32 steps (momentum amplifies them) they move the unmeasured marginals.

        Args:
            base: the starting potentials (oracle blocks; may hold ``-inf``, structural zeros).
            params: parameters shaped like :meth:`patterns`' output.
        """
        if callable(self.loss):  # a callable loss reads any marginal: its parameters are the blocks
            return {k: base[k] + params[k] for k in base}
        spread = jax.linear_transpose(self.patterns, base)(params)[0]
        return {k: base[k] + spread[k] for k in base}

    def project_rows(self, params):
        """:meth:`patterns`-shaped parameters projected onto their queries' row spaces (``Q^+ Q`` per measured
        table; :func:`pgmjax.estimation.losses.project_patterns`).

        Where a query is rank-deficient (a Kronecker factor that merges values, fewer dense rows than cells) a
        measured table's parameters span more than the exponential family of the queries: a direction in a
        query's null space leaves the loss unchanged, yet an estimator that steps along the loss's gradient
        with respect to the tables (L-BFGS: that gradient is weighted by the model's covariance, which maps the
        row space out of itself) moves there and leaves the maximum-entropy family. Its potentials formed
        from the projection cannot. Marginals (identity queries) and a callable loss's tables are unchanged.
        """
        if callable(self.loss) or isinstance(self.meas, RoutedMeasurements):  # the routed ones are marginals
            return params
        return tuple(_losses.project_patterns(list(params), self.meas))

    def pattern_grad(self, pred_grad, like):
        """The loss's gradient with respect to :meth:`patterns` from one with respect to :meth:`predict`
        (``Q^T g`` per measurement; ``like``: any value shaped like :meth:`patterns`' output)."""
        if callable(self.loss):
            return pred_grad
        return jax.linear_transpose(self.predict_from_patterns, like)(pred_grad)[0]

    def center(self, params):
        """``params`` less a constant per measured table, so each table's largest entry is 0: the model
        :meth:`expand` gives is unchanged (:func:`pgmjax.estimation.losses.center_patterns`)."""
        if callable(self.loss):
            return {k: t - v for (k, t), v in zip(params.items(), self.tops(params).values())}
        if isinstance(self.meas, RoutedMeasurements):
            return tuple(self.meas.center(list(params)))
        return tuple(_losses.center_patterns(list(params), self.meas))

    def canonical(self, blocks: dict) -> dict:
        """Finite tables (a gradient or a sum of gradients) in the junction tree's canonical gauge
        (:func:`pgmjax.graph.gauge.canonical`): the same distribution, no drift along separator transfers."""
        return self.oracle.canonical(self.plan, blocks)

    def tops(self, blocks: dict) -> dict:
        """Each junction-tree clique's largest finite entry of ``blocks`` (oracle layout), broadcastable against its
        block (:func:`pgmjax.graph.marginal_oracle.row_tops`; for a size-class plan, per cell)."""
        return self.oracle.tops(self.plan, blocks)

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

