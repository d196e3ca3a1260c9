"""Every file the command line writes: checked before any work, written as a set, never lost.

* :func:`check_outputs`: called once per command before anything private is read, computed or spent. An
  output that is an input (or another output) is refused even with ``--overwrite``
  (:func:`pgmjax.cli.guards.refuse_overwriting_inputs`); an output path that exists is refused unless
  ``--overwrite`` is given; every output folder must take a new file (a probe file is created and removed:
  :func:`os.access` says yes to root on a read-only mount); a stale temporary file of a killed run is removed;
  ``--records`` is checked against :data:`MAX_RECORDS` and the free space of ``--out``'s folder
  (:func:`check_records`). All raise :class:`~pgmjax.cli.errors.UserError` (exit 2, one line). It returns the
  command's :class:`OutputSet`.
* :class:`OutputSet`: each output is written to a temporary file (a folder for ``--save-model``) beside it and
  staged; :meth:`OutputSet.commit` moves them all into place at the end. Without ``--overwrite`` each one is
  created exclusively (:func:`os.link`, :func:`os.mkdir`: they fail if the name exists), so a concurrent run
  with the same outputs fails (exit 1) instead of replacing them; a run that fails at any point, or is
  interrupted (Ctrl-C, SIGTERM: :func:`pgmjax.cli.tempfiles.stop_signals_raise`), leaves none of its outputs
  and no temporary file.
* Temporary files (:mod:`pgmjax.cli.tempfiles`) carry this host and process in their names: one left by a killed
  run is removed by the next command writing the same output.
* :func:`atomic_file`, :func:`write_text`, :func:`write_csv`: one file written atomically (library use).

Example::

    outs = check_outputs({"--data": "t.csv"}, {"--out": "s.csv"}, overwrite=False)
    with outs:                      # any exception: the staged and placed outputs are removed
        outs.write_csv("--out", frame)
        outs.commit()               # exclusive: fails if s.csv appeared meanwhile
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sys

from . import guards
from .errors import RunFailure, UserError
from .tempfiles import clean_stale, raise_if_stopped, remove_path, tmp_path

__all__ = ["check_outputs", "check_records", "OutputSet", "atomic_file", "write_text", "write_csv",
           "save_model_atomic", "MAX_RECORDS", "MIN_BYTES_PER_VALUE"]

#: ``--records`` above this (ten billion) is refused before anything runs: a count past it is taken for a slip.
MAX_RECORDS = 10**10
#: The fewest bytes a synthetic value takes in a CSV: one character and its separator (or the line's end).
MIN_BYTES_PER_VALUE = 2


def _model_files(path: str) -> list[str]:
    from ..model.serialization import ARRAYS_FILE, STRUCTURE_FILE

    return [os.path.join(path, STRUCTURE_FILE), os.path.join(path, ARRAYS_FILE)]


def _exists(flag: str, path: str) -> bool:
    """Whether writing ``flag``'s output would replace something: a file, or a folder holding a saved model."""
    if flag == "--save-model" and os.path.isdir(path):
        return any(os.path.lexists(f) for f in _model_files(path))
    return os.path.lexists(path)


def _probe(folder: str, flag: str, path: str) -> None:
    """Create and remove a file in ``folder``: the one test of writability that root and every filesystem honour.
    It is named as a temporary file of ``path`` would be, so that :func:`clean_stale` finds it if a kill strands it."""
    probe = tmp_path(os.path.join(folder, os.path.basename(os.path.abspath(path))))
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise UserError(f"{flag} {path}: cannot create a file in {folder} ({e.strerror or e}); choose a writable "
                        "folder (nothing was run)") from None


def check_records(records: int | None, columns: int, out: str | None, flag: str = "--records") -> None:
    """Refuse a record count no run can draw or write: above :data:`MAX_RECORDS`, or (with ``out``) more bytes
    than the free space of ``out``'s folder at :data:`MIN_BYTES_PER_VALUE` per value (a lower bound: a
    refusal is certain to be right).

    Args:
        records: ``--records`` (None: the model's estimate, checked when written).
        columns: the number of columns written (0: unknown, the disk is not checked).
        out: the CSV written, or None.
        flag: the option's name, for the message.

    Raises:
        UserError: naming the count, the limit and what to do (nothing was run).

    Example:
        >>> check_records(10**12, 3, None)
        Traceback (most recent call last):
        pgmjax.cli.errors.UserError: --records 1000000000000 is above the maximum of 10000000000 (nothing was run)
    """
    if records is None:
        return
    if records > MAX_RECORDS:
        raise UserError(f"{flag} {records} is above the maximum of {MAX_RECORDS} (nothing was run)")
    if out is None or columns <= 0:
        return
    folder = os.path.dirname(os.path.abspath(out))
    need, free = records * columns * MIN_BYTES_PER_VALUE, shutil.disk_usage(folder).free
    if need > free:
        raise UserError(f"{flag} {records}: --out {out} would take at least {_size(need)} ({columns} columns, "
                        f"{MIN_BYTES_PER_VALUE} bytes a value) and {folder} has {_size(free)} free; draw fewer "
                        "records or write elsewhere (nothing was run)")


