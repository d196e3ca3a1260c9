"""Every file the command line writes: checked before any work, written atomically, never lost.

* :func:`check_outputs`: called once per command before anything is read or computed. An output
  that is an input (or another output) is refused even with ``--overwrite``
  (:func:`pgmjax.cli.guards.refuse_overwriting_inputs`); an output path that exists is refused unless
  ``--overwrite`` is given. Both raise :class:`~pgmjax.cli.errors.UserError` (exit 2, one line).
* :func:`atomic_file`, :func:`write_text`, :func:`write_csv`: a file is written to a temporary file in
  its own folder and renamed into place (:func:`os.replace`), so an interrupted or failed run leaves
  the old file (or none), never a partial one.
* :func:`save_model_atomic`: ``--save-model DIR``: the model is saved into a temporary folder beside
  ``DIR``, then renamed to ``DIR`` (a new folder) or its files are renamed into ``DIR`` one by one
  (``--overwrite`` of an existing model folder; each file is replaced whole).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from . import guards
from .errors import UserError

__all__ = ["check_outputs", "atomic_file", "write_text", "write_csv", "save_model_atomic"]


def _model_files(path: str) -> list[str]:
    from ..model.serialization import ARRAYS_FILE, STRUCTURE_FILE

    return [os.path.join(path, STRUCTURE_FILE), os.path.join(path, ARRAYS_FILE)]


def _exists(flag: str, path: str) -> bool:
    """Whether writing ``flag``'s output would replace something: a file, or a folder holding a saved model."""
    if flag == "--save-model" and os.path.isdir(path):
        return any(os.path.lexists(f) for f in _model_files(path))
    return os.path.lexists(path)


def check_outputs(inputs: dict[str, str | None], outputs: dict[str, str | None], overwrite: bool) -> None:
    """Refuse outputs that would destroy a file, before any work starts.

    Args:
        inputs: ``{flag: path}`` of the files or folders read (None entries are skipped).
        outputs: ``{flag: path}`` of the files (``--save-model``: the folder) written; None entries are skipped.
        overwrite: ``--overwrite`` was given: existing outputs may be replaced (inputs never).

    Returns:
        None.

    Raises:
        UserError: an output is an input or another output (whatever ``overwrite`` says), or an output
            exists and ``overwrite`` is False; one line naming the path and the flag.
    """
    try:
        guards.refuse_overwriting_inputs(inputs, outputs)
    except ValueError as e:
        raise UserError(f"{e}; --overwrite never replaces an input (nothing was run)") from None
    if overwrite:
        return
    for flag, path in outputs.items():
        if path is not None and _exists(flag, path):
            what = "holds a saved model" if flag == "--save-model" else "exists"
            raise UserError(f"{flag} {path} {what}; pass --overwrite to replace it, or choose another {flag} "
                            "(nothing was run)")


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w", **open_kwargs):
    """Open a temporary file beside ``path``; on success it is renamed to ``path``, on failure removed.

    Args:
        path: the file to write.
        mode: ``"w"`` (text) or ``"wb"``.
        **open_kwargs: passed to :func:`open` (``encoding``, ``newline``).

    Returns:
        A context manager yielding the open temporary file.
    """
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, mode, **open_kwargs) as f:
            yield f
        _keep_mode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _keep_mode(path: str, tmp: str) -> None:
    """Give the new file the permissions an ordinary ``open(path, "w")`` would (mkstemp makes it 0600)."""
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        mode = 0o666 & ~_umask()
    os.chmod(tmp, mode)


def write_text(path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_file`)."""
    with atomic_file(path, "w", encoding="utf-8") as f:
        f.write(text)


def write_csv(frame, path: str) -> None:
    """Write a pandas frame as CSV (no index) to ``path`` atomically (:func:`atomic_file`)."""
    with atomic_file(path, "w", encoding="utf-8", newline="") as f:
        frame.to_csv(f, index=False)


def save_model_atomic(model, path: str, *, schema=None) -> None:
    """:func:`pgmjax.model.serialization.save_model` into a temporary folder beside ``path``, then moved in.

    Args:
        model: the :class:`~pgmjax.GraphicalModel`.
        path: the model folder; a new folder is renamed into place whole, an existing one gets each file replaced.
        schema: stored with the model (see ``save_model``).

    Returns:
        None.
    """
    from ..model.serialization import save_model

    path = os.path.abspath(path)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=os.path.dirname(path))
    try:
        save_model(model, tmp, schema=schema)
        if not os.path.exists(path):
            os.chmod(tmp, 0o777 & ~_umask())
            os.replace(tmp, path)
            return
        for src, dst in zip(_model_files(tmp), _model_files(path)):
            if os.path.exists(src):
                os.replace(src, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask
