"""``pgmjax run --checkpoint DIR`` / ``--resume DIR``: keep a long run's rounds and resume them; what Ctrl-C does.

AIM and MWEM take a checkpoint (:mod:`pgmjax.mechanisms.checkpoint`). With ``--checkpoint DIR`` the rounds are
written to ``DIR`` after each one, and the same command run again resumes from the last round written (same
data, seed, budget and settings; a checkpoint of another run is refused, exit 2, naming what differs). Without
it, a run with ``--out OUT`` keeps its rounds only if interrupted: Ctrl-C writes them to ``OUT.checkpoint`` and
the same command run again resumes from there, then removes it. Either way Ctrl-C ends the run with exit code
130 and a message saying what was kept and how to resume. ``--resume DIR`` is ``--checkpoint DIR`` for a folder that
must already hold a checkpoint (refused, exit 2, where it holds none). The other mechanisms have no rounds to keep:
``--checkpoint`` is refused for them before anything is read.
"""

from __future__ import annotations

import os
import shutil

from ..mechanisms import registry
from ..mechanisms.checkpoint import STATE_FILE, Checkpoint, RunInterrupted
from ..mechanisms.run_info import ResumableRunInfo
from .arguments import parse_options, secret_seed
from .errors import UserError

#: The folder of a run's automatic checkpoint (Ctrl-C without ``--checkpoint``), next to ``--out``.
AUTO_SUFFIX = ".checkpoint"

#: The file, in a run's checkpoint folder, that keeps a drawn seed for the same command to resume with.
SEED_FILE = "cli-seed"


def takes_checkpoint(name: str) -> bool:
    """Whether the front-end ``name`` has rounds to checkpoint (a ``checkpoint`` option)."""
    return "checkpoint" in registry.own_options(name)


def check(args, name: str) -> None:
    """Refuse ``--checkpoint`` for a front-end without rounds, or naming something that is not a folder, and
    ``--option checkpoint=``, before any data is read."""
    if any(o.partition("=")[0].strip() == "checkpoint" for o in getattr(args, "option", None) or []):
        raise UserError("give the checkpoint folder as --checkpoint DIR, not --option checkpoint=")
    resume = getattr(args, "resume", None)
    if resume is not None:  # --checkpoint DIR that must hold a checkpoint already
        if getattr(args, "checkpoint", None) not in (None, resume):
            raise UserError(f"--resume {resume} and --checkpoint {args.checkpoint}: give one folder")
        if not os.path.isfile(os.path.join(resume, STATE_FILE)):
            raise UserError(f"--resume: {resume} holds no checkpoint to resume (nothing was run)")
        args.checkpoint = resume
    path = getattr(args, "checkpoint", None)
    if path is None:
        return
    if not takes_checkpoint(name):
        with_rounds = ", ".join(n for n in registry.MECHANISMS if takes_checkpoint(n))
        raise UserError(f"--checkpoint: {name} has no rounds to keep; it applies to {with_rounds}")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"--checkpoint: {path} exists and is not a folder")


def option(args, name: str) -> Checkpoint | None:
    """The front-end's ``checkpoint`` option: ``--checkpoint DIR`` (written every round), else ``OUT.checkpoint``
    written only on Ctrl-C (where there is ``--out`` and the fits are exact: a checkpoint keeps exact models only),
    else None."""
    if not takes_checkpoint(name):
        return None
    if getattr(args, "checkpoint", None) is not None:
        return Checkpoint(args.checkpoint, save="round")
    if args.out is not None and _exact_oracle(args):  # a checkpoint keeps exact models only
        return Checkpoint(args.out + AUTO_SUFFIX, save="interrupt")
    return None


def _exact_oracle(args) -> bool:
    """Whether the run's fits use the exact oracle (``--oracle``, or ``--engine-option oracle=...``)."""
    if getattr(args, "oracle", None) not in (None, "exact"):
        return False
    return parse_options(getattr(args, "engine_option", None), flag="--engine-option").get("oracle", "exact") == "exact"


def run_seed(args) -> str:
    """Resolve ``args.seed``: as given (``--seed``), else the one kept with this run's checkpoint (so the same
    command resumes with the same noise), else drawn from the operating system's entropy (:func:`~pgmjax.cli.arguments.secret_seed`).

    A seed reproduces the run's noise: whoever knows it and the data's noisy answers can take the noise off.
    So no output records it (the report says only how it was chosen), and a drawn one is kept only in the run's
    checkpoint folder (mode 0700, the file 0600), beside the noisy answers that folder already holds
    (:func:`keep_seed`).

    Returns:
        How: ``"given"``, ``"resumed"`` or ``"drawn"``.
    """
    if args.seed is not None:
        return "given"
    out = getattr(args, "out", None)
    for folder in (getattr(args, "checkpoint", None), None if out is None else out + AUTO_SUFFIX):
        path = None if folder is None else os.path.join(folder, SEED_FILE)
        if path is not None and os.path.isfile(path):
            with open(path) as f:
                text = f.read().strip()
            if not text.isdigit() or not 0 <= int(text) < 2**63:
                raise UserError(f"{path}: not a seed this command wrote (expected a whole number below 2^63)")
            args.seed = int(text)
            return "resumed"
    args.seed = secret_seed(None)
    return "drawn"


def keep_seed(checkpoint: Checkpoint | None, seed: int, how: str) -> None:
    """Keep a drawn seed in ``checkpoint``'s folder (created with mode 0700 where absent; the file 0600, never
    replaced), for :func:`run_seed` to find when the same command runs again. A given seed is not kept: the
    command gives it again."""
    if checkpoint is None or how == "given":
        return
    os.makedirs(checkpoint.path, mode=0o700, exist_ok=True)
    try:
        fd = os.open(os.path.join(checkpoint.path, SEED_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(f"{seed}\n")


def finished(checkpoint: Checkpoint | None, info, say) -> None:
    """After a run completed: say whether it resumed (``info``: the result's), and remove an automatic checkpoint
    (resumed from, or never written); one the user named is kept (run again, the same command fits and samples
    from it without spending anything)."""
    resumed_from = info.resumed_from if isinstance(info, ResumableRunInfo) else None
    if checkpoint is not None and resumed_from is not None:
        say(f"resumed from checkpoint {checkpoint.path} after round {resumed_from}: those rounds were not "
            "measured again")
    if checkpoint is None or checkpoint.save != "interrupt" or not os.path.isdir(checkpoint.path):
        return
    # only what a checkpoint writes (its state, round folders, a write a second Ctrl-C cut short): nothing else
    if all(f.startswith((STATE_FILE, "round-", "." + STATE_FILE, SEED_FILE)) for f in os.listdir(checkpoint.path)):
        shutil.rmtree(checkpoint.path, ignore_errors=True)


def interrupted(e: RunInterrupted) -> RunInterrupted:
    """The command line's message for Ctrl-C during the rounds: what was kept and that the same command resumes."""
    if e.held is None:
        return RunInterrupted("before the first round was done: nothing was kept" if e.checkpoint is not None else
                              "(nothing was kept: --checkpoint DIR, or --out, keeps the rounds for the same command "
                              "to resume)", e.checkpoint)
    return RunInterrupted(f"after round {e.round}: {e.held}; run the same command again to resume from it (the rest of "
                          "the budget is spent then, not again; a fresh run would spend the whole budget again)",
                          e.checkpoint, e.round, e.held)
