"""Plots, tables and the discussion of ``bench/rr_experiments.py`` (see its docstring)."""

from __future__ import annotations

def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 3, figsize=(16, 9))
    A = results["heterogeneity"]
    for eps in sorted({r["epsilon"] for r in A}):
        rows = [r for r in A if r["epsilon"] == eps]
        ax[0, 0].plot([r["h"] for r in rows], [r["rr_clip"] for r in rows], "o-", label=f"RR (clip) eps={eps}")
        ax[0, 0].plot([r["h"] for r in rows], [r["laplace_per_group"] for r in rows], "x--", label=f"Laplace/group eps={eps}")
    ax[0, 0].set(xscale="log", yscale="log", xlabel="heterogeneity h", ylabel="worst-case abs. error (fraction)", title="A. heterogeneity (Fig. 2)")
    B = results["query_set_size"]
    for n in sorted({r["n"] for r in B}):
        rows = [r for r in B if r["n"] == n]
        ax[0, 1].plot([r["m"] for r in rows], [r["rr"] for r in rows], "o-", label=f"RR n={n}")
    rows = [r for r in B if r["n"] == max(x["n"] for x in B)]
    ax[0, 1].plot([r["m"] for r in rows], [r["laplace_per_query"] for r in rows], "x--", label="Laplace eps/m (largest n)")
    ax[0, 1].plot([r["m"] for r in rows], [r["laplace_histogram"] for r in rows], "s:", label="Laplace histogram (largest n)")
    ax[0, 1].set(xscale="log", yscale="log", xlabel="queries m", ylabel="worst-case abs. error", title=f"B. query-set size (Fig. 3), eps={B[0]['epsilon']}")
    C = results["table_size"]
    for eps in sorted({r["epsilon"] for r in C}):
        rows = [r for r in C if r["epsilon"] == eps]
        ax[0, 2].plot([r["n"] for r in rows], [r["mse"] for r in rows], "o-", label=f"measured eps={eps}")
        ax[0, 2].plot([r["n"] for r in rows], [r["bound"] for r in rows], "k:", alpha=0.6)
        ax[0, 2].plot([r["n"] for r in rows], [r["exact_variance"] for r in rows], "--", alpha=0.6, label=f"exact variance eps={eps}")
    ax[0, 2].set(xscale="log", yscale="log", xlabel="records n", ylabel="mean squared error", title="C. table size (Fig. 4); dotted: bound")
    D = results["cuts"]
    for eps in sorted({r["epsilon"] for r in D}):
        rows = [r for r in D if r["epsilon"] == eps]
        ax[1, 0].plot([r["vertices"] for r in rows], [100 * r["worst_relative_error"] for r in rows], "o-", label=f"eps={eps}")
    ax[1, 0].plot([577 * j for j in range(1, 8)], [10.4, 11.7, 8.7, 5.3, 4.7, 5.3, 5.4], "k*--", label="paper Table I")
    ax[1, 0].set(yscale="log", xlabel="|V|", ylabel="worst-case relative error (%)", title="D. cut queries (Fig. 5, Table I)")
    E = results["rr_pgm"]
    for j, name in enumerate(sorted({r["dataset"] for r in E})):
        rows = [r for r in E if r["dataset"] == name]
        a = ax[1, 1 + j]
        for key, style in [("naive", "s:"), ("raw", "x--"), ("raw_clipped", "^-."), ("rr_pgm", "o-")]:
            a.plot([r["epsilon"] for r in rows], [r[key] for r in rows], style, label=key)
        a.set(xscale="log", yscale="log", xlabel="epsilon (total, per-attribute split)", ylabel="mean 2-way TVD", title=f"E. RR+PGM vs raw, {name}")
    for a in ax.flat:
        a.legend(fontsize=7)
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(results) -> str:
    meta = dict(results["meta"])
    if isinstance(meta["machine"], dict):  # bench.schema's record
        meta["machine"] = f"{meta['machine']['cpu']}, {meta['machine']['cores']} cores. Commit {meta['commit']}"
    lines = [
        "# Randomized-response release with companion estimators (Wang, Ying & Zhang), in spirit",
        "",
        f"Machine: {meta['machine']}. Date: {meta['date']}. Versions: {meta['versions']}. Total run time {meta['seconds_total']:.0f} s "
        f"({', '.join(f'{k} {v:.0f} s' for k, v in meta['seconds'].items())}).",
        "",
        "Errors are on the paper's fraction scale (answers / n). Statistical queries on Adult's 5-valued `race` column "
        f"(n = {meta['column_records']}, K = 5); each configuration averaged over the runs given. Every release through "
        "`Accountant.randomized_response`, every Laplace baseline through `Accountant.laplace` (replace-one neighbours).",
        "",
        f"## A. Heterogeneity (Fig. 2): worst case over 20 queries, mean over {meta['runs']['A']} runs",
        "",
        "| eps | h | RR unbiased | RR clipped | Laplace histogram per group |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r['epsilon']} | {r['h']} | {r['rr']:.4f} | {r['rr_clip']:.4f} | {r['laplace_per_group']:.4f} |" for r in results["heterogeneity"]]
    lines += ["", f"## B. Query-set size (Fig. 3): worst case over m queries, mean over {meta['runs']['B']} runs", "",
              "| n | m | RR | Laplace eps/m per query | Laplace histogram |", "|---|---|---|---|---|"]
    lines += [f"| {r['n']} | {r['m']} | {r['rr']:.4f} | {r['laplace_per_query']:.4f} | {r['laplace_histogram']:.4f} |" for r in results["query_set_size"]]
    lines += ["", f"## C. Table size (Fig. 4): mean squared error of 100 queries, mean over {meta['runs']['C']} runs", "",
              "| eps | n | MSE measured | exact variance | bound c(K, eps)/n |", "|---|---|---|---|---|"]
    lines += [f"| {r['epsilon']} | {r['n']} | {r['mse']:.3e} | {r['exact_variance']:.3e} | {r['bound']:.3e} |" for r in results["table_size"]]
    lines += ["", "Log-log slope of the measured MSE against n: " + ", ".join(f"eps={k}: {v:.3f}" for k, v in results["table_size_slopes"].items()),
              "", f"## D. Cut queries (Fig. 5, Table I): generated graph, worst case over 20 half cuts, mean over {meta['runs']['D']} runs", "",
              "| \\|V\\| | edges | eps | mean cut | worst relative error | bound / cut | s per release |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['vertices']} | {r['edges']} | {r['epsilon']} | {r['mean_cut']:.0f} | {100 * r['worst_relative_error']:.2f}% | "
              f"{100 * r['bound_relative']:.2f}% | {r['seconds_per_release']:.2f} |" for r in results["cuts"]]
    lines += ["", "Paper's Table I (Facebook ego networks, eps not legible): 10.4%, 11.7%, 8.7%, 5.3%, 4.7%, 5.3%, 5.4% for |V| = 577 ... 4039.",
              "", "## E. RR+PGM vs the raw companion estimators (per-attribute release, eps split equally)", "",
              "Mean total-variation distance over all two-way marginals.", "",
              "| dataset | eps | eps per attribute | cliques fitted | released table as is | raw debiased | raw clipped | RR+PGM | run s |",
              "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['dataset']} | {r['epsilon']} | {r['epsilon_per_attribute']:.3g} | {r['cliques']} | {r['naive']:.4f} | {r['raw']:.4f} | "
              f"{r['raw_clipped']:.4f} | {r['rr_pgm']:.4f} | {r['seconds']:.1f} |" for r in results["rr_pgm"]]
    lines += ["", "![plots](rr_experiments_cpu.png)", ""]
    lines += discussion(results)
    return "\n".join(lines)


