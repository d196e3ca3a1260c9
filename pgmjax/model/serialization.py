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
      "program": "size_class",                       # the compiled program it was fitted with (optional; default "dense")
      "platform": "gpu",                             # size class: the platform its steps were shaped for (optional; default "cpu")
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
every answer, bit for bit. The file's digest is checked before it is read,
every field is validated (a corrupted field raises ``ValueError`` naming it),
and a model that is not finite and consistent is neither saved nor loaded
(:func:`pgmjax.model.consistency.check_consistent`).

A model folder is read as untrusted input: no size it declares is trusted before it is checked
(:mod:`pgmjax.model.safe_read`). ``model.json`` is read only up to 16 MiB and 32 levels of nesting; the
cells its domain and cliques declare must fit the model-size limit (:mod:`pgmjax.graph.size_limit`,
``PGMJAX_MAX_MODEL_BYTES``) before anything else is read; ``potentials.npz`` must fit those tables, and each
member's declared size, ``.npy`` shape and dtype must be exactly its clique's before a byte of it is
decompressed. A stored schema's ``"bins": k`` is at most :data:`pgmjax.data.schema_columns.MAX_BINS`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os

import numpy as np

from ..graph import oracle
from ..graph.routed_plan import make_routed_plan
from ..graph.routed_steps import WINDOW_COSTS
from ..graph.size_limit import check_cliques
from ..data.domain import Domain
from .graphical_model import GraphicalModel
from .fit_report import Fit, FitReport
from .model_files import ARRAYS_FILE, FORMAT, STRUCTURE_FILE, VERSION, save_model  # noqa: F401  (this module's API)
from .safe_read import npz_size_cap, read_npz_tables, read_structure

DTYPES = ("float32", "float64")


def load_model_schema(path: str | os.PathLike):
    """The :class:`~pgmjax.Schema` stored with a saved model (``save_model(..., schema=...)``), or None.

    Args:
        path: the folder ``save_model`` wrote.

    Returns:
        The schema, or None when the model was saved without one.

    Raises:
        FileNotFoundError: no ``model.json`` in ``path``.
        ValueError: ``model.json`` is over 16 MiB, nested over 32 deep or not JSON, or the stored schema
            is malformed (:class:`pgmjax.data.schema.SchemaError`, e.g. ``"bins"`` over
            :data:`~pgmjax.data.schema_columns.MAX_BINS`).

    Example:
        >>> load_model_schema("adult-model").decode(model.synthetic_data(10, key), key)  # doctest: +SKIP
    """
    from ..data.schema import Schema

    structure_path = os.path.join(os.fspath(path), STRUCTURE_FILE)
    if not os.path.isfile(structure_path):
        raise FileNotFoundError(f"load_model_schema: {structure_path} not found")
    structure = read_structure(structure_path, "load_model_schema")
    if not isinstance(structure, dict):
        raise ValueError(f"load_model_schema: {structure_path} is not a pgmjax model file (not a JSON object)")
    spec = structure.get("schema")
    if spec is None:
        return None
    schema = Schema.from_dict(spec, where=f"{structure_path}: field 'schema'")
    if schema.domain.to_dict() != structure.get("domain"):  # save_model writes the two over one domain
        raise ValueError(f"load_model_schema: {structure_path} is corrupted: field 'schema' has the domain "
                         f"{schema.domain}, field 'domain' is {_short(structure.get('domain'))}")
    return schema


