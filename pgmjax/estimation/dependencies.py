"""A functional dependency fitted at the cost of its source: the determined attribute leaves the fit.

Under ``target = mapping[source]`` (:meth:`pgmjax.Constraint.determines`) every distribution on the allowed
cells is a distribution of the other attributes with the target read off the source. So the fit runs without
the target: a measurement of a clique holding it becomes one of the same answers on the clique with the source
in its place (its query composed with the mapping: a column gather, never a product table), other constraints
and cliques likewise, and the fitted model gets the target back as one leaf clique ``(source, target)`` whose
potentials are ``0`` on the mapping's cells and ``-inf`` elsewhere. The distribution is the same as that of a
fit with the ``(source, target)`` clique masked (:mod:`pgmjax.queries.constraints`), but the iterations'
messages never touch a table of ``|source| x |target|`` cells (nor a larger one, where the masked clique would
join a loop of the target's measured cliques): they cost what the source's tables cost.

The maximum-entropy statement is unchanged: the map from distributions over the remaining attributes to
distributions on the allowed cells is a bijection that preserves entropy (the target adds no uncertainty), so
the maximum-entropy fit without the target is the maximum-entropy fit with it (McKenna, Sheldon & Miklau,
"Graphical-model based estimation and inference for differential privacy", ICML 2019, Section 3).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..data.domain import Domain
from ..graph import oracle
from ..model.fit_report import Fit, FitReport
from ..model.graphical_model import GraphicalModel
from ..queries.constraints import Constraint
from ..queries.linear import LinearQuery
from ..queries.measurement import Measurement
from .inputs import report_forbidden_mass


def can_eliminate(constraints, oracle_choice, loss, devices, program) -> Constraint | None:
    """The first functional dependency to fit by elimination, or None: the exact oracle on one device, a
    measurement loss and a program that reads other queries than marginals (a callable loss may read any
    marginal of the target; the approximate oracle's regions, a split model and the size-class program, which
    reads marginals only, keep the masked clique instead)."""
    if oracle_choice != "exact" or callable(loss) or devices != 1 or program == "size_class":
        return None
    return next((c for c in constraints if c.kind == "determines"), None)


def _gather_index(clique, new_clique, domain: Domain, source: str, target: str, mapping) -> np.ndarray:
    """For each cell of ``new_clique`` (row-major), the cell of ``clique`` it stands for: the target's value read
    off the source's."""
    grid = np.indices(domain.shape_of(new_clique)).reshape(len(new_clique), -1)
    values = {a: grid[i] for i, a in enumerate(new_clique)}
    values[target] = np.asarray(mapping)[values[source]]
    return np.ravel_multi_index(tuple(values[a] for a in clique), domain.shape_of(clique))


def rewrite_measurement(m: Measurement, domain: Domain, dep: Constraint, caller: str) -> Measurement:
    """``m`` as a measurement without the dependency's target: the same answers and noise, its query composed
    with the mapping (see the module docstring)."""
    source, target = dep.attributes
    f = dep.cells
    if target not in m.clique:
        return m
    clique = m.clique
    if source not in clique:  # the target's axis becomes the source's, its factor's columns gathered
        new = tuple(source if a == target else a for a in clique)
        if m.kind in ("identity", "kron"):
            factors = [None] * len(clique) if m.kind == "identity" else list(m.query)
            i = clique.index(target)
            q = np.eye(domain[target]) if factors[i] is None else np.asarray(factors[i], np.float64)
            factors[i] = q[:, f]
            return Measurement(new, np.asarray(m.y), m.stddev, noise=m.noise,
                               query=LinearQuery.kron(factors, sizes=domain.shape_of(new)))
    else:  # the two axes merge into the source's: rows (source row, target row), columns the source's values
        new = tuple(a for a in clique if a != target)
        if m.kind in ("identity", "kron"):
            factors = [None] * len(clique) if m.kind == "identity" else list(m.query)
            i, j = clique.index(source), clique.index(target)
            q_s = np.eye(domain[source]) if factors[i] is None else np.asarray(factors[i], np.float64)
            q_t = np.eye(domain[target]) if factors[j] is None else np.asarray(factors[j], np.float64)
            merged = (q_s[:, None, :] * q_t[None, :, f]).reshape(q_s.shape[0] * q_t.shape[0], domain[source])
            rows = domain.shape_of(clique) if m.kind == "identity" else m.linear.with_sizes(domain.shape_of(clique)).row_shape
            y = np.asarray(m.y, np.float64).reshape(rows)
            sd = np.broadcast_to(np.asarray(m.stddev, np.float64), (m.rows,)).reshape(rows)
            at = new.index(source) + 1  # the target's rows right after the source's, so the two read as one axis
            y, sd = np.moveaxis(y, j, at), np.moveaxis(sd, j, at)
            sd = sd.reshape(-1) if np.ndim(m.stddev) else m.stddev
            new_factors = [merged if a == source else factors[clique.index(a)] for a in new]
            return Measurement(new, y.reshape(-1), sd, noise=m.noise,
                               query=LinearQuery.kron(new_factors, sizes=domain.shape_of(new)))
    if m.kind == "dense":
        q = np.asarray(m.query, np.float64)
        return Measurement(new, np.asarray(m.y), m.stddev, noise=m.noise,
                           query=q[:, _gather_index(clique, new, domain, source, target, f)])
    raise ValueError(f"{caller}: the measurement on {clique} has a {m.kind} query, which the functional dependency "
                     f"{source!r} -> {target!r} cannot rewrite; give its queries as a dense or Kronecker query")


