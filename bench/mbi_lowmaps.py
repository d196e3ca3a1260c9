"""Run ``bench/mbi_mst_aim.py`` with mbi's compiled programs freed every 64 marginal projections.

XLA:CPU keeps every compiled program mapped; mbi compiles one program per ``MarkovRandomField.project``
of a new clique, and MST's selection projects every attribute pair (1,128 on Loans, d = 48). The
process then reaches the kernel's limit on memory maps (``vm.max_map_count`` = 65,530 here) and LLVM
fails with "Cannot allocate memory". This wrapper calls ``jax.clear_caches()`` after every 64th
``project`` call: results are unchanged (programs are recompiled when needed), only memory maps are freed.

Usage: ``python bench/mbi_lowmaps.py bench/mbi_mst_aim.py ARGS...`` (or as ``--mbi-python`` through
``bench/mbi_lowmaps.sh``).
"""

import runpy
import sys

import jax
import mbi.markov_random_field as mrf

_project = mrf.MarkovRandomField.project
_calls = [0]


def project(self, attrs):
    _calls[0] += 1
    if _calls[0] % 64 == 0:
        jax.clear_caches()
    return _project(self, attrs)


mrf.MarkovRandomField.project = project
path = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(path, run_name="__main__")
