"""Checkpoints of a long mechanism run (AIM's and MWEM's rounds): keep what was measured, resume it later.

A run given ``checkpoint=Checkpoint("run.ckpt")`` (or a path) writes, after each round, what the rounds so
far released and spent into that folder; run again with the same data, key, settings and checkpoint, it
continues from the last round written instead of starting over. Ctrl-C during the rounds ends the run with a
:class:`RunInterrupted` (a ``KeyboardInterrupt``) whose message says what the checkpoint holds and how to
resume.

What a checkpoint holds: the noisy measurements (already private outputs), the privacy ledger (every noise
addition with its cost), the model fitted to them (post-processing), the mechanism's loop state (the round,
its noise, its log) and fingerprints of the run: the data (a SHA-256 digest of its records, never a record),
the key (a digest), the mechanism and its settings. Never the data.

Privacy. The ledger in the checkpoint is the record of what was spent: a resumed run restores it into a fresh
:class:`~pgmjax.privacy.Accountant` of the same budget (:meth:`~pgmjax.privacy.Accountant.restore`, which
checks every entry's cost against its noise), so those rounds count exactly once and the rounds left get
exactly what is left. It continues the same key stream, so each round draws the noise it would have drawn
uninterrupted: a round the interrupt cut short (its selection drawn, say, but not written) is drawn again with
the same randomness, which releases nothing new, and the resumed run's release (measurements, ledger, model) is
the uninterrupted run's. A checkpoint of another run (other data, key, mechanism, budget or settings) is
refused, naming what differs: resuming it would mix two runs' releases and their budgets.

Files. ``checkpoint.json`` (the state, the fingerprints, the ledger) names the round folder
``round-NNNNNN/`` holding the model (:func:`pgmjax.save_model`'s format) and ``measurements.npz``; a round
folder is written complete under a temporary name and renamed, then ``checkpoint.json`` is replaced
atomically (temporary file + rename), then older round folders are removed: a crash at any point leaves the
previous complete checkpoint. Folders are created with mode 0700, files 0600, and an existing folder must be
the user's.

Example:
    >>> import tempfile, jax, numpy as np, pgmjax as pj
    >>> from pgmjax.mechanisms import aim
    >>> data = pj.Dataset(np.random.default_rng(0).integers(0, [3, 4, 2], (500, 3)), {"a": 3, "b": 4, "c": 2})
    >>> folder = tempfile.mkdtemp() + "/aim.ckpt"
    >>> first = aim(data, 1.0, key=jax.random.key(0), rounds=3, max_model_mb=1.0, engine_iters=50, checkpoint=folder)
    >>> again = aim(data, 1.0, key=jax.random.key(0), rounds=3, max_model_mb=1.0, engine_iters=50, checkpoint=folder)
    >>> again.ledger == first.ledger, again.accountant.spent == again.accountant.budget  # nothing measured again
    (True, True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import math
import os
import shutil
import stat
from dataclasses import dataclass, field

import jax
import numpy as np

from ..data.domain import Domain
from ..model.fit_report import Fit
from ..model.model_files import save_model
from ..model.serialization import load_model
from ..queries.measurement_files import measurements_from_arrays, measurements_to_arrays

__all__ = ["Checkpoint", "RunInterrupted", "RunState", "Keeper", "SAVES", "fingerprint"]

FORMAT = "pgmjax-checkpoint"
VERSION = 1
STATE_FILE = "checkpoint.json"
MEASUREMENTS_FILE = "measurements.npz"
#: When a checkpoint is written: after every round, or only when the run is interrupted.
SAVES = ("round", "interrupt")


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a checkpointed run's rounds: the message says what the checkpoint holds and how to resume.

    A ``KeyboardInterrupt``, so that code which stops on Ctrl-C still stops.

    Attributes:
        checkpoint: the folder, or None (no checkpoint configured).
        round: the last round it holds, or None when nothing was kept.
        held: what was kept, in words (``"checkpoint DIR holds rounds 1..k (...)"``), or None.
    """

    def __init__(self, message: str, checkpoint: str | None = None, round: int | None = None, held: str | None = None):
        super().__init__(message)
        self.checkpoint, self.round, self.held = checkpoint, round, held


