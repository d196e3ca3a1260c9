"""Plots of AIM's per-round traces from a ``bench.mst_aim`` result: workload error against wall time, pgmjax and mbi.

One PNG per dataset and epsilon, beside the result (``<result>_<dataset>_eps<eps>.png``): the workload error of
the model fitted so far (mean L1 / N over the workload's marginals) against the seconds since the mechanism
started (log scale; the trace's own evaluation taken out), one line per seed and library, pgmjax and mbi in two
colours, a dot at each round and a star at the final model. A run of mbi stopped after its first rounds
(``--mbi-max-rounds`` / ``--mbi-time-limit``) ends without a star, and the legend says which rounds it ran.

Run: ``python -m bench mechanisms aim_trace_plot bench/results/mechanisms/RESULT.json`` (``bench.mst_aim`` also
calls :func:`plot` at the end of a run).
"""

from __future__ import annotations

import argparse
import json
import os

COLORS = {"pgmjax": "tab:blue", "mbi": "tab:orange"}


def png_name(stem: str, dataset: str, epsilon: float) -> str:
    """The file name (no folder) of the plot of ``dataset`` and ``epsilon`` for the result ``stem``."""
    return f"{os.path.basename(stem)}_{dataset}_eps{epsilon:g}.png"


def _traced(doc: dict) -> dict:
    """``{(dataset, epsilon): [AIM runs with a trace]}`` of pgmjax and mbi, in the result's order."""
    groups = {}
    for r in doc.get("rows") or doc.get("runs") or []:
        if r.get("mechanism") == "aim" and r.get("trace") and r.get("library") in COLORS:
            groups.setdefault((r.get("dataset", "adult"), r["epsilon"]), []).append(r)
    return groups


def plot(doc: dict, stem: str) -> list[str]:
    """Write the plots of ``doc`` (a ``bench.mst_aim`` result) beside ``stem`` (the result's path, any suffix).

    Returns:
        The paths written (none when no AIM run has a trace).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    stem = os.path.splitext(stem)[0]
    paths = []
    for (dataset, eps), runs in _traced(doc).items():
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        seeds = {lib: sorted({r["seed"] for r in runs if r["library"] == lib}) for lib in COLORS}
        for r in sorted(runs, key=lambda r: (list(COLORS).index(r["library"]), r["seed"])):
            color = COLORS[r["library"]]
            points = [p for p in r["trace"] if p["round"] != "final"]
            last = [p for p in r["trace"] if p["round"] == "final"]
            ax.plot([p["seconds"] for p in points + last], [p["error"] for p in points + last], color=color,
                    marker="o", markersize=2.5, linewidth=1.0, alpha=0.75)
            if last:
                ax.plot([last[0]["seconds"]], [last[0]["error"]], color=color, marker="*", markersize=11,
                        linestyle="none", markeredgecolor="black", markeredgewidth=0.5)
        handles = []
        for lib, color in COLORS.items():
            if not seeds[lib]:
                continue
            label = f"{lib} ({len(seeds[lib])} seed{'s' * (len(seeds[lib]) > 1)})"
            subset = [r for r in runs if r["library"] == lib and r.get("subset")]
            if subset:
                ks = "/".join(map(str, sorted({r["rounds_run"] for r in subset})))
                label += f": rounds 1-{ks} only, of T = {subset[0].get('rounds', '?')}"
            handles.append(Line2D([], [], color=color, marker="o", markersize=4, label=label))
        handles.append(Line2D([], [], color="grey", marker="*", markersize=10, linestyle="none", label="final model"))
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("seconds since the mechanism started (trace evaluation excluded)")
        ax.set_ylabel("workload error (mean L1 / N)")
        ax.set_title(f"AIM on {dataset}, eps {eps:g}: workload error against time", fontsize=11)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(handles=handles, fontsize=8)
        fig.tight_layout()
        path = os.path.join(os.path.dirname(stem), png_name(stem, dataset, eps))
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", help="bench.mst_aim result JSON files")
    args = p.parse_args(argv)
    for path in args.results:
        with open(path) as f:
            written = plot(json.load(f), path)
        if not written:
            print(f"{path}: no AIM run with a per-round trace: nothing to plot")
        for out in written:
            print(out)


if __name__ == "__main__":
    main()