def load_model(path: str | os.PathLike, *, report: bool = False) -> GraphicalModel | Fit:
    """Read a model written by :func:`save_model`, validating every field.

    Args:
        path: the folder ``save`` wrote.
        report: also return the fit's :class:`~pgmjax.model.fit_report.FitReport` as saved (its loss and
            per-chunk log; empty where the model was saved without one).

    Returns:
        The :class:`~pgmjax.GraphicalModel` (potentials bit for bit as saved); with ``report=True`` a
        :class:`~pgmjax.model.fit_report.Fit` ``(model, report)``.

    Raises:
        FileNotFoundError: the folder or one of its files is missing.
        ValueError: not a pgmjax model, an unsupported version, or corrupted
            content: bad JSON, a missing or invalid field (named in the message:
            ``domain``, ``cliques``, ``free``, ``total``, ``dtype``, ``loss``,
            ``history``, ``arrays``), a digest mismatch, an unreadable array
            file, tables of the wrong shape or dtype or holding NaN/+inf, or a
            model that is not consistent (clique marginals not summing to the total).
            Sizes are checked before they are read: ``model.json`` over 16 MiB or
            nested over 32 deep, ``potentials.npz`` larger than its tables take, a
            member declaring more bytes or another shape or dtype than its clique.
        pgmjax.graph.size_limit.ModelTooLarge: (a ``ValueError``) the cells that fields
            ``domain`` and ``cliques`` declare break the model-size limit; nothing else is read.

    Example:
        >>> model.save("adult-model")                 # doctest: +SKIP
        >>> same = pj.load_model("adult-model")       # doctest: +SKIP
    """
    path = os.fspath(path)
    structure_path = os.path.join(path, STRUCTURE_FILE)
    if not os.path.isfile(structure_path):
        raise FileNotFoundError(f"load_model: {structure_path} not found (save() writes a folder holding {STRUCTURE_FILE})")
    structure = read_structure(structure_path, "load_model")  # capped in bytes and depth before parsing
    if not isinstance(structure, dict) or structure.get("format") != FORMAT:
        raise ValueError(f"load_model: {structure_path} is not a pgmjax model file (format field != {FORMAT!r})")
    version = structure.get("version")
    if version != VERSION:
        raise ValueError(f"load_model: {path} has format version {version!r}; this pgmjax reads version {VERSION}")
    fields = _Fields(structure, structure_path)
    domain = fields.get("domain", _domain)
    cliques = fields.get("cliques", lambda v: _cliques(v, domain))
    free = fields.get("free", lambda v: _free(v, domain, cliques), default=[])
    total = fields.get("total", _total)
    dtype = fields.get("dtype", _dtype)
    loss = fields.get("loss", _loss, default=None)
    history = fields.get("history", _history, default=[])
    program = fields.get("program", _program, default="dense")
    platform = fields.get("platform", _platform, default="cpu")
    arrays_file, digest = fields.get("arrays", _arrays)
    # The cells the fields declare, against the model-size limit, before any table is read or allocated.
    check_cliques(domain, cliques, "load_model", what=f"the model of {structure_path} (fields 'domain' and 'cliques')")

    arrays_path = os.path.join(path, arrays_file)
    if not os.path.isfile(arrays_path):
        raise FileNotFoundError(f"load_model: {arrays_path} not found")
    members = [(f"clique_{i}", domain.shape_of(c)) for i, c in enumerate(cliques)]
    cap = npz_size_cap(members, dtype)
    with open(arrays_path, "rb") as f:
        blob = f.read(cap + 1)  # never more than the tables can take, whatever the file's size
    if len(blob) > cap:
        raise ValueError(f"load_model: {arrays_path} is over {cap:,} bytes, the most that the {len(cliques)} tables of "
                         f"field 'cliques' take as {dtype.name}: refused unread")
    if hashlib.sha256(blob).hexdigest() != digest:
        raise ValueError(f"load_model: {arrays_path} is corrupted (its SHA-256 digest does not match model.json)")
    tables = _read_tables(blob, arrays_path, domain, cliques, dtype)
    # The free attributes' singletons are left to the junction tree, as when the model was fitted: the same
    # plan, padding included, hence the same arithmetic.
    if program == "size_class":  # the plan the model was fitted with: the same arithmetic
        plan = make_routed_plan(domain, cliques, platform=platform)
    else:
        plan = oracle.make_plan(domain, [c for c in cliques if not (len(c) == 1 and c[0] in free)])
    if set(plan.cliques) != set(cliques):
        raise ValueError(f"load_model: field 'cliques' of {structure_path}: not the cliques of a junction tree")
    # Each table is added to zeros in float64 and cast back: exact, so the round trip is bit for bit.
    theta = plan.from_tables(tables, dtype)
    model = GraphicalModel(plan, theta, total)
    try:
        model.check("load_model")
    except FloatingPointError as e:
        raise ValueError(f"load_model: {path} holds a model that is not consistent ({arrays_file}, field 'total'): {e}") from e
    return Fit(model, FitReport(loss, None, history)) if report else model


def _program(value) -> str:
    if value not in ("dense", "size_class"):
        raise ValueError(f"must be 'dense' or 'size_class', got {value!r}")
    return value