def rewrite_constraint(c: Constraint, domain: Domain, dep: Constraint) -> Constraint:
    """``c`` without the dependency's target (its allowed table read at the target's value off the source's)."""
    source, target = dep.attributes
    if target not in c.attributes:
        return c
    if c.kind == "determines" and c.attributes[0] == target and source != c.attributes[1]:
        return Constraint.determines(source, c.attributes[1], c.cells[dep.cells])  # a chain: composed mappings
    new = tuple(source if a == target else a for a in c.attributes if not (a == target and source in c.attributes))
    allowed = c.allowed(domain, checked=True).reshape(-1)[_gather_index(c.attributes, new, domain, source, target, dep.cells)]
    return Constraint.allow(new, np.argwhere(allowed.reshape(domain.shape_of(new))))


def reduce_warm_start(warm: GraphicalModel, domain: Domain, reduced: Domain, dep: Constraint, caller: str):
    """The warm start without the target: a model fitted under the same dependency (the target only in its
    ``(source, target)`` clique), that clique dropped."""
    if warm is None:
        return None
    source, target = dep.attributes
    held = [c for c in warm.cliques if target in c]
    if any(set(c) - {source, target} for c in held):
        raise ValueError(f"{caller}: the warm start models {target!r} in {held}; under the functional dependency "
                         f"{source!r} -> {target!r} only a model fitted under it (holding {target!r} in "
                         f"({source!r}, {target!r}) alone) can be a warm start")
    tables = {c: t for c, t in warm.potentials.items() if target not in c}
    cliques = [c for c in tables if len(c) > 1] or [(source,)]
    plan = oracle.make_plan(reduced, cliques)
    return GraphicalModel(plan, plan.from_tables(tables, warm.dtype), warm.total)


def attach_target(fit: Fit, domain: Domain, dep: Constraint) -> Fit:
    """The fit over the whole domain: the model's potentials plus the leaf clique ``(source, target)`` holding the
    dependency's mask; the report's ``info`` saying which targets the fit ran without (``"eliminated"``) and on
    which cliques (``"fit_cliques"``)."""
    model, report = fit
    tables = dict(model.potentials)
    tables[dep.attributes] = dep.log_mask(domain)
    plan = oracle.make_plan(domain, list(model.cliques) + [dep.attributes])
    info = dict(report.info)
    info.setdefault("fit_cliques", list(model.cliques))  # the innermost fit's tables: what its messages cost
    info["eliminated"] = [dep] + info.get("eliminated", [])  # outermost first: the fit ran without these targets
    return Fit(GraphicalModel(plan, plan.from_tables(tables, model.dtype), model.total),
               dataclasses.replace(report, info=info))


def fit_without_target(dep: Constraint, domain: Domain, measurements, constraints, cliques, warm_start, fit, caller: str):
    """Fit with ``dep``'s target eliminated, then put it back (the module docstring).

    Args:
        dep: the functional dependency (checked).
        domain, measurements, constraints, cliques, warm_start: the fit's checked inputs.
        fit: ``fit(domain, measurements, constraints, cliques, warm model) -> Fit``, the fit without the target.
        caller: the function named in messages.
    """
    source, target = dep.attributes
    reduced = Domain({a: domain[a] for a in domain.attributes if a != target})
    ms = [rewrite_measurement(m, domain, dep, caller) for m in measurements]
    cons = [rewrite_constraint(c, domain, dep) for c in constraints if c is not dep]
    cls = [tuple(dict.fromkeys(source if a == target else a for a in c)) for c in cliques]
    warm = reduce_warm_start(warm_start, domain, reduced, dep, caller)
    return attach_target(fit(reduced, ms, cons, cls, warm), domain, dep)


def estimate_without_target(dep: Constraint, domain: Domain, measurements, constraints, cliques, warm, public_cliques,
                            again, caller: str) -> Fit:
    """:func:`pgmjax.estimate`'s fit under the functional dependency ``dep``, its target eliminated
    (:func:`fit_without_target`), with the report's ``info`` saying what the measurements put on the cells the
    target's constraints forbid (which the fit without the target cannot read) and the public cliques.

    Args:
        dep, domain, measurements, constraints, cliques: the fit's checked inputs.
        warm: ``(model, step size)`` of the checked warm start (:func:`pgmjax.estimation.inputs.check_warm_start`).
        public_cliques: the public marginals' cliques (already among ``measurements``).
        again: ``again(domain, measurements, *, constraints, cliques, warm_start) -> Fit``: :func:`pgmjax.estimate`
            with the caller's other options.
        caller: the function named in messages.
    """
    warm_start, warm_step = warm

    def fit(reduced, ms, cons, cls, reduced_warm):
        return again(reduced, ms, constraints=cons, cliques=cls,
                     warm_start=None if reduced_warm is None else Fit(reduced_warm, FitReport(step_size=warm_step)))

    model, report = fit_without_target(dep, domain, measurements, constraints, cliques, warm_start, fit, caller)
    held = [c for c in constraints if dep.attributes[1] in c.attributes]
    found = report.info.get("forbidden_mass", []) + report_forbidden_mass(domain, measurements, held, caller, stacklevel=4)
    info = dict(report.info, forbidden_mass=found, **({"public": public_cliques} if public_cliques else {}))
    return Fit(model, dataclasses.replace(report, info=info))
