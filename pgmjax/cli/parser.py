"""The parser of the ``pgmjax`` command and :func:`main`, which maps failures to exit codes."""

from __future__ import annotations

import argparse
import os
import sys

from . import info, intervals, preprocessing, report, sample
from .arguments import OVERWRITE_HELP, positive_float, positive_int, public_stddev, seed_int, unit_interval
from .commands import mechanisms_cmd, schema_cmd
from .config import config_flags, config_path
from .demo import demo
from .errors import RunFailure, UserError
from .run import run
from .tempfiles import Terminated, stop_signals_raise


_MAIN_EPILOG = """\
examples:
  pgmjax demo                                    # estimation on a random model, no data needed
  pgmjax demo --records 50000 --attributes 12 --iters 1000

  # integer-coded data (values 0..n-1) with its domain JSON {"age": 85, "sex": 2, ...}
  pgmjax run --data table.csv --domain table-domain.json --mechanism aim \\
             --epsilon 1 --delta 1e-9 --out synthetic.csv --report report.json --workload all-2way

  # raw data (numbers, text, dates, blanks): the schema is derived with DP inside the budget
  pgmjax run --data raw.csv --epsilon 1 --out synthetic.csv --save-model model/   # TreeAIM, the default
  pgmjax sample --model model/ --records 5000 --out more.csv   # more records, no privacy cost
  pgmjax schema --data raw.csv --epsilon 0.1 > schema.json    # or a private schema to review and reuse

  pgmjax mechanisms                              # the mechanisms, their guarantees and own options
  pgmjax info                                    # versions, backend, devices and their memory
  pgmjax run --help                              # every option of a run, schema and workload formats

exit codes: 0 success; 2 bad command line or input (reported before any long computation);
1 the run failed (add --debug to a run for the traceback).
"""

