"""Command-line side of private preprocessing (:mod:`pgmjax.preprocessing.preprocess`): the budget split, the options, the schema.

* ``pgmjax run --data raw.csv [--preprocess-fraction 0.1] ...`` (no ``--domain``, no ``--schema``; or
  ``--private-schema`` explicitly): the schema is derived from the raw table with differential privacy
  inside the run's one budget. :func:`pgmjax.mechanisms.budget_split.split_budget`
  gives the preprocessing a fraction of it: of ``rho = cdp_rho(eps, delta)`` for the zCDP mechanisms
  (MST, AIM; the mechanism then gets ``eps' = cdp_eps((1 - f) rho, delta)``, so that the two rhos add
  up to the budget: Bun & Steinke 2016, Lemma 2.3), of ``epsilon`` for the others (basic composition,
  Dwork & Roth 2014, Theorem 3.16). Category discovery adds its ``--discovery-delta`` to the delta.
  The preprocessing is charged under the **mechanism's neighbouring relation**
  (:func:`pgmjax.mechanisms.budget_split.neighbouring`):
  replace-one (``bounded``) for DualQuery, for randomized response by default and wherever
  ``--option bounded=true`` is given; add/remove otherwise. Composition adds the two guarantees only when
  both hold for the same neighbours; under replace-one a histogram's sensitivity is 2, so charging the
  preprocessing for add/remove would understate its epsilon up to twice.
* ``--kind COLUMN=KIND``, ``--decimals COLUMN=D`` and ``--date-format COLUMN=dd/mm/yyyy`` declare a column's
  kind, precision and date format (public: no budget for the kind vote, no rule); ``--range COLUMN=LOW:HIGH`` a public range. Everything else is
  decided under DP or by a data-independent rule (:mod:`pgmjax.preprocessing.preprocess`).
* ``pgmjax schema --data raw.csv --epsilon E``: the same private schema, written as JSON.
* A schema read from the data without noise (``pgmjax schema`` without ``--epsilon``) is refused by
  ``run`` unless ``--allow-nonprivate-schema`` is given; then the summary and report flag it: the release
  is not differentially private in those columns.
"""

from __future__ import annotations

import sys

from . import guards
from .arguments import positive_float, positive_int, secret_seed, seed_int, unit_interval
from .errors import RunFailure, UserError

__all__ = ["check_neighbours", "declared_kind", "declared_decimals", "declared_date_format",
           "add_run_arguments", "check_schema_privacy", "public_range", "ranges_of", "add_schema_arguments", "load_private",
           "private_schema_cmd", "summary_lines", "report_entry", "report_warnings", "raw_comparison",
           "write_html"]


def check_neighbours(args, result) -> None:
    """After the run: the mechanism's accountant used the neighbouring relation the preprocessing was charged under.

    Raises:
        RunFailure: they differ (an internal error: the printed guarantee would not hold; nothing is written).
    """
    split, acc = getattr(args, "split", None), getattr(result, "accountant", None)
    if split is None or acc is None:
        return
    if bool(acc.bounded) != bool(split.accountant.bounded):
        raise RunFailure(f"{args.mechanism}: internal accounting error: the mechanism used "
                         f"{'replace-one' if acc.bounded else 'add/remove'} neighbours, the preprocessing was "
                         f"charged for {'replace-one' if split.accountant.bounded else 'add/remove'}; nothing was written")


def declared_kind(text: str) -> tuple[str, str]:
    """``COLUMN=KIND`` -> ``(column, kind)``, KIND one of number, integer, date, datetime, text.

    Example:
        >>> declared_kind("income=number")
        ('income', 'number')
    """
    import argparse

    from ..preprocessing.private_format import KINDS

    column, sep, kind = text.partition("=")
    if not sep or not column.strip() or kind.strip() not in KINDS:
        raise argparse.ArgumentTypeError(f"expected COLUMN=KIND with KIND one of {', '.join(KINDS)}, got {text!r}")
    return column.strip(), kind.strip()


def declared_decimals(text: str) -> tuple[str, int]:
    """``COLUMN=D`` -> ``(column, D)``, D an integer in [0, 15].

    Example:
        >>> declared_decimals("income=2")
        ('income', 2)
    """
    import argparse

    column, sep, d = text.partition("=")
    if not sep or not column.strip() or not d.strip().isdigit() or int(d) > 15:
        raise argparse.ArgumentTypeError(f"expected COLUMN=D with D an integer in [0, 15], got {text!r}")
    return column.strip(), int(d)