@dataclass(frozen=True)
class Checkpoint:
    """Where and when a long run keeps its rounds (the ``checkpoint=`` option of :func:`~pgmjax.mechanisms.aim`
    and :func:`~pgmjax.mechanisms.mwem`).

    Args:
        path: the folder (created, mode 0700; an existing one must be the user's). If it already holds a
            checkpoint of this run, the run resumes from it; of another run, the run is refused.
        save: ``"round"`` (default): written after every round, so a crash or kill loses at most one round;
            ``"interrupt"``: written only when the run is interrupted (Ctrl-C), from the last round completed
            (no writing while the run goes well).

    Example:
        >>> Checkpoint("run.ckpt").save
        'round'
    """

    path: str
    save: str = "round"

    def __post_init__(self):
        if not isinstance(self.path, (str, os.PathLike)) or not os.fspath(self.path):
            raise TypeError(f"Checkpoint: path must be a folder name (a str or path), got {self.path!r}")
        object.__setattr__(self, "path", os.fspath(self.path))
        if self.save not in SAVES:
            raise ValueError(f"Checkpoint: save must be one of {SAVES}, got {self.save!r}")

    @classmethod
    def of(cls, value, where: str) -> "Checkpoint | None":
        """``value`` as a Checkpoint: None, a folder name (``save="round"``) or a Checkpoint; else a TypeError
        naming ``where``."""
        if value is None or isinstance(value, Checkpoint):
            return value
        if isinstance(value, (str, os.PathLike)):
            return cls(value)
        raise TypeError(f"{where}: checkpoint must be a folder name or a pgmjax.mechanisms.Checkpoint, "
                        f"got {type(value).__name__}")


@dataclass
class RunState:
    """A run after a round: what a checkpoint holds (the mechanism's own loop state in ``extra``).

    Attributes:
        round: the rounds done (0: the set-up before the first round).
        measurements: the noisy measurements so far (identity queries on cliques).
        fitted: the fit to them (a :class:`~pgmjax.Fit`: the model and its report, whose step size and
            iterations the next round's refit continues from), or None.
        ledger: the accountant's records (:meth:`~pgmjax.privacy.Accountant.records`).
        log: the mechanism's per-round log.
        extra: the mechanism's loop state (numbers, booleans, strings, lists).
    """

    round: int
    measurements: list
    fitted: object
    ledger: list
    log: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)


def fingerprint(mechanism: str, data, key, settings: dict) -> dict:
    """The identity of a run: the mechanism, digests of the data and the key, and its settings as JSON text.

    The data digest is over the domain and the records (a table whose records stay with Polars or Dask: its
    one-way count tables); only the digest is kept, never a record.
    """
    h = hashlib.sha256(json.dumps(data.domain.to_dict()).encode())
    try:
        records = np.ascontiguousarray(data.records, dtype=np.int64)
        h.update(b"records")
        h.update(str(records.shape).encode())
        h.update(records.tobytes())
    except TypeError:  # the records stay with the engine: its count tables
        h.update(b"one-way")
        for table in data.marginals([(a,) for a in data.domain.attributes]):
            h.update(np.ascontiguousarray(table, dtype=np.float64).tobytes())
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        key_bytes = np.asarray(jax.random.key_data(key)).tobytes() + str(jax.random.key_impl(key)).encode()
    else:
        key_bytes = np.asarray(key).tobytes()
    return {"mechanism": mechanism, "data": h.hexdigest(), "key": hashlib.sha256(key_bytes).hexdigest(),
            "settings": {k: _text(v) for k, v in settings.items()}}


