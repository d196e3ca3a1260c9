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
from .errors import UserError

#: The folder of a run's automatic checkpoint (Ctrl-C without ``--checkpoint``), next to ``--out``.
AUTO_SUFFIX = ".checkpoint"


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
    written only on Ctrl-C (where there is ``--out``), else None."""
    if not takes_checkpoint(name):
        return None
    if getattr(args, "checkpoint", None) is not None:
        return Checkpoint(args.checkpoint, save="round")
    if args.out is not None:
        return Checkpoint(args.out + AUTO_SUFFIX, save="interrupt")
    return None


def finished(checkpoint: Checkpoint | None, info: dict, say) -> None:
    """After a run completed: say whether it resumed (``info``: the result's), and remove an automatic checkpoint
    (resumed from, or never written); one the user named is kept (run again, the same command fits and samples
    from it without spending anything)."""
    if checkpoint is not None and info.get("resumed_from") is not None:
        say(f"resumed from checkpoint {checkpoint.path} after round {info['resumed_from']}: those rounds were not "
            "measured again")
    if checkpoint is None or checkpoint.save != "interrupt" or not os.path.isdir(checkpoint.path):
        return
    # only what a checkpoint writes (its state, round folders, a write a second Ctrl-C cut short): nothing else
    if all(f.startswith((STATE_FILE, "round-", "." + STATE_FILE)) for f in os.listdir(checkpoint.path)):
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
