"""``pgmjax report --real raw.csv --synthetic synth.csv --html page.html``: the utility report of two CSVs.

Raw CSVs are discretised by ``--schema`` (or a schema read from the real table); integer-coded CSVs, as
``pgmjax run --domain`` takes them, are compared code by code with ``--domain``."""

from __future__ import annotations

from . import guards
from ..data.dataset import DataValueError
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
    how = r.add_mutually_exclusive_group()
    how.add_argument("--schema", metavar="JSON", help="discretisation schema (default: read from the real table)")
    how.add_argument("--domain", metavar="JSON",
                     help="both CSVs are integer-coded with this domain JSON ({column: number of values}, as in "
                          "pgmjax run --domain): every code is one category of the report, never binned as a number")
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
    if args.schema or args.domain:
        need_file(args.schema or args.domain, "--schema" if args.schema else "--domain")
    need_parent(args.html, "--html")
    outs = check_outputs({"--real": args.real, "--synthetic": args.synthetic, "--schema": args.schema,
                          "--domain": args.domain}, {"--html": args.html}, args.overwrite)
    try:
        if args.domain:
            real, synth, schema = _coded_tables(args.real, args.synthetic, args.domain)
        else:
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
        raise UserError(guards.public_error(e, False) if isinstance(e, (S.SchemaError, DataValueError)) else str(e)) from None
    workload = Workload.all_kway(schema.domain, 2) if len(schema.domain) > 1 else None
    with outs:  # placed exclusively unless --overwrite; nothing left on failure
        outs.write_text("--html", utility_report(real_data, synth_data, schema=schema, workload=workload,
                                                 title=f"pgmjax report: {args.synthetic} vs {args.real}", raw=raw))
        outs.commit()
    print(f"pgmjax report: wrote {args.html} (computed from the real data: NOT private)")
    for w in raw["warnings"]:
        print(f"pgmjax report: warning: {w}")
    return 0


def _coded_tables(real_path: str, synthetic_path: str, domain_path: str):
    """Both integer-coded CSVs, read and checked against the domain as ``pgmjax run --domain`` reads its data,
    as text tables of their codes, with a schema of one category per code (so the report never bins a code)."""
    import pandas as pd

    from ..data import schema as S
    from ..data.dataset import Dataset

    real, synth = (Dataset.from_csv(path, domain_path) for path in (real_path, synthetic_path))
    schema = S.Schema.from_dict({a: {"categories": [str(v) for v in range(real.domain[a])]} for a in real.domain})
    return tuple(pd.DataFrame({a: data.records[:, j].astype(str) for j, a in enumerate(data.domain.attributes)})
                 for data in (real, synth)) + (schema,)
