"""The front-ends' progress reporter (MST's steps, AIM's rounds): a tqdm bar or a callback, with time left.

One class for every front-end and the command line (:class:`pgmjax.cli.progress.Progress` receives the
same dicts through ``progress=callable``). Each :meth:`Progress.step` adds to the front-end's dict:

* ``done``: steps done so far; ``expected``: the steps expected in all (a front-end whose count is not
  known in advance, AIM, re-estimates it at every step: :func:`pgmjax.mechanisms.aim`);
* ``elapsed``: seconds since the reporter started; ``eta``: seconds left, the recent steps' mean duration
  (:data:`RECENT` steps, the first step's set-up left out once there are others) times the steps left. Recent
  steps, not ``elapsed / done``: AIM's rounds grow slower as its model grows and its expected count falls as
  the budget runs out, so a whole-run average stays too low and the time left stuck; from recent steps it
  tracks the rounds left and reaches 0 at the last step.

The dicts are progress reports, not results: the mechanism's ``info["log"]`` does not hold these times
(they grow with the number of records: not private).
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: How many recent steps' durations give the time per step of the time left.
RECENT = 5


def check_progress(progress, where: str):
    """``progress`` if it is True, False, None or a callable taking a dict (what :class:`Progress` takes), else a
    TypeError naming ``where``: checked where a front-end's options are made, before any bar is opened.

    Example:
        >>> check_progress(print, "aim") is print
        True
        >>> check_progress("yes", "mst")
        Traceback (most recent call last):
        ...
        TypeError: mst: progress must be True, False or a callable taking a dict, got 'yes'
    """
    if progress is None or progress is True or progress is False or callable(progress):
        return progress
    raise TypeError(f"{where}: progress must be True, False or a callable taking a dict, got {progress!r}")


class Progress:
    """``progress=True``: a tqdm bar (steps done out of the expected, elapsed and remaining time); a callable:
    called with a dict per step; False/None: nothing.

    Args:
        progress: True, False/None, or a callable taking a dict.
        total: the steps expected (re-estimated by :meth:`step`'s ``total``).
        desc: the bar's label.
        where: the front-end's name, for errors.
        unit: the bar's unit (``"step"``, ``"round"``).
        clock: the seconds clock (default :func:`time.perf_counter`; a test passes its own).

    Example:
        >>> seen = []
        >>> bar = Progress(seen.append, 4, "AIM", "aim", unit="round")
        >>> bar.step({"round": 1}, total=5)
        >>> seen[0]["done"], seen[0]["expected"], seen[0]["eta"] is not None
        (1, 5, True)
    """

    def __init__(self, progress: bool | Callable[[dict], object] | None, total: int, desc: str, where: str,
                 unit: str = "step", *, clock: Callable[[], float] = time.perf_counter):
        check_progress(progress, where)
        self.callback = None
        self.bar = None
        self.clock = clock
        self.total, self.done, self.start = total, 0, clock()
        self.times: list[float] = []  # the clock at each step
        if progress is None or progress is False:
            return
        if progress is True:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit)
        else:
            self.callback = progress

    def step(self, info: dict, total: int | None = None) -> None:
        """One step done; ``total``: the re-estimated number of steps in all (where it is not fixed)."""
        self.done += 1
        if total is not None:
            self.total = max(int(total), self.done)
        now = self.clock()
        self.times.append(now)
        elapsed = now - self.start
        eta = self.per_step() * max(0, self.total - self.done)
        if self.bar is not None:
            if total is not None:
                self.bar.total = self.total  # tqdm's rate then gives the remaining time of the new total
            self.bar.update(1)
            label = info.get("stage") or info.get("clique")
            if label is not None:
                self.bar.set_postfix_str(str(label), refresh=True)
        if self.callback is not None:
            self.callback({**info, "done": self.done, "expected": self.total, "elapsed": elapsed, "eta": eta})

    def resume(self, done: int) -> None:
        """Count on from ``done`` steps an earlier process made (a resumed run); the time left is timed on this
        process's steps."""
        self.done = int(done)
        self.total = max(self.total, self.done)
        if self.bar is not None:
            self.bar.total, self.bar.n = self.total, self.done
            self.bar.refresh()

    def per_step(self) -> float:
        """Seconds per step from the last :data:`RECENT` steps (the first, which carries the set-up before the
        steps, only while it is the only one)."""
        marks = [self.start, *self.times]
        durations = [b - a for a, b in zip(marks, marks[1:])]
        recent = durations[1:][-RECENT:] or durations
        return sum(recent) / len(recent)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