def _size(n: int) -> str:
    """Bytes as a person reads them: ``1.2 MB``, ``3.5 TB`` (powers of 1000, as ``df -H`` prints them)."""
    units, i = ("B", "kB", "MB", "GB", "TB"), 0
    while n >= 1000 and i < len(units) - 1:
        n, i = n / 1000, i + 1
    return f"{n:.3g} {units[i]}" if n < 1000 else f"{n:,.0f} {units[i]}"


def check_outputs(inputs: dict[str, str | None], outputs: dict[str, str | None], overwrite: bool) -> OutputSet:
    """Refuse outputs that would destroy a file or cannot be written, before any work starts.

    Args:
        inputs: ``{flag: path}`` of the files or folders read (None entries are skipped).
        outputs: ``{flag: path}`` of the files (``--save-model``: the folder) written; None entries are skipped.
        overwrite: ``--overwrite`` was given: existing outputs may be replaced (inputs never).

    Returns:
        The command's :class:`OutputSet` (stale temporary files of its outputs removed).

    Raises:
        UserError: an output is an input or another output (whatever ``overwrite`` says), an output exists and
            ``overwrite`` is False, or an output's folder takes no new file; one line naming the path and the flag.
    """
    try:
        guards.refuse_overwriting_inputs(inputs, outputs)
    except ValueError as e:
        raise UserError(f"{e}; --overwrite never replaces an input (nothing was run)") from None
    for flag, path in outputs.items():
        if path is None:
            continue
        if not overwrite and _exists(flag, path):
            what = "holds a saved model" if flag == "--save-model" else "exists"
            raise UserError(f"{flag} {path} {what}; pass --overwrite to replace it, or choose another {flag} "
                            "(nothing was run)")
        clean_stale(path)
        _probe(os.path.dirname(os.path.abspath(path)), flag, path)
        if flag == "--save-model" and os.path.isdir(path):  # its files are placed inside
            _probe(path, flag, path)
    return OutputSet(outputs, overwrite)


