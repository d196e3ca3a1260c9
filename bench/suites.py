"""The benchmark suites: each a name, one line on what it measures, and its scripts (modules of ``bench``).

A suite's first script is what ``python -m bench SUITE [options]`` runs; ``python -m bench SUITE SCRIPT
[options]`` runs another. Every script and helper is a module with ``main(argv)``: helpers are started by a
script (e.g. the mbi half of a comparison, in its own process) or render a result again. Parts are modules the
scripts import (a section's code, a page's renderer) with no command of their own. Results go to
``bench/results/<suite>/`` (:mod:`bench.schema`).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import os

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclasses.dataclass(frozen=True)
class Suite:
    """A suite: ``about`` (one line), ``scripts`` (module names under ``bench``; the first is the default),
    ``helpers`` (started by the scripts, or renderers) and ``parts`` (imported by the scripts only)."""

    name: str
    about: str
    scripts: tuple
    helpers: tuple = ()
    parts: tuple = ()

    @property
    def commands(self) -> tuple:
        """The modules ``python -m bench SUITE NAME`` runs."""
        return self.scripts + self.helpers

    @property
    def modules(self) -> tuple:
        return self.scripts + self.helpers + self.parts


SUITES = {s.name: s for s in (
    Suite("engine", "pgmjax against mbi 2.0 on the same noisy marginals: loss against time, per-iteration cost, "
          "inference (marginals, synthetic data), first-call compilation and its cache, batched fits, dense against "
          "size-class programs over runs of new structures, a new structure's first fit in a compiled class, the "
          "path scan, each program's compile cost, release fingerprints to check that a refactor changes no result",
          ("engine", "per_iteration", "inference", "compilation_cache", "batch", "size_class", "size_class_first_call",
           "path_scan", "compile_costs", "fingerprints"),
          ("mbi_inference",)),
    Suite("mechanisms", "MST and AIM against mbi 2.0 (accuracy and time), their and MWEM's time per round (selection, "
          "fits: compilation and iterations), and the default mechanism's verdict (TreeAIM against MST and AIM)",
          ("mst_aim", "aim_profile"),
          ("mbi_mst_aim", "mbi_lowmaps", "aim_trace_plot", "default_mechanism"),
          ("aim_trace", "tables")),
    Suite("agreement", "pgmjax's and mbi's fits, float32 and float64, on answers no measurement constrains",
          ("agreement",)),
    Suite("scalability", "ICML 2019 Figure 2b: time per iteration as the number of attributes grows, pgmjax "
          "against mbi 2.0 and against full-table multiplicative weights and LSMR", ("scalability", "full_table"),
          ("mbi_scalability",)),
    Suite("papers", "the papers' experiments reproduced: ICML 2019 Figures 1 and 2a, MLDP, Bayesian inference, "
          "historical answers, randomized response; interval coverage (the full variant of the test suite's)",
          ("figure1", "figure2a", "mldp", "bayes_experiments", "history_experiments", "history_publishing",
           "rr_experiments", "uncertainty_u4"),
          ("history_report", "figure1_draws"), ("rr_report",)),
    Suite("gpu", "the GPU check (one command on a lent H100/H200: bandwidth, engine vs mbi, correctness against "
          "float64 references, batching, the largest model)",
          ("gpu",), (), ("gpu_checks", "gpu_report", "gpu_workloads")),
    Suite("memory", "memory and compiled programs over thousands of mechanism calls in one process; each fit's, "
          "mechanism's and the sampler's peak against the memory model",
          ("repeated_runs", "memory_peak")),
    Suite("approximate", "the approximate marginal oracle (convex generalized BP) against mbi 2.0's and against the "
          "exact fit: all pairs of 30 attributes, a 10x10 grid, AIM past the exact size cap", ("approximate_oracle",)),
)}


#: Each script's short run for ``python -m bench all --quick`` (its own ``--quick`` or ``--smoke``, or fewer rounds or
#: seeds; results not meant for committing). A script not listed has no short mode and runs in full.
QUICK = {
    "engine": ("--quick",), "per_iteration": ("--rounds", "1"), "compilation_cache": ("--rounds", "1"),
    "fingerprints": ("--quick",), "aim_profile": ("--rounds", "4"), "mst_aim": ("--mechanisms", "mst"),
    "agreement": ("--quick",), "full_table": ("--quick",), "figure1": ("--quick",), "figure2a": ("--quick",),
    "mldp": ("--quick",), "bayes_experiments": ("--quick",), "history_experiments": ("--quick",),
    "history_publishing": ("--quick",), "rr_experiments": ("--quick",), "gpu": ("--smoke",),
    "approximate_oracle": ("--quick",),
}

#: Scripts that take their output folder as a positional argument, not ``--out``.
OUT_POSITIONAL = frozenset({"gpu"})


def script_command(module: str, quick: bool = False, out_dir: str | None = None) -> list[str]:
    """The arguments after ``python -m bench.<module>`` for a run of a whole suite (:data:`QUICK`); with
    ``out_dir``, its results go to ``out_dir/<module>`` instead of ``bench/results/<suite>/``.

    Example:
        >>> script_command("engine", quick=True, out_dir="/tmp/b")
        ['--quick', '--out', '/tmp/b/engine']
    """
    args = list(QUICK.get(module, ())) if quick else []
    if out_dir is not None:
        target = os.path.join(out_dir, module)
        args += [target] if module in OUT_POSITIONAL else ["--out", target]
    return args


def summary(module: str) -> str:
    """The first line of a script's docstring, read without importing it."""
    with open(os.path.join(HERE, f"{module}.py"), encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def load(module: str):
    """Import ``bench.<module>``."""
    return importlib.import_module(f"bench.{module}")
