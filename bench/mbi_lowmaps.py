"""Run ``bench.mbi_mst_aim`` with mbi's compiled programs freed every 64 marginal projections.

XLA:CPU keeps every compiled program mapped; mbi compiles one program per ``MarkovRandomField.project``
of a new clique, and MST's selection projects every attribute pair (1,128 on Loans, d = 48). The
process then reaches the kernel's limit on memory maps (``vm.max_map_count`` = 65,530 here) and LLVM
fails with "Cannot allocate memory". This wrapper calls ``jax.clear_caches()`` after every 64th
``project`` call: results are unchanged (programs are recompiled when needed), only memory maps are freed.

Usage, from the repository root: ``python -m bench.mbi_lowmaps -m bench.mbi_mst_aim ARGS...`` (or as
``--mbi-python`` of ``bench.mst_aim`` through ``bench/mbi_lowmaps.sh``, which the driver calls as an interpreter:
``bench/mbi_lowmaps.sh -m bench.mbi_mst_aim ARGS...``). With ``MBI_LOWMAPS_LOG=path`` set, a line per 64 projections and per
``MirrorDescent.estimate`` (start, end, iterations, seconds) is appended to that file, to see where a long
run is (the driver captures the child's output until it ends).
"""

import os
import runpy
import sys
import time

_calls = [0]
_log_path = os.environ.get("MBI_LOWMAPS_LOG")
_t0 = time.perf_counter()


def log(msg: str) -> None:
    if _log_path:
        with open(_log_path, "a") as fh:
            fh.write(f"{time.strftime('%H:%M:%S', time.gmtime())} +{time.perf_counter() - _t0:.0f}s pid {os.getpid()} "
                     f"{msg}\n")


def patch_mbi() -> None:
    """Wrap ``MarkovRandomField.project`` (caches cleared every 64th call) and ``MirrorDescent.estimate``
    (logged)."""
    import jax
    import mbi.estimation as est
    import mbi.markov_random_field as mrf

    _project = mrf.MarkovRandomField.project
    _estimate = est.MirrorDescent.estimate

    def project(self, attrs):
        _calls[0] += 1
        if _calls[0] % 64 == 0:
            jax.clear_caches()
            log(f"{_calls[0]} projections")
        return _project(self, attrs)

    def estimate(self, *args, **kwargs):
        t = time.perf_counter()
        log(f"MirrorDescent.estimate start, iters={kwargs.get('iters')}")
        out = _estimate(self, *args, **kwargs)
        log(f"MirrorDescent.estimate end after {time.perf_counter() - t:.0f}s")
        return out

    mrf.MarkovRandomField.project = project
    est.MirrorDescent.estimate = estimate


def main(argv=None) -> None:
    """``[-m] MODULE ARGS...``: run the module (e.g. ``bench.mbi_mst_aim``) as ``__main__`` with mbi patched."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["-m"]:
        argv = argv[1:]
    if not argv:
        raise SystemExit("usage: python -m bench.mbi_lowmaps [-m] MODULE ARGS...")
    patch_mbi()
    log(f"start {' '.join(argv)}")
    sys.argv = argv
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