def discussion(results) -> list[str]:
    """Where the numbers differ from the paper's and why (values read from the results)."""
    A, B, C, D, E = (results[k] for k in ("heterogeneity", "query_set_size", "table_size", "cuts", "rr_pgm"))
    cross = {}
    for eps in sorted({r["epsilon"] for r in A}):
        rows = [r for r in A if r["epsilon"] == eps]
        cross[eps] = next((r["h"] for r in rows if r["laplace_per_group"] > r["rr_clip"]), None)
    spread = {eps: (min(r["rr_clip"] for r in A if r["epsilon"] == eps), max(r["rr_clip"] for r in A if r["epsilon"] == eps))
              for eps in cross}
    nmax = max(r["n"] for r in B)
    b = [r for r in B if r["n"] == nmax]
    big = max(D, key=lambda r: (r["vertices"], -r["epsilon"]))["vertices"]
    cut = {r["epsilon"]: r for r in D if r["vertices"] == big}
    ratio = [r["mse"] / r["exact_variance"] for r in C]
    nl = {r["epsilon"]: r for r in E if r["dataset"] == "nltcs"}
    ad = {r["epsilon"]: r for r in E if r["dataset"] == "adult"}
    out = ["## Where our numbers differ from the paper's, and why", ""]
    out.append(
        "- **Data.** The paper used Netflix ratings (no longer distributed) and the SNAP ego-Facebook graph (not in the shared "
        "data); we use Adult's 5-valued `race` column (K = 5, as a 1-5 star rating) and a generated graph of the same size "
        "(4,039 vertices, 88,234 edges, 10 communities of consecutive ids like the 10 ego networks, 90% of the edges inside). "
        "The paper's epsilons, query counts and run counts are illegible in our copy, so we sweep epsilon.")
    out.append(
        "- **A (Fig. 2).** As in the paper, the companion estimator is flat in the heterogeneity h: worst-case error "
        + ", ".join(f"{lo:.4f}-{hi:.4f} at eps={e}" for e, (lo, hi) in spread.items())
        + " from h = 1 to one function per record. The paper's comparison (MWEM per sub-table) grows with h; our baseline, "
        "a Laplace histogram per group (parallel composition), also grows (like sqrt(h)), but with only K = 5 values a noisy "
        "histogram is far more accurate than randomized response, so it overtakes RR only at h = "
        + ", ".join(f"{cross[e]} (eps={e})" for e in cross) + ", i.e. groups of a few records. MWEM on small sub-tables (not run here) is "
        "expected to be less accurate than a direct noisy histogram, which would move the crossing to smaller h.")
    out.append(
        f"- **B (Fig. 3).** At n = {nmax}, RR's worst case over m queries goes from {b[0]['rr']:.4f} (m = {b[0]['m']}) to "
        f"{b[-1]['rr']:.4f} (m = {b[-1]['m']}): nearly flat (the largest of m correlated, roughly Gaussian errors grows slowly), "
        f"as the paper says; answering each query with eps/m grows linearly ({b[0]['laplace_per_query']:.5f} to "
        f"{b[-1]['laplace_per_query']:.3f}, clipped). One Laplace histogram is query-set independent too and "
        f"{b[-1]['rr'] / b[-1]['laplace_histogram']:.0f}x more accurate than RR at m = {b[-1]['m']} (K = 5): the paper's point is the minimax rate over *all* statistical queries, including "
        "row-specific ones (A), not an advantage over a histogram on a tiny domain.")
    out.append(
        f"- **C (Fig. 4).** The squared error falls like 1/n (log-log slopes "
        + ", ".join(f"{v:.2f} at eps={k}" for k, v in results["table_size_slopes"].items())
        + f"), as the paper reports; the measured MSE is {min(ratio):.2f}-{max(ratio):.2f} times the exact variance "
        "(noise of the average over runs) and below the bound c(K, eps)/n, which assumes the worst per-record variance w^2/4.")
    out.append(
        f"- **D (Table I).** At |V| = {big} the worst-case relative error over 20 half cuts is "
        + ", ".join(f"{100 * r['worst_relative_error']:.1f}% at eps={e}" for e, r in sorted(cut.items()))
        + "; the paper's 5.4% (its eps is illegible) lies between our eps = 1 and eps = 2 values. The error grows like |V| while a half "
        "cut of a graph whose edges grow linearly with |V| (as the paper's subgraphs of ego networks do, and ours by "
        "construction) also grows like |V|, so the relative error is roughly flat, as in Table I; our small subgraphs differ "
        "from the paper's because the first ids of our generated graph are not the real ego networks.")
    if nl and ad:
        lo, hi = min(nl), max(nl)
        out.append(
            "- **E (not in the paper).** Per-attribute randomized response with eps split over all attributes. Reading the "
            f"released table as if it were real is badly biased (NLTCS mean 2-way TVD {nl[lo]['naive']:.3f} at eps={lo}, "
            f"{nl[hi]['naive']:.3f} at eps={hi}); the raw debiased marginals are unbiased but noisy and not distributions "
            f"(TVD {nl[lo]['raw']:.3f} at eps={lo}, {nl[hi]['raw']:.4f} at eps={hi}; on Adult, with attributes of up to 100 "
            f"values, negative cells blow the TVD up to {ad[min(ad)]['raw']:.0f} at eps={min(ad)}); RR+PGM is "
            + ("the best of the four at every epsilon" if all(r["rr_pgm"] <= min(r["naive"], r["raw"], r["raw_clipped"]) for r in E)
               else "not the best at every epsilon")
            + f" (NLTCS {nl[lo]['rr_pgm']:.3f} at eps={lo} to {nl[hi]['rr_pgm']:.4f} at eps={hi}; Adult "
            f"{ad[min(ad)]['rr_pgm']:.3f} to {ad[max(ad)]['rr_pgm']:.3f}). On NLTCS the model is fitted to every 1- and 2-way "
            "marginal; on Adult to the 1-way marginals and a Chow-Liu tree chosen from the release (the front-end's default), "
            "so its TVD over all 91 pairs includes the tree's approximation error. The per-attribute split is expensive: "
            "useful accuracy needs large total epsilons (local-DP territory).")
    return out + [""]


