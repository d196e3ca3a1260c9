"""Is the L1 fit of U4's Laplace/L1 setting unique? An exact linear program per noise draw.

U4 (bench/uncertainty_u4.py): a 6-attribute tree, every one-way marginal and the five edge marginals
measured with Laplace noise, the fit minimising ``sum_i |Q_i mu - y_i| / sigma_i`` over consistent marginals
with the total fixed at its linear estimate (the fit's default ``total=None``). On a junction tree the
consistent nonnegative clique tables are exactly the marginal polytope (Wainwright & Jordan 2008, section
4.1), so the fit is the linear program

    min sum |t|  s.t.  t >= +-(Q mu - y) / sigma,  mu >= 0,  tables agree on separators,  sum = N_hat

(solved by HiGHS through ``scipy.optimize.linprog``). Its optimal set need not be a point: an attribute's
marginal is measured by its one-way table and by every edge table that holds it (2 to 4 equally weighted
measurements), and an L1 fit of an even number of equally weighted measurements is any point between the
middle two (a median). For every draw this script solves the LP, then minimises and maximises each answer
that is linear in one clique table (edge cells, range queries inside one edge) over the optimal set
(objective within 1e-9 relative of the optimum): the width of that range, in units of the noise sd, says how
far apart two exact L1 fits can answer.

Usage: nice python -m bench.uncertainty_l1_lp [--R 20]
Writes bench/results/papers/uncertainty_l1_lp_cpu.{json,md}.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np
from scipy.optimize import linprog
from scipy.sparse import csr_matrix, hstack, vstack, identity

from bench import schema
from bench.uncertainty_u4 import EDGES, u4_design

from pgmjax.queries.measurement import total_rule  # noqa: E402
from pgmjax.uncertainty.bootstrap import draw_answers  # noqa: E402


def build(data, ms):
    """The LP's matrices: variables ``[mu (edge tables, flattened), t (one per measured row)]``."""
    names = list(data.domain)
    sizes = [data.domain[a] for a in names]
    cliques = [(names[p], names[c]) for p, c in EDGES]
    offs = np.cumsum([0] + [sizes[names.index(a)] * sizes[names.index(b)] for a, b in cliques])
    nmu = int(offs[-1])

    def marg_matrix(j, attr):
        """Rows: values of ``attr``; columns: mu; the marginal of clique j on attr."""
        a, b = cliques[j]
        sa, sb = sizes[names.index(a)], sizes[names.index(b)]
        m = np.zeros((sizes[names.index(attr)], nmu))
        for i in range(sa):
            for k in range(sb):
                m[i if attr == a else k, offs[j] + i * sb + k] = 1.0
        return m

    holder = {}
    for j, (a, b) in enumerate(cliques):
        holder.setdefault(a, j)
        holder.setdefault(b, j)
    qs = []
    for m in ms:
        if len(m.clique) == 1:
            qs.append(marg_matrix(holder[m.clique[0]], m.clique[0]))
        else:
            j = cliques.index(tuple(m.clique))
            q = np.zeros((m.rows, nmu))
            q[:, offs[j]:offs[j + 1]] = np.eye(m.rows)
            qs.append(q)
    q = np.vstack(qs)
    eq = []
    for j, (a, b) in enumerate(cliques):
        for jj in range(j):
            for attr in set(cliques[j]) & set(cliques[jj]):
                eq.append(marg_matrix(j, attr) - marg_matrix(jj, attr))
    aeq = np.vstack(eq + [np.concatenate([np.ones(offs[1]), np.zeros(nmu - offs[1])])[None]])
    return q, aeq, nmu, cliques, offs


