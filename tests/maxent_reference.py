"""Float64 references on the full table for the maximum-entropy tests (NumPy only, tiny domains).

* :func:`ipf`: the maximum-entropy distribution with given clique marginals (iterative proportional fitting).
* :func:`optimum`: the minimum of an estimation loss over the marginal polytope (a float64 convex solve on the
  full table: the distribution is parametrised by the potentials of the measured cliques, which is exact because
  the minimiser's clique marginals are attained by an exponential-family member or its limit).
* :func:`full_table`, :func:`project`, :func:`l1_over_n`: helpers.

Used by ``tests/integration/test_invariants.py``, ``tests/integration/test_maxent_regressions.py`` and
``tests/graph/test_gauge.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.optimize


def project(table: np.ndarray, attrs: list[str], clique) -> np.ndarray:
    """The marginal of a full table (axes ``attrs``) on ``clique``, axes in the clique's order.

    Args:
        table: the full table, one axis per attribute of ``attrs``.
        attrs: the table's attribute order.
        clique: the attributes to keep.

    Returns:
        The marginal, shaped by the clique's sizes in its order.
    """
    keep = [attrs.index(a) for a in clique]
    drop = tuple(i for i in range(len(attrs)) if i not in keep)
    m = table.sum(axis=drop)
    # sum keeps the kept axes in the table's order; put them in the clique's order.
    order = sorted(keep)
    return np.transpose(m, [order.index(i) for i in keep])


def _expand(marginal: np.ndarray, attrs: list[str], clique) -> np.ndarray:
    """``marginal`` (clique's axes) broadcast to the full table's axes."""
    keep = [attrs.index(a) for a in clique]
    m = np.transpose(marginal, np.argsort(keep))
    shape = [1] * len(attrs)
    for i, k in zip(sorted(keep), m.shape):
        shape[i] = k
    return m.reshape(shape)


def ipf(attrs: list[str], sizes: list[int], targets: dict, tol: float = 1e-12, max_sweeps: int = 20_000,
        support: np.ndarray | None = None) -> np.ndarray:
    """The maximum-entropy distribution whose clique marginals are ``targets``, by IPF in float64.

    Each target is normalised to sum to one first. A float32 fit's clique marginals agree on the attributes
    their cliques share only to float32 rounding, and no distribution matches them all: IPF then settles
    within that disagreement of every target, so it stops once every target is matched to ``tol`` or to
    ten times the largest disagreement of two targets on shared attributes, whichever is larger.

    Args:
        attrs: attribute names, the table's axis order.
        sizes: their sizes.
        targets: ``{clique: marginal}`` (axes in the clique's order).
        tol: stop when every clique marginal is within ``tol`` (max cell) of its target, or within the
            targets' own disagreement (see above).
        max_sweeps: give up after this many sweeps.
        support: a boolean full table, the cells a record may lie on (default: all): IPF starts from the
            uniform distribution on them, so it returns the maximum-entropy distribution supported there.

    Returns:
        The full probability table (float64, axes ``attrs``).

    Raises:
        RuntimeError: IPF did not converge in ``max_sweeps`` (the reference would be wrong, not the model).
    """
    targets = {tuple(c): np.asarray(t, np.float64) / np.asarray(t, np.float64).sum() for c, t in targets.items()}
    clash = 0.0
    for (c, t), (d, u) in itertools.combinations(targets.items(), 2):
        shared = [a for a in c if a in d]
        if shared:
            sub = lambda cl, m: project(m, list(cl), shared)  # noqa: E731
            clash = max(clash, float(np.abs(sub(c, t) - sub(d, u)).max()))
    stop = max(tol, 10 * clash)
    p = np.full(sizes, 1.0 / np.prod(sizes)) if support is None else support / support.sum()
    for _ in range(max_sweeps):
        worst = 0.0
        for c, t in targets.items():
            cur = project(p, attrs, c)
            worst = max(worst, float(np.abs(cur - t).max()))
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(cur > 0, t / cur, 0.0)
            p = p * _expand(ratio, attrs, c)
        if worst < stop:
            return p
    raise RuntimeError(f"IPF: after {max_sweeps} sweeps a clique marginal is still {worst:.3g} from its target "
                       f"(stop at {stop:.3g})")


def distribution(potentials: dict, attrs: list[str], sizes: list[int]) -> np.ndarray:
    """The probability table of log-potentials ``{clique: table}`` (a model's :attr:`potentials`), in float64.

    This is what a model's potentials mean, evaluated exactly: it separates the quality of a float32 fit (its
    potentials) from the rounding of the float32 arithmetic that answers queries from them.
    """
    logp = np.zeros(sizes)
    for c, t in potentials.items():
        logp = logp + _expand(np.asarray(t, np.float64), attrs, c)
    p = np.exp(logp - logp.max())
    return p / p.sum()


def full_table(data: np.ndarray, sizes: list[int]) -> np.ndarray:
    """Counts of the records ``data`` (rows of integer codes) on the full table."""
    flat = np.ravel_multi_index(tuple(np.asarray(data).T), sizes)
    return np.bincount(flat, minlength=int(np.prod(sizes))).reshape(sizes).astype(np.float64)


def l1_over_n(a: np.ndarray, b: np.ndarray, n: float) -> float:
    """``||a - b||_1 / n``."""
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).sum() / n)


def _query_matrix(query, shape) -> np.ndarray:
    """The dense ``(rows, cells)`` matrix of a measurement's query (None, dense or Kronecker tuple)."""
    cells = int(np.prod(shape))
    if query is None:
        return np.eye(cells)
    if isinstance(query, (tuple, list)):
        q = np.ones((1, 1))
        for f in query:
            q = np.kron(q, np.asarray(f, np.float64))
        return q
    return np.asarray(query, np.float64)


def loss_value(marginals: dict, measurements, loss: str = "l2") -> float:
    """The estimation loss of clique marginals (``{clique: counts}``) on ``(clique, y, stddev, query)`` tuples.

    ``l2 = 1/2 sum ||(Q mu - y) / sigma||^2``, ``l1 = sum ||(Q mu - y) / sigma||_1`` (docs/guide.md, Losses).
    """
    total = 0.0
    for clique, y, stddev, query in measurements:
        mu = np.asarray(marginals[tuple(clique)], np.float64)
        r = (_query_matrix(query, mu.shape) @ mu.ravel() - np.ravel(y)) / np.asarray(stddev, np.float64)
        total += 0.5 * float(r @ r) if loss == "l2" else float(np.abs(r).sum())
    return total


def l1_lp(b: np.ndarray, c: np.ndarray, total: float, method: str = "highs", floor: float | None = None):
    """The L1 loss's minimum over full tables: the linear program ``min sum t, -t <= b p - c <= t, p >= 0,
    sum p = total`` (exact up to the solver's tolerance), or, with ``floor``, the most central of its optimal
    points.

    Args:
        b: ``(rows, cells)``, the whitened queries of the full table (``Q_i M_i / sigma_i`` stacked).
        c: ``(rows,)``, the whitened answers.
        total: the record count.
        method: scipy's ``linprog`` method (``"highs"``, ``"highs-ds"``, ``"highs-ipm"``).
        floor: ``(cells_of_interest, loss_bound)``: maximise the smallest of ``cells_of_interest @ p`` (a
            matrix: the measured cliques' marginal cells) among tables whose loss is at most ``loss_bound``.

    Returns:
        The solution's full table ``p`` (``(cells,)``).
    """
    rows, n = b.shape
    eye = np.eye(rows)
    a_ub = np.block([[b, -eye], [-b, -eye]])
    b_ub = np.concatenate([c, -c])
    a_eq = np.concatenate([np.ones(n), np.zeros(rows)])[None]
    cost = np.concatenate([np.zeros(n), np.ones(rows)])
    if floor is not None:  # one more variable, s: max s with marginal cells >= s and sum t <= bound
        m, bound = floor
        k = m.shape[0]
        a_ub = np.block([[a_ub, np.zeros((2 * rows, 1))], [-m, np.zeros((k, rows)), np.ones((k, 1))],
                         [np.zeros((1, n)), np.ones((1, rows)), np.zeros((1, 1))]])
        b_ub = np.concatenate([b_ub, np.zeros(k), [bound]])
        a_eq = np.concatenate([a_eq, np.zeros((1, 1))], axis=1)
        cost = np.concatenate([np.zeros(n + rows), [-1.0]])
    res = scipy.optimize.linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[total], bounds=(0, None), method=method)
    if res.status != 0:
        raise RuntimeError(f"l1_lp: {res.message}")
    return res.x[:n]


def _marginal_matrix(attrs: list[str], sizes: list[int], clique) -> np.ndarray:
    """``(clique cells, table cells)``: the 0/1 matrix taking the flattened full table to its marginal on
    ``clique`` (axes in the clique's order)."""
    cells = np.indices(sizes).reshape(len(sizes), -1)
    shape = [sizes[attrs.index(a)] for a in clique]
    rows = np.ravel_multi_index(tuple(cells[attrs.index(a)] for a in clique), shape)
    m = np.zeros((int(np.prod(shape)), cells.shape[1]))
    m[rows, np.arange(cells.shape[1])] = 1.0
    return m


def optimum(attrs: list[str], sizes: list[int], measurements, total: float, loss: str = "l2",
            support: np.ndarray | None = None) -> tuple[float, dict]:
    """The minimum of the loss over the marginal polytope scaled by ``total`` (float64, full table).

    The loss depends on the distribution only through the measured cliques' marginals, and every point of the
    marginal polytope's relative interior is attained by the exponential family of the measured cliques, so
    minimising over that family's potentials (L-BFGS on the full table, float64) reaches the infimum. The
    L1 loss's minimum is a linear program over the full table (:func:`l1_lp`: exact, where L-BFGS on a
    smoothed loss took 31 s on a 5-attribute cycle), and its point the most central optimal one (the
    smallest measured marginal cell as large as any optimum allows).

    Args:
        attrs: attribute order; sizes: their sizes.
        measurements: ``(clique, y, stddev, query)`` tuples.
        total: the record count the marginals sum to.
        loss: ``"l2"`` (with ``support``, a boolean full table: the distributions on those cells only) or ``"l1"``.

    Returns:
        ``(loss, marginals)``: the minimum (the exact loss of the feasible point found) and that point's
        measured clique marginals ``{clique: counts}`` (a zero cell says the minimum is on the polytope's
        boundary, where potentials are infinite and every method converges slowly).
    """
    cliques = sorted({tuple(m[0]) for m in measurements}, key=str)
    if loss == "l1":
        assert support is None, "the L1 reference has no support restriction"
        margs = {c: _marginal_matrix(attrs, sizes, c) for c in cliques}
        b = np.concatenate([_query_matrix(q, [sizes[attrs.index(a)] for a in c]) @ margs[tuple(c)]
                            / np.asarray(sd, np.float64).reshape(-1, 1) for c, y, sd, q in measurements])
        cv = np.concatenate([np.ravel(y) / np.broadcast_to(np.asarray(sd, np.float64), np.ravel(y).shape)
                             for c, y, sd, q in measurements])
        best = float(np.abs(b @ l1_lp(b, cv, total) - cv).sum())
        p = l1_lp(b, cv, total, floor=(np.concatenate(list(margs.values())), best * (1 + 1e-9) + 1e-12))
        table = p.reshape(sizes)
        return best, {c: project(table, attrs, c) for c in cliques}
    shapes = [tuple(sizes[attrs.index(a)] for a in c) for c in cliques]
    offs = np.cumsum([0] + [int(np.prod(s)) for s in shapes])
    prepared = [(cliques.index(tuple(c)), _query_matrix(q, shapes[cliques.index(tuple(c))]), np.ravel(y).astype(np.float64),
                 np.broadcast_to(np.asarray(s, np.float64), np.ravel(y).shape)) for c, y, s, q in measurements]

    def dist(theta):
        logp = np.zeros(sizes)
        for k, c in enumerate(cliques):
            logp = logp + _expand(theta[offs[k]:offs[k + 1]].reshape(shapes[k]), attrs, c)
        if support is not None:
            logp = np.where(support, logp, -np.inf)
        logp -= logp.max()
        p = np.exp(logp)
        return p / p.sum()

    def objective(theta):  # the L2 loss and its gradient in the potentials
        p = dist(theta)
        mus = [total * project(p, attrs, c).ravel() for c in cliques]
        grads = [np.zeros_like(m) for m in mus]
        val = 0.0
        for k, q, y, s in prepared:
            r = (q @ mus[k] - y) / s
            val += 0.5 * r @ r
            grads[k] += q.T @ (r / s)
        # d loss / d theta_C = sum over cliques of the covariance of the marginal indicators.
        gfull = np.zeros(sizes)
        for k, c in enumerate(cliques):
            gfull = gfull + _expand(grads[k].reshape(shapes[k]), attrs, c)
        w = total * p * gfull
        base = float((total * p * gfull).sum())
        out = np.concatenate([(project(w, attrs, c) - base * project(p, attrs, c)).ravel() for c in cliques])
        return val, out

    def exact(theta):
        p = dist(theta)
        marginals = {c: total * project(p, attrs, c) for c in cliques}
        return loss_value(marginals, measurements, loss), marginals

    res = scipy.optimize.minimize(objective, np.zeros(offs[-1]), jac=True, method="L-BFGS-B",
                                  options={"maxiter": 20_000, "maxcor": 30, "ftol": 1e-15, "gtol": 1e-11})
    return exact(res.x)