def declared_date_format(text: str) -> tuple[str, str]:
    """``COLUMN=FORMAT`` -> ``(column, format)``, FORMAT one of dd/mm/yyyy, mm/dd/yyyy, yyyy-mm-dd.

    Example:
        >>> declared_date_format("joined=dd/mm/yyyy")
        ('joined', 'dd/mm/yyyy')
    """
    import argparse

    from ..data.date_forms import DATE_FORMATS

    column, sep, fmt = text.partition("=")
    if not sep or not column.strip() or fmt.strip().lower() not in DATE_FORMATS:
        raise argparse.ArgumentTypeError(f"expected COLUMN=FORMAT with FORMAT one of {', '.join(DATE_FORMATS)}, got {text!r}")
    return column.strip(), fmt.strip().lower()


def _pairs(args, attr: str, flag: str) -> dict | None:
    """Repeated ``COLUMN=...`` options as a dict; a column given twice is an error."""
    out = {}
    for column, value in getattr(args, attr, None) or []:
        if column in out:
            raise UserError(f"{flag} {column} is given twice")
        out[column] = value
    return out or None


def public_range(text: str) -> tuple[str, tuple]:
    """``COLUMN=LOW:HIGH`` -> ``(column, (low, high))``; numbers as floats, anything else (ISO dates) as text.

    Example:
        >>> public_range("age=0:120"), public_range("joined=2000-01-01:2024-12-31")
        (('age', (0.0, 120.0)), ('joined', ('2000-01-01', '2024-12-31')))
    """
    import argparse

    column, sep, bounds = text.partition("=")
    low, colon, high = bounds.partition(":")
    if not sep or not colon or not column.strip() or not low.strip() or not high.strip():
        raise argparse.ArgumentTypeError(f"expected COLUMN=LOW:HIGH (e.g. age=0:120), got {text!r}")

    def value(v):
        try:
            return float(v)
        except ValueError:
            return v.strip()

    return column.strip(), (value(low), value(high))


def ranges_of(args) -> dict | None:
    """The ``--range`` options as ``{column: (low, high)}``; a column given twice is an error."""
    return _pairs(args, "ranges", "--range")


def _declarations(args) -> dict:
    """``private_schema``'s public declarations from the options: ranges, kinds, decimals, date formats."""
    return {"ranges": ranges_of(args), "kinds": _pairs(args, "kinds", "--kind"),
            "decimals": _pairs(args, "decimals", "--decimals"), "date_formats": _pairs(args, "date_formats", "--date-format")}


def add_run_arguments(parser) -> None:
    """The options of ``pgmjax run`` for private preprocessing and the HTML report."""

    g = parser.add_argument_group("private preprocessing (raw data without a schema: the default)")
    g.add_argument("--private-schema", action="store_true",
                   help="derive the schema from --data with differential privacy (private quantile bins, private category "
                        "discovery, clipping, missing codes), inside the one budget; this is what a run without --domain "
                        "and --schema does")
    g.add_argument("--allow-nonprivate-schema", action="store_true",
                   help="accept a --schema read from the data without noise (pgmjax schema without --epsilon); the release "
                        "is then NOT differentially private in its columns, and the summary and report say so")
    g.add_argument("--preprocess-fraction", type=unit_interval, default=0.1, metavar="F",
                   help="the share of the budget spent on the schema (default 0.1)")
    g.add_argument("--bins", type=positive_int, default=10, help="bins per numeric or date column (default 10)")
    g.add_argument("--range", action="append", dest="ranges", metavar="COLUMN=LOW:HIGH", type=public_range,
                   help="a public range of a numeric or date column (repeatable), e.g. age=0:120 or "
                        "joined=2000-01-01:2024-12-31: its bins span it and no budget is spent finding it")
    _declaration_arguments(g)
    g.add_argument("--min-count", type=positive_int, default=5,
                   help="a category is kept only if its noisy count exceeds this (default 5)")
    g.add_argument("--discovery-delta", type=unit_interval, default=1e-9, metavar="DELTA",
                   help="delta added by the category discovery's threshold (default 1e-9)")
    g.add_argument("--html", metavar="HTML", help="write a utility report (plots: synthetic vs real marginals, workload "
                   "errors, ledger) as one HTML page; it is computed from the raw data: NOT private")


def add_schema_arguments(parser) -> None:
    """The options of ``pgmjax schema`` for a private schema."""

    parser.add_argument("--epsilon", type=positive_float, metavar="EPS",
                        help="derive the schema with differential privacy at this epsilon (pure DP; private quantiles and "
                             "category discovery) instead of reading it from the data")
    parser.add_argument("--delta", type=unit_interval, default=1e-9, help="the category discovery's delta (default 1e-9)")
    parser.add_argument("--min-count", type=positive_int, default=5, help="least noisy count of a kept category (default 5)")
    parser.add_argument("--range", action="append", dest="ranges", metavar="COLUMN=LOW:HIGH", type=public_range,
                        help="a public range of a numeric or date column (repeatable), e.g. age=0:120")
    _declaration_arguments(parser)
    parser.add_argument("--seed", type=seed_int, default=None,
                        help="random seed of the noise (default: drawn from the operating system's entropy; a given "
                             "seed reproduces the noise for anyone who knows it)")


