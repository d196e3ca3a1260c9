"""``pgmjax schema`` (a schema for a raw CSV) and ``pgmjax mechanisms`` (what is installed)."""

from __future__ import annotations

import sys

from . import guards, preprocessing
from .errors import UserError
from .inputs import need_file, need_parent


def schema_cmd(args) -> int:
    from ..data import schema as S

    need_file(args.data, "--data")
    need_parent(args.out, "--out")
    try:
        guards.refuse_overwriting_inputs({"--data": args.data}, {"--out": args.out})
    except ValueError as e:
        raise UserError(str(e)) from None
    if args.epsilon is not None:
        return preprocessing.private_schema_cmd(args)
    try:
        frame = S.read_raw_csv(args.data)
        spec, notes = S.infer_schema(frame, bins=args.bins, max_categories=args.max_categories)
        S.Schema.from_dict(spec)  # the inferred schema must load
    except S.SchemaError as e:
        raise UserError(f"{args.data}: {guards.public_error(e, False)}") from None
    text = S.dumps(spec)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
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

    guarantees = {
        "pure": "eps-DP",
        "zcdp": "(eps, delta)-DP via zCDP",
        "advanced": "(eps, delta)-DP",
        "noise": "eps-DP (Laplace noise), or (eps, delta)-DP via zCDP with --option noise=gaussian",
    }
    for name, why in registry.availability().items():
        spec = registry.MECHANISMS[name]
        state = "available" if why is None else "NOT AVAILABLE"
        print(f"{name:<10} {state:<14} {spec.title}")
        print(f"{'':<25} guarantee: {guarantees[spec.privacy]}")
        if why is not None and args.verbose:
            print(f"{'':<25} {why}")