def linear_target(target, data, cliques, offs, nmu):
    """The row vector of a target inside one edge table, or None."""
    attrs = set(target)
    for j, (a, b) in enumerate(cliques):
        if attrs <= {a, b}:
            sa, sb = data.domain[a], data.domain[b]
            fa = np.asarray(target[a].matrix(sa), np.float64).reshape(-1, sa)[0] if a in target else np.ones(sa)
            fb = np.asarray(target[b].matrix(sb), np.float64).reshape(-1, sb)[0] if b in target else np.ones(sb)
            v = np.zeros(nmu)
            v[offs[j]:offs[j + 1]] = np.outer(fa, fb).ravel()
            return v
    return None


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--R", type=int, default=20)
    ap.add_argument("--out", default="uncertainty_l1_lp_cpu", help="result name under bench/results/papers/ (or a path)")
    args = ap.parse_args(argv)
    t_all, c_all = time.perf_counter(), time.process_time()
    data, ms, means, base, targets, kinds, truths, loss = u4_design("laplace-l1")
    sigma = float(ms[0].row_stddev()[0])
    q, aeq, nmu, cliques, offs = build(data, ms)
    rows = q.shape[0]
    w, _ = total_rule(ms)
    ys = draw_answers(means, ms, args.R, jax.random.key(0))
    y = np.concatenate(ys, axis=1)  # (R, rows)
    lin = [(i, linear_target(t, data, cliques, offs, nmu)) for i, t in enumerate(targets)]
    lin = [(i, v) for i, v in lin if v is not None]
    qs, inv = csr_matrix(q), 1.0 / sigma
    # t >= (Q mu - y)/sigma  ->  Q mu / sigma - t <= y / sigma ;  t >= -(Q mu - y)/sigma -> -Q mu/sigma - t <= -y/sigma
    aub = vstack([hstack([qs * inv, -identity(rows)]), hstack([-qs * inv, -identity(rows)])]).tocsr()
    aeq_full = hstack([csr_matrix(aeq), csr_matrix((aeq.shape[0], rows))]).tocsr()
    c = np.concatenate([np.zeros(nmu), np.ones(rows)])
    widths = np.zeros((args.R, len(lin)))
    optimal, statuses = [], []
    for r in range(args.R):
        n_hat = max(float(w @ y[r]), 1.0)
        beq = np.concatenate([np.zeros(aeq.shape[0] - 1), [n_hat]])
        bub = np.concatenate([y[r] * inv, -y[r] * inv])
        sol = linprog(c, A_ub=aub, b_ub=bub, A_eq=aeq_full, b_eq=beq, bounds=(0, None), method="highs")
        statuses.append(sol.status)
        f = sol.fun
        optimal.append(f)
        aub2 = vstack([aub, csr_matrix(c[None])]).tocsr()
        bub2 = np.concatenate([bub, [f * (1 + 1e-9) + 1e-9]])
        for j, (_, v) in enumerate(lin):
            obj = np.concatenate([v, np.zeros(rows)])
            lo = linprog(obj, A_ub=aub2, b_ub=bub2, A_eq=aeq_full, b_eq=beq, bounds=(0, None), method="highs")
            hi = linprog(-obj, A_ub=aub2, b_ub=bub2, A_eq=aeq_full, b_eq=beq, bounds=(0, None), method="highs")
            widths[r, j] = (-hi.fun - lo.fun) / sigma
    out = {
        "meta": schema.run_meta("bench.uncertainty_l1_lp", argv, backend=False, extra=("scipy",)),
        "R": args.R, "sigma": sigma, "statuses": statuses,
        "targets": [{"index": i, "kind": kinds[i]} for i, _ in lin],
        "width_over_sigma": widths.tolist(),
        "seconds": {"wall": time.perf_counter() - t_all, "cpu": time.process_time() - c_all},
    }
    schema.write_result("papers", args.out, None, out["meta"], page=page(out),
                        **{k: v for k, v in out.items() if k != "meta"})


def page(out) -> list[str]:
    """The result's Markdown page."""
    wd = np.array(out["width_over_sigma"])
    lines = ["# U4 Laplace/L1: the optimal set of the exact L1 fit", "",
             *schema.header_lines(schema.meta_of(out)),
             f"R = {out['R']} Laplace noise draws of U4's design (sigma = {out['sigma']:.2f}); per draw the L1 fit as a linear "
             "program (HiGHS), then each answer linear in one edge table minimised and maximised over the optimal set. "
             f"Solver status 0 (optimal) in {sum(s == 0 for s in out['statuses'])} of {len(out['statuses'])} draws.", "",
             "| target | kind | width / sigma: median over draws | max | draws with width > 0.01 sigma |", "|---|---|---|---|---|"]
    for j, t in enumerate(out["targets"]):
        lines.append(f"| {t['index']} | {t['kind']} | {np.median(wd[:, j]):.2f} | {wd[:, j].max():.2f} | {int(np.sum(wd[:, j] > 0.01))} |")
    lines += ["", f"Run time: {out['seconds']['wall']:.1f} s wall, {out['seconds']['cpu']:.1f} s CPU.", ""]
    return lines


if __name__ == "__main__":
    main()
