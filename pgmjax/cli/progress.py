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


def expected_iterations(spec, kwargs: dict, params: dict, domain) -> int | None:
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
