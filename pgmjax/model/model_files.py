"""Writing a model folder: the structure as JSON, the potentials as a NumPy archive with its digest.

The format (read back by :func:`pgmjax.model.serialization.load_model`, which documents it) is written here,
apart from the reader, so that :meth:`pgmjax.GraphicalModel.save` needs nothing that imports the model class.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os

import numpy as np

from ..graph.marginal_oracle import SIZE_CLASS, oracle_of

FORMAT = "pgmjax-model"
VERSION = 1
#: The files of a saved model folder: the structure (JSON) and the tables (NumPy archive).
STRUCTURE_FILE = "model.json"
ARRAYS_FILE = "potentials.npz"


def save_model(model, path: str | os.PathLike, *, schema=None, report=None) -> str:
    """Write ``model`` to the folder ``path`` (created; existing files of the format are replaced).

    Args:
        model: a :class:`~pgmjax.GraphicalModel`.
        path: a folder.
        schema: optional :class:`~pgmjax.Schema` over the model's domain, stored in ``model.json``
            (field ``"schema"``, its JSON form) so that samples can be decoded to raw values
            (:func:`load_model_schema`).
        report: optional :class:`~pgmjax.model.fit_report.FitReport` of the fit: its loss and per-chunk log are
            stored in ``model.json`` (fields ``"loss"`` and ``"history"``; ``load_model(path, report=True)``).

    Returns:
        The folder's path.

    Raises:
        FloatingPointError: the model is not finite and consistent (nothing is written).
        ValueError: ``path`` exists and is not a folder.

    Example:
        >>> model.save("adult-model")                 # doctest: +SKIP
        >>> same = pj.load_model("adult-model")       # doctest: +SKIP
    """
    path = os.fspath(path)
    if getattr(model, "approximate", False):
        raise ValueError(f"save: an approximate model is not saved (to {path}): the model files hold a junction tree's "
                         "potentials, not a region graph's; fit with oracle='exact' to save the model")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"save: {path} exists and is not a folder")
    model.check("save")
    if schema is not None and schema.domain != model.domain:
        raise ValueError(f"save: the schema's domain {schema.domain} is not the model's {model.domain}")
    os.makedirs(path, exist_ok=True)
    potentials = model.potentials
    buffer = io.BytesIO()
    np.savez(buffer, **{f"clique_{i}": np.asarray(potentials[c]) for i, c in enumerate(model.cliques)})
    blob = buffer.getvalue()
    loss = None if report is None else report.loss
    structure = {
        "format": FORMAT,
        "version": VERSION,
        "domain": model.domain.to_dict(),
        "cliques": [list(c) for c in model.cliques],
        "free": [c[0] for c, n in zip(model.cliques, model.plan.padded) if n is not None],
        # the program its answers come from (pgmjax.estimation.oracles): loaded with the same one, they are bit for bit
        "program": "size_class" if oracle_of(model.plan) is SIZE_CLASS else "dense",
        # a size-class plan's steps are shaped for the platform it was fitted on (its windows, hence its sums' order)
        **({"platform": model.plan.host.platform} if oracle_of(model.plan) is SIZE_CLASS else {}),
        "total": model.total,
        "dtype": np.dtype(model.dtype).name,
        "loss": None if loss is None or not math.isfinite(loss) else float(loss),
        "history": [
            {k: v for k, v in h.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
            for h in (() if report is None else report.history)
        ],
        "arrays": {"file": ARRAYS_FILE, "sha256": hashlib.sha256(blob).hexdigest()},
    }
    if schema is not None:
        structure["schema"] = schema.to_dict()
    with open(os.path.join(path, ARRAYS_FILE), "wb") as f:
        f.write(blob)
    with open(os.path.join(path, STRUCTURE_FILE), "w") as f:
        json.dump(structure, f, indent=1)
    return path
