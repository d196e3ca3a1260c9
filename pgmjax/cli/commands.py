"""``pgmjax schema`` (a schema for a raw CSV) and ``pgmjax mechanisms`` (what is installed)."""

from __future__ import annotations

import sys

from . import guards, preprocessing
from .errors import UserError
from .inputs import need_file, need_parent
from .outputs import check_outputs


def schema_cmd(args) -> int:
    need_file(args.data, "--data")
    need_parent(args.out, "--out")
    with check_outputs({"--data": args.data}, {"--out": args.out}, args.overwrite) as outs:
        if args.epsilon is not None:
            return preprocessing.private_schema_cmd(args, outs)
        return _schema(args, outs)


def _schema(args, outs) -> int:
    """``pgmjax schema`` without ``--epsilon``: read from the data (NOT private); ``--out`` staged in ``outs``."""
    from ..data import schema as S

    try:
        frame = S.read_raw_csv(args.data)
        spec, notes = S.infer_schema(frame, bins=args.bins, max_categories=args.max_categories)
        S.Schema.from_dict(spec)  # the inferred schema must load
    except S.SchemaError as e:
        raise UserError(f"{args.data}: {guards.public_error(e, False)}") from None
    text = S.dumps(spec)
    if args.out:
        outs.write_text("--out", text + "\n")
        outs.commit()
    else:
        print(text)
    for n in notes:
        print(f"pgmjax schema: note: {n}", file=sys.stderr)
    print(
        "pgmjax schema: warning: this schema was read from the data (ranges, category lists) and is NOT private; "
        "review it and replace data-derived bounds and categories with public knowledge before a private release",
        file=sys.stderr,
    )
    return 0


def mechanisms_cmd(args) -> int:
    from ..mechanisms import registry

    for name, entry in registry.MECHANISMS.items():
        print(f"{name:<13} {entry.description}")
        print(f"{'':<13} guarantee: {registry.GUARANTEES[entry.privacy].replace('noise=', '--option noise=')}")
        if args.verbose:
            own = [k for k in registry.own_options(name) if k != "checkpoint"]  # that one is --checkpoint DIR
            print(f"{'':<13} own options (--option KEY=VALUE): {', '.join(own)}"
                  + ("; keeps its rounds with --checkpoint DIR" if "checkpoint" in registry.own_options(name) else ""))
    return 0