class OutputSet:
    """The outputs of one command: staged beside their places, placed together by :meth:`commit`, removed
    together on failure. Used as a context manager: an exception (KeyboardInterrupt,
    :class:`~pgmjax.cli.tempfiles.Terminated` included) removes every staged temporary file and every output
    this set placed; what cannot be removed is named in the error.

    Args:
        outputs: ``{flag: path}`` (None entries are skipped).
        overwrite: replace existing outputs (:func:`os.replace`); otherwise each is created exclusively.
    """

    def __init__(self, outputs: dict[str, str | None], overwrite: bool):
        self.paths = {flag: os.path.abspath(p) for flag, p in outputs.items() if p is not None}
        self.given = {flag: p for flag, p in outputs.items() if p is not None}
        self.overwrite = bool(overwrite)
        self._staged: dict[str, str] = {}  # flag -> temporary file or folder
        self._placed: list[str] = []  # files and folders this set created (removed on failure)

    def __enter__(self) -> OutputSet:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.discard()
            return
        left = self.abandon()
        if not left:
            return
        note = f"could not remove this run's {', '.join(left)}: remove them by hand"
        if isinstance(exc, (RunFailure, UserError)):
            exc.args = (f"{exc}; {note}",)
        else:  # an interrupt or an unexpected error: its own message is printed, this one beside it
            print(f"pgmjax: {note}", file=sys.stderr)

    @contextlib.contextmanager
    def file(self, flag: str, mode: str = "w", **open_kwargs):
        """Open the temporary file of ``flag``'s output; on success it is staged, on failure removed.

        Args:
            flag: an output of this set.
            mode: ``"w"`` (text) or ``"wb"``.
            **open_kwargs: passed to :func:`open` (``encoding``, ``newline``).

        Returns:
            A context manager yielding the open file.
        """
        tmp = tmp_path(self.paths[flag])
        try:
            with open(tmp, "x" + mode.replace("w", ""), **open_kwargs) as f:
                yield f
            os.chmod(tmp, _file_mode(self.paths[flag]))
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise
        self._replace_staged(flag, tmp)

    def write_text(self, flag: str, text: str) -> None:
        """Stage ``text`` (UTF-8) as ``flag``'s output."""
        with self.file(flag, "w", encoding="utf-8") as f:
            f.write(text)

    def write_csv(self, flag: str, frame) -> None:
        """Stage a pandas frame as CSV (no index) as ``flag``'s output."""
        with self.file(flag, "w", encoding="utf-8", newline="") as f:
            frame.to_csv(f, index=False)

    def save_model(self, flag: str, model, *, schema=None, report=None) -> None:
        """Stage :func:`pgmjax.model.serialization.save_model` into a temporary folder as ``flag``'s output (with the
        fit's ``report``, where given)."""
        from ..model.serialization import save_model

        tmp = tmp_path(self.paths[flag])
        try:
            os.mkdir(tmp)
            save_model(model, tmp, schema=schema, report=report)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._replace_staged(flag, tmp)

    def _replace_staged(self, flag: str, tmp: str) -> None:
        old = self._staged.pop(flag, None)
        if old is not None:
            with contextlib.suppress(OSError):
                remove_path(old)
        self._staged[flag] = tmp

    def commit(self) -> None:
        """Move every staged output into place, in the order staged.

        Raises:
            RunFailure: an output could not be placed: it appeared meanwhile (another run writing the same
                path, without ``--overwrite``) or the filesystem refused (leaving the ``with`` block then removes
                the outputs this set placed).
            Terminated: a SIGTERM arrived during the run (nothing is placed).
        """
        raise_if_stopped()  # its exception may have been dropped (raised inside a garbage-collector callback)
        for flag, tmp in list(self._staged.items()):
            path = self.paths[flag]
            try:
                if os.path.isdir(tmp):
                    self._place_folder(tmp, path)
                else:
                    self._place_file(tmp, path)
            except FileExistsError:
                raise RunFailure(f"{flag} {self.given[flag]} appeared while this run was working (another run writing "
                                 "the same output?) and was left as it is; no output of this run is kept: run again "
                                 f"with another {flag}, or with --overwrite to replace it") from None
            except OSError as e:
                raise RunFailure(f"{flag}: could not write {self.given[flag]}: {e}") from e
            del self._staged[flag]
            with contextlib.suppress(OSError):
                remove_path(tmp)

    def _place_file(self, tmp: str, path: str) -> None:
        if self.overwrite:
            new = not os.path.lexists(path)
            os.replace(tmp, path)
            if new:  # created by this run: removed if the run fails (a replaced file's old content is gone)
                self._placed.append(path)
            return
        try:
            os.link(tmp, path)  # fails if path exists, atomically
        except FileExistsError:
            raise
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV):
                raise
            # No hard links on this filesystem: claim the name exclusively, then replace the (empty) claim.
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            self._placed.append(path)
            os.replace(tmp, path)
            return
        self._placed.append(path)

    def _place_folder(self, tmp: str, path: str) -> None:
        try:
            os.mkdir(path, 0o777)  # exclusive; an existing folder gets the model's files placed inside
            self._placed.append(path)
        except FileExistsError:
            if not os.path.isdir(path):
                raise
        for src, dst in zip(_model_files(tmp), _model_files(path)):
            if os.path.exists(src):
                self._place_file(src, dst)

    def discard(self) -> list[str]:
        """Remove every staged temporary file; returns those that could not be removed."""
        left = []
        for tmp in self._staged.values():
            try:
                remove_path(tmp)
            except FileNotFoundError:
                pass
            except OSError:
                left.append(tmp)
        self._staged.clear()
        return left

    def abandon(self) -> list[str]:
        """Remove the staged temporary files and the outputs this set placed (the latest first).

        Returns:
            The paths that could not be removed.
        """
        left = self.discard()
        for path in reversed(self._placed):
            try:
                os.rmdir(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
            except FileNotFoundError:
                pass
            except OSError:
                left.append(path)
        self._placed.clear()
        return left


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w", *, overwrite: bool, **open_kwargs):
    """One file written through a one-output :class:`OutputSet`: placed on success, nothing left on failure.

    Args:
        path: the file to write.
        mode: ``"w"`` (text) or ``"wb"``.
        overwrite: replace an existing ``path``; otherwise it is created exclusively (FileExistsError -> RunFailure).
        **open_kwargs: passed to :func:`open` (``encoding``, ``newline``).

    Returns:
        A context manager yielding the open temporary file.
    """
    with OutputSet({"file": path}, overwrite) as outs:
        with outs.file("file", mode, **open_kwargs) as f:
            yield f
        outs.commit()


def _file_mode(path: str) -> int:
    """The permissions an ordinary ``open(path, "w")`` would give (the old file's when replacing)."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        return 0o666 & ~_umask()


def write_text(path: str, text: str, *, overwrite: bool) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_file`)."""
    with atomic_file(path, "w", overwrite=overwrite, encoding="utf-8") as f:
        f.write(text)


def write_csv(frame, path: str, *, overwrite: bool) -> None:
    """Write a pandas frame as CSV (no index) to ``path`` atomically (:func:`atomic_file`)."""
    with atomic_file(path, "w", overwrite=overwrite, encoding="utf-8", newline="") as f:
        frame.to_csv(f, index=False)


def save_model_atomic(model, path: str, *, schema=None, overwrite: bool) -> None:
    """:func:`pgmjax.model.serialization.save_model` through a one-output :class:`OutputSet` (``flag``
    ``--save-model``): a temporary folder beside ``path``, its files placed inside ``path``."""
    with OutputSet({"--save-model": path}, overwrite) as outs:
        outs.save_model("--save-model", model, schema=schema)
        outs.commit()


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask
