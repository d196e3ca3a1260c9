"""Inputs of ``pgmjax run``: files and output paths, the integer-coded or raw table, the workload."""

from __future__ import annotations

from . import guards, preprocessing
from .engine_inputs import open_raw_table, scheduler_client
from .errors import UserError


def need_file(path: str, flag: str) -> None:
    import os

    if not os.path.exists(path):
        raise UserError(f"{flag}: file not found: {path}")
    if os.path.isdir(path):
        raise UserError(f"{flag}: {path} is a folder, expected a file")


def need_data(args) -> None:
    """``--data`` with ``--engine`` / ``--scheduler`` checked before anything is read.

    The in-memory engine reads a CSV file; ``polars`` and ``dask`` read integer-coded CSV or Parquet (a file,
    a folder of Parquet files or a glob) with ``--domain``, or a raw CSV (with ``--schema`` or the private
    schema; :mod:`pgmjax.preprocessing.raw_engines`). With ``--scheduler`` the Dask workers read the path, which need
    not exist on this machine.

    Raises:
        UserError: a missing file, or flags that do not go together.
    """
    import glob
    import os

    engine = getattr(args, "engine", "memory") or "memory"
    scheduler = getattr(args, "scheduler", None)
    if scheduler is not None and engine != "dask":
        raise UserError("--scheduler ADDRESS applies to --engine dask")
    if engine == "memory":
        need_file(args.data, "--data")
        return
    if args.domain is None:
        from ..data.engines import is_csv

        if not is_csv(args.data):
            raise UserError(f"--engine {engine}: a raw table (--schema, or a private schema derived from the data) is read "
                            f"from a CSV file (every field as text); {args.data} is not one (.csv, .csv.gz); Parquet "
                            "works for integer-coded data with --domain")
    from .call import mechanism_name

    if mechanism_name(args.mechanism) == "rr_synthetic":
        raise UserError(f"--engine {engine}: rr_synthetic randomizes every record, which needs the records in this "
                        "process (--engine memory); the other mechanisms read only counts")
    if scheduler is None and not (os.path.exists(args.data) or glob.glob(args.data)):
        raise UserError(f"--data: file, folder or glob not found: {args.data}")
    from ..data.engines import need_engine

    try:
        need_engine(engine)
    except ImportError as e:
        raise UserError(f"--engine {engine}: {e}") from None


def data_header(args) -> list[str]:
    """The column names of ``--data``: a CSV file's header line, or a Parquet file's (folder's, glob's) schema.

    Raises:
        UserError: the file cannot be read.
    """
    import glob
    import os

    from ..data.engines import is_csv

    if is_csv(args.data) or (getattr(args, "engine", "memory") or "memory") == "memory":
        return csv_header(args.data)
    paths = sorted(glob.glob(os.path.join(args.data, "*.parquet"))) if os.path.isdir(args.data) else sorted(glob.glob(args.data))
    if not paths:
        if getattr(args, "scheduler", None) is not None:
            return []  # read by the workers only: the engine names missing columns
        raise UserError(f"--data: no Parquet file in {args.data}")
    import pyarrow.parquet as pq

    try:
        return list(pq.read_schema(paths[0]).names)
    except Exception as e:  # noqa: BLE001 (the reader's text may quote bytes of the private file)
        raise UserError(f"data file {paths[0]} could not be read as Parquet ({type(e).__name__})") from None


def need_parent(path: str | None, flag: str) -> None:
    import os

    if path is None:
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UserError(f"{flag}: the folder {parent} does not exist (create it first; nothing was run)")
    if os.path.isdir(path) and flag != "--save-model":
        raise UserError(f"{flag}: {path} is a folder, expected a file name")


def check_columns(header: list[str], attributes, data_path: str, what: str, ignore_extra: bool) -> list[str]:
    """Every attribute must be a column; a column that is no attribute is an error unless ignored."""
    if not header or header == [""]:
        raise UserError(f"data file {data_path} is empty (no header line)")
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise UserError(f"data file {data_path} has duplicate column names: {dup}")
    missing = [a for a in attributes if a not in header]
    if missing:
        raise UserError(
            f"data file {data_path} has no column{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)} "
            f"(named in the {what}); its columns are {header}"
        )
    extra = [c for c in header if c not in attributes]
    if extra and not ignore_extra:
        many = len(extra) > 1
        raise UserError(
            f"data file {data_path}: column{'s' if many else ''} {', '.join(repr(c) for c in extra)} "
            f"{'are' if many else 'is'} not in the {what} (attributes: {list(attributes)}); add "
            f"{'them' if many else 'it'} to the {what}, or pass --ignore-extra-columns to drop {'them' if many else 'it'}"
        )
    return extra


def csv_header(path: str) -> list[str]:
    """The CSV file's first line, split into column names; a UTF-8 byte-order mark is not part of the first name.

    Args:
        path: the file (``.gz`` for gzipped).

    Returns:
        The names.

    Raises:
        UserError: the file cannot be read, is empty, its header is not UTF-8 text or repeats a name (the words of
            :func:`pgmjax.data.raw_csv.raw_header`, the same on every engine).
    """
    from ..data.raw_csv import raw_header
    from ..data.schema_columns import SchemaError

    try:
        # Decoded leniently: a byte that is not UTF-8 in a record (read as missing on the raw path) must not
        # fail the header's read; only a header that is not text is refused.
        return raw_header(path)
    except SchemaError as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(f"data file {path} could not be read: {e}") from None