class Keeper:
    """A run's side of its checkpoint: resume from it, keep each round, and the message of an interrupt.

    Args:
        checkpoint: the :class:`Checkpoint`, or None (then :meth:`resume` finds nothing and nothing is written).
        run: the run's :func:`fingerprint`.
        where: the front-end's name, for messages.
    """

    def __init__(self, checkpoint: Checkpoint | None, run: dict, where: str):
        self.checkpoint, self.run, self.where = checkpoint, run, where
        self.last: RunState | None = None  # the last round completed
        self.accountant = None  # the run's, from resume()
        self.resumed_from: int | None = None  # the checkpoint's round the run resumed after
        self.saved: int | None = None  # the round the folder holds

    def check_folder(self) -> None:
        """Refuse, before any private computation, a checkpoint folder that is not a folder or not the user's, or
        whose checkpoint is of another run."""
        if self.checkpoint is None:
            return
        path = self.checkpoint.path
        if os.path.exists(path):
            st = os.stat(path)
            if not stat.S_ISDIR(st.st_mode):
                raise ValueError(f"{self.where}: checkpoint {path} exists and is not a folder")
            if hasattr(os, "getuid") and st.st_uid != os.getuid():
                raise ValueError(f"{self.where}: checkpoint folder {path} belongs to another user: use a folder of yours "
                                 "(the checkpoint holds the run's noisy measurements)")
        self._state()  # a checkpoint of another run is refused now, not after the data are read

    def resume(self, domain: Domain, accountant) -> RunState | None:
        """The checkpointed state of this run (its ledger restored into ``accountant``, the run's), or None to start
        afresh. Called once, before the run's first private computation.

        Raises:
            ValueError: the checkpoint is of another run (naming what differs) or corrupted.
        """
        self.accountant = accountant
        state = self._state()
        if state is None:
            return None
        folder = os.path.join(self.checkpoint.path, state["folder"])
        blob = _read(os.path.join(folder, MEASUREMENTS_FILE))
        if hashlib.sha256(blob).hexdigest() != state["measurements_sha256"]:
            raise ValueError(f"{self.where}: checkpoint {self.checkpoint.path} is corrupted ({MEASUREMENTS_FILE} does "
                             f"not match {STATE_FILE})")
        with np.load(io.BytesIO(blob), allow_pickle=False) as arrays:
            measurements = measurements_from_arrays(arrays, state["measurements"], domain,
                                                    f"{self.where}: checkpoint {self.checkpoint.path}")
        fitted = None
        if state["model"] is not None:
            model, report = load_model(os.path.join(folder, "model"), report=True)
            fitted = Fit(model, dataclasses.replace(report, step_size=state["model"]["step_size"]))
        accountant.restore(_from_json(state["ledger"]))
        self.saved = self.resumed_from = state["round"]
        self.last = RunState(state["round"], measurements, fitted, accountant.records(), _from_json(state["log"]),
                             _from_json(state["extra"]))
        return self.last

    def round_done(self, state: RunState) -> None:
        """Round ``state.round`` is complete: keep it (written now with ``save="round"``)."""
        self.last = state
        if self.checkpoint is not None and self.checkpoint.save == "round":
            self._write(state)

    @contextlib.contextmanager
    def interruptible(self):
        """Run the rounds inside: Ctrl-C (a ``KeyboardInterrupt``) becomes :meth:`interrupted`'s
        :class:`RunInterrupted`, the rounds completed kept."""
        try:
            yield
        except RunInterrupted:
            raise
        except KeyboardInterrupt:
            raise self.interrupted() from None

    def interrupted(self) -> RunInterrupted:
        """The exception for Ctrl-C: the last completed round written (if not yet), and a message saying what the
        checkpoint holds and how to resume (or that nothing was kept)."""
        where, ck = self.where, self.checkpoint
        if ck is None:
            return RunInterrupted(f"{where}: interrupted; nothing was kept (give checkpoint= to keep the rounds and "
                                  "resume them)")
        if self.last is None:
            return RunInterrupted(f"{where}: interrupted before the first measurements were fitted: the checkpoint "
                                  f"{ck.path} holds nothing", ck.path)
        if self.saved != self.last.round:
            self._write(self.last)
        spent = math.fsum(r["cost"] for r in self.last.ledger)
        held = (f"checkpoint {ck.path} holds rounds 1..{self.last.round} ({len(self.last.measurements)} noisy measurements, "
                f"{spent:.6g} of {self.accountant.budget:.6g} {self.accountant.currency} spent)")
        return RunInterrupted(f"{where}: interrupted after round {self.last.round}: {held}; run again with the same data, "
                              "key, settings and checkpoint to resume (the rest of the budget is spent then, not again)",
                              ck.path, self.last.round, held)

    # ------------------------------------------------------------------------------------------------
    def _state(self) -> dict | None:
        if self.checkpoint is None:
            return None
        path = os.path.join(self.checkpoint.path, STATE_FILE)
        if not os.path.isfile(path):
            return None
        try:
            state = json.loads(_read(path, 64 << 20).decode())
        except (ValueError, UnicodeDecodeError) as e:
            raise ValueError(f"{self.where}: checkpoint {path} is corrupted (not JSON: {type(e).__name__})") from None
        if not isinstance(state, dict) or state.get("format") != FORMAT or state.get("version") != VERSION:
            raise ValueError(f"{self.where}: {path} is not a pgmjax checkpoint (format {FORMAT!r} version {VERSION})")
        differ = _differences(state.get("run", {}), self.run)
        if differ:
            raise ValueError(
                f"{self.where}: checkpoint {self.checkpoint.path} is of another run: {'; '.join(differ)}. Resume it with "
                "the same data, key and settings, or give another checkpoint folder (a fresh run spends its budget "
                "again on the same data)")
        return state

    def _write(self, state: RunState) -> None:
        try:
            self._write_files(state)
        except OSError as e:  # the user asked for the rounds to be kept: a run that cannot keep them stops
            raise OSError(f"{self.where}: could not write checkpoint {self.checkpoint.path}: {e}") from e

    def _write_files(self, state: RunState) -> None:
        root = self.checkpoint.path
        os.makedirs(root, mode=0o700, exist_ok=True)
        name = f"round-{state.round:06d}"
        partial = os.path.join(root, name + ".partial")
        if os.path.exists(partial):
            shutil.rmtree(partial)
        os.mkdir(partial, 0o700)
        arrays, meta = measurements_to_arrays(state.measurements)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        blob = buffer.getvalue()
        _write_private(os.path.join(partial, MEASUREMENTS_FILE), blob)
        model = None
        if state.fitted is not None:
            save_model(state.fitted.model, os.path.join(partial, "model"), report=state.fitted.report)
            os.chmod(os.path.join(partial, "model"), 0o700)
            for f in os.listdir(os.path.join(partial, "model")):
                os.chmod(os.path.join(partial, "model", f), 0o600)
            model = {"step_size": state.fitted.report.step_size}
        final = os.path.join(root, name)
        if os.path.exists(final):
            shutil.rmtree(final)
        os.rename(partial, final)
        doc = {"format": FORMAT, "version": VERSION, "run": self.run, "round": state.round, "folder": name,
               "measurements": meta, "measurements_sha256": hashlib.sha256(blob).hexdigest(), "model": model,
               "ledger": _to_json(state.ledger), "log": _to_json(state.log), "extra": _to_json(state.extra)}
        tmp = os.path.join(root, f".{STATE_FILE}.{os.getpid()}.tmp")
        _write_private(tmp, json.dumps(doc).encode())
        os.replace(tmp, os.path.join(root, STATE_FILE))
        self.saved = state.round
        for f in os.listdir(root):  # the rounds before: superseded
            if f.startswith("round-") and f != name:
                shutil.rmtree(os.path.join(root, f), ignore_errors=True)


