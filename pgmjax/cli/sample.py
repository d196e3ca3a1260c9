"""``pgmjax sample``: more synthetic records from a saved model, decoded to raw values by its stored schema.

Sampling reads only the model (``pgmjax run --save-model DIR``), never the private table: it is
post-processing of a differentially private release and costs no budget (Dwork & Roth, "The
Algorithmic Foundations of Differential Privacy", 2014, Proposition 2.1). A model saved from raw data
carries its schema (:func:`pgmjax.load_model_schema`), so the records come back as the input's values
(text, numbers, dates, blanks); a model of integer-coded data gives integer codes.

Example::

    pgmjax run --data raw.csv --mechanism mst --epsilon 1 --save-model model/
    pgmjax sample --model model/ --records 10000 --seed 1 --out synthetic.csv
"""

from __future__ import annotations

import os
import sys

from .arguments import OVERWRITE_HELP, positive_int, seed_int
from .errors import RunFailure, UserError
from .inputs import need_parent
from ..graph.size_limit import ModelTooLarge
from .outputs import check_outputs, check_records

#: Records drawn, decoded and written per chunk by ``pgmjax sample`` (the sampler's default chunk).
SAMPLE_CHUNK = 1 << 20

__all__ = ["add_sample_parser", "sample_cmd", "SAMPLE_CHUNK"]


def add_sample_parser(sub) -> None:
    """Register ``pgmjax sample`` on the top-level sub-parser collection ``sub``."""

    s = sub.add_parser(
        "sample",
        help="draw synthetic records from a saved model (post-processing: no privacy cost)",
        description="Draws records from a model saved by pgmjax run --save-model (or pgmjax.save_model). A model "
                    "saved with a schema (any run on raw data) is decoded to raw values in the schema's column "
                    "order; otherwise the records are integer codes. The private data is not read: no budget is spent.",
        epilog="Example: pgmjax sample --model model/ --records 10000 --seed 1 --out synthetic.csv",
    )
    s.add_argument("--model", required=True, metavar="DIR", help="a folder written by pgmjax run --save-model")
    s.add_argument("--records", type=positive_int, metavar="N",
                   help="number of records (default: the model's estimated total, rounded)")
    s.add_argument("--out", metavar="CSV", help="write here (default: standard output)")
    s.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    s.add_argument("--seed", type=seed_int, default=0, help="random seed of the draw and the decoding (default 0)")
    s.add_argument("--decode", choices=["uniform", "midpoint"],
                   help="decoding of every binned numeric column, overriding the stored schema (default: as stored)")
    s.add_argument("--codes", action="store_true", help="write integer codes even when the model carries a schema")
    s.set_defaults(func=sample_cmd, debug=False)


def sample_cmd(args) -> int:
    """Run ``pgmjax sample`` (see :func:`add_sample_parser`)."""
    from dataclasses import replace

    import jax

    from ..data.schema import Schema
    from ..data.schema_columns import NumericColumn
    from ..model.serialization import load_model, load_model_schema

    if not os.path.isdir(args.model):
        raise UserError(f"--model: {args.model} is not a folder (pgmjax run --save-model DIR writes one)")
    need_parent(args.out, "--out")
    if args.out is not None and os.path.abspath(os.path.dirname(os.path.abspath(args.out))) == os.path.abspath(args.model):
        raise UserError(f"--out: {args.out} is inside the model folder {args.model}; write it elsewhere (nothing was run)")
    outs = check_outputs({"--model": args.model}, {"--out": args.out}, args.overwrite)
    if args.codes and args.decode is not None:
        raise UserError("--decode applies to decoded values; it cannot be combined with --codes")
    try:
        model = load_model(args.model)
        schema = None if args.codes else load_model_schema(args.model)
    except (OSError, ValueError) as e:
        raise UserError(f"--model {args.model}: {e}") from None
    check_records(args.records, len(model.domain), args.out)  # before drawing a record
    if schema is None and args.decode is not None:
        raise UserError(f"--decode: the model in {args.model} was saved without a schema (integer-coded data)")
    if schema is not None and args.decode is not None:
        schema = Schema([replace(c, decode=args.decode) if isinstance(c, NumericColumn) else c
                         for c in schema.columns.values()], schema.provenance)
    key_sample, key_decode = jax.random.split(jax.random.key(args.seed))
    records = max(1, int(round(model.total))) if args.records is None else args.records
    try:
        if args.out is None:
            written = _write_stream(model, schema, records, key_sample, key_decode, sys.stdout)
        else:
            with outs:  # placed exclusively unless --overwrite; nothing left on failure
                with outs.file("--out", "w", encoding="utf-8", newline="") as f:
                    written = _write_stream(model, schema, records, key_sample, key_decode, f)
                outs.commit()
    except OSError as e:
        raise RunFailure(f"--out: could not write {args.out}: {e}") from e
    except ModelTooLarge as e:
        raise UserError(f"--records: {e}") from None
    if args.out is not None:
        kind = "raw values (decoded by the stored schema)" if schema is not None else "integer codes"
        print(f"pgmjax sample: wrote {written:,} records ({kind}) to {args.out}; no privacy cost (post-processing)",
              file=sys.stderr)
    return 0


def _write_stream(model, schema, records: int, key_sample, key_decode, f) -> int:
    """Draw ``records`` records in chunks (:func:`pgmjax.model.sampling.sample_chunks`) and write each as CSV
    to ``f`` as it comes: the memory held does not grow with the number of records.

    Chunk ``i`` is decoded with ``fold_in(key_decode, i)`` (chunk 0 with ``key_decode`` itself), so up to one
    chunk (:data:`SAMPLE_CHUNK` records) the output is the one a single draw and decode gave before; beyond
    it the decoded values differ from that, and the same seed still gives the same file.

    Returns:
        The records written.
    """
    import jax
    import pandas as pd

    from ..model.sampling import sample_chunks

    written = 0
    for i, block in enumerate(sample_chunks(model, records, key_sample, SAMPLE_CHUNK)):
        if schema is not None:
            frame = schema.decode(block, key_decode if i == 0 else jax.random.fold_in(key_decode, i))
        else:
            frame = pd.DataFrame(block, columns=list(model.domain.attributes))
        frame.to_csv(f, index=False, header=i == 0)
        written += len(block)
    return written

