"""The progress bar of ``pgmjax run`` over the engine's iterations."""

from __future__ import annotations

import sys


class Progress:
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

