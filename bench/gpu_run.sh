#!/usr/bin/env bash
# python -m bench gpu on a GPU machine with no network (bench/GPU.md): pgmjax's missing dependencies and mbi from the
# carried wheels in .whl/ into /tmp/site, the shared data from .whl/data, pgmjax from this checkout.
#   bash bench/gpu_run.sh OUT_DIR [gpu.py options]   (PGMJAX_COMMIT=<hash> names the commit where the machine has no git)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bash bench/gpu_run.sh OUT_DIR}
# .whl/tests/: hypothesis, pytest-xdist, execnet, sortedcontainers, for the invariant suite's section
python3 -m pip install --quiet --no-index --no-deps --upgrade --target /tmp/site .whl/*.whl $(ls .whl/tests/*.whl 2>/dev/null) ||
  python3 -c "import glob, zipfile; [zipfile.ZipFile(w).extractall('/tmp/site') for w in glob.glob('.whl/*.whl') + glob.glob('.whl/tests/*.whl')]"  # no pip
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ -d .whl/data ] && [ -z "${PGMJAX_DATA:-}" ]; then export PGMJAX_DATA=$PWD/.whl/data; fi
mkdir -p "$OUT"
python3 -m pgmjax info | tee "$OUT/info.txt"
python3 -m bench gpu gpu "$OUT" "${@:2}"
