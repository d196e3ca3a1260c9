"""A release's folder: the model with its schema, and beside it the measurements, the ledger and the settings.

:meth:`pgmjax.Release.save` writes, into one folder:

* ``model.json`` and ``potentials.npz``: the model and its schema (:func:`pgmjax.save_model`'s format, so
  ``pgmjax sample --model`` reads the folder as it reads any model);
* ``release.json``: format ``pgmjax-release`` version 1: the input's ``columns``, the schema's ``notes``, the
  synthesizer's ``settings`` (:meth:`pgmjax.Synthesizer.to_config`, or null where they hold a callable), one entry
  per ``stages`` (its name, the delta it adds, its accountant's budget and ledger:
  :func:`pgmjax.privacy.ledger_state`), the ``measurements``' descriptions with the digest of
  ``measurements.npz``, and the model's last ``step_size`` (so a loaded release refits as the saved one would);
* ``measurements.npz``: every noisy answer, standard deviation and query matrix
  (:mod:`pgmjax.queries.measurement_files`).

Everything in the folder is the output of differentially private steps: it may be published. It is read back as
untrusted input: the JSON with the model reader's caps (:mod:`pgmjax.model.safe_read`), the archive's digest checked
and its declared size held to the model-size limit before it is read, without pickle, each ledger record checked
(:func:`pgmjax.privacy.from_ledger_state`) and each measurement checked against the domain.
"""

from __future__ import annotations

import hashlib
import dataclasses
import io
import json
import os
import zipfile
from typing import NamedTuple

import numpy as np

from ..graph.size_limit import max_model_bytes
from ..model.model_files import save_model
from ..model.safe_read import read_structure
from ..model.serialization import load_model, load_model_schema
from ..queries.measurement_files import measurements_from_arrays, measurements_to_arrays

__all__ = ["RELEASE_FILE", "MEASUREMENTS_FILE", "ReleaseParts", "write_release", "read_release"]

FORMAT = "pgmjax-release"
VERSION = 1
#: The release's own files, beside the model's.
RELEASE_FILE = "release.json"
MEASUREMENTS_FILE = "measurements.npz"


class ReleaseParts(NamedTuple):
    """What a release folder holds (stages as ``(name, accountant dict, delta)``; empty for a model saved alone)."""

    model: object
    schema: object
    columns: tuple
    settings: dict | None
    stages: tuple
    measurements: tuple
    notes: tuple
    report: object = None


def write_release(path, model, schema, *, columns, settings, stages, measurements, notes, report=None) -> str:
    """Write a release to the folder ``path`` (created; the files of the format replaced).

    Args:
        path: a folder.
        model, schema: the model and its schema (:func:`pgmjax.save_model`).
        columns: the input's columns, in order.
        settings: a JSON-friendly mapping of the synthesizer's settings, or None.
        stages: ``(name, accountant dict, delta)`` per stage.
        measurements: the measurements the model is fitted to.
        notes: the schema's notes (strings).
        report: the fit's :class:`~pgmjax.FitReport` (its loss and log saved with the model, its step size in the
            release file), or None.

    Returns:
        The folder's path.
    """
    folder = save_model(model, path, schema=schema, report=report)
    arrays, meta = measurements_to_arrays(measurements)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    blob = buffer.getvalue()
    doc = {"format": FORMAT, "version": VERSION, "columns": list(columns), "notes": [str(n) for n in notes],
           "settings": None if settings is None else dict(settings),
           "stages": [{"name": name, "delta": float(delta), "accountant": state} for name, state, delta in stages],
           "measurements": meta, "measurements_sha256": hashlib.sha256(blob).hexdigest(),
           "step_size": None if report is None or report.step_size is None else float(report.step_size)}
    text = json.dumps(doc)  # before any file is written: a value JSON cannot hold fails here
    with open(os.path.join(folder, MEASUREMENTS_FILE), "wb") as f:
        f.write(blob)
    with open(os.path.join(folder, RELEASE_FILE), "w", encoding="utf-8") as f:
        f.write(text)
    return folder


def read_release(path) -> ReleaseParts:
    """The parts of a release folder :func:`write_release` wrote, or of a model folder saved with its schema.

    Raises:
        FileNotFoundError: no model in ``path``.
        ValueError: a model folder saved without a schema or a release file, or a release file that is corrupted
            (naming the file and the field).
    """
    where = "Synthesizer.load"
    path = os.fspath(path)
    schema = load_model_schema(path)
    release_path = os.path.join(path, RELEASE_FILE)
    if not os.path.isfile(release_path):  # a model folder (`pgmjax run --save-model`): no history
        if schema is None:
            raise ValueError(f"{where}: {path}: a model saved without a schema and without a release file (an "
                             "integer-coded command-line run): load it with pgmjax.load_model")
        return ReleaseParts(load_model(path), schema, tuple(schema.domain.attributes), None, (), (), ())
    model, report = load_model(path, report=True)
    doc = read_structure(release_path, where)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise ValueError(f"{where}: {release_path} is not a {FORMAT} file of version {VERSION}")
    try:
        columns, notes, settings = tuple(doc["columns"]), tuple(doc["notes"]), doc["settings"]
        stages = tuple((s["name"], s["accountant"], float(s["delta"])) for s in doc["stages"])
        meta, digest = doc["measurements"], doc["measurements_sha256"]
        step_size = None if doc.get("step_size") is None else float(doc["step_size"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{where}: {release_path} is corrupted (field {e})") from None
    if sorted(columns) != sorted(model.domain.attributes):
        raise ValueError(f"{where}: {release_path} is corrupted: its columns {list(columns)} are not the model's")
    blob = _read_archive(os.path.join(path, MEASUREMENTS_FILE), where)
    if hashlib.sha256(blob).hexdigest() != digest:
        raise ValueError(f"{where}: {path} is corrupted ({MEASUREMENTS_FILE} does not match {RELEASE_FILE})")
    with np.load(io.BytesIO(blob), allow_pickle=False) as arrays:
        measurements = tuple(measurements_from_arrays(arrays, meta, model.domain, f"{where}: {path}"))
    report = dataclasses.replace(report, step_size=step_size)  # a refit continues from it
    return ReleaseParts(model, schema, columns, settings, stages, measurements, notes, report)


def _read_archive(path: str, where: str) -> bytes:
    """The archive's bytes, refused unread where the file or the arrays it declares exceed the model-size limit."""
    limit = max_model_bytes()
    if os.path.getsize(path) > limit:
        raise ValueError(f"{where}: {path} is larger than the model-size limit ({limit:.4g} bytes): refused unread")
    with open(path, "rb") as f:
        blob = f.read()
    try:
        declared = sum(info.file_size for info in zipfile.ZipFile(io.BytesIO(blob)).infolist())
    except zipfile.BadZipFile as e:
        raise ValueError(f"{where}: {path} is corrupted (not a NumPy archive: {e})") from None
    if declared > limit:
        raise ValueError(f"{where}: {path} declares {declared:,} bytes of arrays, above the model-size limit "
                         f"({limit:.4g} bytes): refused unread")
    return blob
