"""``pgmjax report --real raw.csv --synthetic synth.csv --html page.html``: the utility report of two CSVs."""

from __future__ import annotations

from . import guards
from .errors import UserError
from .arguments import OVERWRITE_HELP
from .inputs import need_file, need_parent
from .outputs import check_outputs

__all__ = ["add_report_parser", "report_cmd"]


def add_report_parser(sub) -> None:
    """``pgmjax report --real raw.csv --synthetic synth.csv --html report.html [--schema schema.json]``."""
    r = sub.add_parser(
        "report",
        help="an HTML utility report comparing a synthetic CSV with the real one (NOT private: it reads the real data)",
        description="Writes one self-contained HTML page: per-column histograms real vs synthetic on the raw scale "
                    "(both CSVs' values on one axis; columns whose synthetic range covers under 50%% of the real one "
                    "are flagged, also on stdout), the 2-way TVD heatmap, the worst 2-way marginals, the 2-way "
                    "workload error. The 2-way part discretises both tables by --schema (values outside its bins "
                    "are clipped), or by a schema read from the real table (not private).",
        epilog="Example: pgmjax report --real raw.csv --synthetic synth.csv --schema schema.json --html report.html",
    )
    r.add_argument("--real", required=True, metavar="CSV", help="the real (private) table")
    r.add_argument("--synthetic", required=True, metavar="CSV", help="the synthetic table")
    r.add_argument("--schema", metavar="JSON", help="discretisation schema (default: read from the real table)")
    r.add_argument("--html", required=True, metavar="HTML", help="the page to write")
    r.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    r.set_defaults(func=report_cmd, debug=False)


def report_cmd(args) -> int:
    """Run ``pgmjax report`` (see :func:`add_report_parser`)."""
    from dataclasses import replace

    from ..data import schema as S
    from ..data.schema_columns import NumericColumn
    from ..queries.workload import Workload
    from .report_html import utility_report
    from .report_raw import raw_scale_comparison, schema_kinds

    for path, flag in ((args.real, "--real"), (args.synthetic, "--synthetic")):
        need_file(path, flag)
    if args.schema:
        need_file(args.schema, "--schema")
    need_parent(args.html, "--html")
    outs = check_outputs({"--real": args.real, "--synthetic": args.synthetic, "--schema": args.schema},
                         {"--html": args.html}, args.overwrite)
    try:
        real = S.read_raw_csv(args.real)
        synth = S.read_raw_csv(args.synthetic)
        schema = S.load_schema(args.schema) if args.schema else S.Schema.from_dict(S.infer_schema(real)[0])
        # Synthetic values may fall outside what the schema lists: clip numbers, give blanks a missing code and
        # collect unlisted categories in one code, as a private schema does.
        schema = S.Schema([replace(c, clip=True, missing=True) if isinstance(c, NumericColumn)
                           else replace(c, other=c.other if c.other is not None else "(not listed)")
                           for c in schema.columns.values()], schema.provenance)
        real_data, synth_data = schema.encode(real), schema.encode(synth)
        # The one-way comparison reads the raw values: binned, a tail clipped away by the schema would not show.
        raw = raw_scale_comparison(real, synth, schema_kinds(schema))
    except ValueError as e:
        raise UserError(guards.public_error(e, False) if isinstance(e, S.SchemaError) else str(e)) from None
    workload = Workload.all_kway(schema.domain, 2) if len(schema.domain) > 1 else None
    with outs:  # placed exclusively unless --overwrite; nothing left on failure
        outs.write_text("--html", utility_report(real_data, synth_data, schema=schema, workload=workload,
                                                 title=f"pgmjax report: {args.synthetic} vs {args.real}", raw=raw))
        outs.commit()
    print(f"pgmjax report: wrote {args.html} (computed from the real data: NOT private)")
    for w in raw["warnings"]:
        print(f"pgmjax report: warning: {w}")
    return 0
