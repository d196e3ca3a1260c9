"""The ``pgmjax`` command line.

* ``pgmjax demo`` draws a dataset from a random ground-truth graphical model, measures noisy
  marginals, estimates a model from them and prints how much closer the model is to the truth than
  the raw noisy answers (no data needed).
* ``pgmjax run`` runs a privacy mechanism (MWEM, PrivBayes, DualQuery, HDMM, MST, AIM, MLDP; see
  :mod:`pgmjax.mechanisms.registry`) on a CSV file and writes synthetic data, a summary and a JSON
  report; integer-coded data comes with a domain JSON, raw data (numbers, text) with a
  discretisation schema (:mod:`pgmjax.schema`) and is decoded back to the original values.
  Raw data without a schema gets one derived with differential privacy inside the run's budget.
* ``pgmjax sample`` draws more synthetic records from a saved model (post-processing, no budget).
* ``pgmjax schema`` writes a schema for a raw CSV (private with ``--epsilon``); ``pgmjax report``
  compares a synthetic table with the real one; ``pgmjax mechanisms`` lists the mechanisms.

Exit codes: 0 success; 2 bad command line or input (missing file, column not in the domain, value out
of range, epsilon <= 0, unknown or unavailable mechanism, ...), reported in one line on stderr
before any long computation; 1 a run that failed (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

import numpy as np

from . import cli_guards, cli_intervals, cli_preprocess, cli_sample
from .domain import cells_text


def random_bayes_net_data(attributes: int, records: int, seed: int, max_parents: int = 2):
    """Sample records from a random Bayesian network (a graphical model with known structure).

    Attribute i has 2-8 values and up to ``max_parents`` parents among
    attributes 0..i-1; its conditional tables are Dirichlet(0.5) draws.

    Returns:
        ``(domain dict, records (n, d) int array, parents list)``.
    """
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 9, size=attributes)
    parents = []
    records_out = np.zeros((records, attributes), dtype=np.int64)
    for i in range(attributes):
        k = int(rng.integers(0, min(max_parents, i) + 1)) if i else 0
        pa = sorted(rng.choice(i, size=k, replace=False).tolist()) if k else []
        parents.append(pa)
        cond_shape = tuple(int(sizes[p]) for p in pa)
        table = rng.dirichlet(0.5 * np.ones(sizes[i]), size=cond_shape or None)  # (*parents, size_i)
        rows = table[tuple(records_out[:, p] for p in pa)] if pa else np.broadcast_to(table, (records, sizes[i]))
        u = rng.random(records)[:, None]
        records_out[:, i] = np.minimum((np.cumsum(rows, axis=1) < u).sum(axis=1), sizes[i] - 1)
    domain = {f"x{i}": int(s) for i, s in enumerate(sizes)}
    return domain, records_out, parents


def demo(args) -> int:
    import jax

    import pgmjax as pj

    t0 = time.perf_counter()
    domain_dict, records, _ = random_bayes_net_data(args.attributes, args.records, args.seed)
    domain = pj.Domain(domain_dict)
    data = pj.Dataset(records, domain)
    rng = np.random.default_rng(args.seed + 1)
    attrs = domain.attributes
    order = rng.permutation(len(attrs))
    tree_edges = [tuple(sorted((attrs[order[i]], attrs[order[rng.integers(i)]]), key=attrs.index)) for i in range(1, len(attrs))]
    triples = [tuple(attrs[j] for j in sorted(rng.choice(len(attrs), 3, replace=False))) for _ in range(args.triples)]
    cliques = tree_edges + triples
    measurements = pj.noisy_marginals(data, cliques, args.sigma, jax.random.key(args.seed))
    print(
        f"pgmjax demo: {len(data):,} records from a random graphical model over {len(attrs)} attributes "
        f"(domain size {cells_text(domain.size())}); measured {len(tree_edges)} tree pairs + {len(triples)} triples "
        f"with Gaussian noise sigma={args.sigma:g}; method={args.method}, {args.iters} iterations"
    )
    t1 = time.perf_counter()
    model = pj.estimate(domain, measurements, method=args.method, iters=args.iters, progress=not args.quiet)
    t2 = time.perf_counter()
    hist = model.history
    iters_run = hist[-1]["iteration"] if hist else 0
    first_chunk = hist[0] if hist else None
    steady = (
        (hist[-1]["seconds"] - first_chunk["seconds"]) / (iters_run - first_chunk["iteration"])
        if hist and iters_run > first_chunk["iteration"]
        else float("nan")
    )
    n = len(data)
    print(f"\n{'marginal':<22}{'noisy error':>14}{'model error':>14}   (L1 error / records = 2 x total variation)")
    model_errs, noisy_errs = [], []
    for m in measurements:
        truth = data.marginal(m.clique).ravel()
        e_noisy = np.abs(m.y - truth).sum() / n
        e_model = np.abs(model.marginal(m.clique).ravel() - truth).sum() / n
        noisy_errs.append(e_noisy)
        model_errs.append(e_model)
        print(f"{' x '.join(m.clique):<22}{e_noisy:>14.4f}{e_model:>14.4f}")
    unmeasured = [c for c in itertools.combinations(attrs, 2) if c not in set(tree_edges)]
    un_errs = [np.abs(model.marginal(c) - data.marginal(c)).sum() / n for c in unmeasured]
    print(f"{'mean (measured)':<22}{np.mean(noisy_errs):>14.4f}{np.mean(model_errs):>14.4f}")
    print(f"{'mean (unmeasured 2-way)':<22}{'-':>14}{np.mean(un_errs):>14.4f}   over {len(unmeasured)} pairs")
    print(
        f"\nmodel: {len(model.cliques)} cliques, treewidth {model.junction_tree.treewidth}, "
        f"estimated total {model.total:,.0f} (true {n:,})"
    )
    print(
        f"time: data {t1 - t0:.2f} s, estimate {t2 - t1:.2f} s (incl. compilation), "
        f"{steady * 1e3:.3f} ms per iteration after the first chunk"
    )
    return 0


# ---------------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------------


class UserError(Exception):
    """Bad command line or input: one line on stderr, exit code 2, no traceback."""


class RunFailure(Exception):
    """The run itself failed: one line on stderr, exit code 1 (``--debug`` re-raises the cause)."""


def _positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (x > 0 and np.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be positive and finite, got {text}")
    return x


def _unit_interval(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < x < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), e.g. 1e-9, got {text}")
    return x


def _positive_int(text: str) -> int:
    try:
        x = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if x < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return x


def _seed(text: str) -> int:
    try:
        x = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= x < 2**63:
        raise argparse.ArgumentTypeError(f"must be in [0, 2^63), got {text}")
    return x


def _parse_options(items) -> dict:
    """``key=value`` strings -> dict; values are JSON when they parse (numbers, true/false, null, lists), else text."""
    import json

    out = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        k = k.strip()
        if not sep or not k.isidentifier():
            raise UserError(f"--option expects key=value (e.g. --option noise=gaussian), got {item!r}")
        if k in out:
            raise UserError(f"--option {k} is given twice")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


# ---------------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------------


def _need_file(path: str, flag: str) -> None:
    import os

    if not os.path.exists(path):
        raise UserError(f"{flag}: file not found: {path}")
    if os.path.isdir(path):
        raise UserError(f"{flag}: {path} is a folder, expected a file")


def _need_parent(path: str | None, flag: str) -> None:
    import os

    if path is None:
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UserError(f"{flag}: the folder {parent} does not exist (create it first; nothing was run)")
    if os.path.isdir(path) and flag != "--save-model":
        raise UserError(f"{flag}: {path} is a folder, expected a file name")


def _check_columns(header: list[str], attributes, data_path: str, what: str, ignore_extra: bool) -> list[str]:
    """Every attribute must be a column; a column that is no attribute is an error unless ignored."""
    if not header or header == [""]:
        raise UserError(f"data file {data_path} is empty (no header line)")
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise UserError(f"data file {data_path} has duplicate column names: {dup}")
    missing = [a for a in attributes if a not in header]
    if missing:
        raise UserError(
            f"data file {data_path} has no column{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)} "
            f"(named in the {what}); its columns are {header}"
        )
    extra = [c for c in header if c not in attributes]
    if extra and not ignore_extra:
        many = len(extra) > 1
        raise UserError(
            f"data file {data_path}: column{'s' if many else ''} {', '.join(repr(c) for c in extra)} "
            f"{'are' if many else 'is'} not in the {what} (attributes: {list(attributes)}); add "
            f"{'them' if many else 'it'} to the {what}, or pass --ignore-extra-columns to drop {'them' if many else 'it'}"
        )
    return extra


def _csv_header(path: str) -> list[str]:
    import csv
    import gzip

    from .dataset import unreadable_csv

    try:
        opener = gzip.open(path, "rt") if path.endswith(".gz") else open(path, newline="")
        with opener as f:
            return next(csv.reader(f), [])
    except (UnicodeDecodeError, csv.Error) as e:  # their text quotes bytes or a line of the private file
        raise UserError("data file " + unreadable_csv(path, e)) from None
    except OSError as e:
        raise UserError(f"data file {path} could not be read: {e}") from None


def _load_integer_data(args, say):
    """``--data`` + ``--domain``: an integer-coded table."""
    import json

    import pandas as pd

    import pgmjax as pj

    try:
        with open(args.domain) as f:
            raw = json.load(f)
        if not isinstance(raw, dict):
            raise UserError(f"domain file {args.domain} must hold a JSON object attribute -> number of values")
        domain = pj.Domain(raw)
    except json.JSONDecodeError as e:
        raise UserError(f"domain file {args.domain} is not valid JSON: {e}") from None
    except (TypeError, ValueError) as e:
        raise UserError(f"domain file {args.domain}: {e}") from None
    extra = _check_columns(_csv_header(args.data), domain.attributes, args.data, "domain file", args.ignore_extra_columns)
    from .dataset import DataValueError, unreadable_csv

    try:
        frame = pd.read_csv(args.data, usecols=list(domain.attributes))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as e:
        # The reader's text may quote a line number or bytes of the private file.
        detail = f"{args.data} could not be read as CSV: {e}" if args.show_private else unreadable_csv(args.data, e)
        raise UserError(f"data file {detail}") from None
    try:
        data = pj.Dataset(frame, domain)
    except (TypeError, ValueError) as e:
        if not isinstance(e, DataValueError):
            raise UserError(f"data file {args.data}: {str(e).removeprefix('Dataset: ')}") from None
        msg = cli_guards.public_error(e, args.show_private).removeprefix("Dataset: ")
        hint = ""
        if "integer codes" in msg or "not finite" in msg:
            hint = "; for raw values (text, decimals) give a --schema instead of --domain (see: pgmjax schema --help)"
        raise UserError(f"data file {args.data}: {msg}{hint}") from None
    return data, None, extra


def _load_raw_data(args, say):
    """``--data`` + ``--schema``: raw values discretised by the schema."""
    from . import schema as S

    try:
        schema = S.load_schema(args.schema, decode=args.decode)
    except S.SchemaError as e:
        raise UserError(str(e)) from None
    cli_preprocess.check_schema_privacy(schema, args.schema, args.allow_nonprivate_schema)
    extra = _check_columns(_csv_header(args.data), list(schema.columns), args.data, "schema", args.ignore_extra_columns)
    try:
        frame = S.read_raw_csv(args.data)
        data = schema.encode(frame)
    except S.SchemaError as e:
        raise UserError(f"data file {args.data}: {cli_guards.public_error(e, args.show_private)}") from None
    return data, schema, extra


def _workload(spec: str | None, domain):
    """``all-Kway`` or a JSON file of cliques -> (Workload, label); None -> (None, None)."""
    import json
    import os
    import re

    import pgmjax as pj

    if spec is None:
        return None, None
    m = re.fullmatch(r"all-(\d+)-?way", spec.strip().lower())
    if m:
        k = int(m.group(1))
        if not 1 <= k <= len(domain):
            raise UserError(f"--workload {spec}: k must be between 1 and the number of attributes ({len(domain)})")
        return pj.Workload.all_kway(domain, k), f"all {k}-way marginals"
    if not os.path.exists(spec):
        raise UserError(f"--workload: expected all-2way, all-3way (any all-Kway) or a JSON file of cliques; file not found: {spec}")
    try:
        with open(spec) as f:
            raw = json.load(f)
    except json.JSONDecodeError as e:
        raise UserError(f"workload file {spec} is not valid JSON: {e}") from None
    if isinstance(raw, dict) and "cliques" in raw:
        raw = raw["cliques"]
    if not isinstance(raw, list) or not raw or not all(
        isinstance(c, list) and c and all(isinstance(a, str) for a in c) for c in raw
    ):
        raise UserError(f'workload file {spec}: expected a non-empty list of cliques, e.g. [["age", "sex"], ["sex", "income"]]')
    try:
        return pj.Workload.marginals(domain, [tuple(c) for c in raw]), f"{len(raw)} marginals from {spec}"
    except ValueError as e:
        raise UserError(f"workload file {spec}: {e}") from None


# ---------------------------------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------------------------------


class _Progress:
    """A tqdm bar on stderr over the engine's iterations, across every fit a mechanism makes.

    The engine calls :meth:`engine` after each compiled chunk (``pgmjax.estimate``'s callback); an
    iteration count that does not grow means a new fit (the next round) has started.
    """

    def __init__(self, enabled: bool, desc: str, total: int | None):
        from tqdm.auto import tqdm

        self.name = desc
        self.bar = tqdm(total=total, desc=desc, unit="it", file=sys.stderr, disable=not enabled, dynamic_ncols=True)
        self.fits = 0
        self.last = 0

    def step(self, info: dict):
        """A front-end's per-round / per-step report (AIM: the round's log entry; MST: stage, step, steps)."""
        if "round" in info:
            where = f"round {info['round']}"
        elif "stage" in info:
            where = str(info["stage"]) + (f" {info['step']}/{info['steps']}" if "step" in info and "steps" in info else "")
        else:
            return None
        self.bar.set_description_str(f"{self.name} {where}", refresh=False)
        return None

    def engine(self, info: dict):
        it = int(info["iteration"])
        if self.fits == 0 or it <= self.last:
            self.fits += 1
            step = it
        else:
            step = it - self.last
        self.last = it
        if self.bar.total is not None and self.bar.n + step > self.bar.total:
            self.bar.total = self.bar.n + step
        self.bar.set_postfix_str(f"fit {self.fits}, loss {info['loss']:.4g}", refresh=False)
        self.bar.update(step)
        return None

    def close(self):
        self.bar.close()

    def abandon(self):
        """Close and erase the bar (the run stopped with an error message instead)."""
        self.bar.leave = False
        self.bar.close()


def _expected_iterations(spec, kwargs: dict, params: dict, domain) -> int | None:
    """Engine iterations the run will make where the schedule is fixed in advance (the bar's total), else None."""

    def value(key):
        if key in kwargs:
            return kwargs[key]
        p = params.get(key)
        return None if p is None or p.default is p.empty else p.default

    iters = [value(n) for n in spec.iters]
    if not iters or not all(isinstance(i, int) for i in iters):
        return None
    if spec.name == "mwem":  # one fit per round
        rounds = value("rounds")
        return iters[0] * (rounds if isinstance(rounds, int) else len(domain))
    if spec.name == "mst":  # the one-way fit for the selection, then the final fit
        return sum(iters)
    if spec.name in ("privbayes", "dualquery", "hdmm", "mldp"):  # one fit
        return iters[0]
    return None  # AIM: the number of rounds depends on the annealing


# ---------------------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------------------


def _jsonable(x, max_items: int = 10_000):
    """Plain JSON types: tuples -> lists, numpy/jax scalars -> numbers, non-finite -> strings, big arrays -> a shape note."""
    import math

    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, np.bool_):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else str(x)
    if isinstance(x, dict):
        return {str(k): _jsonable(v, max_items) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        if len(x) > max_items:
            return f"<{len(x)} items>"
        return [_jsonable(v, max_items) for v in x]
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        a = np.asarray(x)
        if a.dtype.kind in "biuf" and a.size <= max_items:
            return _jsonable(a.tolist(), max_items)
        return f"<array {a.dtype} {tuple(a.shape)}>"
    return repr(x)


def _privacy(acc, epsilon_given: float | None = None) -> dict:
    """Budget given and spent, in the accountant's currency, with the (epsilon, delta) guarantee.

    The epsilon budget is reported as given: converting the zCDP budget ``rho = cdp_rho(eps, delta)``
    back with ``cdp_eps`` is not exact at large epsilon (1e6 comes back as 997103: the two bisections
    use different bounds), and spending all of ``rho`` is spending all of the given (eps, delta).
    """
    s = acc.summary()
    out = {"composition": s["composition"], "bounded": s["bounded"], "ledger_entries": s["entries"]}
    if acc.currency == "rho":
        out.update({"rho_budget": s["budget"], "rho_spent": s["spent"]})
        if acc.delta is not None:
            from .privacy import cdp_eps

            eps_budget = float(epsilon_given) if epsilon_given is not None else float(cdp_eps(acc.budget, acc.delta))
            eps_spent, delta = (float(v) for v in acc.epsilon_delta())
            out["epsilon_budget"], out["delta"] = eps_budget, delta
            out["epsilon_spent"] = eps_budget if s["spent"] >= s["budget"] * (1 - 1e-12) else min(eps_spent, eps_budget)
    else:
        out.update({"epsilon_budget": s["budget"], "epsilon_spent": s["spent"]})
        out["delta"] = 0.0 if s["composition"] == "pure" else acc.delta
    out["fraction_spent"] = s["spent"] / s["budget"]
    return out


def _privacy_line(p: dict) -> str:
    num = cli_guards.number  # as a person writes it: 1e6, not 1e+06
    pct = f"{100 * p['fraction_spent']:.1f}%"
    if "rho_budget" in p:
        line = f"rho-zCDP budget rho={num(p['rho_budget'])}, spent {num(p['rho_spent'])} ({pct})"
        if "delta" in p:
            line = f"(eps={num(p['epsilon_budget'])}, delta={num(p['delta'])})-DP via " + line + f" -> eps={num(p['epsilon_spent'])}"
        return line
    if p["composition"] == "pure":
        return f"pure eps-DP: budget eps={num(p['epsilon_budget'])}, spent {num(p['epsilon_spent'])} ({pct}), delta=0"
    return (
        f"(eps, delta)-DP by {p['composition'].replace('_', ' ')} composition: budget eps={num(p['epsilon_budget'])}, "
        f"delta={num(p['delta'])}; spent eps={num(p['epsilon_spent'])} ({pct})"
    )


def _model_info(model) -> dict:
    cliques = [list(c) for c in model.cliques]
    cells = int(sum(model.domain.size(c) for c in model.cliques))
    return {
        "cliques": cliques,
        "n_cliques": len(cliques),
        "cells": cells,
        "size_mb": 8.0 * cells / 2**20,  # float64 convention of hypothetical_model_size
        "treewidth": int(model.junction_tree.treewidth),
        "total": float(model.total),
    }


def _evaluate(workload, label, data, synth, result) -> dict:
    """Workload error (paper scale) and mean 2-way TVD of the outputs against the input (NOT private)."""
    from . import metrics

    out = {
        "workload": label,
        "queries": len(workload),
        "scale": "paper: mean over queries of ||W mu - W mu_hat||_1 / (2 ||W mu||_1)",
        "private": False,
    }
    pairs = list(itertools.combinations(data.domain.attributes, 2))
    arms = {"synthetic": synth, "model": result.model}
    if result.original is not None:
        arms["original"] = result.original
    for arm, est in arms.items():
        try:
            out[f"workload_error_{arm}"] = metrics.workload_error(workload, data, est)
            if pairs:
                out[f"tvd_2way_{arm}"] = metrics.marginal_tvd(data, est, pairs)
        except Exception as e:  # an arm without the query interface: report why, keep the others
            out[f"{arm}_not_evaluated"] = f"{type(e).__name__}: {e}"
    return out


# ---------------------------------------------------------------------------------------------------
# pgmjax run
# ---------------------------------------------------------------------------------------------------


def run(args) -> int:
    import json
    import os

    from .mechanisms import registry

    t_start = time.perf_counter()
    say = (lambda *a: None) if args.quiet else (lambda msg: print(f"pgmjax run: {msg}", file=sys.stderr, flush=True))

    # ---- cheap checks first: files, outputs, options, mechanism
    args.split = None
    if args.private_schema and (args.domain is not None or args.schema is not None):
        raise UserError("--private-schema derives the schema from --data: give neither --domain nor --schema")
    if args.domain is not None and args.schema is not None:
        raise UserError("give --domain DOMAIN.json for integer-coded data, or --schema SCHEMA.json for raw values (not both)")
    if args.domain is None and args.schema is None:
        args.private_schema = True  # raw data without a schema: derive one with DP inside the budget (the default)
    if args.allow_nonprivate_schema and args.schema is None:
        raise UserError("--allow-nonprivate-schema applies to a --schema read from the data (pgmjax schema without --epsilon)")
    if args.decode is not None and args.schema is None and not args.private_schema:
        raise UserError("--decode applies to raw data read with --schema")
    _need_file(args.data, "--data")
    if not args.private_schema:
        _need_file(args.domain or args.schema, "--domain" if args.domain else "--schema")
    _need_parent(args.html, "--html")
    _need_parent(args.out, "--out")
    _need_parent(args.report, "--report")
    _need_parent(args.save_model, "--save-model")
    try:
        cli_guards.refuse_overwriting_inputs(
            {"--data": args.data, "--domain": args.domain, "--schema": args.schema,
             "--workload": args.workload if args.workload is not None and os.path.isfile(args.workload) else None},
            {"--out": args.out, "--report": args.report, "--save-model": args.save_model, "--html": args.html},
        )
    except ValueError as e:
        raise UserError(f"{e} (nothing was run)") from None
    options = _parse_options(args.option)
    if args.private_schema:
        if args.mechanism not in registry.MECHANISMS:
            raise UserError(f"unknown mechanism {args.mechanism!r}")
        try:
            args.split = cli_preprocess.split_budget(args.mechanism, args.epsilon, args.delta, args.preprocess_fraction)
        except ValueError as e:
            raise UserError(str(e)) from None
        args.epsilon_total, args.delta_total = args.epsilon, args.delta
        args.epsilon, args.delta = args.split.epsilon, args.split.delta  # the mechanism's share
    try:
        _, _, notes = registry.prepare(
            args.mechanism, epsilon=args.epsilon, delta=args.delta, iters=args.iters, rounds=args.rounds,
            records=args.records, options=options,
        )
        params = registry.parameters(args.mechanism)
    except registry.MechanismUnavailable as e:
        available = [n for n, why in registry.availability().items() if why is None]
        raise UserError(f"{e}; available here: {', '.join(available)}") from None
    except ValueError as e:
        raise UserError(str(e)) from None

    # ---- data and workload (validated before the mechanism runs)
    t0 = time.perf_counter()
    if args.private_schema:
        import jax

        data, schema, pre = cli_preprocess.load_private(args, say, jax.random.fold_in(jax.random.key(args.seed), 7))
        extra = []
    elif args.schema is not None:
        data, schema, extra = _load_raw_data(args, say)
    else:
        data, schema, extra = _load_integer_data(args, say)
    workload, wl_label = _workload(args.workload, data.domain)
    try:
        cli_intervals.check(args, workload)
    except ValueError as e:
        raise UserError(str(e)) from None
    t_load = time.perf_counter() - t0
    # The exact record count is private under add/remove neighbours: only with --show-private.
    say(
        f"read {f'{len(data):,} records, ' if args.show_private else ''}{len(data.domain)} attributes "
        f"(domain {cells_text(data.domain.size())} cells) from {args.data}"
        + (f"; ignored columns {extra}" if extra else "")
    )
    for n in notes:
        say(f"note: {n}")

    import jax

    key_mech, key_sample, key_decode = jax.random.split(jax.random.key(args.seed), 3)
    common = dict(
        epsilon=args.epsilon, delta=args.delta, iters=args.iters, rounds=args.rounds, records=args.records,
        options=options,
    )
    try:
        _, probe, _ = registry.prepare(args.mechanism, workload=workload, **common)
    except ValueError as e:
        raise UserError(str(e)) from None
    spec = registry.MECHANISMS[args.mechanism]
    reports = registry.engine_slot(args.mechanism) is not None or spec.progress is not None
    total = _expected_iterations(spec, probe, params, data.domain)
    if not reports:
        say(f"running {args.mechanism} (it reports no progress while it runs)")
    progress = _Progress(reports and not args.quiet, args.mechanism, total)

    # ---- the mechanism
    from .privacy import PrivacyBudgetExceeded

    t0 = time.perf_counter()
    try:
        result, _ = registry.run(
            args.mechanism, data, key=key_mech, workload=workload, callback=progress.engine,
            step_callback=progress.step, **common,
        )
    except PrivacyBudgetExceeded as e:
        raise RunFailure(f"{args.mechanism}: internal accounting error: {e}") from e
    except (ValueError, TypeError) as e:
        # Front-ends validate their input before touching the data: this is a bad argument or option.
        progress.abandon()
        if args.debug:
            raise
        raise UserError(f"{args.mechanism} rejected the input: {str(e).removeprefix(args.mechanism + ': ')}") from None
    except MemoryError as e:
        raise RunFailure(f"{args.mechanism}: out of memory; try a smaller model (e.g. --option max_model_mb=...) or fewer attributes") from e
    finally:
        progress.close()
    t_mech = time.perf_counter() - t0

    # ---- synthetic data (post-processing of the model: no privacy cost)
    t0 = time.perf_counter()
    synth = result.synthetic
    if synth is None or (args.records is not None and len(synth) != args.records):
        synth = result.model.synthetic_data(args.records, key_sample)
    t_sample = time.perf_counter() - t0
    refusal = None if args.records is not None else cli_guards.too_few_records(len(synth), args.epsilon)
    if refusal is not None:  # a tiny budget: refuse before anything is written
        raise RunFailure(refusal)

    t0 = time.perf_counter()
    if args.out is not None:
        frame = schema.decode(synth, key_decode, columns=_csv_header(args.data)) if schema is not None else synth.df
        try:
            frame.to_csv(args.out, index=False)
        except OSError as e:
            raise RunFailure(f"--out: could not write {args.out}: {e}") from e
    if args.save_model is not None:
        try:
            from .serialization import save_model

            save_model(result.model, args.save_model, schema=schema)
        except OSError as e:
            raise RunFailure(f"--save-model: could not write {args.save_model}: {e}") from e
    t_write = time.perf_counter() - t0

    t0 = time.perf_counter()
    # The evaluation reads the input (not private): computed only where it is shown or written.
    evaluated = workload is not None and (args.report is not None or args.show_private)
    evaluation = _evaluate(workload, wl_label, data, synth, result) if evaluated else None
    t_eval = time.perf_counter() - t0
    t_total = time.perf_counter() - t_start

    # ---- summary and report
    acc = result.accountant
    privacy = _privacy(acc, args.epsilon)
    privacy["epsilon_given"], privacy["delta_given"] = args.epsilon, args.delta
    preprocessing = cli_preprocess.report_entry(args, schema)
    if args.split is not None:
        privacy["epsilon_given"], privacy["delta_given"] = args.epsilon_total, args.delta_total
        privacy["mechanism_epsilon"], privacy["mechanism_delta"] = args.epsilon, args.delta
    ledger_kinds: dict[str, int] = {}
    for e in acc.ledger:
        ledger_kinds[e.mechanism] = ledger_kinds.get(e.mechanism, 0) + 1
    model = _model_info(result.model)
    seconds = {
        "load": t_load, "mechanism": t_mech, "sampling": t_sample, "writing": t_write,
        "evaluation": t_eval, "total": t_total,
    }
    report = {
        "pgmjax_version": _version(),
        "command": ["pgmjax", *(args.argv or [])],
        "mechanism": args.mechanism,
        "seed": args.seed,
        "input": {
            "data": args.data,
            ("schema" if schema is not None else "domain"): args.schema or args.domain,
            "records": len(data),
            "domain": data.domain.to_dict(),
            "ignored_columns": extra,
        },
        "privacy": privacy,
        "measurements": len(result.measurements),
        "ledger_by_mechanism": ledger_kinds,
        "model": model,
        "synthetic": {"records": len(synth), "path": args.out, "decoded": schema is not None},
        "evaluation": evaluation,
        "intervals": cli_intervals.report_entry(args, result, workload, key_mech),
        # Computed from the input directly (not differentially private): remove before publishing the report.
        "not_private": ["input.records", "evaluation"],
        "seconds": seconds,
        "notes": notes,
        "original_error": result.original_error,
        # Only what is safe to publish (settings, noisy releases, selections): some info entries are
        # computed from the data without noise (see MechanismSpec.report_info).
        "info": _jsonable({k: v for k, v in result.info.items() if k in spec.report_info}, max_items=1000),
        "info_omitted": sorted(k for k in result.info if k not in spec.report_info),
        "ledger": _jsonable(acc.records()),
        "preprocessing": _jsonable(preprocessing),
    }
    if preprocessing is not None and not preprocessing["private"]:
        report["not_private"].append("schema (read from the data without noise)")
    if args.report is not None:
        try:
            with open(args.report, "w") as f:
                json.dump(report, f, indent=2)
                f.write("\n")
        except OSError as e:
            raise RunFailure(f"--report: could not write {args.report}: {e}") from e

    kinds = ", ".join(f"{v} {k}" for k, v in sorted(ledger_kinds.items()))
    lines = [
        f"pgmjax run: {args.mechanism} on {os.path.basename(args.data)}: "
        + (f"{len(data):,} records (private: shown by --show-private), " if args.show_private else "")
        + f"{len(data.domain)} attributes",
        f"  privacy       {_privacy_line(privacy)}",
        f"  measurements  {_plural(len(result.measurements), 'noisy measurement')}; ledger {_plural(len(acc.ledger), 'entry', 'entries')} ({kinds})",
        f"  model         {_plural(model['n_cliques'], 'clique')}, {model['cells']:,} cells ({model['size_mb']:.3g} MB as float64), "
        f"treewidth {model['treewidth']}, estimated total {model['total']:,.0f}",
        f"  synthetic     {len(synth):,} records" + (f" -> {args.out}" + (" (decoded to raw values)" if schema is not None else "") if args.out else " (not written: no --out)"),
    ]
    if workload is not None and not args.show_private:
        lines.append(f"  workload      {wl_label}: errors against the input withheld (computed from the input data: NOT private; "
                     f"--show-private prints them{', --report holds them' if args.report else ''})")
    elif evaluation is not None:
        ev = f"  workload      {wl_label}: error {evaluation.get('workload_error_synthetic', float('nan')):.4f} (synthetic), " \
             f"{evaluation.get('workload_error_model', float('nan')):.4f} (model), paper scale"
        if "tvd_2way_synthetic" in evaluation:
            ev += f"; mean 2-way TVD {evaluation['tvd_2way_synthetic']:.4f} (synthetic)"
        lines.append(ev)
        lines.append("                (computed from the input data: these errors are NOT private; do not publish them)")
    lines.append(
        f"  time          {t_total:.2f} s (load {t_load:.2f}, mechanism {t_mech:.2f}, sampling {t_sample:.2f}, "
        f"writing {t_write:.2f}, evaluation {t_eval:.2f})"
    )
    lines[2:2] = cli_preprocess.summary_lines(preprocessing)
    if args.html is not None:
        cli_preprocess.write_html(args, report, data, synth, workload, schema)
        lines.append(f"  html report   {args.html} (computed from the input data: NOT private)")
    if args.report:
        lines.append(f"  report        {args.report}")
    print("\n".join(lines))
    return 0


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def _version() -> str:
    try:
        from . import __version__

        return __version__
    except ImportError:  # pragma: no cover
        return "unknown"


# ---------------------------------------------------------------------------------------------------
# pgmjax schema, pgmjax mechanisms
# ---------------------------------------------------------------------------------------------------


def schema_cmd(args) -> int:
    import json

    from . import schema as S

    _need_file(args.data, "--data")
    _need_parent(args.out, "--out")
    try:
        cli_guards.refuse_overwriting_inputs({"--data": args.data}, {"--out": args.out})
    except ValueError as e:
        raise UserError(str(e)) from None
    if args.epsilon is not None:
        return cli_preprocess.private_schema_cmd(args)
    try:
        frame = S.read_raw_csv(args.data)
        spec, notes = S.infer_schema(frame, bins=args.bins, max_categories=args.max_categories)
        S.Schema.from_dict(spec)  # the inferred schema must load
    except S.SchemaError as e:
        raise UserError(f"{args.data}: {cli_guards.public_error(e, False)}") from None
    text = S.dumps(spec)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    for n in notes:
        print(f"pgmjax schema: note: {n}", file=sys.stderr)
    print(
        "pgmjax schema: warning: this schema was read from the data (ranges, category lists) and is NOT private; "
        "review it and replace data-derived bounds and categories with public knowledge before a private release",
        file=sys.stderr,
    )
    return 0


def mechanisms_cmd(args) -> int:
    from .mechanisms import registry

    guarantees = {
        "pure": "eps-DP",
        "zcdp": "(eps, delta)-DP via zCDP",
        "advanced": "(eps, delta)-DP",
        "noise": "eps-DP (Laplace noise), or (eps, delta)-DP via zCDP with --option noise=gaussian",
    }
    for name, why in registry.availability().items():
        spec = registry.MECHANISMS[name]
        state = "available" if why is None else "NOT AVAILABLE"
        print(f"{name:<10} {state:<14} {spec.title}")
        print(f"{'':<25} guarantee: {guarantees[spec.privacy]}")
        if why is not None and args.verbose:
            print(f"{'':<25} {why}")
    return 0
# ---------------------------------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------------------------------

_MAIN_EPILOG = """\
examples:
  pgmjax demo                                    # estimation on a random model, no data needed
  pgmjax demo --records 50000 --attributes 12 --iters 1000

  # integer-coded data (values 0..n-1) with its domain JSON {"age": 85, "sex": 2, ...}
  pgmjax run --data table.csv --domain table-domain.json --mechanism aim \\
             --epsilon 1 --delta 1e-9 --out synthetic.csv --report report.json --workload all-2way

  # raw data (numbers, text, dates, blanks): the schema is derived with DP inside the budget
  pgmjax run --data raw.csv --mechanism mst --epsilon 1 --out synthetic.csv --save-model model/
  pgmjax sample --model model/ --records 5000 --out more.csv   # more records, no privacy cost
  pgmjax schema --data raw.csv --epsilon 0.1 > schema.json    # or a private schema to review and reuse

  pgmjax mechanisms                              # which mechanisms are installed
  pgmjax run --help                              # every option of a run, schema and workload formats

exit codes: 0 success; 2 bad command line or input (reported before any long computation);
1 the run failed (add --debug to a run for the traceback).
"""

_RUN_DESCRIPTION = """\
Run a differentially private mechanism on a CSV table and write synthetic data.

The mechanism reads the data only through its noise-adding steps and spends exactly the budget
given (--epsilon, and --delta where the guarantee is (eps, delta)); everything after it (the model,
the synthetic records, their decoding) is post-processing. A progress bar on stderr follows the
estimation iterations across the selection rounds; at the end a summary is printed (budget given
and spent, measurements, model size, time) and --report writes it as JSON with the privacy ledger.
The report's "input.records" and "evaluation" are computed from the data directly (the report lists
them under "not_private"): they are for the data holder, not for publication. The printed summary
and status lines show only privacy-safe numbers (budget, noisy estimates, sizes of outputs) unless
--show-private is given; error messages about the data name the column and what was expected, never
a value or its line (--show-private shows them). An output path that is an input file (or another
output) is refused before anything runs; a model estimating fewer than 10 records (a tiny budget)
is refused with a suggestion (--records) instead of writing a near-empty table.

mechanisms (pgmjax mechanisms shows which are installed):
  mwem       MWEM+PGM: EM selection of marginals, Laplace noise (eps-DP); --option noise=gaussian for zCDP
  privbayes  PrivBayes+PGM: private Bayesian network and noisy conditionals (eps-DP; --delta unused)
  dualquery  DualQuery+PGM: private query/record game, model fitted to the transcript ((eps, delta)-DP)
  hdmm       HDMM+PGM: workload-optimised measurement strategy, Laplace noise (eps-DP)
  mst        MST: one-way marginals + private maximum spanning tree of pairs ((eps, delta)-DP via zCDP)
  aim        AIM: adaptive workload-aware marginal selection ((eps, delta)-DP via zCDP)
  mldp       MLDP+PGM: low-sensitivity training queries, the rest answered by the model (eps-DP)

input:
  integer-coded: --data table.csv --domain domain.json, where domain.json maps every column to its
    number of values {"age": 85, "sex": 2}; each value must be an integer in [0, n).
  raw values without a schema (the default): the run spends --preprocess-fraction of the budget
    (default 0.1) on a private schema: bin edges at private quantiles, clipping bounds, categories
    kept only when their noisy count is large (rare values become "other"), a missing code for
    blanks, dates binned and decoded as dates; the split is printed and recorded in the report.
  raw values with a public schema: --data raw.csv --schema schema.json, where schema.json says how to discretise:
      {"age":    {"bins": [17, 25, 35, 45, 55, 65, 91], "integer": true},
       "income": {"bins": 20, "range": [0, 250000], "decode": "midpoint"},
       "sex":    {"categories": ["Female", "Male"]}}
    bins [e0, e1, ..., ek] are [e_i, e_i+1) with the last one closed; "bins": k with "range": [lo, hi]
    is k equal-width bins; values outside the bins or not among the categories are errors.
    Synthetic data is decoded back: categories to their text, numbers to a value drawn uniformly
    within the bin (seeded by --seed; integers for "integer": true), or the bin midpoint with
    "decode": "midpoint" (per column) or --decode midpoint (all numeric columns).
    pgmjax schema --data raw.csv --epsilon E writes a private schema. A schema read from the data
    without noise (pgmjax schema without --epsilon) is refused unless --allow-nonprivate-schema.
  Every domain/schema attribute must be a column of the CSV, and every column an attribute
  (--ignore-extra-columns drops the others).

workload (--workload): all-2way, all-3way (any all-Kway) or a JSON file of cliques
  [["age", "sex"], ["sex", "income"]]. Mechanisms that take a workload (mwem, dualquery, hdmm, aim,
  mldp) optimise for it (default: all 2-way marginals); the summary then reports the workload error
  of the synthetic data and of the model against the input (paper scale: mean over queries of
  ||W mu - W mu_hat||_1 / (2 ||W mu||_1)) and the mean total variation distance over all 2-way
  marginals. These numbers read the input directly: they are NOT private.

mechanism options: --option key=value passes a keyword argument of the front-end function (values
are JSON: numbers, true/false, strings), e.g. --option noise=gaussian --option max_model_mb=5 for
mwem, --option beta=0.5 for privbayes, --option samples=20 for dualquery; see help(pgmjax.mechanisms.<name>).
"""

_RUN_EPILOG = """\
examples:
  pgmjax run --data adult.csv --domain adult-domain.json --mechanism aim --epsilon 1 --delta 1e-9 \\
             --out synthetic.csv --report report.json --workload all-2way
  pgmjax run --data adult.csv --domain adult-domain.json --mechanism mwem --epsilon 0.5 --rounds 14 \\
             --iters 500 --option noise=gaussian --delta 1e-6 --out synthetic.csv
  pgmjax run --data raw.csv --schema schema.json --mechanism privbayes --epsilon 1 --seed 3 \\
             --records 10000 --out synthetic.csv --quiet

exit codes: 0 success; 2 bad command line or input (missing file, column not in the domain, value
out of range, eps <= 0, delta outside (0, 1), unknown or unavailable mechanism, bad option), reported
on stderr before the mechanism runs; 1 the run failed (add --debug for the traceback).
"""


def build_parser() -> argparse.ArgumentParser:
    from .mechanisms.registry import MECHANISMS

    parser = argparse.ArgumentParser(
        prog="pgmjax",
        description="Graphical-model estimation for differentially private query answering, in JAX.",
        epilog=_MAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{demo,run,sample,schema,report,mechanisms}")
    d = sub.add_parser(
        "demo",
        help="estimate a model from noisy marginals of data drawn from a random graphical model (no data needed)",
        description=(
            "Draws records from a random ground-truth graphical model, measures all 2-way marginals of a random "
            "tree plus a few 3-way marginals with Gaussian noise, estimates a graphical model, and prints the "
            "per-marginal error of the model next to the error of the raw noisy answers."
        ),
        epilog="Example: pgmjax demo --records 50000 --attributes 12 --iters 1000",
    )
    d.add_argument("--records", type=int, default=50_000, help="number of records (default 50000)")
    d.add_argument("--attributes", type=int, default=12, help="number of attributes (default 12)")
    d.add_argument("--triples", type=int, default=3, help="number of random 3-way marginals measured (default 3)")
    d.add_argument("--sigma", type=float, default=50.0, help="Gaussian noise standard deviation (default 50)")
    d.add_argument("--iters", type=int, default=1000, help="estimation iterations (default 1000)")
    d.add_argument("--method", default="mirror_descent", choices=["mirror_descent", "dual_averaging", "lbfgs"])
    d.add_argument("--seed", type=int, default=0, help="random seed (data, structure and noise)")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    d.set_defaults(func=demo)

    r = sub.add_parser(
        "run",
        help="run a private mechanism (mwem, privbayes, dualquery, hdmm, mst, aim, mldp) on a CSV, write synthetic data",
        description=_RUN_DESCRIPTION,
        epilog=_RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = r.add_argument_group("input")
    g.add_argument("--data", required=True, metavar="CSV", help="the private table (CSV, optionally .gz), with a header line")
    g.add_argument("--domain", metavar="JSON", help="domain of integer-coded data: {column: number of values}")
    g.add_argument("--schema", metavar="JSON", help="public discretisation schema of raw data (see above; without --domain "
                   "and --schema a private one is derived from the data inside the budget)")
    g.add_argument("--ignore-extra-columns", action="store_true", help="drop CSV columns that are not in the domain/schema instead of failing")
    g = r.add_argument_group("mechanism and privacy")
    g.add_argument("--mechanism", "-m", required=True, choices=list(MECHANISMS), metavar="NAME",
                   help=f"one of: {', '.join(MECHANISMS)}")
    g.add_argument("--epsilon", "-e", required=True, type=_positive_float, metavar="EPS", help="privacy budget epsilon > 0")
    g.add_argument("--delta", type=_unit_interval, default=None, metavar="DELTA",
                   help="delta in (0, 1) for (eps, delta) guarantees (default 1e-9: dualquery, mst, aim, and mwem/hdmm with "
                        "--option noise=gaussian); pure-DP runs do not use it")
    g.add_argument("--workload", metavar="SPEC", help="all-2way, all-3way or a JSON file of cliques: what the mechanism optimises for "
                   "(if it takes a workload) and what the summary evaluates")
    g.add_argument("--rounds", type=_positive_int, metavar="T", help="rounds of an iterative mechanism (mwem, dualquery, aim)")
    g.add_argument("--iters", type=_positive_int, metavar="N", help="estimation iterations per model fit (mechanism default if omitted)")
    g.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="a mechanism-specific keyword argument (repeatable)")
    g.add_argument("--seed", type=_seed, default=0, help="random seed of the whole run: noise, selections, sampling, decoding (default 0)")
    g = r.add_argument_group("output")
    g.add_argument("--out", metavar="CSV", help="write the synthetic data here (raw values when --schema is given)")
    g.add_argument("--records", type=_positive_int, metavar="N", help="number of synthetic records (default: the model's estimated total)")
    g.add_argument("--decode", choices=["uniform", "midpoint"], help="decoding of binned numeric columns without their own \"decode\" "
                   "(default uniform within the bin)")
    g.add_argument("--report", metavar="JSON", help="write the summary, the evaluation and the privacy ledger as JSON")
    g.add_argument("--save-model", metavar="DIR", help="save the fitted graphical model to this folder (pgmjax.load_model reads it)")
    g.add_argument("--quiet", "-q", action="store_true", help="no progress bar or status lines on stderr (the summary is still printed)")
    g.add_argument("--show-private", action="store_true",
                   help="also print numbers computed from the input without noise (its exact record count, the workload "
                        "errors) and, in error messages, the offending value and its line; by default only "
                        "privacy-safe numbers are printed")
    g.add_argument("--debug", action="store_true", help="show the traceback when the run fails")
    cli_preprocess.add_run_arguments(r)
    cli_intervals.add_run_arguments(r, _unit_interval)
    r.set_defaults(func=run)

    s = sub.add_parser(
        "schema",
        help="infer a starter discretisation schema from a raw CSV (NOT private: review it)",
        description=(
            "Reads a raw CSV and writes a schema JSON for pgmjax run --schema: a numeric column with more than "
            "--max-categories distinct values gets --bins equal-width bins over its [min, max] ('integer' if all "
            "values are integers); every other column becomes categorical with its distinct values. The schema "
            "is derived from the data and is NOT private: replace data-derived ranges and category lists by "
            "public knowledge before a private release."
        ),
        epilog="Example: pgmjax schema --data raw.csv --bins 16 > schema.json",
    )
    s.add_argument("--data", required=True, metavar="CSV", help="the raw table")
    s.add_argument("--bins", type=_positive_int, default=10, help="bins per numeric column (default 10)")
    s.add_argument("--max-categories", type=_positive_int, default=32,
                   help="numeric columns with at most this many distinct values stay categorical (default 32; >= --bins)")
    s.add_argument("--out", metavar="JSON", help="write here instead of stdout")
    cli_preprocess.add_schema_arguments(s)
    s.set_defaults(func=schema_cmd, debug=False)

    cli_preprocess.add_report_parser(sub)
    cli_sample.add_sample_parser(sub)
    m = sub.add_parser("mechanisms", help="list the mechanisms and whether they are installed",
                       description="Lists every mechanism pgmjax run knows, whether it can be loaded here, and its guarantee.")
    m.add_argument("--verbose", "-v", action="store_true", help="say why an unavailable mechanism does not load")
    m.set_defaults(func=mechanisms_cmd, debug=False)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.command == "demo":
        for name in ("records", "attributes", "iters"):
            if getattr(args, name) < 1:
                parser.error(f"--{name} must be at least 1")
        if args.attributes < 3:
            parser.error("--attributes must be at least 3")
        if args.sigma <= 0:
            parser.error("--sigma must be positive")
        return args.func(args)
    args.argv = argv
    try:
        return args.func(args)
    except UserError as e:
        print(f"pgmjax {args.command}: error: {e}", file=sys.stderr)
        return 2
    except RunFailure as e:
        print(f"pgmjax {args.command}: failed: {e}", file=sys.stderr)
        if args.debug and e.__cause__ is not None:
            raise e.__cause__
        return 1
    except KeyboardInterrupt:
        print(f"pgmjax {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if getattr(args, "debug", False):
            raise
        print(
            f"pgmjax {args.command}: failed: {type(e).__name__}: {e} (run again with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
