"""``mbi.estimation.mirror_descent``, backed by :func:`pgmjax.estimate`."""

from __future__ import annotations

import warnings

import numpy as np

from ...estimation.estimate import estimate
from ...graph.junction import maximal_cliques
from ...queries.measurement import Measurement
from .markov_random_field import MarkovRandomField
from .values import CliqueVector, Domain, Factor, LinearMeasurement

__all__ = ["mirror_descent"]


def mirror_descent(domain: Domain, loss_fn, *, known_total=None, potentials=None, marginal_oracle=None,
                   iters: int = 1000, stateful: bool = False, stepsize=None, callback_fn=None, mesh=None):
    """Fit the model that best explains noisy marginals (``mbi.estimation.mirror_descent``, version 1.1's
    signature), with :func:`pgmjax.estimate`.

    The loss is ``mbi``'s for a list of measurements, ``sum 1/2 ||(y - mu_C) / stddev||^2`` (McKenna, Sheldon &
    Miklau, "Graphical-model based estimation and inference for differential privacy", ICML 2019, Problem 1), and
    the total is ``known_total`` or, without it, the inverse-variance estimate from the measurements (as ``mbi``
    estimates it). pgmjax runs its own exact oracle and step-size search: ``marginal_oracle``, ``stateful``,
    ``stepsize`` and ``mesh`` are accepted and not used.

    Args:
        domain: the domain.
        loss_fn: a list of :class:`~pgmjax.compat.mbi.values.LinearMeasurement` of marginals.
        known_total: the number of records, if known.
        potentials: a previous model's potentials (``model.potentials``): the fit starts from that model.
        iters: the most iterations.

    Returns:
        A :class:`~pgmjax.compat.mbi.markov_random_field.MarkovRandomField`.

    Raises:
        NotImplementedError: what this door does not cover: a loss function object, a query other than the marginal
            itself, a callback, potentials that did not come from a model fitted here.
    """
    if not isinstance(loss_fn, (list, tuple)) or not all(isinstance(m, LinearMeasurement) for m in loss_fn):
        raise NotImplementedError("pgmjax.compat.mbi: mirror_descent takes a list of LinearMeasurement; a "
                                  f"{type(loss_fn).__name__} loss is not covered")
    odd = [m.clique for m in loss_fn if m.query is not Factor.datavector]
    if odd:
        raise NotImplementedError(f"pgmjax.compat.mbi: measurements of the marginal itself only; {odd} have other queries")
    if callback_fn is not None:
        raise NotImplementedError("pgmjax.compat.mbi: callback_fn is not covered (pgmjax.estimate's callback is)")
    warm = None
    if potentials is not None:
        if not isinstance(potentials, CliqueVector) or potentials.model is None:
            raise NotImplementedError("pgmjax.compat.mbi: potentials= must be a model's .potentials from this door")
        warm = potentials.model
    pgm_domain = domain.to_pgmjax()
    measurements = [Measurement(m.clique, np.asarray(m.noisy_measurement, np.float64).reshape(-1), float(m.stddev))
                    for m in loss_fn]
    with warnings.catch_warnings():  # a fit cut short at ``iters`` is what mbi returns too
        warnings.simplefilter("ignore", RuntimeWarning)
        model, report = estimate(pgm_domain, measurements, iters=int(iters), report=True,
                                 total=None if known_total is None else float(known_total), warm_start=warm)
    cliques = maximal_cliques(pgm_domain, [m.clique for m in loss_fn] + (list(potentials.cliques) if potentials is not None else []))
    return MarkovRandomField(model, domain, cliques, report)
