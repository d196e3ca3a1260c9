"""``--engine polars|dask`` inputs shared by the raw and integer-coded paths of ``pgmjax run``: the Dask client
and a raw CSV opened by the engine (:mod:`pgmjax.preprocessing.raw_engines`)."""

from __future__ import annotations

from .errors import UserError

__all__ = ["open_raw_table", "scheduler_client"]


def open_raw_table(args):
    """``--engine polars|dask`` on a raw CSV: the table opened by the engine (:func:`pgmjax.preprocessing.raw_engines.open_raw`).

    Raises:
        UserError: the engine's packages are missing, the scheduler cannot be reached.
        SchemaError: the header cannot name the columns (the caller words it as for the in-memory read).
    """
    from ..preprocessing.raw_engines import open_raw

    try:
        return open_raw(args.data, engine=args.engine, scheduler=scheduler_client(args))
    except ImportError as e:
        raise UserError(f"--engine {args.engine}: {e}") from None
    except FileNotFoundError as e:
        raise UserError(f"--data: {e}") from None


def scheduler_client(args):
    """``--scheduler ADDRESS`` as a ``distributed.Client`` (None without it).

    Raises:
        UserError: the scheduler cannot be reached.
    """
    scheduler = getattr(args, "scheduler", None)
    if scheduler is None:
        return None
    try:
        from distributed import Client

        return Client(scheduler, timeout="20s")
    except (OSError, TimeoutError, ValueError) as e:
        raise UserError(f"--scheduler {args.scheduler}: cannot reach the Dask scheduler ({type(e).__name__}: {e})") from None