def _write_private(path: str, blob: bytes) -> None:
    """``blob`` to a new file only the user can read (0600)."""
    if os.path.exists(path):
        os.remove(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(blob)
        f.flush()
        os.fsync(f.fileno())


def _read(path: str, cap: int | None = None) -> bytes:
    with open(path, "rb") as f:
        return f.read() if cap is None else f.read(cap)


def _to_json(value):
    """JSON-ready ``value`` that keeps tuples (cliques) apart from lists: ``{"tuple": [...]}``."""
    if isinstance(value, tuple):
        return {"tuple": [_to_json(v) for v in value]}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        return value.item()
    return value


def _from_json(value):
    if isinstance(value, dict):
        if set(value) == {"tuple"}:
            return tuple(_from_json(v) for v in value["tuple"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def _text(value) -> str:
    """A setting as canonical JSON text (what is compared between the checkpoint and the run)."""
    return json.dumps(_to_json(value), sort_keys=True, default=repr)


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _differences(saved: dict, run: dict) -> list[str]:
    """What differs between the checkpoint's run and this one, in words (digests are never shown)."""
    out = []
    if saved.get("mechanism") != run["mechanism"]:
        out.append(f"the mechanism (checkpoint {saved.get('mechanism')!r}, this run {run['mechanism']!r})")
    if saved.get("data") != run["data"]:
        out.append("the data (not the same records or domain)")
    if saved.get("key") != run["key"]:
        out.append("the key (another seed)")
    if saved.get("mechanism") == run["mechanism"]:
        theirs = saved.get("settings", {})
        for k in sorted(set(theirs) | set(run["settings"])):
            a, b = theirs.get(k), run["settings"].get(k)
            if a != b:
                out.append(f"{k} (checkpoint {_short(str(a))}, this run {_short(str(b))})")
    return out