def load_integer_data(args, say):
    """``--data`` + ``--domain``: an integer-coded table.

    Every line must have the header's number of fields, and every value of a domain attribute must be
    an integer code in ``[0, size)``: a ragged line, a value out of range, a word or a digit string longer
    than any code is refused naming the column and the expected range (the line and the value with
    ``--show-private``), before the mechanism runs. A UTF-8 byte-order mark before the header is skipped.

    Args:
        args: the parsed ``pgmjax run`` arguments (``data``, ``domain``, ``ignore_extra_columns``, ``show_private``).
        say: the status printer (unused here).

    Returns:
        ``(Dataset, None, the ignored columns)``.

    Raises:
        UserError: a bad domain file, header, line or value (exit 2).
    """
    import csv

    import pandas as pd

    import pgmjax as pj

    from ..data.dataset import read_json_file

    try:
        raw = read_json_file(args.domain, "domain file", "attribute names", UserError)
        if not isinstance(raw, dict):
            raise UserError(f"domain file {args.domain} must hold a JSON object attribute -> number of values")
        domain = pj.Domain(raw)
    except (TypeError, ValueError) as e:
        raise UserError(f"domain file {args.domain}: {e}") from None
    header = data_header(args)
    if header or (getattr(args, "engine", "memory") or "memory") == "memory":
        extra = check_columns(header, domain.attributes, args.data, "domain file", args.ignore_extra_columns)
    else:
        extra = []
    from ..data.dataset import DataValueError, check_field_counts, unreadable_csv

    if (getattr(args, "engine", "memory") or "memory") != "memory":
        return load_engine_data(args, domain), None, extra

    try:
        frame = pd.read_csv(args.data, usecols=list(domain.attributes))
        # usecols drops a longer line's extra fields and pads a shorter line: refuse both (pandas' own
        # errors, such as broken quoting, come first, as before).
        check_field_counts(args.data)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, csv.Error, ValueError) as e:
        if isinstance(e, DataValueError):
            raise UserError(guards.public_error(e, args.show_private)) from None
        # The reader's text may quote a line number or bytes of the private file.
        detail = f"{args.data} could not be read as CSV: {e}" if args.show_private else unreadable_csv(args.data, e)
        raise UserError(f"data file {detail}") from None
    try:
        data = pj.Dataset(frame, domain)
    except (TypeError, ValueError) as e:
        raise data_error(args, e) from None
    return data, None, extra


def data_error(args, e: Exception) -> UserError:
    """The command line's error for a table of codes that :class:`~pgmjax.Dataset` (in memory or counted by an
    engine) refused: the column and what was expected, never a private value unless ``--show-private``, and a hint
    where the file holds raw values."""
    from ..data.dataset import DataValueError

    if not isinstance(e, DataValueError):
        return UserError(f"data file {args.data}: {str(e).removeprefix('Dataset: ')}")
    msg = guards.public_error(e, args.show_private).removeprefix("Dataset: ")
    hint = ""
    if "integer codes" in msg or "not finite" in msg:
        hint = "; for raw values (text, decimals) give a --schema instead of --domain (see: pgmjax schema --help)"
    return UserError(f"data file {args.data}: {msg}{hint}")


def load_engine_data(args, domain):
    """``--engine polars|dask``: the table opened by the engine (:func:`pgmjax.data.engines.open_dataset`), its
    codes checked by per-column aggregates with the in-memory messages; only counts reach this process.

    Raises:
        UserError: the engine's packages are missing, the scheduler cannot be reached, a bad value (the column
            and the range named; the counts and extremes with ``--show-private``).
    """
    from ..data.engines import open_dataset

    scheduler = scheduler_client(args)
    try:
        return open_dataset(args.data, domain, engine=args.engine, scheduler=scheduler)
    except ImportError as e:
        raise UserError(f"--engine {args.engine}: {e}") from None
    except FileNotFoundError as e:
        raise UserError(f"--data: {e}") from None
    except (TypeError, ValueError) as e:
        raise data_error(args, e) from None


def schema_constraints_of(args, entry_name: str, options: dict) -> tuple:
    """The constraints of ``--schema``'s ``"_constraints"`` entry (:mod:`pgmjax.queries.schema_constraints`), checked
    before anything is read, and whether the mechanism takes them; ``()`` without a schema.

    Raises:
        UserError: a constraint the schema cannot hold (the constraint, column and value named), constraints
            given as ``--option``, or a mechanism that takes none.
    """
    from ..data import schema as S
    from ..mechanisms import registry
    from ..queries.schema_constraints import schema_constraints

    if "constraints" in options:
        raise UserError('--option constraints: constraints come from the schema file\'s "_constraints" entry')
    if args.schema is None:
        return ()
    try:
        constraints = schema_constraints(S.load_schema(args.schema, decode=args.decode), where=f"schema file {args.schema}")
    except S.SchemaError as e:
        raise UserError(str(e)) from None
    if constraints and "constraints" not in registry.own_options(entry_name):
        takes = registry.taking("constraints")
        raise UserError(f'{entry_name} does not take the schema\'s "_constraints"; {", ".join(takes)} do')
    return constraints