_RUN_DESCRIPTION = """\
Run a differentially private mechanism on a CSV table and write synthetic data.

The mechanism reads the data only through its noise-adding steps and spends exactly the budget
given (--epsilon, and --delta where the guarantee is (eps, delta)); everything after it (the model,
the synthetic records, their decoding) is post-processing. A progress bar on stderr follows the
estimation iterations across the selection rounds; at the end a summary is printed (budget given
and spent, measurements, model size, time) and --report writes it as JSON with the privacy ledger.
The report's "input.records", "evaluation" and times ("seconds") are computed from the data directly (the
report lists them under "not_private"): they are for the data holder, not for publication. The printed summary
and status lines show only privacy-safe numbers (budget, noisy estimates, sizes of outputs) unless
--show-private is given; error messages about the data name the column and what was expected, never
a value or its line (--show-private shows them). An output path that is an input file (or another
output) is refused before anything runs, and so is an existing output unless --overwrite is given, an output
folder that takes no new file, and a --records that exceeds 10^10 or the free space of --out's folder (all
before any budget is spent). The outputs are written to temporary files beside them and placed together at
the end, each created exclusively without --overwrite (an output that appeared meanwhile, e.g. from another
run, is kept and this run fails); a failed, interrupted or terminated run leaves none of its outputs and no
temporary file; a model estimating fewer than 10 records (a tiny budget)
is refused with a suggestion (--records) instead of writing a near-empty table.

mechanisms (--mechanism, default tree_aim; pgmjax mechanisms -v lists them with their own options):
  mwem          MWEM+PGM: EM selection of marginals, Laplace noise (eps-DP); --option noise=gaussian for zCDP
  privbayes     PrivBayes+PGM: private Bayesian network and noisy conditionals (eps-DP: no --delta)
  dualquery     DualQuery+PGM: private query/record game, model fitted to the transcript ((eps, delta)-DP)
  hdmm          HDMM+PGM: workload-optimised measurement strategy, Laplace noise (eps-DP)
  mst           MST: one-way marginals + private maximum spanning tree of pairs ((eps, delta)-DP via zCDP)
  aim           AIM: adaptive workload-aware marginal selection ((eps, delta)-DP via zCDP)
  tree_aim      TreeAIM: MST's tree, then a few batches of AIM's selection ((eps, delta)-DP via zCDP; the default)
  mldp          MLDP+PGM: the workload's cells as training queries, the rest answered by the model (eps-DP)
  rr_synthetic  RR+PGM: randomized response on every attribute, fitted by the engine (eps-DP; also "rr")

common options, the same for every mechanism (the front-ends' common parameters): --epsilon, --delta,
--workload, --engine-iters, --engine-option KEY=VALUE (pgmjax.estimate's options, e.g. method=lbfgs),
--max-model-mb, --seed. A mechanism that cannot use one says so (exit 2) instead of ignoring it.

input:
  integer-coded: --data table.csv --domain domain.json, where domain.json maps every column to its
    number of values {"age": 85, "sex": 2}; each value must be an integer in [0, n).
  raw values without a schema (the default): the run spends --preprocess-fraction of the budget
    (default 0.1) on a private schema: bin edges at private quantiles, clipping bounds, categories
    kept only when their noisy count is large (rare values become "other"), a missing code for
    blanks, dates binned and decoded as dates; the split is printed and recorded in the report.
  raw values with a public schema: --data raw.csv --schema schema.json, where schema.json says how to discretise:
      {"age":    {"bins": [17, 25, 35, 45, 55, 65, 91], "integer": true},
       "income": {"bins": 20, "range": [0, 250000], "decode": "midpoint"},
       "sex":    {"categories": ["Female", "Male"]}}
    bins [e0, e1, ..., ek] are [e_i, e_i+1) with the last one closed; "bins": k with "range": [lo, hi]
    is k equal-width bins; values outside the bins or not among the categories are errors.
    Synthetic data is decoded back: categories to their text, numbers to a value drawn uniformly
    within the bin (seeded by --seed; integers for "integer": true), or the bin midpoint with
    "decode": "midpoint" (per column) or --decode midpoint (all numeric columns).
    pgmjax schema --data raw.csv --epsilon E writes a private schema. A schema read from the data
    without noise (pgmjax schema without --epsilon) is refused unless --allow-nonprivate-schema.
  Every domain/schema attribute must be a column of the CSV, and every column an attribute
  (--ignore-extra-columns drops the others).

workload (--workload): all-2way, all-3way (any all-Kway) or a JSON file of cliques
  [["age", "sex"], ["sex", "income"]]. Mechanisms that take a workload (mwem, dualquery, hdmm, aim,
  mldp) optimise for it (default: all 2-way marginals); the summary then reports the workload error
  of the synthetic data and of the model against the input (paper scale: mean over queries of
  ||W mu - W mu_hat||_1 / (2 ||W mu||_1)) and the mean total variation distance over all 2-way
  marginals. These numbers read the input directly: they are NOT private.

mechanism options: --option key=value passes one of the front-end function's own keyword arguments (values
are JSON: numbers, true/false, strings), e.g. --option noise=gaussian for mwem, --option beta=0.5 for
privbayes, --option samples=20 for dualquery; see help(pgmjax.mechanisms.<name>).
"""

