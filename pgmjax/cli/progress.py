"""The progress bar of ``pgmjax run`` over the engine's iterations."""

from __future__ import annotations

import sys

from .tempfiles import raise_if_stopped


class Progress:
    """A tqdm bar on stderr over the engine's iterations, across every fit a mechanism makes.

    The engine calls :meth:`engine` after each compiled chunk (``pgmjax.estimate``'s callback); an
    iteration count that does not grow means a new fit (the next round) has started. A front-end whose
    fits are not known in advance (AIM) reports its expected rounds to :meth:`step`
    (:class:`pgmjax.mechanisms.progress.Progress`): the bar's total becomes the iterations per fit so far
    times the fits expected, so tqdm's remaining time is an estimate, and the label shows the rounds done
    out of the expected, elapsed and time left.
    """

    def __init__(self, enabled: bool, desc: str, total: int | None):
        from tqdm.auto import tqdm

        self.name = desc
        self.bar = tqdm(total=total, desc=desc, unit="it", file=sys.stderr, disable=not enabled, dynamic_ncols=True)
        self.fits = 0
        self.last = 0

    def step(self, info: dict):
        """A front-end's per-round / per-step report (AIM: the round's log entry; MST: stage, step, steps)."""
        raise_if_stopped()  # a SIGTERM or Ctrl-C whose exception was dropped stops the run here
        if "round" in info:
            where = f"round {info['round']}" + (f"/~{info['expected']}" if "expected" in info else "")
            if info.get("eta") is not None:  # AIM: the rounds' own clock (the bar counts engine iterations)
                where += f" ({_duration(info['elapsed'])} elapsed, ~{_duration(info['eta'])} left)"
            if "expected" in info and self.fits:  # one fit per round, one before and one after: the bar's total
                self.bar.total = max(self.bar.n, int(self.bar.n / self.fits * (int(info["expected"]) + 2)))
        elif "stage" in info:
            where = str(info["stage"]) + (f" {info['step']}/{info['steps']}" if "step" in info and "steps" in info else "")
        else:
            return None
        self.bar.set_description_str(f"{self.name} {where}", refresh=False)
        return None

    def engine(self, info: dict):
        raise_if_stopped()
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


def _duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