def load_raw_data(args, say):
    """``--data`` + ``--schema``: raw values discretised by the schema."""
    from ..data import schema as S

    try:
        schema = S.load_schema(args.schema, decode=args.decode)
    except S.SchemaError as e:
        raise UserError(str(e)) from None
    preprocessing.check_schema_privacy(schema, args.schema, args.allow_nonprivate_schema)
    engine = getattr(args, "engine", "memory") or "memory"
    header = csv_header(args.data) if engine == "memory" or getattr(args, "scheduler", None) is None else None
    extra = [] if header is None else check_columns(header, list(schema.columns), args.data, "schema",
                                                    args.ignore_extra_columns)
    try:
        if engine != "memory":  # the schema applied by the engine: only counts reach this process
            return open_raw_table(args).encode(schema), schema, extra
        frame = S.read_raw_csv(args.data)
        # Unreadable fields of columns with a missing code are missing: an error would depend on one record.
        data = schema.encode(frame, unreadable="missing")
    except S.SchemaError as e:
        raise UserError(f"data file {args.data}: {guards.public_error(e, args.show_private)}") from None
    return data, schema, extra


def public_of(args, entry_name: str) -> None:
    """``--public`` checked before anything is read: the file exists and the mechanism takes public data.

    Raises:
        UserError: a missing file, or a mechanism that takes none (those that do named).
    """
    from ..mechanisms import registry

    if args.public is None:
        return
    need_file(args.public, "--public")
    if "public" not in registry.own_options(entry_name):
        takes = registry.taking("public")
        raise UserError(f"--public: {entry_name} takes no public data; {', '.join(takes)} do")


def load_public(args, schema, domain):
    """``--public``: the public table, read as ``--data`` is (integer codes over ``domain``, or raw values through
    ``schema``, the run's schema whether given or derived privately), as a
    :class:`~pgmjax.queries.public.PublicData` with ``--public-stddev``; None without it.

    The public table is public: its values may appear in messages. A raw value the schema does not know is coded as
    the schema codes an unknown value of the private table.

    Raises:
        UserError: a column of the domain or schema missing from the public file, or a bad value, named.
    """
    import argparse

    from ..data import schema as S
    from ..queries.public import PublicData

    if args.public is None:
        return None
    if schema is None:  # integer codes, checked as --data's are
        public_args = argparse.Namespace(**{**vars(args), "data": args.public, "engine": "memory",
                                            "ignore_extra_columns": True, "show_private": True})
        data, _, _ = load_integer_data(public_args, lambda *a: None)
    else:
        try:
            frame = S.read_raw_csv(args.public)
        except (S.SchemaError, OSError, ValueError) as e:
            raise UserError(f"--public {args.public}: {e}") from None
        missing = [c for c in schema.columns if c not in frame.columns]
        if missing:
            raise UserError(f"--public {args.public}: no column(s) {missing} (the table needs --data's columns)")
        try:
            data = schema.encode(frame[list(schema.columns)], unreadable="missing")
        except S.SchemaError as e:
            raise UserError(f"--public {args.public}: {e}") from None
    if data.domain != domain:
        raise UserError(f"--public {args.public}: its domain {data.domain} is not the private table's {domain}")
    if len(data) == 0:
        raise UserError(f"--public {args.public}: the public table has no records")
    return PublicData(data, stddev=args.public_stddev)


def parse_workload(spec: str | None, domain):
    """``all-Kway`` or a JSON file of cliques -> (Workload, label); None -> (None, None)."""
    import os
    import re

    import pgmjax as pj

    if spec is None:
        return None, None
    m = re.fullmatch(r"all-(\d+)-?way", spec.strip().lower())
    if m:
        k = int(m.group(1))
        if not 1 <= k <= len(domain):
            raise UserError(f"--workload {spec}: k must be between 1 and the number of attributes ({len(domain)})")
        return pj.Workload.all_kway(domain, k), f"all {k}-way marginals"
    if not os.path.exists(spec):
        raise UserError(f"--workload: expected all-2way, all-3way (any all-Kway) or a JSON file of cliques; file not found: {spec}")
    from ..data.dataset import read_json_file

    raw = read_json_file(spec, "workload file", "keys", UserError)
    if isinstance(raw, dict) and "cliques" in raw:
        raw = raw["cliques"]
    if not isinstance(raw, list) or not raw or not all(
        isinstance(c, list) and c and all(isinstance(a, str) for a in c) for c in raw
    ):
        raise UserError(f'workload file {spec}: expected a non-empty list of cliques, e.g. [["age", "sex"], ["sex", "income"]]')
    try:
        return pj.Workload.marginals(domain, [tuple(c) for c in raw]), f"{len(raw)} marginals from {spec}"
    except ValueError as e:
        raise UserError(f"workload file {spec}: {e}") from None