def _platform(value) -> str:
    if value not in WINDOW_COSTS:
        raise ValueError(f"must be one of {tuple(WINDOW_COSTS)}, got {value!r}")
    return value


_REQUIRED = object()


class _Fields:
    """Reads ``model.json`` fields; any failure becomes a ``ValueError`` naming the field (cause chained)."""

    def __init__(self, structure: dict, where: str):
        self.structure, self.where = structure, where

    def get(self, name: str, parse, default=_REQUIRED):
        if name not in self.structure:
            if default is not _REQUIRED:
                return default
            raise ValueError(f"load_model: {self.where} is corrupted: field {name!r} is missing")
        value = self.structure[name]
        try:
            return parse(value)
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(f"load_model: {self.where} is corrupted: field {name!r} = {_short(value)}: {e}") from e


def _short(value) -> str:
    text = json.dumps(value, allow_nan=True) if isinstance(value, (dict, list, str, int, float, bool, type(None))) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number, got {type(value).__name__}")
    return float(value)


def _domain(value) -> Domain:
    if not isinstance(value, dict) or not value:
        raise TypeError("expected a non-empty object attribute -> number of values")
    for a, n in value.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"attribute {a!r} has size {n!r}, expected an integer >= 1")
    return Domain(value)


def _cliques(value, domain: Domain) -> list[tuple[str, ...]]:
    if not isinstance(value, list) or not value:
        raise TypeError("expected a non-empty list of cliques (lists of attribute names)")
    cliques = []
    for c in value:
        if not isinstance(c, list) or not c or not all(isinstance(a, str) for a in c):
            raise TypeError(f"clique {c!r} is not a non-empty list of attribute names")
        cliques.append(domain.check_clique(tuple(c)))
    if len(set(cliques)) != len(cliques):
        raise ValueError("a clique appears more than once")
    return cliques


def _free(value, domain: Domain, cliques) -> set[str]:
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise TypeError("expected a list of attribute names")
    for a in value:
        domain.check_clique((a,), what="free attribute")
        if (a,) not in cliques:
            raise ValueError(f"free attribute {a!r} is not a one-attribute clique")
    return set(value)


def _total(value) -> float:
    total = _number(value, "the total")
    if not (math.isfinite(total) and total > 0):
        raise ValueError("the total must be a positive finite number of records")
    return total


def _dtype(value) -> np.dtype:
    if value not in DTYPES:
        raise ValueError(f"expected one of {DTYPES}")
    return np.dtype(value)


def _loss(value) -> float | None:
    if value is None:
        return None
    loss = _number(value, "the loss")
    if not math.isfinite(loss):
        raise ValueError("the loss must be finite or null")
    return loss


def _history(value) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(h, dict) for h in value):
        raise TypeError("expected a list of objects")
    for h in value:
        for k, v in h.items():
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise TypeError(f"entry {k!r} is {_short(v)}, expected a number or text")
    return value


def _arrays(value) -> tuple[str, str]:
    if not isinstance(value, dict):
        raise TypeError('expected {"file": ..., "sha256": ...}')
    name, digest = value["file"], value["sha256"]
    if not isinstance(name, str) or not name or os.path.basename(name) != name:
        raise ValueError(f"file must be a file name in the model's folder, got {name!r}")
    if not isinstance(digest, str) or len(digest) != 64 or any(ch not in "0123456789abcdef" for ch in digest):
        raise ValueError("sha256 must be 64 lower-case hex digits")
    return name, digest


def _read_tables(blob: bytes, arrays_path: str, domain: Domain, cliques, dtype: np.dtype) -> dict:
    """The clique tables of the NPZ file: the right shape and dtype (checked before reading), finite or -inf."""
    members = [(f"clique_{i}", domain.shape_of(c)) for i, c in enumerate(cliques)]
    arrays = read_npz_tables(blob, arrays_path, members, dtype, "load_model",
                             lambda i: f"table clique_{i} of clique {cliques[i]}")
    tables = {}
    for i, (c, t) in enumerate(zip(cliques, arrays)):
        if np.isnan(t).any() or np.isposinf(t).any():
            raise ValueError(f"load_model: table clique_{i} of clique {c} holds NaN or +inf (log-potentials are finite or -inf)")
        tables[c] = t
    return tables