def _declaration_arguments(group) -> None:
    """``--kind`` and ``--decimals``: a column's kind and precision declared as public knowledge."""
    group.add_argument("--kind", action="append", dest="kinds", metavar="COLUMN=KIND", type=declared_kind,
                       help="declare a column's kind (repeatable): number, integer, date, datetime or text; public, so no "
                            "budget is spent on the private kind vote for it")
    group.add_argument("--decimals", action="append", dest="decimals", metavar="COLUMN=D", type=declared_decimals,
                       help="declare the decimals of a non-integer number column (repeatable); default: the private "
                            "kind vote's (the decimals most of its numbers are written with), else 1/100 of its narrowest "
                            "private bin")
    group.add_argument("--date-format", action="append", dest="date_formats", metavar="COLUMN=FORMAT",
                       type=declared_date_format,
                       help="declare how a date column writes dates with the year last (repeatable): dd/mm/yyyy or "
                            "mm/dd/yyyy (yyyy-mm-dd: ISO and year-first dates only); public, instead of the private kind "
                            "vote's choice (from its noisy counts of dates only valid day first or month first)")


def check_schema_privacy(schema, path: str, allowed: bool) -> None:
    """Refuse a schema marked as read from the data without noise, unless the user allowed it explicitly.

    Such a schema publishes the data's exact ranges and category lists (a value held by one record
    would be released), so ``run`` would not be differentially private in those columns.

    Raises:
        UserError: the schema's provenance says ``"private": false`` and ``allowed`` is False.
    """

    if schema.private is False and not allowed:
        raise UserError(
            f"--schema {path} was read from the data without differential privacy (its ranges and category lists come "
            "from the private table), so the release would not be differentially private. Run without --schema to "
            "derive one privately inside the budget, write one with pgmjax schema --epsilon E, or pass "
            "--allow-nonprivate-schema to accept it (the summary and report then flag those columns). Nothing was run.")


def load_private(args, say, key):
    """Read ``--data``, derive the private schema with ``args.split``'s accountant, encode the table.

    Returns:
        ``(data, schema, result)`` where ``result`` is the :class:`pgmjax.preprocessing.preprocess.PrivateSchema`.
    """
    from ..data import schema as S
    from ..preprocessing.preprocess import private_schema
    from ..preprocessing.private_format import encode_raw

    engine = getattr(args, "engine", "memory") or "memory"
    try:
        if engine == "memory":
            frame = S.read_raw_csv(args.data)
        else:  # the engine computes the aggregates the preprocessing reads, then encodes: only counts reach us
            from .engine_inputs import open_raw_table

            frame = open_raw_table(args)
        result = private_schema(frame, args.split.accountant, key, bins=args.bins, delta=args.discovery_delta,
                                **_declarations(args), min_count=args.min_count, decode=args.decode or "uniform")
        # unreadable fields are missing: no error can depend on one record
        data = encode_raw(result.schema, frame) if engine == "memory" else frame.encode(result.schema)
    except S.SchemaError as e:
        raise UserError(f"{args.data}: {guards.public_error(e, args.show_private)}") from None
    for n in result.notes:
        say(f"private schema: {n}")
    return data, result.schema, result


def private_schema_cmd(args, outs) -> int:
    """``pgmjax schema --data raw.csv --epsilon E``: a private schema as JSON (pure epsilon-DP plus the discovery's delta);
    ``--out`` is staged and placed in ``outs`` (:class:`pgmjax.cli.outputs.OutputSet`)."""
    import jax

    from ..data import schema as S
    from ..preprocessing.preprocess import private_schema
    from ..privacy import Accountant

    try:
        frame = S.read_raw_csv(args.data)
        acc = Accountant(epsilon=args.epsilon)
        result = private_schema(frame, acc, jax.random.key(secret_seed(args.seed)), bins=args.bins, delta=args.delta, min_count=args.min_count,
                                **_declarations(args))
    except S.SchemaError as e:
        raise UserError(f"{args.data}: {guards.public_error(e, False)}") from None
    text = S.dumps(result.schema.to_dict())
    if args.out:
        outs.write_text("--out", text + "\n")
        outs.commit()
    else:
        print(text)
    for n in result.notes:
        print(f"pgmjax schema: note: {n}", file=sys.stderr)
    print(f"pgmjax schema: private: ({args.epsilon:g}, {result.delta:g})-DP; ledger of {len(acc.ledger)} entries, "
          f"spent eps={acc.spent:.6g}", file=sys.stderr)
    return 0


