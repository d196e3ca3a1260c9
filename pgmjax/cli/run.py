"""``pgmjax run``: a privacy mechanism on a CSV table, synthetic data, the summary and the JSON report."""

from __future__ import annotations

import os
import sys
import time

from ..data.domain import cells_text
from ..mechanisms import budget_split
from . import checkpoints, guards, intervals, preprocessing
from .arguments import parse_options
from .call import expected_iterations, front_end_call, mechanism_name, with_progress
from .errors import RunFailure, UserError
from .inputs import (
    data_header,
    load_integer_data,
    load_public,
    load_raw_data,
    public_of,
    schema_constraints_of,
    need_data,
    need_file,
    need_parent,
    parse_workload,
)
from .outputs import OutputSet, check_outputs, check_records
from .progress import Progress
from .summary import (
    evaluate,
    jsonable,
    model_info,
    plural,
    privacy_line,
    privacy_summary,
    version,
)


def run(args) -> int:
    """``pgmjax run``: check everything cheap, read the inputs, run the mechanism, write, report.

    ``--max-model-mb MB`` caps the run's models at MB (one float64 copy) and sets the size limit of the whole run
    (:func:`pgmjax.graph.size_limit.limited`) to the peak of a fit of such a model in the run's method and dtype
    (:func:`pgmjax.estimation.memory.capped_fit_bytes`): every mechanism's up-front check, every fit and the intervals'
    refits refuse a larger peak (:class:`pgmjax.ModelTooLarge`, exit 2) before allocating it; without it, the limit in force
    (``PGMJAX_MAX_MODEL_BYTES`` or a share of the machine's memory). It is also passed to the front-ends that
    take ``max_model_mb`` (AIM's and MWEM's selections, PrivBayes' network, ...).

    Raises:
        UserError: bad command line or input (exit 2), found before the mechanism runs.
        RunFailure: the run failed (exit 1).
    """
    from ..estimation.memory import capped_fit_bytes
    from ..graph.size_limit import limited

    limit = None
    if args.max_model_mb is not None:  # the peak of a fit of a model that size, in the run's method and dtype
        engine = parse_options(args.engine_option, flag="--engine-option")
        limit = capped_fit_bytes(args.max_model_mb, engine.get("method", "mirror_descent"), engine.get("dtype"))
    with limited(limit):
        return _run(args)


def _run(args) -> int:
    """:func:`run` with the run's size limit in force."""
    t_start = time.perf_counter()
    say = (lambda *a: None) if args.quiet else (lambda msg: print(f"pgmjax run: {msg}", file=sys.stderr, flush=True))
    call, notes = check_arguments(args)
    outs = check_run_outputs(args)  # the last check: nothing private has been read or spent yet
    with outs:  # a failure from here on (an interrupt included) removes this run's outputs and temporary files
        return _run_checked(args, call, notes, outs, t_start, say)


#: The report's words for how the seed was chosen (``checkpoints.run_seed``); its value is never written.
SEED_SOURCES = {"given": "given by --seed (not recorded: it reproduces the noise)",
                "resumed": "the one kept with the checkpoint resumed (not recorded)",
                "drawn": "drawn from the operating system's entropy (not recorded)"}


def without_seed(argv) -> list[str]:
    """``argv`` with the value of ``--seed`` replaced (it reproduces the run's noise): what the report records.

    Example:
        >>> without_seed(["run", "--seed", "7", "--seed=8", "--quiet"])
        ['run', '--seed', '<not recorded>', '--seed=<not recorded>', '--quiet']
    """
    out, hide = [], False
    for a in argv:
        if hide:
            out.append("<not recorded>")
        elif a.startswith("--seed="):
            out.append("--seed=<not recorded>")
        else:
            out.append(a)
        hide = a == "--seed"
    return out