_RUN_EPILOG = """\
examples:
  pgmjax run --data adult.csv --domain adult-domain.json --mechanism aim --epsilon 1 --delta 1e-9 \\
             --out synthetic.csv --report report.json --workload all-2way
  pgmjax run --data adult.csv --domain adult-domain.json --mechanism mwem --epsilon 0.5 --rounds 14 \\
             --engine-iters 500 --option noise=gaussian --delta 1e-6 --out synthetic.csv
  pgmjax run --data raw.csv --schema schema.json --mechanism privbayes --epsilon 1 --seed 3 \\
             --records 10000 --out synthetic.csv --quiet

exit codes: 0 success; 2 bad command line or input (missing file, column not in the domain, value
out of range, eps <= 0, delta outside (0, 1), unknown or unavailable mechanism, bad option), reported
on stderr before the mechanism runs; 1 the run failed (add --debug for the traceback).
"""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line: ``pgmjax <cmd>: error: ... (see pgmjax <cmd> --help)``.

    Sub-parsers are made of the same class (argparse's ``parser_class`` defaults to the parent's), so every
    command's errors are short; ``--help`` still prints the whole usage.
    """

    def error(self, message: str):
        """Print the one-line error on stderr and exit with code 2.

        Args:
            message: argparse's message (e.g. ``the following arguments are required: --data``).

        Returns:
            Never (raises SystemExit(2)).
        """
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from ..mechanisms.registry import DEFAULT_MECHANISM, MECHANISMS
    from .call import ALIASES

    parser = _Parser(
        prog="pgmjax",
        description="Graphical-model estimation for differentially private query answering, in JAX.",
        epilog=_MAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{demo,run,sample,schema,report,mechanisms}")
    d = sub.add_parser(
        "demo",
        help="estimate a model from noisy marginals of data drawn from a random graphical model (no data needed)",
        description=(
            "Draws records from a random ground-truth graphical model, measures all 2-way marginals of a random "
            "tree plus a few 3-way marginals with Gaussian noise, estimates a graphical model, and prints the "
            "per-marginal error of the model next to the error of the raw noisy answers."
        ),
        epilog="Example: pgmjax demo --records 50000 --attributes 12 --iters 1000",
    )
    d.add_argument("--records", type=int, default=50_000, help="number of records (default 50000)")
    d.add_argument("--attributes", type=int, default=12, help="number of attributes (default 12)")
    d.add_argument("--triples", type=int, default=3, help="number of random 3-way marginals measured (default 3)")
    d.add_argument("--sigma", type=float, default=50.0, help="Gaussian noise standard deviation (default 50)")
    d.add_argument("--iters", type=int, default=1000, help="estimation iterations (default 1000)")
    d.add_argument("--method", default="mirror_descent", choices=["mirror_descent", "dual_averaging", "lbfgs"])
    d.add_argument("--seed", type=int, default=0, help="random seed (data, structure and noise)")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    d.set_defaults(func=demo)

    r = sub.add_parser(
        "run",
        help=f"run a private mechanism ({', '.join(MECHANISMS)}) on a CSV, write synthetic data",
        description=_RUN_DESCRIPTION,
        epilog=_RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = r.add_argument_group("input")
    g.add_argument("--data", required=True, metavar="CSV", help="the private table (CSV, optionally .gz), with a header line")
    g.add_argument("--domain", metavar="JSON", help="domain of integer-coded data: {column: number of values}")
    g.add_argument("--schema", metavar="JSON", help="public discretisation schema of raw data (see above; without --domain "
                   "and --schema a private one is derived from the data inside the budget)")
    g.add_argument("--public", metavar="CSV", help="a public table with --data's columns, coded as --data is (integer codes "
                   "with --domain, raw values otherwise, discretised by the same schema): its marginals join the fits of "
                   "mst, aim (which chooses, round by round, between a private measurement and the public marginal) and "
                   "mwem at no privacy cost; the ledger lists each (docs: public-data)")
    g.add_argument("--public-stddev", type=public_stddev, default="sampling", metavar="SD",
                   help="how far --public's marginals are trusted to be from the private ones: 'sampling' (default: the "
                        "sampling error of a public sample of its size) or a standard deviation in records")
    g.add_argument("--ignore-extra-columns", action="store_true", help="drop CSV columns that are not in the domain/schema instead of failing")
    g.add_argument("--engine", choices=["memory", "polars", "dask"], default="memory",
                   help="who reads --data: memory (default: read into this process), polars (streaming, beyond "
                        "memory) or dask (a cluster; --scheduler); integer-coded CSV or Parquet with --domain, or a raw "
                        "CSV (--schema or the private schema: the engine computes the preprocessing's counts); the release "
                        "is the same (pip install 'pgmjax[large]'; docs: large-data)")
    g.add_argument("--scheduler", metavar="ADDRESS", help="with --engine dask: the Dask scheduler (tcp://host:8786); "
                                                          "its workers read --data, so the path must be theirs")
    g = r.add_argument_group("mechanism and privacy")
    g.add_argument("--mechanism", "-m", default=DEFAULT_MECHANISM, choices=[*MECHANISMS, *ALIASES], metavar="NAME",
                   help=f"one of: {', '.join(MECHANISMS)} (rr: rr_synthetic); default {DEFAULT_MECHANISM}")
    g.add_argument("--epsilon", "-e", required=True, type=positive_float, metavar="EPS", help="privacy budget epsilon > 0")
    g.add_argument("--delta", type=unit_interval, default=None, metavar="DELTA",
                   help="delta in (0, 1) for (eps, delta) guarantees (default 1e-9: dualquery, mst, aim, tree_aim, and mwem/hdmm with "
                        "--option noise=gaussian); refused for pure-DP runs")
    g.add_argument("--workload", metavar="SPEC", help="all-2way, all-3way or a JSON file of cliques: what the mechanism optimises for "
                   "(if it takes a workload) and what the summary evaluates")
    g.add_argument("--rounds", type=positive_int, metavar="T", help="rounds of an iterative mechanism (mwem, dualquery, aim)")
    g.add_argument("--engine-iters", type=positive_int, metavar="N",
                   help="estimation iterations per model fit (engine_iters; mechanism default if omitted)")
    g.add_argument("--engine-option", action="append", metavar="KEY=VALUE",
                   help="a pgmjax.FitOptions field for every fit (repeatable; values are JSON), e.g. method=lbfgs or tol=1e-6")
    g.add_argument("--oracle", choices=("exact", "approximate", "auto"), default=None,
                   help="the engine's marginal oracle for every fit (FitOptions oracle=): exact (junction tree; "
                        "default), approximate (convex generalized belief propagation on the measured cliques' region "
                        "graph: fits models past the size limit, answers are pseudo-marginals, synthetic records made to "
                        "match them) or auto (exact wherever the junction tree fits the size limit)")
    g.add_argument("--max-model-mb", type=positive_float, metavar="MB",
                   help="model-size cap in MB of a float64 model, for every mechanism and every fit of the run; the "
                        "run's memory limit is then the peak of a fit of such a model (refused before any measurement "
                        "where the mechanism can tell; default: a fit's peak within 50%% of the machine's memory, or "
                        "PGMJAX_MAX_MODEL_BYTES)")
    g.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="a mechanism-specific keyword argument (repeatable)")
    g.add_argument("--config", metavar="FILE", help="a pgmjax.Synthesizer configuration (JSON or YAML): its settings "
                   "(mechanism, epsilon, delta, bins, ranges, options, fit_options, ...) as flags, checked before "
                   "anything runs; flags on the command line win over the file's")
    g.add_argument("--seed", type=seed_int, default=None,
                   help="random seed of the whole run: noise, selections, sampling, decoding. Default: drawn from the "
                        "operating system's entropy. A given seed makes the noise reproducible by anyone who knows it "
                        "(for tests; keep it secret); no output records it")
    g.add_argument("--checkpoint", metavar="DIR",
                   help="aim, mwem: keep the rounds in this folder after each one; the same command run again (same data, "
                        "seed, budget, settings) resumes from the last round kept, spending only the rest of the budget. "
                        "Without it, Ctrl-C keeps the rounds done in OUT.checkpoint (with --out) for the same command to resume")
    g.add_argument("--resume", metavar="DIR",
                   help="aim, mwem: resume from the checkpoint in this folder (--checkpoint's, or OUT.checkpoint), refused "
                        "if it holds none or one of another run; the rounds go on being kept there")
    g = r.add_argument_group("output")
    g.add_argument("--out", metavar="CSV", help="write the synthetic data here (raw values when --schema is given)")
    g.add_argument("--records", type=positive_int, metavar="N", help="number of synthetic records (default: the model's estimated total)")
    g.add_argument("--decode", choices=["uniform", "midpoint"], help="decoding of binned numeric columns without their own \"decode\" "
                   "(default uniform within the bin)")
    g.add_argument("--report", metavar="JSON", help="write the summary, the evaluation and the privacy ledger as JSON")
    g.add_argument("--save-model", metavar="DIR", help="save the fitted graphical model to this folder (pgmjax.load_model reads it)")
    g.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    g.add_argument("--quiet", "-q", action="store_true", help="no progress bar or status lines on stderr (the summary is still printed)")
    g.add_argument("--show-private", action="store_true",
                   help="also print numbers computed from the input without noise (its exact record count, the workload "
                        "errors) and, in error messages, the offending value and its line; by default only "
                        "privacy-safe numbers are printed")
    g.add_argument("--debug", action="store_true", help="show the traceback when the run fails")
    preprocessing.add_run_arguments(r)
    intervals.add_run_arguments(r, unit_interval)
    r.set_defaults(func=run)

    s = sub.add_parser(
        "schema",
        help="infer a starter discretisation schema from a raw CSV (NOT private: review it)",
        description=(
            "Reads a raw CSV and writes a schema JSON for pgmjax run --schema: a numeric column with more than "
            "--max-categories distinct values gets --bins equal-width bins over its [min, max] ('integer' if all "
            "values are integers); every other column becomes categorical with its distinct values. The schema "
            "is derived from the data and is NOT private: replace data-derived ranges and category lists by "
            "public knowledge before a private release."
        ),
        epilog="Example: pgmjax schema --data raw.csv --bins 16 > schema.json",
    )
    s.add_argument("--data", required=True, metavar="CSV", help="the raw table")
    s.add_argument("--bins", type=positive_int, default=10, help="bins per numeric column (default 10)")
    s.add_argument("--max-categories", type=positive_int, default=32,
                   help="numeric columns with at most this many distinct values stay categorical (default 32; >= --bins)")
    s.add_argument("--out", metavar="JSON", help="write here instead of stdout")
    s.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    preprocessing.add_schema_arguments(s)
    s.set_defaults(func=schema_cmd, debug=False)

    report.add_report_parser(sub)
    sample.add_sample_parser(sub)
    m = sub.add_parser("mechanisms", help="list the mechanisms and their guarantees",
                       description="Lists every mechanism pgmjax run knows, its description and its guarantee.")
    m.add_argument("--verbose", "-v", action="store_true", help="also list each mechanism's own options (--option KEY=VALUE)")
    m.set_defaults(func=mechanisms_cmd, debug=False)
    info.add_info_parser(sub)
    return parser


def console_main() -> int:
    """The ``pgmjax`` executable and ``python -m pgmjax``: :func:`main` in a process of its own, which compiles
    with :func:`pgmjax.programs.fast_compile` (a first fit waits about half as long) unless the environment
    sets ``PGMJAX_FAST_COMPILE=0`` or ``XLA_FLAGS`` chooses the emitters itself."""
    from .. import programs

    if os.environ.get(programs.FAST_COMPILE_ENV, "").strip() != "0":
        programs.fast_compile(strict=False)
    code = main()
    if code in (130, 143):
        # Interrupted (Ctrl-C, SIGTERM), possibly while a compiled program still runs on XLA's threads: this
        # run's outputs are already cleaned up, and the interpreter's teardown under those threads can crash
        # (SIGSEGV instead of the exit code), so the process ends here.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def main(argv=None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``) in this process; returns the exit code."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["run"] and (path := config_path(argv)) is not None:
        try:  # the file's settings as flags, before the command line's own (which win)
            argv = ["run", *config_flags(path), *argv[1:]]
        except UserError as e:
            print(f"pgmjax run: error: {e}", file=sys.stderr)
            return 2
    args = parser.parse_args(argv)
    if args.command == "demo":
        for name in ("records", "attributes", "iters"):
            if getattr(args, name) < 1:
                parser.error(f"--{name} must be at least 1")
        if args.attributes < 3:
            parser.error("--attributes must be at least 3")
        if args.sigma <= 0:
            parser.error("--sigma must be positive")
        return args.func(args)
    args.argv = argv
    try:
        with stop_signals_raise():  # SIGTERM unwinds like Ctrl-C, neither lost: every output's cleanup runs
            return args.func(args)
    except UserError as e:
        print(f"pgmjax {args.command}: error: {e}", file=sys.stderr)
        return 2
    except RunFailure as e:
        print(f"pgmjax {args.command}: failed: {e}", file=sys.stderr)
        if args.debug and e.__cause__ is not None:
            raise e.__cause__
        return 1
    except KeyboardInterrupt as e:
        print(f"pgmjax {args.command}: interrupted" + (f" {e}" if str(e) else ""), file=sys.stderr)
        return 130
    except Terminated:
        print(f"pgmjax {args.command}: terminated (SIGTERM); no output of this run was kept", file=sys.stderr)
        return 143
    except Exception as e:
        if getattr(args, "debug", False):
            raise
        print(
            f"pgmjax {args.command}: failed: {type(e).__name__}: {e} (run again with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1
