"""Saving and loading fitted models: JSON for the structure, NPZ for the numbers, no pickle.

Format ``pgmjax-model`` version 1: ``save(path)`` writes the folder ``path``
holding two files.

``model.json``::

    {
      "format": "pgmjax-model",
      "version": 1,
      "domain": {"age": 85, "sex": 2, ...},          # attribute -> size, in order
      "cliques": [["age", "sex"], ...],              # junction-tree cliques (domain order)
      "free": ["fnlwgt", ...],                       # attributes in no model clique (optional; default none)
      "total": 48842.0,
      "dtype": "float32",
      "loss": 123.4,                                 # or null
      "history": [{"iteration": 50, "loss": ..., "oracle_calls": ..., "seconds": ...}, ...],
      "arrays": {"file": "potentials.npz", "sha256": "<hex digest of that file>"}
    }

``potentials.npz``: one array per clique, ``clique_<i>``, the log-potential
table of ``cliques[i]`` with axes in that clique's order (``-inf`` allowed).

Loading rebuilds the junction tree from the cliques (deterministic) and
places every table back, so a round trip reproduces the potentials, and hence
every answer, bit for bit. The file's digest is checked before it is read.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os

import numpy as np

from .domain import Domain

FORMAT = "pgmjax-model"
VERSION = 1
_STRUCTURE = "model.json"
_ARRAYS = "potentials.npz"


def save_model(model, path: str | os.PathLike) -> str:
    """Write ``model`` to the folder ``path`` (created; existing files of the format are replaced).

    Args:
        model: a :class:`~pgmjax.GraphicalModel`.
        path: a folder.

    Returns:
        The folder's path.

    Example:
        >>> model.save("adult-model")                 # doctest: +SKIP
        >>> same = pj.load_model("adult-model")       # doctest: +SKIP
    """
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"save: {path} exists and is not a folder")
    os.makedirs(path, exist_ok=True)
    potentials = model.potentials
    buffer = io.BytesIO()
    np.savez(buffer, **{f"clique_{i}": np.asarray(potentials[c]) for i, c in enumerate(model.cliques)})
    blob = buffer.getvalue()
    loss = model.loss
    structure = {
        "format": FORMAT,
        "version": VERSION,
        "domain": model.domain.to_dict(),
        "cliques": [list(c) for c in model.cliques],
        "free": [c[0] for c, n in zip(model.cliques, model.plan.padded) if n is not None],
        "total": model.total,
        "dtype": np.dtype(model.dtype).name,
        "loss": None if loss is None or not math.isfinite(loss) else float(loss),
        "history": [
            {k: v for k, v in h.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
            for h in model.history
        ],
        "arrays": {"file": _ARRAYS, "sha256": hashlib.sha256(blob).hexdigest()},
    }
    with open(os.path.join(path, _ARRAYS), "wb") as f:
        f.write(blob)
    with open(os.path.join(path, _STRUCTURE), "w") as f:
        json.dump(structure, f, indent=1)
    return path


def load_model(path: str | os.PathLike):
    """Read a model written by :func:`save_model`.

    Raises:
        FileNotFoundError: the folder or one of its files is missing.
        ValueError: not a pgmjax model, an unsupported version, or corrupted
            content (bad JSON, digest mismatch, wrong table shapes).
    """
    from . import oracle
    from .model import GraphicalModel

    path = os.fspath(path)
    structure_path = os.path.join(path, _STRUCTURE)
    if not os.path.isfile(structure_path):
        raise FileNotFoundError(f"load_model: {structure_path} not found (save() writes a folder holding {_STRUCTURE})")
    try:
        with open(structure_path) as f:
            structure = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"load_model: {structure_path} is corrupted (not valid JSON: {e})") from None
    if not isinstance(structure, dict) or structure.get("format") != FORMAT:
        raise ValueError(f"load_model: {structure_path} is not a pgmjax model file (format field != {FORMAT!r})")
    version = structure.get("version")
    if version != VERSION:
        raise ValueError(f"load_model: {path} has format version {version!r}; this pgmjax reads version {VERSION}")
    try:
        domain = Domain(structure["domain"])
        cliques = [tuple(c) for c in structure["cliques"]]
        free = {str(a) for a in structure.get("free", [])}
        total = float(structure["total"])
        dtype = np.dtype(structure["dtype"])
        digest = structure["arrays"]["sha256"]
        arrays_file = structure["arrays"]["file"]
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"load_model: {structure_path} is corrupted (bad or missing field: {e})") from None
    arrays_path = os.path.join(path, os.path.basename(arrays_file))
    if not os.path.isfile(arrays_path):
        raise FileNotFoundError(f"load_model: {arrays_path} not found")
    with open(arrays_path, "rb") as f:
        blob = f.read()
    if hashlib.sha256(blob).hexdigest() != digest:
        raise ValueError(f"load_model: {arrays_path} is corrupted (its SHA-256 digest does not match model.json)")
    with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
        tables = {}
        for i, c in enumerate(cliques):
            key = f"clique_{i}"
            if key not in npz:
                raise ValueError(f"load_model: {arrays_path} lacks the table {key} of clique {c}")
            t = npz[key]
            if t.shape != domain.shape_of(c):
                raise ValueError(f"load_model: table {key} of clique {c} has shape {t.shape}, expected {domain.shape_of(c)}")
            tables[c] = t
    # The free attributes' singletons are left to the junction tree, as when the model was fitted: the same
    # plan, padding included, hence the same arithmetic.
    plan = oracle.make_plan(domain, [c for c in cliques if not (len(c) == 1 and c[0] in free)])
    if set(plan.cliques) != set(cliques):
        raise ValueError(f"load_model: the cliques in {structure_path} are not the cliques of a junction tree")
    # Each table is added to zeros in float64 and cast back: exact, so the round trip is bit for bit.
    theta = plan.from_tables(tables, dtype)
    model = GraphicalModel(plan, theta, total, structure.get("history") or [])
    if structure.get("loss") is not None:
        model.loss = float(structure["loss"])
    return model
