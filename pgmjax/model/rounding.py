"""Controlled rounding of a clique table to integer record counts.

The low-variance synthetic data of :mod:`pgmjax.model.sampling` needs integer counts ``n(c)`` for every
cell of every junction-tree clique such that (1) the counts of a clique agree exactly with the
counts already fixed for its parent separator (the records exist), (2) every cell is the floor or
the ceiling of its target ``n p(c)``, and (3) the counts of each child's separator, summed over the
clique's cells, are also the floor or ceiling of their targets, so the next clique down starts from
well-rounded group sizes.

(2) and (3) with exact row totals (1) form a 0/1 programme: every cell variable ``x_c`` (round
up or not) appears in one row constraint and in one column constraint per child separator. With a
single child separator the constraint matrix is the incidence matrix of a bipartite graph, which
is totally unimodular, so the linear programme's vertices are integral (the classical argument for
controlled rounding of two-way tables; Cox, "A constructive procedure for unbiased controlled
rounding", JASA 1987). With several child separators integrality is no longer automatic: the
linear relaxation is solved first, the cells its solution leaves integral are fixed, and the
mixed-integer solver completes the few it leaves fractional at the least column slack (relax and
fix); it gets a time limit and, failing that, the first child separator is kept alone. Column
constraints are soft (an L1 slack with a large penalty), so the problem is always feasible; the
slack used is reported. Tables with more fractional cells than
``max_milp_cells`` are not given to the solver: their rows are filled by unbiased systematic
sampling (each cell rounded up with probability equal to its fraction), so their children's
separator counts are off by sampling error rather than by at most 1. (A maximum-flow solution
scales but is not random: it rounds whole regions of the table the same way, and the errors it
leaves in coarser margins are far larger than sampling error.)

Which feasible rounding is returned: the objective adds ``sum_c (u_c - f_c) x_c`` with ``f_c`` the
fractional part and ``u_c`` uniform from the caller's generator, so cells with large fractions tend
to round up, like independent randomised rounding projected onto the constraints (with several child
separators this decides every cell the relaxation leaves whole; the few it leaves fractional are
completed by feasibility alone). The rounding is therefore random but not exactly unbiased cell by
cell; its errors are bounded instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["controlled_round", "round_to_total"]

_SLACK_PENALTY = 1e4
_FRACTION_TOL = 1e-9


def round_to_total(targets: np.ndarray, total: int) -> np.ndarray:
    """Largest-remainder rounding of non-negative ``targets`` rescaled to sum to ``total``.

    Args:
        targets: non-negative floats (not all zero unless ``total`` is 0).
        total: the integer the counts must sum to.

    Returns:
        Integer counts summing to ``total``, each the floor or ceiling of its rescaled target.

    Example:
        >>> round_to_total(np.array([0.5, 1.5, 1.0]), 3)
        array([1, 1, 1])
    """
    targets = np.asarray(targets, np.float64)
    if total == 0:
        return np.zeros(targets.shape, np.int64)
    if targets.sum() <= 0:  # nothing to go by: spread evenly
        targets = np.ones(targets.shape)
    s = targets.sum()
    scaled = targets * (total / s)
    base = np.floor(scaled).astype(np.int64)
    rest = int(total - base.sum())
    if rest > 0:
        frac = scaled - base
        base[np.argsort(-frac, kind="stable")[:rest]] += 1
    return base


def controlled_round(
    targets: np.ndarray,
    rows: np.ndarray,
    row_totals: np.ndarray,
    families: Sequence[np.ndarray] = (),
    *,
    rng: np.random.Generator,
    time_limit: float = 20.0,
    max_milp_cells: int = 20_000,
) -> tuple[np.ndarray, dict]:
    """Round cell targets to integers with exact row totals and near-exact column totals.

    Args:
        targets: ``(m,)`` non-negative cell targets; within a row they sum to that row's target,
            whose floor or ceiling ``row_totals`` should be.
        rows: ``(m,)`` row index of every cell (``0..R-1``).
        row_totals: ``(R,)`` integers every row's counts must sum to exactly.
        families: column partitions, each an ``(m,)`` integer array of column ids; the counts summed
            over a column should be the floor or ceiling of the targets summed over it.
        rng: the source of the random tie-breaking.
        time_limit: seconds for the solver when several families make the problem non-unimodular.
        max_milp_cells: above this many fractional cells the families are not controlled: each row's
            extra units go to its cells by systematic sampling with probabilities equal to their
            fractions (unbiased, rows exact), since the solver does not scale to million-cell cliques.

    Returns:
        ``(counts, info)``: ``(m,)`` int64 counts with exact row sums, and a dict with
        ``max_cell_dev``, ``max_column_dev`` (over all families), ``slack`` (total column
        violation beyond floor/ceiling), ``families_kept`` and ``fallback_rows`` (rows whose total was
        outside what floor/ceiling cells can reach, rounded alone by largest remainder).

    Example:
        >>> t = np.array([0.5, 0.5, 0.5, 0.5]); rows = np.array([0, 0, 1, 1])
        >>> counts, _ = controlled_round(t, rows, np.array([1, 1]), [np.array([0, 1, 0, 1])],
        ...                              rng=np.random.default_rng(0))
        >>> counts.reshape(2, 2).sum(0).tolist()   # each column gets exactly one
        [1, 1]
    """
    targets = np.maximum(np.asarray(targets, np.float64), 0.0)
    rows = np.asarray(rows, np.int64)
    row_totals = np.asarray(row_totals, np.int64)
    m, n_rows = targets.size, row_totals.size
    base = np.floor(targets + _FRACTION_TOL).astype(np.int64)
    frac = np.where(targets - base > _FRACTION_TOL, targets - base, 0.0)
    need = row_totals - np.bincount(rows, weights=base, minlength=n_rows).astype(np.int64)
    choices = np.bincount(rows, weights=(frac > 0), minlength=n_rows).astype(np.int64)
    bad_rows = np.flatnonzero((need < 0) | (need > choices))
    counts = base.copy()
    fixed = np.zeros(m, bool)
    for r in bad_rows:  # inconsistent inputs (e.g. an upstream slack); rounded on their own
        cells = np.flatnonzero(rows == r)
        counts[cells] = round_to_total(targets[cells], int(row_totals[r]))
        fixed[cells] = True
    free = np.flatnonzero((frac > 0) & ~fixed)
    kept = len(families)
    if free.size:
        if families and free.size <= max_milp_cells:
            x, kept = _solve(free, frac, rows, need, counts, fixed, targets, families, rng, time_limit)
        else:
            # Too large for the solver: rows exact, cells unbiased; ordering each row's cells by the
            # families' columns (coarsest first) makes every column's share of a row within 1.
            row_ids, row_of = np.unique(rows[free], return_inverse=True)
            by = sorted((fam[free] for fam in families), key=lambda f: -np.unique(f).size)
            x, kept = _systematic_pick(row_of, need[row_ids], frac[free], rng, by), 0
        counts[free] += x
    info = {"families_kept": kept, "fallback_rows": int(bad_rows.size)}
    info["max_cell_dev"] = float(np.abs(counts - targets).max()) if m else 0.0
    col_dev, slack = 0.0, 0.0
    for fam in families:
        got = np.bincount(fam, weights=counts)
        want = np.bincount(fam, weights=targets)
        dev = np.abs(got - want)
        col_dev = max(col_dev, float(dev.max()) if dev.size else 0.0)
        slack += float(np.maximum(got - np.ceil(want - _FRACTION_TOL), 0).sum())
        slack += float(np.maximum(np.floor(want + _FRACTION_TOL) - got, 0).sum())
    info["max_column_dev"], info["slack"] = col_dev, slack
    return counts, info


def _solve(free, frac, rows, need, counts, fixed, targets, families, rng, time_limit):
    """The 0/1 programme over the fractional cells; returns (x, number of families kept)."""
    from scipy import optimize, sparse  # here: scipy.optimize is slow to import (see pgmjax.preprocessing.private_bins)

    k = free.size
    row_ids, row_of = np.unique(rows[free], return_inverse=True)
    a_rows = sparse.csr_matrix((np.ones(k), (row_of, np.arange(k))), shape=(row_ids.size, k))
    cost = rng.uniform(size=k) - frac[free]
    for kept in range(len(families), -1, -1) if len(families) > 1 else (len(families),):
        blocks, lo, hi, n_slack = [a_rows], [need[row_ids]], [need[row_ids]], 0
        for fam in families[:kept]:
            want = np.bincount(fam, weights=targets)
            have = np.bincount(fam, weights=counts, minlength=want.size)  # floors and fixed rows
            cols, col_of = np.unique(fam[free], return_inverse=True)
            a = sparse.csr_matrix((np.ones(k), (col_of, np.arange(k))), shape=(cols.size, k))
            c_lo = np.floor(want[cols] + _FRACTION_TOL) - have[cols]
            c_hi = np.ceil(want[cols] - _FRACTION_TOL) - have[cols]
            # soft: lo - s_minus <= a x <= hi + s_plus, one slack pair per column
            eye = sparse.identity(cols.size, format="csr")
            blocks.append((a, eye, -eye, n_slack, cols.size))
            lo.append(c_lo)
            hi.append(c_hi)
            n_slack += 2 * cols.size
        n_var = k + n_slack
        mats = []
        for blk in blocks:
            if isinstance(blk, tuple):
                a, plus, minus, offset, width = blk
                pad_l = sparse.csr_matrix((a.shape[0], offset))
                pad_r = sparse.csr_matrix((a.shape[0], n_slack - offset - 2 * width))
                mats.append(sparse.hstack([a, pad_l, plus, minus, pad_r]))
            else:
                mats.append(sparse.hstack([blk, sparse.csr_matrix((blk.shape[0], n_slack))]))
        a_all = sparse.vstack(mats, format="csr")
        # slacks: s_minus enters with +1 (raises the lower side), s_plus with -1
        c = np.concatenate([cost, np.full(n_slack, _SLACK_PENALTY)])
        integrality = np.concatenate([np.ones(k), np.zeros(n_slack)])
        bounds = optimize.Bounds(np.zeros(n_var), np.concatenate([np.ones(k), np.full(n_slack, np.inf)]))
        cons = optimize.LinearConstraint(a_all, np.concatenate(lo), np.concatenate(hi))
        res = _relax_and_fix(c, cons, integrality, bounds, time_limit)
        if res.x is not None and res.status in (0, 1):
            x = np.rint(res.x[:k]).astype(np.int64)
            if np.array_equal(a_rows @ x, need[row_ids]):
                return x, kept
    # No family at all cannot fail (rows alone are feasible by construction), but be safe.
    x = np.zeros(k, np.int64)
    for i, r in enumerate(row_ids):
        cells = np.flatnonzero(row_of == i)
        x[cells[np.argsort(cost[cells])[: need[r]]]] = 1
    return x, 0


def _relax_and_fix(c, cons, integrality, bounds, time_limit):
    """The linear relaxation, then the least-slack completion of the cells it leaves fractional.

    The relaxation's vertex is integral on all but about a thousand of tens of thousands of cells (on all of them
    when the constraints are totally unimodular). Those are fixed, and the mixed-integer solver completes the rest
    at the least column slack, their random costs dropped: a feasible point of the whole programme, found in
    under a second where solving the whole programme took the solver's root processing seconds and could end at
    its time limit (a solution that then depends on the machine's speed). Where fixing leaves more slack than
    the relaxation's (rounded up), the whole programme is solved for the least slack, so a rounding within every
    column's floor and ceiling is found whenever one exists.

    Returns:
        scipy's ``OptimizeResult`` of the last programme solved, ``x`` over all variables.
    """
    from scipy import optimize  # here, as in _solve: scipy.optimize is slow to import

    options = {"time_limit": time_limit, "disp": False}
    relaxed = optimize.milp(c, constraints=cons, integrality=np.zeros_like(integrality), bounds=bounds,
                            options=options)
    if relaxed.status != 0:
        return optimize.milp(c, constraints=cons, integrality=integrality, bounds=bounds, options=options)
    whole = integrality > 0
    nearest = np.rint(relaxed.x)
    settled = whole & (np.abs(relaxed.x - nearest) <= 1e-7)
    if settled.sum() == whole.sum():
        relaxed.x = np.where(whole, nearest, relaxed.x)
        return relaxed
    lower, upper = bounds.lb.copy(), bounds.ub.copy()
    lower[settled] = upper[settled] = nearest[settled]
    # The rest only has to be feasible with the least slack: with the cells' random costs kept, proving the
    # optimum among near-ties took the solver's root seconds (up to its time limit) on a thousand cells.
    slack_cost = np.where(whole, 0.0, c)
    completed = optimize.milp(slack_cost, constraints=cons, integrality=integrality,
                              bounds=optimize.Bounds(lower, upper), options=options)
    # Slacks are whole at whole cells, so the relaxation's slack rounded up bounds every rounding's; where fixing
    # cost more than that, the whole programme is searched (for the least slack alone, which is quick).
    least = np.ceil(relaxed.x[~whole].sum() - 1e-6)
    if completed.x is not None and completed.x[~whole].sum() <= least + 1e-6:
        return completed
    return optimize.milp(slack_cost, constraints=cons, integrality=integrality, bounds=bounds, options=options)


def _pick(group_of: np.ndarray, take: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """0/1 over cells: in every group, the ``take[group]`` cells of lowest cost."""
    order = np.lexsort((cost, group_of))
    g = group_of[order]
    start = np.searchsorted(g, np.arange(take.size))
    rank = np.arange(g.size) - start[g]
    x = np.zeros(cost.size, np.int64)
    x[order[rank < take[g]]] = 1
    return x


def _systematic_pick(group_of: np.ndarray, take: np.ndarray, weight: np.ndarray, rng, sort_keys=()) -> np.ndarray:
    """0/1 over cells, ``take[g]`` in every group ``g``, each cell with probability proportional to its weight.

    Systematic sampling with unequal probabilities (Madow 1949): cell ``c`` of group ``g`` is
    chosen with probability ``take[g] w_c / sum_g w`` exactly; cells whose share would exceed 1 are
    taken for sure first. Cells are visited in the order of ``sort_keys`` (the last key is the
    primary one), ties in random order; any run of consecutive cells then gets the floor or the
    ceiling of its expected count.
    """
    x = np.zeros(weight.size, np.int64)
    left = take.astype(np.int64).copy()
    open_ = np.ones(weight.size, bool)
    for _ in range(64):  # sure picks: each pass removes at least one cell or ends
        w = np.where(open_, weight, 0.0)
        total = np.bincount(group_of, weights=w, minlength=take.size)
        share = np.divide(left, total, out=np.zeros(take.size), where=total > 0)[group_of] * w
        sure = open_ & (share >= 1 - 1e-12) & (left[group_of] > 0)
        if not sure.any():
            break
        x[sure] = 1
        open_ &= ~sure
        left -= np.bincount(group_of[sure], minlength=take.size)
    order = np.lexsort((rng.random(weight.size), *sort_keys, group_of))
    g, s = group_of[order], share[order]
    first = np.r_[True, g[1:] != g[:-1]]
    csum = np.cumsum(s)
    base = np.where(first, csum - s, 0.0)
    base = np.maximum.accumulate(np.where(first, base, -np.inf))
    upper = csum - base  # cumulative share within the group, ending at left[g]
    offset = rng.random(take.size)[g]
    hits = np.floor(upper - offset + 1e-9) - np.floor(upper - s - offset + 1e-9)
    chosen = order[(hits > 0) & open_[order]]
    x[chosen] = 1
    # Float round-off can leave a group one short or over; repair by share order.
    got = np.bincount(group_of, weights=x, minlength=take.size).astype(np.int64)
    if np.any(got != take):
        for grp in np.flatnonzero(got != take):
            cells = np.flatnonzero(group_of == grp)
            x[cells] = 0
            x[cells[np.argsort(-np.where(open_[cells], share[cells], 2.0))[: take[grp]]]] = 1
    return x
