"""Run ``bench/mbi_mst_aim.py`` with mbi's compiled programs freed every 64 marginal projections.

XLA:CPU keeps every compiled program mapped; mbi compiles one program per ``MarkovRandomField.project``
of a new clique, and MST's selection projects every attribute pair (1,128 on Loans, d = 48). The
process then reaches the kernel's limit on memory maps (``vm.max_map_count`` = 65,530 here) and LLVM
fails with "Cannot allocate memory". This wrapper calls ``jax.clear_caches()`` after every 64th
``project`` call: results are unchanged (programs are recompiled when needed), only memory maps are freed.

Usage: ``python bench/mbi_lowmaps.py bench/mbi_mst_aim.py ARGS...`` (or as ``--mbi-python`` through
``bench/mbi_lowmaps.sh``). With ``MBI_LOWMAPS_LOG=path`` set, a line per 64 projections and per
``MirrorDescent.estimate`` (start, end, iterations, seconds) is appended to that file, to see where a long
run is (the driver captures the child's output until it ends).
"""

import os
import runpy
import sys
import time

import jax
import mbi.estimation as est
import mbi.markov_random_field as mrf

_project = mrf.MarkovRandomField.project
_calls = [0]
_log_path = os.environ.get("MBI_LOWMAPS_LOG")
_t0 = time.perf_counter()


def log(msg: str) -> None:
    if _log_path:
        with open(_log_path, "a") as fh:
            fh.write(f"{time.strftime('%H:%M:%S', time.gmtime())} +{time.perf_counter() - _t0:.0f}s pid {os.getpid()} "
                     f"{msg}\n")


def project(self, attrs):
    _calls[0] += 1
    if _calls[0] % 64 == 0:
        jax.clear_caches()
        log(f"{_calls[0]} projections")
    return _project(self, attrs)


mrf.MarkovRandomField.project = project
_estimate = est.MirrorDescent.estimate


def estimate(self, *args, **kwargs):
    t = time.perf_counter()
    log(f"MirrorDescent.estimate start, iters={kwargs.get('iters')}")
    out = _estimate(self, *args, **kwargs)
    log(f"MirrorDescent.estimate end after {time.perf_counter() - t:.0f}s")
    return out


est.MirrorDescent.estimate = estimate
log(f"start {' '.join(sys.argv[1:])}")
path = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(path, run_name="__main__")
