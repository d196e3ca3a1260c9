"""The ``pgmjax`` command line (a package: one module per command or concern).

* ``pgmjax demo`` draws a dataset from a random ground-truth graphical model, measures noisy
  marginals, estimates a model from them and prints how much closer the model is to the truth than
  the raw noisy answers (no data needed).
* ``pgmjax run`` runs a privacy mechanism (MWEM, PrivBayes, DualQuery, HDMM, MST, AIM, MLDP; see
  :mod:`pgmjax.mechanisms.registry`) on a CSV file and writes synthetic data, a summary and a JSON
  report; integer-coded data comes with a domain JSON, raw data (numbers, text) with a
  discretisation schema (:mod:`pgmjax.data.schema`) and is decoded back to the original values.
  Raw data without a schema gets one derived with differential privacy inside the run's budget.
* ``pgmjax sample`` draws more synthetic records from a saved model (post-processing, no budget).
* ``pgmjax schema`` writes a schema for a raw CSV (private with ``--epsilon``); ``pgmjax report``
  compares a synthetic table with the real one; ``pgmjax mechanisms`` lists the mechanisms;
  ``pgmjax info`` prints the versions, JAX's backend and devices (:func:`pgmjax.cli.info.device_info`).

Exit codes: 0 success; 2 bad command line or input (missing file, column not in the domain, value out
of range, epsilon <= 0, unknown or unavailable mechanism, ...), reported in one line on stderr
before any long computation; 1 a run that failed (``--debug`` shows the traceback).

Modules: :mod:`~pgmjax.cli.parser` (the parser, :func:`main`, and :func:`console_main`, the executable's entry,
which compiles with :func:`pgmjax.programs.fast_compile`), :mod:`~pgmjax.cli.run` (``pgmjax run``),
:mod:`~pgmjax.cli.inputs` (files, domain, schema, workload), :mod:`~pgmjax.cli.summary` (the printed summary
and the JSON report), :mod:`~pgmjax.cli.progress`, :mod:`~pgmjax.cli.arguments` (argument types),
:mod:`~pgmjax.cli.errors`, :mod:`~pgmjax.cli.demo`, :mod:`~pgmjax.cli.commands` (``schema``, ``mechanisms``),
:mod:`~pgmjax.cli.preprocessing` (private schema inside a run), :mod:`~pgmjax.cli.report` (``pgmjax report``),
:mod:`~pgmjax.cli.sample` (``pgmjax sample``), :mod:`~pgmjax.cli.intervals` (``--intervals``),
:mod:`~pgmjax.cli.guards` (what a run refuses and what it never prints), :mod:`~pgmjax.cli.info` (``pgmjax info``),
:mod:`~pgmjax.cli.outputs` (every output checked before any work, ``--overwrite``, written as a set),
:mod:`~pgmjax.cli.tempfiles` (temporary files: names, stale ones removed, SIGTERM).
"""

from __future__ import annotations

from .demo import random_bayes_net_data
from .errors import RunFailure, UserError
from .parser import build_parser, console_main, main

__all__ = ["main", "console_main", "build_parser", "random_bayes_net_data", "UserError", "RunFailure"]