def _run_checked(args, call, notes, outs: OutputSet, t_start: float, say) -> int:
    """:func:`_run` once everything is checked: read, run the mechanism, stage the outputs, place them
    together (:meth:`~pgmjax.cli.outputs.OutputSet.commit`), print the summary."""
    t0 = time.perf_counter()
    data, schema, extra, workload, wl_label = load_inputs(args, say)
    public = load_public(args, schema, data.domain)
    if public is not None:
        call = (call[0], {**call[1], "public": public})
    seconds = {"load": time.perf_counter() - t0}
    say(
        # The exact record count is private under add/remove neighbours: only with --show-private.
        f"read {f'{len(data):,} records, ' if args.show_private else ''}{len(data.domain)} attributes "
        f"(domain {cells_text(data.domain.size())} cells) from {args.data}"
        + (f"; ignored columns {extra}" if extra else "")
    )
    for n in notes:
        say(f"note: {n}")
    import jax

    keys = dict(zip(("mechanism", "sample", "decode"), jax.random.split(jax.random.key(args.seed), 3)))
    t0 = time.perf_counter()
    result, spec = run_mechanism(args, data, workload, call, keys["mechanism"], say)
    preprocessing.check_neighbours(args, result)  # the preprocessing was charged under the mechanism's neighbours
    seconds["mechanism"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    synth = synthetic_records(args, result, keys["sample"])
    seconds["sampling"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    write_outputs(args, result, synth, schema, keys["decode"], outs)
    seconds["writing"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    # The evaluation reads the input (not private): computed only where it is shown or written.
    evaluated = workload is not None and (args.report is not None or args.show_private)
    evaluation = evaluate(workload, wl_label, data, synth, result) if evaluated else None
    seconds["evaluation"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    interval_entry = intervals.report_entry(args, result, workload, keys["mechanism"], quiet=args.quiet)
    if interval_entry is not None:
        seconds["intervals"] = time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - t_start  # the whole run, the intervals too
    # --html's raw-scale comparison (NOT private), computed before the JSON report so that its warnings are stored.
    raw = preprocessing.raw_comparison(args, synth, schema, keys["decode"]) if args.html is not None else None
    report = build_report(args, data, schema, extra, workload, result, spec, synth, evaluation, notes, seconds,
                          interval_entry, raw)
    if args.report is not None:
        try:
            outs.write_text("--report", intervals.compact_json(report) + "\n")
        except OSError as e:
            raise RunFailure(f"--report: could not write {args.report}: {e}") from e
    lines = summary_text(args, report, data, schema, workload, wl_label, result, synth, evaluation)
    if args.html is not None:
        raw = preprocessing.write_html(args, report, data, synth, workload, schema, keys["decode"], raw=raw, outs=outs)
        lines.append(f"  html report   {args.html} (computed from the input data: NOT private)")
        if raw is not None and args.show_private:  # read from the input without noise, like the errors
            lines += [f"  WARNING       {w} (NOT private)" for w in raw["warnings"]]
    if args.report:
        lines.append(f"  report        {args.report}")
    outs.commit()  # every output at once, each created exclusively unless --overwrite
    print("\n".join(lines))
    return 0


def check_arguments(args) -> tuple[tuple, list]:
    """The cheap checks, before any data is read: files, outputs, options, mechanism, the budget split.

    Returns:
        ``((registry entry, the front-end's keyword arguments), notes)``; sets ``args.split`` (and the
        mechanism's share of the budget in ``args.epsilon`` / ``args.delta``) when the schema is derived privately.
    """
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
    need_data(args)  # a file for the in-memory engine; CSV or Parquet (file, folder, glob) for polars / dask
    if not args.private_schema:
        need_file(args.domain or args.schema, "--domain" if args.domain else "--schema")
    need_parent(args.html, "--html")
    need_parent(args.out, "--out")
    need_parent(args.report, "--report")
    need_parent(args.save_model, "--save-model")
    options = parse_options(args.option)
    fit_options = parse_options(args.engine_option, flag="--engine-option")
    _, kwargs, first = front_end_call(args, options, fit_options)  # the mechanism, its options and the delta, before the split
    if args.private_schema:
        try:
            # The preprocessing is charged under the mechanism's neighbouring relation, so the two compose; the
            # mechanism's delta is the one it will use (its default where none is given), so the total counts it.
            name = mechanism_name(args.mechanism)
            args.split = budget_split.split_budget(name, args.epsilon, kwargs.get("delta"), args.preprocess_fraction,
                                                    bounded=budget_split.neighbouring(name, kwargs))
        except ValueError as e:
            raise UserError(str(e)) from None
        args.epsilon_total, args.delta_total = args.epsilon, args.delta
        args.epsilon, args.delta = args.split.epsilon, args.split.delta  # the mechanism's share
    entry, kwargs, notes = front_end_call(args, options, fit_options)
    args.constraints = schema_constraints_of(args, entry.name, options)
    if args.constraints:
        kwargs["constraints"] = args.constraints
    public_of(args, entry.name)
    checkpoints.check(args, entry.name)
    args.seed_source = checkpoints.run_seed(args)  # before anything is read: the preprocessing draws noise too
    return (entry, kwargs), (first if args.private_schema else notes)


def check_run_outputs(args) -> OutputSet:
    """Every output of the run and ``--records``, checked before anything private is read, computed or spent.

    Outputs (:func:`~pgmjax.cli.outputs.check_outputs`): none is an input or another output, none exists unless
    ``--overwrite``, every folder takes a new file; ``--records`` (:func:`~pgmjax.cli.outputs.check_records`):
    at most the maximum, and the ``--out`` table fits the free space of its folder (counted from the CSV's
    header: the columns written).

    Returns:
        The run's :class:`~pgmjax.cli.outputs.OutputSet`.

    Raises:
        UserError: exit 2, nothing run.
    """
    outs = check_outputs(
        {"--data": args.data, "--domain": args.domain, "--schema": args.schema, "--public": args.public,
         "--workload": args.workload if args.workload is not None and os.path.isfile(args.workload) else None},
        {"--out": args.out, "--report": args.report, "--save-model": args.save_model, "--html": args.html},
        args.overwrite,
    )
    # Every column of the header is written unless --ignore-extra-columns drops some (then at least one is).
    columns = 0 if args.out is None else 1 if args.ignore_extra_columns else len(data_header(args))
    check_records(args.records, columns, args.out)
    check_held_records(args)  # and the records the run holds in memory
    return outs


def load_inputs(args, say):
    """The table (integer-coded, raw with a public schema, or raw with a private schema) and the workload.

    Returns:
        ``(data, schema or None, ignored columns, workload or None, workload label)``.
    """
    if args.private_schema:
        import jax

        data, schema, _ = preprocessing.load_private(args, say, jax.random.fold_in(jax.random.key(args.seed), 7))
        extra = []
    elif args.schema is not None:
        data, schema, extra = load_raw_data(args, say)
    else:
        data, schema, extra = load_integer_data(args, say)
    workload, wl_label = parse_workload(args.workload, data.domain)
    try:
        intervals.check(args, workload)
    except ValueError as e:
        raise UserError(str(e)) from None
    return data, schema, extra, workload, wl_label


def run_mechanism(args, data, workload, call, key, say):
    """The front-end from the registry, with the progress bar; its errors mapped to exit codes.

    Returns:
        ``(MechanismResult, the registry's Mechanism entry)``.
    """
    entry, kwargs = call
    kwargs = dict(kwargs)
    checkpoint = checkpoints.option(args, entry.name)
    if checkpoint is not None:
        kwargs["checkpoint"] = checkpoint
        if checkpoint.save == "round":
            checkpoints.keep_seed(checkpoint, args.seed, args.seed_source)
    epsilon = kwargs.pop("epsilon")
    if entry.workload:
        kwargs["workload"] = workload
    elif workload is not None:
        say(f"note: {entry.name} does not take a workload: --workload is used for evaluation only")
    total = expected_iterations(entry, kwargs, data.domain)
    progress = Progress(not args.quiet, entry.name, total)
    kwargs = with_progress(entry, kwargs, progress.engine, progress.step)

    from ..mechanisms.checkpoint import RunInterrupted
    from ..privacy import PrivacyBudgetExceeded

    try:
        result = entry.function(data, epsilon, key=key, **kwargs)
    except RunInterrupted as e:
        progress.abandon()
        if e.held is not None:  # rounds were kept: the same command resumes them with the same seed
            checkpoints.keep_seed(checkpoint, args.seed, args.seed_source)
        raise checkpoints.interrupted(e) from None
    except PrivacyBudgetExceeded as e:
        raise RunFailure(f"{args.mechanism}: internal accounting error: {e}") from e
    except (ValueError, TypeError) as e:
        # Front-ends validate their input before touching the data: this is a bad argument or option.
        progress.abandon()
        if args.debug:
            raise
        raise UserError(f"{entry.name} rejected the input: {str(e).removeprefix(entry.name + ': ')}") from None
    except MemoryError as e:
        raise RunFailure(f"{args.mechanism}: out of memory; try a smaller model (e.g. --max-model-mb ...) or fewer attributes") from e
    finally:
        progress.close()
    checkpoints.finished(checkpoint, result.info, say)
    return result, entry


def check_held_records(args) -> None:
    """``--records`` the run holds (for the report and the evaluation) checked against the size limit before the
    input is read or any budget spent (:func:`pgmjax.model.sampling.check_held_records`, one column per column of
    ``--data``'s header, decoded where the data is raw; UserError, exit 2)."""
    from ..graph.size_limit import ModelTooLarge
    from ..model.sampling import check_held_records as check

    if args.records is not None:
        try:
            check(len(data_header(args)), args.records, "--records", decoded=args.domain is None)
        except ModelTooLarge as e:
            raise UserError(f"{e} (nothing was run)") from None


def synthetic_records(args, result, key):
    """The mechanism's synthetic data, or ``--records`` drawn from the model (post-processing: no privacy cost)."""
    synth = result.synthetic
    if synth is None or (args.records is not None and len(synth) != args.records):
        synth = result.model.synthetic_data(args.records, key)
    refusal = None if args.records is not None else guards.too_few_records(len(synth), args.epsilon)
    if refusal is not None:  # a tiny budget: refuse before anything is written
        raise RunFailure(refusal)
    return synth


def write_outputs(args, result, synth, schema, key, outs: OutputSet) -> None:
    """``--out`` (in the input CSV's column order; decoded to raw values when there is a schema) and ``--save-model``,
    each staged in ``outs`` (placed by its :meth:`~pgmjax.cli.outputs.OutputSet.commit`)."""
    if args.out is not None:
        header = data_header(args) or list(synth.domain.attributes)
        if schema is not None:
            frame = schema.decode(synth, key, columns=header)
        else:  # the input's column order, not the domain file's
            frame = synth.df[[c for c in header if c in synth.df.columns]]
        try:
            outs.write_csv("--out", frame)
        except OSError as e:
            raise RunFailure(f"--out: could not write {args.out}: {e}") from e
    if args.save_model is not None:
        try:
            outs.save_model("--save-model", result.model, schema=schema, report=result.report)
        except OSError as e:
            raise RunFailure(f"--save-model: could not write {args.save_model}: {e}") from e


def build_report(args, data, schema, extra, workload, result, spec, synth, evaluation, notes, seconds,
                 interval_entry=None, raw=None) -> dict:
    """The JSON report: input, privacy (budget, spend, ledger), model, outputs, evaluation and times (NOT private).

    Its ``warnings`` are the run's warnings as the summary prints them (:func:`preprocessing.report_warnings`):
    the private schema's range warnings, a schema read from the data, and with ``raw`` (``--html``'s raw-scale
    comparison) the columns whose synthetic range covers too little of the real one, marked ``(NOT private)``.
    Its ``not_private`` entry lists what was computed from the input without noise: the exact record count,
    the evaluation, the run's times and the mechanism's (``info.seconds``; they grow with the record count),
    a schema read from the data, and those marked warnings.
    """
    acc = result.accountant
    privacy = privacy_summary(acc, args.epsilon)
    privacy["epsilon_given"], privacy["delta_given"] = args.epsilon, args.delta
    pre_entry = preprocessing.report_entry(args, schema)
    if args.split is not None:
        privacy["epsilon_given"], privacy["delta_given"] = args.epsilon_total, args.delta_total
        privacy["mechanism_epsilon"], privacy["mechanism_delta"] = args.epsilon, args.delta
    ledger_kinds: dict[str, int] = {}
    for e in acc.ledger:
        ledger_kinds[e.mechanism] = ledger_kinds.get(e.mechanism, 0) + 1
    model = model_info(result.model)
    report = {
        "pgmjax_version": version(),
        "command": ["pgmjax", *without_seed(args.argv or [])],
        "mechanism": args.mechanism,
        # how the seed was chosen, never its value: it reproduces the run's noise (pgmjax.cli.checkpoints.run_seed)
        "seed": SEED_SOURCES[args.seed_source],
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
        "intervals": interval_entry,  # intervals.report_entry, computed (and timed) by run
        # Computed from the input directly (not differentially private): remove before publishing the report.
        # The run's times grow with the number of records (reading, counting marginals, evaluating), so they
        # reveal it roughly: useful to the data holder, listed as not private.
        "not_private": ["input.records", "evaluation", "seconds"],
        "seconds": seconds,
        "notes": notes,
        "original_error": result.original_error,
        # Only what is safe to publish (settings, noisy releases, selections): some info fields are
        # computed from the data without noise (see pgmjax.mechanisms.run_info.published).
        "info": jsonable(result.info.published_values(), max_items=1000),
        "info_omitted": sorted(result.info.private_names()),
        "ledger": jsonable(acc.records()),
        "plan": jsonable(result.plan.to_dict()) if result.plan is not None else None,
        "preprocessing": jsonable(pre_entry),
        "warnings": preprocessing.report_warnings(pre_entry, raw),
    }
    if getattr(args, "public", None) is not None:
        report["input"]["public"] = args.public
        report["public"] = [list(e.target) for e in acc.ledger if e.mechanism == "public"]  # what the release took, free
    if getattr(args, "constraints", ()):
        report["constraints"] = constraint_entry(args.constraints, data, synth)
        report["not_private"].append("constraints.input_violations")
    if "seconds" in report["info"]:  # the mechanism's own times: as data-dependent as the run's
        report["not_private"].append("info.seconds")
    if pre_entry is not None and not pre_entry["private"]:
        report["not_private"].append("schema (read from the data without noise)")
    if raw is not None and raw["warnings"]:
        report["not_private"].append("warnings marked (NOT private) (the raw-scale comparison of --html)")

    return report


def summary_text(args, report, data, schema, workload, wl_label, result, synth, evaluation) -> list[str]:
    """The printed summary: only privacy-safe numbers unless ``--show-private``."""
    privacy, model, seconds = report["privacy"], report["model"], report["seconds"]
    ledger_kinds, acc = report["ledger_by_mechanism"], result.accountant
    kinds = ", ".join(f"{v} {k}" for k, v in sorted(ledger_kinds.items()))
    lines = [
        f"pgmjax run: {args.mechanism} on {os.path.basename(args.data)}: "
        + (f"{len(data):,} records (private: shown by --show-private), " if args.show_private else "")
        + f"{len(data.domain)} attributes",
        f"  privacy       {privacy_line(privacy)}",
        f"  measurements  {plural(len(result.measurements), 'noisy measurement')}; ledger {plural(len(acc.ledger), 'entry', 'entries')} ({kinds})",
        f"  model         {plural(model['n_cliques'], 'clique')}, {model['cells']:,} cells ({model['size_mb']:.3g} MB as float64), "
        + (f"approximate oracle ({model['regions']} regions), " if "oracle" in model else f"treewidth {model['treewidth']}, ")
        + f"estimated total {model['total']:,.0f}",
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
        f"  time          {seconds['total']:.2f} s (load {seconds['load']:.2f}, mechanism {seconds['mechanism']:.2f}, "
        f"sampling {seconds['sampling']:.2f}, writing {seconds['writing']:.2f}, evaluation {seconds['evaluation']:.2f}"
        + (f", intervals {seconds['intervals']:.2f}" if "intervals" in seconds else "") + "); "
        "NOT private: it grows with the number of records"
    )
    if "public" in report:
        taken = report["public"]
        lines.append(f"  public        {plural(len(taken), 'marginal')} taken from {os.path.basename(args.public)} at no "
                     "privacy cost" + (f": {', '.join('x'.join(c) for c in taken[:6])}{', ...' if len(taken) > 6 else ''}"
                                       if taken else ""))
    if "constraints" in report:
        c = report["constraints"]
        broken = sum(c["synthetic_violations"])
        lines.append(f"  constraints   {plural(len(c['declared']), 'constraint')} from the schema; the synthetic records "
                     + (f"break them {broken:,} times" if broken else "break none")
                     + (f"; the input breaks them {sum(c['input_violations']):,} times (NOT private)" if args.show_private else ""))
    lines[2:2] = preprocessing.summary_lines(report["preprocessing"])
    return lines


def constraint_entry(constraints, data, synth) -> dict:
    """The report's ``constraints``: each constraint, and how many records of the synthetic table (a release) and of
    the input (NOT private: an exact count of private records) lie on its forbidden cells."""
    records = data.records
    return {"declared": [repr(c) for c in constraints],
            "synthetic_violations": [c.violations(synth.records, synth.domain) for c in constraints],
            "input_violations": [c.violations(records, data.domain) for c in constraints]}
