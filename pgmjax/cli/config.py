"""``pgmjax run --config FILE``: a :class:`pgmjax.Synthesizer` configuration (JSON or YAML) as command-line flags.

The file is the one :meth:`pgmjax.Synthesizer.from_config` reads, checked by it (an unknown key or a bad value is
refused, exit 2, before anything is read), and each of its settings becomes the flag that says the same thing.
The flags go before the command line's own, so a flag given on the command line wins over the file's value (a
repeatable flag, ``--option``, adds to the file's).
"""

from __future__ import annotations

import json

from .errors import UserError

#: Each setting's flag (single-valued).
FLAGS = {"mechanism": "--mechanism", "epsilon": "--epsilon", "delta": "--delta", "preprocess_fraction": "--preprocess-fraction",
         "bins": "--bins", "min_count": "--min-count", "discovery_delta": "--discovery-delta",
         "engine_iters": "--engine-iters", "max_model_mb": "--max-model-mb", "workload": "--workload",
         "public_stddev": "--public-stddev"}
#: Each mapping setting's repeatable flag and how one entry is written.
PAIRS = {"ranges": ("--range", lambda k, v: f"{k}={v[0]}:{v[1]}"), "kinds": ("--kind", lambda k, v: f"{k}={v}"),
         "decimals": ("--decimals", lambda k, v: f"{k}={v}"), "date_formats": ("--date-format", lambda k, v: f"{k}={v}"),
         "options": ("--option", lambda k, v: f"{k}={json.dumps(v)}"),
         "fit_options": ("--engine-option", lambda k, v: f"{k}={json.dumps(v)}")}


def config_path(argv: list[str]) -> str | None:
    """The ``--config`` value of a ``run`` command line, or None."""
    for i, token in enumerate(argv):
        if token == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if token.startswith("--config="):
            return token.split("=", 1)[1]
    return None


def config_flags(path: str) -> list[str]:
    """The flags that say what the configuration file ``path`` says.

    Example:
        >>> import json, tempfile, os
        >>> f = os.path.join(tempfile.mkdtemp(), "s.json")
        >>> _ = open(f, "w").write(json.dumps({"mechanism": "mst", "epsilon": 0.5, "ranges": {"age": [0, 120]}}))
        >>> config_flags(f)
        ['--mechanism', 'mst', '--epsilon', '0.5', '--range', 'age=0:120']

    Raises:
        UserError: the file is missing, not JSON or YAML, or holds an unknown setting or a bad value.
    """
    from ..synthesizer import Synthesizer, read_config

    try:
        config = read_config(path, "--config")
        Synthesizer.from_config(config)  # every key and value checked, as in Python
    except FileNotFoundError:
        raise UserError(f"--config: no such file: {path}") from None
    except (ValueError, TypeError) as e:
        raise UserError(f"--config {path}: {str(e).removeprefix('Synthesizer.from_config: ')}") from None
    flags: list[str] = []
    for name, value in config.items():
        if name in FLAGS:
            if value is None:
                continue
            if name == "workload" and not isinstance(value, str):
                raise UserError(f"--config {path}: workload must be all-2way, all-3way or a JSON file of cliques on the "
                                f"command line, got {value!r}")
            flags += [FLAGS[name], str(value)]
        else:
            flag, write = PAIRS[name]
            for k, v in (value or {}).items():
                flags += [flag, write(k, v)]
    return flags