def report_entry(args, schema) -> dict | None:
    """The report's ``preprocessing`` entry: the private schema's split and ledger, or the non-private flag."""
    if getattr(args, "split", None) is not None:
        acc = args.split.accountant
        return {
            "private": True, "split": args.split.text, "fraction": args.preprocess_fraction,
            "currency": acc.currency, "budget": acc.budget, "spent": acc.spent, "bounded": acc.bounded,
            "discovery_delta": schema.provenance.get("delta", 0.0),
            "release_epsilon": args.epsilon_total,
            "release_delta": (args.delta or 0.0) + schema.provenance.get("delta", 0.0),
            "public": schema.provenance.get("public"), "ledger": [dict(e) for e in acc.records()],
            "warnings": list(schema.provenance.get("warnings", [])),  # from released values only (post-processing)
        }
    if schema is not None and schema.private is False:
        return {"private": False, "warning": "the schema was read from the data without differential privacy (ranges, "
                "categories): the release is NOT differentially private in those columns"}
    return None


def summary_lines(entry: dict | None) -> list[str]:
    """Lines of the run summary about the schema's privacy."""
    if entry is None:
        return []
    if entry["private"]:
        return [f"  preprocessing private schema: {entry['split']}; spent {entry['spent']:.6g} {entry['currency']} "
                f"in {len(entry['ledger'])} ledger entries; category discovery adds delta={entry['discovery_delta']:g}",
                f"  whole release (eps={entry['release_epsilon']:g}, delta={entry['release_delta']:g})-DP: preprocessing and "
                "mechanism together (the privacy line above is the mechanism's share)"] + \
               [f"  WARNING       {w}" for w in entry.get("warnings", [])]
    return ["  schema        WARNING: read from the data without differential privacy (ranges, categories): the release "
            "is NOT differentially private in those columns (accepted by --allow-nonprivate-schema; run without --schema, or "
            "use pgmjax schema --epsilon, for a private one)"]


def raw_comparison(args, synth, schema, key) -> dict | None:
    """The one-way comparison on the raw scale for ``--html`` (:mod:`pgmjax.cli.report_raw`; NOT private): the raw
    input against the synthetic records decoded with ``key`` as ``--out`` writes them; None for integer-coded data
    (no schema) or without a key."""
    if schema is None or key is None or (getattr(args, "engine", "memory") or "memory") != "memory":
        return None  # on an engine the raw records stay there: the report compares the codes
    from ..data.schema import read_raw_csv
    from .report_raw import raw_scale_comparison, schema_kinds

    return raw_scale_comparison(read_raw_csv(args.data), schema.decode(synth, key), schema_kinds(schema))


def report_warnings(entry: dict | None, raw: dict | None) -> list[str]:
    """The run's warnings as the JSON report stores them (its ``warnings``), in the order the summary prints them.

    The private schema's range warnings (from released values only), the flag of a schema read from the data
    without noise, and the raw-scale utility warnings of ``--html`` (columns whose synthetic range covers under
    the threshold of the real one; read from the input without noise, so marked ``(NOT private)``).
    """
    out = []
    if entry is not None:
        if entry.get("private"):
            out += [str(w) for w in entry.get("warnings", [])]
        elif entry.get("warning"):
            out.append(f"schema: {entry['warning']}")
    if raw is not None:
        out += [f"{w} (NOT private)" for w in raw["warnings"]]
    return out


def write_html(args, report: dict, data, synth, workload, schema, key=None, raw=None, *, outs) -> dict | None:
    """``--html``: the utility report of :mod:`pgmjax.cli.report_html` (computed from the input: NOT private).

    With a schema and the decoding ``key`` of ``--out``, the one-way section compares the raw input with the
    synthetic records decoded as ``--out`` writes them (:func:`raw_comparison`, or ``raw`` when already
    computed); returns that comparison (its ``warnings``), or None for integer-coded data (compared on the
    codes, as before). The page is staged in ``outs`` (:class:`pgmjax.cli.outputs.OutputSet`), placed with the run's
    other outputs.
    """
    from .report_html import utility_report

    if raw is None:
        raw = raw_comparison(args, synth, schema, key)
    try:
        outs.write_text("--html", utility_report(data, synth, schema=schema, workload=workload, report=report,
                                                 title=f"pgmjax {args.mechanism} on {args.data}", raw=raw))
    except OSError as e:
        raise RunFailure(f"--html: could not write {args.html}: {e}") from e
    return raw
